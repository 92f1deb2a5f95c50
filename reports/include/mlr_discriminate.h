/* mlr_discriminate.h: which comparison rule catches which wrong kernel. The wrong kernels are small
 * mutations of an emulated kernel: faults inside the model (mlr_emu_fault: the rope part dropped,
 * the wrong softmax scale, the KV scale twice or not at all, a skipped token, log2 for ln, P not
 * normalized, a merge without rescaling) and mistakes in the output (all zeros, q[..., :512] / 24,
 * batches 0 and 1 swapped, head 0 copied to head 1). Used by the discrimination test (every wrong
 * kernel must fail the default rule at every bench shape) and by the report's table. */
#ifndef MLR_DISCRIMINATE_H
#define MLR_DISCRIMINATE_H

#include <stdint.h>

#include "mlr_compare.h"
#include "mlr_inputs.h"
#include "mlr_recipe.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MLR_DISC_WRONG = 12, MLR_DISC_RULES = 5 };
/* the wrong kernels' names, in order */
extern const char *const mlr_disc_wrong[MLR_DISC_WRONG];
/* the rules compared: the task's (allclose 0.1, 0.1 with 5% allowed to miss), mlaref's default fa3,
 * ggml's NMSE limit, FlashMLA's fp8 cosine limit, the a priori bound */
extern const char *const mlr_disc_rules[MLR_DISC_RULES];

/** Wrong kernel k's output, bf16 codes [T, H, 512] in *out (malloc'd), for recipe r (bf16 output)
 *  on in; model: r's own output. MLR_EINVAL for a k out of range or a recipe without bf16 output.
 */
mlr_status mlr_disc_wrong_output(int k, const mlr_recipe *r, const mlr_inputs *in,
                                 const uint16_t *model, uint16_t **out, mlr_error *err);

/** The verdict of a rule (text) on candidate a against the model b (bf16 codes, n elements) and the
 *  truth; bound: the a priori bound per element (for the budget rule; NULL otherwise). */
mlr_status mlr_disc_judge(const char *rule, int64_t n, const uint16_t *a, const uint16_t *b,
                          const double *truth, const double *bound, mlr_verdict_kind *v,
                          mlr_error *err);

/** The table on one input set with its truth (o, [T, H, 512]): caught[k][q] = 1 when rule q fails
 *  wrong kernel k, 0 when it passes it, -1 for every rule when the mutation leaves the output
 *  bit-identical to the model's (a merge fault where every batch has one split); *model_ok = 1 when
 * the model itself passes fa3 and its a priori bound (threads: 0 = all). */
mlr_status mlr_disc_table(const mlr_recipe *r, const mlr_inputs *in, const double *truth,
                          int threads, int caught[MLR_DISC_WRONG][MLR_DISC_RULES], int *model_ok,
                          mlr_error *err);

#ifdef __cplusplus
}
#endif
#endif
