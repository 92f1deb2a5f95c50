/* The certified oracle (mlr_oracle.h): each output element a binary64 within 1 ulp of the exact
 * real attention output.
 *
 * Values (oracle_internal.h, mlr__scales): Q = q x sq (bf16 q and sq = 1, or fp8 codes' values
 * q and sq = q_scale), K = k x sk on the 512 latent columns and k x skpe on the 64 rope columns,
 * V = k x sv, k the kv code's value (from = dequantized) or kv_bf16's (every scale 1); logits
 * s_j = sm (Q . K_j), sm the given sm_scale or exactly 1/24. Per query token and head, with L
 * visible tokens (mlr_inputs_visible):
 *  1. Dots, exact, of the values q and k (the scales are factored out): with skpe = sk, one dot
 *     D_j = sum_c q_c k_c over the 576 columns and c = sk sq sm; otherwise the latent and rope
 *     dots D^n_j and D^r_j apart, D_j = sk D^n_j + skpe D^r_j and c = sq sm. Each exact sum is
 *     formed in binary64 where the operands' ranges make every partial sum exact, else in a
 *     128-bit fixed point, else in the long accumulator (ref/pmath/mlr_exact.h), and stored in
 *     MPFR at DPREC bits (one rounding, relative error <= 2^-DPREC); a row with a NaN or Inf sums
 *     in MPFR as it comes (its elements are not certified). Two dots are combined in MPFR (the
 *     products by binary32 scales exact at DPREC + 64 bits, one more rounding at DPREC), so D_j is
 *     off by at most 2^(1-DPREC) M_j with M_j = sk |D^n_j| + skpe |D^r_j|; one dot: 2^-DPREC M_j
 *     with M_j = |D_j|. sk sq is exact in binary64 (two binary32), so c's only rounding is sm's.
 *  2. t_j = (D_j - D_max) * c in MPFR at WPREC bits, and p_j = e^t_j (MPFR, correctly rounded at
 *     WPREC bits). Errors: D's 2^(1-DPREC) M, the subtraction, c and the product 2^-WPREC each, so
 *     the computed t_j is off by at most dt = 3 * 2^-WPREC |t_j| + 2^(1-DPREC) (M_j + M_max) |c|,
 *     and p_j by a relative e^dt - 1 + 2^-WPREC <= 2 dt + 2^-WPREC (dt < 2^-20 is checked).
 *     When every dot is exact in binary64 (and 2^-500 <= |c| <= 2^500, so that no double-double
 *     quantity underflows), t_j is formed in double-double instead: the differences exactly
 *     (TwoSum); c as cval / 24 with its remainder, or cval sm exactly (TwoProd); with two dots each
 *     difference times its scale, then their sum; each step within 2^-103 of its own magnitude,
 *     so dt = 2^-101 |t_j| (one dot) or 2^-99 |c| (sk |D^n_j - D^n_max| + skpe |D^r_j - D^r_max|)
 *     (two); and e^t by exp_dd. Any D_max gives the same o and lse (it cancels): with two dots it
 *     is the largest binary64 estimate of D_j, so a t_j may be slightly above 0.
 *  3. p_j is split into binary64 ph + pl (|p - ph - pl| <= 2^-106 p). S = sum p_j and
 *     N_d = sum p_j v_jd (v exact in binary64: an fp8 value times a binary32 scale has at most
 *     28 significant bits) are summed in double-double: ph*v exactly by an fma (TwoProd), the sum
 *     by TwoSum into hi with the errors, pl*v and the lower parts added into lo. A rigorous bound
 *     for the double-double part: every rounding in lo is at most 2^-53 |lo| and |lo| <= L 2^-50 A
 *     (A = sum_j p_j |v_jd|), three of them per term, so the accumulated error is at most
 *     3 L^2 2^-103 A; the pl*v roundings add L 2^-106 A.
 *  4. o_d = N_d / S rounded to binary64. With e_N, e_S the bounds of steps 2 and 3 relative to
 *     |N|, S, the computed quotient is within (e_N + e_S + 2^-100) |o_d|: when that is at most
 *     2^-54, rounding it to nearest gives a binary64 within 1 ulp of o_d (faithful). Otherwise the
 *     element is recomputed in MPFR (p_j at FPREC bits, products exact, the sum at FPREC + 64
 *     bits) and checked again with the same argument; an element that still cannot be certified
 *     (its terms cancel to below 2^-180 of their magnitude) is counted in stats->uncertified.
 *  5. lse = D_max c + ln S in MPFR at WPREC bits, checked the same way.
 * With the default scales (k_scale = kpe_scale, no sm_scale, bf16 Q) every step is the one-dot
 * computation with c = kv_scale / 24. Performance: the exps (one per token and head) and the
 * double-double sums (vectorised across the 512 columns) dominate. */
#include <limits.h>
#include <math.h>
#include <stdint.h> /* before mpfr.h: its intmax_t functions */
#include <mpfr.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_exact.h"
#include "mlr_formats.h"
#include "mlr_oracle.h"
#include "oracle_internal.h"

#define QK 576
#define DV 512
enum { DPREC = 256, WPREC = 128, FPREC = 256 };

/* sum of q[i] k[i], i < n (a multiple of 16), in binary64 (exact where the caller checked the
 * ranges: any order), 16 lanes for the vector units */
MLR_FMA_CLONES static double dot_f64(const float *q, const float *k, int n) {
  double s[16] = {0};
  for (int i = 0; i < n; i += 16)
    for (int l = 0; l < 16; l++) s[l] = fma((double)q[i + l], (double)k[i + l], s[l]);
  double t = 0;
  for (int l = 0; l < 16; l++) t += s[l];
  return t;
}

/* the exact dot of q and k (n columns, stride 1; fin: every value finite): returned as a binary64
 * when it is exact there (d is then left alone: D_j is set from it when an MPFR path needs it),
 * else NaN with the value in d (DPREC bits, one rounding) */
static double exact_dot_mpfr(const float *q, const float *k, int n, int fin, int qlsb, int qtop,
                             int klsb, int ktop, mlr_xacc *x, mpfr_t d, mpfr_t tmp) {
  if (!fin) { /* the exact sums and ranges take finite values only (inputs allowed NaN or Inf) */
    mpfr_set_zero(d, 1);
    for (int i = 0; i < n; i++) {
      mpfr_set_d(tmp, (double)q[i] * (double)k[i], MPFR_RNDN);
      mpfr_add(d, d, tmp, MPFR_RNDN);
    }
    return NAN;
  }
  if (qlsb > qtop || klsb > ktop) { /* a zero vector */
    mpfr_set_zero(d, 1);
    return 0.0;
  }
  if (mlr_f64_fits(qlsb, qtop, klsb, ktop, n)) return dot_f64(q, k, n); /* partial sums exact */
  if (mlr_i128_fits(qlsb, qtop, klsb, ktop, n)) {
    mlr_i128 acc = 0;
    const int g = qlsb + klsb;
    for (int i = 0; i < n; i++) mlr_i128_fma(&acc, q[i], k[i], g);
    /* acc = hi * 2^64 + lo, exact in tmp (DPREC >= 128 + sign) */
    const int64_t hi = (int64_t)(acc >> 64);
    const uint64_t lo = (uint64_t)acc;
    mpfr_set_sj(tmp, hi, MPFR_RNDN);
    mpfr_mul_2ui(tmp, tmp, 64, MPFR_RNDN);
    /* unsigned long is 64 bits on the targets (LP64) */
    mpfr_add_ui(tmp, tmp, (unsigned long)lo, MPFR_RNDN);
    mpfr_mul_2si(d, tmp, g, MPFR_RNDN);
    return NAN;
  }
  mlr_xacc_clear(x);
  for (int i = 0; i < n; i++) mlr_xacc_add(x, (double)q[i] * (double)k[i]);
  mlr_xacc_normalize(x);
  mpfr_t s;
  mpfr_init2(s, 32 * MLR_XACC_DIGITS + 64); /* the digits' sum is exact at this width */
  mpfr_set_zero(s, 1);
  for (int k2 = 0; k2 < MLR_XACC_DIGITS; k2++) {
    mpfr_set_sj_2exp(tmp, x->d[k2], 32 * k2 + MLR_XACC_EBASE, MPFR_RNDN);
    mpfr_add(s, s, tmp, MPFR_RNDN);
  }
  mpfr_set(d, s, MPFR_RNDN);
  mpfr_clear(s);
  return NAN;
}

/* double-double: (hi, lo) += a * b, a = ph + pl */
static inline void dd_fma(double *hi, double *lo, double ph, double pl, double v) {
  const double x = ph * v, xe = fma(ph, v, -x);
  const double s = *hi + x, bb = s - *hi, e1 = (*hi - (s - bb)) + (x - bb);
  *hi = s;
  *lo = *lo + ((e1 + xe) + pl * v);
}

/* ---- double-double arithmetic (Dekker, Knuth; bounds from Joldes, Muller and Popescu, "Tight
 * and rigorous error bounds for basic building blocks of double-word arithmetic", ACM TOMS 2017:
 * the product below is within 5u^2 and the sum within 3u^2 relative, u = 2^-53; we count 2^-103
 * for either) ---- */
typedef struct dd {
  double h, l;
} dd;

static inline dd dd_fast2sum(double a, double b) { /* |a| >= |b| or a = 0 */
  const double s = a + b;
  return (dd){s, b - (s - a)};
}
static inline dd dd_2sum(double a, double b) {
  const double s = a + b, bb = s - a;
  return (dd){s, (a - (s - bb)) + (b - bb)};
}
static inline dd dd_add(dd a, dd b) {
  dd s = dd_2sum(a.h, b.h);
  const dd t = dd_2sum(a.l, b.l);
  s.l += t.h;
  s = dd_fast2sum(s.h, s.l);
  s.l += t.l;
  return dd_fast2sum(s.h, s.l);
}
static inline dd dd_mul(dd a, dd b) {
  const double p = a.h * b.h;
  double e = fma(a.h, b.h, -p);
  e += a.h * b.l + a.l * b.h;
  return dd_fast2sum(p, e);
}

/* ---- e^t in double-double: t = k ln2/64 + r, |r| <= ln2/128; e^r by its Taylor polynomial of
 * degree 11 (remainder < 0.0055^12 / 12! < 2^-119) in double-double Horner form; e^t =
 * 2^(k/64) e^r with 2^(j/64) from a table made by MPFR. Rounding: 24 double-double operations of
 * at most 2^-103 each, the table's 2^-106, the reduction's 2^-104 |r|: relative error below 2^-97,
 * counted as EXP_DD_ERR = 2^-94. tests/oracle.c measures it against MPFR on 10^6 arguments. ---- */
#define EXP_DD_ERR 0x1p-94
typedef struct exp_tables {
  dd T[64], C[12];
  double L1, L2, L3; /* ln2/64 = L1 + L2 + L3 (+ < 2^-150), L1 with 36 significant bits */
} exp_tables;

static void exp_tables_init(exp_tables *e) {
  mpfr_t x, y;
  mpfr_inits2(320, x, y, (mpfr_ptr)0);
  for (int j = 0; j < 64; j++) {
    mpfr_set_si(x, j, MPFR_RNDN);
    mpfr_div_ui(x, x, 64, MPFR_RNDN);
    mpfr_exp2(x, x, MPFR_RNDN);
    e->T[j].h = mpfr_get_d(x, MPFR_RNDN);
    mpfr_sub_d(x, x, e->T[j].h, MPFR_RNDN);
    e->T[j].l = mpfr_get_d(x, MPFR_RNDN);
  }
  mpfr_set_ui(x, 1, MPFR_RNDN);
  for (int i = 0; i < 12; i++) { /* 1/i! */
    if (i > 1) mpfr_div_ui(x, x, (unsigned long)i, MPFR_RNDN);
    e->C[i].h = mpfr_get_d(x, MPFR_RNDN);
    mpfr_sub_d(y, x, e->C[i].h, MPFR_RNDN);
    e->C[i].l = mpfr_get_d(y, MPFR_RNDN);
  }
  mpfr_const_log2(x, MPFR_RNDN);
  mpfr_div_ui(x, x, 64, MPFR_RNDN);
  mpfr_set(y, x, MPFR_RNDN);
  mpfr_prec_round(y, 36, MPFR_RNDN);
  e->L1 = mpfr_get_d(y, MPFR_RNDN);
  mpfr_sub(x, x, y, MPFR_RNDN);
  e->L2 = mpfr_get_d(x, MPFR_RNDN);
  mpfr_sub_d(x, x, e->L2, MPFR_RNDN);
  e->L3 = mpfr_get_d(x, MPFR_RNDN);
  mpfr_clears(x, y, (mpfr_ptr)0);
}

/* e^t for t = th + tl, th <= 700; the relative bound holds for th >= -650 (below, the low part
 * is subnormal, and below -800 the result is 0): the oracle counts those results, all below
 * 2^-937, in an absolute term of 2^-900 per term and unit of |v| */
MLR_FMA_CLONES static dd exp_dd(const exp_tables *e, double th, double tl) {
  if (th < -800.0) return (dd){0.0, 0.0};
  const double k = nearbyint(th * (64.0 / 0x1.62e42fefa39efp-1)); /* |k| <= 2^17: k L1 exact */
  const double rh = th - k * e->L1;                               /* exact (Sterbenz) */
  dd r = dd_add((dd){rh, 0.0}, (dd){tl, 0.0});
  const double p2 = k * e->L2, p2e = fma(k, e->L2, -p2);
  r = dd_add(r, (dd){-p2, -p2e - k * e->L3});
  dd p = e->C[11];
  for (int i = 10; i >= 0; i--) p = dd_add(dd_mul(p, r), e->C[i]);
  const long kk = (long)k, m = kk >= 0 ? kk / 64 : -((-kk + 63) / 64), j = kk - 64 * m;
  p = dd_mul(p, e->T[j]);
  return (dd){ldexp(p.h, (int)m), ldexp(p.l, (int)m)};
}

void mlr_oracle_exp_dd(const double *th, const double *tl, size_t n, double *h, double *l) {
  exp_tables e;
  exp_tables_init(&e);
  for (size_t i = 0; i < n; i++) {
    const dd r = exp_dd(&e, th[i], tl[i]);
    h[i] = r.h;
    l[i] = r.l;
  }
}

/* hi + lo = sum_j (ph_j + pl_j) v_j[d] in double-double, and A[d] = sum_j ph_j |v_j[d]|, for the
 * 512 columns side by side (each column's sums in token order) */
MLR_FMA_CLONES static void pv_dd(const double *ph, const double *pl, const double *v, int64_t L,
                                 double *hi, double *lo, double *A) {
  for (int d = 0; d < DV; d++) hi[d] = lo[d] = A[d] = 0;
  for (int64_t j = 0; j < L; j++) {
    const double h = ph[j], l = pl[j], *vj = v + j * DV;
    for (int d = 0; d < DV; d++) {
      dd_fma(&hi[d], &lo[d], h, l, vj[d]);
      A[d] += h * fabs(vj[d]);
    }
  }
}

typedef struct row_scratch {
  float q[QK], *k;    /* k: [L][576] operand values (fp8 or bf16 values) */
  double *v;          /* [L][512] V values (exact) */
  int *klsb, *ktop;   /* [L] ranges of the K rows (split: of their latent columns) */
  int *klsb2, *ktop2; /* [L] split: ranges of the K rows' rope columns */
  int *kfin;          /* [L] every value of the K row finite */
  double *Dd;         /* [L] D_j (split: D^n_j) as a binary64 when it is exact there, else NaN */
  double *Ddr, *Dmag; /* [L] split: D^r_j as a binary64, and M_j (step 1) */
  const exp_tables *et;
  const mlr__truth_scales *sc;
  int split;   /* the latent and rope dots apart (kpe_scale != k_scale) */
  int all_d;   /* this row's D are all exact binary64 (the MPFR D are then unset until needed) */
  double vmax; /* max |v| over the batch's V values */
  mpfr_t *D;   /* [L] */
  double *ph, *pl; /* [L] */
  double hi[DV], lo[DV], A[DV];
  mpfr_t tmp, c, prod, t1, p1, t2, p2, dr; /* t1, p1 at WPREC; t2, p2 at FPREC; dr: D^r at DPREC */
  mlr_xacc x;
  int64_t cap;
  int inited;
} row_scratch;

static int scratch_init(row_scratch *w, int64_t cap) {
  memset(w, 0, sizeof *w);
  w->cap = cap > 0 ? cap : 1;
  w->k = malloc((size_t)w->cap * QK * sizeof(float));
  w->v = malloc((size_t)w->cap * DV * sizeof(double));
  w->D = malloc((size_t)w->cap * sizeof(mpfr_t));
  w->ph = malloc((size_t)w->cap * sizeof(double));
  w->pl = malloc((size_t)w->cap * sizeof(double));
  w->klsb = malloc((size_t)w->cap * 5 * sizeof(int));
  w->Dd = malloc((size_t)w->cap * 3 * sizeof(double));
  if (!w->k || !w->v || !w->D || !w->ph || !w->pl || !w->klsb || !w->Dd) return 0;
  w->ktop = w->klsb + w->cap;
  w->klsb2 = w->klsb + 2 * w->cap;
  w->ktop2 = w->klsb + 3 * w->cap;
  w->kfin = w->klsb + 4 * w->cap;
  w->Ddr = w->Dd + w->cap;
  w->Dmag = w->Dd + 2 * w->cap;
  for (int64_t j = 0; j < w->cap; j++) mpfr_init2(w->D[j], DPREC);
  mpfr_inits2(FPREC + 64, w->tmp, w->prod, (mpfr_ptr)0);
  mpfr_inits2(WPREC + 8, w->c, w->t1, w->p1, (mpfr_ptr)0);
  mpfr_inits2(FPREC, w->t2, w->p2, (mpfr_ptr)0);
  mpfr_init2(w->dr, DPREC);
  w->inited = 1;
  return 1;
}

static void scratch_free(row_scratch *w) {
  if (w->inited) {
    for (int64_t j = 0; j < w->cap; j++) mpfr_clear(w->D[j]);
    mpfr_clears(w->tmp, w->prod, w->c, w->t1, w->p1, w->t2, w->p2, w->dr, (mpfr_ptr)0);
  }
  free(w->k);
  free(w->v);
  free(w->D);
  free(w->ph);
  free(w->pl);
  free(w->klsb);
  free(w->Dd);
}

/* split: D_j = sk D^n_j + skpe D^r_j in MPFR, from the two dots (each a binary64 in Dd[j] / Ddr[j],
 * or NaN with its value in D[j] / dr); the products by binary32 scales are exact at FPREC + 64 >=
 * DPREC + 24 bits, the sum rounds once to DPREC. Dmag[j] gets M_j, rounded up generously (the
 * doubles read from MPFR are within 2^-53 relative). */
static void combine(row_scratch *w, int64_t j) {
  if (!isnan(w->Dd[j])) mpfr_set_d(w->D[j], w->Dd[j], MPFR_RNDN); /* exact */
  if (!isnan(w->Ddr[j])) mpfr_set_d(w->dr, w->Ddr[j], MPFR_RNDN);
  w->Dmag[j] = (w->sc->k * fabs(mpfr_get_d(w->D[j], MPFR_RNDN)) +
                w->sc->kpe * fabs(mpfr_get_d(w->dr, MPFR_RNDN))) *
               (1 + 0x1p-40);
  mpfr_mul_d(w->tmp, w->D[j], w->sc->k, MPFR_RNDN);
  mpfr_mul_d(w->prod, w->dr, w->sc->kpe, MPFR_RNDN);
  mpfr_add(w->D[j], w->tmp, w->prod, MPFR_RNDN);
}

/* D_j in MPFR from its binary64 dot(s) */
static void d_set(row_scratch *w, int64_t j) {
  if (w->split)
    combine(w, j);
  else
    mpfr_set_d(w->D[j], w->Dd[j], MPFR_RNDN); /* exact */
}

/* M_j of step 1: bounds D_j's error in units of 2^(1-DPREC) */
static double dmag(const row_scratch *w, int64_t j) {
  return w->split ? w->Dmag[j] : fabs(mpfr_get_d(w->D[j], MPFR_RNDN));
}

/* p_j = e^((D_j - D_max) c) into p (t and p of precision prec; c carries WPREC + 8 bits, so
 * with prec > WPREC the argument keeps c's error: dt counts it), and the bound dt of the
 * argument's absolute error */
static double p_of(row_scratch *w, int64_t j, int64_t jmax, mpfr_t t, mpfr_t p, int prec,
                   double absc) {
  mpfr_sub(t, w->D[j], w->D[jmax], MPFR_RNDN);
  mpfr_mul(t, t, w->c, MPFR_RNDN);
  const double tj = fabs(mpfr_get_d(t, MPFR_RNDN));
  mpfr_exp(p, t, MPFR_RNDN);
  const int cp = prec < WPREC + 8 ? prec : WPREC + 8;
  return 2 * ldexp(tj, -prec) + ldexp(tj, -cp) +
         ldexp((dmag(w, j) + dmag(w, jmax)) * absc, 1 - DPREC);
}

/* D_j in MPFR for every token, where the row's fast path left them unset */
static void d_to_mpfr(row_scratch *w, int64_t L) {
  if (!w->all_d) return;
  for (int64_t j = 0; j < L; j++) d_set(w, j);
  w->all_d = 0;
}

/* one element in MPFR (the fallback): N_d at FPREC, S at FPREC; 1 if certified */
static int element_mpfr(row_scratch *w, int64_t L, int64_t jmax, int d, double absc, double *o) {
  d_to_mpfr(w, L);
  mpfr_t N, S, A;
  mpfr_inits2(FPREC + 64, N, S, A, (mpfr_ptr)0);
  mpfr_set_zero(N, 1);
  mpfr_set_zero(S, 1);
  mpfr_set_zero(A, 1);
  double dtmax = 0;
  for (int64_t j = 0; j < L; j++) {
    const double dt = p_of(w, j, jmax, w->t2, w->p2, FPREC, absc);
    dtmax = dt > dtmax ? dt : dtmax;
    mpfr_add(S, S, w->p2, MPFR_RNDN);
    mpfr_mul_d(w->prod, w->p2, w->v[j * DV + d], MPFR_RNDN); /* exact: FPREC + 53 bits */
    mpfr_add(N, N, w->prod, MPFR_RNDN);
    mpfr_abs(w->prod, w->prod, MPFR_RNDN);
    mpfr_add(A, A, w->prod, MPFR_RNDN);
  }
  /* relative error of each p: 2 dt + 2^-FPREC (c's 2^-(WPREC+8) is in dt); the sums:
   * L 2^-(FPREC+63) of A and S */
  const double rp = 2 * dtmax + ldexp(1.0, -FPREC) + (double)L * ldexp(1.0, -FPREC - 62);
  const double a = mpfr_get_d(A, MPFR_RNDU), n = fabs(mpfr_get_d(N, MPFR_RNDN));
  mpfr_div(N, N, S, MPFR_RNDN);
  *o = mpfr_get_d(N, MPFR_RNDN);
  const int ok = a == 0 || (n > 0 && rp * a / n + rp + ldexp(1.0, -FPREC) <= ldexp(1.0, -54));
  if (a == 0) *o = 0.0;
  mpfr_clears(N, S, A, (mpfr_ptr)0);
  return ok;
}

/* KV row `row`'s 576 K values before their scales, its 512 V values times theirs (exact) */
static void kv_values(const mlr_inputs *in, mlr_truth_from from, double sv, int64_t row, float *k,
                      double *v) {
  for (int i = 0; i < QK; i++) {
    k[i] = mlr__kv_value(in, from, row, i);
    if (i < DV) v[i] = (double)k[i] * sv; /* exact: <= 24 + 11 bits */
  }
}

/* step 1 for a row (Q in w->q): the dots D_j of the L tokens, as binary64 in Dd (split: Dd and
 * Ddr) where they are exact there, else D[j] in MPFR (Dd[j] then NaN); 1 if all are binary64 */
static int row_dots(row_scratch *w, int64_t L) {
  const int n1 = w->split ? DV : QK; /* the first dot's columns */
  int ql, qt, ql2 = 0, qt2 = 0, all_d = 1, qfin = 1;
  for (int i = 0; i < QK; i++) qfin &= isfinite(w->q[i]) != 0;
  mlr_f32_range(w->q, n1, 1, &ql, &qt);
  if (w->split) mlr_f32_range(w->q + DV, QK - DV, 1, &ql2, &qt2);
  for (int64_t j = 0; j < L; j++) {
    const float *kj = w->k + j * QK;
    const int fin = qfin && w->kfin[j];
    w->Dd[j] =
        exact_dot_mpfr(w->q, kj, n1, fin, ql, qt, w->klsb[j], w->ktop[j], &w->x, w->D[j], w->tmp);
    if (w->split) {
      w->Ddr[j] = exact_dot_mpfr(w->q + DV, kj + DV, QK - DV, fin, ql2, qt2, w->klsb2[j],
                                 w->ktop2[j], &w->x, w->dr, w->tmp);
      if (isnan(w->Dd[j]) || isnan(w->Ddr[j])) {
        combine(w, j);
        w->Dd[j] = NAN;
      } else
        w->Dmag[j] = (w->sc->k * fabs(w->Dd[j]) + w->sc->kpe * fabs(w->Ddr[j])) * (1 + 0x1p-40);
    }
    all_d &= !isnan(w->Dd[j]);
  }
  return all_d;
}

/* the token with the largest D_j: exact where the D are binary64 or MPFR; split and all binary64,
 * the largest binary64 estimate sk D^n_j + skpe D^r_j (any shift is exact: step 2) */
static int64_t row_max(row_scratch *w, int64_t L) {
  int64_t jmax = 0;
  if (w->all_d && w->split) {
    double g = -INFINITY;
    for (int64_t j = 0; j < L; j++) {
      const double gj = w->sc->k * w->Dd[j] + w->sc->kpe * w->Ddr[j];
      if (gj > g) g = gj, jmax = j;
    }
  } else if (w->all_d) {
    for (int64_t j = 1; j < L; j++)
      if (w->Dd[j] > w->Dd[jmax]) jmax = j;
  } else {
    for (int64_t j = 1; j < L; j++)
      if (mpfr_cmp(w->D[j], w->D[jmax]) > 0) jmax = j;
  }
  return jmax;
}

/* t = (D_j - D_max) c in double-double (step 2's fast path) and the bound *dt of its error */
static dd t_dd(const row_scratch *w, int64_t j, int64_t jmax, dd c, double *dt) {
  if (!w->split) { /* the difference exactly; c's 2^-106 and the product's 2^-103, relative */
    const dd t = dd_mul(dd_2sum(w->Dd[j], -w->Dd[jmax]), c);
    *dt = ldexp(fabs(t.h), -101);
    return t;
  }
  /* each part: the difference exactly, times its scale (2^-103 of |part|); the sum (2^-103 of
   * the sum); times c (2^-103 and c's 2^-106): below 2^-101.3 |c| (|part n| + |part r|) */
  const dd xn = dd_mul(dd_2sum(w->Dd[j], -w->Dd[jmax]), (dd){w->sc->k, 0.0});
  const dd xr = dd_mul(dd_2sum(w->Ddr[j], -w->Ddr[jmax]), (dd){w->sc->kpe, 0.0});
  *dt = ldexp(fabs(c.h) * (fabs(xn.h) + fabs(xr.h)), -99);
  return dd_mul(dd_add(xn, xr), c);
}

/* c = cval sm (cval = sk sq, or sq split: exact) in MPFR (relative error 2^-(WPREC+8): the
 * division by 24; a product of binary64 numbers is exact at WPREC + 8 bits) and as a
 * double-double: cval / 24 with the remainder cval - 24 ch exact by an fma, or TwoProd */
static dd row_c(row_scratch *w) {
  const mlr__truth_scales *sc = w->sc;
  const double cval = w->split ? sc->q : sc->k * sc->q;
  mpfr_set_d(w->c, cval, MPFR_RNDN);
  if (sc->sm24) {
    mpfr_div_ui(w->c, w->c, 24, MPFR_RNDN);
    const double ch = cval / 24.0;
    return (dd){ch, fma(-24.0, ch, cval) / 24.0};
  }
  mpfr_mul_d(w->c, w->c, sc->sm, MPFR_RNDN);
  const double ch = cval * sc->sm;
  return (dd){ch, fma(cval, sc->sm, -ch)};
}

/* steps 2-3 for a row: p_j as ph + pl, S = S_hi + S_lo, the sums N and A (pv_dd); returns rs,
 * the relative error bound of step 3 */
static double row_sums(row_scratch *w, int64_t L, int64_t jmax, dd c, double absc, double *S_hi,
                       double *S_lo) {
  double dtmax = 0;
  *S_hi = *S_lo = 0;
  for (int64_t j = 0; j < L; j++) {
    if (w->all_d) { /* every D exact in binary64: t in double-double, e^t too */
      double dt;
      const dd t = t_dd(w, j, jmax, c, &dt);
      const dd p = exp_dd(w->et, t.h, t.l);
      dtmax = dt > dtmax ? dt : dtmax;
      w->ph[j] = p.h;
      w->pl[j] = p.l;
    } else {
      const double dt = p_of(w, j, jmax, w->t1, w->p1, WPREC, absc);
      dtmax = dt > dtmax ? dt : dtmax;
      w->ph[j] = mpfr_get_d(w->p1, MPFR_RNDN);
      mpfr_sub_d(w->tmp, w->p1, w->ph[j], MPFR_RNDN);
      w->pl[j] = mpfr_get_d(w->tmp, MPFR_RNDN);
    }
    dd_fma(S_hi, S_lo, w->ph[j], w->pl[j], 1.0);
  }
  pv_dd(w->ph, w->pl, w->v, L, w->hi, w->lo, w->A);
  /* relative error of p (step 2) and of the double-double sums (step 3), on A */
  const double Ld = (double)L, rp = 2 * dtmax + (w->all_d ? EXP_DD_ERR : ldexp(1.0, -WPREC));
  return rp + 3 * Ld * Ld * ldexp(1.0, -103) + Ld * ldexp(1.0, -105);
}

/* one (token, head) row: o[512], lse */
static int64_t oracle_row(const mlr_inputs *in, int64_t qrow, int64_t L, row_scratch *w, double *o,
                          double *lse) {
  if (L <= 0) {
    for (int d = 0; d < DV; d++) o[d] = 0.0;
    *lse = -INFINITY;
    return 0;
  }
  for (int i = 0; i < QK; i++) w->q[i] = mlr__q_value(in, qrow, i);
  const dd c = row_c(w);
  const double absc = fabs(c.h) * 2;
  int all_d = row_dots(w, L);
  if (all_d && !(fabs(c.h) >= 0x1p-500 && fabs(c.h) <= 0x1p500)) { /* step 2: MPFR instead */
    for (int64_t j = 0; j < L; j++) d_set(w, j);
    all_d = 0;
  } else if (!all_d) {
    for (int64_t j = 0; j < L; j++)
      if (!isnan(w->Dd[j])) d_set(w, j);
  }
  w->all_d = all_d;
  const int64_t jmax = row_max(w, L);
  double S_hi, S_lo;
  const double rs = row_sums(w, L, jmax, c, absc, &S_hi, &S_lo);
  /* A itself is a binary64 sum of L products of ph and |v|: (1 + (L+2) 2^-52) bounds its rounding
   * and ph's */
  const double Ld = (double)L, S = S_hi + S_lo, eS = rs; /* S's terms are positive: its A is S */
  int64_t uncertified = 0;
  for (int d = 0; d < DV; d++) {
    /* the absolute term covers e^t below t = -650 (exp_dd) */
    const double N = w->hi[d] + w->lo[d],
                 eN = rs * w->A[d] * (1 + (Ld + 2) * ldexp(1.0, -52)) + Ld * w->vmax * 0x1p-900;
    /* the quotient in double-double: q0 = N/S, corrected by one Newton step (error < 2^-100) */
    const double q0 = w->hi[d] / S_hi;
    const double r = fma(-q0, S_hi, w->hi[d]) + w->lo[d] - q0 * S_lo;
    const double qv = q0 + r / S;
    if (w->A[d] == 0)
      o[d] = 0.0;
    else if (fabs(N) > eN && eN / (fabs(N) - eN) + 1.01 * eS + ldexp(1.0, -100) <= ldexp(1.0, -54))
      o[d] = qv;
    else if (!element_mpfr(w, L, jmax, d, absc, &o[d]))
      uncertified++;
  }
  /* lse = D_max c + ln S */
  if (w->all_d) d_set(w, jmax); /* only D_max is read */
  mpfr_mul(w->t1, w->D[jmax], w->c, MPFR_RNDN);
  mpfr_set_d(w->p1, S_hi, MPFR_RNDN);
  mpfr_add_d(w->p1, w->p1, S_lo, MPFR_RNDN);
  mpfr_log(w->p1, w->p1, MPFR_RNDN);
  const double m = fabs(mpfr_get_d(w->t1, MPFR_RNDN)), lg = fabs(mpfr_get_d(w->p1, MPFR_RNDN));
  mpfr_add(w->t1, w->t1, w->p1, MPFR_RNDN);
  *lse = mpfr_get_d(w->t1, MPFR_RNDN);
  const double else_ = ldexp(m + lg, 1 - WPREC) + eS + ldexp(dmag(w, jmax) * absc, 1 - DPREC);
  if (!(else_ <= ldexp(fabs(*lse), -54))) uncertified++;
  return uncertified;
}

/* batch b's KV rows into the scratch: K values and their ranges, V values and their largest */
static void batch_kv(const mlr_inputs *in, mlr_truth_from from, int64_t b, int64_t L,
                     row_scratch *w) {
  w->vmax = 0;
  for (int64_t j = 0; j < L; j++) {
    float *kj = w->k + j * QK;
    kv_values(in, from, w->sc->v, mlr_inputs_kv_row(in, b, j), kj, w->v + j * DV);
    int fin = 1;
    for (int i = 0; i < QK; i++) fin &= isfinite(kj[i]) != 0;
    w->kfin[j] = fin;
    if (w->split) {
      mlr_f32_range(kj, DV, 1, &w->klsb[j], &w->ktop[j]);
      mlr_f32_range(kj + DV, QK - DV, 1, &w->klsb2[j], &w->ktop2[j]);
    } else
      mlr_f32_range(kj, QK, 1, &w->klsb[j], &w->ktop[j]);
    for (int d = 0; d < DV; d++)
      w->vmax = fabs(w->v[j * DV + d]) > w->vmax ? fabs(w->v[j * DV + d]) : w->vmax;
  }
}

mlr_status mlr_oracle(const mlr_inputs *in, mlr_truth_from from, double *o, double *lse,
                      mlr_oracle_stats *stats, mlr_error *err) {
  int64_t Lmax;
  const mlr_status st = mlr__truth_begin(in, from, &Lmax, err);
  if (st != MLR_OK) return st;
  const int64_t H = in->H;
  const mlr__truth_scales sc = mlr__scales(in, from);
  int64_t uncertified = 0;
  int failed = 0;
  exp_tables et;
  exp_tables_init(&et);
#pragma omp parallel reduction(+ : uncertified)
  {
    row_scratch w;
    const int ok = scratch_init(&w, Lmax);
    w.et = &et;
    w.sc = &sc;
    w.split = sc.kpe != sc.k;
    if (!ok) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < in->B; b++) {
      if (!ok) continue;
      const int64_t t0 = in->qo_indptr[b], n = in->qo_indptr[b + 1] - t0,
                    L = mlr_inputs_kv_len(in, b);
      batch_kv(in, from, b, L, &w);
      for (int64_t i = 0; i < n; i++) {
        const int64_t t = t0 + i, Lt = mlr_inputs_visible(in, L, n, i);
        for (int64_t h = 0; h < H; h++)
          uncertified += oracle_row(in, t * H + h, Lt, &w, o + (t * H + h) * DV, lse + t * H + h);
      }
    }
    scratch_free(&w);
  }
  if (failed) return mlr_error_set(err, MLR_ENOMEM, "out of memory for the oracle's buffers");
  if (stats) stats->uncertified = uncertified;
  return MLR_OK;
}

mlr_status mlr_oracle_o(const mlr_inputs *in, mlr_truth_from from, double **o, mlr_error *err) {
  const int64_t rows = in->T * in->H, n = rows * DV;
  *o = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  double *lse = malloc((size_t)(rows > 0 ? rows : 1) * sizeof(double));
  mlr_oracle_stats os;
  mlr_status st = !*o || !lse
                      ? mlr_error_set(err, MLR_ENOMEM,
                                      "out of memory for the truth (%lld elements)", (long long)n)
                      : mlr_oracle(in, from, *o, lse, &os, err);
  free(lse);
  if (st != MLR_OK) {
    free(*o);
    *o = NULL;
  }
  return st;
}
