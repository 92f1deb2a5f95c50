/* ref/oracle: the certified oracle against the plain 256-bit MPFR computation, element by
 * element within 1 ulp, on small shapes (ragged, paged, q_len 2, kv_len 0, FNUZ, bf16 KV, the
 * truth from kv_bf16, outliers that force the wide exact sums) and on sampled rows of the bs=4
 * bench shapes; and the binary64 truth close to both. The contract's optional fields (sm_scale,
 * k_scale / v_scale / kpe_scale, fp8 Q, noncausal, up to 128 heads and 16 query tokens, a KV pool
 * with rows no batch reads) on hand-built inputs, also against the definition evaluated in MPFR
 * apart from ref/oracle, and a case small enough to know the answer exactly. */
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

/* the oracle within 1 ulp of the 256-bit computation, the binary64 truth within a relative tol64
 * (where the sums do not cancel) */
static void check_against_plain(const mlr_inputs *in, mlr_truth_from from, const char *what,
                                double tol64) {
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
    cr_assert(fabs(to[i] - ro[i]) <= tol64 * fabs(ro[i]) + 1e-300,
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
    check_against_plain(&g.in, MLR_TRUTH_DEQUANTIZED, specs[k], 1e-9);
    mlr_tf_free(&g.tf);
  }
  static gen g;
  gen_make(&g, "bs=2,kv=45,seed=12,bf16kv=1");
  check_against_plain(&g.in, MLR_TRUTH_BF16, "truth from kv_bf16", 1e-9);
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
  check_against_plain(&one, MLR_TRUTH_DEQUANTIZED, what, 1e-9);
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

/* ---- the contract's optional fields, on inputs built by hand ---- */

enum { MAXB = 8 };

typedef struct hand {
  uint16_t *q, *kvb;
  uint8_t *q8, *kv;
  int32_t qo[MAXB + 1], kvi[MAXB + 1];
  mlr_inputs in;
} hand;

/* about N(0, 1), a function of (seed, i) alone: four uniforms from a 64-bit mix, centred */
static double hval(uint64_t seed, uint64_t i) {
  double s = 0;
  for (uint64_t k = 0; k < 4; k++) {
    uint64_t x = (seed * 4 + k + 1) * 0x9E3779B97F4A7C15ull ^ (i + 1) * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    s += (double)(x >> 11) * 0x1p-53;
  }
  return (s - 2.0) * 1.7320508075688772;
}

static uint16_t bf16_of(double x) {
  return (uint16_t)mlr_encode_f64(x, MLR_FMT_BF16, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT, 0);
}

/* B batches of qlen[b] query tokens and kvlen[b] KV tokens, H heads, KV codes in fmt (e4m3 or
 * e4m3fnuz) at kv_scale 2^-6 with kv_bf16 beside them, and `spare` more KV rows after the last
 * batch's that hold NaN (no batch reads them) */
static void hand_make(hand *g, int B, const int *qlen, const int *kvlen, int64_t H, int spare,
                      mlr_format fmt, uint64_t seed) {
  memset(g, 0, sizeof *g);
  int64_t T = 0, N = 0;
  g->qo[0] = g->kvi[0] = 0;
  for (int b = 0; b < B; b++) {
    T += qlen[b];
    N += kvlen[b];
    g->qo[b + 1] = (int32_t)T;
    g->kvi[b + 1] = (int32_t)N;
  }
  const int64_t rows = N + spare;
  g->q = malloc((size_t)(T * H * QK) * 2);
  g->kv = malloc((size_t)(rows * QK));
  g->kvb = malloc((size_t)(rows * QK) * 2);
  for (int64_t i = 0; i < T * H * QK; i++) g->q[i] = bf16_of(hval(seed, (uint64_t)i));
  const uint8_t nan8 = fmt == MLR_FMT_E4M3 ? 0x7F : 0x80;
  for (int64_t i = 0; i < rows * QK; i++) {
    const double z = hval(seed + 1, (uint64_t)i);
    g->kv[i] = i < N * QK
                   ? (uint8_t)mlr_encode_f64(z * 64, fmt, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE, 0)
                   : nan8;
    g->kvb[i] = i < N * QK ? bf16_of(z) : 0x7FC0;
  }
  mlr_inputs *in = &g->in;
  in->T = T;
  in->H = H;
  in->N = rows;
  in->B = B;
  in->page = 1;
  in->q = g->q;
  in->kv = g->kv;
  in->kv_format = fmt;
  in->kv_scale = 0x1p-6f;
  in->qo_indptr = g->qo;
  in->kv_indptr = g->kvi;
  in->kv_bf16 = g->kvb;
}

/* Q as fp8 codes in fmt with the descale amax / max (the bf16 Q's largest magnitude) */
static void hand_q8(hand *g, mlr_format fmt) {
  const int64_t n = g->in.T * g->in.H * QK;
  double amax = 0;
  for (int64_t i = 0; i < n; i++) amax = fmax(amax, fabs(mlr_decode(MLR_FMT_BF16, g->q[i])));
  const float s = (float)(amax / mlr_format_max(fmt));
  g->q8 = malloc((size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; i++)
    g->q8[i] = (uint8_t)mlr_encode_f64(mlr_decode(MLR_FMT_BF16, g->q[i]) / s, fmt,
                                       MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE, 0);
  g->in.q = NULL;
  g->in.q8 = g->q8;
  g->in.q_format = fmt;
  g->in.q_scale = s;
  g->in.has_q_scale = 1;
}

static void hand_free(hand *g) {
  free(g->q);
  free(g->q8);
  free(g->kv);
  free(g->kvb);
}

/* The truth from its definition, apart from ref/oracle: K = value x k_scale on columns 0..511
 * and x kpe_scale on 512..575, V = value x v_scale (the fp8 codes' values; kv_bf16's with no
 * scale), Q = the bf16 value or the fp8 code's value x q_scale, logits sm_scale (Q . K) over the
 * 576 columns at once (sm_scale absent: 1/24 exactly), token i of n seeing L - (n - 1 - i) KV
 * tokens, or all L when noncausal; every operation in MPFR at 320 bits. */
typedef struct dctx {
  const mlr_inputs *in;
  int bf;            /* from kv_bf16 */
  double kn, kr, vs; /* K's latent and rope scales, V's */
  mpfr_t sm, x, acc, m, S, N, s[64];
} dctx;

/* KV element c of row r: the fp8 code's value, or kv_bf16's */
static double dkv(const dctx *z, int64_t r, int c) {
  const mlr_inputs *in = z->in;
  return z->bf ? mlr_decode(MLR_FMT_BF16, in->kv_bf16[r * QK + c])
               : mlr_decode(in->kv_format, ((const uint8_t *)in->kv)[r * QK + c]);
}

/* the logits s[j] of Q row `row` against batch b's first Lt tokens, and their largest m */
static void dlogits(dctx *z, int64_t b, int64_t row, int64_t Lt) {
  const mlr_inputs *in = z->in;
  for (int64_t j = 0; j < Lt; j++) {
    const int64_t r = mlr_inputs_kv_row(in, b, j);
    mpfr_set_zero(z->acc, 1);
    for (int c = 0; c < QK; c++) {
      const double q = in->q8 ? (double)mlr_decode(in->q_format, in->q8[row * QK + c]) * in->q_scale
                              : mlr_decode(MLR_FMT_BF16, in->q[row * QK + c]);
      mpfr_set_d(z->x, q, MPFR_RNDN);
      mpfr_mul_d(z->x, z->x, dkv(z, r, c), MPFR_RNDN);
      mpfr_mul_d(z->x, z->x, c < 512 ? z->kn : z->kr, MPFR_RNDN);
      mpfr_add(z->acc, z->acc, z->x, MPFR_RNDN);
    }
    mpfr_mul(z->s[j], z->acc, z->sm, MPFR_RNDN);
    if (j == 0 || mpfr_cmp(z->s[j], z->m) > 0) mpfr_set(z->m, z->s[j], MPFR_RNDN);
  }
}

/* o and lse of Q row `row` (batch b, Lt visible tokens) */
static void drow(dctx *z, int64_t b, int64_t row, int64_t Lt, double *o, double *lse) {
  if (Lt <= 0) {
    for (int d = 0; d < DV; d++) o[d] = 0;
    *lse = -INFINITY;
    return;
  }
  dlogits(z, b, row, Lt);
  mpfr_set_zero(z->S, 1);
  for (int64_t j = 0; j < Lt; j++) {
    mpfr_sub(z->s[j], z->s[j], z->m, MPFR_RNDN);
    mpfr_exp(z->s[j], z->s[j], MPFR_RNDN);
    mpfr_add(z->S, z->S, z->s[j], MPFR_RNDN);
  }
  for (int d = 0; d < DV; d++) {
    mpfr_set_zero(z->N, 1);
    for (int64_t j = 0; j < Lt; j++) {
      mpfr_mul_d(z->x, z->s[j], dkv(z, mlr_inputs_kv_row(z->in, b, j), d), MPFR_RNDN);
      mpfr_mul_d(z->x, z->x, z->vs, MPFR_RNDN);
      mpfr_add(z->N, z->N, z->x, MPFR_RNDN);
    }
    mpfr_div(z->N, z->N, z->S, MPFR_RNDN);
    o[d] = mpfr_get_d(z->N, MPFR_RNDN);
  }
  mpfr_log(z->S, z->S, MPFR_RNDN);
  mpfr_add(z->S, z->S, z->m, MPFR_RNDN);
  *lse = mpfr_get_d(z->S, MPFR_RNDN);
}

static void direct(const mlr_inputs *in, mlr_truth_from from, double *o, double *lse) {
  static dctx z;
  z.in = in;
  z.bf = from == MLR_TRUTH_BF16;
  const double ks = in->k_scale != 0 ? in->k_scale : in->kv_scale;
  z.kn = z.bf ? 1 : ks;
  z.kr = z.bf ? 1 : in->kpe_scale != 0 ? in->kpe_scale : ks;
  z.vs = z.bf ? 1 : in->v_scale != 0 ? in->v_scale : in->kv_scale;
  mpfr_inits2(320, z.sm, z.x, z.acc, z.m, z.S, z.N, (mpfr_ptr)0);
  for (int j = 0; j < 64; j++) mpfr_init2(z.s[j], 320);
  if (in->sm_scale > 0)
    mpfr_set_d(z.sm, in->sm_scale, MPFR_RNDN);
  else
    mpfr_set_ui(z.sm, 1, MPFR_RNDN), mpfr_div_ui(z.sm, z.sm, 24, MPFR_RNDN);
  for (int64_t b = 0; b < in->B; b++) {
    const int64_t n = in->qo_indptr[b + 1] - in->qo_indptr[b], L = mlr_inputs_kv_len(in, b);
    cr_assert(L <= 64);
    for (int64_t i = 0; i < n; i++)
      for (int64_t h = 0; h < in->H; h++) {
        const int64_t row = (in->qo_indptr[b] + i) * in->H + h;
        drow(&z, b, row, in->noncausal ? L : L - (n - 1 - i), o + row * DV, lse + row);
      }
  }
  for (int j = 0; j < 64; j++) mpfr_clear(z.s[j]);
  mpfr_clears(z.sm, z.x, z.acc, z.m, z.S, z.N, (mpfr_ptr)0);
}

/* the oracle within 1 ulp of the definition, and of plain256 (check_against_plain) */
static void check_tol(const mlr_inputs *in, mlr_truth_from from, const char *what, double tol64) {
  check_against_plain(in, from, what, tol64);
  const size_t n = (size_t)(in->T * in->H * DV), nl = (size_t)(in->T * in->H);
  double *o = malloc(n * 8), *l = malloc(nl * 8), *ro = malloc(n * 8), *rl = malloc(nl * 8);
  mlr_error err = {""};
  cr_assert_eq(mlr_oracle(in, from, o, l, NULL, &err), MLR_OK, "%s: %s", what, err.msg);
  direct(in, from, ro, rl);
  for (size_t i = 0; i < n; i++)
    cr_assert(within_1ulp(o[i], ro[i]), "%s: o[%zu] = %a, the definition gives %a", what, i, o[i],
              ro[i]);
  for (size_t i = 0; i < nl; i++)
    cr_assert(within_1ulp(l[i], rl[i]), "%s: lse[%zu] = %a, the definition gives %a", what, i, l[i],
              rl[i]);
  free(o);
  free(l);
  free(ro);
  free(rl);
}

static void check_all(const mlr_inputs *in, mlr_truth_from from, const char *what) {
  check_tol(in, from, what, 1e-9);
}

/* the oracle's o and lse bit for bit on two inputs */
static void same_bits(const mlr_inputs *a, const mlr_inputs *b, mlr_truth_from from,
                      const char *what) {
  const size_t n = (size_t)(a->T * a->H * DV), nl = (size_t)(a->T * a->H);
  double *o = malloc(n * 8), *l = malloc(nl * 8), *o2 = malloc(n * 8), *l2 = malloc(nl * 8);
  mlr_error err = {""};
  cr_assert_eq(mlr_oracle(a, from, o, l, NULL, &err), MLR_OK, "%s: %s", what, err.msg);
  cr_assert_eq(mlr_oracle(b, from, o2, l2, NULL, &err), MLR_OK, "%s: %s", what, err.msg);
  cr_assert(memcmp(o, o2, n * 8) == 0 && memcmp(l, l2, nl * 8) == 0, "%s: the bits differ", what);
  free(o);
  free(l);
  free(o2);
  free(l2);
}

Test(oracle, sm_scale_and_split_kv_scales, .timeout = 600) {
  static hand g;
  const int ql[2] = {2, 1}, kl[2] = {40, 7};
  hand_make(&g, 2, ql, kl, 16, 0, MLR_FMT_E4M3, 21);
  g.in.sm_scale = 0.1;
  check_all(&g.in, MLR_TRUTH_DEQUANTIZED, "sm_scale 0.1");
  g.in.k_scale = 0.0123f;
  g.in.v_scale = 0.0211f;
  check_all(&g.in, MLR_TRUTH_DEQUANTIZED, "k_scale, v_scale");
  g.in.kpe_scale = 0.0377f;
  check_all(&g.in, MLR_TRUTH_DEQUANTIZED, "k_scale, v_scale, kpe_scale");
  g.in.sm_scale = 0;
  check_all(&g.in, MLR_TRUTH_DEQUANTIZED, "split scales, sm_scale absent");
  /* Q columns of 2^-120 and 2^-40: exact dots past one binary64 chain (the long accumulator and
   * the 128-bit fixed point), each part on its own */
  for (int64_t r = 0; r < g.in.T * g.in.H; r++) {
    g.q[r * QK + 3] = bf16_of(0x1p-120);
    g.q[r * QK + 520] = bf16_of(0x1p-40);
  }
  check_all(&g.in, MLR_TRUTH_DEQUANTIZED, "split scales, wide exact dots");
  hand_free(&g);
}

/* Two tokens whose logits differ by 2^-40 (one Q column of 2^-40 against K codes 1 and 0) and
 * whose V columns are +1 and -1: o cancels to about 2^-41 of its terms, beyond the double-double
 * sums' certificate, so the elements are recomputed in MPFR (step 4) and certified there */
Test(oracle, cancelling_columns_are_certified_in_mpfr) {
  static hand g;
  const int ql[1] = {1}, kl[1] = {2};
  for (int split = 0; split < 2; split++) {
    hand_make(&g, 1, ql, kl, 1, 0, MLR_FMT_E4M3, 29);
    memset(g.q, 0, QK * 2);
    memset(g.kv, 0, 2 * QK);
    g.q[0] = bf16_of(1.0);
    g.q[7] = bf16_of(0x1p-40);
    g.q[570] = bf16_of(0.5);
    for (int j = 0; j < 2; j++) {
      g.kv[j * QK + 0] = 0x38;                                            /* 1 */
      g.kv[j * QK + 7] = j ? 0x00 : 0x38;                                 /* 1 and 0 */
      g.kv[j * QK + 570] = 0x30;                                          /* 0.5 */
      for (int d = 100; d < 110; d++) g.kv[j * QK + d] = j ? 0xB8 : 0x38; /* +1, -1 */
    }
    if (split) g.in.kpe_scale = 0.75f;
    /* the binary64 truth is not certified: here it is off by 6% (tol64 1) */
    check_tol(&g.in, MLR_TRUTH_DEQUANTIZED, split ? "cancelling, split" : "cancelling", 1.0);
    hand_free(&g);
  }
}

Test(oracle, fp8_q, .timeout = 600) {
  static hand g;
  const int ql[2] = {1, 3}, kl[2] = {33, 20};
  hand_make(&g, 2, ql, kl, 16, 0, MLR_FMT_E4M3, 22);
  hand_q8(&g, MLR_FMT_E4M3);
  check_all(&g.in, MLR_TRUTH_DEQUANTIZED, "e4m3 Q");
  g.in.kpe_scale = 0.05f;
  g.in.sm_scale = 0.07;
  check_all(&g.in, MLR_TRUTH_DEQUANTIZED, "e4m3 Q, kpe_scale, sm_scale");
  hand_free(&g);
  hand_make(&g, 2, ql, kl, 16, 0, MLR_FMT_E4M3FNUZ, 23);
  hand_q8(&g, MLR_FMT_E4M3FNUZ);
  check_all(&g.in, MLR_TRUTH_DEQUANTIZED, "e4m3fnuz Q and KV");
  check_all(&g.in, MLR_TRUTH_BF16, "e4m3fnuz Q, the truth from kv_bf16");
  hand_free(&g);
}

Test(oracle, noncausal_and_8_query_tokens, .timeout = 600) {
  static hand g;
  const int ql[3] = {8, 3, 8}, kl[3] = {12, 30, 7};
  hand_make(&g, 3, ql, kl, 4, 0, MLR_FMT_E4M3, 24);
  g.in.noncausal = 1; /* 7 KV tokens for 8 query tokens: each sees all 7 */
  check_all(&g.in, MLR_TRUTH_DEQUANTIZED, "noncausal, q_len 8");
  g.in.noncausal = 0; /* causal: the last batch's first token sees none */
  check_all(&g.in, MLR_TRUTH_DEQUANTIZED, "causal, q_len 8");
  hand_free(&g);
}

Test(oracle, heads_128_and_a_pool_with_spare_rows, .timeout = 600) {
  static hand g;
  const int ql[1] = {2}, kl[1] = {24};
  hand_make(&g, 1, ql, kl, 128, 0, MLR_FMT_E4M3, 25);
  g.in.k_scale = 0.02f;
  g.in.kpe_scale = 0.011f;
  check_all(&g.in, MLR_TRUTH_DEQUANTIZED, "128 heads");
  hand_free(&g);
  /* 19 rows past kv_indptr's last entry hold NaN codes: read, they would make o NaN */
  const int ql2[2] = {1, 2}, kl2[2] = {15, 26};
  hand_make(&g, 2, ql2, kl2, 16, 19, MLR_FMT_E4M3, 26);
  check_all(&g.in, MLR_TRUTH_DEQUANTIZED, "a pool with spare rows");
  check_all(&g.in, MLR_TRUTH_BF16, "a pool with spare rows, from kv_bf16");
  hand_free(&g);
}

/* The scales given at their defaults are the scales absent, bit for bit; the truth from kv_bf16
 * applies none of them (kv_bf16 holds the values themselves) */
Test(oracle, default_scales_and_the_bf16_truth) {
  static hand g;
  const int ql[2] = {2, 1}, kl[2] = {30, 9};
  hand_make(&g, 2, ql, kl, 16, 0, MLR_FMT_E4M3, 27);
  mlr_inputs given = g.in;
  given.k_scale = given.v_scale = given.kpe_scale = g.in.kv_scale;
  same_bits(&g.in, &given, MLR_TRUTH_DEQUANTIZED, "explicit default scales");
  given.k_scale = 0.3f;
  given.v_scale = 0.7f;
  given.kpe_scale = 0.9f;
  same_bits(&g.in, &given, MLR_TRUTH_BF16, "scales and the truth from kv_bf16");
  hand_free(&g);
}

/* one token: o is V exactly and lse the logit, here exact in binary64: sm (q0 k0 sk + q575 k575
 * skpe) = 0.125 (1 x 1 x 0.5 + 2 x 0.5 x 4) = 0.5625; o[0] = 1 x v_scale, o[1] = -3 x v_scale */
Test(oracle, one_token_exactly) {
  static hand g;
  const int ql[1] = {1}, kl[1] = {1};
  hand_make(&g, 1, ql, kl, 1, 0, MLR_FMT_E4M3, 28);
  memset(g.q, 0, QK * 2);
  memset(g.kv, 0, QK);
  g.q[0] = bf16_of(1.0);
  g.q[575] = bf16_of(2.0);
  const uint8_t one = 0x38, half = 0x30, m3 = 0xC4; /* e4m3: 1, 0.5, -3 */
  g.kv[0] = one;
  g.kv[1] = m3;
  g.kv[575] = half;
  g.in.k_scale = 0.5f;
  g.in.kpe_scale = 4.0f;
  g.in.v_scale = 0.375f;
  g.in.sm_scale = 0.125;
  double o[DV], l;
  mlr_error err = {""};
  cr_assert_eq(mlr_oracle(&g.in, MLR_TRUTH_DEQUANTIZED, o, &l, NULL, &err), MLR_OK, "%s", err.msg);
  cr_expect_eq(l, 0.5625, "lse %a", l);
  cr_expect_eq(o[0], 0.375, "o[0] %a", o[0]);
  cr_expect_eq(o[1], -1.125, "o[1] %a", o[1]);
  cr_expect_eq(o[2], 0.0, "o[2] %a", o[2]);
  hand_free(&g);
}
