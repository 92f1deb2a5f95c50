// ex2_table: the hardware exp2 of NVIDIA GPUs (PTX ex2.approx.f32, SASS MUFU.EX2), tabulated, and
// its model (ref/sfu/mlr_sfu.h) checked on every float.
//   1. g(r) = ex2(-r 2^-23) and g(2^23 + r) = ex2(r 2^-23), r = 0 .. 2^23 - 1, written to NEG.bin
//      and POS.bin as the first differences of their bit patterns, one int8 each (1.0 =
//      0x3F800000 first, then bits(g(r)) - bits(g(r - 1))): lossless, no reference function
//      needed; ref/sfu/ holds them xz-compressed (its README names the SHA-256s of the
//      uncompressed bytes).
//   2. mlr__sfu_ex2 with these tables against ex2.approx.f32 (not .ftz, as the fast kernel is
//      built) on all 2^32 floats (NaNs as a class).
//   3. SAMPLES.txt: x and the hardware's result (hex bit patterns) for special and random x <= 0,
//      the CPU test's evidence (tests/data/sfu/).
//   4. ex2.approx.ftz.f32 against ex2.approx.f32 on every float x >= -126 and x = -inf: the fast
//      kernel's k_attn_rows takes the .ftz result where it has shown x in that range.
//   Usage: ex2_table NEG.bin POS.bin SAMPLES.txt; exit 1 when a float differs.
// Build: as scripts/gpu_run.sh does (nvcc -O2 -arch=sm_90 -ftz=false, its include dirs).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/fast/fast_sm90.cuh"
#include "mlr_sfu.h"

#define CUDA_OK(x)                                                                                 \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "ex2_table: %s: %s\n", #x, cudaGetErrorString(e_));                          \
      return 2;                                                                                    \
    }                                                                                              \
  } while (0)

/* the fast kernels' own exp2 (ex2.approx.f32) and the .ftz one k_attn_rows takes for x >= -126 */
using mlr_fast::ex2;
using mlr_fast::ex2_normal;
/* g[r] = ex2(-r 2^-23), g[2^23 + r] = ex2(r 2^-23) (the products are exact) */
__global__ void tab(uint32_t *g) {
  const uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < (1u << 23)) {
    g[r] = mlr_f32_bits(ex2(-(float)r * 0x1p-23f));
    g[(1u << 23) + r] = mlr_f32_bits(ex2((float)r * 0x1p-23f));
  }
}
/* cnt[0]: x <= 0 checked, cnt[1]: differing; cnt[2], cnt[3]: the same for x > 0; ex: the first 8
 * of each */
__global__ void check(const uint32_t *g, uint32_t hi, unsigned long long *cnt, uint32_t *ex) {
  const uint32_t b = hi | (blockIdx.x * blockDim.x + threadIdx.x);
  const float x = mlr_bits_f32(b), hw = ex2(x), m = mlr__sfu_ex2(g, x);
  const int pos = !(b >> 31);
  const int same = x != x ? hw != hw : mlr_f32_bits(hw) == mlr_f32_bits(m);
  atomicAdd(&cnt[2 * pos], 1ull);
  if (!same) {
    const unsigned long long k = atomicAdd(&cnt[2 * pos + 1], 1ull);
    if (k < 8) {
      ex[24 * pos + 3 * k] = b;
      ex[24 * pos + 3 * k + 1] = mlr_f32_bits(hw);
      ex[24 * pos + 3 * k + 2] = mlr_f32_bits(m);
    }
  }
}
/* cnt[0]: x >= -126 or -inf checked, cnt[1]: .ftz's result differing; ex: the first 8 */
__global__ void ftz_check(uint32_t hi, unsigned long long *cnt, uint32_t *ex) {
  const uint32_t b = hi | (blockIdx.x * blockDim.x + threadIdx.x);
  const float x = mlr_bits_f32(b);
  if (!(x >= -126.0f || x == -INFINITY)) return;
  const uint32_t a = mlr_f32_bits(ex2(x)), f = mlr_f32_bits(ex2_normal(x));
  atomicAdd(&cnt[0], 1ull);
  if (a != f) {
    const unsigned long long k = atomicAdd(&cnt[1], 1ull);
    if (k < 8) ex[3 * k] = b, ex[3 * k + 1] = a, ex[3 * k + 2] = f;
  }
}
__global__ void sample(const uint32_t *x, uint32_t *y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = mlr_f32_bits(ex2(mlr_bits_f32(x[i])));
}

static uint32_t f2b(float x) { return mlr_f32_bits(x); }
/* a half of the table as the first differences of its bit patterns, one int8 each; 1 if one is out
 * of int8's range or the file cannot be written */
static int write_diff(const char *path, const uint32_t *h, uint32_t n) {
  int8_t *diff = (int8_t *)malloc(n);
  int bad = 0;
  for (uint32_t r = 0; r < n; r++) {
    const int64_t dd = r ? (int64_t)h[r] - (int64_t)h[r - 1] : 0;
    bad |= dd < -128 || dd > 127;
    diff[r] = (int8_t)dd;
  }
  FILE *f = fopen(path, "wb");
  const int ok = f && fwrite(diff, 1, n, f) == n;
  free(diff);
  if (!(f && fclose(f) == 0 && ok) || bad) {
    fprintf(stderr, "ex2_table: cannot write %s%s\n", path, bad ? " (a step out of int8)" : "");
    return 1;
  }
  return 0;
}
static uint32_t rng(uint64_t *s) { /* xorshift64*, the high half */
  *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
  return (uint32_t)((*s * 0x2545F4914F6CDD1Dull) >> 32);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: ex2_table NEG.bin POS.bin SAMPLES.txt\n");
    return 2;
  }
  const uint32_t n = 1u << 23;
  uint32_t *d, *h = (uint32_t *)malloc(8ull * n), *ex;
  unsigned long long *cnt;
  CUDA_OK(cudaMalloc(&d, 8ull * n));
  CUDA_OK(cudaMalloc(&cnt, 4 * sizeof *cnt));
  CUDA_OK(cudaMalloc(&ex, 48 * 4));
  tab<<<n / 256, 256>>>(d);
  CUDA_OK(cudaMemcpy(h, d, 8ull * n, cudaMemcpyDeviceToHost));
  for (int half = 0; half < 2; half++)
    if (write_diff(argv[1 + half], h + (size_t)half * n, n)) return 2;
  printf("g(0) = %08x, g(1) = %08x, g(2^23-1) = %08x; positive: %08x, %08x, %08x\n", h[0], h[1],
         h[n - 1], h[n], h[n + 1], h[2 * n - 1]);

  /* 2. the model, on every float (2^32 patterns, NaNs as a class) */
  CUDA_OK(cudaMemset(cnt, 0, 4 * sizeof *cnt));
  for (uint32_t hi = 0; hi < 2; hi++)
    for (uint32_t part = 0; part < 2; part++) /* 2^30 patterns a launch */
      check<<<(1u << 30) / 256, 256>>>(d, hi << 31 | part << 30, cnt, ex);
  CUDA_OK(cudaDeviceSynchronize());
  unsigned long long c[4];
  uint32_t e[48];
  CUDA_OK(cudaMemcpy(c, cnt, sizeof c, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(e, ex, sizeof e, cudaMemcpyDeviceToHost));
  for (int pos = 0; pos < 2; pos++) {
    printf("model (ref/sfu) vs ex2.approx.f32: %s: %llu floats, %llu differ\n",
           pos ? "x > 0 (and positive NaNs)" : "x <= 0 (and negative NaNs)", c[2 * pos],
           c[2 * pos + 1]);
    for (unsigned long long k = 0; k < c[2 * pos + 1] && k < 8; k++)
      printf("  x %08x: hardware %08x, model %08x\n", e[24 * pos + 3 * k], e[24 * pos + 3 * k + 1],
             e[24 * pos + 3 * k + 2]);
  }

  const int model_differs = c[1] || c[3];

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
  FILE *f = fopen(argv[3], "w");
  if (!f) {
    fprintf(stderr, "ex2_table: cannot write %s\n", argv[3]);
    return 2;
  }
  fprintf(f,
          "# ex2.approx.f32 (not .ftz) on %s, written by gpu/probes/ex2_table.cu: x and the "
          "result, hex bit patterns\n",
          prop.name);
  for (int i = 0; i < k; i++) fprintf(f, "%08x %08x\n", xs[i], ys[i]);
  if (fclose(f) != 0) return 2;
  printf("samples: %d written to %s\n", k, argv[3]);

  /* 4. .ftz where the kernel takes it */
  CUDA_OK(cudaMemset(cnt, 0, 2 * sizeof *cnt));
  for (uint32_t q = 0; q < 4; q++) ftz_check<<<(1u << 30) / 256, 256>>>(q << 30, cnt, ex);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(c, cnt, 2 * sizeof *cnt, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(e, ex, 24 * 4, cudaMemcpyDeviceToHost));
  printf("ex2.approx.ftz.f32 vs ex2.approx.f32, x >= -126 or -inf: %llu floats, %llu differ\n",
         c[0], c[1]);
  for (unsigned long long j = 0; j < c[1] && j < 8; j++)
    printf("  x %08x: ex2 %08x, .ftz %08x\n", e[3 * j], e[3 * j + 1], e[3 * j + 2]);
  return model_differs || c[1] ? 1 : 0;
}
