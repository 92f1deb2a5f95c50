/* ref/pmath: constants, special values, thresholds, and random binary64 inputs against MPFR.
 * (Every binary32 input: pmath_exhaustive.c.) */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "mlr_rng.h"
#include "pmath_check.h"
#include "mlr_pmath.h"

static int sigbits(double x) { /* significant bits of a binary64 value */
  uint64_t m = bits64(x) & 0xFFFFFFFFFFFFFull;
  if (!m) return 1;
  return 53 - __builtin_ctzll(m);
}

Test(pmath, constants_against_mpfr) {
  mpfr_t c, t;
  mpfr_inits2(300, c, t, (mpfr_ptr)0);
  mpfr_const_log2(c, MPFR_RNDN);
  cr_assert_eq(bits64(MLR__LN2), bits64(mpfr_get_d(c, MPFR_RNDN)), "LN2 is ln 2 rounded");
  mpfr_sub_d(t, c, MLR__LN2, MPFR_RNDN);
  cr_assert_eq(bits64(MLR__LN2_TAIL), bits64(mpfr_get_d(t, MPFR_RNDN)), "LN2_TAIL = ln2 - LN2");
  cr_assert_leq(sigbits(MLR__LN2_HI), 32, "k*LN2_HI must be exact for |k| < 2^21");
  mpfr_sub_d(t, c, MLR__LN2_HI, MPFR_RNDN);
  mpfr_sub_d(t, t, MLR__LN2_LO, MPFR_RNDN);
  cr_assert_lt(fabs(mpfr_get_d(t, MPFR_RNDN)), 0x1p-85, "LN2_HI + LN2_LO approximates ln 2");
  mpfr_ui_div(c, 1, c, MPFR_RNDN); /* 1/ln 2 */
  cr_assert_eq(bits64(MLR__INVLN2), bits64(mpfr_get_d(c, MPFR_RNDN)));
  cr_assert_leq(sigbits(MLR__IVLN2_HI), 33);
  mpfr_sub_d(t, c, MLR__IVLN2_HI, MPFR_RNDN);
  mpfr_sub_d(t, t, MLR__IVLN2_LO, MPFR_RNDN);
  cr_assert_lt(fabs(mpfr_get_d(t, MPFR_RNDN)), 0x1p-80);
  mpfr_clears(c, t, (mpfr_ptr)0);
}

Test(pmath, special_values) {
  const double inf = INFINITY;
  cr_assert(isnan(mlr_exp(NAN)) && isnan(mlr_exp2(NAN)) && isnan(mlr_log(NAN)) &&
            isnan(mlr_log2(NAN)));
  cr_assert_eq(mlr_exp(inf), inf);
  cr_assert_eq(bits64(mlr_exp(-inf)), 0u);
  cr_assert_eq(mlr_exp(0.0), 1.0);
  cr_assert_eq(mlr_exp(-0.0), 1.0);
  cr_assert_eq(mlr_exp2(inf), inf);
  cr_assert_eq(bits64(mlr_exp2(-inf)), 0u);
  cr_assert_eq(mlr_exp2(0.0), 1.0);
  cr_assert_eq(bits64(mlr_log(1.0)), 0u, "log(1) is +0");
  cr_assert_eq(bits64(mlr_log2(1.0)), 0u);
  cr_assert_eq(mlr_log(0.0), -inf);
  cr_assert_eq(mlr_log(-0.0), -inf);
  cr_assert_eq(mlr_log2(0.0), -inf);
  cr_assert(isnan(mlr_log(-1.0)) && isnan(mlr_log2(-0x1p-1074)) && isnan(mlr_log(-inf)));
  cr_assert_eq(mlr_log(inf), inf);
  cr_assert_eq(mlr_log2(inf), inf);
  for (int k = -1074; k <= 1023; k++) {
    cr_assert_eq(mlr_log2(ldexp(1.0, k)), (double)k, "log2(2^%d)", k);
    cr_assert_eq(mlr_exp2((double)k), ldexp(1.0, k), "exp2(%d)", k);
  }
  /* binary32 versions */
  cr_assert_eq(mlr_expf(-INFINITY), 0.0f);
  cr_assert_eq(mlr_logf(0.0f), -INFINITY);
  cr_assert(isnan(mlr_log2f(-1.0f)));
  cr_assert_eq(mlr_exp2f(-149.0f), 0x1p-149f);
  cr_assert_eq(mlr_exp2f(-150.0f), 0.0f, "2^-150 is the tie between 0 and 2^-149: even");
}

Test(pmath, overflow_and_underflow_thresholds) {
  const double othr = 0x1.62e42fefa39efp+9; /* largest x with exp(x) finite */
  cr_assert(isfinite(mlr_exp(othr)));
  cr_assert(isinf(mlr_exp(nextafter(othr, 1e9))));
  cr_assert_eq(mlr_exp(-0x1.74910d52d3051p+9), 0x1p-1074,
               "last x whose e^x rounds to the least subnormal");
  cr_assert_eq(mlr_exp(nextafter(-0x1.74910d52d3051p+9, -1e9)), 0.0);
  cr_assert(isfinite(mlr_exp2(nextafter(1024.0, 0))));
  cr_assert(isinf(mlr_exp2(1024.0)));
  cr_assert_eq(mlr_exp2(-1075.0), 0.0, "2^-1075 is the tie between 0 and 2^-1074: even");
  cr_assert_eq(mlr_exp2(nextafter(-1075.0, 0)), 0x1p-1074);
  cr_assert_eq(mlr_exp2(-1074.5), 0x1p-1074);
}

typedef double (*f64fn)(double);
/* n random inputs from gen; each result must be faithful per MPFR (a reproducer on failure). */
static void random_check(const char *name, f64fn f, mpfr_fn mf, double (*gen)(uint64_t), int n,
                         uint64_t seed) {
  for (int i = 0; i < n; i++) {
    const double x = gen(mlr_rng_bits(seed, 11, 0, (uint64_t)i));
    const double y = f(x);
    double lo, hi;
    mpfr_bracket64(mf, x, &lo, &hi);
    cr_assert(faithful64(y, lo, hi), "FAIL %s x=%a got=%a want %a or %a (seed %llu, i %d)", name, x,
              y, lo, hi, (unsigned long long)seed, i);
  }
}
static double gen_exp(uint64_t w) { return ldexp((double)(w >> 11), -53) * 1455.0 - 745.2; }
static double gen_small(uint64_t w) {
  return ldexp((double)(w >> 11), -53 - (int)(w & 63)) * ((w >> 6) & 1 ? 1 : -1);
}
static double gen_exp2(uint64_t w) { return ldexp((double)(w >> 11), -53) * 2100.0 - 1076.0; }
static double gen_pos(uint64_t w) { /* every positive finite binary64, subnormals included */
  const double x = mlr_bits_f64(w & 0x7FFFFFFFFFFFFFFFull);
  return isfinite(x) ? x : 3.0;
}
static double gen_near1(uint64_t w) {
  return 1.0 + ldexp((double)(w >> 11), -53 - (int)(w & 31)) * ((w >> 5) & 1 ? 1 : -0.5);
}

static uint64_t
test_seed(void) { /* fixed by default; MLAREF_TEST_SEED overrides (and is printed) */
  const char *e = getenv("MLAREF_TEST_SEED");
  if (!e) return 20261129;
  cr_log_info("MLAREF_TEST_SEED=%s", e);
  return strtoull(e, NULL, 0);
}

/* Each function on two input distributions: its whole domain, and where it is delicate. */
static const struct {
  const char *name;
  f64fn f;
  mpfr_fn mf;
  double (*gen[2])(uint64_t);
  int n[2];
} RANDOM_CASES[] = {
    {"exp", mlr_exp, mpfr_exp, {gen_exp, gen_small}, {200000, 50000}},
    {"exp2", mlr_exp2, mpfr_exp2, {gen_exp2, gen_small}, {200000, 50000}},
    {"log", mlr_log, mpfr_log, {gen_pos, gen_near1}, {200000, 100000}},
    {"log2", mlr_log2, mpfr_log2, {gen_pos, gen_near1}, {200000, 100000}},
};

Test(pmath, random_against_mpfr) {
  for (size_t c = 0; c < sizeof RANDOM_CASES / sizeof *RANDOM_CASES; c++)
    for (int d = 0; d < 2; d++)
      random_check(RANDOM_CASES[c].name, RANDOM_CASES[c].f, RANDOM_CASES[c].mf,
                   RANDOM_CASES[c].gen[d], RANDOM_CASES[c].n[d], test_seed() + (uint64_t)d);
}
