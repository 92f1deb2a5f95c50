// wgmma_probe: runs Hopper's warpgroup matrix instruction with fp8 operands
// (wgmma.mma_async m64n8k32, e4m3 or e5m2, fp32 C and D; A from registers, B from shared memory
// through a descriptor, no swizzle) on random and normal inner products, and counts the D that
// differ from each model of ref/mma (mlr_mma_block): sm90-e4m3 (one 32-product block, 13 fraction
// bits, the published vectors' fit, C a term of the alignment, a subnormal input at its format's
// least normal exponent; sm90-e5m2 for e5m2) and, for contrast, sm90-e4m3-sync (mma.sync's
// lowering).
//
// A warpgroup (4 warps) computes one 64x8 tile D = A B + C: 512 inner products. Each warp holds 16
// rows of A in the mma.m16n8k32 A-fragment layout and 16 rows of D in the m16n8 C/D layout (PTX
// ISA, wgmma register fragments). B (8 x 32 bytes, K-major, as fp8 wgmma requires) sits in shared
// memory as two 8x16-byte core matrices (the no-swizzle canonical layout: rows of 16 bytes, 128
// bytes a core matrix, the second core matrix 128 bytes on: the leading-dimension byte offset).
//
// Usage: wgmma_probe [--n N] [--seed S] [--out DIR]   (N inner products a class, default 2^20)
//   DIR: writes DIR/summary.txt and DIR/h200_wgmma_{e4m3,e5m2}.txt (256 vectors a class, C D a b).
// Exit status: 0 every D matches the fitted model, 1 not, 2 usage or no device.
// Build: nvcc -arch=sm_90a (wgmma needs the sm_90a target) with ref/mma/mma.c.
#include "gpu/hip_compat.h"
#if !defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
int main(void) { return 2; }
#else
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mlr_rng.h"
#include "mlr_formats.h"
#include "mlr_mma.h"

namespace {

enum { K = 32, ROWS = 64, COLS = 8, TILE = ROWS * COLS };
enum { C_RANDOM = 0, C_NORMAL, C_CANCEL, C_SPREAD, C_SUBNORM, C_ZEROS, C_CDOM, C_NONFIN, NCLASS };
const char *CLASS_NAMES[NCLASS] = {"random",  "normal", "cancel", "spread",
                                   "subnorm", "zeros",  "cdom",   "nonfin"};

template <int E5M2>
__device__ __forceinline__ void wgmma_op(float (&d)[4], const uint32_t (&a)[4], uint64_t desc) {
  if constexpr (E5M2)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, %8, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
  else
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, %8, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

/* one warpgroup a tile: A [64][32] codes row-major, B [8][32] (column n's K codes), C, D [64][8] */
template <int E5M2>
__global__ void __launch_bounds__(128)
    k_wgmma(const uint8_t *A, const uint8_t *B, const float *C, float *D) {
  __shared__ __align__(128) uint8_t bs[256];
  const int tile = blockIdx.x, tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane >> 2,
            tg = lane & 3;
  const uint8_t *a = A + (size_t)tile * ROWS * K, *b = B + (size_t)tile * COLS * K;
  for (int i = tid; i < COLS * K; i += 128) { /* core matrix (k / 16): row n's 16 bytes at n * 16 */
    const int n = i / K, k = i % K;
    bs[(k / 16) * 128 + n * 16 + k % 16] = b[i];
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::
                   : "memory"); /* the generic stores, seen by wgmma */
  __syncthreads();
  uint32_t ar[4] = {0, 0, 0, 0};
  for (int i = 0; i < 16; i++) { /* the m16n8k32 A fragment of this warp's 16 rows */
    const int r = i / 4, row = 16 * warp + ((r & 1) ? g + 8 : g),
              col = tg * 4 + i % 4 + (r >= 2 ? 16 : 0);
    ar[r] |= (uint32_t)a[row * K + col] << (8 * (i % 4));
  }
  float d[4];
  for (int i = 0; i < 4; i++)
    d[i] = C[(size_t)tile * TILE + (16 * warp + g + (i >= 2 ? 8 : 0)) * COLS + tg * 2 + (i & 1)];
  const uint32_t addr = (uint32_t)__cvta_generic_to_shared(bs);
  /* descriptor: start address >> 4 (bits 0-13), leading byte offset 128 >> 4 (bits 16-29), stride
   * byte offset 256 >> 4 (bits 32-45), no swizzle (bits 62-63 = 0) */
  const uint64_t desc =
      (uint64_t)((addr >> 4) & 0x3FFF) | (uint64_t)(128 >> 4) << 16 | (uint64_t)(256 >> 4) << 32;
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  wgmma_op<E5M2>(d, ar, desc);
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  for (int i = 0; i < 4; i++)
    D[(size_t)tile * TILE + (16 * warp + g + (i >= 2 ? 8 : 0)) * COLS + tg * 2 + (i & 1)] = d[i];
}

struct gen {
  uint64_t seed, i = 0;
  uint64_t bits() { return mlr_rng_bits(seed, 78, 0, i++); }
  double uni() { return mlr_u64_to_uniform(bits()); }
  double normal() { return mlr_normal_quantile(uni()); }
  int range(int lo, int hi) { return lo + (int)(bits() % (uint64_t)(hi - lo + 1)); }
};

uint32_t code_of(mlr_format f, double x) {
  return mlr_encode_f64(x, f, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE, 0u);
}

void make_tile(mlr_format f, int cls, gen &r, uint8_t *A, uint8_t *B, float *C) {
  const int s = r.range(-4, 4);
  for (int v = 0; v < ROWS + COLS; v++) {
    uint8_t *x = v < ROWS ? A + v * K : B + (v - ROWS) * K;
    for (int e = 0; e < K; e++) {
      uint32_t c = 0;
      switch (cls) {
      case C_RANDOM:
        do c = (uint32_t)(r.bits() & 0xFF);
        while (!isfinite(mlr_decode(f, c)));
        break;
      case C_NORMAL:
        c = code_of(f, ldexp(r.normal(), s));
        break;
      case C_CANCEL:
        if (e >= K - 4)
          c = code_of(f, ldexp(r.normal(), s - 6));
        else if (e % 2 == 0)
          c = code_of(f, ldexp(r.normal(), s));
        else
          c = v < ROWS ? x[e - 1] ^ 0x80u : x[e - 1];
        break;
      case C_SPREAD:
        c = code_of(f, ldexp(1.0 + r.uni(), e == 0 ? s : s - r.range(0, 12)) *
                           ((r.bits() & 1) ? -1 : 1));
        break;
      case C_SUBNORM:
        c = (r.bits() % 4) ? (uint32_t)(r.bits() & (f == MLR_FMT_E4M3 ? 0x87u : 0x83u))
                           : code_of(f, ldexp(r.normal(), -2));
        break;
      case C_ZEROS:
        c = v < ROWS || (r.bits() & 1) ? (uint32_t)(r.bits() & 0x80u) : code_of(f, r.normal());
        break; /* every product +-0 */
      case C_CDOM:
        c = code_of(f, ldexp(r.normal(), s));
        break;
      case C_NONFIN: {
        const int u = (int)(r.bits() % 16); /* e4m3: NaN 0x7F; e5m2: NaN 0x7F, Inf 0x7C */
        c = u == 0                        ? 0x7Fu
            : u == 1 && f == MLR_FMT_E5M2 ? 0x7Cu
            : u == 2 && f == MLR_FMT_E5M2 ? 0xFCu
                                          : code_of(f, ldexp(r.normal(), s));
        break;
      }
      }
      x[e] = (uint8_t)c;
    }
  }
  for (int k = 0; k < TILE; k++) {
    float c = (r.bits() % 4) ? (float)ldexp(r.normal(), 2 * s + r.range(-8, 4)) : 0.0f;
    if (cls == C_SUBNORM)
      c = (r.bits() % 2) ? (float)ldexp(r.uni() - 0.5, -126 - r.range(0, 20)) : c;
    if (cls == C_ZEROS) c = (r.bits() & 1) ? -0.0f : 0.0f;
    if (cls == C_CDOM)
      c = (float)ldexp(r.normal(), 2 * s + ((r.bits() & 1) ? r.range(12, 30) : -r.range(12, 40)));
    if (cls == C_NONFIN) {
      const int u = (int)(r.bits() % 8);
      c = u == 0 ? NAN : u == 1 ? INFINITY : u == 2 ? -INFINITY : c;
    }
    C[k] = c;
  }
}

#define CK(call)                                                                                   \
  do {                                                                                             \
    const cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "wgmma_probe: %s: %s\n", #call, cudaGetErrorString(e_));                     \
      exit(2);                                                                                     \
    }                                                                                              \
  } while (0)

} // namespace

int main(int argc, char **argv) {
  long long n = 1 << 20;
  uint64_t seed = 20261130;
  const char *out = nullptr;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!strcmp(argv[i], "--n") && v) {
      n = atoll(v);
      i++;
    } else if (!strcmp(argv[i], "--seed") && v) {
      seed = strtoull(v, nullptr, 10);
      i++;
    } else if (!strcmp(argv[i], "--out") && v) {
      out = v;
      i++;
    } else {
      fprintf(
          stderr,
          "wgmma_probe: unknown argument '%s'; usage: wgmma_probe [--n N] [--seed S] [--out DIR]\n",
          argv[i]);
      return 2;
    }
  }
  if (n < TILE) n = TILE;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  if (out && mkdir(out, 0755) != 0 && errno != EEXIST) return 2;
  const mlr_mma_model *sync = mlr_mma_get(MLR_MMA_SM90_E4M3_SYNC);
  const int nt = (int)((n + TILE - 1) / TILE);
  uint8_t *A = (uint8_t *)malloc((size_t)nt * ROWS * K),
          *B = (uint8_t *)malloc((size_t)nt * COLS * K);
  float *C = (float *)malloc(sizeof(float) * TILE * nt),
        *D = (float *)malloc(sizeof(float) * TILE * nt);
  uint8_t *dA, *dB;
  float *dC, *dD;
  CK(cudaMalloc(&dA, (size_t)nt * ROWS * K));
  CK(cudaMalloc(&dB, (size_t)nt * COLS * K));
  CK(cudaMalloc(&dC, sizeof(float) * TILE * nt));
  CK(cudaMalloc(&dD, sizeof(float) * TILE * nt));
  FILE *sf = nullptr;
  if (out) {
    char path[1024];
    snprintf(path, sizeof path, "%s/summary.txt", out);
    sf = fopen(path, "w");
  }
  char line[1024];
  snprintf(line, sizeof line,
           "wgmma_probe on %s (sm_%d%d), seed %llu: %lld inner products a class (tiles of 512), "
           "wgmma.m64n8k32 A regs, B smem\n",
           prop.name, prop.major, prop.minor, (unsigned long long)seed, (long long)nt * TILE);
  fputs(line, stdout);
  if (sf) fputs(line, sf);
  long long worst = 0;
  for (int fi = 0; fi < 2; fi++) {
    const mlr_format f = fi ? MLR_FMT_E5M2 : MLR_FMT_E4M3;
    const mlr_mma_model *models[2] = {mlr_mma_get(fi ? MLR_MMA_SM90_E5M2 : MLR_MMA_SM90_E4M3),
                                      sync};
    FILE *fp = nullptr;
    if (out) {
      char path[1024];
      snprintf(path, sizeof path, "%s/h200_wgmma_%s.txt", out, fi ? "e5m2" : "e4m3");
      fp = fopen(path, "w");
      fprintf(fp,
              "# H200 wgmma.mma_async m64n8k32 vectors (%s operands, 32 products, fp32 C and D, D "
              "= the hardware's A.B + C),\n"
              "# measured by gpu/probes/wgmma_probe.cu, seed %llu. Line: C D a_0..a_31 b_0..b_31 "
              "(hex).\n",
              fi ? "e5m2" : "e4m3", (unsigned long long)seed);
    }
    for (int cls = 0; cls < NCLASS; cls++) {
      if (fp) fprintf(fp, "# class %s\n", CLASS_NAMES[cls]);
      gen r{seed * 16 + (uint64_t)(fi * NCLASS + cls)};
      for (int t = 0; t < nt; t++)
        make_tile(f, cls, r, A + (size_t)t * ROWS * K, B + (size_t)t * COLS * K,
                  C + (size_t)t * TILE);
      CK(cudaMemcpy(dA, A, (size_t)nt * ROWS * K, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(dB, B, (size_t)nt * COLS * K, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(dC, C, sizeof(float) * TILE * nt, cudaMemcpyHostToDevice));
      CK(cudaMemset(dD, 0xFF, sizeof(float) * TILE * nt));
      if (fi)
        k_wgmma<1><<<nt, 128>>>(dA, dB, dC, dD);
      else
        k_wgmma<0><<<nt, 128>>>(dA, dB, dC, dD);
      CK(cudaGetLastError());
      CK(cudaMemcpy(D, dD, sizeof(float) * TILE * nt, cudaMemcpyDeviceToHost));
      long long bad[2] = {0, 0}, bad_c0[2] = {0, 0}, nc0 = 0, kept = 0, nan_pairs = 0;
      char first[2][256] = {{0}, {0}};
      for (int t = 0; t < nt; t++)
        for (int row = 0; row < ROWS; row++)
          for (int col = 0; col < COLS; col++) {
            float a[K], b[K];
            const uint8_t *ac = A + (size_t)t * ROWS * K + row * K,
                          *bc = B + (size_t)t * COLS * K + col * K;
            for (int e = 0; e < K; e++) {
              a[e] = mlr_decode(f, ac[e]);
              b[e] = mlr_decode(f, bc[e]);
            }
            const float c = C[(size_t)t * TILE + row * COLS + col],
                        hw = D[(size_t)t * TILE + row * COLS + col];
            nc0 += c == 0.0f;
            nan_pairs += isnan(hw) != 0;
            for (int m = 0; m < 2; m++) {
              const float md = mlr_mma_block(models[m], a, b, K, c);
              if (mlr_f32_bits(md) != mlr_f32_bits(hw) && !(isnan(md) && isnan(hw))) {
                if (!bad[m])
                  snprintf(first[m], sizeof first[m], "C %08x hw %08x model %08x", mlr_f32_bits(c),
                           mlr_f32_bits(hw), mlr_f32_bits(md));
                bad[m]++;
                bad_c0[m] += c == 0.0f;
              }
            }
            if (fp && kept < 256) {
              fprintf(fp, "%08x %08x", mlr_f32_bits(c), mlr_f32_bits(hw));
              for (int e = 0; e < K; e++) fprintf(fp, " %02x", ac[e]);
              for (int e = 0; e < K; e++) fprintf(fp, " %02x", bc[e]);
              fprintf(fp, "\n");
              kept++;
            }
          }
      snprintf(line, sizeof line,
               "%s %-8s %9lld products (C = 0: %lld, NaN D: %lld); differ: %s %lld (C = 0: %lld), "
               "%s %lld (C = 0: %lld)%s%s\n",
               fi ? "e5m2" : "e4m3", CLASS_NAMES[cls], (long long)nt * TILE, nc0, nan_pairs,
               models[0]->name, bad[0], bad_c0[0], models[1]->name, bad[1], bad_c0[1],
               bad[0] ? "; first miss: " : "", first[0]);
      fputs(line, stdout);
      if (sf) fputs(line, sf);
      worst += bad[0]; /* the fitted model (sync: for contrast, mma.sync's lowering) */
    }
    if (fp) fclose(fp);
  }
  if (sf) fclose(sf);
  return worst ? 1 : 0;
}
#endif
