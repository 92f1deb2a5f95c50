/* Every binary32 input of expf, exp2f, logf and log2f: the result must be faithful (error
 * below 1 ulp). For speed, glibc's binary64 function (error under one binary64 ulp, i.e.
 * 2^-29 binary32 ulp) locates the true value; where it lies within 2^-48 (relative) of a
 * binary32 value, so that the binary64 reference cannot decide, MPFR decides. Results whose
 * bracket follows from the function's properties (overflow and underflow of e^x and 2^x, e^x
 * and 2^x next to 1, NaN for a NaN input or the log of a negative) are bracketed directly. Every
 * 4096th input is checked against MPFR whatever the filter says, which also checks the filter. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>

#include "pmath_check.h"
#include "mlr_pmath.h"

typedef float (*f32fn)(float);
typedef double (*ref64)(double);

/* exp_like: f(0) = 1 and f increases (e^x, 2^x), so for x != 0 with f(x) within 2^-29 of 1
 * the truth lies strictly between 1 and its binary32 neighbour on x's side. */
static void run(const char *name, f32fn f, ref64 ref, mpfr_fn mf, int exp_like) {
  long fails = 0, settled = 0, sampled = 0;
  char first[200] = "";
  omp_set_num_threads(omp_get_num_procs());
#pragma omp parallel for schedule(dynamic, 64) reduction(+ : fails, settled, sampled)
  for (long blk = 0; blk < (1L << 16); blk++) {
    for (uint32_t k = 0; k < (1u << 16); k++) {
      const uint32_t pat = ((uint32_t)blk << 16) | k;
      float x;
      memcpy(&x, &pat, 4);
      const float y = f(x);
      int ok;
      const double r = ref((double)x);
      float lo, hi;
      const float rn = (float)r;
      if ((double)rn == r)
        lo = hi = rn;
      else if ((double)rn < r) {
        lo = rn;
        hi = nextafterf(rn, INFINITY);
      } else {
        hi = rn;
        lo = nextafterf(rn, -INFINITY);
      }
      int ambiguous = r != r || (double)lo == r || (double)hi == r ||
                      fabs(r - (double)lo) <= fabs(r) * 0x1p-48 ||
                      fabs((double)hi - r) <= fabs(r) * 0x1p-48;
      /* binary64 overflow or underflow of a finite input: the truth is beyond binary32's range */
      if (isinf(r) && r > 0 && isfinite(x)) {
        lo = FLT_MAX;
        hi = INFINITY;
        ambiguous = 0;
      } /* e^x, 2^x overflow */
      if (r != r) {
        lo = hi = r;
        ambiguous = 0;
      } /* NaN in, or log of x < 0: the truth is NaN */
      if (exp_like && x != 0.0f && fabs(r - 1.0) <= 0x1p-29) {
        lo = x > 0.0f ? 1.0f : nextafterf(1.0f, 0.0f);
        hi = x > 0.0f ? nextafterf(1.0f, 2.0f) : 1.0f;
        ambiguous = 0;
      }
      if (r == 0.0 && isfinite(x) && x < 0.0f) {
        lo = 0.0f;
        hi = 0x1p-149f;
        ambiguous = 0;
      } /* e^x, 2^x > 0 */
      if (ambiguous || (pat & 4095u) == 0) {
        float mlo, mhi;
        mpfr_bracket32(mf, x, &mlo, &mhi);
        ok = faithful32(y, mlo, mhi);
        if (ambiguous)
          settled++;
        else {
          sampled++;
          /* the filter's premise: where it decides, its bracket is MPFR's */
          const int both_nan = mlo != mlo && lo != lo; /* NaN compares as a class */
          if (!both_nan && (bits32(mlo) != bits32(lo) || bits32(mhi) != bits32(hi))) ok = 0;
        }
      } else {
        ok = faithful32(y, lo, hi);
      }
      if (!ok) {
        fails++;
#pragma omp critical
        if (!first[0])
          snprintf(first, sizeof first, "FAIL %s x=%a (0x%08X) got=%a", name, (double)x, pat,
                   (double)y);
      }
    }
  }
  cr_log_info("%s: 2^32 inputs, %ld decided by MPFR, %ld more sampled against MPFR", name, settled,
              sampled);
  printf("%s: 2^32 inputs, %ld decided by MPFR, %ld more sampled against MPFR, %ld failures\n",
         name, settled, sampled, fails);
  cr_assert_eq(fails, 0, "%ld inputs not faithful; first: %s", fails, first);
}

Test(pmath_exhaustive, expf) { run("expf", mlr_expf, exp, mpfr_exp, 1); }
Test(pmath_exhaustive, exp2f) { run("exp2f", mlr_exp2f, exp2, mpfr_exp2, 1); }
Test(pmath_exhaustive, logf) { run("logf", mlr_logf, log, mpfr_log, 0); }
Test(pmath_exhaustive, log2f) { run("log2f", mlr_log2f, log2, mpfr_log2, 0); }
