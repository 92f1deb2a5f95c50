/* Digests of the shared scalar functions over binary32 inputs, computed from the same source
 * on the CPU and on a GPU (MLR_HD), to show they give the same bits everywhere.
 *
 * digest(fn, stride) = sum over patterns p = 0, stride, 2*stride, ... < 2^32 of
 *   mix(fn << 32 | p) ^ mix(output of fn on p)     (mod 2^64)
 * A sum of mixed items is independent of the order of evaluation, so threads and GPU blocks
 * may add in any order; one wrong output changes it with probability 1 - 2^-64. */
#ifndef MLR_BITS_DIGEST_H
#define MLR_BITS_DIGEST_H

#include "mlr_rng.h"
#include "mlr_formats.h"
#include "mlr_pmath.h"

#define MLR_DIGEST_FNS 26

/* SplitMix64's finaliser (Steele, Lea, Flood, 2014) */
MLR_HD static inline uint64_t mlr_digest_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* fn 0..5: encode rne nonsat, format fn; 6..11: rne sat; 12..17: rtz sat (generic path);
 * 18..21: expf exp2f logf log2f; 22..23: exp, log of the widened input; 24: normal variate of
 * element p (seed 42, tensor 1); 25: encode binary64 -> e4m3 of 1 + x/2^20 (generic path) */
MLR_HD static inline uint64_t mlr_digest_output(int fn, uint32_t p) {
  const float x = mlr_bits_f32(p);
  if (fn < 6) return mlr_encode_f32(x, (mlr_format)fn, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT, 0);
  if (fn < 12)
    return mlr_encode_f32(x, (mlr_format)(fn - 6), MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE, 0);
  if (fn < 18)
    return mlr_encode_f32(x, (mlr_format)(fn - 12), MLR_RND_TOWARD_ZERO, MLR_OVF_SATURATE, 0);
  switch (fn) {
  case 18:
    return mlr_f32_bits(mlr_expf(x));
  case 19:
    return mlr_f32_bits(mlr_exp2f(x));
  case 20:
    return mlr_f32_bits(mlr_logf(x));
  case 21:
    return mlr_f32_bits(mlr_log2f(x));
  case 22:
    return mlr_f64_bits(mlr_exp((double)x));
  case 23:
    return mlr_f64_bits(mlr_log((double)x));
  case 24:
    return mlr_f64_bits(mlr_rng_normal(42, 1, 0, p));
  default:
    return mlr_encode_f64(1.0 + (double)x * 0x1p-20, MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN,
                          MLR_OVF_SATURATE, 0);
  }
}

MLR_HD static inline uint64_t mlr_digest_item(int fn, uint32_t p) {
  return mlr_digest_mix(((uint64_t)fn << 32) | p) ^
         mlr_digest_mix(mlr_digest_output(fn, p) + 0x9e3779b97f4a7c15ull);
}

static const char *const mlr_digest_names[MLR_DIGEST_FNS] = {"enc_rne_nonsat_e4m3",
                                                             "enc_rne_nonsat_e4m3fnuz",
                                                             "enc_rne_nonsat_e5m2",
                                                             "enc_rne_nonsat_e5m2fnuz",
                                                             "enc_rne_nonsat_bf16",
                                                             "enc_rne_nonsat_fp16",
                                                             "enc_rne_sat_e4m3",
                                                             "enc_rne_sat_e4m3fnuz",
                                                             "enc_rne_sat_e5m2",
                                                             "enc_rne_sat_e5m2fnuz",
                                                             "enc_rne_sat_bf16",
                                                             "enc_rne_sat_fp16",
                                                             "enc_rtz_sat_e4m3",
                                                             "enc_rtz_sat_e4m3fnuz",
                                                             "enc_rtz_sat_e5m2",
                                                             "enc_rtz_sat_e5m2fnuz",
                                                             "enc_rtz_sat_bf16",
                                                             "enc_rtz_sat_fp16",
                                                             "expf",
                                                             "exp2f",
                                                             "logf",
                                                             "log2f",
                                                             "exp_f64",
                                                             "log_f64",
                                                             "rng_normal",
                                                             "enc_f64_e4m3_near1"};

#endif
