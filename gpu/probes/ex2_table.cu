// ex2_table: the hardware exp2 of NVIDIA GPUs (PTX ex2.approx.f32, SASS MUFU.EX2), tabulated. On the
// H200, for x in (-1, 0) the result depends on x only through x truncated toward zero to a multiple of
// 2^-23 (all 1,065,353,215 such floats checked), and ex2(x - 1) = ex2(x) / 2 exactly (all 8,388,607
// checked), so g(r) = ex2(-r 2^-23), r = 0 .. 2^23 - 1, gives ex2 on (-126, 0] exactly (issue 9: the
// fast kernel's softmax). Written as the first differences of g's bit patterns, one int8 each (g(0) =
// 1.0 = 0x3F800000 first, then bits(g(r)) - bits(g(r - 1))): lossless, no reference function needed;
// tests/data/ex2/ holds the H200's, xz-compressed.
//   Usage: ex2_table OUT.bin   (then: xz -9e OUT.bin)
// Build: nvcc -O2 -arch=sm_90 gpu/probes/ex2_table.cu -o ex2_table. NVIDIA only.
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
__device__ __forceinline__ float ex2(float x) { float y; asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__global__ void tab(uint32_t *g) {
  const uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < (1u << 23)) { const float x = -(float)r * 0x1p-23f; const float y = ex2(x); memcpy(&g[r], &y, 4); }
}
int main(int argc, char **argv) {
  const uint32_t n = 1u << 23;
  uint32_t *d, *h = (uint32_t *)malloc(4ull * n);
  cudaMalloc(&d, 4ull * n);
  tab<<<n / 256, 256>>>(d);
  cudaMemcpy(h, d, 4ull * n, cudaMemcpyDeviceToHost);
  FILE *f = fopen(argv[1], "wb");
  int8_t *diff = (int8_t *)malloc(n);
  int bad = 0;
  for (uint32_t r = 0; r < n; r++) {
    const int64_t dd = r ? (int64_t)h[r] - (int64_t)h[r - 1] : 0;
    if (dd < -128 || dd > 127) bad++;
    diff[r] = (int8_t)dd;
  }
  fwrite(diff, 1, n, f);
  fclose(f);
  printf("g(0) = %08x, g(1) = %08x, g(2^23-1) = %08x; differences out of int8: %d\n", h[0], h[1], h[n - 1], bad);
  return 0;
}
