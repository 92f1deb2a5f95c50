// wgmma_probe: runs Hopper's warpgroup matrix instruction (wgmma.mma_async, fp32 C and D; A from
// registers, B from shared memory through a descriptor, no swizzle) on random and targeted inner
// products with e4m3 and e5m2 operands (m64n8k32: QGMMA, the fp8 unit) and fp16 and bf16 ones
// (m64n8k16: HGMMA), and counts the D that differ from ref/mma's model of each (mlr_mma_block):
// sm90-e4m3 (one 32-product block, 13 fraction bits, the published vectors' fit, C a term of the
// alignment, a subnormal input at its format's least normal exponent), sm90-e5m2, and sm90-f16 and
// sm90-bf16, the models fitted to mma.sync m16n8k16's vectors (gpu/probes/mma_probe.cu); for fp8,
// for contrast, sm90-e4m3-sync (mma.sync's lowering).
//
// A warpgroup (4 warps) computes one 64x8 tile D = A B + C: 512 inner products of 32 bytes of
// operands each (32 fp8 or 16 16-bit values). Each warp holds 16 rows of A in the m16n8k32 (fp8) or
// m16n8k16 (16-bit) A-fragment layout, which put the same bytes of a row in the same registers, and
// 16 rows of D in the m16n8 C/D layout (PTX ISA, wgmma register fragments). B (8 x 32 bytes,
// K-major, as fp8 wgmma requires; the 16-bit forms are run so too, and fp16 once more MN-major,
// imm-trans-b 1, on fp16's own vectors: kind fp16t) sits in shared memory as two 8x16-byte core
// matrices (the no-swizzle canonical layout: rows of 16 bytes, 128 bytes a core matrix, the second
// core matrix 128 bytes on: the leading-dimension byte offset).
//
// Usage: wgmma_probe [--n N] [--seed S] [--out DIR]   (N inner products a class, default 2^20)
//   DIR: writes DIR/summary.txt, DIR/DEV_wgmma_KIND.txt (KIND e4m3, e5m2, fp16, bf16, fp16t; 256
//   vectors a class, C D a b; DEV h200, h100 or gpu, from the device's name) and
//   DEV_wgmma_KIND_misses.txt (a class's first 256 vectors the fitted model misses).
// Exit status: 0 every D matches its fitted model (e4m3, e5m2, fp16, fp16t; bf16's misses printed,
// not counted), 1 not, 2 usage or no device.
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

enum { KB = 32, ROWS = 64, COLS = 8, TILE = ROWS * COLS }; /* KB: a row's bytes */
enum { C_RANDOM = 0, C_NORMAL, C_CANCEL, C_SPREAD, C_SUBNORM, C_ZEROS, C_CDOM, C_NONFIN, NCLASS };
const char *CLASS_NAMES[NCLASS] = {"random",  "normal", "cancel", "spread",
                                   "subnorm", "zeros",  "cdom",   "nonfin"};

/* the operand kinds: e4m3, e5m2 (k32), fp16, bf16 (k16), and fp16 with B MN-major (imm-trans-b 1:
 * the layout of a V tile as B, rows of 8 columns' values for one k) */
enum { OP_E4M3 = 0, OP_E5M2, OP_F16, OP_BF16, OP_F16T, NOP };
#define WG_OP(SHAPE_TYPES, TAIL)                                                                   \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sync.aligned." SHAPE_TYPES \
               " {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1" TAIL ";\n}\n"                          \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                    \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc))
template <int OP>
__device__ __forceinline__ void wgmma_op(float (&d)[4], const uint32_t (&a)[4], uint64_t desc) {
  if constexpr (OP == OP_E4M3)
    WG_OP("m64n8k32.f32.e4m3.e4m3", "");
  else if constexpr (OP == OP_E5M2)
    WG_OP("m64n8k32.f32.e5m2.e5m2", "");
  else if constexpr (OP == OP_F16)
    WG_OP("m64n8k16.f32.f16.f16", ", 0"); /* imm-trans-b 0: B K-major */
  else if constexpr (OP == OP_F16T)
    WG_OP("m64n8k16.f32.f16.f16", ", 1"); /* imm-trans-b 1: B MN-major */
  else
    WG_OP("m64n8k16.f32.bf16.bf16", ", 0");
}

/* one warpgroup a tile: A [64][32] bytes row-major, B [8][32] (column n's K values' bytes), C,
 * D [64][8] */
template <int OP>
__global__ void __launch_bounds__(128)
    k_wgmma(const uint8_t *A, const uint8_t *B, const float *C, float *D) {
  __shared__ __align__(128) uint8_t bs[256];
  const int tile = blockIdx.x, tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane >> 2,
            tg = lane & 3;
  const uint8_t *a = A + (size_t)tile * ROWS * KB, *b = B + (size_t)tile * COLS * KB;
  for (int i = tid; i < COLS * KB; i += 128) {
    const int n = i / KB, k = i % KB; /* byte k of column n */
    if (OP == OP_F16T) /* core matrix (k / 16): row k / 2 % 8 holds the 8 columns' values */
      bs[(k / 16) * 128 + (k / 2 % 8) * 16 + 2 * n + k % 2] = b[i];
    else /* core matrix (k / 16): row n's 16 bytes at 16 n */
      bs[(k / 16) * 128 + n * 16 + k % 16] = b[i];
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::
                   : "memory"); /* the generic stores, seen by wgmma */
  __syncthreads();
  uint32_t ar[4] = {0, 0, 0, 0};
  for (int i = 0; i < 16; i++) { /* the A fragment of this warp's 16 rows, byte by byte */
    const int r = i / 4, row = 16 * warp + ((r & 1) ? g + 8 : g),
              col = tg * 4 + i % 4 + (r >= 2 ? 16 : 0);
    ar[r] |= (uint32_t)a[row * KB + col] << (8 * (i % 4));
  }
  float d[4];
  for (int i = 0; i < 4; i++)
    d[i] = C[(size_t)tile * TILE + (16 * warp + g + (i >= 2 ? 8 : 0)) * COLS + tg * 2 + (i & 1)];
  const uint32_t addr = (uint32_t)__cvta_generic_to_shared(bs);
  /* descriptor: start address >> 4 (bits 0-13), leading byte offset 128 >> 4 (bits 16-29), stride
   * byte offset 256 >> 4 (bits 32-45; MN-major: 128, so that either offset steps to the second
   * core matrix along K, the only step N = 8 takes), no swizzle (bits 62-63 = 0) */
  const uint64_t desc = (uint64_t)((addr >> 4) & 0x3FFF) | (uint64_t)(128 >> 4) << 16 |
                        (uint64_t)((OP == OP_F16T ? 128 : 256) >> 4) << 32;
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  wgmma_op<OP>(d, ar, desc);
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

/* an operand kind: its format, bytes a value, values an inner product, model, file tag, and
 * whether the model is fitted to wgmma (its misses make the exit status 1; bf16: sm90-bf16 is
 * mma.sync's, and misses wgmma's subnormal cases, docs/numerics.md) */
struct kind {
  mlr_format f;
  int es;
  mlr_mma_unit unit;
  const char *name;
  int fitted;
  int k() const { return KB / es; }
};
const kind KINDS[NOP] = {{MLR_FMT_E4M3, 1, MLR_MMA_SM90_E4M3, "e4m3", 1},
                         {MLR_FMT_E5M2, 1, MLR_MMA_SM90_E5M2, "e5m2", 1},
                         {MLR_FMT_FP16, 2, MLR_MMA_SM90_F16, "fp16", 1},
                         {MLR_FMT_BF16, 2, MLR_MMA_SM90_BF16, "bf16", 0},
                         {MLR_FMT_FP16, 2, MLR_MMA_SM90_F16, "fp16t", 1}};

uint32_t code_of(mlr_format f, double x) {
  return mlr_encode_f64(x, f, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE, 0u);
}

/* one value's code for class cls (x: the vector's codes so far) */
uint32_t class_code(mlr_format f, int cls, gen &r, int s, bool in_a, const uint32_t *x, int e,
                    int k) {
  const mlr_format_params fp = mlr_format_get(f);
  const uint32_t sign = fp.sign_bit, inf = fp.inf_code,
                 nan = fp.bits == 8 ? 0x7Fu : fp.nan_code; /* 0x7F: a NaN in e4m3 and e5m2 */
  uint32_t c = 0;
  switch (cls) {
  case C_RANDOM:
    do c = (uint32_t)(r.bits() & (2 * sign - 1));
    while (!isfinite(mlr_decode(f, c)));
    return c;
  case C_NORMAL:
  case C_CDOM:
    return code_of(f, ldexp(r.normal(), s));
  case C_CANCEL:
    if (e >= k - 4) return code_of(f, ldexp(r.normal(), s - 6));
    if (e % 2 == 0) return code_of(f, ldexp(r.normal(), s));
    return in_a ? x[e - 1] ^ sign : x[e - 1];
  case C_SPREAD:
    return code_of(f, ldexp(1.0 + r.uni(), e == 0 ? s : s - r.range(0, 12)) *
                          ((r.bits() & 1) ? -1 : 1));
  case C_SUBNORM: /* a subnormal code (or zero) of either sign, or a normal value */
    return (r.bits() % 4) ? (uint32_t)(r.bits() & (sign | ((1u << fp.t) - 1)))
                          : code_of(f, ldexp(r.normal(), -2));
  case C_ZEROS: /* every product +-0 */
    return in_a || (r.bits() & 1) ? (uint32_t)(r.bits() & sign) : code_of(f, r.normal());
  default: { /* C_NONFIN: NaN, and Inf where the format has it (e4m3 has none) */
    const int u = (int)(r.bits() % 16);
    return u == 0                        ? nan
           : u == 1 && f != MLR_FMT_E4M3 ? inf
           : u == 2 && f != MLR_FMT_E4M3 ? inf | sign
                                         : code_of(f, ldexp(r.normal(), s));
  }
  }
}

/* one tile's A (64 x k codes) and B (8 x k), as the device's bytes (little-endian codes), and C */
void make_tile(const kind &kd, int cls, gen &r, uint8_t *A, uint8_t *B, float *C) {
  const int s = r.range(-4, 4), k = kd.k();
  for (int v = 0; v < ROWS + COLS; v++) {
    uint8_t *x = v < ROWS ? A + v * KB : B + (v - ROWS) * KB;
    uint32_t codes[KB];
    for (int e = 0; e < k; e++) {
      codes[e] = class_code(kd.f, cls, r, s, v < ROWS, codes, e, k);
      for (int byte = 0; byte < kd.es; byte++)
        x[kd.es * e + byte] = (uint8_t)(codes[e] >> (8 * byte));
    }
  }
  for (int i = 0; i < TILE; i++) {
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
    C[i] = c;
  }
}
/* a value of a row of bytes */
uint32_t code_at(const kind &kd, const uint8_t *x, int e) {
  return kd.es == 1 ? x[e] : (uint32_t)x[2 * e] | (uint32_t)x[2 * e + 1] << 8;
}

#define CK(call)                                                                                   \
  do {                                                                                             \
    const cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "wgmma_probe: %s: %s\n", #call, cudaGetErrorString(e_));                     \
      exit(2);                                                                                     \
    }                                                                                              \
  } while (0)

/* the tiles of one run on the device and back: A, B, C in, D out */
struct bufs {
  int nt;
  uint8_t *A, *B, *dA, *dB;
  float *C, *D, *dC, *dD;
};
void launch(int op, bufs &b) {
  const size_t na = (size_t)b.nt * ROWS * KB, nb = (size_t)b.nt * COLS * KB,
               nc = sizeof(float) * TILE * b.nt;
  CK(cudaMemcpy(b.dA, b.A, na, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b.dB, b.B, nb, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b.dC, b.C, nc, cudaMemcpyHostToDevice));
  CK(cudaMemset(b.dD, 0xFF, nc));
  void (*const k[NOP])(const uint8_t *, const uint8_t *, const float *, float *) = {
      k_wgmma<OP_E4M3>, k_wgmma<OP_E5M2>, k_wgmma<OP_F16>, k_wgmma<OP_BF16>, k_wgmma<OP_F16T>};
  k[op]<<<b.nt, 128>>>(b.dA, b.dB, b.dC, b.dD);
  CK(cudaGetLastError());
  CK(cudaMemcpy(b.D, b.dD, nc, cudaMemcpyDeviceToHost));
}

/* a vector as a line of the kept files: C D a b (hex) */
void put_vector(FILE *fp, const kind &kd, float c, float hw, const uint8_t *ac, const uint8_t *bc) {
  fprintf(fp, "%08x %08x", mlr_f32_bits(c), mlr_f32_bits(hw));
  for (int e = 0; e < 2 * kd.k(); e++)
    fprintf(fp, kd.es == 1 ? " %02x" : " %04x", code_at(kd, e < kd.k() ? ac : bc, e % kd.k()));
  fprintf(fp, "\n");
}

/* one class of one kind: the misses of the fitted model (and of fp8's contrast, mma.sync's
 * lowering); kept in fp, the class's first 256 vectors, and in mf, its first 256 misses of the
 * fitted model; the summary line into line */
long long run_class(int op, int cls, uint64_t seed, bufs &b, FILE *fp, FILE *mf, char *line,
                    size_t nline) {
  const kind &kd = KINDS[op];
  const int k = kd.k();
  const mlr_mma_model *models[2] = {mlr_mma_get(kd.unit),
                                    kd.es == 1 ? mlr_mma_get(MLR_MMA_SM90_E4M3_SYNC) : nullptr};
  /* fp16t: fp16's vectors, so that the two layouts of B are compared on the same products */
  gen r{seed * 16 + (uint64_t)((op == OP_F16T ? OP_F16 : op) * NCLASS + cls)};
  for (int t = 0; t < b.nt; t++)
    make_tile(kd, cls, r, b.A + (size_t)t * ROWS * KB, b.B + (size_t)t * COLS * KB,
              b.C + (size_t)t * TILE);
  launch(op, b);
  long long bad[2] = {0, 0}, nc0 = 0, kept = 0, nan_d = 0;
  char first[256] = {0};
  for (long long i = 0; i < (long long)b.nt * TILE; i++) {
    const long long t = i / TILE, row = i % TILE / COLS, col = i % COLS;
    const uint8_t *ac = b.A + (t * ROWS + row) * KB, *bc = b.B + (t * COLS + col) * KB;
    float a[KB], bv[KB];
    for (int e = 0; e < k; e++) {
      a[e] = mlr_decode(kd.f, code_at(kd, ac, e));
      bv[e] = mlr_decode(kd.f, code_at(kd, bc, e));
    }
    const float c = b.C[i], hw = b.D[i];
    nc0 += c == 0.0f;
    nan_d += isnan(hw) != 0;
    for (int m = 0; m < 2 && models[m]; m++) {
      const float md = mlr_mma_block(models[m], a, bv, k, c);
      if (mlr_f32_bits(md) == mlr_f32_bits(hw) || (isnan(md) && isnan(hw))) continue;
      if (!m && !bad[0])
        snprintf(first, sizeof first, "; first miss: C %08x hw %08x model %08x", mlr_f32_bits(c),
                 mlr_f32_bits(hw), mlr_f32_bits(md));
      if (!m && mf && bad[0] < 256) put_vector(mf, kd, c, hw, ac, bc);
      bad[m]++;
    }
    if (fp && kept++ < 256) put_vector(fp, kd, c, hw, ac, bc);
  }
  char contrast[128] = "";
  if (models[1]) snprintf(contrast, sizeof contrast, ", %s %lld", models[1]->name, bad[1]);
  snprintf(line, nline,
           "%s %-8s %9lld products (C = 0: %lld, NaN D: %lld); differ: %s%s %lld%s%s\n", kd.name,
           CLASS_NAMES[cls], (long long)b.nt * TILE, nc0, nan_d, models[0]->name,
           kd.fitted ? "" : " (mma.sync's, not counted)", bad[0], contrast, first);
  return kd.fitted ? bad[0] : 0;
}

/* a kept file, DIR/DEV_wgmma_NAME.txt (what: "" or "_misses"), with its header */
FILE *kept_file(const char *out, const char *dev, const kind &kd, const char *what, uint64_t seed) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s_wgmma_%s%s.txt", out, dev, kd.name, what);
  FILE *fp = fopen(path, "w");
  if (!fp) {
    fprintf(stderr, "wgmma_probe: cannot write %s\n", path);
    exit(2);
  }
  fprintf(fp,
          "# %s wgmma.mma_async m64n8k%d vectors%s%s (%s operands, %d products, fp32 C and D, D = "
          "the hardware's A.B + C),\n"
          "# measured by gpu/probes/wgmma_probe.cu, seed %llu. Line: C D a_0..a_%d b_0..b_%d "
          "(hex).\n",
          dev, kd.k(), *what ? " that this model misses: " : "",
          *what ? mlr_mma_get(kd.unit)->name : "", kd.name, kd.k(), (unsigned long long)seed,
          kd.k() - 1, kd.k() - 1);
  return fp;
}

/* every class of one kind; DIR/DEV_wgmma_NAME.txt and _misses.txt when out is set */
long long run_kind(int op, uint64_t seed, bufs &b, const char *out, const char *dev, FILE *sf) {
  const kind &kd = KINDS[op];
  FILE *fp = out ? kept_file(out, dev, kd, "", seed) : nullptr,
       *mf = out ? kept_file(out, dev, kd, "_misses", seed) : nullptr;
  long long worst = 0;
  for (int cls = 0; cls < NCLASS; cls++) {
    char line[1024];
    if (fp) fprintf(fp, "# class %s\n", CLASS_NAMES[cls]);
    if (mf) fprintf(mf, "# class %s\n", CLASS_NAMES[cls]);
    worst += run_class(op, cls, seed, b, fp, mf, line, sizeof line);
    fputs(line, stdout);
    if (sf) fputs(line, sf);
  }
  if (fp) fclose(fp);
  if (mf) fclose(mf);
  return worst;
}

int usage(const char *arg) {
  fprintf(stderr,
          "wgmma_probe: unknown argument '%s'; usage: wgmma_probe [--n N] [--seed S] [--out DIR]\n",
          arg);
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  long long n = 1 << 20;
  uint64_t seed = 20261130;
  const char *out = nullptr;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!v) return usage(argv[i]);
    if (!strcmp(argv[i], "--n"))
      n = atoll(v);
    else if (!strcmp(argv[i], "--seed"))
      seed = strtoull(v, nullptr, 10);
    else if (!strcmp(argv[i], "--out"))
      out = v;
    else
      return usage(argv[i]);
    i++;
  }
  if (n < TILE) n = TILE;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  if (out && mkdir(out, 0755) != 0 && errno != EEXIST) return 2;
  const char *dev = strstr(prop.name, "H200") ? "h200" : strstr(prop.name, "H100") ? "h100" : "gpu";
  bufs b;
  b.nt = (int)((n + TILE - 1) / TILE);
  b.A = (uint8_t *)malloc((size_t)b.nt * ROWS * KB);
  b.B = (uint8_t *)malloc((size_t)b.nt * COLS * KB);
  b.C = (float *)malloc(sizeof(float) * TILE * b.nt);
  b.D = (float *)malloc(sizeof(float) * TILE * b.nt);
  CK(cudaMalloc(&b.dA, (size_t)b.nt * ROWS * KB));
  CK(cudaMalloc(&b.dB, (size_t)b.nt * COLS * KB));
  CK(cudaMalloc(&b.dC, sizeof(float) * TILE * b.nt));
  CK(cudaMalloc(&b.dD, sizeof(float) * TILE * b.nt));
  FILE *sf = nullptr;
  if (out) {
    char path[1024];
    snprintf(path, sizeof path, "%s/summary.txt", out);
    sf = fopen(path, "w");
  }
  char line[1024];
  snprintf(line, sizeof line,
           "wgmma_probe on %s (sm_%d%d), seed %llu: %lld inner products a class (tiles of 512), "
           "wgmma.m64n8k32 (fp8) and m64n8k16 (fp16, bf16; fp16t: B MN-major), A regs, B smem\n",
           prop.name, prop.major, prop.minor, (unsigned long long)seed, (long long)b.nt * TILE);
  fputs(line, stdout);
  if (sf) fputs(line, sf);
  long long worst = 0;
  for (int op = 0; op < NOP; op++) worst += run_kind(op, seed, b, out, dev, sf);
  if (sf) fclose(sf);
  return worst ? 1 : 0;
}
#endif
