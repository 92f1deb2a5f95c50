/* mlr_sfu.h: models of special-function units, the hardware's approximate transcendental
 * instructions, bit for bit: NVIDIA Hopper's exp2 (PTX ex2.approx.f32, SASS MUFU.EX2), the exp of
 * the fast kernels' online softmax and of Triton's tl.exp on NVIDIA; its reciprocal and divisions;
 * its log2 (lg2.approx, the log in FlashMLA's lse).
 *
 * The model, measured on an H200 and an H100 (README.md here; gpu/probes/ex2_table.cu wrote the
 * tables and checks the model on every float, 2^32 values, none differing):
 *   MUFU.EX2 (flushes subnormal results to zero), for -126 <= x <= 0: R = trunc(-x 2^23) (the
 *     product is exact, the conversion truncates toward zero), k = R >> 23, r = R mod 2^23:
 *     2^-k g(r), g(r) = MUFU.EX2(-r 2^-23) the table (2^23 values in [0.5, 1], g(0) = 1). So the
 *     unit reads x as a fixed-point number with 23 fraction bits, cut toward zero; the scaling by
 *     2^-k is exact. Below -126: 0.
 *   ex2.approx.f32 (not .ftz): MUFU.EX2(x) for x >= -126; below, h = MUFU.EX2(x / 2) squared in
 *     binary32 (x / 2 is exact; the product rounds to nearest even into the subnormals).
 *   MUFU.EX2 for x > 0 (checked on an H100 on every float x > 0, 2^31 values, none differing): the
 *     same cut, R = trunc(x 2^23), and its own table: 2^k g(2^23 + r), g(2^23 + r) = MUFU.EX2(r
 *     2^-23) (values in [1, 2)), k = R >> 23; +Inf from 2^128 on (not 2 g(2^23 - r): the two signs
 *     have tables of their own). x > 0 does not occur in a scaled online softmax (its
 *     arguments are s - m with m >= s); FlashAttention-2's fma(s, c, -m c) hands the max token the
 *     product's rounding error, which can be positive (below 2^-23 the cut leaves 0: exactly 1).
 *   NaN -> NaN.
 * Against the true 2^x, the unit's relative error is at most 2.45 x 2^-24 on the normal range
 * (cut and tables together; MLR_SFU_EX2_REL, tested against the correctly rounded binary64 2^x
 * over both tables). */
#ifndef MLR_SFU_H
#define MLR_SFU_H

#include <stdint.h>

#include "mlr_base.h"
#include "mlr_pmath.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MLR_SFU_TABLE_N = 1 << 23, MLR_SFU_EX2_N = MLR_SFU_TABLE_N }; /* a table's entries */
#define MLR_SFU_EX2_REL (2.5 * 0x1p-24) /* bound on |unit / 2^x - 1| for results >= 2^-126 */

/** The g table (2 MLR_SFU_EX2_N binary32 bit patterns: x <= 0, then x > 0), decoded on first use
 *  from the data compiled into the library (thread-safe; 64 MB, kept until exit). MLR_OK,
 *  MLR_ENOMEM, or MLR_EIO if the embedded data does not decode to the tables README.md names (their
 *  SHA-256). */
mlr_status mlr_sfu_ex2_table(const uint32_t **g, mlr_error *err);

/** ex2.approx.f32 on Hopper (the model above); g from mlr_sfu_ex2_table. */
float mlr_sfu_ex2(const uint32_t *g, float x);

/* MUFU.EX2 for x <= 0 (the flush to zero included) */
MLR_HD static inline float mlr__sfu_mufu_ex2(const uint32_t *g, float x) {
  if (!(x >= -126.0f)) return 0.0f; /* below -126 (and -Inf): a subnormal result, flushed */
  const uint32_t R = (uint32_t)(-x * 0x1p23f); /* exact product; truncation toward zero */
  const uint32_t k = R >> 23, bits = g[R & (MLR_SFU_EX2_N - 1)];
  return mlr_bits_f32(bits - (k << 23)); /* times 2^-k: the result is >= 2^-126, normal */
}

/* MUFU.EX2 for x > 0: g[2^23 + (R mod 2^23)] times 2^(R >> 23), R = trunc(x 2^23); the scaling is
 * an exponent addition, exact: the table's values are below 2 (at most 0x3FFFFFFF) and R >> 23 at
 * most 127 below x = 128, so the sum stays at or under 0x7F7FFFFF, the largest finite float */
MLR_HD static inline float mlr__sfu_mufu_ex2_pos(const uint32_t *g, float x) {
  if (!(x < 128.0f)) return mlr_bits_f32(0x7F800000u); /* 2^128 and above (and +Inf): +Inf */
  const uint32_t R = (uint32_t)(x * 0x1p23f);          /* exact product; truncation toward zero */
  return mlr_bits_f32(g[MLR_SFU_EX2_N + (R & (MLR_SFU_EX2_N - 1))] + ((R >> 23) << 23));
}

MLR_HD static inline float mlr__sfu_ex2(const uint32_t *g, float x) {
  if (x != x) return x;
  if (x > 0.0f) return mlr__sfu_mufu_ex2_pos(g, x);
  if (x >= -126.0f) return mlr__sfu_mufu_ex2(g, x);
  const float h = mlr__sfu_mufu_ex2(g, x * 0.5f); /* exact halving */
  return h * h;
}

/** The H200's reciprocal table (MLR_SFU_TABLE_N binary32 bit patterns: MUFU.RCP(1 + r 2^-23), r =
 *  0 .. 2^23 - 1, values in (0.5, 1]), decoded on first use as mlr_sfu_ex2_table's. */
mlr_status mlr_sfu_rcp_table(const uint32_t **g, mlr_error *err);

/** div.full.f32 on the H200 (the model below); rcp from mlr_sfu_rcp_table. */
float mlr_sfu_div_full(const uint32_t *rcp, float x, float y);

/* MUFU.RCP of a normal y whose reciprocal is normal: the table on y's significand, y's exponent
 * negated (exact); sign kept */
MLR_HD static inline float mlr__sfu_rcp(const uint32_t *g, float y) {
  const uint32_t b = mlr_f32_bits(y), e = (b >> 23) & 0xFFu;
  const uint32_t r = g[b & (MLR_SFU_TABLE_N - 1)] + ((uint32_t)(127 - (int)e) << 23);
  return mlr_bits_f32(r | (b & 0x80000000u));
}

/* div.full.f32 (SASS: two FSETP, the scalings, MUFU.RCP and one FMUL): a denominator of magnitude
 * above 2^126 is scaled by 1/4 with the numerator, one below 2^-126 by 2^24 with it (both exact but
 * for a subnormal numerator), then x times the unit's reciprocal of y, rounded once. MUFU.RCP
 * gives +-Inf for +-0 and +-0 for +-Inf; a NaN result is the GPU's canonical NaN 0x7FFFFFFF. */
MLR_HD static inline float mlr__sfu_div_full(const uint32_t *g, float x, float y) {
  const float ay = fabsf(y);
  if (ay > 0x1p126f)
    x = x * 0.25f, y = y * 0.25f;
  else if (ay < 0x1p-126f)
    x = x * 0x1p24f, y = y * 0x1p24f;
  const float r = y != y      ? y /* every subnormal y is normal after the scaling */
                  : y == 0.0f ? copysignf(INFINITY, y)
                  : isinf(y)  ? copysignf(0.0f, y)
                              : mlr__sfu_rcp(g, y);
  const float z = x * r;
  return z != z ? mlr_bits_f32(0x7FFFFFFFu) : z;
}

/* div.approx.ftz.f32 (CUDA's x / y under --use_fast_math; SASS MUFU.RCP and FMUL): subnormal
 * operands flushed to zero, x times the unit's reciprocal of y, rounded once, a subnormal result
 * flushed; y beyond 2^126 in magnitude (whose reciprocal is subnormal) gives 0 */
MLR_HD static inline float mlr__sfu_div_approx(const uint32_t *g, float x, float y) {
  if (fabsf(x) < 0x1p-126f) x = copysignf(0.0f, x);
  if (fabsf(y) < 0x1p-126f) y = copysignf(0.0f, y);
  const float r = y != y                ? y
                  : y == 0.0f           ? copysignf(INFINITY, y)
                  : fabsf(y) > 0x1p126f ? copysignf(0.0f, y)
                                        : mlr__sfu_rcp(g, y);
  float z = x * r;
  if (fabsf(z) < 0x1p-126f) z = copysignf(0.0f, z);
  return z != z ? mlr_bits_f32(0x7FFFFFFFu) : z;
}

/** The H200's log2 table (MLR_SFU_TABLE_N binary32 bit patterns: lg2.approx.f32(1 + r 2^-23),
 *  r = 0 .. 2^23 - 1, values in [0, 1)), decoded on first use as mlr_sfu_ex2_table's. */
mlr_status mlr_sfu_lg2_table(const uint32_t **g, mlr_error *err);

/** lg2.approx.ftz.f32 on the H200 (the model below); g from mlr_sfu_lg2_table. */
float mlr_sfu_lg2(const uint32_t *g, float x);

enum { MLR_SFU_LG2_HEAD = 1 << 18 }; /* the log2 table's values stored whole (README.md) */

/* lg2.approx(.ftz).f32 (SASS MUFU.LG2) of x = 2^e m, m in [1, 2): e + t(m), t the table, cut
 * toward zero to binary32. Measured against the sfu probe's samples: for x >= 1 the model agrees
 * with every one (134,792, every binade); below 0.5 it is within 1 ulp (the unit carries t to more
 * bits than binary32, which a negative e + t can show); on [0.5, 1) the unit reduces x otherwise
 * (up to 2^-17 from the model) and the model does not stand. An lse takes the log of a row sum,
 * which is at least 1 up to the max token's rounding. Subnormal x is flushed: -Inf, as for +-0;
 * +Inf for +Inf; the canonical NaN 0x7FFFFFFF for x < 0 and NaN. */
MLR_HD static inline float mlr__sfu_lg2(const uint32_t *g, float x) {
  if (x != x) return mlr_bits_f32(0x7FFFFFFFu);
  if (fabsf(x) < 0x1p-126f) return -INFINITY; /* flushed to +-0 first */
  if (x < 0.0f) return mlr_bits_f32(0x7FFFFFFFu);
  if (isinf(x)) return x;
  const uint32_t b = mlr_f32_bits(x);
  const double s = (double)((int)(b >> 23) - 127) + (double)mlr_bits_f32(g[b & 0x7FFFFFu]);
  /* exact: |e| <= 127 and t >= 2^-22 has 24 bits, so e + t spans at most 53 bits */
  const float f = (float)s; /* to nearest, then one step toward zero if that went outward */
  return fabs((double)f) > fabs(s) ? mlr_bits_f32(mlr_f32_bits(f) - 1u) : f;
}

#ifdef __cplusplus
}
#endif
#endif
