// gpu/fast/fast_cvt.h's hardware conversions, checked exhaustively against the generic encoders
// on the GPU (the encoders are MLR_HD: the code the CPU runs):
//   mlr__out_bf16x2 (the output's bf16 codes) against mlr__emu_out_code(x, bf16) on all 2^32
//     binary32 inputs, both halves;
//   mlr__bf16x2_f16x2 (bf16 KV and bf16 Q as fp16 operands) against mlr__emu_to_operand(x, fp16)
//     on all 2^16 bf16 codes (a NaN must stay a NaN);
//   mlr__q_static_e4m3x2 (e4m3 Q with a static scale, as fp16 operands: its e4m3 codes,
//     mlr__q_static_e4m3x2_codes, which the wgmma recipe takes as they are, widened exactly)
//     against mlr__emu_q_code(.., s, E4M3, 0, ..) then decoded, on all 2^16 bf16 codes for the
//     seeds' scale fp32(6/448) and scales from 2^-20 to 2^20 with random significands (values and
//     the clamp's count; NaN as NaN), for each scale where the host's exhaustive check
//     mlr__q_recip_fits passes (the plan's test: the kernels then quantize by the reciprocal,
//     mlr__q_div_recip; the others are counted and left to k_qprep's division);
//   mlr__f16x2_e4m3x2 (the wgmma recipe's Q codes from k_qprep's fp16 operands, the dynamic policy)
//   on all 2^16 pairs of e4m3
//     codes given as fp16 codes of their values: the same values back (NaN as NaN);
//   mlr__div_by (fast_div.h: the outputs' n / d from r = 1 / d) against the division n / d, bit for
//     bit, on 2^32 pairs: every one of the 2^23 significands of d (exponents 0 to 31 in turn) with
//     512 numerators each, random over mlr__div_n_ok's range, every fourth one made so that n / d
//     lies next to a midpoint between two binary32 numbers (the hard case for rounding), and each
//     d with the range's ends (2^-64, the largest n below 2^64, their negations, +0 and -0).
// Prints the counts; exits 1 on any difference. Build: nvcc -arch=sm_90 -fmad=false -ftz=false
// -prec-div=true (scripts/gpu_run.sh, step fast).
#include "gpu/hip_compat.h"

#include <stdint.h>
#include <stdio.h>

#include "gpu/fast/fast_cvt.h"
#include "gpu/fast/fast_div.h"
#include "gpu/probes/div_pairs.h"

enum { NSCALE = 64 };

__device__ void bad_at(unsigned long long *bad, unsigned long long *first, unsigned long long k) {
  atomicAdd(bad, 1ull);
  atomicMin(first, k);
}

__global__ void out_probe(unsigned long long *bad, unsigned long long *first) {
  for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < (1ull << 32);
       k += (uint64_t)gridDim.x * blockDim.x) {
    const float x = mlr_bits_f32((uint32_t)k), y = mlr_bits_f32((uint32_t)k ^ 0x80000000u);
    const uint32_t d = mlr__out_bf16x2(x, y);
    if ((d & 0xFFFFu) != mlr__emu_out_code(x, MLR_OUT_BF16) ||
        (d >> 16) != mlr__emu_out_code(y, MLR_OUT_BF16))
      bad_at(bad, first, k);
  }
}

__device__ int same_value(float got, float want) {
  return isnan(want) ? isnan(got) : mlr_f32_bits(got) == mlr_f32_bits(want);
}

__global__ void operand_probe(const float *scales, const float *recips, unsigned long long *bad,
                              unsigned long long *first) {
  const uint32_t c =
      blockIdx.x * blockDim.x + threadIdx.x; /* 2^16 threads: bf16 code c, paired with c ^ 0x8000 */
  const uint32_t pair = c | (c ^ 0x8000u) << 16;
  const uint32_t h = mlr__bf16x2_f16x2(pair);
  for (int k = 0; k < 2; k++) {
    const float x = mlr_bits_f32((pair >> 16 * k) << 16);
    if (!same_value(mlr_decode(MLR_FMT_FP16, h >> 16 * k & 0xFFFFu),
                    mlr__emu_to_operand(x, MLR_OP_FP16)))
      bad_at(bad, first, c);
  }
  for (int si = 0; si < NSCALE; si++) { /* the scales whose reciprocal fits */
    const float sc = scales[si], r = recips[si];
    if (r == 0.0f) continue;
    int clipped = 0, want_clipped = 0;
    const uint32_t q = mlr__q_static_e4m3x2(pair, sc, r, &clipped);
    for (int k = 0; k < 2; k++) {
      int cl;
      const uint8_t code = mlr__emu_q_code((uint16_t)(pair >> 16 * k), sc, MLR_FMT_E4M3, 0, &cl);
      want_clipped += cl;
      if (!same_value(mlr_decode(MLR_FMT_FP16, q >> 16 * k & 0xFFFFu),
                      mlr_decode(MLR_FMT_E4M3, code)))
        bad_at(bad + 1, first + 1, (unsigned long long)si << 16 | c);
    }
    if (clipped != want_clipped) bad_at(bad + 1, first + 1, (unsigned long long)si << 16 | c);
  }
  /* e4m3 codes c & 0xFF, c >> 8 as fp16 operands (exact: cvt.rn.f16x2.f32 of their values), back */
  const float lo = mlr_decode(MLR_FMT_E4M3, c & 0xFFu),
              hi = mlr_decode(MLR_FMT_E4M3, c >> 8 & 0xFFu);
  const uint32_t e = mlr__f16x2_e4m3x2(mlr__f16x2(lo, hi));
  if (e >> 16 || !same_value(mlr_decode(MLR_FMT_E4M3, e & 0xFFu), lo) ||
      !same_value(mlr_decode(MLR_FMT_E4M3, e >> 8 & 0xFFu), hi))
    bad_at(bad + 2, first + 2, c);
}

__global__ void div_probe(unsigned long long *bad, unsigned long long *first,
                          unsigned long long *tested) {
  const float ends[6] = {0x1p-64f, 0x1.fffffep63f, -0x1p-64f, -0x1.fffffep63f, 0.0f, -0.0f};
  unsigned long long n_tested = 0;
  for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < (1ull << 32);
       k += (uint64_t)gridDim.x * blockDim.x) {
    const uint32_t si = (uint32_t)(k >> 9),
                   j = (uint32_t)k & 511u; /* d's significand, the numerator */
    const float d = mlr__div_probe_d(si), r = 1.0f / d;
    for (int u = 0; u < (j == 0 ? 7 : 1); u++) {
      const float n = u == 0 ? mlr__div_probe_n(si, j, d) : ends[u - 1];
      if (!mlr__div_d_ok(d) || !mlr__div_n_ok(n)) {
        bad_at(bad, first, k); /* the probe's own pairs must be in the range */
        continue;
      }
      const float got = mlr__div_by(n, d, r), want = n / d;
      n_tested++;
      if (mlr_f32_bits(got) != mlr_f32_bits(want)) bad_at(bad, first, k);
    }
  }
  atomicAdd(tested, n_tested);
}

int main(void) {
  float hs[NSCALE], hr[NSCALE], *ds;
  hs[0] = 6.0f / 448.0f; /* the seeds' static scale: absmax 6 */
  uint32_t z = 0x9E3779B9u;
  for (int k = 1; k < NSCALE; k++) { /* 2^e with a random significand, e from -20 to 20 */
    z = z * 1664525u + 1013904223u;
    hs[k] = mlr_bits_f32((uint32_t)(127 - 20 + (k * 41) / NSCALE) << 23 | (z >> 9));
  }
  int nfit = 0;
  for (int k = 0; k < NSCALE; k++) {
    if (!mlr__q_recip_fits(hs[k], &hr[k])) hr[k] = 0.0f;
    nfit += hr[k] != 0.0f;
  }
  unsigned long long *d, h[8], hd[3];
  MLR_GPU_CHECK(hipMalloc((void **)&ds, sizeof hs + sizeof hr));
  MLR_GPU_CHECK(hipMemcpy(ds, hs, sizeof hs, hipMemcpyHostToDevice));
  MLR_GPU_CHECK(hipMemcpy(ds + NSCALE, hr, sizeof hr, hipMemcpyHostToDevice));
  MLR_GPU_CHECK(hipMalloc((void **)&d, 8 * sizeof *d));
  MLR_GPU_CHECK(hipMemset(d, 0, 4 * sizeof *d));
  MLR_GPU_CHECK(hipMemset(d + 4, 0xFF, 4 * sizeof *d));
  out_probe<<<132 * 16, 256>>>(d, d + 4);
  operand_probe<<<256, 256>>>(ds, ds + NSCALE, d + 1, d + 5);
  MLR_GPU_CHECK(hipGetLastError());
  MLR_GPU_CHECK(hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost));
  unsigned long long *dd;
  MLR_GPU_CHECK(hipMalloc((void **)&dd, sizeof hd));
  MLR_GPU_CHECK(hipMemset(dd, 0, sizeof hd));
  MLR_GPU_CHECK(hipMemset(dd + 1, 0xFF, sizeof *dd));
  div_probe<<<132 * 16, 256>>>(dd, dd + 1, dd + 2);
  MLR_GPU_CHECK(hipGetLastError());
  MLR_GPU_CHECK(hipMemcpy(hd, dd, sizeof hd, hipMemcpyDeviceToHost));
  printf("mlr__out_bf16x2 (cvt.rn.bf16x2.f32) vs mlr__emu_out_code(bf16), all 2^32 binary32 (and "
         "their negations): %llu differ",
         h[0]);
  if (h[0]) printf(" (first 0x%08llx)", h[4]);
  printf("\nmlr__bf16x2_f16x2 vs mlr__emu_to_operand(fp16), all 2^16 bf16 codes: %llu differ",
         h[1]);
  if (h[1]) printf(" (first 0x%04llx)", h[5]);
  printf("\nmlr__q_static_e4m3x2 (by the reciprocal) vs mlr__emu_q_code(e4m3, static), all 2^16 "
         "bf16 codes x the %d of %d scales "
         "whose reciprocal fits (the seeds' %s): %llu differ",
         nfit, NSCALE, hr[0] != 0.0f ? "among them" : "not among them", h[2]);
  if (h[2]) printf(" (first scale %llu code 0x%04llx)", h[6] >> 16, h[6] & 0xFFFF);
  printf("\nmlr__f16x2_e4m3x2 (cvt.rn.satfinite.e4m3x2.f16x2) of e4m3 values as fp16, all 2^16 "
         "pairs of e4m3 codes: %llu differ",
         h[3]);
  if (h[3]) printf(" (first 0x%04llx)", h[7]);
  printf("\n");
  printf("mlr__div_by (n / d from r = 1 / d) vs the division n / d, %llu pairs (every significand "
         "of d, 512 numerators each "
         "and the range's ends): %llu differ",
         hd[2], hd[0]);
  if (hd[0])
    printf(" (first pair %llu: d's significand 0x%06llx, numerator %llu)", hd[1], hd[1] >> 9,
           hd[1] & 511);
  printf("\n");
  if (!nfit) printf("no scale's reciprocal fits: the reciprocal quantization went unchecked\n");
  const unsigned long long want_tested = (1ull << 32) + 6ull * (1ull << 23);
  if (hd[2] != want_tested)
    printf("the division probe tested %llu pairs, not %llu\n", hd[2], want_tested);
  return h[0] || h[1] || h[2] || h[3] || !nfit || hd[0] || hd[2] != want_tested ? 1 : 0;
}
