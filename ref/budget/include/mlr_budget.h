/* mlr_budget.h: where a kernel's error comes from, how large it may be, and what a static Q scale
 * costs (docs/design.md: ref/budget -> emulate, oracle, compare).
 *
 * Sources. Every rounding step of a recipe's order of operations (mlr_emulate.h) belongs to one
 * of eight sources:
 *   q_quant       Q to fp8 by the scale policy (the division by the scale, the clamp, the cast);
 *                 absent for inputs whose Q is fp8 codes already (q8)
 *   kv_quant      KV as fp8 codes instead of the bf16 originals (the inputs' kv_bf16)
 *   operand       conversions of Q, K and V to the products' operand formats, and the binary32
 *                 products value x k_scale (kpe_scale on the rope columns), value x v_scale when
 *                 the scales go into K and V
 *   accumulation  the binary32 roundings of both dots (fma chains, nope+rope add, exact dots'
 *                 one rounding), the dot's result format, the logit scale and its product, the
 *                 logit format, the row sum of p and the running updates of l and acc
 *   exp           the softmax exponentials: the argument s - m, e_via_2's product with log2 e,
 *                 the binary32 result (alpha and p)
 *   p_quant       P to p.format, then to the PV operand format (P's two roundings are one source:
 *                 with only one of them on, the other would take over the same rounding)
 *   merge         a split's partial (acc / l, x v_scale), its lse, the merge's weights and sums
 *   output        the final acc / l (one split) or acc / sum (merged), x v_scale (one split,
 *                 folded; or after the merge, v.scale_at = merged), and the rounding to out.format
 * With a source "off", its steps are computed without rounding (binary64 for the arithmetic,
 * exact sums through the long accumulator, pmath's binary64 exp and log, exact constants). */
#ifndef MLR_BUDGET_H
#define MLR_BUDGET_H

#include <stdint.h>

#include "mlr_base.h"
#include "mlr_inputs_view.h"
#include "mlr_oracle.h"
#include "mlr_recipe.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mlr_source {
  MLR_SRC_Q = 0,
  MLR_SRC_KV,
  MLR_SRC_OPERAND,
  MLR_SRC_ACCUM,
  MLR_SRC_EXP,
  MLR_SRC_P,
  MLR_SRC_MERGE,
  MLR_SRC_OUTPUT,
  MLR_NSRC
} mlr_source;
#define MLR_SRC_ALL ((1u << MLR_NSRC) - 1u)

/** "q_quant", "kv_quant", "operand", "accumulation", "exp", "p_quant", "merge", "output". */
const char *mlr_source_name(int s);

/** Whether the recipe rounds at the steps of source s for these inputs (kv_quant: fp8 KV;
 *  q_quant: fp8 Q by the policy, not q8; operand: a conversion that can change a value; merge: a
 *  batch with more than one split; ...). A source that is not present contributes exactly 0. */
int mlr_source_present(const mlr_recipe *r, const mlr_inputs *in, int s);

/** The switchable model (ref/budget/shadow.c): the recipe's order of operations for the rows
 *  rows[0..nrows) (row = t * H + h; NULL: every row, nrows ignored) with the rounding steps of
 *  the sources in `rounded` (bits 1 << mlr_source) applied and the others skipped. o receives
 *  [rows][512] binary64. With rounded = MLR_SRC_ALL the values are the model's output
 *  (mlr_emulate, decoded) bit for bit; with 0 they are attention on the bf16 inputs in binary64
 *  (mlr_truth_f64 from bf16 to about 1e-15). MLR_EINVAL when kv_quant is off and the inputs
 *  have fp8 KV without kv_bf16, or the recipe does not fit (kv.scale_at = folded with a kpe_scale
 *  other than k_scale among them); MLR_ENOMEM. */
mlr_status mlr_budget_eval(const mlr_recipe *r, const mlr_inputs *in, unsigned rounded,
                           const int64_t *rows, int64_t nrows, int threads, double *o,
                           mlr_error *err);

/** Error statistics of a set of differences: RMS, max |e| and the 99.9th percentile of |e|. */
typedef struct mlr_err_stats {
  double rms, max, p999;
} mlr_err_stats;

typedef struct mlr_decomp {
  int64_t n, rows;                 /* elements and rows (t, h) measured */
  unsigned present;                /* bits of the sources the recipe has */
  mlr_truth_from from;             /* the truth: from bf16 KV or from the dequantized KV */
  double truth_rms;                /* RMS of the truth, for relative figures */
  mlr_err_stats total;             /* model - truth */
  mlr_err_stats alone[MLR_NSRC];   /* only this source rounded, minus the truth */
  mlr_err_stats without[MLR_NSRC]; /* model minus the model with this source exact: what it adds */
  mlr_err_stats interaction;       /* total - sum of alone: what the sources do together */
  double rel_l2_total, rel_l2_alone[MLR_NSRC]; /* ||e|| / ||truth|| */
  /* closure: the switchable model with every source on against mlr_emulate (elements whose bits
   * differ: 0), and with every source off against the truth (max |difference|, binary64 noise) */
  int64_t closure_model_diff;
  double closure_truth_max;
} mlr_decomp;

/** Split the model's error against the truth by source (one source rounded at a time, and all
 *  but one): rows as in mlr_budget_eval. The truth is mlr_oracle's (certified), from `from`: bf16
 *  KV (MLR_EINVAL without kv_bf16) or the dequantized KV (kv_quant then counts as absent: it is in
 *  the truth too); truth_o is that truth and model_o the model's output (mlr_budget_model) for
 *  every element [T, H, 512] when the caller has them (NULL: computed here). */
mlr_status mlr_budget_decompose(const mlr_recipe *r, const mlr_inputs *in, mlr_truth_from from,
                                const double *truth_o, const double *model_o, const int64_t *rows,
                                int64_t nrows, int threads, mlr_decomp *d, mlr_error *err);

/** The model's output (mlr_emulate) for every element, decoded to binary64 into o [T, H, 512];
 *  *clipped (may be NULL) the Q elements the clamp changed. mlr_emulate's status codes. */
mlr_status mlr_budget_model(const mlr_recipe *r, const mlr_inputs *in, int threads, double *o,
                            int64_t *clipped, mlr_error *err);

/** Statistics of n differences a[i] - b[i] (NaN pairs skipped; both non-finite of one class:
 *  skipped). */
mlr_err_stats mlr_err_stats_of(const double *a, const double *b, int64_t n);

/** Whether the budget (mlr_budget_bound, mlr_budget_eval, the decomposition) models the recipe:
 *  every key at a value its terms cover (div.unit = ieee, lse.log = exact, merge.exp_unit = exact,
 *  dot.k_order = seq, softmax.sum = seq or warp16); the others return MLR_EINVAL saying so. */
int mlr_budget_covers(const mlr_recipe *r);

/** The a priori bound (ref/budget/bound.c has the analysis): for every element of o [T, H, 512],
 *  a bound on |model - truth| that holds for any kernel with the recipe's formats and its
 *  accumulation model, whatever its summation order within the model's rounding counts. truth_o
 *  is the truth (mlr_oracle from `from`). The effects of the input quantizations (Q by the
 *  policy; KV when from = bf16) enter exactly, as perturbations of the inputs; every rounding of
 *  the arithmetic enters as a worst case (unit roundoff x sums of magnitudes). Elements whose
 *  truth is not finite get +Inf (the compare rules then require the NaN/Inf classes to match).
 *  MLR_EINVAL as mlr_budget_eval, MLR_ENOMEM. */
mlr_status mlr_budget_bound(const mlr_recipe *r, const mlr_inputs *in, mlr_truth_from from,
                            const double *truth_o, int threads, double *bound, mlr_error *err);

/* ---- the static Q scale ---- */

typedef struct mlr_policy_point {
  double absmax;               /* static: the absmax; dynamic policies: 0 */
  double clipped_frac;         /* fraction of the Q elements the clamp changed */
  double rms, max_abs, rel_l2; /* model - truth */
  double util_max, util_p999;  /* budget utilisation |out - truth| / (atol + rtol |truth|) */
} mlr_policy_point;

/** The model's error against truth_o ([T, H, 512], the truth the caller chose) under the recipe
 *  as given (its q.format / q.scale / q.absmax), and its clipped fraction; utilisation for
 *  rtol, atol. MLR_EINVAL (bf16 Q has no scale; fp8 Q codes in the inputs take no policy),
 *  MLR_ENOMEM. */
mlr_status mlr_budget_policy_point(const mlr_recipe *r, const mlr_inputs *in, const double *truth_o,
                                   double rtol, double atol, int threads, mlr_policy_point *pt,
                                   mlr_error *err);

/** The same figures for an output already at hand: o ([T, H, 512], its values in binary64) of a
 *  kernel computing recipe r, which clipped `clipped` Q elements (a GPU kernel's, say). */
mlr_status mlr_budget_point_of(const mlr_recipe *r, const mlr_inputs *in, const double *o,
                               int64_t clipped, const double *truth_o, double rtol, double atol,
                               mlr_policy_point *pt, mlr_error *err);

/** The sweep grid: n absmax values log-spaced from lo to hi (both included). */
void mlr_budget_absmax_grid(double lo, double hi, int n, double *out);

#define MLR_BUDGET_SEEDS_ABSMAX 6.0 /* the seeds' static Q absmax (scale 6/448) */

/** The static-scale sweep's grid: mlr_budget_absmax_grid with the seeds' absmax added in order
 *  when it is not on it already; out has room for n + 1 values; returns how many it holds. */
int mlr_budget_sweep_grid(double lo, double hi, int n, double *out);

#ifdef __cplusplus
}
#endif
#endif
