/* Faithful-rounding checks against MPFR, shared by the pmath suites: a result has error
 * below 1 ulp exactly when it is one of the two values of its format around the true one. */
#ifndef MLR_TEST_PMATH_CHECK_H
#define MLR_TEST_PMATH_CHECK_H

#include <mpfr.h>
#include <stdint.h>
#include <string.h>

typedef int (*mpfr_fn)(mpfr_t, const mpfr_t, mpfr_rnd_t);

/* The binary64 values below and above f(x), from MPFR at 200 bits (enough: none of these
 * functions has a binary64 worst case needing more than about 120 bits). */
static inline void mpfr_bracket64(mpfr_fn f, double x, double *lo, double *hi) {
  mpfr_t a, r;
  mpfr_init2(a, 64);
  mpfr_init2(r, 200);
  mpfr_set_d(a, x, MPFR_RNDN);
  f(r, a, MPFR_RNDN);
  *lo = mpfr_get_d(r, MPFR_RNDD);
  *hi = mpfr_get_d(r, MPFR_RNDU);
  mpfr_clear(a);
  mpfr_clear(r);
}

static inline void mpfr_bracket32(mpfr_fn f, float x, float *lo, float *hi) {
  mpfr_t a, r;
  mpfr_init2(a, 64);
  mpfr_init2(r, 200);
  mpfr_set_flt(a, x, MPFR_RNDN);
  f(r, a, MPFR_RNDN);
  *lo = mpfr_get_flt(r, MPFR_RNDD);
  *hi = mpfr_get_flt(r, MPFR_RNDU);
  mpfr_clear(a);
  mpfr_clear(r);
}

static inline uint64_t bits64(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }
static inline uint32_t bits32(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }

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
