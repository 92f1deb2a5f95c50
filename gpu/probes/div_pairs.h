/* div_pairs.h: the pairs on which fast_div.h's mlr__div_by is checked against the division, the
 * same on the GPU (gpu/probes/cvt_probe.cu, 2^32 pairs) and the CPU (tests/fast_div.c, a sample):
 * divisor si, the binary32 number with significand bits si (0 .. 2^23 - 1) and exponent si % 32 (d
 * in [1, 2^32), within mlr__div_d_ok's range: 1 to 2^32), and its numerators k = 0, 1, ..: a random
 * significand and exponent field in 63 .. 190 (mlr__div_n_ok's range), or for k % 4 == 3,
 * n = RN(d m 2^E) with m a midpoint (2M + 1) 2^-24 in (1, 2) between two binary32 numbers, so that
 * n / d lies within about an ulp of m 2^E (the hard case for rounding). */
#ifndef MLR_DIV_PAIRS_H
#define MLR_DIV_PAIRS_H

#include <math.h>
#include <stdint.h>

#include "mlr_base.h"

MLR_HD static inline float mlr__div_probe_d(uint32_t si) {
  return mlr_bits_f32((127u + si % 32u) << 23 | si);
}

MLR_HD static inline float mlr__div_probe_n(uint32_t si, uint32_t k, float d) {
  uint32_t z = si * 0x9E3779B1u ^ (k + 1u) * 0x85EBCA77u; /* a hash of (si, k) */
  z ^= z >> 15;
  z *= 0x2C1B3C6Du;
  z ^= z >> 12;
  z *= 0x297A2D39u;
  z ^= z >> 15;
  const uint32_t sign = (z & 1u) << 31, e = 63u + (z >> 1) % 128u;
  if (k % 4 != 3) return mlr_bits_f32(sign | e << 23 | (z * 0x9E3779B1u) >> 9);
  const double m =
      1.0 + (double)(2u * ((z * 0x9E3779B1u) >> 9) + 1u) * 0x1p-24; /* a midpoint in (1, 2) */
  const int E = (int)(e % 120u) - 60 - (int)(si % 32u); /* |n| in [2^-60, 2^62): within the range */
  const float v =
      (float)ldexp((double)d * m, E); /* d m exact in binary64 (24 + 25 bits), then rounded once */
  return sign ? -v : v;
}

#endif
