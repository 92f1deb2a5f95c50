/* mlr_kernel.h: a user's kernel as a command or a callback, run on a report cell's inputs and
 * checked like `mlaref check` (compare/include/mlr_check.h). A kernel is a name, a command template
 * (or a callback), the recipe it claims (the numerics contract), an optional Q scale policy, a
 * timeout and its rules (fa3, plus any the user adds, e.g. exact for a kernel that claims its
 * recipe bit for bit). A kernel may decline a cell it cannot run: the cell is skipped, with the
 * kernel's reason (a command exits with status 77, CTest's skip code; a callback returns 77).
 *
 * The template's placeholders: {inputs} (the cell's inputs, a contract .safetensors file), {out}
 * (where the kernel writes o and optional lse: a .safetensors file, or a folder of o.npy and
 * lse.npy at that path), {q_scale} (the static Q scale of the kernel's policy, given or the
 * recipe's own, else 1), {q_policy} (that policy: static:absmax=A to 17 digits, dynamic, per_head,
 * per_token, or none for bf16 Q) and {cell} (the cell's name). The command runs through /bin/sh -c
 * in its own process group, stdin and stdout on /dev/null, stderr kept for the reason; past its
 * timeout the group gets SIGTERM, then SIGKILL a second later. Every file lives in a folder made
 * per run (mlr_kernel_workdir). */
#ifndef MLR_KERNEL_H
#define MLR_KERNEL_H

#include "mlr_base.h"
#include "mlr_compare.h"
#include "mlr_inputs_view.h"
#include "mlr_recipe.h"
#include "mlr_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  MLR_KERNEL_MAX_RULES = 6,                        /* fa3, structure and up to four more */
  MLR_KERNEL_MAX_CHECKS = 2 * MLR_KERNEL_MAX_RULES /* the rules on o and on lse */
};

typedef enum {
  MLR_KERNEL_PASS = 0,
  MLR_KERNEL_FAIL = 1,
  MLR_KERNEL_ERROR = 2,
  MLR_KERNEL_SKIP = 3 /* the kernel declined the cell: neither a pass nor a failure */
} mlr_kernel_verdict;

/* what a kernel returns (a callback) or exits with (a command) to decline a cell: CTest's code */
enum { MLR_KERNEL_SKIP_CODE = 77 };

/* A kernel as a function in this process (the Python harness's). It reads the cell's inputs at
 * inputs_path and writes o (and optional lse) at out_path as a command writes {out}; it returns 0
 * when it wrote them, MLR_KERNEL_SKIP_CODE to decline the cell, anything else for an error, with
 * one line in reason (n bytes) for either. No timeout applies: it runs in the caller's thread
 * until it returns. */
typedef int (*mlr_kernel_call)(void *ctx, const char *cell, const char *inputs_path,
                               const char *out_path, char *reason, size_t n);

typedef struct mlr_kernel {
  char name[64];          /* 1..63 of [A-Za-z0-9._-] */
  char command[2048];     /* the template ("" for a callback) */
  char recipe_label[256]; /* as the user named the recipe */
  mlr_recipe recipe;      /* the recipe claimed, the policy applied */
  char policy[48];        /* the policy given ("": the recipe's own) */
  double timeout_s;
  mlr_rule rules[MLR_KERNEL_MAX_RULES]; /* fa3 and structure first */
  int inputs_npy; /* {inputs} is a folder of NAME.npy files with metadata.json (mlr_inputs.h,
                     mlr_inputs_write_npy), not a .safetensors file */
  int nrules;
  mlr_kernel_call call; /* when set, run instead of the command (timeout_s is 0 then) */
  void *ctx;            /* the callback's first argument */
} mlr_kernel;

/* one rule's verdict on one tensor, as the check measured it (NaN: no number) */
typedef struct mlr_kernel_check {
  char tensor[4]; /* "o" or "lse" */
  char rule[64];
  char verdict[8]; /* "pass", "FAIL" or "n/a" */
  double measured, limit;
} mlr_kernel_check;

typedef struct mlr_kernel_result {
  int verdict;       /* mlr_kernel_verdict */
  char reason[1024]; /* one line naming the kernel and the cell; "" for a pass */
  mlr_kernel_check checks[MLR_KERNEL_MAX_CHECKS];
  int nchecks;
  mlr_tensor_file out; /* the output as read (empty when the kernel wrote none or it is unreadable);
                          'o' is the kernel's, of the inputs' shape, where the verdict is not an
                          error */
  double seconds;      /* the command's (or callback's) wall time */
} mlr_kernel_result;

/* what a cell gives the kernel */
typedef struct mlr_kernel_cell {
  const char *dir;         /* the run's folder (mlr_kernel_workdir) */
  const char *name;        /* the cell's name ({cell}) */
  const char *inputs_path; /* the inputs written there (mlr_kernel_write_inputs) */
  const mlr_inputs *in;    /* the same inputs, checked */
  const char *shape;       /* the shape spec, for reproducer lines */
  int threads;             /* for the check; 0: all */
  const char *commit;      /* for reproducer lines; NULL: "unknown" */
} mlr_kernel_cell;

/** A kernel from the user's words. spec: "NAME=COMMAND"; recipe: a built-in or fast-* name or a
 *  recipe file; policy: NULL or a Q scale policy (fp8-Q recipes only); timeout_s in (0, 86400];
 *  rules: rules besides fa3 and structure (NULL, 0: none). MLR_EINVAL with one line naming what
 *  is wrong and what is valid: a bad name, a command without {inputs} or {out}, an unknown
 * {placeholder}. */
mlr_status mlr_kernel_define(mlr_kernel *k, const char *spec, const char *recipe,
                             const char *policy, double timeout_s, const char *const *rules,
                             int nrules, mlr_error *err);

/** A callback kernel (mlr_kernel_call): name 1..63 of [A-Za-z0-9._-]; recipe, policy and rules as
 *  mlr_kernel_define's; no timeout. MLR_EINVAL with one line for a bad name, recipe, policy or
 *  rule, or no callback. */
mlr_status mlr_kernel_define_call(mlr_kernel *k, const char *name, const char *recipe,
                                  const char *policy, const char *const *rules, int nrules,
                                  mlr_kernel_call call, void *ctx, mlr_error *err);

/** The kernel's name in spec ("NAME=COMMAND") into name[64]; MLR_EINVAL for a malformed one. */
mlr_status mlr_kernel_spec_name(const char *spec, char name[64], mlr_error *err);

/** The value {q_scale} takes: the static policy's scale (absmax / the Q format's max, a binary32
 *  value), else 1. */
double mlr_kernel_q_scale(const mlr_kernel *k);

/** A new folder for one run's files, $TMPDIR (else /tmp)/mlaref-kernels-XXXXXX, into dir. */
mlr_status mlr_kernel_workdir(char dir[4096], mlr_error *err);
/** Remove the folder and everything in it (what the kernels wrote too). */
void mlr_kernel_workdir_remove(const char *dir);

/** A cell's inputs as DIR/CELL.inputs.safetensors (atomic), its path into path. */
mlr_status mlr_kernel_write_inputs(const char *dir, const char *cell, const mlr_tensor_file *tf,
                                   char path[4096], mlr_error *err);

/** Run the kernel (its callback when set, else its command) on one cell and check its output: the
 *  verdict (pass, fail with the failed rule and the worst element's reproducer line, skipped or
 *  error with the reason) in res; free it with
 *  mlr_kernel_result_free whatever the status. A kernel that fails in any way is a verdict, not a
 *  status: MLR_OK. Other statuses: the run's own trouble (MLR_EIO: the folder; MLR_ENOMEM; the
 *  model's or the oracle's errors). */
mlr_status mlr_kernel_run_cell(const mlr_kernel *k, const mlr_kernel_cell *c,
                               mlr_kernel_result *res, mlr_error *err);
void mlr_kernel_result_free(mlr_kernel_result *res);

const char *mlr_kernel_verdict_name(int verdict); /* "pass", "fail", "error", "skipped" */

#ifdef __cplusplus
}
#endif
#endif
