// The hardware conversions gpu/fast/fast.cu uses in place of the generic encoders, checked
// exhaustively against them on the GPU (the encoders are MLR_HD: the same code the CPU runs):
//   cvt.rn.bf16x2.f32 (the output's bf16 codes, out_bf16x2) against mlr__emu_out_code(x, bf16) on
//     all 2^32 binary32 inputs but NaN (the kernel sends a NaN to the encoder: the hardware's NaN
//     is 0x7FFF, the encoder's 0x7FC0 with the sign);
//   bf16 -> fp32 -> cvt.rn.f16x2.f32 (bf16 KV's fp16 operands, bf16x2_f16x2) against
//     mlr__emu_to_operand(x, fp16) on all 2^16 bf16 codes (a NaN must stay a NaN).
// Prints the counts; exits 1 on any difference. Build: nvcc -arch=sm_90 -fmad=false -ftz=false
// (scripts/gpu_run.sh, step fast).
#include "gpu/hip_compat.h"

#include <stdint.h>
#include <stdio.h>

#include "ref/emulate/mlr_emu_ops.h"

__global__ void bf16_out(unsigned long long *bad, unsigned long long *first) {
  unsigned long long n = 0;
  for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < (1ull << 32); k += (uint64_t)gridDim.x * blockDim.x) {
    const float x = mlr_bits_f32((uint32_t)k);
    if (isnan(x)) continue;
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(x), "f"(x));
    if ((d & 0xFFFFu) != mlr__emu_out_code(x, MLR_OUT_BF16) || (d >> 16) != (d & 0xFFFFu)) {
      n++;
      atomicMin(first, (unsigned long long)k);
    }
  }
  if (n) atomicAdd(bad, n);
}

__global__ void bf16_to_f16(unsigned long long *bad, unsigned long long *first) {
  const uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; /* 2^16 threads */
  const float x = mlr_bits_f32(c << 16);
  uint32_t d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(x), "f"(x));
  const float got = mlr_decode(MLR_FMT_FP16, d & 0xFFFFu), want = mlr__emu_to_operand(x, MLR_OP_FP16);
  const int same = isnan(want) ? isnan(got) : mlr_f32_bits(got) == mlr_f32_bits(want);
  if (!same) {
    atomicAdd(bad, 1ull);
    atomicMin(first, (unsigned long long)c);
  }
}

int main(void) {
  unsigned long long *d, h[4];
  MLR_GPU_CHECK(hipMalloc((void **)&d, 4 * sizeof *d));
  MLR_GPU_CHECK(hipMemset(d, 0, 4 * sizeof *d));
  MLR_GPU_CHECK(hipMemset(d + 1, 0xFF, sizeof *d));
  MLR_GPU_CHECK(hipMemset(d + 3, 0xFF, sizeof *d));
  bf16_out<<<132 * 16, 256>>>(d, d + 1);
  bf16_to_f16<<<256, 256>>>(d + 2, d + 3);
  MLR_GPU_CHECK(hipGetLastError());
  MLR_GPU_CHECK(hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost));
  printf("cvt.rn.bf16x2.f32 vs mlr__emu_out_code(bf16), all 2^32 non-NaN binary32: %llu differ", h[0]);
  if (h[0]) printf(" (first 0x%08llx)", h[1]);
  printf("\nbf16 -> cvt.rn.f16x2.f32 vs mlr__emu_to_operand(fp16), all 2^16 bf16 codes: %llu differ", h[2]);
  if (h[2]) printf(" (first 0x%04llx)", h[3]);
  printf("\n");
  return h[0] || h[2] ? 1 : 0;
}
