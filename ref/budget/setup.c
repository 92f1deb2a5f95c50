/* The set-up of the switchable model (budget_internal.h): Q values by the policy, the logit scale,
 * the K and V operand tables and the splits, each with its rounding steps switched by source. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_emu_ops.h"
#include "mlr_emulate.h"
#include "mlr_formats.h"
#include "mlr_exact.h"
#include "mlr_sfu.h"
#include "budget_internal.h"

#define QK MLR_EMU_QK_DIM

int mlr_source_present(const mlr_recipe *r, const mlr_inputs *in, int s) {
  switch (s) {
  case MLR_SRC_Q: /* fp8 Q given as codes (q8) is not quantized: its values are the truth's */
    return r->q_format != MLR_Q_BF16 && !in->q8;
  case MLR_SRC_KV:
    return in->kv_format != MLR_FMT_BF16;
  case MLR_SRC_OPERAND: /* fp32 operands of fp32 products still round value x k_scale */
    return r->qk_operand == MLR_OP_FP16 || r->qk_operand == MLR_OP_BF16 ||
           r->pv_operand == MLR_OP_FP16 || r->pv_operand == MLR_OP_BF16 ||
           r->kv_scale_at == MLR_KVS_OPERAND;
  case MLR_SRC_P:
    return r->p_format != MLR_P_FP32;
  case MLR_SRC_MERGE: {
    for (int64_t b = 0; b < in->B; b++) {
      int64_t ns, len;
      mlr_recipe_splits(r, in->B, in->T, in->H, mlr_inputs_kv_len(in, b), &ns, &len);
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
  void *const owned[] = {sh->q,     sh->qreal,  sh->c,    sh->qs, sh->klut,
                         sh->kplut, sh->nsplit, sh->slen, sh->tb, sh->vlut};
  for (size_t k = 0; k < sizeof owned / sizeof owned[0]; k++) free(owned[k]);
  memset(sh, 0, sizeof *sh);
}

/* Q values and scales (qv, qs: binary32, [T*H][576] and [T*H]): the inputs' fp8 codes (q8; no
 * quantization step, the scale q_scale), or the policy's values (q_quant on) or the bf16 values
 * (off); then the Q operands, Q's real values and the logit scale c of each row */
static mlr_status q_setup(mlr__shadow *sh, const mlr_recipe *r, const mlr_inputs *in, int qon,
                          float *qv, float *qs) {
  const int64_t n = in->T * in->H;
  const int op = (sh->on >> MLR_SRC_OPERAND) & 1u, acc = (sh->on >> MLR_SRC_ACCUM) & 1u;
  if (in->q8) {
    for (int64_t k = 0; k < n * QK; k++) qv[k] = mlr_decode((mlr_format)in->q_format, in->q8[k]);
    for (int64_t k = 0; k < n; k++) qs[k] = in->q_scale;
    sh->cq = 1;
  } else {
    mlr_recipe rq = *r;
    if (!qon) rq.q_format = MLR_Q_BF16;
    float *scales = NULL;
    int64_t nsc = 0;
    const mlr_status st = mlr_emu_q_values(&rq, in, qv, qs, &scales, &nsc, &sh->q_clipped);
    free(scales);
    if (st != MLR_OK) return st;
    sh->cq = rq.q_format != MLR_Q_BF16;
  }
  /* as mlr_emulate: fp32(sm [x log2 e]) then x q_scale, x k_scale in binary32 (logit.scale_
   * precision = fp32; fp32_arg: sm a binary32 first), or the product in binary64 rounded once
   * (fp64); exact with accumulation off */
  const double sm = mlr_inputs_sm_scale(in);
  const double c0 =
      mlr__emu_logit_c0(acc ? r->logit_scale_prec : MLR_SP_FP32, sm, r->softmax_exp == MLR_EXP_2);
  const int p64 = r->logit_scale_prec == MLR_SP_FP64;
  for (int64_t k = 0; k < n; k++) {
    double c;
    if (p64) {
      c = c0;
      if (sh->cq) c = c * (double)qs[k];
      if (sh->folded) c = c * sh->ks;
      c = acc ? (double)(float)c : c;
    } else {
      c = acc ? (double)(float)c0 : c0;
      if (sh->cq) c = acc ? (double)((float)c * qs[k]) : c * (double)qs[k];
      if (sh->folded) c = acc ? (double)((float)c * (float)sh->ks) : c * sh->ks;
    }
    sh->c[k] = c;
    sh->qs[k] = qs[k];
    for (int i = 0; i < QK; i++) {
      sh->q[k * QK + i] = mlr__to_operand(op, (double)qv[k * QK + i], r->qk_operand);
      sh->qreal[k * QK + i] = (double)qv[k * QK + i] * (double)qs[k];
    }
  }
  return MLR_OK;
}

/* a code's value times its scale, in binary32 when the operand source is on (mlr_emulate's float
 * product: the binary64 product of two binary32 numbers is exact, so this is one rounding) */
static double scaled(int op, double v, double s) { return op ? (double)(float)(v * s) : v * s; }

/* K (latent and rope) and V operands by code: the fp8 (or bf16 KV) codes' values, or the bf16
 * originals (kv_quant off) in the codes' units wherever the scale comes later */
static void kv_tables(mlr__shadow *sh, const mlr_recipe *r, const mlr_inputs *in, int op) {
  const size_t nl = (in->kv_format != MLR_FMT_BF16 && !sh->use_bf16) ? 256 : 65536;
  for (size_t k = 0; k < nl; k++) {
    double kn, kr, vv;
    if (sh->use_bf16) {
      const double v = (double)mlr_decode(MLR_FMT_BF16, (uint32_t)k); /* the real value */
      kn = sh->folded ? v / sh->ks : v;
      kr = sh->folded ? v / sh->kpes : v;
      vv = sh->vs_operand ? v : v / sh->vs;
    } else {
      const double v = (double)mlr_decode((mlr_format)in->kv_format, (uint32_t)k);
      kn = sh->folded ? v : scaled(op, v, sh->ks);
      kr = sh->folded ? v : scaled(op, v, sh->kpes);
      vv = sh->vs_operand ? scaled(op, v, sh->vs) : v;
    }
    sh->klut[k] = mlr__to_operand(op, kn, r->qk_operand);
    sh->kplut[k] = mlr__to_operand(op, kr, r->qk_operand);
    sh->vlut[k] = mlr__to_operand(op, vv, r->pv_operand);
  }
}

/* the bound's terms and the shadow assume IEEE division, an exact lse log and merge exp, unit
 * blocks of consecutive indices, binary32 dots, and the row sums the shadow models (seq, warp16) */
int mlr_budget_covers(const mlr_recipe *r) {
  return r->div_unit == MLR_DIV_IEEE && r->lse_log == MLR_LOG_EXACT &&
         r->merge_exp_unit == MLR_EXPU_EXACT && r->dot_korder == MLR_KORDER_SEQ &&
         r->softmax_sum != MLR_SUM_TL32X4 && r->softmax_sum != MLR_SUM_LANES4 &&
         r->softmax_sum != MLR_SUM_TL4 && r->qk_dot != MLR_DOT_AITER_LANES8 &&
         r->pv_dot != MLR_DOT_AITER_LANES8 && r->softmax_form == MLR_SMF_SCALED &&
         r->softmax_order == MLR_ORDER_FORWARD && r->normalize == MLR_NORM_DIVIDE &&
         r->softmax_schedule == MLR_SCHED_SINGLE && r->split_rule != MLR_SPLIT_FLASHMLA &&
         r->merge_rule != MLR_MERGE_FLASHMLA;
}

mlr_status mlr__shadow_init(mlr__shadow *sh, const mlr_recipe *r, const mlr_inputs *in,
                            unsigned rounded, mlr_error *err) {
  memset(sh, 0, sizeof *sh);
  /* the model's own test: the recipe, and whether it fits the inputs */
  mlr_status st = mlr_emu_check_fit(r, in, err);
  if (st != MLR_OK) return st;
  if (!mlr_budget_covers(r))
    return mlr_error_set(
        err, MLR_EINVAL,
        "recipe '%s': the budget covers div.unit = ieee, lse.log = exact, "
        "merge.exp_unit = exact, dot.k_order = seq, softmax.sum = seq or warp16, "
        "softmax.form = scaled, softmax.order = forward, softmax.schedule = single, "
        "normalize = divide and the split and "
        "merge rules but flashmla only; hold this recipe to "
        "the fa3 and structure rules",
        r->name);
  if (r->kv_scale_at == MLR_KVS_FOLDED && mlr_inputs_kpe_scale(in) != mlr_inputs_k_scale(in))
    return mlr_error_set(err, MLR_EINVAL,
                         "recipe '%s': kv.scale_at = folded puts one k_scale into the logit scale, "
                         "but the inputs' kpe_scale (%g) differs from k_scale (%g)",
                         r->name, (double)mlr_inputs_kpe_scale(in), (double)mlr_inputs_k_scale(in));
  const int kv8 = in->kv_format != MLR_FMT_BF16;
  if (kv8 && !(rounded & (1u << MLR_SRC_KV)) && !in->kv_bf16)
    return mlr_error_set(
        err, MLR_EINVAL,
        "the inputs have no kv_bf16 (the unquantized KV): the kv_quant source cannot be measured "
        "(generate with bf16kv=1)");
  const int op = (rounded >> MLR_SRC_OPERAND) & 1u, qon = (rounded >> MLR_SRC_Q) & 1u;
  sh->r = r;
  sh->in = in;
  sh->on = rounded;
  sh->H = in->H;
  sh->use_bf16 = kv8 && !(rounded & (1u << MLR_SRC_KV));
  sh->folded = r->kv_scale_at == MLR_KVS_FOLDED;
  sh->vs_merged = r->v_scale_at == MLR_VS_MERGED;
  sh->vs_operand = !sh->folded && !sh->vs_merged;
  sh->vs_split = sh->folded && !sh->vs_merged;
  sh->exp_sm = r->softmax_exp;
  sh->exp_lse = r->lse_base == MLR_EXP_2
                    ? MLR_EXP_2
                    : (r->softmax_exp == MLR_EXP_E_VIA_2 ? MLR_EXP_E_VIA_2 : MLR_EXP_E);
  if (r->softmax_exp_unit == MLR_EXPU_SM90_EX2 && (st = mlr_sfu_ex2_table(&sh->ex2, err)) != MLR_OK)
    return st;
  sh->ks = (double)mlr_inputs_k_scale(in);
  sh->kpes = (double)mlr_inputs_kpe_scale(in);
  sh->vs = (double)mlr_inputs_v_scale(in);
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
  sh->kplut = malloc(nl * sizeof(double));
  sh->vlut = malloc(nl * sizeof(double));
  float *qv = malloc((size_t)n * QK * sizeof(float)), *qs = malloc((size_t)n * sizeof(float));
  st = MLR_ENOMEM;
  if (!sh->nsplit || !sh->slen || !sh->tb || !sh->q || !sh->qreal || !sh->c || !sh->qs ||
      !sh->klut || !sh->kplut || !sh->vlut || !qv || !qs)
    goto fail;
  /* splits and blocks, as the model cuts them */
  sh->S = 1;
  sh->cap = 1;
  for (int64_t b = 0; b < B; b++) {
    const int64_t L = mlr_inputs_kv_len(in, b);
    mlr_recipe_splits(r, B, T, in->H, L, &sh->nsplit[b], &sh->slen[b]);
    if (sh->nsplit[b] > sh->S) sh->S = sh->nsplit[b];
    const int64_t span = sh->slen[b] < L ? sh->slen[b] : L;
    if (span > sh->cap) sh->cap = span;
    for (int64_t t = in->qo_indptr[b]; t < in->qo_indptr[b + 1]; t++) sh->tb[t] = b;
  }
  if (r->softmax_block > 0 && r->softmax_block < sh->cap) sh->cap = r->softmax_block;
  if ((st = q_setup(sh, r, in, qon, qv, qs)) != MLR_OK) goto fail;
  kv_tables(sh, r, in, op);
  /* the ranges of the tables' values: with them one test per block shows an exact dot exact in
   * binary64 (the emulator's vlsb/vtop) */
  sh->kv_range_ok = 1;
  sh->klsb = sh->vlsb = 1000;
  sh->ktop = sh->vtop = -1000;
  for (size_t k = 0; k < nl; k++) {
    const double kv[3] = {sh->klut[k], sh->kplut[k], sh->vlut[k]};
    for (int w = 0; w < 3; w++) {
      if (!isfinite(kv[w])) continue;
      if ((double)(float)kv[w] != kv[w]) sh->kv_range_ok = 0;
      mlr_f32_range_add((float)kv[w], w == 2 ? &sh->vlsb : &sh->klsb,
                        w == 2 ? &sh->vtop : &sh->ktop);
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
