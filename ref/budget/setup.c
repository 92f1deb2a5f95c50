/* The set-up of the switchable model (budget_internal.h): Q values by the policy, the logit scale,
 * the K and V operand tables and the splits, each with its rounding steps switched by source. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_emulate.h"
#include "mlr_formats.h"
#include "mlr_exact.h"
#include "mlr_sfu.h"
#include "budget_internal.h"

#define QK      MLR_EMU_QK_DIM
#define LOG2E_D 0x1.71547652b82fep+0

int mlr_source_present(const mlr_recipe *r, const mlr_inputs *in, int s) {
  switch (s) {
  case MLR_SRC_Q:
    return r->q_format != MLR_Q_BF16;
  case MLR_SRC_KV:
    return in->kv_format != MLR_FMT_BF16;
  case MLR_SRC_OPERAND: /* fp32 operands of fp32 products still round value x kv_scale */
    return r->qk_operand == MLR_OP_FP16 || r->qk_operand == MLR_OP_BF16 ||
           r->pv_operand == MLR_OP_FP16 || r->pv_operand == MLR_OP_BF16 ||
           r->kv_scale_at == MLR_KVS_OPERAND;
  case MLR_SRC_P:
    return r->p_format != MLR_P_FP32;
  case MLR_SRC_MERGE: {
    for (int64_t b = 0; b < in->B; b++) {
      int64_t ns, len;
      mlr_recipe_splits(r, in->B, in->T, mlr_inputs_kv_len(in, b), &ns, &len);
      if (ns > 1 || !r->partial_normalized) return 1;
    }
    return 0;
  }
  case MLR_SRC_ACCUM:
  case MLR_SRC_EXP:
  case MLR_SRC_OUTPUT:
    return 1;
  default:
    return 0;
  }
}

void mlr__shadow_free(mlr__shadow *sh) {
  void *const owned[] = {sh->q,    sh->qreal,  sh->c,    sh->qs, sh->klut,
                         sh->vlut, sh->nsplit, sh->slen, sh->tb};
  for (size_t k = 0; k < sizeof owned / sizeof owned[0]; k++) free(owned[k]);
  memset(sh, 0, sizeof *sh);
}

mlr_status mlr__shadow_init(mlr__shadow *sh, const mlr_recipe *r, const mlr_inputs *in,
                            unsigned rounded, mlr_error *err) {
  memset(sh, 0, sizeof *sh);
  /* the model's own test: the recipe, and whether it fits the inputs */
  mlr_status st = mlr_emu_check_fit(r, in, err);
  if (st != MLR_OK) return st;
  const int kv8 = in->kv_format != MLR_FMT_BF16;
  if (kv8 && !(rounded & (1u << MLR_SRC_KV)) && !in->kv_bf16)
    return mlr_error_set(
        err, MLR_EINVAL,
        "the inputs have no kv_bf16 (the unquantized KV): the kv_quant source cannot be measured "
        "(generate with bf16kv=1)");
  const int op = (rounded >> MLR_SRC_OPERAND) & 1u, acc = (rounded >> MLR_SRC_ACCUM) & 1u,
            qon = (rounded >> MLR_SRC_Q) & 1u;
  sh->r = r;
  sh->in = in;
  sh->on = rounded;
  sh->H = in->H;
  sh->use_bf16 = kv8 && !(rounded & (1u << MLR_SRC_KV));
  sh->folded = r->kv_scale_at == MLR_KVS_FOLDED;
  sh->exp_sm = r->softmax_exp;
  sh->exp_lse = r->lse_base == MLR_EXP_2
                    ? MLR_EXP_2
                    : (r->softmax_exp == MLR_EXP_E_VIA_2 ? MLR_EXP_E_VIA_2 : MLR_EXP_E);
  if (r->softmax_exp_unit == MLR_EXPU_SM90_EX2 && (st = mlr_sfu_ex2_table(&sh->ex2, err)) != MLR_OK)
    return st;
  sh->kvs = (double)in->kv_scale;
  sh->clamp = (double)(float)r->softmax_clamp;
  const int64_t T = in->T, H = in->H, B = in->B, n = T * H;
  sh->nsplit = calloc((size_t)B, sizeof(int64_t));
  sh->slen = calloc((size_t)B, sizeof(int64_t));
  sh->tb = calloc((size_t)T, sizeof(int64_t));
  sh->q = malloc((size_t)n * QK * sizeof(double));
  sh->qreal = malloc((size_t)n * QK * sizeof(double));
  sh->c = malloc((size_t)n * sizeof(double));
  sh->qs = malloc((size_t)n * sizeof(double));
  const size_t nl = (kv8 && !sh->use_bf16) ? 256 : 65536;
  sh->klut = malloc(nl * sizeof(double));
  sh->vlut = malloc(nl * sizeof(double));
  float *qv = malloc((size_t)n * QK * sizeof(float)), *qs = malloc((size_t)n * sizeof(float)),
        *scales = NULL;
  st = MLR_ENOMEM;
  if (!sh->nsplit || !sh->slen || !sh->tb || !sh->q || !sh->qreal || !sh->c || !sh->qs ||
      !sh->klut || !sh->vlut || !qv || !qs)
    goto fail;
  /* splits and blocks, as the model cuts them */
  sh->S = 1;
  sh->cap = 1;
  for (int64_t b = 0; b < B; b++) {
    const int64_t L = mlr_inputs_kv_len(in, b);
    mlr_recipe_splits(r, B, T, L, &sh->nsplit[b], &sh->slen[b]);
    if (sh->nsplit[b] > sh->S) sh->S = sh->nsplit[b];
    const int64_t span = sh->slen[b] < L ? sh->slen[b] : L;
    if (span > sh->cap) sh->cap = span;
    for (int64_t t = in->qo_indptr[b]; t < in->qo_indptr[b + 1]; t++) sh->tb[t] = b;
  }
  if (r->softmax_block > 0 && r->softmax_block < sh->cap) sh->cap = r->softmax_block;
  /* Q: the policy's values (q_quant on) or the bf16 values (off) */
  mlr_recipe rq = *r;
  if (!qon) rq.q_format = MLR_Q_BF16;
  int64_t nsc = 0;
  if ((st = mlr_emu_q_values(&rq, in, qv, qs, &scales, &nsc, &sh->q_clipped)) != MLR_OK) goto fail;
  free(scales);
  const int qfp8 = rq.q_format != MLR_Q_BF16;
  /* as mlr_emulate */
  const double c0 = r->softmax_exp == MLR_EXP_2 ? (1.0 / 24.0) * LOG2E_D : 1.0 / 24.0;
  for (int64_t k = 0; k < n; k++) {
    double c = acc ? (double)(float)c0 : c0;
    if (qfp8) c = acc ? (double)((float)c * qs[k]) : c * (double)qs[k];
    if (sh->folded) c = acc ? (double)((float)c * (float)sh->kvs) : c * sh->kvs;
    sh->c[k] = c;
    sh->qs[k] = qs[k];
    for (int i = 0; i < QK; i++) {
      sh->q[k * QK + i] = mlr__to_operand(op, (double)qv[k * QK + i], r->qk_operand);
      sh->qreal[k * QK + i] = (double)qv[k * QK + i] * (double)qs[k];
    }
  }
  /* K and V operands by code: the fp8 (or bf16 KV) codes' values, or the bf16 originals */
  for (size_t k = 0; k < nl; k++) {
    double v;
    if (sh->use_bf16) {
      v = (double)mlr_decode(MLR_FMT_BF16, (uint32_t)k); /* the real value */
      if (sh->folded) v = v / sh->kvs;                   /* in the units of the codes */
    } else {
      v = (double)mlr_decode((mlr_format)in->kv_format, (uint32_t)k);
      if (!sh->folded)
        v = op ? (double)(float)(v * sh->kvs) : v * sh->kvs; /* fp32(value x kv_scale) */
    }
    sh->klut[k] = mlr__to_operand(op, v, r->qk_operand);
    sh->vlut[k] = mlr__to_operand(op, v, r->pv_operand);
  }
  /* the ranges of the tables' values: with them one test per block shows an exact dot exact in
   * binary64 (the emulator's vlsb/vtop) */
  sh->kv_range_ok = 1;
  sh->klsb = sh->vlsb = 1000;
  sh->ktop = sh->vtop = -1000;
  for (size_t k = 0; k < nl; k++) {
    const double kv[2] = {sh->klut[k], sh->vlut[k]};
    for (int w = 0; w < 2; w++) {
      if (!isfinite(kv[w])) continue;
      if ((double)(float)kv[w] != kv[w]) sh->kv_range_ok = 0;
      mlr_f32_range_add((float)kv[w], w ? &sh->vlsb : &sh->klsb, w ? &sh->vtop : &sh->ktop);
    }
  }
  free(qv);
  free(qs);
  return MLR_OK;
fail:
  free(qv);
  free(qs);
  mlr__shadow_free(sh);
  if (st == MLR_ENOMEM) mlr_error_set(err, MLR_ENOMEM, "out of memory for the switchable model");
  return st;
}
