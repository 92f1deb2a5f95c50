/* The switchable model (mlr_budget.h, mlr_budget_eval): the order of operations of
 * ref/emulate/mlr_emulate.h, one (token, head) row at a time, in binary64, where each rounding
 * step is applied only when its source is switched on.
 *
 * Why "all on" gives the model's bits: with every source on, every value is a binary32 (or
 * narrower) number, and each step rounds a binary64 result to binary32. A sum, difference,
 * product or quotient of two binary32 numbers computed in binary64 and then rounded to binary32 is
 * the correctly rounded binary32 result (double rounding is innocuous when the wider format has
 * p' >= 2p + 2 bits: 53 >= 50; Figueroa, "When is double rounding innocuous?", 1995). Fused
 * multiply-adds call fmaf when the three operands are binary32; exact dots add exact binary64
 * products in the long accumulator and round once; exp and log are the model's own functions.
 * With a source off, its values are not binary32 and later rounded steps round a binary64 value
 * (fma: a binary64 fma rounded again; the extra error is below 2^-53 relative, far under any
 * source). Off steps are binary64 arithmetic (unit roundoff 2^-53): about 1e-13 relative on a
 * sum of 8192 terms, the "exact" of a decomposition whose smallest sources are 2^-24. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_emu_ops.h"
#include "mlr_emulate.h"
#include "mlr_formats.h"
#include "mlr_exact.h"
#include "mlr_mma.h"
#include "mlr_pmath.h"
#include "budget_internal.h"

#define QK   MLR_EMU_QK_DIM
#define DV   MLR_EMU_V_DIM
#define NOPE MLR_EMU_NOPE
enum { KCHUNK = 32 }; /* tokens whose K rows are held at once */

#define ON(s) ((sh->on >> (s)) & 1u)

static int is_f32(double x) { return x != x || (double)(float)x == x; }

/* one binary32 rounding of a binary64 result when on */
static double r32(int on, double x) { return on ? (double)(float)x : x; }

/* a * b + c with one binary32 rounding when on (fmaf when every operand is binary32) */
static double fma32(int on, double a, double b, double c) {
  if (!on) return fma(a, b, c);
  if (is_f32(a) && is_f32(b) && is_f32(c)) return (double)fmaf((float)a, (float)b, (float)c);
  return (double)(float)fma(a, b, c);
}

static double upd32(int on, int fused, double a, double alpha, double b) {
  return fused ? fma32(on, a, alpha, b) : r32(on, r32(on, a * alpha) + b);
}

/* p rounded to P's format as the model has it: fp8 saturates, the 16-bit formats do not */
static double p_round(int on, double p, int pf) {
  if (!on) return p;
  const mlr_format f = mlr__pfmt_format(pf);
  if (f == MLR_FMT_COUNT) return (double)(float)p; /* fp32 p: already binary32 when exp is on */
  return mlr__round_fmt(p, f, mlr_format_get(f).bits == 8 ? MLR_OVF_SATURATE : MLR_OVF_NONSAT);
}

/* exp in the recipe's base: the model's binary32 function of the binary32 argument (on), or the
 * binary64 value of the mathematical function (off; e_via_2 is then e^x) */
static double sh_exp(int on, int base, double x) {
  if (on) return (double)mlr_emu_exp(base, (float)x);
  return base == MLR_EXP_2 ? mlr_exp2(x) : mlr_exp(x);
}

/* the online softmax's exp: as sh_exp, through the exp2 unit when the recipe has one (on) */
static double sh_sm_exp(const mlr__shadow *sh, int on, double x) {
  if (on && sh->ex2) return (double)mlr__emu_sm_exp(sh->exp_sm, sh->ex2, (float)x);
  return sh_exp(on, sh->exp_sm, x);
}

/* the block's row sum of p[0..n): on, in the model's order (mlr__emu_rowsum's), each addition
 * rounded to binary32; off, binary64 in token order (the order then moves the sum by about 2^-53
 * relative a term: the "exact" of the header) */
static double sh_rowsum(int on, int order, const double *p, int64_t n) {
  double ls = 0;
  if (!on || order != MLR_SUM_WARP16) {
    for (int64_t j = 0; j < n; j++) ls = r32(on, ls + p[j]);
    return ls;
  }
  for (int64_t g0 = 0; g0 < n; g0 += 16) {
    double lane[4];
    for (int j = 0; j < 4; j++) {
      double v[4];
      for (int k = 0; k < 4; k++) {
        const int64_t at = mlr__emu_warp16_token(g0, j, k);
        v[k] = at < n ? p[at] : 0;
      }
      lane[j] = r32(on, r32(on, v[0] + v[1]) + r32(on, v[2] + v[3]));
    }
    ls = r32(on, ls + r32(on, r32(on, lane[0] + lane[1]) + r32(on, lane[2] + lane[3])));
  }
  return ls;
}

static double sh_log(int on, int base, double x) {
  if (on) return base == MLR_EXP_2 ? (double)mlr_log2f((float)x) : (double)mlr_logf((float)x);
  return base == MLR_EXP_2 ? mlr_log2(x) : mlr_log(x);
}

#define LOG2E_F    0x1.715476p+0f
#define LN2_F      0x1.62e43p-1f
#define LOG2E_D    0x1.71547652b82fep+0
#define LN2_D      0x1.62e42fefa39efp-1
#define SKIP_BELOW -1e30

/* sum of init and a[i] * b[i], i in order, by the dot model with binary32 roundings: seq, one
 * rounding per step; exact, one rounding at the end (the emulator's IEEE binary64 sum where a
 * value is not finite, or not binary32 because an upstream source is off) */
MLR_FMA_CLONES static double dot(int model, const double *a, const double *b, int n, double init,
                                 mlr_xacc *x) {
  if (model == MLR_DOT_EXACT) {
    int fin = isfinite(init), f32 = is_f32(init);
    for (int i = 0; i < n && fin; i++) {
      fin = isfinite(a[i]) && isfinite(b[i]);
      f32 = f32 && is_f32(a[i]) && is_f32(b[i]);
    }
    if (!fin || !f32) {
      double s = init;
      for (int i = 0; i < n; i++) s += a[i] * b[i];
      return (double)(float)s;
    }
    mlr_xacc_clear(x);
    mlr_xacc_add(x, init);
    for (int i = 0; i < n; i++) mlr_xacc_add(x, a[i] * b[i]); /* binary32 x binary32: exact */
    return (double)mlr_xacc_round_f32(x);
  }
  double s = init;
  for (int i = 0; i < n; i++) s = fma32(1, a[i], b[i], s);
  return s;
}

static int all_f32(const double *a, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!is_f32(a[i])) return 0;
  return 1;
}

static int all_finite(const double *a, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(a[i])) return 0;
  return 1;
}

/* the range (mlr_f32_range) of n binary32 values held as binary64 */
static void range64(const double *a, int64_t n, int *lsb, int *top) {
  int lo = 1000, hi = -1000;
  for (int64_t i = 0; i < n; i++) mlr_f32_range_add((float)a[i], &lo, &hi);
  *lsb = lo;
  *top = hi;
}

typedef struct row_ws {
  double *k, *v; /* [KCHUNK][576], [cap][512]: K operands of a chunk of tokens, the block's V */
  double *s, *p, *pp;       /* [cap] */
  double *acc, *col, *part; /* [512], [cap], [S][512] */
  double *dt;               /* [512] the block's PV dots */
  float *kf, *qf, *sf, *af; /* binary32 copies: [KCHUNK][576], [576], [cap], [max(cap, 512)] */
  double *lse, *pm, *pl;    /* [S] */
  mlr_xacc x;
} row_ws;

/* columns [i0, i0 + n) of the KV row of token pos of batch b, through an operand table by code */
static void load(const mlr__shadow *sh, const double *lut, int64_t b, int64_t pos, int i0, int n,
                 double *out) {
  const mlr_inputs *in = sh->in;
  const int64_t row = mlr_inputs_kv_row(in, b, pos);
  if (sh->use_bf16) {
    const uint16_t *r = in->kv_bf16 + row * QK + i0;
    for (int i = 0; i < n; i++) out[i] = lut[r[i]];
  } else if (in->kv_format != MLR_FMT_BF16) {
    const uint8_t *r = (const uint8_t *)in->kv + row * QK + i0;
    for (int i = 0; i < n; i++) out[i] = lut[r[i]];
  } else {
    const uint16_t *r = (const uint16_t *)in->kv + row * QK + i0;
    for (int i = 0; i < n; i++) out[i] = lut[r[i]];
  }
}

/* the raw QK dots of n tokens (K in w->k, at most KCHUNK of them) into s, each by the dot model
 * in column order; tokens are interleaved (column outer, token inner), which changes no
 * element's order of operations */
MLR_FMA_CLONES static void qk_block(const mlr__shadow *sh, row_ws *w, const double *q, int64_t n,
                                    double *s) {
  const int model = sh->r->qk_dot;
  const double *k = w->k;
  if (!ON(MLR_SRC_ACCUM)) {
    for (int64_t j = 0; j < n; j++) s[j] = 0;
    for (int i = 0; i < QK; i++)
      for (int64_t j = 0; j < n; j++) s[j] = fma(q[i], k[j * QK + i], s[j]);
    return;
  }
  const int f32 = all_f32(q, QK) && all_f32(k, n * QK);
  if (MLR_DOT_IS_MMA(
          model)) { /* the unit's model (values not binary32 because an upstream source is
                     * off are rounded to it first: 2^-24 relative, below any unit's cut) */
    const mlr_mma_model *m = mlr_mma_get((mlr_mma_unit)MLR_DOT_MMA_UNIT(model));
    for (int i = 0; i < QK; i++) w->qf[i] = (float)q[i];
    for (int64_t x = 0; x < n * QK; x++) w->kf[x] = (float)k[x];
    for (int64_t j = 0; j < n; j++) s[j] = (double)mlr_mma_dot(m, w->qf, w->kf + j * QK, QK, 0.0f);
    return;
  }
  if (model == MLR_DOT_EXACT) {
    int ql, qt;
    const int fin = all_finite(q, QK);
    if (f32) range64(q, QK, &ql, &qt);
    /* one test for the block: Q's range against every K table value's range (each finite K, as
     * the emulator does per chunk, is then exact in binary64 in any order) */
    if (f32 && fin && sh->kv_range_ok &&
        (ql > qt || mlr_f64_fits(ql, qt, sh->klsb, sh->ktop, QK)) && all_finite(k, n * QK)) {
      for (int64_t j = 0; j < n; j++) s[j] = 0;
      for (int i = 0; i < QK; i++)
        for (int64_t j = 0; j < n; j++) s[j] = fma(q[i], k[j * QK + i], s[j]);
      for (int64_t j = 0; j < n; j++) s[j] = (double)(float)s[j];
      return;
    }
    if (!f32) { /* an upstream source is off: the binary64 sum (interleaved), rounded once */
      for (int64_t j = 0; j < n; j++) s[j] = 0;
      for (int i = 0; i < QK; i++)
        for (int64_t j = 0; j < n; j++) s[j] += q[i] * k[j * QK + i];
      for (int64_t j = 0; j < n; j++) s[j] = (double)(float)s[j];
      return;
    }
    for (int64_t j = 0; j < n; j++) {
      const double *kj = k + j * QK;
      int kl, kt;
      if (fin && all_finite(kj, QK)) {
        range64(kj, QK, &kl, &kt);
        if (ql > qt || kl > kt ||
            mlr_f64_fits(ql, qt, kl, kt, QK)) { /* every partial sum exact in binary64 */
          double a = 0;
          for (int i = 0; i < QK; i++) a = fma(q[i], kj[i], a);
          s[j] = (double)(float)a;
          continue;
        }
      }
      s[j] = dot(MLR_DOT_EXACT, q, kj, QK, 0, &w->x);
    }
    return;
  }
  if (!f32) { /* an upstream source is off: values that are not binary32, rounded step by step */
    for (int64_t j = 0; j < n; j++) {
      if (model == MLR_DOT_NOPE_ROPE)
        s[j] = r32(1, dot(MLR_DOT_SEQ, q, k + j * QK, NOPE, 0, &w->x) +
                          dot(MLR_DOT_SEQ, q + NOPE, k + j * QK + NOPE, QK - NOPE, 0, &w->x));
      else
        s[j] = dot(MLR_DOT_SEQ, q, k + j * QK, QK, 0, &w->x);
    }
    return;
  }
  float *sf = w->sf, *sr = w->af;
  for (int i = 0; i < QK; i++) w->qf[i] = (float)q[i];
  for (int64_t x = 0; x < n * QK; x++) w->kf[x] = (float)k[x];
  for (int64_t j = 0; j < n; j++) {
    sf[j] = 0;
    sr[j] = 0;
  }
  const int split = model == MLR_DOT_NOPE_ROPE ? NOPE : QK;
  for (int i = 0; i < split; i++)
    for (int64_t j = 0; j < n; j++) sf[j] = fmaf(w->qf[i], w->kf[j * QK + i], sf[j]);
  for (int i = split; i < QK; i++)
    for (int64_t j = 0; j < n; j++) sr[j] = fmaf(w->qf[i], w->kf[j * QK + i], sr[j]);
  for (int64_t j = 0; j < n; j++) s[j] = split < QK ? (double)(sf[j] + sr[j]) : (double)sf[j];
}

/* the block's PV dots over its n tokens (P in w->pp, V in w->v), each column in token order from
 * w->dt (its initial value), into w->dt; columns are interleaved */
MLR_FMA_CLONES static void pv_block(const mlr__shadow *sh, row_ws *w, int64_t n, int into) {
  const double *pp = w->pp, *v = w->v;
  double *dt = w->dt;
  if (!ON(MLR_SRC_ACCUM)) {
    for (int64_t j = 0; j < n; j++)
      for (int d = 0; d < DV; d++) dt[d] = fma(pp[j], v[j * DV + d], dt[d]);
    return;
  }
  const int f32 = all_f32(pp, n) && all_f32(v, n * DV) && all_f32(dt, DV);
  if (MLR_DOT_IS_MMA(sh->r->pv_dot)) { /* as in qk_block: each column from its initial value as C */
    const mlr_mma_model *m = mlr_mma_get((mlr_mma_unit)MLR_DOT_MMA_UNIT(sh->r->pv_dot));
    for (int64_t j = 0; j < n; j++) w->sf[j] = (float)pp[j];
    for (int d = 0; d < DV; d++) {
      for (int64_t j = 0; j < n; j++) w->af[j] = (float)v[j * DV + d];
      dt[d] = (double)mlr_mma_dot(m, w->sf, w->af, n, (float)dt[d]);
    }
    return;
  }
  if (sh->r->pv_dot == MLR_DOT_EXACT) {
    int pl, pt, vl, vt;
    if (f32 && !into && all_finite(pp, n) && all_finite(v, n * DV)) {
      range64(pp, n, &pl, &pt);
      if (sh->kv_range_ok) { /* every V table value's range */
        vl = sh->vlsb;
        vt = sh->vtop;
      } else
        range64(v, n * DV, &vl, &vt);
      if (pl > pt || vl > vt ||
          mlr_f64_fits(pl, pt, vl, vt, n)) { /* exact in binary64 in any order */
        for (int64_t j = 0; j < n; j++)
          for (int d = 0; d < DV; d++) dt[d] = fma(pp[j], v[j * DV + d], dt[d]);
        for (int d = 0; d < DV; d++) dt[d] = (double)(float)dt[d];
        return;
      }
    }
    if (!f32) { /* an upstream source is off: the binary64 sum (interleaved), rounded once */
      for (int64_t j = 0; j < n; j++)
        for (int d = 0; d < DV; d++) dt[d] += pp[j] * v[j * DV + d];
      for (int d = 0; d < DV; d++) dt[d] = (double)(float)dt[d];
      return;
    }
    for (int d = 0; d < DV; d++) {
      for (int64_t j = 0; j < n; j++) w->col[j] = v[j * DV + d];
      dt[d] = dot(MLR_DOT_EXACT, pp, w->col, (int)n, dt[d], &w->x);
    }
    return;
  }
  if (!f32) {
    for (int64_t j = 0; j < n; j++)
      for (int d = 0; d < DV; d++) dt[d] = fma32(1, pp[j], v[j * DV + d], dt[d]);
    return;
  }
  float *af = w->af;
  for (int d = 0; d < DV; d++) af[d] = (float)dt[d];
  for (int64_t j = 0; j < n; j++) {
    const float p = (float)pp[j];
    const double *vj = v + j * DV;
    for (int d = 0; d < DV; d++) af[d] = fmaf(p, (float)vj[d], af[d]);
  }
  for (int d = 0; d < DV; d++) dt[d] = (double)af[d];
}

/* one split of row (t, h): KV tokens [lo, hi) of batch b; part (binary64), lse, m, l */
MLR_FMA_CLONES static void split_row(const mlr__shadow *sh, row_ws *w, int64_t t, int64_t h,
                                     int64_t b, int64_t lo, int64_t hi, int single, double *part,
                                     double *lse_out, double *m_out, double *l_out) {
  const mlr_recipe *r = sh->r;
  const int acc_on = ON(MLR_SRC_ACCUM), exp_on = ON(MLR_SRC_EXP);
  const int fused = r->update_fma, into = r->pv_accumulate == MLR_PV_INTO_ACC;
  const double *q = sh->q + (t * sh->H + h) * QK;
  const double c = sh->c[t * sh->H + h];
  double m = -INFINITY, l = 0;
  for (int d = 0; d < DV; d++) w->acc[d] = 0;
  const int64_t blk = r->softmax_block > 0 ? r->softmax_block : (hi > lo ? hi - lo : 1);
  for (int64_t j0 = lo; j0 < hi; j0 += blk) {
    const int64_t j1 = j0 + blk < hi ? j0 + blk : hi, n = j1 - j0;
    for (int64_t c0 = 0; c0 < n; c0 += KCHUNK) { /* chunks of tokens keep K in cache */
      const int64_t nc = n - c0 < KCHUNK ? n - c0 : KCHUNK;
      for (int64_t j = 0; j < nc; j++) {
        load(sh, sh->klut, b, j0 + c0 + j, 0, NOPE, w->k + j * QK);
        load(sh, sh->kplut, b, j0 + c0 + j, NOPE, QK - NOPE, w->k + j * QK + NOPE);
      }
      qk_block(sh, w, q, nc, w->s + c0);
    }
    for (int64_t j = 0; j < n; j++) {
      double s = w->s[j];
      if (acc_on && r->qk_result == MLR_R_BF16) s = mlr__round_fmt(s, MLR_FMT_BF16, MLR_OVF_NONSAT);
      s = r32(acc_on, s * c);
      if (acc_on && r->logit_format == MLR_R_BF16)
        s = mlr__round_fmt(s, MLR_FMT_BF16, MLR_OVF_NONSAT);
      w->s[j] = s;
    }
    double bm = -INFINITY;
    for (int64_t j = 0; j < n; j++) bm = fmax(bm, w->s[j]);
    const double mn = fmax(m, bm);
    const double al = sh_sm_exp(sh, exp_on, r32(exp_on, m - mn));
    for (int64_t j = 0; j < n; j++) {
      w->p[j] = sh_sm_exp(sh, exp_on, r32(exp_on, w->s[j] - mn));
      /* both P's */
      w->pp[j] = mlr__to_operand(ON(MLR_SRC_P), p_round(ON(MLR_SRC_P), w->p[j], r->p_format),
                                 r->pv_operand);
    }
    const double ls = sh_rowsum(acc_on, r->softmax_sum, w->p, n);
    l = upd32(acc_on, fused, l, al, ls);
    m = mn;
    for (int64_t j = 0; j < n; j++) load(sh, sh->vlut, b, j0 + j, 0, DV, w->v + j * DV);
    for (int d = 0; d < DV; d++) w->dt[d] = into ? r32(acc_on, w->acc[d] * al) : 0;
    pv_block(sh, w, n, into);
    for (int d = 0; d < DV; d++)
      w->acc[d] = into ? w->dt[d] : upd32(acc_on, fused, w->acc[d], al, w->dt[d]);
  }
  const int src = single ? MLR_SRC_OUTPUT : MLR_SRC_MERGE, on = ON(src);
  const double lc = fmax(l, sh->clamp);
  for (int d = 0; d < DV; d++) {
    double v = r->partial_normalized ? r32(on, w->acc[d] / lc) : w->acc[d];
    if (sh->vs_split) v = r32(on, v * sh->vs);
    part[d] = v;
  }
  const int mg = ON(MLR_SRC_MERGE);
  const int lbase = r->softmax_exp == MLR_EXP_2 ? MLR_EXP_2 : MLR_EXP_E;
  double lse = r32(mg, m + sh_log(mg, lbase, lc));
  if (r->softmax_exp == MLR_EXP_2 && r->lse_base == MLR_EXP_E)
    lse = r32(mg, lse * (mg ? (double)LN2_F : LN2_D));
  else if (r->softmax_exp != MLR_EXP_2 && r->lse_base == MLR_EXP_2)
    lse = r32(mg, lse * (mg ? (double)LOG2E_F : LOG2E_D));
  *lse_out = lse;
  *m_out = m;
  *l_out = l;
}

/* the merge of row (t, h) over ns splits (mlr_emulate.h "merge"), into o */
MLR_FMA_CLONES static void merge(const mlr__shadow *sh, row_ws *w, int64_t ns, double *o) {
  const mlr_recipe *r = sh->r;
  const int on = ON(MLR_SRC_MERGE), fused = r->update_fma, norm = r->partial_normalized;
  const int eb = norm ? sh->exp_lse : sh->exp_sm;
  int rule = r->merge_rule;
  if (rule == MLR_MERGE_AITER) rule = ns <= 3 ? MLR_MERGE_RUNNING : MLR_MERGE_GLOBAL;
  double M = -INFINITY, sum = 0;
  for (int d = 0; d < DV; d++) o[d] = 0;
  if (rule == MLR_MERGE_GLOBAL)
    for (int64_t s = 0; s < ns; s++) {
      const double x = norm ? w->lse[s] : w->pm[s];
      if (x > SKIP_BELOW) M = fmax(M, x);
    }
  for (int64_t s = 0; s < ns; s++) {
    const double x = norm ? w->lse[s] : w->pm[s];
    if (!(x > SKIP_BELOW)) continue;
    const double mass = norm ? 1.0 : w->pl[s];
    const double *part = w->part + s * DV;
    if (rule == MLR_MERGE_RUNNING) {
      const double Mn = fmax(M, x);
      const double a = sh_exp(on, eb, r32(on, M - Mn)), wv = sh_exp(on, eb, r32(on, x - Mn));
      for (int d = 0; d < DV; d++) o[d] = upd32(on, fused, o[d], a, r32(on, part[d] * wv));
      sum = upd32(on, fused, sum, a, r32(on, mass * wv));
      M = Mn;
    } else {
      const double wv = sh_exp(on, eb, r32(on, x - M));
      for (int d = 0; d < DV; d++)
        o[d] = fused ? fma32(on, part[d], wv, o[d]) : r32(on, o[d] + r32(on, part[d] * wv));
      sum = fused ? fma32(on, mass, wv, sum) : r32(on, sum + r32(on, mass * wv));
    }
  }
  const int out = ON(MLR_SRC_OUTPUT);
  const double sc = fmax(sum, sh->clamp);
  for (int d = 0; d < DV; d++) o[d] = r32(out, o[d] / sc);
}

static double out_round(const mlr__shadow *sh, double x) {
  if (!ON(MLR_SRC_OUTPUT)) return x;
  switch (sh->r->out_format) {
  case MLR_OUT_FP16:
    return mlr__round_fmt(x, MLR_FMT_FP16, MLR_OVF_NONSAT);
  case MLR_OUT_FP32:
    return (double)(float)x;
  default:
    return mlr__round_fmt(x, MLR_FMT_BF16, MLR_OVF_NONSAT);
  }
}

static void one_row(const mlr__shadow *sh, row_ws *w, int64_t row, double *o) {
  const mlr_inputs *in = sh->in;
  const int64_t t = row / sh->H, h = row % sh->H, b = sh->tb[t];
  const int64_t n = in->qo_indptr[b + 1] - in->qo_indptr[b], i = t - in->qo_indptr[b];
  const int64_t Lt = mlr_inputs_visible(in, mlr_inputs_kv_len(in, b), n, i), ns = sh->nsplit[b],
                len = sh->slen[b];
  const int direct = ns == 1 && sh->r->partial_normalized;
  for (int64_t s = 0; s < ns; s++) {
    const int64_t lo = s * len;
    const int64_t hi = (s + 1) * len < Lt ? (s + 1) * len : Lt;
    split_row(sh, w, t, h, b, lo, hi > lo ? hi : lo, direct, w->part + s * DV, &w->lse[s],
              &w->pm[s], &w->pl[s]);
  }
  if (direct)
    memcpy(o, w->part, DV * sizeof(double));
  else
    merge(sh, w, ns, o);
  if (sh->vs_merged) /* v.scale_at = merged: once, after the merge (or the single split) */
    for (int d = 0; d < DV; d++) o[d] = r32(ON(MLR_SRC_OUTPUT), o[d] * sh->vs);
  for (int d = 0; d < DV; d++) o[d] = out_round(sh, o[d]);
}

mlr_status mlr_budget_eval(const mlr_recipe *r, const mlr_inputs *in, unsigned rounded,
                           const int64_t *rows, int64_t nrows, int threads, double *o,
                           mlr_error *err) {
  mlr__shadow sh;
  mlr_status st = mlr__shadow_init(&sh, r, in, rounded, err);
  if (st != MLR_OK) return st;
  const int64_t N = rows ? nrows : in->T * in->H;
  const int nt = mlr_threads(threads);
  const size_t cap = (size_t)sh.cap;
  int failed = 0;
#pragma omp parallel num_threads(nt) reduction(| : failed)
  {
    row_ws w;
    memset(&w, 0, sizeof w);
    w.k = malloc(KCHUNK * QK * sizeof(double));
    w.v = malloc(cap * DV * sizeof(double));
    w.s = malloc(cap * sizeof(double));
    w.p = malloc(cap * sizeof(double));
    w.pp = malloc(cap * sizeof(double));
    w.col = malloc(cap * sizeof(double));
    w.acc = malloc(DV * sizeof(double));
    w.dt = malloc(DV * sizeof(double));
    w.kf = malloc(KCHUNK * QK * sizeof(float));
    w.qf = malloc(QK * sizeof(float));
    w.sf = malloc(cap * sizeof(float));
    w.af = malloc((cap > DV ? cap : DV) * sizeof(float));
    w.part = malloc((size_t)sh.S * DV * sizeof(double));
    w.lse = malloc((size_t)sh.S * sizeof(double));
    w.pm = malloc((size_t)sh.S * sizeof(double));
    w.pl = malloc((size_t)sh.S * sizeof(double));
    const int ok = w.k && w.v && w.s && w.p && w.pp && w.col && w.acc && w.dt && w.kf && w.qf &&
                   w.sf && w.af && w.part && w.lse && w.pm && w.pl;
    if (!ok) failed = 1;
#pragma omp for schedule(dynamic, 1)
    for (int64_t k = 0; k < N; k++)
      if (ok) one_row(&sh, &w, rows ? rows[k] : k, o + k * DV);
    free(w.k);
    free(w.v);
    free(w.s);
    free(w.p);
    free(w.pp);
    free(w.col);
    free(w.acc);
    free(w.dt);
    free(w.kf);
    free(w.qf);
    free(w.sf);
    free(w.af);
    free(w.part);
    free(w.lse);
    free(w.pm);
    free(w.pl);
  }
  mlr__shadow_free(&sh);
  if (failed)
    return mlr_error_set(err, MLR_ENOMEM, "out of memory for the switchable model's row buffers");
  return MLR_OK;
}
