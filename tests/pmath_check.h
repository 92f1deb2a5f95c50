/* Faithful-rounding checks against MPFR, shared by the pmath suites: a result has error
 * below 1 ulp exactly when it is one of the two values of its format around the true one. */
#ifndef MLR_TEST_PMATH_CHECK_H
#define MLR_TEST_PMATH_CHECK_H

#include <mpfr.h>
#include <stdint.h>
#include <string.h>

typedef int (*mpfr_fn)(mpfr_t, const mpfr_t, mpfr_rnd_t);

/* The values of the format below and above f(x), from MPFR at 200 bits (enough: none of
 * these functions has a binary64 worst case needing more than about 120 bits). The ends are
 * evaluated with directed rounding, so an overflow or underflow inside MPFR's exponent range
 * gives its largest or smallest number, never a premature Inf or 0; the range is widened to
 * MPFR's maximum first (the default, 2^30, is exceeded by e^x for binary32 x >= 2^30). */
static inline void mpfr_wide_range(void) {
  mpfr_set_emax(mpfr_get_emax_max());
  mpfr_set_emin(mpfr_get_emin_min());
}

/* lo, hi = f(a) rounded down and up, at 200 bits */
static inline void mpfr_eval_both(mpfr_fn f, const mpfr_t a, mpfr_t lo, mpfr_t hi) {
  mpfr_wide_range();
  mpfr_init2(lo, 200);
  mpfr_init2(hi, 200);
  f(lo, a, MPFR_RNDD);
  f(hi, a, MPFR_RNDU);
}

static inline void mpfr_bracket64(mpfr_fn f, double x, double *lo, double *hi) {
  mpfr_t a, l, h;
  mpfr_wide_range();
  mpfr_init2(a, 64);
  mpfr_set_d(a, x, MPFR_RNDN);
  mpfr_eval_both(f, a, l, h);
  *lo = mpfr_get_d(l, MPFR_RNDD);
  *hi = mpfr_get_d(h, MPFR_RNDU);
  mpfr_clears(a, l, h, (mpfr_ptr)0);
}

static inline void mpfr_bracket32(mpfr_fn f, float x, float *lo, float *hi) {
  mpfr_t a, l, h;
  mpfr_wide_range();
  mpfr_init2(a, 64);
  mpfr_set_flt(a, x, MPFR_RNDN);
  mpfr_eval_both(f, a, l, h);
  *lo = mpfr_get_flt(l, MPFR_RNDD);
  *hi = mpfr_get_flt(h, MPFR_RNDU);
  mpfr_clears(a, l, h, (mpfr_ptr)0);
}

static inline uint64_t bits64(double x) {
  uint64_t u;
  memcpy(&u, &x, 8);
  return u;
}
static inline uint32_t bits32(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}

/* 1 if y is faithful: NaN where the truth is NaN, else one of the bracket's encodings. */
static inline int faithful64(double y, double lo, double hi) {
  if (lo != lo) return y != y;
  return bits64(y) == bits64(lo) || bits64(y) == bits64(hi);
}
static inline int faithful32(float y, float lo, float hi) {
  if (lo != lo) return y != y;
  return bits32(y) == bits32(lo) || bits32(y) == bits32(hi);
}

#endif
