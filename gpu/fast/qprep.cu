/* qprep.cu: the kernels before the attention: k_amax, the dynamic Q scale's max |q| (both
 * vendors), and on NVIDIA k_qprep, Q's fp16 operand codes once per element (the AMD variant's
 * k_qprep is mfma.cu's). */
#include "fast_host.cuh"
#if !MLR_FAST_AMD
#include "fast_sm90.cuh"
#endif

namespace mlr_fast {
namespace {

__global__ void __launch_bounds__(AMAX_THREADS) k_amax(fparams p, int64_t n) {
  float amax = 0.0f; /* NaN is skipped by the comparison, as in the emulator */
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float a = fabsf(mlr_bits_f32((uint32_t)p.q[i] << 16));
    if (a > amax) amax = a;
  }
  for (int m = 16; m; m >>= 1) amax = fmaxf(amax, MLR_SHFL_XOR(amax, m));
  if ((threadIdx.x & 31) == 0)
    atomicMax(p.amax, mlr_f32_bits(amax)); /* non-negative floats order as their bits */
}

#if !MLR_FAST_AMD
/* Q's fp16 operand codes, once per element (not once per split's block): 8 elements a thread; the
 * clamp's count added once a warp */
__global__ void __launch_bounds__(QPREP_THREADS) k_qprep(fparams p, int64_t n8) {
  griddep_wait(); /* the dynamic scale's amax (k_amax) */
  const float qs = q_scale(p);
  int clipped = 0;
  const int64_t i = blockIdx.x * (int64_t)QPREP_THREADS + threadIdx.x;
  if (i < n8) {
    const uint4 r = *(const uint4 *)(p.q + 8 * i);
    uint4 w;
    w.x = q_operand(p, r.x & 0xFFFFu, qs, &clipped) | q_operand(p, r.x >> 16, qs, &clipped) << 16;
    w.y = q_operand(p, r.y & 0xFFFFu, qs, &clipped) | q_operand(p, r.y >> 16, qs, &clipped) << 16;
    w.z = q_operand(p, r.z & 0xFFFFu, qs, &clipped) | q_operand(p, r.z >> 16, qs, &clipped) << 16;
    w.w = q_operand(p, r.w & 0xFFFFu, qs, &clipped) | q_operand(p, r.w >> 16, qs, &clipped) << 16;
    *(uint4 *)(p.qop + 8 * i) = w;
  }
  add_clipped(p, clipped, true);
}
#endif

} // namespace

hipError_t launch_amax(const fparams &p, int64_t n) {
  k_amax<<<AMAX_BLOCKS, AMAX_THREADS>>>(p, n);
  return hipGetLastError();
}

#if !MLR_FAST_AMD
hipError_t launch_qprep(const fparams &p, int64_t n8) {
  k_qprep<<<(unsigned)((n8 + QPREP_THREADS - 1) / QPREP_THREADS), QPREP_THREADS>>>(p, n8);
  return hipGetLastError();
}
#endif

} // namespace mlr_fast
