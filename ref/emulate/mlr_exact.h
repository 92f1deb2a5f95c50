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

#include "../base/mlr_base.h"

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
  if (be) { m |= 1ull << 52; e = be - 1075; } else e = -1074;
  const int p = e - MLR_XACC_EBASE, k = p >> 5, sh = p & 31;
  const uint64_t lo = (m & 0xFFFFFFFFu) << sh, hi = (m >> 32) << sh; /* < 2^63 and < 2^52 */
  const int64_t s = (b >> 63) ? -1 : 1;
  a->d[k] += s * (int64_t)(lo & 0xFFFFFFFFu);
  a->d[k + 1] += s * (int64_t)((lo >> 32) + (hi & 0xFFFFFFFFu));
  a->d[k + 2] += s * (int64_t)(hi >> 32);
  if (++a->adds >= (1u << 20)) mlr_xacc_normalize(a);
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
    } else g[k] = (uint32_t)v;
  }
  int h = MLR_XACC_DIGITS - 1;
  while (h >= 0 && g[h] == 0) h--;
  if (h < 0) return 0.0f;
  /* 64-bit window w with its top bit set, and sticky for the bits below it */
  uint64_t w = (uint64_t)g[h] << 32 | (h >= 1 ? g[h - 1] : 0u);
  int lz = 0;
  while (!(w >> 63)) { w <<= 1; lz++; }
  int sticky = 0;
  if (h >= 2) {
    w |= lz ? (uint64_t)g[h - 2] >> (32 - lz) : 0u;
    sticky = ((uint32_t)((uint64_t)g[h - 2] << lz)) != 0;
    for (int k = h - 3; k >= 0 && !sticky; k--) sticky = g[k] != 0;
  }
  const int lsb_exp = 32 * (h - 1) - lz + MLR_XACC_EBASE; /* weight of w's bit 0 */
  uint64_t r = w >> 11;                                     /* 53 bits */
  if ((w & 0x7FFu) || sticky) r |= 1;                       /* round to odd */
  const double d = ldexp((double)r, lsb_exp + 11);          /* exact: r < 2^53, normal range */
  const float f = (float)d;
  return neg ? -f : f;
}

#endif
