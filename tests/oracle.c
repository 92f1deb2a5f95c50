/* ref/oracle: the certified oracle against the plain 256-bit MPFR computation, element by
 * element within 1 ulp, on small shapes (ragged, paged, q_len 2, kv_len 0, FNUZ, bf16 KV, the
 * truth from kv_bf16, outliers that force the wide exact sums) and on sampled rows of the bs=4
 * bench shapes; and the binary64 truth close to both. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdint.h>
#include <mpfr.h>

#include "mlr_oracle.h"
#include "test_gen.h"

#define QK 576
#define DV 512

/* a is r, or the next binary64 above or below it */
static int within_1ulp(double a, double r) {
  if (a == r || (isnan(a) && isnan(r))) return 1;
  return a == nextafter(r, INFINITY) || a == nextafter(r, -INFINITY);
}

static void check_against_plain(const mlr_inputs *in, mlr_truth_from from, const char *what) {
  const size_t n = (size_t)(in->T * in->H * DV), nl = (size_t)(in->T * in->H);
  double *o = malloc(n * 8), *l = malloc(nl * 8), *ro = malloc(n * 8), *rl = malloc(nl * 8),
         *to = malloc(n * 8), *tl = malloc(nl * 8);
  mlr_oracle_stats st;
  mlr_error err = {""};
  cr_assert_eq(mlr_oracle(in, from, o, l, &st, &err), MLR_OK, "%s: %s", what, err.msg);
  cr_assert_eq(st.uncertified, 0, "%s: %lld uncertified", what, (long long)st.uncertified);
  cr_assert_eq(mlr_oracle_plain256(in, from, ro, rl, &err), MLR_OK, "%s: %s", what, err.msg);
  cr_assert_eq(mlr_truth_f64(in, from, to, tl, &err), MLR_OK, "%s: %s", what, err.msg);
  for (size_t i = 0; i < n; i++) {
    cr_assert(within_1ulp(o[i], ro[i]), "%s: o[%zu] = %a, the 256-bit computation gives %a", what,
              i, o[i], ro[i]);
    cr_assert(fabs(to[i] - ro[i]) <= 1e-9 * fabs(ro[i]) + 1e-300,
              "%s: binary64 truth o[%zu] = %a vs %a", what, i, to[i], ro[i]);
  }
  for (size_t i = 0; i < nl; i++)
    cr_assert(within_1ulp(l[i], rl[i]), "%s: lse[%zu] = %a, the 256-bit computation gives %a", what,
              i, l[i], rl[i]);
  free(o);
  free(l);
  free(ro);
  free(rl);
  free(to);
  free(tl);
}

Test(oracle, within_1_ulp_of_256_bit_mpfr_on_small_shapes, .timeout = 600) {
  static const char *const specs[] = {"bs=2,kv=64,seed=3",
                                      "lens=1:0:40,page=16,seed=5",
                                      "lens=3:40,q=2,page=16,seed=6",
                                      "bs=1,kv=50,seed=7,fmt=e4m3fnuz",
                                      "bs=2,kv=30,seed=2,dist=outliers:0.05",
                                      "bs=1,kv=40,seed=9,fmt=bf16",
                                      "bs=2,kv=33,seed=11,dist=t3"};
  for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
    static gen g;
    gen_make(&g, specs[k]);
    check_against_plain(&g.in, MLR_TRUTH_DEQUANTIZED, specs[k]);
    mlr_tf_free(&g.tf);
  }
  static gen g;
  gen_make(&g, "bs=2,kv=45,seed=12,bf16kv=1");
  check_against_plain(&g.in, MLR_TRUTH_BF16, "truth from kv_bf16");
  mlr_error err = {""};
  double o[1], l[1];
  mlr_tf_free(&g.tf);
  gen_make(&g, "bs=1,kv=4,seed=1");
  cr_assert_eq(mlr_oracle(&g.in, MLR_TRUTH_BF16, o, l, NULL, &err), MLR_EINVAL);
  cr_assert(strstr(err.msg, "kv_bf16"), "%s", err.msg);
  mlr_tf_free(&g.tf);
}

/* one (batch, head) of a bench cell as its own inputs: T = 1, H = 1 */
static void sampled_row(const char *spec, int64_t b, int64_t h) {
  static gen g;
  gen_make(&g, spec);
  mlr_inputs one = g.in;
  int32_t qo[2] = {0, 1}, kvi[2] = {g.in.kv_indptr[b], g.in.kv_indptr[b + 1]};
  uint16_t *q = malloc(QK * 2);
  memcpy(q, g.in.q + (g.in.qo_indptr[b] * g.in.H + h) * QK, QK * 2);
  one.T = 1;
  one.H = 1;
  one.B = 1;
  one.q = q;
  one.qo_indptr = qo;
  one.kv_indptr = kvi;
  char what[160];
  snprintf(what, sizeof what, "%s batch %lld head %lld", spec, (long long)b, (long long)h);
  check_against_plain(&one, MLR_TRUTH_DEQUANTIZED, what);
  free(q);
  mlr_tf_free(&g.tf);
}

Test(oracle, sampled_rows_of_the_bs4_bench_shapes, .timeout = 900) {
  sampled_row("bs=4,kv=1024,seed=4217", 0, 0);
  sampled_row("bs=4,kv=1024,seed=4217", 3, 11);
  sampled_row("bs=4,kv=8192,seed=4220", 2, 7);
}

/* the oracle's double-double exp against MPFR at 256 bits: relative error below 2^-97 (the oracle
 * counts 2^-94) over arguments in [-650, 0] and tiny ones (below -650 the low part is subnormal;
 * the oracle counts those results with an absolute error term) */
Test(oracle, double_double_exp_within_its_bound) {
  enum { N = 200000 };
  double *th = malloc(N * 8), *tl = malloc(N * 8), *h = malloc(N * 8), *l = malloc(N * 8);
  for (int i = 0; i < N; i++) {
    const double u = (double)((uint64_t)i * 0x9E3779B97F4A7C15ull >> 11) * 0x1p-53; /* in [0, 1) */
    th[i] = i % 4 == 0 ? -u * 1e-6 : -u * 650.0;
    tl[i] = th[i] * 0x1p-60 * (i % 3 ? 1 : -1); /* a lower part below half an ulp */
  }
  mlr_oracle_exp_dd(th, tl, N, h, l);
  mpfr_t x, y, z;
  mpfr_inits2(256, x, y, z, (mpfr_ptr)0);
  double worst = 0;
  for (int i = 0; i < N; i++) {
    mpfr_set_d(x, th[i], MPFR_RNDN);
    mpfr_add_d(x, x, tl[i], MPFR_RNDN);
    mpfr_exp(y, x, MPFR_RNDN);
    mpfr_set_d(z, h[i], MPFR_RNDN);
    mpfr_add_d(z, z, l[i], MPFR_RNDN);
    mpfr_sub(z, z, y, MPFR_RNDN);
    mpfr_div(z, z, y, MPFR_RNDN);
    const double r = fabs(mpfr_get_d(z, MPFR_RNDN));
    if (r > worst) worst = r;
  }
  cr_assert_leq(worst, 0x1p-97, "max relative error %a", worst);
  mpfr_clears(x, y, z, (mpfr_ptr)0);
  free(th);
  free(tl);
  free(h);
  free(l);
}
