/* mlr_compare.h: metrics between two outputs, named tolerance rules and verdicts.
 *
 * A is the candidate (a kernel's output), B the reference (the model's output for the kernel's
 * recipe, a golden, or the truth). Both are flat arrays of the same length; B may be of a wider
 * type (the truth in binary64). Distances in ulp are measured in A's format: the difference of
 * the encodings mapped to ordered integers (so +0 and -0 are 0 apart and the distance across zero
 * counts every code between), with B first rounded to A's format (nearest even) when it is wider;
 * defined for non-NaN pairs.
 *
 * Coverage: a kernel's output buffer is pre-filled with the all-ones NaN pattern (0xFFFF for
 * bf16 and fp16, 0xFFFFFFFF for binary32) before the kernel runs; an element of A still holding
 * it was never written. Arithmetic NaNs have other encodings (PyTorch's bf16 NaN is 0x7FFF).
 * Every rule fails when an element is unwritten or when the NaN/Inf classes of A and B differ
 * (NaN, +Inf, -Inf, finite), whatever its thresholds. */
#ifndef MLR_COMPARE_H
#define MLR_COMPARE_H

#include <stdint.h>

#include "mlr_base.h"
#include "mlr_values.h"

#ifdef __cplusplus
extern "C" {
#endif

/** ||a - t|| / ||t|| over the pairs where both are finite, summed in element order (0 when t is
 *  0). */
double mlr_compare_rel_l2(const mlr_cmp_tensor *a, const mlr_cmp_tensor *t);

enum { MLR_CMP_WORST = 8 };

typedef struct mlr_cmp_elem {
  int64_t index;
  uint32_t a, b; /* codes */
  double va, vb; /* values */
  int64_t ulp;   /* -1 when not defined (NaN, class mismatch) */
} mlr_cmp_elem;

typedef struct mlr_metrics {
  int64_t n;              /* elements */
  int64_t identical;      /* same encoding (NaNs: both NaN) */
  int64_t unwritten;      /* A holds the unwritten pattern */
  int64_t class_mismatch; /* NaN/+Inf/-Inf/finite differ (unwritten elements excluded) */
  int64_t finite;         /* pairs with both finite: the ones the numeric metrics use */
  int64_t ulp_max;
  double ulp_p50, ulp_p99, ulp_p999;
  double max_abs, max_rel;           /* max |a-b|, max |a-b| / |b| over b != 0 */
  double rmse, rel_l2;               /* sqrt(mean (a-b)^2), ||a-b|| / ||b|| */
  double nmse;                       /* sum (a-b)^2 / sum b^2 (ggml) */
  double cos_diff;                   /* 1 - 2 sum ab / sum (a^2 + b^2) (FlashMLA) */
  mlr_cmp_elem worst[MLR_CMP_WORST]; /* largest ulp distance first (class mismatches and
                                        unwritten elements before everything) */
  int nworst;
} mlr_metrics;

/** Metrics of A against B (same length; B of A's type or wider): MLR_EINVAL otherwise,
 *  MLR_ENOMEM. */
mlr_status mlr_compare_metrics(const mlr_cmp_tensor *a, const mlr_cmp_tensor *b, mlr_metrics *m,
                               mlr_error *err);

/** Fraction of finite pairs with |a - b| > atol + rtol |b| (torch.allclose's test, per element);
 *  NaN/Inf pairs count as mismatches unless they are the same class. */
double mlr_compare_mismatch(const mlr_cmp_tensor *a, const mlr_cmp_tensor *b, double rtol,
                            double atol);

/** Against a per-element bound (ref/budget's a priori bound): |a - t| <= factor x bound[i] for
 *  every finite pair. Reports the largest ratio |a - t| / bound (the bound's utilisation), the
 *  elements beyond it and the worst one. */
typedef struct mlr_bound_use {
  int64_t n, over, worst; /* worst: index of the largest ratio (-1 if none) */
  double max_ratio;       /* max |a - t| / bound */
  double tight_p50;       /* median of bound / |a - t| over elements with a - t != 0 (tightness) */
} mlr_bound_use;
mlr_status mlr_compare_bound(const mlr_cmp_tensor *a, const mlr_cmp_tensor *t, const double *bound,
                             double factor, mlr_bound_use *bu, mlr_error *err);

/* ---- rules ---- */

typedef enum mlr_rule_kind {
  MLR_RULE_EXACT,    /* every element bit-identical */
  MLR_RULE_ULP,      /* ulp:N      max ulp distance <= N */
  MLR_RULE_ALLCLOSE, /* allclose:RTOL,ATOL[,MISS]  at most a fraction MISS (default 0) of the
                        elements beyond atol + rtol|b|; the task's rule is allclose:0.1,0.1,0.05 */
  MLR_RULE_FA3,      /* fa3[:K[,ATOL]]  max|a - t| <= K max|r - t| + ATOL (K = 2, ATOL = 1e-5):
                        FlashAttention-3's test; B is the same-precision reference r, t the truth */
  MLR_RULE_NMSE,     /* nmse:X     NMSE <= X (ggml's flash-attention limit is 5e-4) */
  MLR_RULE_COS,      /* cos:X      cosine difference <= X (FlashMLA uses 1e-2 for fp8) */
  MLR_RULE_BUDGET,   /* budget[:F] |a - t| <= F x bound per element (F = 1): the a priori bound of
                        the recipe (ref/budget), which the caller computes (mlaref check does) */
  MLR_RULE_STRUCTURE /* structure[:K[,ATOL]]  fa3 in every batch and every head on its own:
                        max|a - t| <= K max|r - t| + ATOL over each group (K = 2, ATOL = 1e-5) */
} mlr_rule_kind;

typedef struct mlr_rule {
  mlr_rule_kind kind;
  double x, y, z;
  char text[64]; /* as given, for messages */
} mlr_rule;

/** Parse "exact", "ulp:N", "allclose:RTOL,ATOL[,MISS]", "fa3[:K[,ATOL]]", "nmse:X", "cos:X",
 *  "budget[:F]", "structure[:K[,ATOL]]". MLR_EPARSE with the valid forms in err. */
mlr_status mlr_rule_parse(const char *s, mlr_rule *r, mlr_error *err);
/** The default set into r[0..1]: fa3 and structure (what `check` and a report's kernel cells
 *  always hold); returns 2. */
int mlr_rule_defaults(mlr_rule r[2]);
/** "exact|ulp:N|allclose:RTOL,ATOL[,MISS]|fa3[:K[,ATOL]]|nmse:X|cos:X|budget[:F]|
 *  structure[:K[,ATOL]]" */
const char *mlr_rule_forms(void);

typedef enum { MLR_VERDICT_PASS = 0, MLR_VERDICT_FAIL = 1, MLR_VERDICT_NA = 2 } mlr_verdict_kind;

typedef struct mlr_verdict {
  mlr_verdict_kind kind;
  double measured, limit; /* what the rule compared */
  char detail[256];
} mlr_verdict;

/** Apply a rule. m: A against B. For fa3, mt (A against the truth) and mr (B against the truth)
 *  are needed (NULL otherwise: the verdict is NA with the reason); for allclose, a and b. budget
 *  needs the bound: use mlr_rule_apply_budget (here it is NA, saying so). */
mlr_verdict mlr_rule_apply(const mlr_rule *r, const mlr_metrics *m, const mlr_cmp_tensor *a,
                           const mlr_cmp_tensor *b, const mlr_metrics *mt, const mlr_metrics *mr);

/** The budget rule: A against the truth t within factor x bound (mlr_compare_bound); fails on
 *  unwritten elements or NaN/Inf class differences (m: A against the truth) like every rule. */
mlr_verdict mlr_rule_apply_budget(const mlr_rule *r, const mlr_metrics *mt, const mlr_cmp_tensor *a,
                                  const mlr_cmp_tensor *t, const double *bound);

/** How a [T, H, C] output falls into groups for the structure rule: the batches (query tokens
 *  qo_indptr[b] .. qo_indptr[b+1]-1, every head) and the heads (every token). */
typedef struct mlr_groups {
  int64_t T, H, C, B;
  const int32_t *qo_indptr; /* [B + 1] */
} mlr_groups;

/** The structure rule: each batch's and each head's max|a - t| against K x the model's (r) max
 *  error in that same group + ATOL. One batch or head far out of line fails even where the
 *  global maximum is inside fa3's limit (a group whose own error is small, beside a noisy one).
 *  Non-finite elements: an element whose class differs from the truth's and the model's counts
 *  as an infinite error. */
mlr_verdict mlr_rule_apply_structure(const mlr_rule *r, const mlr_cmp_tensor *a,
                                     const mlr_cmp_tensor *b, const mlr_cmp_tensor *t,
                                     const mlr_groups *g);

#ifdef __cplusplus
}
#endif
#endif
