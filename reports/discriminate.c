/* Which rule catches which wrong kernel (mlr_discriminate.h). */
#define _POSIX_C_SOURCE 200809L
#include "mlr_discriminate.h"

#include <stdlib.h>
#include <string.h>

#include "mlr_budget.h"
#include "mlr_emulate.h"
#include "mlr_formats.h"

#define DV MLR_EMU_V_DIM

const char *const mlr_disc_wrong[MLR_DISC_WRONG] = {"all zeros",
                                                    "q[..., :512] / 24",
                                                    "rope part of the dot dropped",
                                                    "sm_scale = 1/sqrt(512)",
                                                    "kv_scale applied twice",
                                                    "kv_scale not applied",
                                                    "last token of each split skipped",
                                                    "split lse in log2 where ln is meant",
                                                    "P not normalized",
                                                    "merge without rescaling by the running max",
                                                    "batches 0 and 1 swapped",
                                                    "head 0 copied to head 1"};
static const int FAULT[MLR_DISC_WRONG] = {0,
                                          0,
                                          MLR_FAULT_DROP_ROPE,
                                          MLR_FAULT_SM_SCALE_512,
                                          MLR_FAULT_KV_SCALE_TWICE,
                                          MLR_FAULT_KV_SCALE_NONE,
                                          MLR_FAULT_SKIP_LAST,
                                          MLR_FAULT_LSE_LOG2,
                                          MLR_FAULT_P_UNNORMALIZED,
                                          MLR_FAULT_MERGE_NO_RESCALE,
                                          0,
                                          0};
const char *const mlr_disc_rules[MLR_DISC_RULES] = {"allclose:0.1,0.1,0.05", "fa3", "nmse:5e-4",
                                                    "cos:1e-2", "budget"};

mlr_status mlr_disc_wrong_output(int k, const mlr_recipe *r, const mlr_inputs *in,
                                 const uint16_t *model, uint16_t **out, mlr_error *err) {
  *out = NULL;
  if (k < 0 || k >= MLR_DISC_WRONG)
    return mlr_error_set(err, MLR_EINVAL, "wrong kernel %d: valid 0..%d", k, MLR_DISC_WRONG - 1);
  if (r->out_format != MLR_OUT_BF16)
    return mlr_error_set(err, MLR_EINVAL,
                         "recipe '%s': the wrong kernels are made from a bf16 output", r->name);
  const int64_t H = in->H, n = in->T * H * DV;
  uint16_t *o = malloc((size_t)(n > 0 ? n : 1) * 2);
  if (!o) return mlr_error_set(err, MLR_ENOMEM, "out of memory for a wrong kernel's output");
  if (FAULT[k]) {
    mlr_emu_opts opts = {0, 0, FAULT[k], 0};
    mlr_emu_result res;
    const mlr_status st = mlr_emulate(r, in, &opts, &res, err);
    if (st != MLR_OK) {
      free(o);
      return st;
    }
    memcpy(o, res.o, (size_t)n * 2);
    mlr_emu_result_free(&res);
  } else if (k == 0)
    memset(o, 0, (size_t)n * 2);
  else if (k == 1) { /* bf16(q / 24) of the first 512 columns: an output of the right size and scale
                        with no attention in it */
    for (int64_t t = 0; t < in->T * H; t++)
      for (int d = 0; d < DV; d++) {
        const float q = mlr_bits_f32((uint32_t)in->q[t * MLR_EMU_QK_DIM + d] << 16);
        o[t * DV + d] = (uint16_t)mlr_encode_f32(q / 24.0f, MLR_FMT_BF16, MLR_RND_NEAREST_EVEN,
                                                 MLR_OVF_NONSAT, 0);
      }
  } else if (k == 10) { /* the first query tokens of batches 0 and 1 trade outputs */
    memcpy(o, model, (size_t)n * 2);
    if (in->B > 1) {
      const int64_t t0 = in->qo_indptr[0], t1 = in->qo_indptr[1];
      memcpy(o + t0 * H * DV, model + t1 * H * DV, (size_t)(H * DV) * 2);
      memcpy(o + t1 * H * DV, model + t0 * H * DV, (size_t)(H * DV) * 2);
    }
  } else { /* every token's head 1 = its head 0 */
    memcpy(o, model, (size_t)n * 2);
    for (int64_t t = 0; H > 1 && t < in->T; t++)
      memcpy(o + (t * H + 1) * DV, o + t * H * DV, DV * 2);
  }
  *out = o;
  return MLR_OK;
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

mlr_status mlr_disc_table(const mlr_recipe *r, const mlr_inputs *in, const double *truth,
                          int threads, int caught[MLR_DISC_WRONG][MLR_DISC_RULES], int *model_ok,
                          mlr_error *err) {
  memset(caught, 0, sizeof(int) * MLR_DISC_WRONG * MLR_DISC_RULES);
  *model_ok = 0;
  const int64_t n = in->T * in->H * DV;
  mlr_emu_opts opts = {threads, 0, MLR_FAULT_NONE, 0};
  mlr_emu_result model;
  mlr_status st = mlr_emulate(r, in, &opts, &model, err);
  if (st != MLR_OK) return st;
  double *bound = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  if (!bound)
    st = mlr_error_set(err, MLR_ENOMEM, "out of memory for the bound");
  else
    st = mlr_budget_bound(r, in, MLR_TRUTH_DEQUANTIZED, truth, threads, bound, err);
  mlr_verdict_kind v1 = MLR_VERDICT_FAIL, v2 = MLR_VERDICT_FAIL;
  if (st == MLR_OK) st = mlr_disc_judge("fa3", n, model.o, model.o, truth, NULL, &v1, err);
  if (st == MLR_OK) st = mlr_disc_judge("budget", n, model.o, model.o, truth, bound, &v2, err);
  *model_ok = v1 == MLR_VERDICT_PASS && v2 == MLR_VERDICT_PASS;
  for (int k = 0; st == MLR_OK && k < MLR_DISC_WRONG; k++) {
    uint16_t *o;
    if ((st = mlr_disc_wrong_output(k, r, in, model.o, &o, err)) != MLR_OK) break;
    if (!memcmp(o, model.o, (size_t)n * 2)) { /* the mutation does not touch this kernel's output
                                                 (e.g. a merge fault, one split) */
      for (int q = 0; q < MLR_DISC_RULES; q++) caught[k][q] = -1;
      free(o);
      continue;
    }
    for (int q = 0; st == MLR_OK && q < MLR_DISC_RULES; q++) {
      mlr_verdict_kind v;
      if ((st = mlr_disc_judge(mlr_disc_rules[q], n, o, model.o, truth, bound, &v, err)) == MLR_OK)
        caught[k][q] = v == MLR_VERDICT_FAIL;
    }
    free(o);
  }
  free(bound);
  mlr_emu_result_free(&model);
  return st;
}
