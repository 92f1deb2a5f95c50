/* The certified oracle (mlr_oracle.h): each output element a binary64 within 1 ulp of the exact
 * real attention output.
 *
 * Per query token and head, with L visible tokens:
 *  1. Dots D_j = sum_c q_c k_c, exact: q is bf16, k the fp8 code's value (from = dequantized; the
 *     KV scale is factored out and applied in step 2) or bf16. The exact sum is formed in binary64
 *     where the operands' ranges make every partial sum exact, else in a 128-bit fixed point, else
 *     in the long accumulator (ref/pmath/mlr_exact.h), and stored in MPFR at DPREC bits (one
 *     rounding, relative error <= 2^-DPREC).
 *  2. t_j = (D_j - D_max) * c with c = kv_scale / 24 (or 1/24), in MPFR at WPREC bits, and
 *     p_j = e^t_j (MPFR, correctly rounded at WPREC bits). Errors: D's storage 2^-DPREC |D|, the
 *     subtraction, c and the product 2^-WPREC each, so the computed t_j is off by at most
 *     dt = 3 * 2^-WPREC |t_j| + 2^(1-DPREC) (|D_j| + |D_max|) |c|, and p_j by a relative
 *     e^dt - 1 + 2^-WPREC <= 2 dt + 2^-WPREC (dt < 2^-20 is checked).
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
 * Performance: the exps (one per token and head) and the double-double sums (vectorised across
 * the 512 columns) dominate. */
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

/* sum of q[i] k[i] in binary64 (exact where the caller checked the ranges: any order), 16 lanes
 * for the vector units */
MLR_FMA_CLONES static double dot_f64(const float *q, const float *k) {
  double s[16] = {0};
  for (int i = 0; i < QK; i += 16)
    for (int l = 0; l < 16; l++) s[l] = fma((double)q[i + l], (double)k[i + l], s[l]);
  double t = 0;
  for (int l = 0; l < 16; l++) t += s[l];
  return t;
}

/* the exact dot of q (stride 1) and k: returned as a binary64 when it is exact there (d is then
 * left alone: D_j is set from it when an MPFR path needs it), else NaN with the value in d
 * (DPREC bits, one rounding) */
static double exact_dot_mpfr(const float *q, const float *k, int qlsb, int qtop, int klsb, int ktop,
                             mlr_xacc *x, mpfr_t d, mpfr_t tmp) {
  if (qlsb > qtop || klsb > ktop) { /* a zero vector */
    mpfr_set_zero(d, 1);
    return 0.0;
  }
  if (mlr_f64_fits(qlsb, qtop, klsb, ktop, QK)) return dot_f64(q, k); /* every partial sum exact */
  if (mlr_i128_fits(qlsb, qtop, klsb, ktop, QK)) {
    mlr_i128 acc = 0;
    const int g = qlsb + klsb;
    for (int i = 0; i < QK; i++) mlr_i128_fma(&acc, q[i], k[i], g);
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
  for (int i = 0; i < QK; i++) mlr_xacc_add(x, (double)q[i] * (double)k[i]);
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
  float q[QK], *k;  /* k: [L][576] operand values (fp8 or bf16 values) */
  double *v;        /* [L][512] V values (exact) */
  int *klsb, *ktop; /* [L] ranges of the K rows */
  double *Dd;       /* [L] D_j as a binary64 when it is exact there, else NaN */
  const exp_tables *et;
  int all_d;   /* this row's D are all exact binary64 (the MPFR D are then unset until needed) */
  double vmax; /* max |v| over the batch's V values */
  mpfr_t *D;   /* [L] */
  double *ph, *pl; /* [L] */
  double hi[DV], lo[DV], A[DV];
  mpfr_t tmp, c, prod, t1, p1, t2, p2; /* t1, p1 at WPREC; t2, p2 at FPREC */
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
  w->klsb = malloc((size_t)w->cap * sizeof(int));
  w->ktop = malloc((size_t)w->cap * sizeof(int));
  w->Dd = malloc((size_t)w->cap * sizeof(double));
  if (!w->k || !w->v || !w->D || !w->ph || !w->pl || !w->klsb || !w->ktop || !w->Dd) return 0;
  for (int64_t j = 0; j < w->cap; j++) mpfr_init2(w->D[j], DPREC);
  mpfr_inits2(FPREC + 64, w->tmp, w->prod, (mpfr_ptr)0);
  mpfr_inits2(WPREC + 8, w->c, w->t1, w->p1, (mpfr_ptr)0);
  mpfr_inits2(FPREC, w->t2, w->p2, (mpfr_ptr)0);
  w->inited = 1;
  return 1;
}

static void scratch_free(row_scratch *w) {
  if (w->inited) {
    for (int64_t j = 0; j < w->cap; j++) mpfr_clear(w->D[j]);
    mpfr_clears(w->tmp, w->prod, w->c, w->t1, w->p1, w->t2, w->p2, (mpfr_ptr)0);
  }
  free(w->k);
  free(w->v);
  free(w->D);
  free(w->ph);
  free(w->pl);
  free(w->klsb);
  free(w->ktop);
  free(w->Dd);
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
         ldexp((fabs(mpfr_get_d(w->D[j], MPFR_RNDN)) + fabs(mpfr_get_d(w->D[jmax], MPFR_RNDN))) *
                   absc,
               1 - DPREC);
}

/* D_j in MPFR for every token, where the row's fast path left them unset */
static void d_to_mpfr(row_scratch *w, int64_t L) {
  if (!w->all_d) return;
  for (int64_t j = 0; j < L; j++) mpfr_set_d(w->D[j], w->Dd[j], MPFR_RNDN); /* exact */
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

static void kv_values(const mlr_inputs *in, mlr_truth_from from, int64_t row, float *k, double *v) {
  const double scale = mlr__kv_scale(in, from);
  for (int i = 0; i < QK; i++) {
    k[i] = mlr__kv_value(in, from, row, i);
    if (i < DV) v[i] = (double)k[i] * scale; /* exact: <= 24 + 11 bits */
  }
}

/* one (token, head) row: o[512], lse */
static int64_t oracle_row(const mlr_inputs *in, mlr_truth_from from, const uint16_t *qrow,
                          int64_t L, row_scratch *w, double *o, double *lse) {
  if (L == 0) {
    for (int d = 0; d < DV; d++) o[d] = 0.0;
    *lse = -INFINITY;
    return 0;
  }
  for (int i = 0; i < QK; i++) w->q[i] = mlr_bits_f32((uint32_t)qrow[i] << 16);
  int qlsb, qtop;
  mlr_f32_range(w->q, QK, 1, &qlsb, &qtop);
  const double cval = mlr__kv_scale(in, from);
  mpfr_set_d(w->c, cval, MPFR_RNDN);
  mpfr_div_ui(w->c, w->c, 24, MPFR_RNDN); /* relative error 2^-(WPREC+8) */
  const double absc = fabs(cval / 24.0) * 2;
  int64_t jmax = 0;
  int all_d = 1;
  for (int64_t j = 0; j < L; j++) {
    w->Dd[j] = exact_dot_mpfr(w->q, w->k + j * QK, qlsb, qtop, w->klsb[j], w->ktop[j], &w->x,
                              w->D[j], w->tmp);
    all_d &= !isnan(w->Dd[j]);
  }
  if (all_d) {
    for (int64_t j = 1; j < L; j++)
      if (w->Dd[j] > w->Dd[jmax]) jmax = j;
  } else {
    for (int64_t j = 0; j < L; j++)
      if (!isnan(w->Dd[j])) mpfr_set_d(w->D[j], w->Dd[j], MPFR_RNDN); /* exact */
    for (int64_t j = 1; j < L; j++)
      if (mpfr_cmp(w->D[j], w->D[jmax]) > 0) jmax = j;
  }
  w->all_d = all_d;
  double dtmax = 0, S_hi = 0, S_lo = 0;
  /* c = cval / 24 as a double-double: ch rounded, the remainder cval - 24 ch exact by an fma */
  const double ch = cval / 24.0, cl = fma(-24.0, ch, cval) / 24.0;
  for (int64_t j = 0; j < L; j++) {
    if (all_d) { /* every D exact in binary64: t = (D_j - D_max) c in double-double, e^t too */
      /* the difference exactly */
      const dd t = dd_mul(dd_2sum(w->Dd[j], -w->Dd[jmax]), (dd){ch, cl});
      const dd p = exp_dd(w->et, t.h, t.l);
      const double dt = ldexp(fabs(t.h), -101); /* c's 2^-106 and the product's 2^-103, relative */
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
    dd_fma(&S_hi, &S_lo, w->ph[j], w->pl[j], 1.0);
  }
  pv_dd(w->ph, w->pl, w->v, L, w->hi, w->lo, w->A);
  /* relative error of p (step 2) and of the double-double sums (step 3), on A; A itself is a
   * binary64 sum of L products of ph and |v|: (1 + (L+2) 2^-52) bounds its rounding and ph's */
  const double Ld = (double)L, rp = 2 * dtmax + (all_d ? EXP_DD_ERR : ldexp(1.0, -WPREC));
  const double rs = rp + 3 * Ld * Ld * ldexp(1.0, -103) + Ld * ldexp(1.0, -105);
  const double S = S_hi + S_lo, eS = rs; /* S's terms are positive: its A is S */
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
  if (w->all_d) mpfr_set_d(w->D[jmax], w->Dd[jmax], MPFR_RNDN); /* only D_max is read: exact */
  mpfr_mul(w->t1, w->D[jmax], w->c, MPFR_RNDN);
  mpfr_set_d(w->p1, S_hi, MPFR_RNDN);
  mpfr_add_d(w->p1, w->p1, S_lo, MPFR_RNDN);
  mpfr_log(w->p1, w->p1, MPFR_RNDN);
  const double m = fabs(mpfr_get_d(w->t1, MPFR_RNDN)), lg = fabs(mpfr_get_d(w->p1, MPFR_RNDN));
  mpfr_add(w->t1, w->t1, w->p1, MPFR_RNDN);
  *lse = mpfr_get_d(w->t1, MPFR_RNDN);
  const double else_ = ldexp(m + lg, 1 - WPREC) + eS +
                       ldexp(fabs(mpfr_get_d(w->D[jmax], MPFR_RNDN)) * absc, 1 - DPREC);
  if (!(else_ <= ldexp(fabs(*lse), -54))) uncertified++;
  return uncertified;
}

mlr_status mlr_oracle(const mlr_inputs *in, mlr_truth_from from, double *o, double *lse,
                      mlr_oracle_stats *stats, mlr_error *err) {
  int64_t Lmax;
  const mlr_status st = mlr__truth_begin(in, from, &Lmax, err);
  if (st != MLR_OK) return st;
  const int64_t H = in->H;
  int64_t uncertified = 0;
  int failed = 0;
  exp_tables et;
  exp_tables_init(&et);
#pragma omp parallel reduction(+ : uncertified)
  {
    row_scratch w;
    const int ok = scratch_init(&w, Lmax);
    w.et = &et;
    if (!ok) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < in->B; b++) {
      if (!ok) continue;
      const int64_t t0 = in->qo_indptr[b], n = in->qo_indptr[b + 1] - t0,
                    L = mlr_inputs_kv_len(in, b);
      w.vmax = 0;
      for (int64_t j = 0; j < L; j++) {
        kv_values(in, from, mlr_inputs_kv_row(in, b, j), w.k + j * QK, w.v + j * DV);
        mlr_f32_range(w.k + j * QK, QK, 1, &w.klsb[j], &w.ktop[j]);
        for (int d = 0; d < DV; d++)
          w.vmax = fabs(w.v[j * DV + d]) > w.vmax ? fabs(w.v[j * DV + d]) : w.vmax;
      }
      for (int64_t i = 0; i < n; i++) {
        const int64_t t = t0 + i, Lt = L - (n - 1 - i);
        for (int64_t h = 0; h < H; h++)
          uncertified += oracle_row(in, from, in->q + (t * H + h) * QK, Lt, &w,
                                    o + (t * H + h) * DV, lse + t * H + h);
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
