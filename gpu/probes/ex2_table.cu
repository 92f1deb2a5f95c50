// ex2_table: the hardware exp2 of NVIDIA GPUs (PTX ex2.approx.f32, SASS MUFU.EX2), tabulated, and
// its model (ref/sfu/mlr_sfu.h) checked on every float x <= 0.
//   1. g(r) = ex2(-r 2^-23), r = 0 .. 2^23 - 1, written to OUT.bin as the first differences of g's
//   bit
//      patterns, one int8 each (g(0) = 1.0 = 0x3F800000 first, then bits(g(r)) - bits(g(r - 1))):
//      lossless, no reference function needed; ref/sfu/ holds the H200's, xz-compressed (its README
//      names the SHA-256 of the uncompressed bytes).
//   2. mlr__sfu_ex2 with this g against ex2.approx.f32 (not .ftz, as the fast kernel is built) on
//   all
//      2^31 floats with the sign bit set (-0 .. -Inf and the negative NaNs: NaN only as a class),
//      and on the positive floats below 128 (not modelled: counted, not required).
//   3. SAMPLES.txt: x and the hardware's result (hex bit patterns) for special and random x <= 0,
//   the
//      CPU test's evidence (tests/data/sfu/).
//   Usage: ex2_table OUT.bin SAMPLES.txt; exit 1 when a float x <= 0 differs.
// Build: nvcc -O2 -arch=sm_90 -ftz=false -I. gpu/probes/ex2_table.cu -o ex2_table. NVIDIA only.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_sfu.h"

#define CUDA_OK(x)                                                                                 \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "ex2_table: %s: %s\n", #x, cudaGetErrorString(e_));                          \
      return 2;                                                                                    \
    }                                                                                              \
  } while (0)

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__global__ void tab(uint32_t *g) {
  const uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < (1u << 23)) g[r] = mlr_f32_bits(ex2(-(float)r * 0x1p-23f));
}
/* cnt[0]: x <= 0 checked, cnt[1]: differing; cnt[2], cnt[3]: the same for 0 < x < 128; ex: the
 * first 8 */
__global__ void check(const uint32_t *g, uint32_t hi, unsigned long long *cnt, uint32_t *ex) {
  const uint32_t b = hi | (blockIdx.x * blockDim.x + threadIdx.x);
  const float x = mlr_bits_f32(b), hw = ex2(x), m = mlr__sfu_ex2(g, x);
  const int pos = !(b >> 31);
  if (pos && !(x < 128.0f)) return;
  const int same = x != x ? hw != hw : mlr_f32_bits(hw) == mlr_f32_bits(m);
  atomicAdd(&cnt[2 * pos], 1ull);
  if (!same) {
    const unsigned long long k = atomicAdd(&cnt[2 * pos + 1], 1ull);
    if (!pos && k < 8) {
      ex[3 * k] = b;
      ex[3 * k + 1] = mlr_f32_bits(hw);
      ex[3 * k + 2] = mlr_f32_bits(m);
    }
  }
}
__global__ void sample(const uint32_t *x, uint32_t *y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = mlr_f32_bits(ex2(mlr_bits_f32(x[i])));
}

static uint32_t f2b(float x) { return mlr_f32_bits(x); }
static uint32_t rng(uint64_t *s) { /* xorshift64*, the high half */
  *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
  return (uint32_t)((*s * 0x2545F4914F6CDD1Dull) >> 32);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: ex2_table OUT.bin SAMPLES.txt\n");
    return 2;
  }
  const uint32_t n = 1u << 23;
  uint32_t *d, *h = (uint32_t *)malloc(4ull * n), *ex;
  unsigned long long *cnt;
  CUDA_OK(cudaMalloc(&d, 4ull * n));
  CUDA_OK(cudaMalloc(&cnt, 4 * sizeof *cnt));
  CUDA_OK(cudaMalloc(&ex, 24 * 4));
  tab<<<n / 256, 256>>>(d);
  CUDA_OK(cudaMemcpy(h, d, 4ull * n, cudaMemcpyDeviceToHost));
  FILE *f = fopen(argv[1], "wb");
  int8_t *diff = (int8_t *)malloc(n);
  int bad = 0;
  for (uint32_t r = 0; r < n; r++) {
    const int64_t dd = r ? (int64_t)h[r] - (int64_t)h[r - 1] : 0;
    if (dd < -128 || dd > 127) bad++;
    diff[r] = (int8_t)dd;
  }
  if (!f || fwrite(diff, 1, n, f) != n || fclose(f) != 0) {
    fprintf(stderr, "ex2_table: cannot write %s\n", argv[1]);
    return 2;
  }
  printf("g(0) = %08x, g(1) = %08x, g(2^23-1) = %08x; differences out of int8: %d\n", h[0], h[1],
         h[n - 1], bad);

  /* 2. the model, on every x <= 0 (2^31 patterns) and 0 < x < 128 */
  CUDA_OK(cudaMemset(cnt, 0, 4 * sizeof *cnt));
  for (uint32_t hi = 0; hi < 2; hi++)
    for (uint32_t part = 0; part < 2; part++) /* 2^30 patterns a launch */
      check<<<(1u << 30) / 256, 256>>>(d, hi << 31 | part << 30, cnt, ex);
  CUDA_OK(cudaDeviceSynchronize());
  unsigned long long c[4];
  uint32_t e[24];
  CUDA_OK(cudaMemcpy(c, cnt, sizeof c, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(e, ex, sizeof e, cudaMemcpyDeviceToHost));
  printf(
      "model (ref/sfu) vs ex2.approx.f32: x <= 0 (and negative NaNs): %llu floats, %llu differ\n",
      c[0], c[1]);
  for (unsigned long long k = 0; k < c[1] && k < 8; k++)
    printf("  x %08x: hardware %08x, model %08x\n", e[3 * k], e[3 * k + 1], e[3 * k + 2]);
  printf("not modelled: 0 < x < 128: %llu floats, %llu differ from the correctly rounded 2^x the "
         "model puts there\n",
         c[2], c[3]);

  /* 3. samples for the CPU test */
  enum { NS = 4096 };
  static uint32_t xs[NS + 64], ys[NS + 64];
  int k = 0;
  const float special[] = {-0.0f,           0.0f,    -0x1p-149f,      -0x1p-126f,  -0x1p-24f,
                           -0x1.fffffep-1f, -1.0f,   -0x1.000002p+0f, -2.0f,       -125.0f,
                           -0x1.f7fffep+6f, -126.0f, -0x1.f80002p+6f, -0x1.fcp+6f, -127.0f,
                           -148.0f,         -149.0f, -0x1.2bp+7f,     -0x1.2cp+7f, -0x1.2c0002p+7f,
                           -151.0f,         -252.0f, -0x1.f80002p+7f, -253.0f,     -1000.0f,
                           -INFINITY};
  for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) xs[k++] = f2b(special[i]);
  xs[k++] = 0xFFC00000u; /* a negative NaN */
  uint64_t s = 0x9E3779B97F4A7C15ull;
  while (k < NS) { /* a quarter each: (-1, 0), [-126, -1], (-160, -126), any x <= 0 */
    const int q = k & 3;
    float x;
    const uint32_t u = rng(&s);
    if (q == 0)
      x = -mlr_bits_f32(u % 0x3F800000u);
    else if (q == 1)
      x = -(1.0f + 125.0f * (float)(u >> 8) * 0x1p-24f);
    else if (q == 2)
      x = -(126.0f + 34.0f * (float)(u >> 8) * 0x1p-24f);
    else
      x = -mlr_bits_f32(u % 0x7F800000u);
    xs[k++] = f2b(x);
  }
  uint32_t *dx, *dy;
  CUDA_OK(cudaMalloc(&dx, sizeof xs));
  CUDA_OK(cudaMalloc(&dy, sizeof ys));
  CUDA_OK(cudaMemcpy(dx, xs, sizeof xs, cudaMemcpyHostToDevice));
  sample<<<(k + 255) / 256, 256>>>(dx, dy, k);
  CUDA_OK(cudaMemcpy(ys, dy, sizeof ys, cudaMemcpyDeviceToHost));
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  f = fopen(argv[2], "w");
  if (!f) {
    fprintf(stderr, "ex2_table: cannot write %s\n", argv[2]);
    return 2;
  }
  fprintf(f,
          "# ex2.approx.f32 (not .ftz) on %s, written by gpu/probes/ex2_table.cu: x and the "
          "result, hex bit patterns\n",
          prop.name);
  for (int i = 0; i < k; i++) fprintf(f, "%08x %08x\n", xs[i], ys[i]);
  if (fclose(f) != 0) return 2;
  printf("samples: %d written to %s\n", k, argv[2]);
  return c[1] ? 1 : 0;
}
