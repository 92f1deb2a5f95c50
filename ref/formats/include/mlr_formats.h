/* mlr_formats.h: 8- and 16-bit floating-point formats, scalar and header-only so that GPU
 * kernels (through MLR_HD) and the CPU model share one source.
 *
 * Contracts. S = sign, E = exponent field, M = fraction field. A finite code with E = 0 is
 * subnormal: (-1)^S * M * 2^(emin - t); otherwise (-1)^S * (2^t + M) * 2^(E - bias - t), where t is
 * the number of fraction bits and emin = 1 - bias.
 *
 *   format    layout      bias  max (code)           min norm  min sub  NaN          Inf     -0
 *   e4m3      S EEEE MMM     7  448 (0x7E)           2^-6      2^-9     0x7F, 0xFF   none    0x80
 *   e4m3fnuz  S EEEE MMM     8  240 (0x7F)           2^-7      2^-10    0x80 only    none    none
 *   e5m2      S EEEEE MM    15  57344 (0x7B)         2^-14     2^-16    E=31, M!=0   0x7C    0x80
 *   e5m2fnuz  S EEEEE MM    16  57344 (0x7F)         2^-15     2^-17    0x80 only    none    none
 *   bf16      S E*8 M*7    127  0x1.fep127 (0x7F7F)  2^-126    2^-133   E=255, M!=0  0x7F80  0x8000
 *   fp16      S E*5 M*10    15  65504 (0x7BFF)       2^-14     2^-24    E=31, M!=0   0x7C00  0x8000
 *
 * e4m3 is OCP 8-bit floating point E4M3 (NVIDIA sm_89+, AMD gfx950): E=15, M=7 is NaN, so
 * E=15 carries finite values up to 448. The FNUZ variants (AMD gfx940/941/942) have no
 * infinities, no negative zero (0x80 is the only NaN) and a bias one larger, so the same code
 * means half the value of its OCP twin. e5m2, bf16 and fp16 follow IEEE 754 rules.
 *
 * Encoding (binary32 or binary64 in, code out) rounds first, as if the exponent range were
 * unbounded above, then applies the overflow rule to a result beyond the largest finite:
 *   MLR_OVF_SATURATE  +-max. Infinite inputs also give +-max (NVIDIA cvt...satfinite).
 *   MLR_OVF_NONSAT    +-Inf where the format has it, else NaN (PyTorch, ml_dtypes casts).
 *   MLR_OVF_LEGACY    non-saturating, but tests |x| > max before rounding, so the values in
 *                     (max, max + ulp/2] that round down to max still overflow (an older
 *                     amd_hip_fp8.h).
 * Rounding toward zero never overflows a finite input: like IEEE 754 (7.4) it gives +-max.
 * NaN inputs give the format's canonical NaN with the input's sign (0x80 for FNUZ): 0x7F,
 * 0x7E (e5m2, quiet bit set), 0x7FC0 (bf16), 0x7E00 (fp16). Zero and results that round to zero
 * keep their sign, except in FNUZ formats, which give 0x00. Stochastic rounding takes 32
 * caller-supplied random bits r and rounds away from zero when f + r >= 2^32, where f is the
 * discarded fraction of one unit in the last place scaled to 32 bits (truncated): with uniform
 * r, the probability of rounding away is floor(f)/2^32, proportional to the distance.
 *
 * Decoding gives binary32 exactly: every code of these formats is a binary32 value. */
#ifndef MLR_FORMATS_H
#define MLR_FORMATS_H

#include <stddef.h>
#include "mlr_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Number formats. Values are stable: they are written into files. */
typedef enum mlr_format {
  MLR_FMT_E4M3 = 0,     /**< OCP E4M3 ("float8_e4m3fn"), max 448, NaN 0x7F/0xFF */
  MLR_FMT_E4M3FNUZ = 1, /**< E4M3 FNUZ ("float8_e4m3fnuz"), max 240, NaN 0x80 */
  MLR_FMT_E5M2 = 2,     /**< OCP E5M2 ("float8_e5m2"), IEEE-like, max 57344, Inf 0x7C */
  MLR_FMT_E5M2FNUZ = 3, /**< E5M2 FNUZ ("float8_e5m2fnuz"), max 57344, NaN 0x80 */
  MLR_FMT_BF16 = 4,     /**< bfloat16 */
  MLR_FMT_FP16 = 5,     /**< IEEE binary16 */
  MLR_FMT_COUNT = 6
} mlr_format;

/** Rounding modes for encoding. */
typedef enum mlr_rounding {
  MLR_RND_NEAREST_EVEN = 0, /**< to nearest, ties to even */
  MLR_RND_TOWARD_ZERO = 1,  /**< truncation */
  MLR_RND_STOCHASTIC = 2    /**< away from zero with probability proportional to the distance */
} mlr_rounding;

/** What an encoding does with a result beyond the largest finite value. */
typedef enum mlr_overflow {
  MLR_OVF_SATURATE = 0, /**< +-max (Inf inputs too) */
  MLR_OVF_NONSAT = 1,   /**< +-Inf, or NaN where the format has no Inf; after rounding */
  MLR_OVF_LEGACY = 2    /**< like NONSAT but |x| > max is tested before rounding */
} mlr_overflow;

/** The parameters that define a format (see the table above). */
typedef struct mlr_format_params {
  int bits;          /**< storage bits: 8 or 16 */
  int t;             /**< fraction bits */
  int bias;          /**< exponent bias */
  int emin;          /**< exponent of the smallest normal, 1 - bias */
  int fnuz;          /**< 1: no -0, no Inf, the single NaN is the sign-bit code */
  uint32_t sign_bit; /**< 0x80 or 0x8000 */
  uint32_t max_code; /**< magnitude code of the largest finite value */
  uint32_t inf_code; /**< +Inf code, 0 when the format has none */
  uint32_t nan_code; /**< canonical positive NaN code (FNUZ: the only NaN, 0x80) */
} mlr_format_params;

/* A format's parameters from its row of the table above: emin and sign_bit follow. */
MLR_HD static inline mlr_format_params mlr__format_params(int bits, int t, int bias, int fnuz,
                                                          uint32_t max_code, uint32_t inf_code,
                                                          uint32_t nan_code) {
  const mlr_format_params p = {
      bits, t, bias, 1 - bias, fnuz, bits == 8 ? 0x80u : 0x8000u, max_code, inf_code, nan_code};
  return p;
}

MLR_HD static inline mlr_format_params mlr_format_get(mlr_format f) {
  switch (f) { /* bits, t, bias, fnuz, max_code, inf_code, nan_code */
  case MLR_FMT_E4M3FNUZ:
    return mlr__format_params(8, 3, 8, 1, 0x7F, 0, 0x80);
  case MLR_FMT_E5M2:
    return mlr__format_params(8, 2, 15, 0, 0x7B, 0x7C, 0x7E);
  case MLR_FMT_E5M2FNUZ:
    return mlr__format_params(8, 2, 16, 1, 0x7F, 0, 0x80);
  case MLR_FMT_BF16:
    return mlr__format_params(16, 7, 127, 0, 0x7F7F, 0x7F80, 0x7FC0);
  case MLR_FMT_FP16:
    return mlr__format_params(16, 10, 15, 0, 0x7BFF, 0x7C00, 0x7E00);
  case MLR_FMT_E4M3:
  default:
    return mlr__format_params(8, 3, 7, 0, 0x7E, 0, 0x7F);
  }
}

/* 2^p as binary32 for -149 <= p <= 127, built from bits (no arithmetic, so no flush). */
MLR_HD static inline float mlr__pow2f(int p) {
  return mlr_bits_f32(p >= -126 ? (uint32_t)(p + 127) << 23 : 1u << (p + 149));
}

/** 1 if code is a NaN of format f. */
MLR_HD static inline int mlr_is_nan(mlr_format f, uint32_t code) {
  const mlr_format_params p = mlr_format_get(f);
  const uint32_t mag = code & (p.sign_bit - 1u);
  if (p.fnuz) return code == p.sign_bit;
  if (p.inf_code == 0) return mag == p.nan_code; /* OCP e4m3: S.1111.111 */
  return mag > p.inf_code;                       /* IEEE-like: E all ones, M != 0 */
}

/** The binary32 value of a code (exact). Bits above the format's width are ignored. */
MLR_HD static inline float mlr_decode(mlr_format f, uint32_t code) {
  const mlr_format_params p = mlr_format_get(f);
  code &= (p.sign_bit << 1) - 1u;
  const uint32_t s = (code & p.sign_bit) ? 0x80000000u : 0u;
  const uint32_t mag = code & (p.sign_bit - 1u);
  if (mlr_is_nan(f, code)) return mlr_bits_f32(0x7FC00000u | s);
  if (p.inf_code && mag == p.inf_code) return mlr_bits_f32(0x7F800000u | s);
  const uint32_t e = mag >> p.t, m = mag & ((1u << p.t) - 1u);
  uint32_t bits;
  if (e == 0) /* M * 2^(emin - t): an integer below 2^t times a power of two, exact */
    bits = mlr_f32_bits((float)m * mlr__pow2f(p.emin - p.t));
  else /* the exponent is rebiased, the fraction moved up: exact by construction */
    bits = ((e - (uint32_t)p.bias + 127u) << 23) | (m << (23 - p.t));
  return mlr_bits_f32(bits | s);
}

/** The largest finite value of a format as binary32. */
MLR_HD static inline float mlr_format_max(mlr_format f) {
  return mlr_decode(f, mlr_format_get(f).max_code);
}

MLR_HD static inline uint32_t mlr__nan_result(const mlr_format_params p, uint32_t sgn) {
  return p.fnuz ? p.nan_code : (p.nan_code | sgn);
}

MLR_HD static inline uint32_t mlr__overflow_result(const mlr_format_params p, uint32_t sgn,
                                                   mlr_overflow ovf) {
  if (ovf == MLR_OVF_SATURATE) return p.max_code | sgn;
  if (p.inf_code) return p.inf_code | sgn;
  return mlr__nan_result(p, sgn);
}

/* The generic encoder from binary64 (every format, mode and input); mlr_encode_f64 below adds
 * a fast path and is otherwise this function. */
MLR_HD static inline uint32_t mlr__encode_f64_generic(double x, mlr_format f, mlr_rounding rnd,
                                                      mlr_overflow ovf, uint32_t rbits) {
  const mlr_format_params p = mlr_format_get(f);
  const uint64_t b = mlr_f64_bits(x);
  const uint32_t sgn = (b >> 63) ? p.sign_bit : 0u;
  const int E = (int)((b >> 52) & 0x7FF);
  uint64_t sig = b & 0x000FFFFFFFFFFFFFull;
  if (E == 0x7FF) return sig ? mlr__nan_result(p, sgn) : mlr__overflow_result(p, sgn, ovf);
  if (E == 0 && sig == 0) return p.fnuz ? 0u : sgn;
  if (ovf == MLR_OVF_LEGACY && (b & ~(1ull << 63)) > mlr_f64_bits((double)mlr_format_max(f)))
    return mlr__overflow_result(p, sgn, ovf);
  /* |x| = sig * 2^q with 2^ex <= |x| < 2^(ex+1). */
  int ex, q;
  if (E == 0) {
    ex = 63 - MLR__CLZ64(sig) - 1074;
    q = -1074;
  } else {
    sig |= 1ull << 52;
    ex = E - 1023;
    q = E - 1075;
  }
  /* The result is a multiple of 2^(eq - t), eq = max(ex, emin). shift >= 1 for every format
   * here because binary64 carries more fraction bits than any of them and reaches lower. */
  const int eq = ex > p.emin ? ex : p.emin;
  const int shift = eq - p.t - q;
  uint64_t kept = shift < 64 ? sig >> shift : 0u;
  uint64_t up = 0;
  if (rnd == MLR_RND_NEAREST_EVEN) {
    if (shift < 64) { /* for shift >= 64, sig < 2^53 is below half a unit: rounds to 0 */
      const uint64_t half = 1ull << (shift - 1), rem = sig & ((half << 1) - 1u);
      up = rem > half || (rem == half && (kept & 1u));
    }
  } else if (rnd == MLR_RND_STOCHASTIC) {
    uint64_t frac32; /* the first 32 bits of the discarded fraction */
    if (shift <= 32)
      frac32 = (sig << (32 - shift)) & 0xFFFFFFFFull;
    else if (shift - 32 < 64)
      frac32 = (sig >> (shift - 32)) & 0xFFFFFFFFull;
    else
      frac32 = 0;
    up = (frac32 + rbits) >> 32;
  }
  kept += up;
  /* Code of a normal value: ((ex - emin) << t) + (2^t + M); a subnormal's is kept itself.
   * A carry out of the fraction moves into the exponent field, which is what rounding up
   * to the next binade means. */
  const int64_t code = ((int64_t)(eq - p.emin) << p.t) + (int64_t)kept;
  if (code > (int64_t)p.max_code)
    return rnd == MLR_RND_TOWARD_ZERO ? (p.max_code | sgn) : mlr__overflow_result(p, sgn, ovf);
  if (code == 0 && p.fnuz) return 0u;
  return (uint32_t)code | sgn;
}

/* binary64 -> bf16, nearest even, for the bf16 normal range 2^-126 <= |x| < 2^128 without
 * overflow: round-half-even at bit 45 of the binary64 pattern (7 fraction bits kept), a carry
 * moving into the exponent, then rebias 1023 -> 127. Returns 1 and the code when it applies, 0
 * otherwise (the generic path then decides). Branch-free, so loops over it vectorise.
 * tests/formats.c compares it with the generic path on random binary64 inputs. */
MLR_HD static inline int mlr__encode_f64_bf16_fast(double x, uint32_t *code) {
  const uint64_t b = mlr_f64_bits(x), a = b & ~(1ull << 63);
  const uint64_t c =
      ((a + ((1ull << 44) - 1u) + ((a >> 45) & 1u)) >> 45) - ((uint64_t)(1023 - 127) << 7);
  *code = (uint32_t)c | ((b >> 63) ? 0x8000u : 0u);
  return (a >= (uint64_t)(1023 - 126) << 52) & (a < (uint64_t)(1023 + 128) << 52) &
         (c <= 0x7F7Fu); /* no short circuit */
}

/** Encode a binary64 value: one rounding from binary64 straight to the format (no detour
 *  through binary32, so no double rounding). rbits is read only by MLR_RND_STOCHASTIC. */
MLR_HD static inline uint32_t mlr_encode_f64(double x, mlr_format f, mlr_rounding rnd,
                                             mlr_overflow ovf, uint32_t rbits) {
  uint32_t code; /* legacy mode tests |x| > max before rounding: only the generic path does that */
  if (f == MLR_FMT_BF16 && rnd == MLR_RND_NEAREST_EVEN && ovf != MLR_OVF_LEGACY &&
      mlr__encode_f64_bf16_fast(x, &code))
    return code;
  return mlr__encode_f64_generic(x, f, rnd, ovf, rbits);
}

/* Round to nearest even from binary32 without branches, so bulk loops vectorise. Exhaustively
 * checked against the generic path's oracle in tests/formats_exhaustive.c. */
MLR_HD static inline uint32_t mlr__encode_f32_rne(float x, mlr_format f, mlr_overflow ovf) {
  const mlr_format_params p = mlr_format_get(f);
  const uint32_t b = mlr_f32_bits(x), s = b & 0x80000000u, a = b ^ s;
  const uint32_t sgn = s ? p.sign_bit : 0u;
  const int sh = 23 - p.t;
  /* Normal results: integer round-half-even on the bit pattern; a carry moves into the
   * exponent. Rebiasing turns the binary32 exponent field into the format's. */
  const uint32_t rn = (a + ((1u << (sh - 1)) - 1u) + ((a >> sh) & 1u)) >> sh;
  const uint32_t code_n = rn - ((uint32_t)(127 - p.bias) << p.t);
  /* Subnormal results: |x| < 2^emin added to M = 2^(emin - t + 23) lands in [M, 2M), whose
   * ulp is the format's subnormal step, so the binary32 addition rounds exactly as wanted. */
  const float M = mlr__pow2f(p.emin - p.t + 23);
  const uint32_t code_s = mlr_f32_bits(mlr_bits_f32(a) + M) - mlr_f32_bits(M);
  const uint32_t code = a < ((uint32_t)(p.emin + 127) << 23) ? code_s : code_n;
  const int over = ovf == MLR_OVF_LEGACY ? a > mlr_f32_bits(mlr_format_max(f)) : code > p.max_code;
  uint32_t r =
      over ? mlr__overflow_result(p, sgn, ovf) : ((code == 0 && p.fnuz) ? 0u : (code | sgn));
  return a > 0x7F800000u ? mlr__nan_result(p, sgn) : r;
}

/** Encode a binary32 value. */
MLR_HD static inline uint32_t mlr_encode_f32(float x, mlr_format f, mlr_rounding rnd,
                                             mlr_overflow ovf, uint32_t rbits) {
  if (rnd == MLR_RND_NEAREST_EVEN) return mlr__encode_f32_rne(x, f, ovf);
  return mlr_encode_f64((double)x, f, rnd, ovf, rbits); /* binary32 -> binary64 is exact */
}

/** Round a binary32 value through a format and back (quantize-dequantize). */
MLR_HD static inline float mlr_round_f32(float x, mlr_format f, mlr_overflow ovf) {
  return mlr_decode(f, mlr__encode_f32_rne(x, f, ovf));
}

/* ---- the amd-mixed-mla task's per-tensor quantization (reference.py quantize_fp8) ---- */

/** The task's scale from amax (the max |x| of a bf16 tensor, exact in bf16): amax.clamp(min=1e-12)
 *  (the bound rounded to bf16 first: 0x2B8D), then amax / finfo.max, a bf16 tensor divided by a
 *  Python float. PyTorch's GPU kernel multiplies by the binary32 reciprocal of a CPU scalar
 *  divisor, then rounds to bf16. For every positive bf16 amax this equals true division after the
 *  bf16 rounding (fmax 448 and 240); scripts/gpu_run.sh checks all 32639 values against torch on
 *  CUDA. The result is a bf16 value, returned as binary32 (the task's .to(float32)). */
MLR_HD static inline float mlr_task_scale(float amax, float fmax) {
  const float floor_ = mlr_bits_f32(0x2B8Du << 16); /* bf16(1e-12) */
  if (amax < floor_) amax = floor_;
  const float inv = 1.0f / fmax;
  return mlr_bits_f32(mlr__encode_f32_rne(amax * inv, MLR_FMT_BF16, MLR_OVF_NONSAT) << 16);
}

/** One element of the task's quantization before the clamp: bf16(x / scale), a bf16 tensor
 *  divided by a one-element tensor (binary32 quotient rounded to bf16). */
MLR_HD static inline float mlr_task_quant_unclamped(uint16_t bf16, float scale) {
  return mlr_bits_f32(
      mlr__encode_f32_rne(mlr_bits_f32((uint32_t)bf16 << 16) / scale, MLR_FMT_BF16, MLR_OVF_NONSAT)
      << 16);
}

/** ... then clamped to [-fmax, fmax] (exact: 448 and 240 are bf16 values); NaN passes, as
 *  torch.clamp. The cast to fp8 that follows is mlr__encode_f32_rne(.., MLR_OVF_NONSAT) (round
 *  to nearest even; nothing overflows). */
MLR_HD static inline float mlr_task_quant_value(uint16_t bf16, float scale, float fmax) {
  const float x = mlr_task_quant_unclamped(bf16, scale);
  return x > fmax ? fmax : (x < -fmax ? -fmax : x);
}

/* ---- host-only: names, validation and bulk conversion ---- */

/** Options of a conversion. */
typedef struct mlr_cvt_opts {
  mlr_format format;
  mlr_rounding rounding;
  mlr_overflow overflow;
} mlr_cvt_opts;

/** MLR_OK, or MLR_EFORMAT / MLR_EROUNDING / MLR_EOVERFLOW_MODE for the first bad field. */
mlr_status mlr_cvt_opts_check(const mlr_cvt_opts *o);

/** Canonical names: "e4m3", "e4m3fnuz", "e5m2", "e5m2fnuz", "bf16", "fp16"; NULL if invalid. */
const char *mlr_format_name(mlr_format f);
/** "rne", "rtz", "sr". */
const char *mlr_rounding_name(mlr_rounding r);
/** "sat", "nonsat", "legacy". */
const char *mlr_overflow_name(mlr_overflow o);
/** Parse a canonical name (aliases: "e4m3fn" for e4m3, "f16" for fp16). */
mlr_status mlr_format_parse(const char *s, mlr_format *out);
mlr_status mlr_rounding_parse(const char *s, mlr_rounding *out);
mlr_status mlr_overflow_parse(const char *s, mlr_overflow *out);
/** The valid names joined by '|', for error messages. */
const char *mlr_format_names(void);
const char *mlr_rounding_names(void);
const char *mlr_overflow_names(void);

/** Encode n values. dst holds n codes of the format's width (uint8_t or uint16_t). rbits
 *  (n words) is required for MLR_RND_STOCHASTIC and ignored otherwise. OpenMP over
 *  elements; every element is independent, so the result does not depend on threads. */
mlr_status mlr_encode_f32_array(void *dst, const float *src, size_t n, const mlr_cvt_opts *o,
                                const uint32_t *rbits);
mlr_status mlr_encode_f64_array(void *dst, const double *src, size_t n, const mlr_cvt_opts *o,
                                const uint32_t *rbits);
/** Decode n codes (uint8_t or uint16_t by format) to binary32. */
mlr_status mlr_decode_array(float *dst, const void *src, size_t n, mlr_format f);

/** The boundaries of an encoding over all 2^32 binary32 bit patterns: every pattern, in
 *  increasing order from 0x00000000, whose code differs from the previous pattern's (the first
 *  entry is pattern 0). *pats and *codes are malloc'd arrays of *n entries; the caller frees
 *  them. Rounding must be nearest-even or toward zero (stochastic rounding has no boundaries).
 *  The search relies on each code's preimage within one sign being an interval, which holds
 *  because encoding is monotone in magnitude; tests/formats_exhaustive.c checks every list
 *  against a scan of all 2^32 patterns. */
mlr_status mlr_encode_boundaries(mlr_format f, mlr_rounding rnd, mlr_overflow ovf, uint32_t **pats,
                                 uint32_t **codes, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
