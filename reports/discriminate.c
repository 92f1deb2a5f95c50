/* Which check catches which wrong kernel (mlr_discriminate.h). */
#define _POSIX_C_SOURCE 200809L
#include "mlr_discriminate.h"

#include <stdlib.h>
#include <string.h>

#include "mlr_budget.h"
#include "mlr_emu_ops.h"
#include "mlr_emulate.h"
#include "mlr_formats.h"

#define DV MLR_EMU_V_DIM

const char *const mlr_disc_rules[MLR_DISC_RULES] = {"task allclose:0.1,0.1,0.05",
                                                    "default: fa3 + structure",
                                                    "default on o alone",
                                                    "FlashMLA abs 8e-3 + cos 5e-4",
                                                    "FlashInfer abs 1.5e-2",
                                                    "AITER allclose:0.01,0.01,0.05",
                                                    "budget"};

/* the rules of each check on o; the default rules hold lse too (MLR_DISC_DEFAULT). FlashMLA's test
 * tolerances are its fp8 ones (bf16 KV: abs 8e-4, cos 5e-6, its bf16 ones) */
static const char *const SET[MLR_DISC_RULES][2] = {{"allclose:0.1,0.1,0.05", NULL},
                                                   {"fa3", "structure"},
                                                   {"fa3", "structure"},
                                                   {"allclose:0,8e-3", "cos:5e-4"},
                                                   {"allclose:0,1.5e-2", NULL},
                                                   {"allclose:0.01,0.01,0.05", NULL},
                                                   {"budget", NULL}};

/* one tensor held as check holds it: candidate, model, truth, their metrics and groups */
typedef struct held {
  mlr_cmp_tensor a, b, t;
  mlr_metrics m, mt, mr;
  mlr_groups g;
} held;

static mlr_status held_make(held *h, const mlr_disc_refs *ref, mlr_cmp_tensor a, mlr_cmp_tensor b,
                            mlr_cmp_tensor t, int64_t C, mlr_error *err) {
  h->a = a;
  h->b = b;
  h->t = t;
  h->g = (mlr_groups){ref->in->T, ref->in->H, C, ref->in->B, ref->in->qo_indptr};
  mlr_status st = mlr_compare_metrics(&h->a, &h->b, &h->m, err);
  if (st == MLR_OK) st = mlr_compare_metrics(&h->a, &h->t, &h->mt, err);
  if (st == MLR_OK) st = mlr_compare_metrics(&h->b, &h->t, &h->mr, err);
  return st;
}

static mlr_verdict_kind apply(const mlr_rule *r, const held *h, const double *bound) {
  if (r->kind == MLR_RULE_STRUCTURE)
    return mlr_rule_apply_structure(r, &h->a, &h->b, &h->t, &h->g).kind;
  if (r->kind == MLR_RULE_BUDGET)
    return bound ? mlr_rule_apply_budget(r, &h->mt, &h->a, &h->t, bound).kind : MLR_VERDICT_NA;
  return mlr_rule_apply(r, &h->m, &h->a, &h->b, &h->mt, &h->mr).kind;
}

/* the truth's lse (natural log, binary64) in out.lse_base, as check holds it; the candidate's and
 * the model's are held as a kernel returns them (the model's lse_out) */
static double *truth_lse(const mlr_disc_refs *ref) {
  const int64_t n = ref->in->T * ref->in->H;
  double *t = malloc((size_t)(n > 0 ? n : 1) * sizeof *t);
  const int to = ref->r->out_lse_base;
  for (int64_t i = 0; t && i < n; i++)
    t[i] = to == MLR_EXP_2 ? ref->tlse[i] * MLR_EMU_LOG2E_D : ref->tlse[i];
  return t;
}

mlr_status mlr_disc_judge_all(const mlr_disc_refs *ref, const uint16_t *o, const float *lse,
                              mlr_verdict_kind v[MLR_DISC_RULES], mlr_error *err) {
  const int64_t n = ref->in->T * ref->in->H * DV, nl = ref->in->T * ref->in->H;
  held ho, hl;
  mlr_status st = held_make(&ho, ref, (mlr_cmp_tensor){MLR_CT_BF16, o, n},
                            (mlr_cmp_tensor){MLR_CT_BF16, ref->model->o, n},
                            (mlr_cmp_tensor){MLR_CT_F64, ref->truth, n}, DV, err);
  double *lt = NULL;
  if (st == MLR_OK && ref->tlse && !(lt = truth_lse(ref)))
    st = mlr_error_set(err, MLR_ENOMEM, "out of memory for lse");
  if (st == MLR_OK && ref->tlse)
    st = held_make(&hl, ref, (mlr_cmp_tensor){MLR_CT_F32, lse, nl},
                   (mlr_cmp_tensor){MLR_CT_F32, ref->model->lse_out, nl},
                   (mlr_cmp_tensor){MLR_CT_F64, lt, nl}, 1, err);
  const int bf16kv = ref->in->kv_format == MLR_FMT_BF16;
  for (int q = 0; st == MLR_OK && q < MLR_DISC_RULES; q++) {
    v[q] = MLR_VERDICT_PASS;
    for (int j = 0; j < 2 && SET[q][j]; j++) {
      const char *text = SET[q][j];
      if (q == MLR_DISC_FLASHMLA && bf16kv) text = j ? "cos:5e-6" : "allclose:0,8e-4";
      mlr_rule r;
      if ((st = mlr_rule_parse(text, &r, err)) != MLR_OK) break;
      mlr_verdict_kind k = apply(&r, &ho, ref->bound);
      if (q == MLR_DISC_DEFAULT && ref->tlse && k != MLR_VERDICT_FAIL) k = apply(&r, &hl, NULL);
      if (k == MLR_VERDICT_FAIL || (k == MLR_VERDICT_NA && v[q] == MLR_VERDICT_PASS)) v[q] = k;
    }
  }
  free(lt);
  return st;
}

mlr_status mlr_disc_judge(const char *rule, int64_t n, const uint16_t *a, const uint16_t *b,
                          const double *truth, const double *bound, mlr_verdict_kind *v,
                          mlr_error *err) {
  mlr_rule r;
  mlr_status st = mlr_rule_parse(rule, &r, err);
  if (st != MLR_OK) return st;
  const mlr_cmp_tensor ta = {MLR_CT_BF16, a, n}, tb = {MLR_CT_BF16, b, n},
                       tt = {MLR_CT_F64, truth, n};
  mlr_metrics m, mt, mr;
  if ((st = mlr_compare_metrics(&ta, &tb, &m, err)) != MLR_OK ||
      (st = mlr_compare_metrics(&ta, &tt, &mt, err)) != MLR_OK ||
      (st = mlr_compare_metrics(&tb, &tt, &mr, err)) != MLR_OK)
    return st;
  if (r.kind == MLR_RULE_BUDGET) {
    if (!bound) return mlr_error_set(err, MLR_EINVAL, "rule budget needs the a priori bound");
    *v = mlr_rule_apply_budget(&r, &mt, &ta, &tt, bound).kind;
  } else
    *v = mlr_rule_apply(&r, &m, &ta, &tb, &mt, &mr).kind;
  return MLR_OK;
}

/* 1 when the outputs are the model's, bit for bit */
static int unchanged(const mlr_disc_out *w, const mlr_emu_result *model, int64_t n, int64_t nl) {
  return !memcmp(w->o, model->o, (size_t)n * 2) &&
         !memcmp(w->lse, model->lse_out, (size_t)nl * sizeof(float));
}

mlr_status mlr_disc_table(const mlr_recipe *r, const mlr_inputs *in, const double *truth,
                          const double *tlse, int threads,
                          int caught[MLR_DISC_WRONG][MLR_DISC_RULES], int *model_ok,
                          mlr_error *err) {
  memset(caught, 0, sizeof(int) * MLR_DISC_WRONG * MLR_DISC_RULES);
  *model_ok = 0;
  const int64_t n = in->T * in->H * DV, nl = in->T * in->H;
  mlr_emu_opts opts = {threads, 0, MLR_FAULT_NONE, 0};
  mlr_emu_result model;
  mlr_status st = mlr_emulate(r, in, &opts, &model, err);
  if (st != MLR_OK) return st;
  double *bound = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  if (!bound)
    st = mlr_error_set(err, MLR_ENOMEM, "out of memory for the bound");
  else
    st = mlr_budget_bound(r, in, MLR_TRUTH_DEQUANTIZED, truth, threads, bound, err);
  const mlr_disc_refs ref = {r, in, &model, truth, tlse, bound};
  mlr_verdict_kind v[MLR_DISC_RULES];
  if (st == MLR_OK && (st = mlr_disc_judge_all(&ref, model.o, model.lse_out, v, err)) == MLR_OK)
    *model_ok = v[MLR_DISC_DEFAULT] == MLR_VERDICT_PASS && v[MLR_DISC_BUDGET] == MLR_VERDICT_PASS;
  for (int k = 0; st == MLR_OK && k < MLR_DISC_WRONG; k++) {
    mlr_disc_out w;
    if ((st = mlr_disc_wrong_output(k, r, in, &model, threads, &w, err)) != MLR_OK) break;
    if (unchanged(&w, &model, n, tlse ? nl : 0)) /* the mutation cannot act on these inputs */
      for (int q = 0; q < MLR_DISC_RULES; q++) caught[k][q] = -1;
    else if ((st = mlr_disc_judge_all(&ref, w.o, w.lse, v, err)) == MLR_OK)
      for (int q = 0; q < MLR_DISC_RULES; q++) caught[k][q] = v[q] == MLR_VERDICT_FAIL;
    mlr_disc_out_free(&w);
  }
  free(bound);
  mlr_emu_result_free(&model);
  return st;
}
