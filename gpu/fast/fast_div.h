/* fast_div.h: the fast kernels' output division, o = n / d in binary32 rounded to nearest even (the
 * recipe's acc / max(l, clamp) in a lone split's store, fast_common.cuh's div_row), for many n over
 * one d: one IEEE division a divisor, r = 1 / d, then five operations a value and no branch, where
 * the IEEE division is a reciprocal refined by fmas, a range test and a branch to a slow path, a
 * value (y0 below is beyond 1 ulp for about 1.3% of random pairs: the first correction is needed).
 * Plain IEEE operations (fmaf: one rounding), so CUDA and HIP alike. gpu/probes/cvt_probe.cu checks
 * mlr__div_by against the division on 2^32 pairs (every significand of d), scripts/gpu_run.sh's
 * fast step; a change here is a change there.
 *
 * Why it is exact (P. Markstein, IBM J. Res. Develop. 34(1), 1990; J.-M. Muller et al., Handbook of
 * Floating-Point Arithmetic, the fma-based division): with r = RN(1 / d), y0 = RN(n r) is within
 * 1.5 ulps of n / d (r's relative error and the product's, 2^-24 each). The residual e0 = d y0 - n
 * is then at most a bit more than a binary32 number holds, so RN(e0) has relative error 2^-24 and
 * y1 = RN(y0 - RN(e0) r) lies within 1/2 ulp + 1.5 * 2^-23 ulp of n / d: within 1 ulp. For a y1
 * within 1 ulp the residual d y1 - n is a binary32 number (an fma gives it exactly), and
 * Markstein's theorem says that y1 corrected by it times the correctly rounded reciprocal,
 * RN(y1 - e1 r), is RN(n / d). Both need every step in the normal range (no residual or quotient
 * below 2^-126, nothing overflowing): mlr__div_ok's ranges keep them there with room (quotients in
 * [2^-96, 2^64], residuals at least 2^-96 * 2^-46 in granularity) and say 0 for NaN, Inf and
 * subnormal n, which then take the IEEE division. The residuals are written d y - n and negated
 * (as mlr__q_div_recip, fast_cvt.h), so a zero n keeps its sign: -0 / d = -0. */
#ifndef MLR_GPU_FAST_DIV_H
#define MLR_GPU_FAST_DIV_H

#include <math.h>
#include <stdint.h>

#include "mlr_base.h"

/* 1 when mlr__div_by(n, d, 1 / d) is n / d by the argument above: d in [1, 2^32] and n zero or
 * |n| in [2^-64, 2^64) (exponent fields 63 .. 190). The fast kernels' divisors are row sums
 * max(l, clamp) >= 1 (the row's max adds exp2(0) = 1), their numerators far inside the range */
MLR_HD static inline int mlr__div_d_ok(float d) { return d >= 1.0f && d <= 0x1p32f; }
MLR_HD static inline int mlr__div_n_ok(float n) {
  const uint32_t e = mlr_f32_bits(n) >> 23 & 0xFFu;
  return (e - 63u) < 128u || n == 0.0f;
}

/* n / d from r = 1 / d (an IEEE division, correctly rounded): RN(n / d) where mlr__div_d_ok(d) and
 * mlr__div_n_ok(n) hold */
MLR_HD static inline float mlr__div_by(float n, float d, float r) {
  const float y0 = n * r;
  const float y1 = fmaf(-fmaf(d, y0, -n), r, y0);
  return fmaf(-fmaf(d, y1, -n), r, y1);
}

#endif
