/* mlr_pmath.h: portable elementary functions built only from IEEE 754 basic operations
 * (+ - * / sqrt, conversions) and explicit fma, so they return the same bits on every IEEE
 * platform, compiler and GPU once contraction is off (the build sets it).
 *
 * Algorithms: the classic fdlibm (Sun Microsystems, 1993) reductions and Remez
 * approximations, re-implemented here; the coefficients are fdlibm's, written as hex floats
 * (each equals the decimal fdlibm publishes; tests/pmath.c checks the ones that are a split
 * of a constant against MPFR). fdlibm's analysis bounds the error of exp and log below 1 ulp;
 * tests check every binary64 result against MPFR on random and special inputs and every
 * binary32 result exhaustively.
 *
 * binary32 versions evaluate the binary64 function and round once: error <= 1/2 ulp of the
 * binary32 result plus 2^-29 ulp from the binary64 result, below 1 ulp. */
#ifndef MLR_PMATH_H
#define MLR_PMATH_H

#include <math.h> /* fma only */
#include "mlr_base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MLR__LN2_HI      0x1.62e42feep-1       /* ln 2 to 32 bits: k*LN2_HI exact for |k| < 2^21 */
#define MLR__LN2_LO      0x1.a39ef35793c76p-33 /* ln 2 - LN2_HI */
#define MLR__INVLN2      0x1.71547652b82fep+0  /* 1/ln 2 */
#define MLR__LN2         0x1.62e42fefa39efp-1  /* ln 2 rounded to nearest */
#define MLR__LN2_TAIL    0x1.abc9e3b39803fp-56 /* ln 2 - MLR__LN2 (checked against MPFR) */
#define MLR__IVLN2_HI    0x1.71547652p+0       /* 1/ln 2 to 33 bits */
#define MLR__IVLN2_LO    0x1.705fc2eefa2p-33   /* 1/ln 2 - IVLN2_HI */
#define MLR__ROUND_MAGIC 0x1.8p52 /* x + 1.5*2^52 - 1.5*2^52 rounds |x| < 2^51 to an integer */

MLR_HD static inline double mlr__nan(void) { return mlr_bits_f64(0x7FF8000000000000ull); }
MLR_HD static inline double mlr__inf(void) { return mlr_bits_f64(0x7FF0000000000000ull); }

/* y * 2^k for y in [0.5, 2) and -1100 < k <= 1024, with a single rounding: the first product
 * below is exact (its result is normal), so only the last one can round. */
MLR_HD static inline double mlr__scale2(double y, int k) {
  if (k > 1023) return y * 2.0 * mlr_bits_f64((uint64_t)(1023 + 1023) << 52);
  if (k >= -1021) return y * mlr_bits_f64((uint64_t)(k + 1023) << 52);
  return (y * mlr_bits_f64((uint64_t)(k + 1000 + 1023) << 52)) * 0x1p-1000;
}

/* 2^k * e^(hi - lo), |hi - lo| <= ln2/2 (a little more is fine), lo a small correction.
 * fdlibm's e^r = 1 + r + r*c/(2 - c) with c = r - r^2*P(r^2) (Remez, error < 2^-59). */
MLR_HD static inline double mlr__exp_core(double hi, double lo, int k) {
  const double r = hi - lo, z = r * r;
  const double c = r - z * (0x1.555555555553ep-3 +
                            z * (-0x1.6c16c16bebd93p-9 +
                                 z * (0x1.1566aaf25de2cp-14 +
                                      z * (-0x1.bbd41c5d26bf1p-20 + z * 0x1.6376972bea4dp-25))));
  const double y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
  return mlr__scale2(y, k);
}

/** e^x, error below 1 ulp. */
MLR_HD static inline double mlr_exp(double x) {
  if (x != x) return x + x;
  if (x > 0x1.62e42fefa39efp+9) return mlr__inf(); /* > ln(DBL_MAX): overflows */
  if (x < -0x1.74910d52d3051p+9) return 0.0;       /* < ln(2^-1075): rounds to 0 */
  if (x > -0x1p-28 && x < 0x1p-28) return 1.0 + x; /* e^x = 1 + x + O(2^-57) */
  const double kd = (x * MLR__INVLN2 + MLR__ROUND_MAGIC) - MLR__ROUND_MAGIC;
  const int k = (int)kd;
  /* k*LN2_HI is exact and x - k*LN2_HI exact by Sterbenz's lemma around each k */
  return mlr__exp_core(x - kd * MLR__LN2_HI, kd * MLR__LN2_LO, k);
}

/** 2^x, error below 1 ulp. */
MLR_HD static inline double mlr_exp2(double x) {
  if (x != x) return x + x;
  if (x >= 1024.0) return mlr__inf();
  if (x <= -1076.0) return 0.0; /* 2^x < 2^-1075: below half the least subnormal */
  if (x > -0x1p-60 && x < 0x1p-60) return 1.0 + x; /* 2^x - 1 < 2^-60 rounds to 1 */
  const double kd = (x + MLR__ROUND_MAGIC) - MLR__ROUND_MAGIC;
  const double r = x - kd; /* exact: |r| <= 1/2 and both are multiples of ulp(x) */
  /* r*ln2 as hi + e with |e| <= ulp(hi): fma gives the product's rounding error exactly */
  const double hi = r * MLR__LN2;
  const double e = fma(r, MLR__LN2, -hi) + r * MLR__LN2_TAIL;
  return mlr__exp_core(hi, -e, (int)kd);
}

/* Split x > 0 (finite) into 2^k * (1 + f) with sqrt(2)/2 <= 1 + f < sqrt(2); hx receives
 * the high fraction word that fdlibm uses to choose a formula. Subnormals are scaled by 2^54
 * (exact). No branches: other inputs give garbage here and are replaced by the callers. */
MLR_HD static inline double mlr__log_reduce(double x, int *k, uint32_t *hx_out) {
  /* operands of selects are computed unconditionally, so compilers may if-convert */
  const int sub = mlr_f64_bits(x) < 0x0010000000000000ull;
  const double scaled = x * 0x1p54;
  uint64_t b = mlr_f64_bits(sub ? scaled : x);
  uint32_t hx = (uint32_t)(b >> 32);
  int kk = (int)(hx >> 20) - 1023 - (sub ? 54 : 0);
  hx &= 0x000fffffu;
  const uint32_t i = (hx + 0x95f64u) & 0x100000u; /* 0x95f64: fraction bits of sqrt(2) */
  b = ((uint64_t)(hx | (i ^ 0x3ff00000u)) << 32) | (b & 0xffffffffull);
  kk += (int)(i >> 20);
  *k = kk;
  *hx_out = hx;
  return mlr_bits_f64(b) - 1.0; /* exact: the operand is in [sqrt(2)/2, sqrt(2)) */
}

/* fdlibm's R(s^2) for log(1+f) = 2s + s*R, s = f/(2+f); Remez on [0, 0.1716], error < 2^-58.45 */
MLR_HD static inline double mlr__log_R(double z) {
  const double w = z * z;
  const double t1 =
      w * (0x1.999999997fa04p-2 + w * (0x1.c71c51d8e78afp-3 + w * 0x1.39a09d078c69fp-3));
  const double t2 =
      z * (0x1.5555555555593p-1 +
           w * (0x1.2492494229359p-2 + w * (0x1.7466496cb03dep-3 + w * 0x1.2f112df3e5244p-3)));
  return t2 + t1;
}

/* The results of log and log2 where x is not a positive finite number; r elsewhere. */
MLR_HD static inline double mlr__log_special(double x, double r) {
  const double quiet = x + x; /* a NaN input, quieted */
  r = x == mlr__inf() ? x : r;
  r = x == 0.0 ? -mlr__inf() : r;
  r = x < 0.0 ? mlr__nan() : r;
  return x != x ? quiet : r;
}

/** natural logarithm, error below 1 ulp. fdlibm's algorithm, written without branches: where
 *  fdlibm chooses between formulas, both are evaluated and one selected, and fdlibm's k == 0
 *  variants are the general expressions with the k terms equal to +0, which add and subtract
 *  exactly; so the bits are fdlibm's, and SIMD loops and GPU threads do not diverge. */
MLR_HD static inline double mlr_log(double x) {
  int k;
  uint32_t hx;
  const double f = mlr__log_reduce(x, &k, &hx);
  const double dk = (double)k;
  /* |f| < 2^-20: two terms of the series (f == 0 gives k*LN2_HI + k*LN2_LO, as fdlibm) */
  const double Rt = f * f * (0.5 - 0x1.5555555555555p-2 * f);
  const double tiny = dk * MLR__LN2_HI - ((Rt - dk * MLR__LN2_LO) - f);
  /* otherwise, with s = f/(2+f), one of two equal forms by where 1+f lies */
  const double s = f / (2.0 + f);
  const double R = mlr__log_R(s * s);
  const double hfsq = 0.5 * f * f;
  const double a = (hfsq - (s * (hfsq + R) + dk * MLR__LN2_LO)) - f;
  const double b = (s * (f - R) - dk * MLR__LN2_LO) - f;
  const int i = ((int)hx - 0x6147a) | (0x6b851 - (int)hx);
  const double r = ((0x000fffffu & (2u + hx)) < 3u) ? tiny : dk * MLR__LN2_HI - (i > 0 ? a : b);
  return mlr__log_special(x, r);
}

/** base-2 logarithm, error below 1 ulp; exact for powers of two. */
MLR_HD static inline double mlr_log2(double x) {
  int k;
  uint32_t hx;
  const double f = mlr__log_reduce(x, &k, &hx);
  const double hfsq = 0.5 * f * f;
  const double s = f / (2.0 + f);
  const double r = s * (hfsq + mlr__log_R(s * s)); /* log(1+f) = f - hfsq + r */
  /* (f - hfsq + r)/ln2 in extra precision: hi keeps 20 fraction bits, so hi*IVLN2_HI is exact */
  const double hi = mlr_bits_f64(mlr_f64_bits(f - hfsq) & 0xFFFFFFFF00000000ull);
  const double lo = (f - hi) - hfsq + r;
  const double val_hi = hi * MLR__IVLN2_HI;
  const double val_lo = (lo + hi) * MLR__IVLN2_LO + lo * MLR__IVLN2_HI;
  /* k + val_hi + val_lo: Fast2Sum recovers the rounding error of k + val_hi exactly
   * (|k| >= 1 > |val_hi|, or k = 0) */
  const double y = (double)k, w = y + val_hi;
  return mlr__log_special(x, (val_lo + ((y - w) + val_hi)) + w);
}

/** binary32 versions: the binary64 result rounded once (error < 1/2 + 2^-29 ulp). */
MLR_HD static inline float mlr_expf(float x) { return (float)mlr_exp((double)x); }
MLR_HD static inline float mlr_exp2f(float x) { return (float)mlr_exp2((double)x); }
MLR_HD static inline float mlr_logf(float x) { return (float)mlr_log((double)x); }
MLR_HD static inline float mlr_log2f(float x) { return (float)mlr_log2((double)x); }

#ifdef __cplusplus
}
#endif
#endif
