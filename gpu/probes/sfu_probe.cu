// sfu_probe: the H200's approximate reciprocal, log2 and division (PTX rcp.approx.f32,
// lg2.approx.f32, div.full.f32: what Triton emits for fp32 `/` and tl.log), tabulated and sampled
// so that ref/sfu can model them as it models ex2.approx.f32.
//   sfu_probe DIR: the units on 1 + r 2^-23, r = 0 .. 2^23 - 1: DIR/rcp_diff.bin the reciprocal's
//   bit patterns as first differences, one int8 each (ref/sfu/README.md's form); the log2's as
//   DIR/lg2_head.bin, its raw little-endian binary32 patterns for r < 2^18 (near 1 its steps do
//   not fit a byte), and DIR/lg2_diff.bin, first differences for r >= 2^18 (0 below);
//   DIR/rcp_samples.txt, lg2_samples.txt: x and the result over every positive float class;
//   DIR/div_samples.txt: x, y, div.full.f32(x, y), div.approx.f32 and div.approx.ftz.f32 (CUDA's
//   x / y under --use_fast_math); DIR/ex2_pos_samples.txt: x > 0 (near 0, or any) and
//   ex2.approx.f32 (FlashAttention-2's fma(s, c, -m c) can be positive).
// Build: nvcc -O2 -arch=sm_90 -ftz=false -I. gpu/probes/sfu_probe.cu -o sfu_probe. NVIDIA only.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_OK(x)                                                                                 \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "sfu_probe: %s: %s\n", #x, cudaGetErrorString(e_));                          \
      return 2;                                                                                    \
    }                                                                                              \
  } while (0)

__device__ __forceinline__ float rcp(float x) {
  float y;
  asm("rcp.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float lg2(float x) {
  float y;
  asm("lg2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float divf(float x, float y) {
  float z;
  asm("div.full.f32 %0, %1, %2;" : "=f"(z) : "f"(x), "f"(y));
  return z;
}
__device__ __forceinline__ float diva(float x, float y) {
  float z;
  asm("div.approx.f32 %0, %1, %2;" : "=f"(z) : "f"(x), "f"(y));
  return z;
}
__device__ __forceinline__ float divaz(float x, float y) {
  float z;
  asm("div.approx.ftz.f32 %0, %1, %2;" : "=f"(z) : "f"(x), "f"(y));
  return z;
}
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ uint32_t bits(float x) { return __float_as_uint(x); }

__global__ void tab(uint32_t *g, int which) {
  const uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  const float x = __uint_as_float(0x3F800000u | r);
  if (r < (1u << 23)) g[r] = bits(which ? lg2(x) : rcp(x));
}
__global__ void one(const uint32_t *x, uint32_t *y, int n, int which) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = bits(which ? lg2(__uint_as_float(x[i])) : rcp(__uint_as_float(x[i])));
}
/* z[i]: ex2.approx.f32 of x[i] */
__global__ void pos(const uint32_t *x, uint32_t *z, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = bits(ex2(__uint_as_float(x[i])));
}
/* z[3i..3i+2]: div.full.f32, div.approx.f32, div.approx.ftz.f32 of x[i] / y[i] */
__global__ void two(const uint32_t *x, const uint32_t *y, uint32_t *z, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float a = __uint_as_float(x[i]), b = __uint_as_float(y[i]);
  z[3 * i] = bits(divf(a, b)), z[3 * i + 1] = bits(diva(a, b)), z[3 * i + 2] = bits(divaz(a, b));
}

static uint32_t rng(uint64_t *s) { /* xorshift64*, the high half */
  *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
  return (uint32_t)((*s * 0x2545F4914F6CDD1Dull) >> 32);
}
/* a float of either sign: any finite pattern, or one near 1 (exponent within +-8) */
static uint32_t pick(uint64_t *s, int pos) {
  const uint32_t u = rng(s), v = rng(s);
  uint32_t b = (v & 1) ? u % 0x7F800000u : (uint32_t)((119 + v % 17) << 23) | (u & 0x7FFFFFu);
  return pos ? b : b | (v & 0x80000000u);
}

static int save(const char *dir, const char *name, const void *p, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
    fprintf(stderr, "sfu_probe: cannot write %s\n", path);
    return 2;
  }
  return 0;
}
/* one line a sample: a[i] b[i], or a[i] b[i] and c[3i..3i+2] */
static int text(const char *dir, const char *name, const uint32_t *a, const uint32_t *b,
                const uint32_t *c, int n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) return 2;
  for (int i = 0; i < n; i++)
    c ? fprintf(f, "%08x %08x %08x %08x %08x\n", a[i], b[i], c[3 * i], c[3 * i + 1], c[3 * i + 2])
      : fprintf(f, "%08x %08x\n", a[i], b[i]);
  return fclose(f) != 0 ? 2 : 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: sfu_probe DIR\n");
    return 2;
  }
  const uint32_t n = 1u << 23;
  enum { NS = 1 << 18 };
  uint32_t *d, *h = (uint32_t *)malloc(4ull * n);
  CUDA_OK(cudaMalloc(&d, 4ull * n));
  int8_t *diff = (int8_t *)malloc(n);
  for (int w = 0; w < 2; w++) {
    tab<<<n / 256, 256>>>(d, w);
    CUDA_OK(cudaMemcpy(h, d, 4ull * n, cudaMemcpyDeviceToHost));
    /* lg2 crosses 0 at 1: below 2^18 its patterns as they are (its steps there reach 369 ulps),
     * from there its steps (at most 45 ulps) */
    const uint32_t r0 = w ? 1u << 18 : 0;
    if (w && save(argv[1], "lg2_head.bin", h, 4ull * r0)) return 2;
    for (uint32_t r = 0; r < n; r++) { /* ref/sfu/README.md's form: g(0) = 1.0 implied */
      const int64_t dd = r > 0 && r >= r0 ? (int64_t)h[r] - (int64_t)h[r - 1] : 0;
      if (dd < -128 || dd > 127) {
        fprintf(stderr, "sfu_probe: %s step %lld at %u does not fit int8\n", w ? "lg2" : "rcp",
                (long long)dd, r);
        return 1;
      }
      diff[r] = (int8_t)dd;
    }
    if (save(argv[1], w ? "lg2_diff.bin" : "rcp_diff.bin", diff, n)) return 2;
  }
  static uint32_t xs[NS], ys[NS], zs[3 * NS];
  uint32_t *dx, *dy, *dz;
  CUDA_OK(cudaMalloc(&dx, sizeof xs));
  CUDA_OK(cudaMalloc(&dy, sizeof ys));
  CUDA_OK(cudaMalloc(&dz, sizeof zs));
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (int w = 0; w < 2; w++) {
    for (int i = 0; i < NS; i++) xs[i] = pick(&s, w);
    CUDA_OK(cudaMemcpy(dx, xs, sizeof xs, cudaMemcpyHostToDevice));
    one<<<NS / 256, 256>>>(dx, dy, NS, w);
    CUDA_OK(cudaMemcpy(ys, dy, sizeof ys, cudaMemcpyDeviceToHost));
    if (text(argv[1], w ? "lg2_samples.txt" : "rcp_samples.txt", xs, ys, NULL, NS)) return 2;
  }
  for (int i = 0; i < NS; i++) xs[i] = pick(&s, 0), ys[i] = pick(&s, 0);
  CUDA_OK(cudaMemcpy(dx, xs, sizeof xs, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dy, ys, sizeof ys, cudaMemcpyHostToDevice));
  two<<<NS / 256, 256>>>(dx, dy, dz, NS);
  CUDA_OK(cudaMemcpy(zs, dz, sizeof zs, cudaMemcpyDeviceToHost));
  if (text(argv[1], "div_samples.txt", xs, ys, zs, NS)) return 2;
  for (int i = 0; i < NS; i++) { /* x > 0: near 0 (exponents -40 .. -1), or any finite */
    const uint32_t u = rng(&s), v = rng(&s);
    xs[i] = (v & 1) ? 1 + u % (0x7F800000u - 1) : (uint32_t)((87 + v % 40) << 23) | (u & 0x7FFFFFu);
  }
  CUDA_OK(cudaMemcpy(dx, xs, sizeof xs, cudaMemcpyHostToDevice));
  pos<<<NS / 256, 256>>>(dx, dy, NS);
  CUDA_OK(cudaMemcpy(ys, dy, sizeof ys, cudaMemcpyDeviceToHost));
  if (text(argv[1], "ex2_pos_samples.txt", xs, ys, NULL, NS)) return 2;
  printf("sfu_probe: lg2(1) %08x lg2(1.5) %08x; %d samples each\n", h[0], h[1u << 22], NS);
  return 0;
}
