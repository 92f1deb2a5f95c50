/* mlr_discriminate.h: which check catches which wrong kernel. The wrong kernels (reports/mutants.c)
 * are small, plausible changes to an emulated kernel, computed as that kernel would compute them:
 * mistakes in the output (all zeros, q[..., :512] / 24, batches swapped, a head copied, lse in
 * base 2), faults inside the kernel (mlr_emu_fault: the rope part dropped, wrong or doubled
 * scales, skipped, dropped or doubled tokens, the causal mask one late, merge faults), and
 * misread inputs (a page-table entry off, the last page read whole, the mask ignored, v_scale
 * omitted or ignored, k_scale used for V, the k and v scales swapped, q_scale omitted, sm_scale
 * ignored, heads past 16 reading head h mod 16, the other fp8 flavour). The checks: the task's
 * allclose, mlaref's default rules (fa3 and structure, on o and lse, and on o alone), the
 * anchors' own test tolerances (FlashMLA, FlashInfer, AITER) and the a priori bound. Used by
 * the discrimination test, `mlaref discriminate` and the report's table. */
#ifndef MLR_DISCRIMINATE_H
#define MLR_DISCRIMINATE_H

#include <stdint.h>

#include "mlr_compare.h"
#include "mlr_emulate.h"
#include "mlr_inputs.h"
#include "mlr_recipe.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MLR_DISC_WRONG = 30, MLR_DISC_RULES = 7 };
/* the checks, in the table's column order */
enum {
  MLR_DISC_TASK,       /* allclose:0.1,0.1,0.05 */
  MLR_DISC_DEFAULT,    /* fa3 and structure, on o and on lse */
  MLR_DISC_DEFAULT_O,  /* the same on o alone (a kernel that returns no lse) */
  MLR_DISC_FLASHMLA,   /* max abs 8e-3 and cosine difference 5e-4 (bf16 KV: 8e-4, 5e-6) */
  MLR_DISC_FLASHINFER, /* max abs 1.5e-2 */
  MLR_DISC_AITER,      /* allclose:0.01,0.01,0.05 */
  MLR_DISC_BUDGET      /* the recipe's a priori bound */
};
/* the checks' names, for the table's header */
extern const char *const mlr_disc_rules[MLR_DISC_RULES];
/** Wrong kernel k's name ("?" out of range). */
const char *mlr_disc_wrong_name(int k);

/* a wrong kernel's outputs: o as bf16 codes [T, H, 512], lse [T, H] in the recipe's out.lse_base
 * as a kernel returns it (mlr_emu_result's lse_out) */
typedef struct mlr_disc_out {
  uint16_t *o;
  float *lse;
} mlr_disc_out;

/** Wrong kernel k's outputs (malloc'd; free with mlr_disc_out_free) for recipe r (bf16 output) on
 *  in; model: r's own result on in. Where k's mistake cannot show on these inputs (no page table
 *  to misread, no fp8 Q, 16 heads or fewer), the model's outputs. MLR_EINVAL for a k out of
 *  range or a recipe without bf16 output; the model's statuses. */
mlr_status mlr_disc_wrong_output(int k, const mlr_recipe *r, const mlr_inputs *in,
                                 const mlr_emu_result *model, int threads, mlr_disc_out *out,
                                 mlr_error *err);
void mlr_disc_out_free(mlr_disc_out *out);

/* what a candidate is held against */
typedef struct mlr_disc_refs {
  const mlr_recipe *r;
  const mlr_inputs *in;
  const mlr_emu_result *model; /* r's model on in */
  const double *truth, *tlse;  /* the truth's o [T, H, 512] and lse [T, H] (natural log) */
  const double *bound;         /* r's a priori bound [T, H, 512], or NULL: budget n/a */
} mlr_disc_refs;

/** Every check's verdict on a candidate (o bf16 codes, lse in r's out.lse_base as a kernel returns
 *  it) into v, lse held as check holds it: against the model's lse_out. */
mlr_status mlr_disc_judge_all(const mlr_disc_refs *ref, const uint16_t *o, const float *lse,
                              mlr_verdict_kind v[MLR_DISC_RULES], mlr_error *err);

/** The verdict of one rule (text) on o alone: candidate a against the model b (bf16 codes, n
 *  elements) and the truth; bound: per element (for budget; NULL otherwise). */
mlr_status mlr_disc_judge(const char *rule, int64_t n, const uint16_t *a, const uint16_t *b,
                          const double *truth, const double *bound, mlr_verdict_kind *v,
                          mlr_error *err);

/** The table on one input set with its truth (o and lse): caught[k][q] = 1 when check q fails
 *  wrong kernel k, 0 when it passes it, -1 for every check when the mutation leaves o and lse
 *  bit-identical to the model's (a merge fault with one split, a page fault without pages);
 *  *model_ok = 1 when the model itself passes the default rules and its a priori bound
 *  (threads: 0 = all). */
mlr_status mlr_disc_table(const mlr_recipe *r, const mlr_inputs *in, const double *truth,
                          const double *tlse, int threads,
                          int caught[MLR_DISC_WRONG][MLR_DISC_RULES], int *model_ok,
                          mlr_error *err);

#ifdef __cplusplus
}
#endif
#endif
