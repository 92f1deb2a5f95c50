// mma_probe: runs the real matrix instructions of an NVIDIA GPU (mma.sync m16n8k32 with e4m3 and
// with e5m2 operands, m16n8k16 with bf16 and with fp16 operands; fp32 C and D) on random and
// targeted inner products, and compares every D with the model of ref/mma (mlr_mma_block) bit for
// bit.
//
// A warp computes one 16x8 tile D = A B + C, so a tile gives 128 inner products (row r of A with
// column n of B, plus C[r][n]); every one is counted. Classes, each made so that the property holds
// for every product of a tile:
//   layout   small integers, every sum exact: checks the fragment layouts without any model
//   random   operand codes uniform over the finite codes, C random (0 for a quarter)
//   normal   operands N(0,1) 2^s rounded to the format (s per tile in -4..4), C likewise or 0
//   cancel   A's elements in pairs (x, -x) and B's in pairs (y, y), so each pair of products
//            cancels exactly; the last 4 elements random: the sum is far below its terms
//   spread   one large operand a row and column, the rest up to 40 binades (bf16: 100) below
//   subnorm  operands subnormal in their format (and zero), C subnormal in binary32 or 0
//   zeros    every product +-0, C +-0: the sign of a zero result
//   cdom     C far above the products (2^12 .. 2^30 times) or far below them
//   nonfin   NaN and Inf operands (e4m3: NaN only) and C; Inf - Inf
//   overflow operands near the format's largest value (bf16: products past binary32's range)
// NaN results match when both are NaN (the payload is reported, not compared).
//
// Usage: mma_probe [--random N] [--targeted N] [--seed S] [--out DIR]
//   N: inner products per class (random default 2^20, targeted default 2^14), rounded up to tiles
//   DIR: writes DIR/summary.txt and DIR/h200_probe_{e4m3,bf16,fp16,e5m2}.txt, every targeted
//   product's the first 256 of every class, in tests/data/mma's format (C D a.. b..; D from the
//   hardware, C included) for tests/mma.c.
// Exit status: 0 every D matches, 1 some differ, 2 bad usage or no device.
// NVIDIA only (PTX mma.sync needs sm_89 or later); AMD's MFMA would need a probe of its own.
// Build: scripts/gpu_run.sh (nvcc -arch=sm_90 with ref/mma/mma.c compiled by the host C compiler).
#include "gpu/hip_compat.h"
#if !defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#error "mma_probe runs NVIDIA's mma.sync; it has no AMD version"
#endif

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

enum { I_E4M3 = 0, I_BF16, I_FP16, I_E5M2, NINST };
struct inst {
  const char *name;
  int k;
  mlr_format fmt;
  mlr_mma_unit unit;
};
const inst INSTS[NINST] = {
    {"e4m3", 32, MLR_FMT_E4M3,
     MLR_MMA_SM90_E4M3_SYNC}, // mma.sync e4m3: lowered to two fp16 HMMAs on sm_90
    {"bf16", 16, MLR_FMT_BF16, MLR_MMA_SM90_BF16},
    {"fp16", 16, MLR_FMT_FP16, MLR_MMA_SM90_F16},
    {"e5m2", 32, MLR_FMT_E5M2,
     MLR_MMA_SM90_E4M3_SYNC}}; // lowered the same way (F2FP.F16.E5M2: exact)

enum {
  C_LAYOUT = 0,
  C_RANDOM,
  C_NORMAL,
  C_CANCEL,
  C_SPREAD,
  C_SUBNORM,
  C_ZEROS,
  C_CDOM,
  C_NONFIN,
  C_OVERFLOW,
  NCLASS
};
const char *CLASS_NAMES[NCLASS] = {"layout",  "random", "normal", "cancel", "spread",
                                   "subnorm", "zeros",  "cdom",   "nonfin", "overflow"};

// ---- device: one warp, one tile; A [16][K] row-major, B [8][K] (column n's K values), C, D
// [16][8]

#define MMA_OPERANDS                                                                               \
  : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                                 \
  : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),        \
    "f"(c[2]), "f"(c[3])

template <int II>
__device__ void mma_op(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                       const float (&c)[4]) {
  if constexpr (II == I_E4M3)
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};" MMA_OPERANDS);
  else if constexpr (II == I_E5M2)
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};" MMA_OPERANDS);
  else if constexpr (II == I_BF16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};" MMA_OPERANDS);
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%10,%11,%12,%13};" MMA_OPERANDS);
}

/* PTX ISA, mma.m16n8k32 fragments for 8-bit types and m16n8k16 for 16-bit ones: E elements a
 * register (K = 8E); A's register r holds row g (r even) or g+8 (r odd), columns tg*E.. (+4E for
 * r >= 2); B's register r holds k rows tg*E.. (+4E for r = 1) of column g; C and D alike for both
 */
template <typename T, int II>
__global__ void k_mma(const T *A, const T *B, const float *C, float *D, int ntiles) {
  constexpr int E = 4 / sizeof(T), K = 8 * E, BITS = 8 * sizeof(T);
  const int tile = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (tile >= ntiles) return;
  const int g = lane >> 2, tg = lane & 3;
  const T *a = A + (size_t)tile * 16 * K, *b = B + (size_t)tile * 8 * K;
  uint32_t ar[4] = {0, 0, 0, 0}, br[2] = {0, 0};
  for (int i = 0; i < 4 * E; i++) {
    const int r = i / E, row = (r & 1) ? g + 8 : g, col = tg * E + i % E + (r >= 2 ? 4 * E : 0);
    ar[r] |= (uint32_t)a[row * K + col] << (BITS * (i % E));
  }
  for (int i = 0; i < 2 * E; i++) {
    const int krow = tg * E + i % E + (i >= E ? 4 * E : 0);
    br[i / E] |= (uint32_t)b[g * K + krow] << (BITS * (i % E));
  }
  float c[4], d[4];
  for (int i = 0; i < 4; i++)
    c[i] = C[(size_t)tile * 128 + (g + (i >= 2 ? 8 : 0)) * 8 + tg * 2 + (i & 1)];
  mma_op<II>(d, ar, br, c);
  for (int i = 0; i < 4; i++)
    D[(size_t)tile * 128 + (g + (i >= 2 ? 8 : 0)) * 8 + tg * 2 + (i & 1)] = d[i];
}

// ---- host: operand generation (philox streams: instance, class, tile, element) ----

struct gen {
  uint64_t seed;
  uint32_t stream;
  uint64_t i = 0;
  uint64_t bits() { return mlr_rng_bits(seed, 77, stream, i++); }
  double uni() { return mlr_u64_to_uniform(bits()); }
  double normal() { return mlr_normal_quantile(uni()); }
  int range(int lo, int hi) { return lo + (int)(bits() % (uint64_t)(hi - lo + 1)); } // lo..hi
};

uint32_t code_of(mlr_format f, double x) {
  return mlr_encode_f64(x, f, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE, 0u);
}
uint32_t random_finite(gen &r, mlr_format f) {
  const int bits = mlr_format_get(f).bits;
  for (;;) {
    const uint32_t c = (uint32_t)(r.bits() & ((1u << bits) - 1));
    if (isfinite(mlr_decode(f, c))) return c;
  }
}
uint32_t neg_code(mlr_format f, uint32_t c) { return c ^ mlr_format_get(f).sign_bit; }
uint32_t subnormal(gen &r, mlr_format f) { // a subnormal code (or zero), random sign
  const uint32_t m = (uint32_t)(r.bits() & ((1u << mlr_format_get(f).t) - 1));
  return (r.bits() & 1) ? neg_code(f, m) : m;
}
float random_c(gen &r) { // a binary32 with a random exponent near the products' range
  return (float)ldexp(r.normal(), r.range(-24, 24));
}

// fills one tile's A (16 x K codes), B (8 x K codes), C (128 floats) for class cls
void make_tile(const inst &in, int cls, gen &r, uint32_t *A, uint32_t *B, float *C) {
  const int K = in.k;
  const mlr_format f = in.fmt;
  const mlr_format_params fp = mlr_format_get(f);
  const uint32_t nan = fp.bits == 8 ? 0x7Fu : fp.nan_code; // 0x7F: a NaN in e4m3 and e5m2
  const uint32_t inf = fp.inf_code ? fp.inf_code : nan;    // e4m3 has no Inf
  const int s = r.range(-4, 4);
  for (int v = 0; v < 16 + 8; v++) {
    uint32_t *x = v < 16 ? A + v * K : B + (v - 16) * K;
    for (int e = 0; e < K; e++) {
      uint32_t c = 0;
      switch (cls) {
      case C_RANDOM:
        c = random_finite(r, f);
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
          c = v < 16 ? neg_code(f, x[e - 1]) : x[e - 1]; // A: (x, -x); B: (y, y)
        break;
      case C_SPREAD: {
        const int span = f == MLR_FMT_BF16 ? 100 : f == MLR_FMT_FP16 || f == MLR_FMT_E5M2 ? 20 : 12;
        c = code_of(f, ldexp(1.0 + r.uni(), e == 0 ? s : s - r.range(0, span)) *
                           ((r.bits() & 1) ? -1 : 1));
        break;
      }
      case C_SUBNORM:
        c = (r.bits() % 4) ? subnormal(r, f) : code_of(f, ldexp(r.normal(), -2));
        break;
      case C_ZEROS: /* A all +-0, B +-0 or not: every product is a signed zero */
        c = v < 16 || (r.bits() & 1) ? ((r.bits() & 1) ? neg_code(f, 0) : 0u)
                                     : code_of(f, r.normal());
        break;
      case C_LAYOUT: /* small integers: every sum exact, so D is known without any model */
        c = code_of(f, v < 16 ? (double)((v + 2 * e) % 5 - 2) : (double)((v + e) % 3 - 1));
        break;
      case C_CDOM:
        c = code_of(f, ldexp(r.normal(), s));
        break;
      case C_NONFIN: {
        const int u = (int)(r.bits() % 16);
        c = u == 0   ? nan
            : u == 1 ? inf
            : u == 2 ? neg_code(f, inf)
                     : code_of(f, ldexp(r.normal(), s));
        break;
      }
      case C_OVERFLOW: {
        const double mx = mlr_format_max(f);
        c = code_of(f, mx * (0.5 + 0.5 * r.uni()) * ((r.bits() & 1) ? -1 : 1));
        break;
      }
      }
      x[e] = c;
    }
  }
  for (int k = 0; k < 128; k++) {
    float c = 0.0f;
    switch (cls) {
    case C_RANDOM:
      c = (r.bits() % 4) ? random_c(r) : 0.0f;
      break;
    case C_NORMAL:
    case C_CANCEL:
      c = (r.bits() % 4) ? (float)ldexp(r.normal(), 2 * s + r.range(-8, 4)) : 0.0f;
      break;
    case C_SPREAD:
      c = (r.bits() % 2) ? (float)ldexp(r.normal(), 2 * s - r.range(0, 60)) : 0.0f;
      break;
    case C_SUBNORM:
      c = (r.bits() % 2) ? (float)ldexp(r.uni() - 0.5, -126 - r.range(0, 20)) : 0.0f;
      break;
    case C_ZEROS:
      c = (r.bits() & 1) ? -0.0f : 0.0f;
      break;
    case C_LAYOUT:
      c = 0.0f;
      break;
    case C_CDOM:
      c = (float)ldexp(r.normal(), 2 * s + ((r.bits() & 1) ? r.range(12, 30) : -r.range(12, 40)));
      break;
    case C_NONFIN: {
      const int u = (int)(r.bits() % 8);
      c = u == 0 ? NAN : u == 1 ? INFINITY : u == 2 ? -INFINITY : (float)r.normal();
      break;
    }
    case C_OVERFLOW:
      c = (r.bits() % 2) ? (float)ldexp(r.normal(), 100) : 0.0f;
      break;
    }
    C[k] = c;
  }
}

struct result {
  long long n = 0, bad = 0, nan_pairs = 0;
  uint32_t nan_payload = 0;
  char first[3][512] = {{0}};
};

void die(const char *what) {
  fprintf(stderr, "mma_probe: %s\n", what);
  exit(2);
}
#define CK(call)                                                                                   \
  do {                                                                                             \
    const hipError_t e_ = (call);                                                                  \
    if (e_ != hipSuccess) {                                                                        \
      fprintf(stderr, "mma_probe: %s: %s\n", #call, hipGetErrorString(e_));                        \
      exit(2);                                                                                     \
    }                                                                                              \
  } while (0)

// runs ntiles tiles of one class through the GPU and the model; appends up to `keep` lines to fp
void run_class(const inst &in, int ii, int cls, long long ntiles, uint64_t seed, FILE *fp, int keep,
               result *res) {
  const int K = in.k, bytes = in.fmt == MLR_FMT_E4M3 || in.fmt == MLR_FMT_E5M2 ? 1 : 2;
  const mlr_mma_model *m = mlr_mma_get(in.unit);
  const long long chunk = 8192; // tiles a launch
  uint32_t *A = (uint32_t *)malloc(sizeof(uint32_t) * 16 * K * chunk),
           *B = (uint32_t *)malloc(sizeof(uint32_t) * 8 * K * chunk);
  float *C = (float *)malloc(sizeof(float) * 128 * chunk),
        *D = (float *)malloc(sizeof(float) * 128 * chunk);
  void *hA = malloc((size_t)bytes * 16 * K * chunk), *hB = malloc((size_t)bytes * 8 * K * chunk);
  void *dA, *dB;
  float *dC, *dD;
  if (!A || !B || !C || !D || !hA || !hB) die("out of memory");
  CK(hipMalloc(&dA, (size_t)bytes * 16 * K * chunk));
  CK(hipMalloc(&dB, (size_t)bytes * 8 * K * chunk));
  CK(hipMalloc((void **)&dC, sizeof(float) * 128 * chunk));
  CK(hipMalloc((void **)&dD, sizeof(float) * 128 * chunk));
  int kept = 0;
  for (long long t0 = 0; t0 < ntiles; t0 += chunk) {
    const int nt = (int)(ntiles - t0 < chunk ? ntiles - t0 : chunk);
    for (int t = 0; t < nt; t++) {
      gen r{seed, (uint32_t)(ii * 1000 + cls), 0};
      r.i = (uint64_t)(t0 + t) << 16;
      make_tile(in, cls, r, A + (size_t)t * 16 * K, B + (size_t)t * 8 * K, C + (size_t)t * 128);
    }
    for (size_t e = 0; e < (size_t)nt * 16 * K; e++)
      bytes == 1 ? (void)(((uint8_t *)hA)[e] = (uint8_t)A[e])
                 : (void)(((uint16_t *)hA)[e] = (uint16_t)A[e]);
    for (size_t e = 0; e < (size_t)nt * 8 * K; e++)
      bytes == 1 ? (void)(((uint8_t *)hB)[e] = (uint8_t)B[e])
                 : (void)(((uint16_t *)hB)[e] = (uint16_t)B[e]);
    CK(hipMemcpy(dA, hA, (size_t)bytes * 16 * K * nt, hipMemcpyHostToDevice));
    CK(hipMemcpy(dB, hB, (size_t)bytes * 8 * K * nt, hipMemcpyHostToDevice));
    CK(hipMemcpy(dC, C, sizeof(float) * 128 * nt, hipMemcpyHostToDevice));
    CK(hipMemset(dD, 0xFF, sizeof(float) * 128 * nt));
    const int warps = 8, blocks = (nt + warps - 1) / warps;
    if (ii == I_E4M3)
      k_mma<uint8_t, I_E4M3>
          <<<blocks, 32 * warps>>>((const uint8_t *)dA, (const uint8_t *)dB, dC, dD, nt);
    else if (ii == I_E5M2)
      k_mma<uint8_t, I_E5M2>
          <<<blocks, 32 * warps>>>((const uint8_t *)dA, (const uint8_t *)dB, dC, dD, nt);
    else if (ii == I_BF16)
      k_mma<uint16_t, I_BF16>
          <<<blocks, 32 * warps>>>((const uint16_t *)dA, (const uint16_t *)dB, dC, dD, nt);
    else
      k_mma<uint16_t, I_FP16>
          <<<blocks, 32 * warps>>>((const uint16_t *)dA, (const uint16_t *)dB, dC, dD, nt);
    CK(hipGetLastError());
    CK(hipMemcpy(D, dD, sizeof(float) * 128 * nt, hipMemcpyDeviceToHost));
    for (int t = 0; t < nt; t++)
      for (int row = 0; row < 16; row++)
        for (int n = 0; n < 8; n++) {
          const uint32_t *ac = A + (size_t)t * 16 * K + row * K,
                         *bc = B + (size_t)t * 8 * K + n * K;
          float a[32], b[32];
          for (int e = 0; e < K; e++) {
            a[e] = mlr_decode(in.fmt, ac[e]);
            b[e] = mlr_decode(in.fmt, bc[e]);
          }
          const float c = C[(size_t)t * 128 + row * 8 + n], hw = D[(size_t)t * 128 + row * 8 + n];
          float md = mlr_mma_block(m, a, b, K, c);
          if (cls == C_LAYOUT) { /* the exact sum (small integers), so a wrong fragment layout shows
                                    here */
            double x = 0.0;
            for (int e = 0; e < K; e++) x += (double)a[e] * (double)b[e];
            md = (float)x;
          }
          res->n++;
          int same = mlr_f32_bits(md) == mlr_f32_bits(hw);
          if (isnan(md) && isnan(hw)) {
            same = 1;
            res->nan_pairs++;
            res->nan_payload = mlr_f32_bits(hw);
          }
          if (!same) {
            if (res->bad < 3) {
              int o = snprintf(res->first[res->bad], 512, "C %08x hw %08x model %08x a",
                               mlr_f32_bits(c), mlr_f32_bits(hw), mlr_f32_bits(md));
              for (int e = 0; e < K && o < 480; e++)
                o += snprintf(res->first[res->bad] + o, 512 - o, " %x", ac[e]);
            }
            res->bad++;
          }
          if (fp && kept < keep) {
            fprintf(fp, "%08x %08x", mlr_f32_bits(c), mlr_f32_bits(hw));
            for (int e = 0; e < K; e++) fprintf(fp, bytes == 1 ? " %02x" : " %04x", ac[e]);
            for (int e = 0; e < K; e++) fprintf(fp, bytes == 1 ? " %02x" : " %04x", bc[e]);
            fprintf(fp, "\n");
            kept++;
          }
        }
  }
  CK(hipFree(dA));
  CK(hipFree(dB));
  CK(hipFree(dC));
  CK(hipFree(dD));
  free(A);
  free(B);
  free(C);
  free(D);
  free(hA);
  free(hB);
}

} // namespace

int main(int argc, char **argv) {
  long long nrandom = 1 << 20, ntarget = 1 << 14;
  uint64_t seed = 20261130;
  const char *out = nullptr;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
    char *end = nullptr;
    if (!strcmp(argv[i], "--random") && v) {
      nrandom = strtoll(v, &end, 10);
      i++;
    } else if (!strcmp(argv[i], "--targeted") && v) {
      ntarget = strtoll(v, &end, 10);
      i++;
    } else if (!strcmp(argv[i], "--seed") && v) {
      seed = strtoull(v, &end, 10);
      i++;
    } else if (!strcmp(argv[i], "--out") && v) {
      out = v;
      i++;
    } else {
      fprintf(stderr,
              "mma_probe: unknown argument '%s'; usage: mma_probe [--random N] [--targeted N] "
              "[--seed S] [--out DIR]\n",
              argv[i]);
      return 2;
    }
    if (end && (*end || nrandom < 1 || ntarget < 1)) {
      fprintf(stderr, "mma_probe: '%s' is not a positive integer (for %s)\n", v, argv[i - 1]);
      return 2;
    }
  }
  hipDeviceProp_t prop;
  CK(hipGetDeviceProperties(&prop, 0));
  if (out && mkdir(out, 0755) != 0 && errno != EEXIST) die("cannot create the output folder");
  FILE *sum = stdout, *sf = nullptr;
  if (out) {
    char path[1024];
    snprintf(path, sizeof path, "%s/summary.txt", out);
    sf = fopen(path, "w");
    if (!sf) die("cannot write summary.txt");
  }
  long long total = 0, bad = 0;
  int layout_bad = 0;
  char line[2048];
  snprintf(line, sizeof line,
           "mma_probe on %s (sm_%d%d), seed %llu: random %lld and targeted %lld inner products a "
           "class (whole tiles of 128)\n",
           prop.name, prop.major, prop.minor, (unsigned long long)seed, nrandom, ntarget);
  fputs(line, sum);
  if (sf) fputs(line, sf);
  for (int ii = 0; ii < NINST; ii++) {
    const inst &in = INSTS[ii];
    FILE *fp = nullptr;
    if (out) {
      char path[1024];
      snprintf(path, sizeof path, "%s/h200_probe_%s.txt", out, in.name);
      fp = fopen(path, "w");
      if (!fp) die("cannot write a vector file");
      fprintf(fp,
              "# H200 tensor-core vectors measured by gpu/probes/mma_probe.cu (mma.sync, %s "
              "operands, %d products,\n"
              "# fp32 C and D, D = the hardware's A.B + C), seed %llu. Line: C D a_0..a_(k-1) "
              "b_0..b_(k-1) (hex).\n",
              in.name, in.k, (unsigned long long)seed);
    }
    for (int cls = 0; cls < NCLASS; cls++) {
      if (cls == C_OVERFLOW && (in.fmt == MLR_FMT_E4M3 || in.fmt == MLR_FMT_E5M2))
        continue; // 448^2 * 32, 57344^2 * 32: far inside binary32
      result res;
      const long long n = cls == C_RANDOM || cls == C_NORMAL ? nrandom
                          : cls == C_LAYOUT                  ? 1024
                                                             : ntarget;
      if (fp) fprintf(fp, "# class %s\n", CLASS_NAMES[cls]);
      run_class(in, ii, cls, (n + 127) / 128, seed, fp, 256, &res);
      total += res.n;
      bad += res.bad;
      if (cls == C_LAYOUT && res.bad) layout_bad = 1;
      snprintf(line, sizeof line, "%-5s %-9s %9lld products %7lld differ%s", in.name,
               CLASS_NAMES[cls], res.n, res.bad, res.nan_pairs ? "" : "\n");
      fputs(line, sum);
      if (sf) fputs(line, sf);
      if (res.nan_pairs) {
        snprintf(line, sizeof line, " (%lld NaN on both sides; the hardware's NaN %08x)\n",
                 res.nan_pairs, res.nan_payload);
        fputs(line, sum);
        if (sf) fputs(line, sf);
      }
      for (int e = 0; e < 3 && e < res.bad; e++) {
        snprintf(line, sizeof line, "    %s\n", res.first[e]);
        fputs(line, sum);
        if (sf) fputs(line, sf);
      }
    }
    if (fp) fclose(fp);
  }
  snprintf(line, sizeof line, "total: %lld inner products, %lld differ from the model\n", total,
           bad);
  fputs(line, sum);
  if (sf) fputs(line, sf), fclose(sf);
  if (layout_bad)
    fprintf(stderr, "mma_probe: the layout check failed: the fragment layouts are wrong, no other "
                    "figure means anything\n");
  return layout_bad ? 2 : bad ? 1 : 0;
}
