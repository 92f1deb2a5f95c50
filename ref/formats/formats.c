/* Names, option validation and bulk conversions for mlr_formats.h. */
#include "mlr_formats.h"

#include <stdlib.h>
#include <string.h>

static const char *const fmt_names[MLR_FMT_COUNT] = {"e4m3",     "e4m3fnuz", "e5m2",
                                                     "e5m2fnuz", "bf16",     "fp16"};
static const char *const rnd_names[] = {"rne", "rtz", "sr"};
static const char *const ovf_names[] = {"sat", "nonsat", "legacy"};

const char *mlr_format_name(mlr_format f) {
  return (unsigned)f < MLR_FMT_COUNT ? fmt_names[f] : NULL;
}
const char *mlr_rounding_name(mlr_rounding r) { return (unsigned)r < 3 ? rnd_names[r] : NULL; }
const char *mlr_overflow_name(mlr_overflow o) { return (unsigned)o < 3 ? ovf_names[o] : NULL; }
const char *mlr_format_names(void) { return "e4m3|e4m3fnuz|e5m2|e5m2fnuz|bf16|fp16"; }
const char *mlr_rounding_names(void) { return "rne|rtz|sr"; }
const char *mlr_overflow_names(void) { return "sat|nonsat|legacy"; }

static int find_name(const char *s, const char *const *names, int n) {
  if (!s) return -1;
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

mlr_status mlr_format_parse(const char *s, mlr_format *out) {
  int i = find_name(s, fmt_names, MLR_FMT_COUNT);
  if (i < 0 && s && strcmp(s, "e4m3fn") == 0) i = MLR_FMT_E4M3;
  if (i < 0 && s && strcmp(s, "f16") == 0) i = MLR_FMT_FP16;
  if (i < 0) return MLR_EFORMAT;
  *out = (mlr_format)i;
  return MLR_OK;
}

mlr_status mlr_rounding_parse(const char *s, mlr_rounding *out) {
  int i = find_name(s, rnd_names, 3);
  if (i < 0) return MLR_EROUNDING;
  *out = (mlr_rounding)i;
  return MLR_OK;
}

mlr_status mlr_overflow_parse(const char *s, mlr_overflow *out) {
  int i = find_name(s, ovf_names, 3);
  if (i < 0) return MLR_EOVERFLOW_MODE;
  *out = (mlr_overflow)i;
  return MLR_OK;
}

mlr_status mlr_cvt_opts_check(const mlr_cvt_opts *o) {
  if (!o) return MLR_EINVAL;
  if ((unsigned)o->format >= MLR_FMT_COUNT) return MLR_EFORMAT;
  if ((unsigned)o->rounding > MLR_RND_STOCHASTIC) return MLR_EROUNDING;
  if ((unsigned)o->overflow > MLR_OVF_LEGACY) return MLR_EOVERFLOW_MODE;
  return MLR_OK;
}

static mlr_status check_array_args(const void *dst, const void *src, size_t n,
                                   const mlr_cvt_opts *o, const uint32_t *rbits) {
  mlr_status st = mlr_cvt_opts_check(o);
  if (st != MLR_OK) return st;
  if (n && (!dst || !src)) return MLR_EINVAL;
  if (n && o->rounding == MLR_RND_STOCHASTIC && !rbits) return MLR_EINVAL;
  return MLR_OK;
}

typedef struct enc_ctx {
  void *dst;
  const void *src;
  mlr_cvt_opts o;
  const uint32_t *rbits;
} enc_ctx;

/* Nearest-even from binary32, specialised on a constant format and overflow mode so that the
 * parameters fold into the loop and it vectorises. */
#define MLR__RNE_LOOP(DT, F, O)                                                                    \
  for (size_t i = i0; i < i1; i++) ((DT *)c->dst)[i] = (DT)mlr__encode_f32_rne(s[i], F, O)
#define MLR__RNE_OVF(DT, F)                                                                        \
  switch (c->o.overflow) {                                                                         \
  case MLR_OVF_SATURATE:                                                                           \
    MLR__RNE_LOOP(DT, F, MLR_OVF_SATURATE);                                                        \
    break;                                                                                         \
  case MLR_OVF_NONSAT:                                                                             \
    MLR__RNE_LOOP(DT, F, MLR_OVF_NONSAT);                                                          \
    break;                                                                                         \
  default:                                                                                         \
    MLR__RNE_LOOP(DT, F, MLR_OVF_LEGACY);                                                          \
    break;                                                                                         \
  }

MLR_SIMD_CLONES static void enc_f32_rne_range(void *ctx, size_t i0, size_t i1) {
  const enc_ctx *c = (const enc_ctx *)ctx;
  const float *s = (const float *)c->src;
  switch (c->o.format) {
  case MLR_FMT_E4M3:
    MLR__RNE_OVF(uint8_t, MLR_FMT_E4M3) break;
  case MLR_FMT_E4M3FNUZ:
    MLR__RNE_OVF(uint8_t, MLR_FMT_E4M3FNUZ) break;
  case MLR_FMT_E5M2:
    MLR__RNE_OVF(uint8_t, MLR_FMT_E5M2) break;
  case MLR_FMT_E5M2FNUZ:
    MLR__RNE_OVF(uint8_t, MLR_FMT_E5M2FNUZ) break;
  case MLR_FMT_BF16:
    MLR__RNE_OVF(uint16_t, MLR_FMT_BF16) break;
  default:
    MLR__RNE_OVF(uint16_t, MLR_FMT_FP16) break;
  }
}

/* Every other mode goes through the generic binary64 encoder. */
static void enc_generic_range(void *ctx, size_t i0, size_t i1, int src_is_f64) {
  const enc_ctx *c = (const enc_ctx *)ctx;
  const mlr_format f = c->o.format;
  const int wide = mlr_format_get(f).bits == 16;
  for (size_t i = i0; i < i1; i++) {
    const double x = src_is_f64 ? ((const double *)c->src)[i] : (double)((const float *)c->src)[i];
    const uint32_t code =
        mlr_encode_f64(x, f, c->o.rounding, c->o.overflow, c->rbits ? c->rbits[i] : 0u);
    if (wide)
      ((uint16_t *)c->dst)[i] = (uint16_t)code;
    else
      ((uint8_t *)c->dst)[i] = (uint8_t)code;
  }
}
static void enc_generic_f32_range(void *ctx, size_t i0, size_t i1) {
  enc_generic_range(ctx, i0, i1, 0);
}
static void enc_generic_f64_range(void *ctx, size_t i0, size_t i1) {
  enc_generic_range(ctx, i0, i1, 1);
}

mlr_status mlr_encode_f32_array(void *dst, const float *src, size_t n, const mlr_cvt_opts *o,
                                const uint32_t *rbits) {
  mlr_status st = check_array_args(dst, src, n, o, rbits);
  if (st != MLR_OK) return st;
  enc_ctx c = {dst, src, *o, o->rounding == MLR_RND_STOCHASTIC ? rbits : NULL};
  mlr_parallel_ranges(
      n, 65536, o->rounding == MLR_RND_NEAREST_EVEN ? enc_f32_rne_range : enc_generic_f32_range,
      &c);
  return MLR_OK;
}

mlr_status mlr_encode_f64_array(void *dst, const double *src, size_t n, const mlr_cvt_opts *o,
                                const uint32_t *rbits) {
  mlr_status st = check_array_args(dst, src, n, o, rbits);
  if (st != MLR_OK) return st;
  enc_ctx c = {dst, src, *o, o->rounding == MLR_RND_STOCHASTIC ? rbits : NULL};
  mlr_parallel_ranges(n, 65536, enc_generic_f64_range, &c);
  return MLR_OK;
}

mlr_status mlr_decode_array(float *dst, const void *src, size_t n, mlr_format f) {
  if ((unsigned)f >= MLR_FMT_COUNT) return MLR_EFORMAT;
  if (n && (!dst || !src)) return MLR_EINVAL;
  const long long nn = (long long)n;
  if (f == MLR_FMT_BF16) { /* bf16 is the top half of binary32: a shift is the exact decode */
    const uint16_t *s = (const uint16_t *)src;
    uint32_t *d = (uint32_t *)(void *)dst;
#pragma omp parallel for schedule(static) if (nn > 65536)
    for (long long i = 0; i < nn; i++) {
      const uint32_t w = (uint32_t)s[i] << 16; /* NaNs canonicalised as mlr_decode does */
      d[i] = (w & 0x7FFFFFFFu) > 0x7F800000u ? (0x7FC00000u | (w & 0x80000000u)) : w;
    }
    return MLR_OK;
  }
  if (mlr_format_get(f).bits == 8) { /* a 256-entry table of the scalar decode */
    float table[256];
    for (int c = 0; c < 256; c++) table[c] = mlr_decode(f, (uint32_t)c);
    const uint8_t *s = (const uint8_t *)src;
#pragma omp parallel for schedule(static) if (nn > 65536)
    for (long long i = 0; i < nn; i++) dst[i] = table[s[i]];
    return MLR_OK;
  }
  const uint16_t *s = (const uint16_t *)src;
#pragma omp parallel for schedule(static) if (nn > 65536)
  for (long long i = 0; i < nn; i++) dst[i] = mlr_decode(f, s[i]);
  return MLR_OK;
}

static uint32_t enc_pattern(uint32_t pat, mlr_format f, mlr_rounding rnd, mlr_overflow ovf) {
  return mlr_encode_f32(mlr_bits_f32(pat), f, rnd, ovf, 0u);
}

mlr_status mlr_encode_boundaries(mlr_format f, mlr_rounding rnd, mlr_overflow ovf, uint32_t **pats,
                                 uint32_t **codes, size_t *n) {
  const mlr_cvt_opts o = {f, rnd, ovf};
  mlr_status st = mlr_cvt_opts_check(&o);
  if (st != MLR_OK) return st;
  if (rnd == MLR_RND_STOCHASTIC) return MLR_EROUNDING;
  if (!pats || !codes || !n) return MLR_EINVAL;
  size_t cap = 1024, cnt = 0;
  uint32_t *P = malloc(cap * sizeof *P), *C = malloc(cap * sizeof *C);
  if (!P || !C) {
    free(P);
    free(C);
    return MLR_ENOMEM;
  }
  uint64_t p = 0;
  uint32_t c = enc_pattern(0, f, rnd, ovf);
  for (;;) {
    if (cnt == cap) {
      cap *= 2;
      uint32_t *P2 = realloc(P, cap * sizeof *P), *C2 = P2 ? realloc(C, cap * sizeof *C) : NULL;
      if (P2) P = P2;
      if (!P2 || !C2) {
        free(P);
        free(C);
        return MLR_ENOMEM;
      }
      C = C2;
    }
    P[cnt] = (uint32_t)p;
    C[cnt] = c;
    cnt++;
    /* Gallop to an upper bound of the run of c, then bisect: lo has code c, hi does not. */
    uint64_t lo = p, step = 1, hi;
    for (;;) {
      hi = lo + step;
      if (hi > 0xFFFFFFFFull) {
        hi = 0x100000000ull;
        break;
      }
      if (enc_pattern((uint32_t)hi, f, rnd, ovf) != c) break;
      lo = hi;
      step *= 2;
    }
    if (hi == 0x100000000ull) { /* the run may reach the end: check the last pattern */
      if (enc_pattern(0xFFFFFFFFu, f, rnd, ovf) == c) break;
      hi = 0xFFFFFFFFull;
    }
    while (hi - lo > 1) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (enc_pattern((uint32_t)mid, f, rnd, ovf) == c)
        lo = mid;
      else
        hi = mid;
    }
    p = hi;
    c = enc_pattern((uint32_t)p, f, rnd, ovf);
  }
  *pats = P;
  *codes = C;
  *n = cnt;
  return MLR_OK;
}
