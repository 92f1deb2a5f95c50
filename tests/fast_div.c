/* fast_div.h's output division (mlr__div_by: n / d from r = 1 / d, two corrections) against the
 * division, bit for bit, on the CPU: every significand of d with 4 of gpu/probes/div_pairs.h's
 * numerators each (2^25 pairs; the GPU probe runs 512 each), the range's ends, and the range test's
 * answers at its edges. The fast kernels divide this way only where mlr__div_d_ok and mlr__div_n_ok
 * hold, so those are what must be right. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>

#include "gpu/fast/fast_div.h"
#include "gpu/probes/div_pairs.h"

Test(fast_div, every_divisor_significand) {
  unsigned long long bad = 0, first = ~0ull, tested = 0;
#pragma omp parallel for reduction(+ : bad, tested) reduction(min : first) schedule(static)
  for (int64_t si = 0; si < (1 << 23); si++) {
    const float d = mlr__div_probe_d((uint32_t)si), r = 1.0f / d;
    for (uint32_t k = 0; k < 4; k++) {
      const float n = mlr__div_probe_n((uint32_t)si, k, d);
      const int in = mlr__div_d_ok(d) && mlr__div_n_ok(n);
      const unsigned long long at = (unsigned long long)si << 2 | k;
      if (!in || mlr_f32_bits(mlr__div_by(n, d, r)) != mlr_f32_bits(n / d)) {
        bad++;
        first = at < first ? at : first;
      }
      tested++;
    }
  }
  cr_assert_eq(tested, 1ull << 25);
  cr_assert_eq(bad, 0,
               "%llu of %llu pairs differ or fall outside the range (first: d's significand "
               "0x%06llx, numerator %llu)",
               bad, tested, first >> 2, first & 3);
}

Test(fast_div, range_ends_and_zeros) {
  const float ns[] = {0x1p-64f, 0x1.fffffep63f, -0x1p-64f, -0x1.fffffep63f, 0.0f,
                      -0.0f,    1.0f,           3.0f,      0x1.fffffep0f};
  const float ds[] = {1.0f, 0x1p32f, 3.0f, 0x1.fffffep0f, 0x1.fffffep31f, 1.5f};
  for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
    for (size_t j = 0; j < sizeof ds / sizeof *ds; j++) {
      const float n = ns[i], d = ds[j];
      cr_assert(mlr__div_d_ok(d) && mlr__div_n_ok(n));
      cr_assert_eq(mlr_f32_bits(mlr__div_by(n, d, 1.0f / d)), mlr_f32_bits(n / d), "%a / %a", n, d);
    }
}

Test(fast_div, range_test_refuses) {
  /* outside the range the kernels take the division: NaN, Inf, subnormal and too small or large n,
   * d below 1 or above 2^32 (NaN too) */
  const float bad_n[] = {NAN,        INFINITY,        -INFINITY, 0x1p-149f,
                         -0x1p-127f, 0x1.fffffep-65f, 0x1p64f,   -0x1p100f};
  for (size_t i = 0; i < sizeof bad_n / sizeof *bad_n; i++)
    cr_assert(!mlr__div_n_ok(bad_n[i]), "%a", bad_n[i]);
  const float bad_d[] = {NAN, INFINITY, 0.0f, 0x1.fffffep-1f, -1.0f, 0x1.000002p32f};
  for (size_t i = 0; i < sizeof bad_d / sizeof *bad_d; i++)
    cr_assert(!mlr__div_d_ok(bad_d[i]), "%a", bad_d[i]);
}

Test(fast_div, the_arguments_steps) {
  /* fast_div.h's argument, step by step, on the same pairs: y0 = RN(n r) within 1.5 ulps of n / d
   * (and beyond 1 ulp for some: so Markstein's theorem does not apply to y0 itself), y1 (one
   * correction) within 1 ulp, where the theorem applies. n / d in binary64 (relative error 2^-53)
   * stands for the quotient: the margins are a quarter of an ulp or more */
  unsigned long long beyond1 = 0, bad0 = 0, bad1 = 0;
#pragma omp parallel for reduction(+ : beyond1, bad0, bad1) schedule(static)
  for (int64_t si = 0; si < (1 << 23); si++) {
    const float d = mlr__div_probe_d((uint32_t)si), r = 1.0f / d;
    for (uint32_t k = 0; k < 4; k++) {
      const float n = mlr__div_probe_n((uint32_t)si, k, d), y0 = n * r,
                  y1 = fmaf(-fmaf(d, y0, -n), r, y0);
      const double q = (double)n / (double)d, ulp = ldexp(1.0, ilogb(q) - 23);
      const double e0 = fabs((double)y0 - q) / ulp, e1 = fabs((double)y1 - q) / ulp;
      beyond1 += e0 > 1.0;
      bad0 += e0 > 1.5;
      bad1 += e1 >= 1.0;
    }
  }
  cr_assert_eq(bad0, 0, "%llu pairs with y0 beyond 1.5 ulps", bad0);
  cr_assert_eq(bad1, 0, "%llu pairs with y1 beyond 1 ulp", bad1);
  cr_assert_gt(beyond1, 0,
               "no y0 beyond 1 ulp among the pairs: the first correction's case is not exercised");
}
