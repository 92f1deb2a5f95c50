/* The a priori bound on |model - truth| per output element (mlr_budget.h, mlr_budget_bound).
 *
 * Notation for one row (t, h) over its Lt visible KV tokens j: s_j the true logits (binary64, sm
 * (q . k) from the truth's q and K, sm the truth's sm_scale: the given one, or 1/24), M = max s_j,
 * e_j = e^(s_j - M), o the truth, v_j the truth's V, V_j the kernel's V before operand conversion
 * (fp8 code x v_scale; the kernel's K: code x k_scale on the latent columns, x kpe_scale on the
 * rope columns; Q: the policy's, or the inputs' fp8 codes x q_scale, the truth's own values).
 * u = 2^-24; a format with t fraction bits has unit roundoff 2^-(t+1) and rounds below its least
 * normal with an absolute error of at most half its least subnormal (eta). gamma(n) = n u /
 * (1 - n u) (Higham, ASNA 2nd ed., 3.1).
 *
 * 1. Logits. The kernel's logit for token j differs from s_j by at most
 *      E_j = |d_j| + U sm [sum_i op_i + gamma(n_qk) P_j] (1 + rho) + A_j rho
 *    d_j = sm (sum_i Qk_i Kk_i - q_i k_i): the input quantizations (Q by the policy, KV when the
 *    truth is from bf16), computed, not bounded (they are data, fixed before any arithmetic);
 *    op_i the operand conversions' worst case, P_j = sum |Q'_i K'_i| over the converted operands,
 *    n_qk the dot's rounding count (577 covers the fma chain and nope+rope's add; 1 for exact;
 *    a matrix unit's dot: gam_mma in place of gamma(n_qk), on magnitudes floored as it says),
 *    A_j = sm sum |Qk_i Kk_i|, rho the relative error of the dot's result format, the logit
 *    scale's binary32 products (logit.scale_precision) and the logit format together, U the scale
 *    of the dot's units (q_scale, x k_scale when folded; with kv.scale_at = operand the K operands
 *    carry k_scale and kpe_scale, one binary32 rounding each, in op_i).
 * 2. Softmax (Blanchard, Higham & Higham 2021, section 3, in the shifted form): p_j = e^(x_j) with
 *    x_j = s_j - m rounded (relative u; e_via_2's product with fp32(log2 e) adds u and the
 *    constant's error kappa); exp rounded (relative u, plus pmath's 2^-52). These, the running
 *    rescales alpha (their arguments telescope to at most the logits' spread R, and one rounding
 *    per block) and, for merged splits, each split's lse and merge weight act as perturbations of
 *    the logits: E_j grows by |x_j| (u + kappa) + e_out + R (u + kappa) + nb e_out [+ Lambda].
 *    With b_j the kernel's p in units of e^M: e_j e^-E_j - eta_exp <= b_j <= e_j e^E_j + eta_exp.
 * 3. Output. Write the kernel's result as (sum a_j V'_j + e_N) / (sum b_j + e_D), a_j = P after
 *    p.format and the PV operand (|a_j - b_j| <= r_a b_j + eta_a), V'_j the V operand in real
 *    units (|V'_j - V_j| <= r_V |V_j| + eta_V; x v_scale when v_scale comes later: eta_V too),
 *    |e_N| <= gamma(n_N) sum a_j |V'_j| and |e_D| <= gamma(n_D) sum b_j with n_N, n_D the
 *    rounding counts of the PV chain (a matrix unit's: gam_mma for its blocks, composed with
 *    gamma of the rest), the row sum, the updates, the partials, the merge, the final division and
 *    v_scale's product (on each split's result, or once after the merge: as many roundings either
 *    way). Because sum e_j (v_j - o) = 0,
 *      out - o = [sum (a_j - b_j) V'_j + sum b_j (V'_j - v_j) + sum (b_j - e_j)(v_j - o)
 *                 + e_N - o e_D] / (sum b_j + e_D),
 *    and each term is bounded by the quantities above (|b_j - e_j| <= e_j (e^E_j - 1) + eta_exp).
 *    The output format's rounding adds u_out |out| + eta_out.
 * Everything is evaluated in binary64; the result is multiplied by 1 + 2^-20, far above the
 * relative error of that evaluation (below 1e-12 for sums of 2^13 positive terms). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_emulate.h"
#include "mlr_formats.h"
#include "mlr_mma.h"
#include "mlr_oracle.h"
#include "mlr_pmath.h"
#include "mlr_sfu.h"
#include "budget_internal.h"

#define QK MLR_EMU_QK_DIM
#define DV MLR_EMU_V_DIM
static const double U32 = 0x1p-24;

static double gam(double n) { return n * U32 / (1.0 - n * U32); }

/* unit roundoff and absolute subnormal error of a format */
static void fmt_err(mlr_format f, double *r, double *eta) {
  const mlr_format_params p = mlr_format_get(f);
  *r = ldexp(1.0, -(p.t + 1));
  *eta = ldexp(1.0, p.emin - p.t - 1);
}

static void operand_err(int op, double *r, double *eta) {
  if (op == MLR_OP_FP16)
    fmt_err(MLR_FMT_FP16, r, eta);
  else if (op == MLR_OP_BF16)
    fmt_err(MLR_FMT_BF16, r, eta);
  else if (op == MLR_OP_FP32) {
    *r = U32;
    *eta = 0x1p-150;
  } else {
    *r = 0;
    *eta = 0;
  }
}

static double operand_max(int op) {
  if (op == MLR_OP_FP16) return (double)mlr_format_max(MLR_FMT_FP16);
  if (op == MLR_OP_BF16) return (double)mlr_format_max(MLR_FMT_BF16);
  return op == MLR_OP_FP32 ? 0x1.fffffep127 : INFINITY; /* fp8: the codes themselves */
}

static void pfmt_err(int pf, double *r, double *eta) {
  const mlr_format f = mlr__pfmt_format(pf);
  *r = *eta = 0;
  if (f != MLR_FMT_COUNT) fmt_err(f, r, eta);
}

/* A matrix unit's dot (mlr_mma.h) as a relative error on the magnitudes' sum: one block cuts its
 * n_b + 1 terms (C among them) to units of 2^(E - F) toward zero, each by less than 2^(E - F), and
 * 2^E is at most the largest term's magnitude with subnormal inputs counted as 2^sub_emin (the
 * unnormalised exponent e(a) + e(b) never exceeds log2 of |a| |b| so raised); then the result's cut
 * to R significant bits (2^(1-R) relative) and binary32's rounding (2^-23 relative either way). So
 * a block's D differs from C + its products by at most eps (|C| + sum |a b|~) with eps = (b + 1)
 * 2^-F + (1 + (b + 1) 2^-F) ((1 + 2^(1-R)) (1 + 2^-23) - 1), and the chain of nb blocks (each D the
 * next C, |C_i| <= (1 + eps)^i times the earlier terms) by at most nb eps (1 + eps)^nb of the whole
 * sum of magnitudes. Like gamma(n), it leaves out binary32 underflow (below 2^-149 a block). */
static double gam_mma(const mlr_mma_model *m, double nb) {
  /* a lowered unit (two fp16 blocks of b/2 terms, then C + their result): the first block cuts its
   * b/2 + 1 terms (a zero C) to units of 2^(E1 - F), 2^E1 at most the magnitudes' sum M; the second
   * its b/2 terms and the first's result to units of 2^(E2 - F), 2^E2 at most M (1 + 2^-19) (the
   * first's result is within (b/2 + 1) 2^-F + 2^-23 of its terms); so by less than (b + 2)(1 +
   * 2^-19) 2^-F M < (b + 3) 2^-F M in all; and three roundings to binary32 (each block, then the
   * add) */
  /* a two-stage unit (CDNA3, mlr_mma.h stages a-b): its b products cut by less than a unit of
   * 2^(E_p - F) each, fp8's two halves rounded down by less than one more each, the products' sum
   * by less than 2^-7 unit (to 2^(M - 31)) and C by less than one (to 2^(M - 24); dropped, by less
   * than half), all in units of 2^(M - F) with 2^M at most the largest term: below (b + 4) units */
  const double cut = (m->block + 1 + 2 * m->lowered + 3 * (m->two_stage > 0)) *
                     ldexp(1.0, -m->frac_bits),
               res = m->result_bits ? ldexp(1.0, 1 - m->result_bits) : 0.0;
  const double rnd = m->lowered ? (1 + 0x1p-23) * (1 + 0x1p-23) * (1 + 0x1p-23) : 1 + 0x1p-23;
  const double eps = cut + (1 + cut) * ((1 + res) * rnd - 1);
  return nb * eps * pow(1 + eps, nb);
}

/* |x| with a subnormal input counted at the unit's least normal exponent
 * (mlr_mma_model.sub_emin) */
static double mag_mma(double x, double floor) { return fabs(x) > floor ? fabs(x) : floor; }

/* e^x - 1 from above, accurate for small x (e^x - 1 <= x e^x) */
static double expm1_up(double x) { return x < 1e-3 ? x * mlr_exp(x) : mlr_exp(x) - 1.0; }

typedef struct bconst {
  double rQ, eQ, rK, eK, rV, eV, ra, ea, rho, kappa, eout_exp, eout_sm, uout, etaout, eta_exp;
  double omaxQ, omaxK, omaxV; /* the operand formats' largest values */
  int nqk;
  const mlr_mma_model *mqk, *mpv; /* matrix-unit dots, or NULL */
  double fqk, fpv;                /* their subnormal inputs' magnitude floor (2^sub_emin, or 0) */
} bconst;

static void constants(const mlr__shadow *sh, bconst *k) {
  const mlr_recipe *r = sh->r;
  memset(k, 0, sizeof *k);
  operand_err(r->qk_operand, &k->rQ, &k->eQ);
  operand_err(r->qk_operand, &k->rK, &k->eK);
  operand_err(r->pv_operand, &k->rV, &k->eV);
  k->omaxQ = k->omaxK = operand_max(r->qk_operand);
  k->omaxV = operand_max(r->pv_operand);
  if (!sh->folded) { /* fp32(value x k_scale), x kpe_scale on rope, before the conversion */
    k->rK = (1 + U32) * (1 + k->rK) - 1;
    k->eK += 0x1p-150;
  }
  if (sh->vs_operand) { /* fp32(value x v_scale) before the operand conversion */
    k->rV = (1 + U32) * (1 + k->rV) - 1;
    k->eV += 0x1p-150;
  }
  double rp, ep, ro, eo;
  pfmt_err(r->p_format, &rp, &ep);
  operand_err(r->pv_operand, &ro, &eo);
  k->ra = (1 + rp) * (1 + ro) - 1;
  k->ea = ep * (1 + ro) + eo;
  double rres = 0, rlog = 0;
  if (r->qk_result == MLR_R_BF16) rres = 0x1p-8;
  if (r->logit_format == MLR_R_BF16) rlog = 0x1p-8;
  /* fp32 c: c0's rounding, x q_scale, x k_scale, then s x c (fp32_arg: sm_scale's rounding to
   * binary32 first); fp64 c: one rounding, s x c. The binary64 steps before (1/24 or sm_scale x
   * log2 e, fp64's products: at most five roundings of 2^-53) are in the 2^-50 */
  const int nc = 2 + (r->logit_scale_prec == MLR_SP_FP64
                          ? 0
                          : sh->cq + (sh->folded != 0) + (r->logit_scale_prec == MLR_SP_FP32_ARG));
  k->rho = (1 + rres) * pow(1 + U32, nc) * (1 + rlog) * (1 + 0x1p-50) - 1;
  k->nqk = r->qk_dot == MLR_DOT_EXACT ? 1 : QK + 1;
  if (MLR_DOT_IS_MMA(r->qk_dot)) k->mqk = mlr_mma_get((mlr_mma_unit)MLR_DOT_MMA_UNIT(r->qk_dot));
  if (MLR_DOT_IS_MMA(r->pv_dot)) k->mpv = mlr_mma_get((mlr_mma_unit)MLR_DOT_MMA_UNIT(r->pv_dot));
  k->fqk = k->mqk && k->mqk->sub_emin ? ldexp(1.0, k->mqk->sub_emin) : 0.0;
  k->fpv = k->mpv && k->mpv->sub_emin ? ldexp(1.0, k->mpv->sub_emin) : 0.0;
  /* e_via_2: fp32(log2 e) * ln 2 - 1 */
  k->kappa = r->softmax_exp == MLR_EXP_E_VIA_2 || r->lse_base != r->softmax_exp
                 ? fabs((double)0x1.715476p+0f * 0x1.62e42fefa39efp-1 - 1.0) + 0x1p-50 + U32
                 : 0x1p-50;
  k->eout_exp = U32 * (1 + 2 * U32) + 0x1p-50; /* -log(1 - u) and pmath's binary64 error */
  switch (r->out_format) {
  case MLR_OUT_FP16:
    fmt_err(MLR_FMT_FP16, &k->uout, &k->etaout);
    break;
  case MLR_OUT_FP32:
    k->uout = U32;
    k->etaout = 0x1p-150;
    break;
  default:
    fmt_err(MLR_FMT_BF16, &k->uout, &k->etaout);
  }
  k->eta_exp = 0x1p-149;
  /* the online softmax's exps (p, alpha): correctly rounded as the merge's, or the exp2 unit
   * (ref/sfu): relative error at most MLR_SFU_EX2_REL on results >= 2^-126 (tested over its whole
   * table); below, h^2 with h within MLR_SFU_EX2_REL, then a subnormal rounding (2^-150): under
   * 2^-126 (2.01 MLR_SFU_EX2_REL) + 2^-150 < 2^-146 absolute */
  k->eout_sm = k->eout_exp;
  if (r->softmax_exp_unit == MLR_EXPU_SM90_EX2) {
    k->eout_sm = MLR_SFU_EX2_REL * (1 + 2 * MLR_SFU_EX2_REL) + 0x1p-50;
    k->eta_exp = 0x1p-146;
  }
}

typedef struct bws {
  double *s, *E;               /* [Lt] true logits, their perturbation bounds */
  double *w14, *w2, *w3;       /* [Lt] per-token weights */
  double *acc14, *acc2, *acc3; /* [512] */
  double *qt;                  /* [576] truth q */
  double *aq, *qhi, *qm, *qe;  /* [576] the row's Q terms that no KV row changes (bound_row) */
  double *kc, *kt;             /* [576] a KV row: the codes' values, the truth's values (real) */
  const double *lut;           /* code -> value of the inputs' kv format */
} bws;

/* KV row `row`: the codes' values (kc) and the truth's real values (kt), n columns: from the
 * dequantized KV the codes' values times s0 on the latent columns and s1 on the rope columns
 * (k_scale and kpe_scale for K, v_scale for V), from bf16 kv_bf16's values (no scale: the
 * oracle's truth, oracle_internal.h) */
static void load_row(const mlr_inputs *in, mlr_truth_from from, const double *lut, int64_t row,
                     int n, double s0, double s1, double *kc, double *kt) {
  if (in->kv_format != MLR_FMT_BF16) {
    const uint8_t *r = (const uint8_t *)in->kv + row * QK;
    for (int i = 0; i < n; i++) kc[i] = lut[r[i]];
  } else {
    const uint16_t *r = (const uint16_t *)in->kv + row * QK;
    for (int i = 0; i < n; i++) kc[i] = lut[r[i]];
  }
  if (from == MLR_TRUTH_BF16)
    for (int i = 0; i < n; i++)
      kt[i] = (double)mlr_bits_f32((uint32_t)in->kv_bf16[row * QK + i] << 16);
  else {
    const int n0 = n < DV ? n : DV;
    for (int i = 0; i < n0; i++) kt[i] = kc[i] * s0;
    for (int i = n0; i < n; i++) kt[i] = kc[i] * s1;
  }
}

/* x times the truth's sm_scale: a given one as its binary64 value, else 1/24 as a division (the
 * oracle's, oracle_internal.h) */
static double smul(const mlr_inputs *in, double x) {
  return in->sm_scale > 0.0 ? x * in->sm_scale : x / 24.0;
}

/* the largest of m and |x[i] s| (i < n, a multiple of 4); a NaN is passed over (a > m ? a : m, as
 * the loop it replaces), and a maximum is the same in any order: four lanes, so that it vectorises
 */
static inline double amax(const double *restrict x, int n, double s, double m) {
  double l[4] = {m, m, m, m};
  for (int i = 0; i < n; i += 4)
    for (int u = 0; u < 4; u++) {
      const double a = fabs(x[i + u] * s);
      l[u] = a > l[u] ? a : l[u];
    }
  const double m01 = l[0] > l[1] ? l[0] : l[1], m23 = l[2] > l[3] ? l[2] : l[3];
  return m01 > m23 ? m01 : m23;
}

/* a KV token's terms in the PV sums, every column on its own (GCC honours restrict on parameters,
 * not on the block-scope pointers this loop had: it ran one column at a time) */
static inline void pv_terms(const double *restrict kc, const double *restrict kt,
                            const double *restrict od, double vs, double rV, double eV, double w14,
                            double w2, double w3, double *restrict a14, double *restrict a2,
                            double *restrict a3) {
  const double rV1 = 1 + rV;
  for (int d = 0; d < DV; d++) {
    const double V = kc[d] * vs, v = kt[d], aV = fabs(V);
    a14[d] += w14 * (rV1 * aV + eV);
    a2[d] += w2 * (fabs(V - v) + rV * aV + eV);
    a3[d] += w3 * fabs(v - od[d]);
  }
}

/* row (t, h)'s logits against its KV tokens j < Lt: the truth's (w->s) and a bound on the
 * kernel's distance from them (w->E); their largest and least (*M, *smin), the largest bound
 * (*Emax), and the largest K and V operands (*kmax, *vmax) for the overflow test */
MLR_FMA_CLONES static void logit_bounds(const mlr__shadow *sh, const bconst *k, mlr_truth_from from,
                                        bws *w, int64_t b, int64_t Lt, const double *Qk, double U,
                                        double *M_out, double *smin_out, double *Emax_out,
                                        double *kmax_out, double *vmax_out) {
  const mlr_inputs *in = sh->in;
  const double ks = sh->ks, kpes = sh->kpes;
  /* the operands' scales (x 1 is exact: folded, or v_scale applied later) */
  const double vso = sh->vs_operand ? sh->vs : 1.0, kso = sh->folded ? 1.0 : ks,
               kpso = sh->folded ? 1.0 : kpes;
  double M = -INFINITY, smin = INFINITY, Emax = 0, kmax = 0, vmax = 0;
  for (int64_t j = 0; j < Lt; j++) {
    const int64_t row = mlr_inputs_kv_row(in, b, j);
    load_row(in, from, w->lut, row, QK, ks, kpes, w->kc, w->kt);
    double st = 0, dd = 0, A = 0, P = 0, op = 0, slack = 0;
    double Pm = 0; /* P with mma's magnitudes */
    /* the largest K and V operands, for the overflow test (K's latent ones are V's when their
     * scales agree) */
    vmax = amax(w->kc, DV, vso, vmax);
    if (kso != vso) kmax = amax(w->kc, DV, kso, kmax);
    kmax = amax(w->kc + DV, QK - DV, kpso, kso == vso && vmax > kmax ? vmax : kmax);
    for (int i = 0; i < QK; i++) {
      const double kt = w->kt[i], kc = w->kc[i];   /* truth K; the kernel's code value */
      const double Kk = kc * (i < DV ? ks : kpes); /* the kernel's K, real */
      const double Kn = sh->folded ? kc : Kk;      /* in the dot's units (Q's: aq) */
      st += w->qt[i] * kt;
      dd += Qk[i] * Kk - w->qt[i] * kt;
      A += fabs(Qk[i] * Kk);
      slack += fabs(w->qt[i] * kt);
      const double aq = w->aq[i], ak = fabs(Kn);
      const double khi = (1 + k->rK) * ak + k->eK;
      P += w->qhi[i] * khi;
      Pm += w->qm[i] * mag_mma(khi, k->fqk);
      op += w->qe[i] * khi + aq * (k->rK * ak + k->eK);
    }
    w->s[j] = smul(in, st);
    /* binary64 evaluation error of the sums above: below 2 * 577 * 2^-53 of the magnitudes */
    const double ev = smul(in, 0x1p-40 * (A + slack));
    const double gP =
        k->mqk ? gam_mma(k->mqk, (QK + k->mqk->block - 1) / k->mqk->block) * Pm : gam(k->nqk) * P;
    const double El =
        smul(in, fabs(dd)) + ev + smul(in, U) * (op + gP) * (1 + k->rho) + smul(in, A) * k->rho;
    w->E[j] = isfinite(El) ? El : INFINITY;
    if (w->s[j] > M) M = w->s[j];
    if (w->s[j] < smin) smin = w->s[j];
    if (w->E[j] > Emax) Emax = w->E[j];
  }
  *M_out = M;
  *smin_out = smin;
  *Emax_out = Emax;
  *kmax_out = kmax;
  *vmax_out = vmax;
}

/* the weights of each KV token's terms in the PV sums (w->w14, w2, w3) from the logits' bounds,
 * over the row's softmax blocks and splits; the lower bound of the row sum (*Dlo), the upper one
 * (*Bhi), the matrix unit's floor over every column (*floor_n) and the row sums' gamma (*gD) */
MLR_FMA_CLONES static void pv_weights(const mlr__shadow *sh, const bconst *k, bws *w, int64_t b,
                                      int64_t Lt, double M, double smin, double Emax,
                                      double *Dlo_out, double *Bhi_out, double *floor_out,
                                      double *gD_out) {
  const mlr_recipe *r = sh->r;
  const int64_t ns = sh->nsplit[b], len = sh->slen[b];
  const int64_t blk = r->softmax_block > 0 ? r->softmax_block : (len < Lt ? len : Lt);
  int64_t nb = 0, live = 0;
  for (int64_t s = 0; s < ns; s++) {
    const int64_t lo = s * len, hi = (s + 1) * len < Lt ? (s + 1) * len : Lt;
    if (hi > lo) {
      nb += (hi - lo + blk - 1) / blk;
      live++;
    }
  }
  const int merged = ns > 1 || !r->partial_normalized;
  const double R = M - smin + 2 * Emax, ua = U32 + k->kappa;
  const double Ealpha = R * ua + (double)nb * k->eout_sm;
  const double Lam =
      merged ? (3 * U32 + k->kappa) * (fabs(M) + R + 2 * log((double)Lt + 1) + 1) + 2 * k->eout_exp
             : 0;
  const double nN = (double)Lt + 3.0 * (double)nb + 2 + (merged ? 2.0 * (double)live + 3 : 0);
  /* the row sums count one rounding a token: a block's n terms summed in any order (softmax.sum's
   * tree too) pass through at most n - 1 roundings on the way to the block's sum */
  const double nD = (double)Lt + 3.0 * (double)nb + 1 + (merged ? 2.0 * (double)live + 3 : 0);
  double gN = gam(nN);
  const double gD = gam(nD), eE = mlr_exp(Emax) * (1 + 0x1p-50);
  const double fpv = k->fpv; /* 0 without a matrix unit */
  if (k->mpv) /* the PV chain's Lt roundings are the unit's blocks (at most a partial one per
                 softmax block) */
    gN = (1 + gam(nN - (double)Lt)) *
             (1 + gam_mma(k->mpv, (double)((Lt + k->mpv->block - 1) / k->mpv->block + nb))) -
         1;
  const double eta_a = k->ea * eE, eta_x = k->eta_exp * eE;
  double Dlo = 0, Bhi = 0;
  double floor_n = 0; /* the unit's subnormal floor, x every column (bound below) */
  for (int64_t j = 0; j < Lt; j++) {
    const double x = (M - w->s[j]) + w->E[j] + Emax; /* |the kernel's exp argument| */
    const double E = w->E[j] + x * ua + k->eout_sm + Ealpha + Lam;
    const double e = mlr_exp(w->s[j] - M) * (1 + 0x1p-50);
    const double bhi = e * mlr_exp(E) * (1 + 0x1p-50) + eta_x;
    const double blo = e * mlr_exp(-E) * (1 - 0x1p-50) - eta_x;
    Dlo += blo > 0 ? blo : 0;
    Bhi += bhi;
    const double ahi = (1 + k->ra) * bhi + eta_a;
    /* with a matrix unit, a and V' count at least the floor fpv (gam_mma): gN (a + f)(|V'| + f) */
    w->w14[j] = k->ra * bhi + eta_a + gN * (ahi + fpv); /* x |V'_j| */
    floor_n += gN * (ahi + fpv) * fpv;
    w->w2[j] = bhi; /* x (|V_j - v_j| + r_V |V_j| + eta_V) */
    w->w3[j] = e * expm1_up(E) * (1 + 0x1p-50) + eta_x + 0x1p-40 * e; /* x |v_j - o| */
  }
  Dlo *= (1 - gD) * (1 - 0x1p-40);
  *Dlo_out = Dlo;
  *Bhi_out = Bhi;
  *floor_out = floor_n;
  *gD_out = gD;
}

/* whether each binary32 rounding of the row's logit scale (fp32(sm [x log2 e]), x q_scale, x
 * k_scale; or the binary64 product rounded once) has its result among binary32's normals, where
 * rho's relative bound holds (2^-125 and 2^127: room for the binary64 estimates here) */
static int c_normal(const mlr__shadow *sh, double qs) {
  const mlr_recipe *r = sh->r;
  const double sm = mlr_inputs_sm_scale(sh->in);
  double c = r->softmax_exp == MLR_EXP_2 ? sm * 0x1.71547652b82fep+0 : sm;
  const int p64 = r->logit_scale_prec == MLR_SP_FP64;
  int ok = p64 || (fabs(c) >= 0x1p-125 && fabs(c) <= 0x1p127);
  if (sh->cq) c *= qs;
  ok &= p64 || !sh->cq || (fabs(c) >= 0x1p-125 && fabs(c) <= 0x1p127);
  if (sh->folded) c *= sh->ks;
  return ok && fabs(c) >= 0x1p-125 && fabs(c) <= 0x1p127;
}

MLR_FMA_CLONES static void bound_row(const mlr__shadow *sh, const bconst *k, mlr_truth_from from,
                                     bws *w, int64_t t, int64_t h, const double *o, double *bnd) {
  const mlr_inputs *in = sh->in;
  const int64_t H = sh->H, b = sh->tb[t];
  const int64_t n = in->qo_indptr[b + 1] - in->qo_indptr[b], i0 = t - in->qo_indptr[b];
  const int64_t Lt = mlr_inputs_visible(in, mlr_inputs_kv_len(in, b), n, i0);
  const double *Qk = sh->qreal + (t * H + h) * QK; /* the kernel's Q values times their scales */
  const double qs = sh->qs[t * H + h], U = qs * (sh->folded ? sh->ks : 1.0);
  for (int i = 0; i < QK; i++) /* the truth's Q: bf16, or the fp8 code's value x q_scale (exact) */
    w->qt[i] = in->q8 ? Qk[i] : (double)mlr_bits_f32((uint32_t)in->q[(t * H + h) * QK + i] << 16);
  int finite = 1;
  for (int d = 0; d < DV; d++) finite &= isfinite(o[d]) != 0;
  if (Lt <= 0 || !finite) {
    for (int d = 0; d < DV; d++) bnd[d] = !finite ? INFINITY : fabs(o[d]);
    return;
  }
  const double vs = sh->vs;
  double M, smin, Emax, qmax = 0, kmax, vmax;
  /* the largest operands: a > m ? a : m is fmax here (m starts at 0 and is never NaN; a is a
   * magnitude or NaN, which leaves m as fmax does), without a libm call an element: such calls
   * were most of the bound's time. With them the Q terms of logit_bounds, worked out once a row
   * instead of once a KV token. */
  for (int i = 0; i < QK; i++) {
    const double a = fabs(Qk[i] / qs);
    qmax = a > qmax ? a : qmax;
    w->aq[i] = a;
    w->qhi[i] = (1 + k->rQ) * a + k->eQ;
    w->qm[i] = mag_mma(w->qhi[i], k->fqk);
    w->qe[i] = k->rQ * a + k->eQ;
  }
  logit_bounds(sh, k, from, w, b, Lt, Qk, U, &M, &smin, &Emax, &kmax, &vmax);
  /* the analysis has no overflow: an operand beyond its format's largest value (fp16: 65504)
   * makes the element unbounded (the kernel's Inf or NaN then fails the class test); nor a logit
   * scale rounded outside binary32's normals */
  if (qmax > k->omaxQ || kmax > k->omaxK || vmax > k->omaxV || !c_normal(sh, qs)) Emax = INFINITY;
  if (!isfinite(M) || !isfinite(Emax)) {
    for (int d = 0; d < DV; d++) bnd[d] = INFINITY;
    return;
  }
  double Dlo, Bhi, floor_n, gD;
  pv_weights(sh, k, w, b, Lt, M, smin, Emax, &Dlo, &Bhi, &floor_n, &gD);
  memset(w->acc14, 0, DV * sizeof(double));
  memset(w->acc2, 0, DV * sizeof(double));
  memset(w->acc3, 0, DV * sizeof(double));
  const double eV = k->eV * (sh->vs_operand ? 1.0 : vs); /* in the codes' units: x v_scale */
  for (int64_t j = 0; j < Lt; j++) {
    load_row(in, from, w->lut, mlr_inputs_kv_row(in, b, j), DV, vs, vs, w->kc, w->kt);
    pv_terms(w->kc, w->kt, o, vs, k->rV, eV, w->w14[j], w->w2[j], w->w3[j], w->acc14, w->acc2,
             w->acc3);
  }
  for (int d = 0; d < DV; d++) {
    const double num = w->acc14[d] + w->acc2[d] + w->acc3[d] + floor_n + fabs(o[d]) * gD * Bhi;
    const double pre = Dlo > 0 ? num / Dlo : INFINITY;
    const double bd = (pre + k->uout * (fabs(o[d]) + pre) + k->etaout) * (1 + 0x1p-20);
    bnd[d] = isfinite(bd) ? bd : INFINITY;
  }
}

mlr_status mlr_budget_bound(const mlr_recipe *r, const mlr_inputs *in, mlr_truth_from from,
                            const double *truth_o, int threads, double *bound, mlr_error *err) {
  if (from == MLR_TRUTH_BF16 && !in->kv_bf16)
    return mlr_error_set(
        err, MLR_EINVAL,
        "the bound against the truth from bf16 KV needs kv_bf16 in the inputs (bf16kv=1)");
  mlr__shadow sh;
  mlr_status st = mlr__shadow_init(&sh, r, in, MLR_SRC_ALL, err);
  if (st != MLR_OK) return st;
  bconst k;
  constants(&sh, &k);
  int64_t Lmax = 1;
  for (int64_t b = 0; b < in->B; b++)
    Lmax = mlr_inputs_kv_len(in, b) > Lmax ? mlr_inputs_kv_len(in, b) : Lmax;
  const int64_t N = in->T * in->H;
  const size_t nl = in->kv_format != MLR_FMT_BF16 ? 256 : 65536;
  double *lut = malloc(nl * sizeof(double));
  if (!lut) {
    mlr__shadow_free(&sh);
    return mlr_error_set(err, MLR_ENOMEM, "out of memory for the bound");
  }
  for (size_t c = 0; c < nl; c++)
    lut[c] = (double)mlr_decode((mlr_format)in->kv_format, (uint32_t)c);
  const int nt = mlr_threads(threads);
  int failed = 0;
#pragma omp parallel num_threads(nt) reduction(| : failed)
  {
    bws w;
    memset(&w, 0, sizeof w);
    const size_t L = (size_t)Lmax;
    double *blk = malloc((5 * L + 3 * DV + 7 * QK) * sizeof(double));
    if (!blk)
      failed = 1;
    else {
      w.s = blk;
      w.E = blk + L;
      w.w14 = blk + 2 * L;
      w.w2 = blk + 3 * L;
      w.w3 = blk + 4 * L;
      w.acc14 = blk + 5 * L;
      w.acc2 = w.acc14 + DV;
      w.acc3 = w.acc2 + DV;
      w.qt = w.acc3 + DV;
      w.kc = w.qt + QK;
      w.kt = w.kc + QK;
      w.aq = w.kt + QK;
      w.qhi = w.aq + QK;
      w.qm = w.qhi + QK;
      w.qe = w.qm + QK;
      w.lut = lut;
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t k2 = 0; k2 < N; k2++)
      if (blk)
        bound_row(&sh, &k, from, &w, k2 / in->H, k2 % in->H, truth_o + k2 * DV, bound + k2 * DV);
    free(blk);
  }
  mlr__shadow_free(&sh);
  free(lut);
  if (failed) return mlr_error_set(err, MLR_ENOMEM, "out of memory for the bound's row buffers");
  return MLR_OK;
}
