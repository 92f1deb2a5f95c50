/* mlr_check.h: `mlaref check` as a library call: a kernel's output (o, and lse when it has one)
 * against the model of its recipe, the certified truth and the recipe's budget, under rules.
 * The command and the Python package both call this, so their verdicts and texts are the same.
 *
 * o: [T, H, 512] or [B, s_q, H, 512] (every batch s_q query tokens), BF16, F16 or F32. An o in
 * another format than the recipe's out.format is held against the model with out.format set to
 * o's (the text's first line says so): the rounding to the output is the kernel's own choice.
 * lse: [T, H] or [B, H, s_q] (FlashMLA's), F32 or F64 (rounded to F32, the model's precision), in
 * the recipe's out.lse_base. The model's lse (in lse.base) is converted to that base by one
 * binary32 multiply by fp32(log2 e) or fp32(ln 2), the truth's (natural log) in binary64.
 * The default rules: fa3 and structure (fa3 in each batch and each head on its own).
 * Rules on lse: the user's exact, ulp:N, fa3[:K[,ATOL]] and structure[:K[,ATOL]] (against the
 * model's converted lse bits; fa3 and structure against the truth as for o); allclose, nmse, cos
 * and budget hold o only; where none of the user's rules applies to lse, lse is held to the
 * default rules. docs/checking.md says why. */
#ifndef MLR_CHECK_H
#define MLR_CHECK_H

#include "mlr_base.h"
#include "mlr_compare.h"
#include "mlr_inputs_view.h"
#include "mlr_recipe.h"
#include "mlr_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MLR_CHECK_O = 1, MLR_CHECK_LSE = 2, MLR_CHECK_BOTH = 3 } mlr_check_tensors;

typedef struct mlr_check_args {
  const mlr_inputs *in;       /* checked inputs (mlr_inputs_from / mlr_inputs_load) */
  const char *inputs_label;   /* names the inputs in messages (a file name) */
  const char *shape;          /* the inputs' mlaref.shape metadata, or NULL */
  const mlr_tensor_file *out; /* the kernel's output: 'o' [T,H,512] or [B,s_q,H,512] (BF16,
                                 F16 or F32), optional 'lse' [T,H] or [B,H,s_q] (F32 or F64) */
  const char *out_label;      /* names the output in messages */
  const mlr_recipe *recipe;   /* the recipe the kernel claims */
  const char *recipe_label;   /* as the user named it */
  const mlr_rule *rules;      /* NULL or nrules = 0: the default set (fa3, structure) */
  int nrules;                 /* at most 16 */
  int tensors;                /* mlr_check_tensors: what to hold (BOTH, or 0: lse when present) */
  int from;                   /* mlr_truth_from (mlr_oracle.h) */
  int threads;                /* 0: all */
  const char *commit;         /* the build's commit, for reproducer lines; NULL: "unknown" */
  const char *o_alone;        /* how the caller checks o alone, for messages about a bad lse;
                                 NULL: the command's words, "--tensor o holds o alone" */
} mlr_check_args;

typedef struct mlr_check_report {
  int exit_code; /* 0 every rule passed, 1 a rule failed (what `mlaref check` exits with) */
  int held;      /* the tensors held: MLR_CHECK_O, MLR_CHECK_LSE or both */
  char *text;    /* what `mlaref check` prints (malloc'd, NUL-terminated, lines end in '\n') */
  char *json;    /* what `mlaref check --json` prints (malloc'd; one line ending in '\n') */
} mlr_check_report;

/** Run the check. MLR_OK with a verdict in rep (pass or fail); on bad input (an output of the
 *  wrong shape or dtype, --tensor lse without an lse, inputs the recipe cannot run) MLR_EINVAL
 *  with one line in err, and rep holds nothing to free; MLR_ENOMEM, or another status from the
 *  model or the oracle. */
mlr_status mlr_check_run(const mlr_check_args *a, mlr_check_report *rep, mlr_error *err);
void mlr_check_report_free(mlr_check_report *rep);

/** A kernel's output file into out (initialised here; free it with mlr_tf_free whatever the
 *  status): a .safetensors file; a .npy file, read as 'o'; or a folder holding o.npy and, or,
 *  lse.npy. A .npy file's dtype is its descr's: '<u2' bf16 codes, '<f2', '<f4', '<f8'. The
 *  readers' statuses (MLR_EIO, MLR_EPARSE, MLR_ECONTRACT) with one line in err. */
mlr_status mlr_check_load_output(const char *path, mlr_tensor_file *out, mlr_error *err);

#ifdef __cplusplus
}
#endif
#endif
