/* The model of a recipe (mlr_emulate.h says what is computed, in which order). This file is
 * the scheduling and the per-row arithmetic; qscale.c the Q policies; mlr_exact.h the exact sums.
 *
 * Speed without changing any element's order of operations: the heads of a query token share
 * each KV row, so the QK chains of 16 heads x 4 tokens run side by side (64 independent fma
 * chains, each in column order), and the PV chains run across the 512 output columns (each
 * column's chain in token order). fmaf is exactly rounded, so the vector and scalar clones of
 * these loops give the same bits. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "mlr_formats.h"
#include "mlr_pmath.h"
#include "mlr_emulate.h"
#include "mlr_exact.h"
#include "mlr_emu_ops.h"
#include "emu_mma.h"
#include "lanes8.h"
#include "mlr_mma.h"

#define QK   MLR_EMU_QK_DIM
#define DV   MLR_EMU_V_DIM
#define NOPE MLR_EMU_NOPE
enum { TOKCHUNK = 4, VCHUNK = 32, DCHUNK = 64 };
_Static_assert(VCHUNK % 32 == 0, "a V chunk holds whole matrix-unit blocks (16 or 32 tokens)");

#define EMU_CLONES MLR_FMA_CLONES /* mlr_base.h */

float mlr_emu_exp(int base, float x) { return mlr__emu_exp(base, x); }

typedef struct emu {
  const mlr_recipe *r;
  const mlr_inputs *in;
  int64_t H, S, cap; /* heads, most splits, tokens per block buffer */
  int kv8;
  float *klut, *kplut, *vlut; /* KV code -> QK operand value (latent and rope columns: their
                                 scales differ), PV operand value (256 or 65536 entries) */
  float *qT;                  /* [T][576][H] Q operand values */
  /* [T*H] range of each Q row (exact QK, general), qtop = INT_MAX if not finite */
  int *qlsb, *qtop;
  int vlsb, vtop; /* range of every finite PV operand value of V (exact PV, general) */
  int klsb, ktop; /* ... and of K (exact QK, general: the split of Q for two binary64 chains) */
  float *c;       /* [T*H] logit scale */
  float *ce;      /* [T*H] softmax.form = fa2: the natural-base scale of the lse's m */
  int qk_fast, pv_fast, qk_x, pv_x; /* exact dots: in binary64 (fast) or the long accumulator */
  int x2;                   /* exact dots may sum in two binary64 chains (not opts->no_x2) */
  int exp_sm, exp_lse;      /* exp of the softmax's units, and of the lse base */
  const uint32_t *ex2;      /* the exp2 unit's table (softmax.exp_unit), or NULL: exact */
  const uint32_t *mex2;     /* ... for the merge's exps (merge.exp_unit), or NULL */
  const uint32_t *rcp;      /* the reciprocal unit's table (div.unit = sm90-full), or NULL */
  int logc;                 /* lse.log = cuda-logf */
  const uint32_t *lg2;      /* the log2 unit's table (lse.log = sm90-lg2), or NULL */
  int k4, k4pv;             /* dot.k_order = triton on fp8 KV: QK columns, PV tokens permuted */
  float clamp, ks, kps, vs; /* k_scale, kpe_scale, v_scale (after the faults that misuse them) */
  int folded, vmerged, qfp8, fused, fault;
  int fa2, rev, lanes4, recip, seesaw; /* softmax.form = fa2, softmax.order = reverse, softmax.sum =
                                   lanes4, normalize = reciprocal */
  int pfa;                             /* softmax.form = fused_aligned */
  int dapprox;                         /* div.unit = sm90-approx (rcp: its reciprocal table) */
  int64_t *nsplit, *slen, *sfirst;     /* [B]: splits, their length, the first's (mlr_recipe.h) */
  mlr_emu_result *res;
} emu;

typedef struct scratch {
  float *s, *p, *pp;  /* [H][cap]: logits, fp32 p, P operand */
  float *kop, *vop;   /* [TOKCHUNK][576], [VCHUNK][512] */
  float *acc, *pva;   /* [H][512] */
  double *pvd, *pvl;  /* [H][512] (pv_fast; EX_F64X2: pvd the high chain, pvl the low) */
  mlr_xacc *pvx;      /* [H][512] (exact PV, general: the long accumulator) */
  mlr_i128 *pvi;      /* [H][512] (exact PV, general: the 128-bit fixed point) */
  int *pvmode;        /* [H][2]: how head h sums this block (EX_*), and the fixed point's unit */
  int64_t *psm, *vsm; /* P [H][cap] and a V chunk [VCHUNK][512] as odd significands ... */
  int *pse, *vse;     /* ... and exponents (mlr_f32_split), for the fixed point */
  float *pph, *ppl;   /* P [H][cap] split at 2^s (EX_F64X2): P = pph + ppl exactly */
  mlr_xacc *qkx;      /* [TOKCHUNK][H] (exact QK, general) */
  float *qa, *qr;     /* [TOKCHUNK][H]: QK results, the rope chain of nope_rope */
  /* [TOKCHUNK][H]: exact fp8 QK in binary64; exact QK in two chains, the low one */
  double *qd, *qd2;
  /* [576][H] Q split at 2^s a head (exact QK in two binary64 chains: Q = qh + ql exactly) */
  float *qh, *ql;
  double *msc, *mS; /* mma dots: per lane ([max(H, 512)]) 2^(F-E) and the cut sum */
  /* [576][H] Q's and [VCHUNK][512] V's unit exponents, [max(H, 512)] the blocks' E */
  int *qme, *vme, *mE;
  float *m, *l, *alpha, *part, *lse, *pm, *pl; /* [H], part [H][512] */
  float *lout; /* [H]: an unsplit row's lse as the kernel returns it (mlr_emu_result's lse_out) */
  float *lq;   /* [H][4]: softmax.sum = lanes4's lane sums */
  float *lq2, *al2; /* seesaw: [H][4] the second warpgroup's lane sums, [H] a pair's 2nd alpha */
  float *ss;  /* seesaw: [7][H][softmax.block] a pair's logits, p and P operands (seesaw_pair) */
  int pfused; /* fused_aligned: this batch's KV length is a multiple of softmax.block */
} scratch;

static void scratch_free(scratch *w) {
  free(w->s);
  free(w->p);
  free(w->pp);
  free(w->kop);
  free(w->vop);
  free(w->acc);
  free(w->pva);
  free(w->pvd);
  free(w->pvl);
  free(w->pph);
  free(w->ppl);
  free(w->pvx);
  free(w->pvi);
  free(w->pvmode);
  free(w->psm);
  free(w->vsm);
  free(w->pse);
  free(w->vse);
  free(w->qkx);
  free(w->qa);
  free(w->qr);
  free(w->qd);
  free(w->qd2);
  free(w->qh);
  free(w->ql);
  free(w->m);
  free(w->l);
  free(w->alpha);
  free(w->part);
  free(w->lse);
  free(w->lout);
  free(w->pm);
  free(w->pl);
  free(w->lq);
  free(w->lq2);
  free(w->al2);
  free(w->ss);
  free(w->msc);
  free(w->mS);
  free(w->qme);
  free(w->vme);
  free(w->mE);
}

static int scratch_alloc(scratch *w, const emu *e) {
  memset(w, 0, sizeof *w);
  const size_t H = (size_t)e->H, cap = (size_t)e->cap;
  w->s = malloc(H * cap * sizeof(float));
  w->p = malloc(H * cap * sizeof(float));
  w->pp = malloc(H * cap * sizeof(float));
  w->kop = calloc(TOKCHUNK * QK, sizeof(float));
  w->vop = calloc(VCHUNK * DV, sizeof(float));
  w->acc = malloc(H * DV * sizeof(float));
  w->pva = malloc(H * DV * sizeof(float));
  w->part = malloc(H * DV * sizeof(float));
  w->qa = malloc(TOKCHUNK * H * sizeof(float));
  w->qr = malloc(TOKCHUNK * H * sizeof(float));
  w->qd = malloc(TOKCHUNK * H * sizeof(double));
  w->m = malloc(H * sizeof(float));
  w->l = malloc(H * sizeof(float));
  w->alpha = malloc(H * sizeof(float));
  w->lse = malloc(H * sizeof(float));
  w->pm = malloc(H * sizeof(float));
  w->pl = malloc(H * sizeof(float));
  w->lout = malloc(H * sizeof(float));
  w->lq = malloc(4 * H * sizeof(float));
  int ok = w->s && w->p && w->pp && w->kop && w->vop && w->acc && w->pva && w->part && w->m &&
           w->l && w->alpha && w->lse && w->pm && w->pl && w->lout && w->qa && w->qr && w->qd &&
           w->lq;
  if (e->seesaw)
    ok = ok && (w->lq2 = malloc(4 * H * sizeof(float))) && (w->al2 = malloc(H * sizeof(float))) &&
         (w->ss = malloc(7 * H * (size_t)e->r->softmax_block * sizeof(float)));
  if (e->pv_fast || e->pv_x) ok = ok && (w->pvd = malloc(H * DV * sizeof(double)));
  if (e->pv_x)
    ok = ok && (w->pvx = malloc(H * DV * sizeof(mlr_xacc))) &&
         (w->pvi = malloc(H * DV * sizeof(mlr_i128))) &&
         (w->pvmode = malloc(2 * H * sizeof(int))) &&
         (w->psm = malloc(H * cap * sizeof(int64_t))) && (w->pse = malloc(H * cap * sizeof(int))) &&
         (w->vsm = malloc(VCHUNK * DV * sizeof(int64_t))) &&
         (w->vse = malloc(VCHUNK * DV * sizeof(int))) &&
         (w->pvl = malloc(H * DV * sizeof(double))) && (w->pph = malloc(H * cap * sizeof(float))) &&
         (w->ppl = malloc(H * cap * sizeof(float)));
  if (e->qk_x)
    ok = ok && (w->qkx = malloc(TOKCHUNK * H * sizeof(mlr_xacc))) &&
         (w->qd2 = malloc(TOKCHUNK * H * sizeof(double))) &&
         (w->qh = malloc(H * QK * sizeof(float))) && (w->ql = malloc(H * QK * sizeof(float)));
  const size_t lanes = H > DV ? H : DV;
  if (MLR_DOT_IS_MMA(e->r->qk_dot) || MLR_DOT_IS_MMA(e->r->pv_dot))
    ok = ok && (w->msc = malloc(lanes * sizeof(double))) &&
         (w->mS = malloc(lanes * sizeof(double))) && (w->mE = malloc(lanes * sizeof(int)));
  if (MLR_DOT_IS_MMA(e->r->qk_dot)) ok = ok && (w->qme = malloc(H * QK * sizeof(int)));
  if (MLR_DOT_IS_MMA(e->r->pv_dot)) ok = ok && (w->vme = malloc(DV * VCHUNK * sizeof(int)));
  if (!ok) scratch_free(w);
  return ok;
}

/* the first n values of KV token pos of batch b as operands, through a code table */
static void load_row(const emu *e, const float *lut, int64_t b, int64_t pos, int n, float *out) {
  const int64_t row = mlr_inputs_kv_row(e->in, b, pos);
  if (e->kv8) {
    const uint8_t *r = (const uint8_t *)e->in->kv + row * QK;
    for (int i = 0; i < n; i++) out[i] = lut[r[i]];
  } else {
    const uint16_t *r = (const uint16_t *)e->in->kv + row * QK;
    for (int i = 0; i < n; i++) out[i] = lut[r[i]];
  }
}

/* a K row: the latent columns through klut, the rope columns through kplut; with dot.k_order =
 * triton on fp8 KV position p holds column mlr__emu_k4_index(p) (Q's are permuted alike: the dot's
 * blocks are the unit's; the permutation keeps the latent and rope columns apart) */
static void load_k_row(const emu *e, int64_t b, int64_t pos, float *out) {
  float tmp[QK], *o = e->k4 ? tmp : out;
  load_row(e, e->klut, b, pos, NOPE, o);
  const int64_t row = mlr_inputs_kv_row(e->in, b, pos);
  for (int i = NOPE; i < QK; i++)
    o[i] = e->kplut[e->kv8 ? ((const uint8_t *)e->in->kv)[row * QK + i]
                           : ((const uint16_t *)e->in->kv)[row * QK + i]];
  if (e->k4)
    for (int p = 0; p < QK; p++) out[p] = tmp[mlr__emu_k4_index(p)];
}

/* ---- QK dots: a[c*H + h] for TOKCHUNK tokens (kop rows) and H heads (q: [576][H]) ---- */

/* 16 heads (every bench shape): the 64 chains in registers instead of memory (a store and a load
 * a term), each still in column order */
EMU_CLONES static void qk_seq16(const float *restrict q, const float *restrict kop, int i0, int i1,
                                float *restrict a) {
  float ac[TOKCHUNK][16];
  memcpy(ac, a, sizeof ac);
  for (int i = i0; i < i1; i++)
    for (int c = 0; c < TOKCHUNK; c++) {
      const float k = kop[c * QK + i];
      for (int h = 0; h < 16; h++) ac[c][h] = fmaf(q[i * 16 + h], k, ac[c][h]);
    }
  memcpy(a, ac, sizeof ac);
}

EMU_CLONES static void qk_seq(const float *q, const float *kop, int64_t H, int i0, int i1,
                              float *a) {
  if (H == 16) {
    qk_seq16(q, kop, i0, i1, a);
    return;
  }
  for (int i = i0; i < i1; i++)
    for (int c = 0; c < TOKCHUNK; c++) {
      const float k = kop[c * QK + i];
      const float *qi = q + (int64_t)i * H;
      float *ac = a + c * H;
      for (int64_t h = 0; h < H; h++) ac[h] = fmaf(qi[h], k, ac[h]);
    }
}

/* 16 heads: two tokens at a time, their 32 chains in registers (all 64 would not fit) */
EMU_CLONES static void qk_exact_f64_16(const float *restrict q, const float *restrict kop,
                                       double *restrict a) {
  for (int c0 = 0; c0 < TOKCHUNK; c0 += 2) {
    double ac[2][16];
    memcpy(ac, a + c0 * 16, sizeof ac);
    for (int i = 0; i < QK; i++) {
      const double k0 = kop[c0 * QK + i], k1 = kop[(c0 + 1) * QK + i];
      for (int h = 0; h < 16; h++) {
        const double qv = q[i * 16 + h];
        ac[0][h] = fma(qv, k0, ac[0][h]);
        ac[1][h] = fma(qv, k1, ac[1][h]);
      }
    }
    memcpy(a + c0 * 16, ac, sizeof ac);
  }
}

/* a[c][h] += the QK dots in binary64, fma a term. Exact for fp8 x fp8 (qk_fast: products are
 * multiples of 2^-20 below 2^18, and 576 of them sum below 2^46 units: every partial sum is exact
 * in binary64, in any order), where the ranges pass mlr_f64_fits (all_f64), and for each chain of
 * qk_split's halves */
EMU_CLONES static void qk_exact_f64(const float *q, const float *kop, int64_t H, double *a) {
  if (H == 16) {
    qk_exact_f64_16(q, kop, a);
    return;
  }
  for (int i = 0; i < QK; i++)
    for (int c = 0; c < TOKCHUNK; c++) {
      const double k = kop[c * QK + i];
      const float *qi = q + (int64_t)i * H;
      double *ac = a + c * H;
      for (int64_t h = 0; h < H; h++) ac[h] = fma((double)qi[h], k, ac[h]);
    }
}

/* The exact sum of n products a[i*sa] * b[i*sb], rounded once to binary32. Ranges (lsb, top) as
 * mlr_f32_range gives them; top = INT_MAX marks a vector with NaN or Inf, whose sum is then the
 * binary64 sum of the products (NaN, or the infinity IEEE arithmetic gives). Otherwise the
 * 128-bit fixed point when the ranges fit it, else the long accumulator. */
static float exact_dot(const float *a, int64_t sa, const float *b, int64_t sb, int n, int alsb,
                       int atop, int blsb, int btop, mlr_xacc *x) {
  if (atop == INT_MAX || btop == INT_MAX) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i * sa] * (double)b[i * sb];
    return (float)s;
  }
  if (alsb > atop || blsb > btop) return 0.0f; /* an all-zero vector */
  if (mlr_i128_fits(alsb, atop, blsb, btop, n)) {
    mlr_i128 acc = 0;
    const int g = alsb + blsb;
    for (int i = 0; i < n; i++) mlr_i128_fma(&acc, a[i * sa], b[i * sb], g);
    return mlr_i128_round_f32(acc, g);
  }
  mlr_xacc_clear(x);
  for (int i = 0; i < n; i++) mlr_xacc_add(x, (double)a[i * sa] * (double)b[i * sb]);
  return mlr_xacc_round_f32(x);
}

/* n binary32 values x[i * stride] split at 2^s for two binary64 chains (mlr_f64_split): hi + lo
 * = x exactly, and both are binary32 values: hi is x's bits from 2^s up (a carry of the rounding
 * makes a power of two), lo a multiple of x's lsb of at most 2^(s-1), so at most 2^24 of those
 * units (mlr_f64x2_fits keeps s at or below the vector's top) */
static void split_f32(const float *x, int64_t n, int64_t stride, int s, float *hi, float *lo) {
  const double k = mlr_f64_split_const(s);
  for (int64_t i = 0; i < n; i++) {
    double xh, xl;
    mlr_f64_split((double)x[i * stride], k, &xh, &xl);
    hi[i * stride] = (float)xh;
    lo[i * stride] = (float)xl;
  }
}

/* Query token t's Q rows split for exact dots in two binary64 chains (mlr_f64x2_fits): for each
 * head, with K's range over every finite K operand (so one split serves every K row: a row's
 * narrower range only lowers both chains' partial sums), qh + ql = Q exactly (split_f32). A zero
 * row splits into zeros. 0 when some head's row is not finite or its ranges do not fit: exact_dot
 * then. Once a (token, split): run_split_row. */
static int qk_split(const emu *e, scratch *w, int64_t t) {
  const int64_t H = e->H;
  const float *q = e->qT + t * QK * H;
  if (e->klsb > e->ktop) return 0;
  for (int64_t h = 0; h < H; h++) {
    const int lsb = e->qlsb[t * H + h], top = e->qtop[t * H + h];
    int sh = 0;
    if (top == INT_MAX) return 0;
    if (lsb <= top && !mlr_f64x2_fits(lsb, top, e->klsb, e->ktop, QK, &sh)) return 0;
    split_f32(q + h, QK, H, sh, w->qh + h, w->ql + h);
  }
  return 1;
}

/* a chunk's QK dots where every one is exact in binary64: in one chain (Q as it is), or in two
 * (Q split: w->qh + w->ql), rounded once (mlr_f64x2_round_f32); both give the exact sum rounded
 * once */
static void qk_exact_chunk(scratch *w, const float *q, int64_t H, int two, float *av) {
  const size_t nb = TOKCHUNK * (size_t)H;
  memset(w->qd, 0, nb * sizeof(double));
  if (!two) {
    qk_exact_f64(q, w->kop, H, w->qd);
    for (size_t k = 0; k < nb; k++) av[k] = (float)w->qd[k]; /* the one rounding */
    return;
  }
  memset(w->qd2, 0, nb * sizeof(double));
  qk_exact_f64(w->qh, w->kop, H, w->qd);
  qk_exact_f64(w->ql, w->kop, H, w->qd2);
  for (size_t k = 0; k < nb; k++) av[k] = mlr_f64x2_round_f32(w->qd[k], w->qd2[k]);
}

/* Every head of token t has a finite Q row whose exact dot with any finite K row fits one binary64
 * chain (mlr_f64_fits) over K's range across all finite K operands: a row's own range is within
 * it, so its dots fit too, and qk_block needs no row's range, only its finiteness. */
static int qk_f64_all(const emu *e, int64_t t) {
  if (e->klsb > e->ktop) return 0;
  for (int64_t h = 0; h < e->H; h++) {
    const int lsb = e->qlsb[t * e->H + h], top = e->qtop[t * e->H + h];
    if (top == INT_MAX || (lsb <= top && !mlr_f64_fits(lsb, top, e->klsb, e->ktop, QK))) return 0;
  }
  return 1;
}

/* x2: qk_split gave token t's split Q (w->qh, w->ql); f64: qk_f64_all(t); from: a matrix-unit
 * dot's first column (its chain takes columns from .. 575, then 0 .. from - 1) */
static void qk_block(const emu *e, scratch *w, int64_t t, int64_t b, int64_t j0, int64_t j1, int x2,
                     int f64, int from) {
  const mlr_recipe *r = e->r;
  const int64_t H = e->H;
  const float *q = e->qT + t * QK * H;
  const mlr_mma_model *mq =
      MLR_DOT_IS_MMA(r->qk_dot) ? mlr_mma_get((mlr_mma_unit)MLR_DOT_MMA_UNIT(r->qk_dot)) : NULL;
  if (mq) /* Q's unit exponents, [576][H] like Q: the heads are the lanes */
    for (int64_t x = 0; x < QK * H; x++) w->qme[x] = mlr_mma_in_exp(mq, q[x]);
  for (int64_t j = j0; j < j1; j += TOKCHUNK) {
    const int nc = (int)(j1 - j < TOKCHUNK ? j1 - j : TOKCHUNK);
    for (int c = 0; c < TOKCHUNK; c++) {
      float *ko = w->kop + c * QK;
      if (c >= nc) {
        memset(ko, 0, QK * sizeof(float));
        continue;
      }
      load_k_row(e, b, j + c, ko);
    }
    float *av = w->qa;
    const size_t nb = TOKCHUNK * (size_t)H;
    if (r->qk_dot == MLR_DOT_EXACT && e->qk_fast)
      qk_exact_chunk(w, q, H, 0, av);
    else if (r->qk_dot == MLR_DOT_EXACT) {
      int kfin = 1; /* the chunk's K rows finite */
      if (f64 || x2)
        for (int c = 0; c < nc; c++)
          for (int i = 0; i < QK; i++) kfin &= isfinite(w->kop[c * QK + i]) != 0;
      if ((f64 || x2) && kfin) /* the token's choice serves the chunk (scanning each row's range was
                                  a quarter of the bf16 recipes' time) */
        qk_exact_chunk(w, q, H, !f64, av);
      else { /* a row not finite, or neither choice: each row's range decides */
        int klsb[TOKCHUNK], ktop[TOKCHUNK], all_f64 = 1;
        for (int c = 0; c < TOKCHUNK; c++) {
          const float *k = w->kop + c * QK;
          mlr_f32_range(k, QK, 1, &klsb[c], &ktop[c]);
          for (int i = 0; i < QK; i++)
            if (!isfinite(k[i])) ktop[c] = INT_MAX;
          if (klsb[c] > ktop[c]) continue; /* zero row (or padding) */
          for (int64_t h = 0; h < H && all_f64; h++)
            all_f64 = e->qtop[t * H + h] != INT_MAX && ktop[c] != INT_MAX &&
                      (e->qlsb[t * H + h] > e->qtop[t * H + h] ||
                       mlr_f64_fits(e->qlsb[t * H + h], e->qtop[t * H + h], klsb[c], ktop[c], QK));
        }
        for (int c = 0; c < nc; c++)
          kfin &= ktop[c] != INT_MAX; /* within the range qk_split took */
        if (all_f64 || (x2 && kfin))  /* every dot of the chunk exact in one chain, or two */
          qk_exact_chunk(w, q, H, !all_f64, av);
        else
          for (int c = 0; c < nc; c++)
            for (int64_t h = 0; h < H; h++)
              av[c * H + h] = exact_dot(q + h, H, w->kop + c * QK, 1, QK, e->qlsb[t * H + h],
                                        e->qtop[t * H + h], klsb[c], ktop[c], &w->qkx[c * H + h]);
      }
    } else if (mq) { /* the unit's blocks along the 576 columns, chained from C = 0; K row c shared
                        by the heads */
      int ke[QK];
      for (int c = 0; c < nc; c++) {
        for (int i = 0; i < QK; i++) ke[i] = mlr_mma_in_exp(mq, w->kop[c * QK + i]);
        for (int64_t h = 0; h < H; h++) av[c * H + h] = 0.0f;
        mlr__emu_mma_lanes(mq, H, QK - from, q + from * H, w->qme + from * H, H,
                           w->kop + c * QK + from, ke + from, av + c * H, w->msc, w->mS, w->mE);
        if (from)
          mlr__emu_mma_lanes(mq, H, from, q, w->qme, H, w->kop + c * QK, ke, av + c * H, w->msc,
                             w->mS, w->mE);
      }
    } else if (r->qk_dot == MLR_DOT_AITER_LANES8) { /* the stage's build for the KV's type */
      for (int c = 0; c < nc; c++)
        for (int64_t h = 0; h < H; h++)
          av[c * H + h] = e->kv8 ? mlr__emu_lanes8_dot(q + h, H, w->kop + c * QK)
                                 : mlr__emu_lanes8_dot_bf16kv(q + h, H, w->kop + c * QK);
    } else if (r->qk_dot == MLR_DOT_NOPE_ROPE) {
      memset(av, 0, nb * sizeof(float));
      memset(w->qr, 0, nb * sizeof(float));
      qk_seq(q, w->kop, H, 0, NOPE, av);
      qk_seq(q, w->kop, H, NOPE, QK, w->qr);
      for (size_t k = 0; k < nb; k++) av[k] = av[k] + w->qr[k];
    } else {
      memset(av, 0, nb * sizeof(float));
      qk_seq(q, w->kop, H, 0, QK, av);
    }
    for (int c = 0; c < nc; c++)
      for (int64_t h = 0; h < H; h++) {
        float s = av[c * H + h];
        if (r->qk_result == MLR_R_BF16) s = mlr__emu_round_to(s, MLR_FMT_BF16);
        if (!e->fa2 && !e->pfa) /* fa2 and fused_aligned keep the raw dot */
          s = s * e->c[t * H + h];
        if (r->logit_format == MLR_R_BF16) s = mlr__emu_round_to(s, MLR_FMT_BF16);
        w->s[h * e->cap + (j - j0) + c] = s;
      }
  }
}

/* ---- PV: pva[h][d] (or pvd, pvx) += sum over the block's tokens of P[h][j] * V[j][d] ---- */

EMU_CLONES static void pv_seq(const float *pp, const float *vop, int nj, float *acc) {
  for (int d0 = 0; d0 < DV; d0 += DCHUNK) {
    float bl[DCHUNK];
    for (int dd = 0; dd < DCHUNK; dd++) bl[dd] = acc[d0 + dd];
    for (int jj = 0; jj < nj; jj++) {
      const float p = pp[jj];
      const float *v = vop + jj * DV + d0;
      for (int dd = 0; dd < DCHUNK; dd++) bl[dd] = fmaf(p, v[dd], bl[dd]);
    }
    for (int dd = 0; dd < DCHUNK; dd++) acc[d0 + dd] = bl[dd];
  }
}

/* acc += P V in binary64, fma a term: exact when the caller's ranges say so. pv_fast: fp8 P (<= 1)
 * x fp8 V, multiples of 2^-20 below 2^9 each, sums of fewer than 2^24 of them exact in any order
 * (cap checked before choosing this path); EX_F64 and each chain of EX_F64X2: mlr_f64_fits and
 * mlr_f64x2_fits on the block's P and V's ranges */
EMU_CLONES static void pv_exact_f64(const float *pp, const float *vop, int nj, double *acc) {
  for (int d0 = 0; d0 < DV; d0 += DCHUNK / 2) {
    double bl[DCHUNK / 2];
    for (int dd = 0; dd < DCHUNK / 2; dd++) bl[dd] = acc[d0 + dd];
    for (int jj = 0; jj < nj; jj++) {
      const double p = pp[jj];
      const float *v = vop + jj * DV + d0;
      for (int dd = 0; dd < DCHUNK / 2; dd++) bl[dd] = fma(p, (double)v[dd], bl[dd]);
    }
    for (int dd = 0; dd < DCHUNK / 2; dd++) acc[d0 + dd] = bl[dd];
  }
}

/* how a head's exact PV dot sums a block, the fastest that is exact for its P's and V's ranges:
 * one binary64 chain (EX_F64), two with P split at a power of two (EX_F64X2: mlr_f64x2_fits; the
 * GPU exact kernel's sum), the 128-bit fixed point (EX_I128), the long accumulator (EX_LONG); IEEE
 * binary64 (EX_NAIVE) where an operand is not finite. Every exact mode gives the exact sum rounded
 * once, so which one runs changes no bit. */
enum { EX_NAIVE = 0, EX_I128 = 1, EX_LONG = 2, EX_F64 = 3, EX_F64X2 = 4 };

/* any non-finite V operand in tokens [j0, j1) of batch b */
static int block_has_nonfinite(const emu *e, int64_t b, int64_t j0, int64_t j1) {
  for (int64_t j = j0; j < j1; j++) {
    const int64_t row = mlr_inputs_kv_row(e->in, b, j);
    for (int d = 0; d < DV; d++) {
      const uint32_t c = e->kv8 ? ((const uint8_t *)e->in->kv)[row * QK + d]
                                : ((const uint16_t *)e->in->kv)[row * QK + d];
      if (!isfinite(e->vlut[c])) return 1;
    }
  }
  return 0;
}

/* how each head sums this block (w->pvmode): see exact_dot; the P splits its mode needs */
static void pv_modes(const emu *e, scratch *w, int64_t b, int64_t j0, int64_t j1, int into) {
  const int64_t n = j1 - j0;
  const int vfin = !block_has_nonfinite(e, b, j0, j1); /* the block's V, the same for every head */
  for (int64_t h = 0; h < e->H; h++) {
    int plsb, ptop, fin = vfin;
    const float *pp = w->pp + h * e->cap;
    for (int64_t j = 0; j < n; j++) fin &= isfinite(pp[j]) != 0;
    mlr_f32_range(pp, n, 1, &plsb, &ptop);
    int mode = !fin                                             ? EX_NAIVE
               : into                                           ? EX_LONG
               : mlr_i128_fits(plsb, ptop, e->vlsb, e->vtop, n) ? EX_I128
                                                                : EX_LONG,
        sh = 0;
    if (mode == EX_I128 && mlr_f64_fits(plsb, ptop, e->vlsb, e->vtop, n))
      mode = EX_F64;
    else if (mode == EX_I128 && e->x2 && mlr_f64x2_fits(plsb, ptop, e->vlsb, e->vtop, n, &sh))
      mode = EX_F64X2; /* both ranges non-empty: EX_F64 took empty ones */
    w->pvmode[2 * h] = mode;
    w->pvmode[2 * h + 1] = plsb + e->vlsb; /* the fixed point's unit */
    if (mode == EX_I128)
      for (int64_t j = 0; j < n; j++)
        mlr_f32_split(pp[j], &w->psm[h * e->cap + j], &w->pse[h * e->cap + j]);
    if (mode == EX_F64X2) split_f32(pp, n, 1, sh, w->pph + h * e->cap, w->ppl + h * e->cap);
  }
}

/* the block's PV accumulators start at acc * alpha (into) or 0 */
static void pv_init(const emu *e, scratch *w, int into) {
  for (int64_t h = 0; h < e->H; h++)
    for (int d = 0; d < DV; d++) {
      const float init = into ? w->acc[h * DV + d] * w->alpha[h] : 0.0f;
      if (e->pv_fast)
        w->pvd[h * DV + d] = init;
      else if (e->pv_x) { /* only the accumulators of the head's mode (the long one is 180 bytes a
                             column) */
        const int mode = w->pvmode[2 * h];
        if (mode == EX_LONG) {
          mlr_xacc_clear(&w->pvx[h * DV + d]);
          mlr_xacc_add(&w->pvx[h * DV + d], (double)init);
        } else if (mode == EX_I128)
          w->pvi[h * DV + d] = 0; /* init = 0: into makes EX_LONG */
        else {
          w->pvd[h * DV + d] = init;
          if (mode == EX_F64X2) w->pvl[h * DV + d] = 0.0;
        }
      } else
        w->pva[h * DV + d] = init;
    }
}

/* head h's exact PV sum over a chunk of nj tokens at offset jo into the block, in its mode */
static void pv_exact_chunk(const emu *e, scratch *w, int64_t h, int64_t jo, int nj) {
  const float *pp = w->pp + h * e->cap + jo;
  const int mode = w->pvmode[2 * h], g = w->pvmode[2 * h + 1];
  if (mode == EX_F64)
    pv_exact_f64(pp, w->vop, nj, w->pvd + h * DV);
  else if (mode == EX_F64X2) {
    pv_exact_f64(w->pph + h * e->cap + jo, w->vop, nj, w->pvd + h * DV);
    pv_exact_f64(w->ppl + h * e->cap + jo, w->vop, nj, w->pvl + h * DV);
  } else if (mode == EX_I128) {
    const int64_t *pm = w->psm + h * e->cap + jo;
    const int *pe = w->pse + h * e->cap + jo;
    mlr_i128 *acc = w->pvi + h * DV;
    for (int jj = 0; jj < nj; jj++) {
      if (!pm[jj]) continue;
      for (int d = 0; d < DV; d++) {
        const int64_t vm = w->vsm[jj * DV + d];
        if (vm) acc[d] += mlr_i128_shl(pm[jj] * vm, pe[jj] + w->vse[jj * DV + d] - g);
      }
    }
  } else
    for (int d = 0; d < DV; d++)
      for (int jj = 0; jj < nj; jj++) {
        const float pv = pp[jj], v = w->vop[jj * DV + d];
        if (mode == EX_LONG)
          mlr_xacc_add(&w->pvx[h * DV + d], (double)pv * (double)v);
        else
          w->pvd[h * DV + d] += (double)pv * (double)v;
      }
}

/* the block's dots rounded to binary32, into acc: as they are (into) or through the update */
static void pv_finish(const emu *e, scratch *w, int into) {
  for (int64_t h = 0; h < e->H; h++)
    for (int d = 0; d < DV; d++) {
      float dot;
      if (e->pv_fast)
        dot = (float)w->pvd[h * DV + d];
      else if (e->pv_x) {
        const int mode = w->pvmode[2 * h];
        dot = mode == EX_I128    ? mlr_i128_round_f32(w->pvi[h * DV + d], w->pvmode[2 * h + 1])
              : mode == EX_F64X2 ? mlr_f64x2_round_f32(w->pvd[h * DV + d], w->pvl[h * DV + d])
              : mode == EX_LONG  ? mlr_xacc_round_f32(&w->pvx[h * DV + d])
                                 : (float)w->pvd[h * DV + d]; /* F64: exact, NAIVE: IEEE */
      } else
        dot = w->pva[h * DV + d];
      w->acc[h * DV + d] =
          into ? dot : mlr__emu_upd(w->acc[h * DV + d], w->alpha[h], dot, e->fused);
    }
}

/* the PV mma dot of one 32-token chunk (tokens j.. of batch b, at jo in the block's P) in
 * dot.k_order = triton on fp8 KV: position q holds token mlr__emu_k4_index(q); past nj, p = 0 and V
 * = 0 (the kernel's masked tokens) */
static void pv_mma_k4(const emu *e, scratch *w, const mlr_mma_model *mv, int64_t b, int64_t j,
                      int64_t jo, int nj) {
  float pq[VCHUNK];
  int pe[VCHUNK];
  for (int q = 0; q < VCHUNK; q++) {
    const int tok = mlr__emu_k4_index(q);
    if (tok < nj)
      load_row(e, e->vlut, b, j + tok, DV, w->vop + q * DV);
    else
      memset(w->vop + q * DV, 0, DV * sizeof(float));
  }
  for (int k = 0; k < VCHUNK * DV; k++) w->vme[k] = mlr_mma_in_exp(mv, w->vop[k]);
  for (int64_t h = 0; h < e->H; h++) {
    const float *pp = w->pp + h * e->cap + jo;
    for (int q = 0; q < VCHUNK; q++) {
      const int tok = mlr__emu_k4_index(q);
      pq[q] = tok < nj ? pp[tok] : 0.0f;
      pe[q] = mlr_mma_in_exp(mv, pq[q]);
    }
    mlr__emu_mma_lanes(mv, DV, VCHUNK, w->vop, w->vme, DV, pq, pe, w->pva + h * DV, w->msc, w->mS,
                       w->mE);
  }
}

static void pv_block(const emu *e, scratch *w, int64_t b, int64_t j0, int64_t j1) {
  const mlr_recipe *r = e->r;
  const mlr_mma_model *mv =
      MLR_DOT_IS_MMA(r->pv_dot) ? mlr_mma_get((mlr_mma_unit)MLR_DOT_MMA_UNIT(r->pv_dot)) : NULL;
  const int64_t H = e->H;
  const int into = r->pv_accumulate == MLR_PV_INTO_ACC;
  if (e->pv_x) pv_modes(e, w, b, j0, j1, into);
  pv_init(e, w, into);
  for (int64_t j = j0; j < j1; j += VCHUNK) {
    const int nj = (int)(j1 - j < VCHUNK ? j1 - j : VCHUNK);
    if (mv && e->k4pv) { /* the 32 tokens in Triton's order, the masked ones as zeros */
      pv_mma_k4(e, w, mv, b, j, j - j0, nj);
      continue;
    }
    for (int jj = 0; jj < nj; jj++) load_row(e, e->vlut, b, j + jj, DV, w->vop + jj * DV);
    if (e->pv_x)
      for (int k = 0; k < nj * DV; k++) mlr_f32_split(w->vop[k], &w->vsm[k], &w->vse[k]);
    if (mv) /* the chunk's unit exponents, shared by the heads */
      for (int k = 0; k < nj * DV; k++) w->vme[k] = mlr_mma_in_exp(mv, w->vop[k]);
    for (int64_t h = 0; h < H; h++) {
      const float *pp = w->pp + h * e->cap + (j - j0);
      if (e->pv_fast)
        pv_exact_f64(pp, w->vop, nj, w->pvd + h * DV);
      else if (e->pv_x)
        pv_exact_chunk(e, w, h, j - j0, nj);
      else if (mv) { /* blocks of the unit's size in token order (VCHUNK is a multiple); the
                        columns are the lanes */
        int pe[VCHUNK];
        for (int jj = 0; jj < nj; jj++) pe[jj] = mlr_mma_in_exp(mv, pp[jj]);
        mlr__emu_mma_lanes(mv, DV, nj, w->vop, w->vme, DV, pp, pe, w->pva + h * DV, w->msc, w->mS,
                           w->mE);
      } else if (r->pv_dot == MLR_DOT_AITER_LANES8) /* the block of 4 (the recipe check's) */
        mlr__emu_lanes8_pv(pp, w->vop, nj, w->pva + h * DV);
      else
        pv_seq(pp, w->vop, nj, w->pva + h * DV);
    }
  }
  pv_finish(e, w, into);
}

/* the log in an lse, in base `base`: lse.log's (cuda-logf is a natural log: the recipe check
 * allows it with base e only; sm90-lg2 is the unit's log2, times fp32(ln 2) for a natural log, as
 * CUDA's __logf under --use_fast_math: lg2.approx.ftz then mul.ftz by 0x3F317218, MLR_EMU_LN2_F) */
static float lse_log(const emu *e, int base, float x) {
  if (e->lg2) {
    const float l2 = mlr__sfu_lg2(e->lg2, x);
    return base == MLR_EXP_2 ? l2 : l2 * MLR_EMU_LN2_F;
  }
  return e->logc ? mlr__emu_logf_cuda(x) : mlr__emu_log(base, x);
}

/* an lse in lse.base to out.lse_base, as the kernel returns it: one binary32 multiply */
static float out_lse(const emu *e, float lse) {
  return mlr__emu_lse_convert(lse, e->r->lse_base == MLR_EXP_2 ? MLR_EXP_2 : MLR_EXP_E,
                              e->r->out_lse_base);
}

/* the partials' and the merge's divisions (div.unit) */
static float emu_div(const emu *e, float x, float y) {
  return e->dapprox ? mlr__sfu_div_approx(e->rcp, x, y) : mlr__emu_div(e->rcp, x, y);
}

/* the P operand of p (its p.format, then pv.operand but for aiter-lanes8) */
static float p_operand(const emu *e, float p) {
  const float pr = mlr__emu_p_round(p, e->r->p_format);
  /* aiter-lanes8 multiplies fp32 P by bf16 V (Triton's mixed product): P stays as it is */
  return e->r->pv_dot == MLR_DOT_AITER_LANES8 ? pr : mlr__emu_to_operand(pr, e->r->pv_operand);
}

/* softmax.sum = lanes4: the block of blk tokens at a (aligned) into the four lane sums of one head;
 * the block's tokens outside [j0, j0 + n) are the kernel's masked ones, p = 0 */
static void lanes4_add(float *lq, float al, const float *p, int64_t a, int64_t blk, int64_t j0,
                       int64_t n) {
  for (int q = 0; q < 4; q++) {
    float l = lq[q];
    for (int64_t i = 0; i < blk; i += 8)
      for (int k = 0; k < 2; k++) {
        const int64_t j = a + i + 2 * q + k;
        const float pj = j >= j0 && j < j0 + n ? p[j - j0] : 0.0f;
        l = i == 0 && k == 0 ? fmaf(al, l, pj) : l + pj;
      }
    lq[q] = l;
  }
}

/* head h's online softmax over the block of n tokens at j0 (logits in w->s): p, the P operands,
 * and the running m, l (or lane sums) and alpha */
static void softmax_block(const emu *e, scratch *w, int64_t t, int64_t h, int64_t j0, int64_t n,
                          int64_t blk) {
  const mlr_recipe *r = e->r;
  const float *s = w->s + h * e->cap;
  float *p = w->p + h * e->cap, *pp = w->pp + h * e->cap;
  float bm = -INFINITY, al;
  const float c = e->c[t * e->H + h];
  for (int64_t j = 0; j < n; j++) bm = fmaxf(bm, e->pfa ? s[j] * c : s[j]);
  const float mn = fmaxf(w->m[h], bm);
  if (e->fa2) { /* 2^(s c - m c) as one fma of the raw dot; m = -inf (all masked) scales by 0 */
    const float cur = mn == -INFINITY ? 0.0f : mn;
    al = mlr__emu_sm_exp(e->exp_sm, e->ex2, (w->m[h] - cur) * c);
    for (int64_t j = 0; j < n; j++)
      p[j] = mlr__emu_sm_exp(e->exp_sm, e->ex2, fmaf(s[j], c, -(cur * c)));
  } else {
    al = mlr__emu_sm_exp(e->exp_sm, e->ex2, w->m[h] - mn);
    for (int64_t j = 0; j < n; j++) /* fused_aligned: s c - m as one fma where w->pfused */
      p[j] = mlr__emu_sm_exp(e->exp_sm, e->ex2,
                             !e->pfa     ? s[j] - mn
                             : w->pfused ? fmaf(s[j], c, -mn)
                                         : s[j] * c - mn);
  }
  for (int64_t j = 0; j < n; j++) pp[j] = p_operand(e, p[j]);
  if (e->lanes4)
    lanes4_add(w->lq + 4 * h, al, p, j0 - j0 % blk, blk, j0, n);
  else
    w->l[h] = mlr__emu_upd(w->l[h], al, mlr__emu_rowsum(r->softmax_sum, p, n), e->fused);
  w->m[h] = mn;
  w->alpha[h] = al;
}

/* the tokens [j0, j1) of batch b as one online-softmax block: logits, softmax, PV */
static void run_block(const emu *e, scratch *w, int64_t t, int64_t b, int64_t j0, int64_t j1,
                      int64_t blk, int x2, int f64) {
  qk_block(e, w, t, b, j0, j1, x2, f64, 0);
  for (int64_t h = 0; h < e->H; h++) softmax_block(e, w, t, h, j0, j1 - j0, blk);
  pv_block(e, w, b, j0, j1);
}

/* head h's split result from acc and l: acc / l (times v_scale where folded), or acc times
 * fp32(v_scale / l) (normalize = reciprocal: 1 for l = 0, as FlashMLA); and its lse */
static void finish_row(const emu *e, scratch *w, int64_t t, int64_t h) {
  const mlr_recipe *r = e->r;
  const float lc = fmaxf(w->l[h], e->clamp), vs = e->folded && !e->vmerged ? e->vs : 1.0f;
  const int norm = r->partial_normalized && e->fault != MLR_FAULT_P_UNNORMALIZED;
  const float inv = lc == 0.0f || lc != lc ? 1.0f : emu_div(e, vs, lc);
  for (int d = 0; d < DV; d++) {
    float v = w->acc[h * DV + d];
    if (norm && e->recip)
      v = v * inv;
    else {
      if (norm) v = emu_div(e, v, lc);
      if (e->folded && !e->vmerged) v = v * e->vs;
    }
    w->part[h * DV + d] = v;
  }
  /* the base of l's log (seesaw: 2, its m in base 2; fa2: e), and the other base's log under the
   * fault that takes it */
  const int lbase = e->seesaw ? MLR_EXP_2
                    : e->fa2  ? MLR_EXP_E
                              : (r->softmax_exp == MLR_EXP_2 ? MLR_EXP_2 : MLR_EXP_E);
  const float lg = e->fault == MLR_FAULT_LSE_LOG2
                       ? mlr__emu_log(lbase == MLR_EXP_2 ? MLR_EXP_E : MLR_EXP_2, lc)
                       : lse_log(e, lbase, lc);
  float lse;
  if (e->seesaw) /* m is the scaled max, in base 2: m + log2 l */
    lse = lc == 0.0f || lc != lc ? -INFINITY : w->m[h] + lg;
  else if (e->fa2) /* fma(c_e, m, ln l): m is a raw dot */
    lse = lc == 0.0f || lc != lc ? -INFINITY : fmaf(e->ce[t * e->H + h], w->m[h], lg);
  else
    lse = w->m[h] + lg;
  w->lse[h] = mlr__emu_lse_convert(lse,
                                   e->seesaw ? MLR_EXP_2
                                   : e->fa2  ? MLR_EXP_E
                                             : r->softmax_exp,
                                   r->lse_base);
  /* the seesaw kernel returns an unsplit row's lse as logf(l) + m / log2 e: fma(lg2 l, ln 2, fp32(m
   * ln 2)) (its div.approx by log2 e is a multiply by rcp.approx(log2 e) = fp32(ln 2) exactly) */
  w->lout[h] =
      e->seesaw && e->lg2 && r->out_lse_base == MLR_EXP_E
          ? (lc == 0.0f || lc != lc ? -INFINITY : fmaf(lg, MLR_EMU_LN2_F, w->m[h] * MLR_EMU_LN2_F))
          : out_lse(e, w->lse[h]);
  w->pm[h] = w->m[h];
  w->pl[h] = w->l[h];
}

/* softmax.schedule = seesaw (mlr_recipe.h): the kernel's constants for a masked logit and for the
 * running max's start (FlashMLA's MAX_INIT_VAL and MAX_INIT_VAL_SM) */
#define SEESAW_MASKED (-1e33f)
#define SEESAW_M0     (-1e30f)

/* the raw logits of the block of blk tokens at a, [H][blk]: the visible tokens [j0, j1), the
 * others masked; from: the QK dot's first column (qk_block) */
static void seesaw_logits(const emu *e, scratch *w, int64_t t, int64_t b, int64_t a, int64_t blk,
                          int64_t j0, int64_t j1, int x2, int f64, int from, float *sv) {
  for (int64_t k = 0; k < e->H * blk; k++) sv[k] = SEESAW_MASKED;
  if (j1 <= j0) return;
  qk_block(e, w, t, b, j0, j1, x2, f64, from);
  for (int64_t h = 0; h < e->H; h++)
    for (int64_t j = j0; j < j1; j++) sv[h * blk + (j - a)] = w->s[h * e->cap + (j - j0)];
}

/* a block's softmax for one head: the new running max *m, its alpha; p = 2^(fma(s, c, -m)) */
static float seesaw_softmax(const emu *e, float *m, const float *sv, int64_t blk, float c,
                            float *p) {
  float bm = SEESAW_MASKED;
  for (int64_t i = 0; i < blk; i++) bm = fmaxf(bm, sv[i]);
  const float mn = fmaxf(*m, bm * c), al = mlr__emu_sm_exp(e->exp_sm, e->ex2, *m - mn);
  *m = mn;
  for (int64_t i = 0; p && i < blk; i++)
    p[i] = mlr__emu_sm_exp(e->exp_sm, e->ex2, fmaf(sv[i], c, -mn));
  return al;
}

/* lane q's sum of a block: its pairs (p[8i + 2q] + p[8i + 2q + 1]) added in order from 0 */
static float seesaw_lane_sum(const float *p, int64_t blk, int q) {
  float s = 0.0f;
  for (int64_t i = 0; i < blk; i += 8) s = s + (p[i + 2 * q] + p[i + 2 * q + 1]);
  return s;
}

/* O's half (0: columns 0..255, 1: 256..511) of every head += P V over the block of blk tokens at
 * a; P [H][blk] operands; tokens outside [j0, j1) are the kernel's masked ones, p = 0 and V = 0 */
static void seesaw_pv(const emu *e, scratch *w, int64_t b, int64_t a, int64_t blk, int64_t j0,
                      int64_t j1, const float *P, int half) {
  const int pvd = e->r->pv_dot, hd = DV / 2;
  const mlr_mma_model *mv =
      MLR_DOT_IS_MMA(pvd) ? mlr_mma_get((mlr_mma_unit)MLR_DOT_MMA_UNIT(pvd)) : NULL;
  for (int64_t c0 = 0; c0 < blk; c0 += VCHUNK) {
    const int nj = (int)(blk - c0 < VCHUNK ? blk - c0 : VCHUNK);
    for (int jj = 0; jj < nj; jj++) {
      const int64_t tok = a + c0 + jj;
      if (tok >= j0 && tok < j1)
        load_row(e, e->vlut, b, tok, DV, w->vop + jj * DV);
      else
        memset(w->vop + jj * DV, 0, DV * sizeof(float));
    }
    if (mv)
      for (int k = 0; k < nj * DV; k++) w->vme[k] = mlr_mma_in_exp(mv, w->vop[k]);
    for (int64_t h = 0; h < e->H; h++) {
      const float *pp = P + h * blk + c0;
      float *acc = w->acc + h * DV + half * hd;
      if (!mv) {
        for (int d = 0; d < hd; d++)
          for (int jj = 0; jj < nj; jj++)
            acc[d] = fmaf(pp[jj], w->vop[jj * DV + half * hd + d], acc[d]);
        continue;
      }
      int pe[VCHUNK];
      for (int jj = 0; jj < nj; jj++) pe[jj] = mlr_mma_in_exp(mv, pp[jj]);
      mlr__emu_mma_lanes(mv, hd, nj, w->vop + half * hd, w->vme + half * hd, DV, pp, pe, acc,
                         w->msc, w->mS, w->mE);
    }
  }
}

/* one head's half of O (0: columns 0..255, 1: 256..511) times a */
static void scale_half(float *acc, int half, float a) {
  for (int d = 0; d < DV / 2; d++) acc[half * (DV / 2) + d] *= a;
}

/* warpgroup 0 on block k0 (logits sv0): each head's max and alpha, O's left half rescaled, p0 and
 * its operands P0, lane sums A */
static void seesaw_first(const emu *e, scratch *w, int64_t t, const float *sv0, int64_t blk,
                         float *p0, float *P0) {
  for (int64_t h = 0; h < e->H; h++) {
    const float al0 =
        seesaw_softmax(e, &w->m[h], sv0 + h * blk, blk, e->c[t * e->H + h], p0 + h * blk);
    w->alpha[h] = al0;
    scale_half(w->acc + h * DV, 0, al0);
    for (int64_t i = 0; i < blk; i++) P0[h * blk + i] = p_operand(e, p0[h * blk + i]);
    for (int q = 0; q < 4; q++)
      w->lq[4 * h + q] = fmaf(w->lq[4 * h + q], al0, seesaw_lane_sum(p0 + h * blk, blk, q));
  }
}

/* warpgroup 1 on block k1 (logits sv1; none: every logit masked): the max and alpha, O's right
 * half rescaled by fp32(a1 a0), P1, lane sums B, and block k0's P for the right half, bf16(p0 a1)
 */
static void seesaw_second(const emu *e, scratch *w, int64_t t, const float *sv1, int64_t blk,
                          int has1, const float *p0, float *p1, float *P1, float *P0s) {
  for (int64_t h = 0; h < e->H; h++) {
    const float al1 = seesaw_softmax(e, &w->m[h], sv1 + h * blk, blk, e->c[t * e->H + h],
                                     has1 ? p1 + h * blk : NULL),
                cs = al1 * w->alpha[h];
    w->al2[h] = al1;
    scale_half(w->acc + h * DV, 1, cs);
    for (int q = 0; q < 4; q++) {
      const float s1 = has1 ? seesaw_lane_sum(p1 + h * blk, blk, q) : 0.0f;
      w->lq2[4 * h + q] = fmaf(w->lq2[4 * h + q], cs, s1);
    }
    for (int64_t i = 0; i < blk; i++) {
      P1[h * blk + i] = has1 ? p_operand(e, p1[h * blk + i]) : 0.0f;
      P0s[h * blk + i] = p_operand(e, p0[h * blk + i] * al1);
    }
  }
}

/* one pair of blocks, at a0 and (has1) a0 + blk, for query token t: the two warpgroups' steps in
 * the kernel's order (mlr_recipe.h, mlr_schedule) */
static void seesaw_pair(const emu *e, scratch *w, int64_t t, int64_t b, int64_t a0, int64_t blk,
                        int has1, int64_t lo, int64_t hi, int x2, int f64) {
  const int64_t H = e->H, n = H * blk, a1 = a0 + blk;
  float *sv0 = w->ss, *sv1 = sv0 + n, *p0 = sv1 + n, *p1 = p0 + n, *P0 = p1 + n, *P1 = P0 + n,
        *P0s = P1 + n;
  const int64_t u0 = a0 > lo ? a0 : lo, v0 = a1 < hi ? a1 : hi, u1 = a1 > lo ? a1 : lo;
  const int64_t v1 = has1 ? (a1 + blk < hi ? a1 + blk : hi) : u1;
  /* the second warpgroup's logits chain the column tiles from 256 (FlashMLA's PHASE 1: tiles 4..8
   * of 64 columns, then 0..3); the first's from 0 */
  seesaw_logits(e, w, t, b, a0, blk, u0, v0, x2, f64, 0, sv0);
  seesaw_logits(e, w, t, b, a1, blk, u1, v1, x2, f64, 256, sv1);
  seesaw_first(e, w, t, sv0, blk, p0, P0);
  seesaw_pv(e, w, b, a0, blk, u0, v0, P0, 0);
  seesaw_second(e, w, t, sv1, blk, has1, p0, p1, P1, P0s);
  if (has1) seesaw_pv(e, w, b, a1, blk, u1, v1, P1, 1);
  seesaw_pv(e, w, b, a0, blk, u0, v0, P0s, 1);
  if (!has1) return;
  for (int64_t h = 0; h < H; h++) { /* warpgroup 0: its half and sums to block k1's max */
    scale_half(w->acc + h * DV, 0, w->al2[h]);
    for (int q = 0; q < 4; q++) w->lq[4 * h + q] *= w->al2[h];
  }
  seesaw_pv(e, w, b, a1, blk, u1, v1, P1, 0);
}

/* softmax.schedule = seesaw: query token t over [lo, hi) of batch b, the split ending at send
 * (its blocks are the kernel's, to ceil(send / blk), whatever the causal cut hi) */
static void run_split_row_seesaw(const emu *e, scratch *w, int64_t t, int64_t b, int64_t lo,
                                 int64_t hi, int64_t send) {
  const int64_t H = e->H, blk = e->r->softmax_block, end = send > hi ? send : hi,
                kend = (end + blk - 1) / blk; /* hi past send: the fault that reads one more */
  for (int64_t h = 0; h < H; h++) w->m[h] = SEESAW_M0;
  memset(w->lq, 0, 4 * (size_t)H * sizeof(float));
  memset(w->lq2, 0, 4 * (size_t)H * sizeof(float));
  memset(w->acc, 0, (size_t)H * DV * sizeof(float));
  const int f64 = e->qk_x && qk_f64_all(e, t);
  const int x2 = !f64 && e->x2 && e->qk_x && hi > lo && qk_split(e, w, t);
  for (int64_t k0 = lo / blk; k0 < kend; k0 += 2)
    seesaw_pair(e, w, t, b, k0 * blk, blk, k0 + 1 < kend, lo, hi, x2, f64);
  for (int64_t h = 0; h < H; h++) { /* each warpgroup's quad (xor 1, then 2), then the two */
    const float *A = w->lq + 4 * h, *B = w->lq2 + 4 * h;
    w->l[h] = ((A[0] + A[1]) + (A[2] + A[3])) + ((B[0] + B[1]) + (B[2] + B[3]));
    finish_row(e, w, t, h);
  }
}

/* one query token t over KV tokens [lo, hi) of batch b: the split's result in w->part, lse, pm,
 * pl. Blocks of softmax.block tokens from lo, or (reverse) aligned at multiples of it from the
 * batch's first token and taken from the last */
static void run_split_row(const emu *e, scratch *w, int64_t t, int64_t b, int64_t lo, int64_t hi,
                          int64_t send) {
  const mlr_recipe *r = e->r;
  if (e->seesaw) {
    run_split_row_seesaw(e, w, t, b, lo, hi, send);
    return;
  }
  const int64_t H = e->H;
  for (int64_t h = 0; h < H; h++) {
    w->m[h] = -INFINITY;
    w->l[h] = 0.0f;
  }
  memset(w->lq, 0, 4 * (size_t)H * sizeof(float));
  memset(w->acc, 0, (size_t)H * DV * sizeof(float));
  const int64_t blk = r->softmax_block > 0 ? r->softmax_block : (hi > lo ? hi - lo : 1);
  const int f64 = e->qk_x && qk_f64_all(e, t); /* every head's QK dots in one binary64 chain */
  /* ... else in two (qk_block takes one chain first) */
  const int x2 = !f64 && e->x2 && e->qk_x && hi > lo && qk_split(e, w, t);
  if (e->rev)
    for (int64_t k = hi > lo ? (hi - 1) / blk : -1; k >= 0 && k >= lo / blk; k--)
      run_block(e, w, t, b, k * blk > lo ? k * blk : lo, (k + 1) * blk < hi ? (k + 1) * blk : hi,
                blk, x2, f64);
  else
    for (int64_t j0 = lo; j0 < hi; j0 += blk)
      run_block(e, w, t, b, j0, j0 + blk < hi ? j0 + blk : hi, blk, x2, f64);
  for (int64_t h = 0; h < H; h++) {
    const float *lq = w->lq + 4 * h;
    if (e->lanes4) w->l[h] = (lq[0] + lq[2]) + (lq[1] + lq[3]); /* the quad's xor 2, then 1 */
    finish_row(e, w, t, h);
  }
}

/* o of (t, h), times v_scale in fp32 first when it enters after the merge (v.scale_at) */
static void store_o(const emu *e, int64_t t, int64_t h, const float *v) {
  mlr_emu_result *res = e->res;
  const int64_t at = (t * e->H + h) * DV;
  for (int d = 0; d < DV; d++) {
    const float x = e->vmerged ? v[d] * e->vs : v[d];
    if (res->out_format == MLR_OUT_FP32)
      ((float *)res->o)[at + d] = x;
    else
      ((uint16_t *)res->o)[at + d] = mlr__emu_out_code(x, res->out_format);
  }
}

/* the tokens a query sees under the faults that misread a length or the causal mask */
static int64_t fault_visible(int fault, int64_t b, int64_t L, int64_t Lt) {
  if (fault == MLR_FAULT_CAUSAL_SHIFT && Lt < L) return Lt + 1;
  if ((fault == MLR_FAULT_DROP_LAST || (fault == MLR_FAULT_DROP_LAST_B0 && b == 0)) && Lt == L &&
      L > 0)
    return L - 1;
  return Lt;
}

/* work item (b, s): every query token of batch b over split s */
static void run_item(const emu *e, scratch *w, int64_t b, int64_t s) {
  const mlr_inputs *in = e->in;
  mlr_emu_result *res = e->res;
  const int64_t H = e->H, t0 = in->qo_indptr[b], n = in->qo_indptr[b + 1] - t0,
                L = mlr_inputs_kv_len(in, b);
  const int64_t ns = e->nsplit[b], len = e->slen[b];
  w->pfused = e->pfa && e->r->softmax_block > 0 && L % e->r->softmax_block == 0;
  for (int64_t i = 0; i < n; i++) {
    const int64_t t = t0 + i, Lt = fault_visible(e->fault, b, L, mlr_inputs_visible(in, L, n, i));
    const int64_t first = e->sfirst[b], lo = s == 0 ? 0 : first + (s - 1) * len,
                  end = s == 0 ? first : lo + len;
    int64_t hi = end < Lt ? end : Lt;
    if (e->fault == MLR_FAULT_SKIP_LAST && hi > lo) hi--;
    const int64_t from = e->fault == MLR_FAULT_SKIP_FIRST && lo == 0 && hi > 0 ? 1 : lo;
    if (e->fault == MLR_FAULT_SPLIT_EDGE_TWICE && hi > from && hi < Lt) hi++;
    run_split_row(e, w, t, b, from, hi > from ? hi : from, end < L ? end : L);
    for (int64_t h = 0; h < H; h++) {
      if (ns == 1 && e->r->partial_normalized) {
        store_o(e, t, h, w->part + h * DV);
        /* FlashMLA writes +Inf for a row without mass that it did not split (-Inf in a split) */
        const int empty = !(w->pl[h] > 0.0f) && e->r->merge_rule == MLR_MERGE_FLASHMLA;
        res->lse[t * H + h] = empty ? INFINITY : w->lse[h];
        res->lse_out[t * H + h] = empty ? INFINITY : w->lout[h];
      }
      if (res->part_o) {
        const int64_t slot = (t * H + h) * e->S + s;
        memcpy(res->part_o + slot * DV, w->part + h * DV, DV * sizeof(float));
        res->part_lse[slot] = w->lse[h];
        res->part_max[slot] = w->pm[h];
        res->part_sum[slot] = w->pl[h];
      }
    }
  }
}

/* merge.rule = flashmla (mlr_recipe.h): FlashMLA's combine kernel, one warp over the splits */
static void merge_flashmla(const emu *e, int64_t t, int64_t h, int64_t ns, float *acc) {
  mlr_emu_result *res = e->res;
  const int64_t base = (t * e->H + h) * e->S;
  const float *ls = res->part_lse + base;
  const int b2 = e->r->lse_base == MLR_EXP_2; /* FlashMLA's bf16 combine works in base 2 */
  const int eb = b2 ? MLR_EXP_2 : e->mex2 ? MLR_EXP_E_VIA_2 : MLR_EXP_E;
  float M = -INFINITY, lane[32];
  if (e->fault == MLR_FAULT_MERGE_DROP_LAST && ns > 1) ns--;
  for (int64_t s = 0; s < ns; s++) M = fmaxf(M, ls[s]);
  if (M == -INFINITY) M = 0.0f;
  for (int i = 0; i < 32; i++) { /* lane i: splits i, i + 32, ... from 0 (0 + x is exact) */
    lane[i] = 0.0f;
    for (int64_t s = i; s < ns; s += 32)
      lane[i] = lane[i] + mlr__emu_sm_exp(eb, e->mex2, ls[s] - M);
  }
  for (int off = 16; off >= 1; off /= 2) { /* xor butterflies: every lane ends with lane 0's sum */
    float nx[32];
    for (int i = 0; i < 32; i++) nx[i] = lane[i] + lane[i ^ off];
    memcpy(lane, nx, sizeof lane);
  }
  /* M + log(sum); the fp8 combine's logf(sum) + M contracts to fma(lg2(sum), ln 2, M) */
  const float lse = lane[0] == 0.0f || lane[0] != lane[0] ? INFINITY
                    : e->lg2 && !b2 ? fmaf(mlr__sfu_lg2(e->lg2, lane[0]), MLR_EMU_LN2_F, M)
                                    : M + lse_log(e, b2 ? MLR_EXP_2 : MLR_EXP_E, lane[0]);
  memset(acc, 0, DV * sizeof(float));
  for (int64_t s = 0; s < ns; s++) {
    const float wv = mlr__emu_sm_exp(eb, e->mex2, ls[s] - lse);
    const float *part = res->part_o + (base + s) * DV;
    for (int d = 0; d < DV; d++) acc[d] = fmaf(wv, part[d], acc[d]);
  }
  store_o(e, t, h, acc);
  res->lse[t * e->H + h] = lse;
  res->lse_out[t * e->H + h] = out_lse(e, lse);
}

/* the split merge of (t, h): mlr_emulate.h */
static void merge_one(const emu *e, int64_t t, int64_t h, int64_t ns, float *acc) {
  const mlr_recipe *r = e->r;
  if (r->merge_rule == MLR_MERGE_FLASHMLA) {
    merge_flashmla(e, t, h, ns, acc);
    return;
  }
  mlr_emu_result *res = e->res;
  const int norm = r->partial_normalized;
  /* the exp2 unit takes e^x as 2^(fp32(x * fp32(log2 e))), as Triton's tl.exp */
  const int eb0 = norm ? e->exp_lse : e->exp_sm,
            eb = e->mex2 && eb0 == MLR_EXP_E ? MLR_EXP_E_VIA_2 : eb0;
  int rule = r->merge_rule;
  if (rule == MLR_MERGE_AITER) rule = ns <= 3 ? MLR_MERGE_RUNNING : MLR_MERGE_GLOBAL;
  const int64_t base = (t * e->H + h) * e->S;
  float M = -INFINITY, sum = 0.0f;
  memset(acc, 0, DV * sizeof(float));
  if (rule == MLR_MERGE_GLOBAL)
    for (int64_t s = 0; s < ns; s++) {
      const float x = norm ? res->part_lse[base + s] : res->part_max[base + s];
      if (x > MLR_EMU_SKIP_BELOW) M = fmaxf(M, x);
    }
  const int64_t used = e->fault == MLR_FAULT_MERGE_DROP_LAST && ns > 1 ? ns - 1 : ns;
  for (int64_t s = 0; s < used; s++) {
    const float x = norm ? res->part_lse[base + s] : res->part_max[base + s];
    if (!(x > MLR_EMU_SKIP_BELOW)) continue;
    const float mass = norm ? 1.0f : res->part_sum[base + s];
    const float *part = res->part_o + (base + s) * DV;
    if (rule == MLR_MERGE_RUNNING) {
      const float Mn = fmaxf(M, x);
      const float a = e->fault == MLR_FAULT_MERGE_NO_RESCALE ? 1.0f
                                                             : mlr__emu_sm_exp(eb, e->mex2, M - Mn),
                  wv = mlr__emu_sm_exp(eb, e->mex2, x - Mn);
      for (int d = 0; d < DV; d++) acc[d] = mlr__emu_upd(acc[d], a, part[d] * wv, e->fused);
      sum = mlr__emu_upd(sum, a, mass * wv, e->fused);
      M = Mn;
    } else {
      const float wv = mlr__emu_sm_exp(eb, e->mex2, x - M);
      for (int d = 0; d < DV; d++)
        acc[d] = e->fused ? fmaf(part[d], wv, acc[d]) : acc[d] + part[d] * wv;
      sum = e->fused ? fmaf(mass, wv, sum) : sum + mass * wv;
    }
  }
  const float sc = fmaxf(sum, e->clamp);
  for (int d = 0; d < DV; d++) acc[d] = mlr__emu_div(e->rcp, acc[d], sc);
  store_o(e, t, h, acc);
  /* units of M */
  const int ub = norm ? r->lse_base : (r->softmax_exp == MLR_EXP_2 ? MLR_EXP_2 : MLR_EXP_E);
  float lse = M + lse_log(e, ub, sc);
  if (!norm)
    lse = mlr__emu_lse_convert(lse, r->softmax_exp, r->lse_base); /* M in the softmax's units */
  res->lse[t * e->H + h] = lse;
  res->lse_out[t * e->H + h] = out_lse(e, lse);
}

void mlr_emu_result_free(mlr_emu_result *res) {
  if (!res) return;
  void *const owned[] = {res->o,         res->lse,     res->lse_out,  res->split_count,
                         res->split_len, res->part_o,  res->part_lse, res->part_max,
                         res->part_sum,  res->q_scales};
  for (size_t k = 0; k < sizeof owned / sizeof owned[0]; k++) free(owned[k]);
  memset(res, 0, sizeof *res);
}

/* a * b * c elements of size sz, or 0 on overflow */
static size_t nbytes3(int64_t a, int64_t b, int64_t c, size_t sz) {
  if (a < 0 || b < 0 || c < 0) return 0;
  const double est = (double)a * (double)b * (double)c * (double)sz;
  if (est > 1e18) return 0;
  return (size_t)a * (size_t)b * (size_t)c * sz;
}

mlr_status mlr_emu_check_fit(const mlr_recipe *r, const mlr_inputs *in, mlr_error *err) {
  mlr_status st = mlr_recipe_check(r, err);
  if (st != MLR_OK) return st;
  const int kv8 = in->kv_format != MLR_FMT_BF16;
  if (in->kv_format != MLR_FMT_E4M3 && in->kv_format != MLR_FMT_E4M3FNUZ && kv8)
    return mlr_error_set(err, MLR_EINVAL, "kv format %d is not e4m3, e4m3fnuz or bf16",
                         in->kv_format);
  if (!kv8 && (r->qk_operand == MLR_OP_FP8 || r->pv_operand == MLR_OP_FP8))
    return mlr_error_set(
        err, MLR_EINVAL,
        "recipe '%s' multiplies fp8 KV codes (%s.operand = fp8) but the inputs' kv is bf16",
        r->name, r->qk_operand == MLR_OP_FP8 ? "qk" : "pv");
  for (int side = 0; side < 2; side++) { /* an fp8 matrix unit multiplies one fp8 flavour */
    const int d = side ? r->pv_dot : r->qk_dot;
    if (d != MLR_DOT_MMA_SM90_E4M3 && d != MLR_DOT_MMA_CDNA3_FP8 && d != MLR_DOT_MMA_SM90_E4M3_SYNC)
      continue;
    const int want = d == MLR_DOT_MMA_CDNA3_FP8 ? MLR_FMT_E4M3FNUZ : MLR_FMT_E4M3;
    if (in->kv_format != want)
      return mlr_error_set(
          err, MLR_EINVAL,
          "recipe '%s': %s.dot = mma:%s multiplies %s codes, but the inputs' kv is %s", r->name,
          side ? "pv" : "qk", mlr_mma_get((mlr_mma_unit)MLR_DOT_MMA_UNIT(d))->name,
          mlr_format_name((mlr_format)want), mlr_format_name((mlr_format)in->kv_format));
    if (!side && in->q8 && in->q_format != want)
      return mlr_error_set(err, MLR_EINVAL,
                           "recipe '%s': qk.dot = mma:%s multiplies %s codes, but the inputs' fp8 "
                           "q is %s",
                           r->name, mlr_mma_get((mlr_mma_unit)MLR_DOT_MMA_UNIT(d))->name,
                           mlr_format_name((mlr_format)want),
                           mlr_format_name((mlr_format)in->q_format));
  }
  if (in->H < 1 || in->T < 1 || in->B < 1)
    return mlr_error_set(err, MLR_EINVAL, "inputs have no query tokens or heads");
  if (r->kv_scale_at == MLR_KVS_FOLDED && mlr_inputs_kpe_scale(in) != mlr_inputs_k_scale(in))
    return mlr_error_set(err, MLR_EINVAL,
                         "recipe '%s' folds k_scale into the logit scale (kv.scale_at = folded), "
                         "which needs kpe_scale = k_scale; these inputs have %g and %g: use "
                         "kv.scale_at = operand",
                         r->name, (double)mlr_inputs_kpe_scale(in), (double)mlr_inputs_k_scale(in));
  return MLR_OK;
}

/* the recipe's settings every row reads, with the faults that misuse kv_scale applied here */
static void emu_init(emu *e, const mlr_recipe *r, const mlr_inputs *in, const mlr_emu_opts *opts) {
  memset(e, 0, sizeof *e);
  e->r = r;
  e->in = in;
  e->H = in->H;
  e->kv8 = in->kv_format != MLR_FMT_BF16;
  e->folded = r->kv_scale_at == MLR_KVS_FOLDED;
  e->vmerged = r->v_scale_at == MLR_VS_MERGED;
  e->qfp8 = r->q_format != MLR_Q_BF16 || in->q8; /* pre-quantized Q is fp8 whatever the recipe */
  e->fused = r->update_fma;
  e->fault = opts ? opts->fault : 0;
  float sc[3] = {mlr_inputs_k_scale(in), mlr_inputs_kpe_scale(in), mlr_inputs_v_scale(in)};
  for (int k = 0; k < 3; k++) { /* the faults that misuse the scales change them here, every use */
    if (e->fault == MLR_FAULT_KV_SCALE_TWICE) sc[k] = sc[k] * sc[k];
    if (e->fault == MLR_FAULT_KV_SCALE_NONE) sc[k] = 1.0f;
  }
  e->ks = sc[0];
  e->kps = sc[1];
  e->vs = sc[2];
  e->clamp = (float)r->softmax_clamp; /* 1e-12 -> 0x2B8CBCCC, the constant in the seeds' PTX */
  e->exp_sm = r->softmax_exp;
  e->fa2 = r->softmax_form == MLR_SMF_FA2;
  e->pfa = r->softmax_form == MLR_SMF_FUSED_ALIGNED;
  e->rev = r->softmax_order == MLR_ORDER_REVERSE;
  e->lanes4 = r->softmax_sum == MLR_SUM_LANES4;
  e->recip = r->normalize == MLR_NORM_RECIPROCAL;
  e->seesaw = r->softmax_schedule == MLR_SCHED_SEESAW;
  e->exp_lse = r->lse_base == MLR_EXP_2
                   ? MLR_EXP_2
                   : (r->softmax_exp == MLR_EXP_E_VIA_2 ? MLR_EXP_E_VIA_2 : MLR_EXP_E);
}

mlr_status mlr_emu_split_plan(const mlr_recipe *r, const mlr_inputs *in, int64_t *ns,
                              int64_t *first, int64_t *len) {
  int64_t *lens = calloc((size_t)in->B, sizeof(int64_t)), qmax = 1;
  if (!lens) return MLR_ENOMEM;
  for (int64_t b = 0; b < in->B; b++) {
    lens[b] = mlr_inputs_kv_len(in, b);
    const int64_t nq = in->qo_indptr[b + 1] - in->qo_indptr[b];
    if (nq > qmax) qmax = nq;
  }
  mlr_recipe_split_plan(r, in->B, in->T, in->H, lens, qmax * in->H, ns, first, len);
  free(lens);
  return MLR_OK;
}

/* each batch's splits (mlr_emu_split_plan) into e and res; e->S the most splits, e->cap the
 * longest block, *items the number of (batch, split) work items */
static mlr_status plan_splits(emu *e, mlr_emu_result *res, int64_t *items, mlr_error *err) {
  const mlr_recipe *r = e->r;
  const mlr_inputs *in = e->in;
  const int64_t B = in->B;
  e->nsplit = calloc((size_t)B, sizeof(int64_t));
  e->slen = calloc((size_t)B, sizeof(int64_t));
  e->sfirst = calloc((size_t)B, sizeof(int64_t));
  res->split_count = calloc((size_t)B, sizeof(int32_t));
  res->split_len = calloc((size_t)B, sizeof(int32_t));
  if (!e->nsplit || !e->slen || !e->sfirst || !res->split_count || !res->split_len ||
      mlr_emu_split_plan(r, in, e->nsplit, e->sfirst, e->slen) != MLR_OK)
    return MLR_ENOMEM;
  int64_t S = 1, cap = 1, n = 0;
  for (int64_t b = 0; b < B; b++) {
    const int64_t L = mlr_inputs_kv_len(in, b);
    if (e->nsplit[b] > S) S = e->nsplit[b];
    /* a split reads slen tokens at most; one more under the fault that reads its end twice */
    const int64_t most = e->slen[b] > e->sfirst[b] ? e->slen[b] : e->sfirst[b];
    const int64_t slen = most + (e->fault == MLR_FAULT_SPLIT_EDGE_TWICE);
    const int64_t span = slen < L ? slen : L;
    if (span > cap) cap = span;
    if (e->nsplit[b] > INT32_MAX || e->slen[b] > INT32_MAX)
      return mlr_error_set(err, MLR_ERANGE,
                           "batch %lld: %lld splits of %lld tokens do not fit int32", (long long)b,
                           (long long)e->nsplit[b], (long long)e->slen[b]);
    res->split_count[b] = (int32_t)e->nsplit[b];
    res->split_len[b] = (int32_t)e->slen[b];
    n += e->nsplit[b];
  }
  if (r->softmax_block > 0 && r->softmax_block < cap) cap = r->softmax_block;
  e->S = S;
  e->cap = cap;
  e->res = res;
  *items = n;
  return MLR_OK;
}

/* which exact dots run in binary64 (fast) and which in the long accumulator */
static void choose_dots(emu *e, const mlr_emu_opts *opts) {
  const mlr_recipe *r = e->r;
  e->qk_fast = r->qk_dot == MLR_DOT_EXACT && e->qfp8 && e->kv8 && e->folded;
  e->qk_x = r->qk_dot == MLR_DOT_EXACT && !e->qk_fast;
  e->pv_fast = r->pv_dot == MLR_DOT_EXACT &&
               (r->p_format == MLR_P_E4M3 || r->p_format == MLR_P_E4M3FNUZ) && e->kv8 &&
               e->folded && r->pv_accumulate == MLR_PV_BLOCK && e->cap < (1 << 24);
  e->pv_x = r->pv_dot == MLR_DOT_EXACT && !e->pv_fast;
  e->x2 = !(opts && opts->no_x2);
}

/* the outputs, and the partials (keep_parts) with NaN in the slots past a batch's split count */
static mlr_status alloc_outputs(const emu *e, mlr_emu_result *res, int keep_parts, mlr_error *err) {
  const int64_t T = res->T, H = res->H, S = res->S;
  const size_t osz = e->r->out_format == MLR_OUT_FP32 ? 4 : 2;
  const size_t ob = nbytes3(T, H, DV, osz), pb = nbytes3(T * H, S, DV, sizeof(float));
  if (!ob || (keep_parts && !pb))
    return mlr_error_set(err, MLR_ERANGE, "output size overflows (T=%lld, H=%lld, splits=%lld)",
                         (long long)T, (long long)H, (long long)S);
  res->o = malloc(ob);
  res->lse = malloc((size_t)(T * H) * sizeof(float));
  res->lse_out = malloc((size_t)(T * H) * sizeof(float));
  if (!res->o || !res->lse || !res->lse_out) return MLR_ENOMEM;
  if (!keep_parts) return MLR_OK;
  res->part_o = malloc(pb);
  res->part_lse = malloc((size_t)(T * H * S) * sizeof(float));
  res->part_max = malloc((size_t)(T * H * S) * sizeof(float));
  res->part_sum = malloc((size_t)(T * H * S) * sizeof(float));
  if (!res->part_o || !res->part_lse || !res->part_max || !res->part_sum) return MLR_ENOMEM;
  const float qnan = mlr_bits_f32(0x7FC00000u); /* slots past a batch's split count */
  for (size_t k = 0; k < pb / sizeof(float); k++) res->part_o[k] = qnan;
  for (int64_t k = 0; k < T * H * S; k++)
    res->part_lse[k] = res->part_max[k] = res->part_sum[k] = qnan;
  return MLR_OK;
}

/* each row's logit scale c into c ([T*H]; qs: the rows' Q scales): fp32(sm_scale [* log2 e])
 * then * q_scale, * k_scale in fp32 (sm_scale a binary32 first under fp32_arg), or the whole
 * product in binary64 rounded once (logit.scale_precision) */
static void logit_scales(const emu *e, const float *qs, float *c, int natural) {
  const mlr_recipe *r = e->r;
  const double sm =
      e->fault == MLR_FAULT_SM_SCALE_512 ? 1.0 / sqrt(512.0) : mlr_inputs_sm_scale(e->in);
  const double c0 =
      mlr__emu_logit_c0(r->logit_scale_prec, sm, r->softmax_exp == MLR_EXP_2 && !natural);
  for (int64_t k = 0; k < e->in->T * e->H; k++) {
    if (r->logit_scale_prec == MLR_SP_FP64) {
      double cd = c0;
      if (e->qfp8) cd = cd * (double)qs[k];
      if (e->folded) cd = cd * (double)e->ks;
      c[k] = (float)cd;
    } else {
      float cf = (float)c0;
      if (e->qfp8) cf = cf * qs[k];
      if (e->folded) cf = cf * e->ks;
      c[k] = cf;
    }
  }
}

/* Q's values as operands, transposed to [T][576][H], and each row's logit scale */
static mlr_status q_operands(emu *e, mlr_emu_result *res, mlr_error *err) {
  const mlr_recipe *r = e->r;
  const int64_t T = e->in->T, H = e->H;
  const size_t qb = nbytes3(T * H, QK, 1, sizeof(float));
  if (!qb)
    return mlr_error_set(err, MLR_ERANGE, "Q size overflows (T=%lld, H=%lld)", (long long)T,
                         (long long)H);
  float *qval = malloc(qb), *qs = malloc((size_t)(T * H) * sizeof(float));
  e->qT = malloc(qb);
  e->c = malloc((size_t)(T * H) * sizeof(float));
  if (e->fa2) e->ce = malloc((size_t)(T * H) * sizeof(float));
  mlr_status st = MLR_ENOMEM;
  if (qval && qs && e->qT && e->c && (!e->fa2 || e->ce))
    st = mlr_emu_q_values(r, e->in, qval, qs, &res->q_scales, &res->n_q_scales, &res->q_clipped);
  if (st != MLR_OK) {
    free(qval);
    free(qs);
    return st;
  }
  logit_scales(e, qs, e->c, 0);
  if (e->fa2) logit_scales(e, qs, e->ce, 1); /* the lse's: FlashMLA's scale_softmax */
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < H; h++) {
      for (int p = 0; p < QK; p++) {
        const int i = e->k4 ? mlr__emu_k4_index(p) : p; /* load_k_row's order */
        e->qT[(t * QK + p) * H + h] =
            e->fault == MLR_FAULT_DROP_ROPE && i >= NOPE
                ? 0.0f
                : mlr__emu_to_operand(qval[(t * H + h) * QK + i], r->qk_operand);
      }
    }
  free(qval);
  free(qs);
  return MLR_OK;
}

/* the range of each Q row, for exact_dot (exact QK, general) */
static mlr_status q_ranges(emu *e) {
  const int64_t TH = e->in->T * e->H, H = e->H;
  e->qlsb = malloc((size_t)TH * sizeof(int));
  e->qtop = malloc((size_t)TH * sizeof(int));
  if (!e->qlsb || !e->qtop) return MLR_ENOMEM;
  for (int64_t k = 0; k < TH; k++) {
    const float *row = e->qT + (k / H) * QK * H + k % H;
    mlr_f32_range(row, QK, H, &e->qlsb[k], &e->qtop[k]);
    for (int i = 0; i < QK; i++)
      if (!isfinite(row[i * H])) e->qtop[k] = INT_MAX;
  }
  return MLR_OK;
}

/* KV code -> operand tables, and the range of every finite K and V operand in them */
static mlr_status kv_tables(emu *e) {
  const size_t nl = e->kv8 ? 256 : 65536;
  e->klut = malloc(nl * sizeof(float));
  e->kplut = malloc(nl * sizeof(float));
  e->vlut = malloc(nl * sizeof(float));
  if (!e->klut || !e->kplut || !e->vlut) return MLR_ENOMEM;
  const int op = !e->folded; /* the scales go into the operands */
  for (size_t k = 0; k < nl; k++) {
    const float v = mlr_decode((mlr_format)e->in->kv_format, (uint32_t)k);
    e->klut[k] = mlr__emu_to_operand(op ? v * e->ks : v, e->r->qk_operand);
    e->kplut[k] = mlr__emu_to_operand(op ? v * e->kps : v, e->r->qk_operand);
    e->vlut[k] = mlr__emu_to_operand(op && !e->vmerged ? v * e->vs : v, e->r->pv_operand);
  }
  e->vlsb = 1000; /* the range of every finite V operand (exact PV, general), and of K */
  e->vtop = -1000;
  e->klsb = 1000;
  e->ktop = -1000;
  for (size_t k = 0; k < nl; k++) {
    if (isfinite(e->vlut[k])) mlr_f32_range_add(e->vlut[k], &e->vlsb, &e->vtop);
    if (isfinite(e->klut[k])) mlr_f32_range_add(e->klut[k], &e->klsb, &e->ktop);
    if (isfinite(e->kplut[k])) mlr_f32_range_add(e->kplut[k], &e->klsb, &e->ktop);
  }
  return MLR_OK;
}

/* the work items (b, s) on the threads, then the merges (merge_all: every batch's) */
static mlr_status run_all(const emu *e, const mlr_emu_opts *opts, int64_t items, int merge_all) {
  const int64_t B = e->in->B, H = e->H;
  int64_t *it = malloc((size_t)items * 2 * sizeof(int64_t));
  if (!it) return MLR_ENOMEM;
  for (int64_t b = 0, k = 0; b < B; b++)
    for (int64_t s = 0; s < e->nsplit[b]; s++, k++) {
      it[2 * k] = b;
      it[2 * k + 1] = s;
    }
  int nt = mlr_threads(opts ? opts->threads : 0);
  if (nt > items) nt = (int)items;
  scratch *ws = calloc((size_t)nt, sizeof *ws);
  int ok = ws != NULL;
  for (int k = 0; ok && k < nt; k++)
    if (!scratch_alloc(&ws[k], e)) {
      for (int j = 0; j < k; j++) scratch_free(&ws[j]);
      ok = 0;
    }
  if (!ok) {
    free(ws);
    free(it);
    return MLR_ENOMEM;
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (int64_t k = 0; k < items; k++) {
    int tid = 0;
#ifdef _OPENMP
    tid = omp_get_thread_num();
#endif
    run_item(e, &ws[tid], it[2 * k], it[2 * k + 1]);
  }
  if (e->S > 1 || merge_all) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
    for (int64_t b = 0; b < B; b++) {
      if (e->nsplit[b] < 2 && !merge_all) continue;
      int tid = 0;
#ifdef _OPENMP
      tid = omp_get_thread_num();
#endif
      for (int64_t t = e->in->qo_indptr[b]; t < e->in->qo_indptr[b + 1]; t++)
        for (int64_t h = 0; h < H; h++) merge_one(e, t, h, e->nsplit[b], ws[tid].part);
    }
  }
  for (int k = 0; k < nt; k++) scratch_free(&ws[k]);
  free(ws);
  free(it);
  return MLR_OK;
}

static void free_partials(mlr_emu_result *res) {
  free(res->part_o);
  free(res->part_lse);
  free(res->part_max);
  free(res->part_sum);
  res->part_o = res->part_lse = res->part_max = res->part_sum = NULL;
}

/* the hardware units' tables the recipe names (ref/sfu), and lse.log */
static mlr_status load_units(emu *e, mlr_error *err) {
  const mlr_recipe *r = e->r;
  const uint32_t *g = NULL;
  mlr_status st;
  const int sm = r->softmax_exp_unit == MLR_EXPU_SM90_EX2,
            mg = r->merge_exp_unit == MLR_EXPU_SM90_EX2;
  if ((sm || mg) && (st = mlr_sfu_ex2_table(&g, err)) != MLR_OK) return st;
  e->ex2 = sm ? g : NULL;
  e->mex2 = mg ? g : NULL;
  if (r->div_unit != MLR_DIV_IEEE && (st = mlr_sfu_rcp_table(&e->rcp, err)) != MLR_OK) return st;
  if (r->lse_log == MLR_LOG_SM90_LG2 && (st = mlr_sfu_lg2_table(&e->lg2, err)) != MLR_OK) return st;
  e->dapprox = r->div_unit == MLR_DIV_SM90_APPROX;
  e->logc = r->lse_log == MLR_LOG_CUDA_LOGF;
  /* Triton's order: fp8 KV only (mlr_korder) */
  const int k4 = r->dot_korder == MLR_KORDER_TRITON && e->kv8;
  e->k4 = k4 && MLR_DOT_IS_MMA(r->qk_dot);
  e->k4pv = k4 && MLR_DOT_IS_MMA(r->pv_dot);
  return MLR_OK;
}

mlr_status mlr_emulate(const mlr_recipe *r, const mlr_inputs *in, const mlr_emu_opts *opts,
                       mlr_emu_result *res, mlr_error *err) {
  memset(res, 0, sizeof *res);
  mlr_status st = mlr_emu_check_fit(r, in, err);
  if (st != MLR_OK) return st;
  emu e;
  emu_init(&e, r, in, opts);
  if ((st = load_units(&e, err)) != MLR_OK) return st;
  int64_t items = 0;
  if ((st = plan_splits(&e, res, &items, err)) != MLR_OK) goto out;
  res->T = in->T;
  res->H = in->H;
  res->B = in->B;
  res->S = e.S;
  res->out_format = r->out_format;
  choose_dots(&e, opts);
  /* raw partials are divided by l only in the merge */
  const int merge_all = !r->partial_normalized;
  const int keep_parts = e.S > 1 || merge_all || (opts && opts->partials);
  if ((st = alloc_outputs(&e, res, keep_parts, err)) != MLR_OK) goto out;
  if ((st = q_operands(&e, res, err)) != MLR_OK) goto out;
  if (e.qk_x && (st = q_ranges(&e)) != MLR_OK) goto out;
  if ((st = kv_tables(&e)) != MLR_OK) goto out;
  if ((st = run_all(&e, opts, items, merge_all)) != MLR_OK) goto out;
  if (!(opts && opts->partials)) free_partials(res);
out:
  free(e.nsplit);
  free(e.slen);
  free(e.sfirst);
  free(e.ce);
  free(e.klut);
  free(e.kplut);
  free(e.vlut);
  free(e.qT);
  free(e.c);
  free(e.qlsb);
  free(e.qtop);
  if (st != MLR_OK) {
    if (st == MLR_ENOMEM && err)
      mlr_error_set(err, MLR_ENOMEM, "out of memory for the model's buffers");
    mlr_emu_result_free(res);
  }
  return st;
}
