/* mlr_exact.h: exact sums of binary64 values, rounded once to binary32 (the `exact` dot model).
 *
 * Every operand the model multiplies has at most a 24-bit significand, so each product is exact
 * in binary64 (48 <= 53 bits; the exponent range of binary32 products, 2^-298 .. 2^256, is
 * inside binary64's). The accumulator is a fixed-point integer in 32-bit digits (Kulisch's long
 * accumulator): digit k weighs 2^(32k + MLR_XACC_EBASE). A binary64 m * 2^e (m a 53-bit
 * integer) adds into three consecutive digits with no rounding. Digits are signed 64-bit, so up
 * to 2^30 additions fit before a carry pass (each adds less than 2^32 per digit); mlr_xacc_add
 * normalises every 2^20 additions.
 *
 * Rounding: the sum's top 64 bits plus a sticky bit give a 53-bit round-to-odd binary64; rounding
 * that to binary32 (nearest even) is the correctly rounded binary32 of the exact sum, because
 * round-to-odd at p >= q + 2 bits followed by round-to-nearest at q bits is exact rounding
 * (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using
 * rounding to odd", IEEE TC 2008). Header-only: usable by the GPU exact kernel too. */
#ifndef MLR_EXACT_H
#define MLR_EXACT_H

#include <math.h>
#include <stdint.h>

#include "mlr_base.h"

enum {
  MLR_XACC_EBASE = -352, /* below 2^-298 (the least product) and a multiple of 32 */
  MLR_XACC_DIGITS = 22   /* up to 2^(32*22 - 352) = 2^352 > 2^256 * 2^30 additions * margin */
};

typedef struct mlr_xacc {
  int64_t d[MLR_XACC_DIGITS];
  uint32_t adds;
} mlr_xacc;

MLR_HD static inline void mlr_xacc_clear(mlr_xacc *a) {
  for (int k = 0; k < MLR_XACC_DIGITS; k++) a->d[k] = 0;
  a->adds = 0;
}

/* carries: every digit but the top in [0, 2^32); the top keeps the sign */
MLR_HD static inline void mlr_xacc_normalize(mlr_xacc *a) {
  for (int k = 0; k + 1 < MLR_XACC_DIGITS; k++) {
    const int64_t c = a->d[k] >> 32; /* arithmetic shift: floor division by 2^32 */
    a->d[k] -= c * ((int64_t)1 << 32);
    a->d[k + 1] += c;
  }
  a->adds = 0;
}

/** a += x exactly; x finite with |x| < 2^256 and x a multiple of 2^-352 (any product of two
 *  binary32 values, any binary32 value). NaN and Inf are the caller's to handle. */
MLR_HD static inline void mlr_xacc_add(mlr_xacc *a, double x) {
  const uint64_t b = mlr_f64_bits(x);
  const int be = (int)((b >> 52) & 0x7FF);
  uint64_t m = b & 0xFFFFFFFFFFFFFull;
  if (be == 0 && m == 0) return;
  int e; /* x = m * 2^e */
  if (be) {
    m |= 1ull << 52;
    e = be - 1075;
  } else
    e = -1074;
  const int p = e - MLR_XACC_EBASE, k = p >> 5, sh = p & 31;
  const uint64_t lo = (m & 0xFFFFFFFFu) << sh, hi = (m >> 32) << sh; /* < 2^63 and < 2^52 */
  const int64_t s = (b >> 63) ? -1 : 1;
  a->d[k] += s * (int64_t)(lo & 0xFFFFFFFFu);
  a->d[k + 1] += s * (int64_t)((lo >> 32) + (hi & 0xFFFFFFFFu));
  a->d[k + 2] += s * (int64_t)(hi >> 32);
  if (++a->adds >= (1u << 20)) mlr_xacc_normalize(a);
}

/* |value| = w * 2^lsb_exp (w with its top bit set) plus a sticky bit below it, to binary32 by
 * round-to-odd at 53 bits then nearest even (exact: see the top of this file) */
MLR_HD static inline float mlr__round_window_f32(uint64_t w, int sticky, int lsb_exp, int neg) {
  uint64_t r = w >> 11;                                  /* 53 bits */
  if ((w & 0x7FFu) || sticky) r |= 1;                    /* round to odd */
  const float f = (float)ldexp((double)r, lsb_exp + 11); /* ldexp exact: r < 2^53, normal range */
  return neg ? -f : f;
}

/** The exact sum rounded to binary32, nearest even (+0 for an exact zero). */
MLR_HD static inline float mlr_xacc_round_f32(mlr_xacc *a) {
  mlr_xacc_normalize(a);
  uint32_t g[MLR_XACC_DIGITS]; /* magnitude digits */
  int neg = a->d[MLR_XACC_DIGITS - 1] < 0;
  uint64_t borrow = 0;
  for (int k = 0; k < MLR_XACC_DIGITS; k++) {
    uint64_t v = (uint64_t)a->d[k] & 0xFFFFFFFFu;
    if (neg) { /* two's complement negation, digit by digit */
      const uint64_t t = ((uint64_t)1 << 32) - v - borrow;
      g[k] = (uint32_t)t;
      borrow = (v + borrow) != 0 ? 1 : 0;
    } else
      g[k] = (uint32_t)v;
  }
  int h = MLR_XACC_DIGITS - 1;
  while (h >= 0 && g[h] == 0) h--;
  if (h < 0) return 0.0f;
  /* 64-bit window w with its top bit set, and sticky for the bits below it */
  uint64_t w = (uint64_t)g[h] << 32 | (h >= 1 ? g[h - 1] : 0u);
  int lz = 0;
  while (!(w >> 63)) {
    w <<= 1;
    lz++;
  }
  int sticky = 0;
  if (h >= 2) {
    w |= lz ? (uint64_t)g[h - 2] >> (32 - lz) : 0u;
    sticky = ((uint32_t)((uint64_t)g[h - 2] << lz)) != 0;
    for (int k = h - 3; k >= 0 && !sticky; k--) sticky = g[k] != 0;
  }
  return mlr__round_window_f32(w, sticky, 32 * (h - 1) - lz + MLR_XACC_EBASE, neg);
}

/* ---- a faster exact sum for operands of limited range: a 128-bit fixed-point integer ----
 * A binary32 x = m * 2^e with m odd (or 0); a product of two is (m1 m2) * 2^(e1 + e2), m1 m2 <
 * 2^48. When every e1 + e2 >= G and every |product| < 2^T, n products sum exactly in a signed
 * 128-bit integer in units of 2^G if T + ceil(log2 n) - G <= 126 (mlr_i128_fits). */
#if defined(__SIZEOF_INT128__)
__extension__ typedef __int128 mlr_i128;

/** x = *m * 2^*e with *m odd, or *m = 0; x finite. */
MLR_HD static inline void mlr_f32_split(float x, int64_t *m, int *e) {
  uint32_t mm;
  const int ee = mlr_f32_sig(x, &mm);
  if (!mm) {
    *m = 0;
    *e = 0;
    return;
  }
  const int tz = MLR__CTZ32(mm);
  *m = (mlr_f32_bits(x) >> 31) ? -(int64_t)(mm >> tz) : (int64_t)(mm >> tz);
  *e = ee + tz;
}

/** Widen a range (*lsb, *top) to take in one finite binary32 value x: its odd significand's lsb
 *  exponent and the T with |x| < 2^T; a zero changes nothing. Start from (1000, -1000). */
MLR_HD static inline void mlr_f32_range_add(float x, int *lsb, int *top) {
  int64_t m;
  int e;
  mlr_f32_split(x, &m, &e);
  if (!m) return;
  const int t = e + 64 - MLR__CLZ64((uint64_t)(m < 0 ? -m : m)); /* |x| < 2^t */
  if (e < *lsb) *lsb = e;
  if (t > *top) *top = t;
}

/** The range of a vector of finite binary32 values: smallest lsb exponent (of the odd
 *  significands) and the exponent T with every |x| < 2^T; an all-zero vector gives lsb > T. */
MLR_HD static inline void mlr_f32_range(const float *x, int64_t n, int64_t stride, int *lsb,
                                        int *top) {
  int lo = 1000, hi = -1000;
  for (int64_t i = 0; i < n; i++) mlr_f32_range_add(x[i * stride], &lo, &hi);
  *lsb = lo;
  *top = hi;
}

/* the bits that n products of vectors with ranges (lsb1, top1), (lsb2, top2) and any partial sum
 * of them span, in units of 2^(lsb1 + lsb2): the sum of n terms below 2^T stays below
 * 2^(T + ceil(log2 (n + 1))) */
MLR_HD static inline int mlr__sum_bits(int lsb1, int top1, int lsb2, int top2, int64_t n) {
  int lg = 0;
  while (((int64_t)1 << lg) < n + 1) lg++;
  return top1 + top2 + lg - (lsb1 + lsb2);
}

/** n products of vectors with ranges (lsb1, top1), (lsb2, top2) sum exactly in units of 2^(lsb1 +
 * lsb2) */
MLR_HD static inline int mlr_i128_fits(int lsb1, int top1, int lsb2, int top2, int64_t n) {
  return mlr__sum_bits(lsb1, top1, lsb2, top2, n) <= 126;
}

/** ... and exactly in binary64, in any order: every partial sum is a multiple of 2^(lsb1 + lsb2)
 *  below 2^53 of those units */
MLR_HD static inline int mlr_f64_fits(int lsb1, int top1, int lsb2, int top2, int64_t n) {
  return mlr__sum_bits(lsb1, top1, lsb2, top2, n) <= 53;
}

/* ---- the exact sum in two binary64 chains: one operand split at a power of two ----
 * When the products of x (range lsbx, topx) and y (lsby, topy) span too many bits for one binary64
 * chain, split each x at 2^s: xh = x rounded to a multiple of 2^s, xl = x - xh, both exact
 * (mlr_f64_split). With n products:
 *   hi = sum xh*y: multiples of 2^(s + lsby); |xh| <= 2^topx (a multiple of 2^s when s <= topx,
 *        so rounding x cannot pass it), so every partial sum is below 2^(topx + topy + lg);
 *   lo = sum xl*y: multiples of 2^(lsbx + lsby); |xl| <= 2^(s-1), partial sums below
 * 2^(s-1+topy+lg); lg = ceil(log2 (n + 1)) as in mlr__sum_bits. Each chain is exact in binary64, in
 * any order, when its partial sums stay below 2^53 of its units: s >= topx + topy + lg - lsby - 53
 * (hi) and s <= 54 + lsbx + lsby - topy - lg (lo). mlr_f64x2_fits takes the least such s; together
 * they need (topx - lsbx) + 2 (topy - lsby) + 2 lg <= 107: twice the bits one chain holds, for two
 * fma a product. The sum hi + lo is then rounded once (mlr_f64x2_round_f32). */

/** n products of x (lsbx, topx) and y (lsby, topy), both with a non-zero element, sum exactly in
 *  two binary64 chains with x split at 2^*s. *s is the least s that serves, or lsbx where one chain
 *  holds them all (then xh = x and xl = 0). Every s given has topx <= s + 51, as mlr_f64_split
 * needs: s >= the least, which is topx + (topy - lsby) + lg - 53 with topy > lsby and lg >= 1. */
MLR_HD static inline int mlr_f64x2_fits(int lsbx, int topx, int lsby, int topy, int64_t n, int *s) {
  const int lg = mlr__sum_bits(0, 0, 0, 0, n); /* ceil(log2 (n + 1)) */
  const int smin = topx + topy + lg - lsby - 53, smax = 54 + lsbx + lsby - topy - lg;
  if (smin <= lsbx) {
    *s = lsbx;
    return 1;
  }
  if (smin > smax || smin > topx) return 0;
  *s = smin;
  return 1;
}

/** the constant that splits at 2^s: 1.5 * 2^(s + 52) (ldexp: exact, and normal for s >= -1074) */
MLR_HD static inline double mlr_f64_split_const(int s) { return ldexp(1.5, s + 52); }

/** x = *xh + *xl with *xh a multiple of 2^s (x rounded to nearest) and |*xl| <= 2^(s-1), both
 * exact: for |x| <= 2^(s+51), x + K lies in [2^(s+52), 2^(s+53)), where the spacing is 2^s, so the
 * one rounding of x + K is x rounded to a multiple of 2^s; subtracting K back is exact (Sterbenz's
 *  lemma: both in one binade), and so is x - xh (a multiple of x's own lsb, below 2^(s-1)).
 *  K = mlr_f64_split_const(s). Needs the IEEE binary64 operations as written (no contraction, no
 *  reassociation: the project's build flags). */
MLR_HD static inline void mlr_f64_split(double x, double k, double *xh, double *xl) {
  const double t = x + k;
  *xh = t - k;
  *xl = x - *xh;
}

/** hi + lo (finite multiples of 2^-1022 with |hi + lo| < 2^1023: binary64's normal range, where
 *  round-to-odd at 53 bits is exact) rounded once to binary32, nearest even: the sum rounded to odd
 * at 53 bits, then to 24 bits (Boldo & Melquiond's rule, as in mlr__round_window_f32). s + e = hi +
 * lo exactly (Knuth's TwoSum); when e != 0 the exact sum lies strictly between s and its neighbour
 * toward e, and round-to-odd takes whichever of the two has an odd last bit. */
MLR_HD static inline float mlr_f64x2_round_f32(double hi, double lo) {
  const double s = hi + lo, bb = s - hi, e = (hi - (s - bb)) + (lo - bb);
  if (e == 0.0 || (mlr_f64_bits(s) & 1u)) return (float)s;
  /* s even and inexact: step one unit in the last place toward e (in magnitude: up when e has s's
   * sign); from a power of two downward this lands on the odd all-ones significand below */
  const uint64_t b = mlr_f64_bits(s);
  const int up = (e > 0.0) == (s > 0.0);
  return (float)mlr_bits_f64(up ? b + 1 : b - 1);
}

/** v * 2^sh (sh >= 0, in range): the shift is done unsigned, since shifting a negative signed
 *  value left is undefined in C; converting back is modular in GCC and Clang */
MLR_HD static inline mlr_i128 mlr_i128_shl(int64_t v, int sh) {
  __extension__ typedef unsigned __int128 u128;
  return (mlr_i128)((u128)(mlr_i128)v << sh);
}

/** acc += x * y in units of 2^g (x, y finite; the range checked by mlr_i128_fits) */
MLR_HD static inline void mlr_i128_fma(mlr_i128 *acc, float x, float y, int g) {
  int64_t m1, m2;
  int e1, e2;
  mlr_f32_split(x, &m1, &e1);
  mlr_f32_split(y, &m2, &e2);
  if (!m1 || !m2) return;
  *acc += mlr_i128_shl(m1 * m2, e1 + e2 - g);
}

/** v * 2^g rounded to binary32, nearest even (+0 for 0). */
MLR_HD static inline float mlr_i128_round_f32(mlr_i128 v, int g) {
  if (v == 0) return 0.0f;
  const int neg = v < 0;
  __extension__ unsigned __int128 u = neg ? -(unsigned __int128)v : (unsigned __int128)v;
  const uint64_t hi = (uint64_t)(u >> 64), lo = (uint64_t)u;
  const int p = hi ? 127 - MLR__CLZ64(hi) : 63 - MLR__CLZ64(lo); /* top bit */
  uint64_t w;
  int sticky = 0;
  if (p >= 63) {
    w = (uint64_t)(u >> (p - 63));
    sticky = p > 63 && (u & (((unsigned __int128)1 << (p - 63)) - 1)) != 0;
  } else
    w = lo << (63 - p);
  return mlr__round_window_f32(w, sticky, g + p - 63, neg);
}
#endif

#endif
