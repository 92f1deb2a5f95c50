/* mlaref policy-check --policy P [--against P0] [--suite NAME | --shape SPEC... | --inputs FILE...]
 *                     [--recipe NAME|FILE|none]... [--tolerance RTOL,ATOL] [--threshold X]
 *                     [--margin M] [--threads N] [--gpu auto|off|require] [--json]
 *                     [--kernel NAME='CMD {inputs} {out} {q_scale} {q_policy}'
 *                      --kernel-recipe NAME=R [--kernel-timeout [NAME=]S]
 *                      [--kernel-rule NAME=RULE]... [--kernel-inputs NAME=safetensors|npy]]...
 * What a change of the fp8 Q scale policy does to every kernel, run whenever the policy changes.
 * For every recipe with fp8 Q (default: the built-ins' and the fast GPU kernel's; bf16-Q recipes
 * have no scale and are listed as unaffected) and every shape (default the nightly suite: the
 * bench and edge shapes and the Q distributions; or inputs files, a cell each), the model's error
 * against the certified truth from the dequantized KV (so only Q's policy and the kernel's own
 * arithmetic differ, as in `budget --sweep`) under the current policy (--against, default the
 * recipe's own) and under P:
 * the budget utilisation |out - truth| / (ATOL + RTOL |truth|) (max and p99.9; default tolerance
 * AITER's 1e-2, 1e-2), the fraction of Q elements the clamp changed, and the verdict of the change:
 *   pass       the new policy's largest utilisation is at most X (default 1);
 *   no worse   over X, but so was the current policy, and the new one is at most 10% (--margin)
 *              higher: the kernel's tolerance, not the policy change;
 *   FAIL       over X, and either the current policy was not or the new one is worse beyond the
 *              margin.
 * Then one recommendation line a kernel and one for the change. Exit 1 when any cell FAILs, 0 when
 * none does, 2 bad input.
 * Where a GPU is (--gpu auto, the default; require: an error without one; off), the fast kernel's
 * own outputs are checked too, as the kernels "fast-a8w8 (GPU)": the same figures from the GPU's
 * output under each policy (a policy the kernel does not compute, per head or per token, is n/a).
 * The user's kernels (--kernel, as for `report`) run on every cell under both policies, each
 * time given that policy's Q scale ({q_scale}) and the policy ({q_policy}) and checked against its
 * recipe under that policy (mlr_kernel_run_cell); the same figures from their outputs, and a cell
 * FAILs ("FAIL check") where either output fails its check.
 */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mlr_gen.h"
#include "mlr_inputs.h"
#include "mlr_suites.h"
#include "mlr_compare.h"
#include "mlr_gpu.h"
#include "mlr_gpu_fast.h"
#include "mlr_budget.h"
#include "mlr_emulate.h"
#include "mlr_kernel.h"
#include "mlr_oracle.h"
#include "mlr_recipe.h"

enum { MAXREC = 24, MAXROWS = MAXREC + MLR_CLI_MAX_KERNELS, MAXSHAPES = 64 };

typedef struct cell {
  int applicable;   /* the recipe fits the inputs */
  char reason[256]; /* why not */
  mlr_policy_point before, after;
  char before_policy[64];
  int pass_before, pass_after; /* utilisation max at most the threshold */
  int verdict;                 /* V_PASS, V_SAME, V_FAIL or V_CHECK */
  /* a user kernel's check under the policy before [0] and after [1] (mlr_kernel_verdict), its
   * reason, and whether that output gave the figures (an error verdict leaves none) */
  int check[2], has_point[2];
  char check_reason[2][1024];
} cell;

enum { V_PASS, V_SAME, V_FAIL, V_CHECK };
static const char *const VERDICT[] = {"pass", "no worse", "FAIL", "FAIL check"};

/* a shape: a spec generated in memory, or an inputs file (file set; name its basename) */
typedef struct shape {
  const char *name, *spec, *file;
} shape;

/* a kernel of the table: the model of a recipe, the fast kernel's own output on the GPU, or a
 * user's kernel (kb, ka: defined under the policy before and after) */
typedef struct row {
  mlr_recipe r; /* a user kernel's: the recipe it claims, under the policy before */
  char name[80];
  int on_gpu;
  const mlr_kernel *kb, *ka;
} row;

/* the recipes to check: the named ones (none: "none"), or every built-in and fast-kernel recipe
 * with fp8 Q (the bf16-Q ones' names into unaffected) */
static int pick_recipes(const char *cmd, const char *const *names, int n, row *out, int *nout,
                        char *unaffected, size_t un) {
  *nout = 0;
  unaffected[0] = 0;
  if (n == 1 && !strcmp(names[0], "none")) return MLR_EXIT_OK;
  for (int k = 0; k < n; k++) {
    if (!strcmp(names[k], "none"))
      return mlr_cli_usage_error(cmd, "--recipe none is given alone (the user kernels only)");
    const int rc = mlr_cli_recipe_sets(cmd, names[k], NULL, 0, &out[*nout].r);
    if (rc != MLR_EXIT_OK) return rc;
    if (out[*nout].r.q_format == MLR_Q_BF16)
      return mlr_cli_usage_error(cmd,
                                 "recipe '%s' has bf16 Q, which has no scale policy to check "
                                 "(--recipe names a recipe with fp8 Q)",
                                 names[k]);
    snprintf(out[*nout].name, sizeof out[*nout].name, "%s", out[*nout].r.name);
    (*nout)++;
  }
  for (int src = 0; !n && src < 2; src++) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", src ? mlr_gpu_fast_recipe_names() : mlr_recipe_builtin_names());
    for (char *save = NULL, *t = strtok_r(buf, "|", &save); t && *nout < MAXREC;
         t = strtok_r(NULL, "|", &save)) {
      mlr_recipe r;
      if (src)
        mlr_gpu_fast_recipe(t, &r);
      else
        mlr_recipe_builtin(t, &r);
      if (r.q_format != MLR_Q_BF16) {
        out[*nout].r = r;
        snprintf(out[(*nout)++].name, sizeof out->name, "%s", t);
      } else
        snprintf(unaffected + strlen(unaffected), un - strlen(unaffected), "%s%s",
                 unaffected[0] ? ", " : "", t);
    }
  }
  return MLR_EXIT_OK;
}

static json_t *point_json(const char *policy, const mlr_policy_point *p,
                          int pass) { /* pass: at most the threshold */
  return json_pack("{s:s,s:f,s:f,s:f,s:f,s:b}", "policy", policy, "util_max", p->util_max,
                   "util_p999", p->util_p999, "clipped_fraction", p->clipped_frac, "rel_l2",
                   p->rel_l2, "pass", pass);
}

typedef struct pc_opts {
  const char *policy, *against, *suite, *gpu;
  const char *recipes[MAXREC], *files[MAXSHAPES];
  shape shapes[MAXSHAPES];
  int nshape, nrec, nfiles, threads, json;
  double rtol, atol, threshold, margin;
  mlr_cli_kernel_args ka;
} pc_opts;

/* the figures of an output o (n = T H 512 values of a kernel computing r) whose kernel clipped
 * `clipped` Q elements: mlr_budget_point_of on its values in binary64 */
static mlr_status output_point(const mlr_recipe *r, const mlr_inputs *in, const mlr_cmp_tensor *o,
                               int64_t clipped, const double *truth, double rtol, double atol,
                               mlr_policy_point *p, mlr_error *err) {
  double *v = malloc((size_t)(o->n > 0 ? o->n : 1) * sizeof(double));
  if (!v) return mlr_error_set(err, MLR_ENOMEM, "out of memory for a kernel's output");
  for (int64_t i = 0; i < o->n; i++) v[i] = mlr_cmp_value(o, i);
  const mlr_status st = mlr_budget_point_of(r, in, v, clipped, truth, rtol, atol, p, err);
  free(v);
  return st;
}

/* the fast kernel's own output on the GPU under recipe r: the figures mlr_budget_policy_point gives
 * for the model. MLR_EINVAL when the kernel does not compute r or take these inputs. */
static mlr_status gpu_point(const mlr_recipe *r, const mlr_inputs *in, const double *truth,
                            double rtol, double atol, mlr_policy_point *p, mlr_error *err) {
  mlr_gpu_fast *f = NULL;
  mlr_emu_result res;
  memset(&res, 0, sizeof res);
  double us;
  mlr_status st = mlr_gpu_fast_fit(r, in, err);
  if (st == MLR_OK) st = mlr_gpu_fast_prepare(r, in, NULL, &f, err);
  if (st == MLR_OK) st = mlr_gpu_fast_launch(f, 0, &us, err);
  if (st == MLR_OK) st = mlr_gpu_fast_result(f, &res, err);
  mlr_gpu_fast_free(f);
  if (st == MLR_OK) {
    const mlr_cmp_tensor o = {res.out_format == MLR_OUT_FP32 ? MLR_CT_F32 : MLR_CT_BF16, res.o,
                              in->T * in->H * MLR_EMU_V_DIM};
    st = output_point(r, in, &o, res.q_clipped, truth, rtol, atol, p, err);
  }
  mlr_emu_result_free(&res);
  return st;
}

/* the verdict of a change from the two points (the check's verdicts aside) */
static void judge(cell *c, double threshold, double margin) {
  c->pass_before = c->before.util_max <= threshold;
  c->pass_after = c->after.util_max <= threshold;
  c->verdict = c->pass_after                                                               ? V_PASS
               : !c->pass_before && c->after.util_max <= (1 + margin) * c->before.util_max ? V_SAME
                                                                                           : V_FAIL;
}

/* whether a recipe runs on the inputs under a policy: 1, or 0 with the reason in c (e.g. bf16 KV
 * for an fp8-KV recipe, fp8 Q codes in the inputs, a policy the GPU kernel does not compute) */
static int fits(const mlr_recipe *before, const mlr_recipe *after, const mlr_inputs *in, int gpu,
                cell *c) {
  mlr_error fit = {""};
  if (in->q8)
    snprintf(fit.msg, sizeof fit.msg,
             "the inputs' Q is fp8 codes with their q_scale already: "
             "no Q scale policy applies to it");
  else if (mlr_emu_check_fit(before, in, &fit) == MLR_OK &&
           (!gpu || (mlr_gpu_fast_fit(before, in, &fit) == MLR_OK &&
                     mlr_gpu_fast_fit(after, in, &fit) == MLR_OK)))
    return c->applicable = 1;
  snprintf(c->reason, sizeof c->reason, "%.255s", fit.msg);
  return 0;
}

/* a model's cell (or the fast kernel's on the GPU): its figures under both policies */
static mlr_status model_cell(const row *w, const pc_opts *o, const mlr_inputs *in,
                             const double *truth, cell *c, mlr_error *err) {
  mlr_recipe before = w->r, after = w->r;
  mlr_status st = MLR_OK;
  if (o->against && (st = mlr_recipe_set_policy(&before, o->against, err)) != MLR_OK) return st;
  if ((st = mlr_recipe_set_policy(&after, o->policy, err)) != MLR_OK) return st;
  mlr_recipe_policy_text(&before, c->before_policy, sizeof c->before_policy);
  if (!fits(&before, &after, in, w->on_gpu, c)) return MLR_OK;
  if (w->on_gpu) {
    if ((st = gpu_point(&before, in, truth, o->rtol, o->atol, &c->before, err)) == MLR_OK)
      st = gpu_point(&after, in, truth, o->rtol, o->atol, &c->after, err);
  } else if ((st = mlr_budget_policy_point(&before, in, truth, o->rtol, o->atol, o->threads,
                                           &c->before, err)) == MLR_OK)
    st = mlr_budget_policy_point(&after, in, truth, o->rtol, o->atol, o->threads, &c->after, err);
  judge(c, o->threshold, o->margin);
  return st;
}

/* a user kernel run on the cell (side 0: the policy before, 1: after): its check's verdict and,
 * where it wrote an o of the right shape, the figures (the clipped fraction is the model's: the
 * policy's on these inputs) */
static mlr_status user_side(const mlr_kernel *k, const mlr_kernel_cell *kc, const pc_opts *o,
                            const double *truth, cell *c, int side, mlr_error *err) {
  mlr_kernel_result res;
  mlr_status st = mlr_kernel_run_cell(k, kc, &res, err);
  c->check[side] = res.verdict;
  snprintf(c->check_reason[side], sizeof c->check_reason[side], "%s", res.reason);
  const mlr_tensor *t = mlr_tf_find(&res.out, "o");
  mlr_policy_point *p = side ? &c->after : &c->before, model;
  if (st == MLR_OK && t && res.verdict != MLR_KERNEL_ERROR) {
    const mlr_cmp_tensor ot = {t->dtype == MLR_DT_F32   ? MLR_CT_F32
                               : t->dtype == MLR_DT_F16 ? MLR_CT_F16
                                                        : MLR_CT_BF16,
                               t->data, kc->in->T * kc->in->H * MLR_EMU_V_DIM};
    st = output_point(&k->recipe, kc->in, &ot, 0, truth, o->rtol, o->atol, p, err);
    if (st == MLR_OK)
      st = mlr_budget_policy_point(&k->recipe, kc->in, truth, o->rtol, o->atol, o->threads, &model,
                                   err);
    if (st == MLR_OK) p->clipped_frac = model.clipped_frac;
    c->has_point[side] = st == MLR_OK;
  }
  mlr_kernel_result_free(&res);
  return st;
}

/* a user kernel's cell: the kernel under both policies (the inputs written for it into path once
 * a shape), then the verdict: FAIL check where either output fails its check */
static mlr_status user_cell(const row *w, const pc_opts *o, const char *dir, const shape *sh,
                            const mlr_tensor_file *tf, const mlr_inputs *in, const double *truth,
                            char path[4096], cell *c, mlr_error *err) {
  mlr_recipe_policy_text(&w->kb->recipe, c->before_policy, sizeof c->before_policy);
  if (!fits(&w->kb->recipe, &w->ka->recipe, in, 0, c)) return MLR_OK;
  mlr_status st = MLR_OK;
  if (!path[0] && (st = mlr_kernel_write_inputs(dir, sh->name, tf, path, err)) != MLR_OK) return st;
  const char *spec = sh->file ? mlr_tf_get_meta(tf, "mlaref.shape") : sh->spec;
  const mlr_kernel_cell kc = {dir, sh->name, path, in, spec, o->threads, MLAREF_COMMIT};
  if ((st = user_side(w->kb, &kc, o, truth, c, 0, err)) != MLR_OK ||
      (st = user_side(w->ka, &kc, o, truth, c, 1, err)) != MLR_OK)
    return st;
  if (c->check[0] != MLR_KERNEL_PASS || c->check[1] != MLR_KERNEL_PASS)
    c->verdict = V_CHECK;
  else
    judge(c, o->threshold, o->margin);
  return MLR_OK;
}

/* one shape: its inputs, the truth once, then every kernel under both policies (a user kernel's
 * files in dir) */
static int run_shape(const char *cmd, const pc_opts *o, const shape *sh, const row *rows, int nr,
                     const char *dir, cell *out) {
  mlr_tensor_file tf;
  mlr_inputs in;
  int rc = sh->file ? mlr_cli_read_inputs(cmd, sh->file, 0, &tf, &in)
                    : mlr_cli_gen_memory(cmd, "shape", sh->spec, &tf, &in, NULL);
  if (rc != MLR_EXIT_OK) return rc;
  mlr_error err = {""};
  double *truth;
  char path[4096] = "";
  mlr_status st = mlr_oracle_o(&in, MLR_TRUTH_DEQUANTIZED, &truth, &err);
  for (int k = 0; st == MLR_OK && k < nr; k++) {
    memset(&out[k], 0, sizeof out[k]);
    st = rows[k].kb ? user_cell(&rows[k], o, dir, sh, &tf, &in, truth, path, &out[k], &err)
                    : model_cell(&rows[k], o, &in, truth, &out[k], &err);
  }
  if (path[0]) remove(path);
  free(truth);
  mlr_tf_free(&tf);
  if (st == MLR_OK) return MLR_EXIT_OK;
  if (st == MLR_EINVAL || st == MLR_EPARSE)
    return mlr_cli_usage_error(cmd, "%s: %s", sh->name, err.msg);
  fprintf(stderr, "mlaref %s: %s: %s\n", cmd, sh->name, err.msg);
  return MLR_EXIT_FAIL;
}

/* the recommendation for a user kernel whose output fails its check on some shape: into buf */
static void recommend_check(const row *w, const cell *cells, int k, int nr, const shape *shapes,
                            int ns, const char *policy, char *buf, size_t n) {
  int na = 0, fb = 0, fa = 0, first = -1;
  for (int s = 0; s < ns; s++) {
    const cell *c = &cells[s * nr + k];
    na += c->applicable;
    fb += c->applicable && c->check[0] != MLR_KERNEL_PASS;
    fa += c->applicable && c->check[1] != MLR_KERNEL_PASS;
    if (first < 0 && c->verdict == V_CHECK) first = s;
  }
  const cell *f = &cells[first * nr + k];
  snprintf(buf, n,
           "%.64s: its output fails its check (%.64s) under %.64s on %d and under %.64s on %d "
           "of %d shapes: fix the kernel before judging the policy (first, %.64s: %.400s)",
           w->name, w->kb->recipe_label, f->before_policy, fb, policy, fa, na, shapes[first].name,
           f->check_reason[f->check[0] != MLR_KERNEL_PASS ? 0 : 1]);
}

/* the recommendation for row k over every shape: into buf; returns 1 when a cell FAILs */
static int recommend(const row *w, const cell *cells, int k, int nr, const shape *shapes, int ns,
                     const char *policy, double threshold, char *buf, size_t n) {
  int na = 0, nfail = 0, nsame = 0, ncheck = 0, worst = -1, worst_fail = -1;
  for (int s = 0; s < ns; s++) {
    const cell *c = &cells[s * nr + k];
    if (!c->applicable) continue;
    na++;
    nfail += c->verdict == V_FAIL;
    nsame += c->verdict == V_SAME;
    ncheck += c->verdict == V_CHECK;
    if (c->verdict == V_CHECK) continue;
    if (worst < 0 || c->after.util_max > cells[worst * nr + k].after.util_max) worst = s;
    if (c->verdict == V_FAIL &&
        (worst_fail < 0 ||
         c->after.util_max - c->before.util_max > cells[worst_fail * nr + k].after.util_max -
                                                      cells[worst_fail * nr + k].before.util_max))
      worst_fail = s;
  }
  if (ncheck) {
    recommend_check(w, cells, k, nr, shapes, ns, policy, buf, n);
    return 1;
  }
  if (!na) {
    snprintf(buf, n, "%.64s: no shape it runs on (nothing checked)", w->name);
    return 0;
  }
  const cell *c = &cells[worst * nr + k], *f = worst_fail >= 0 ? &cells[worst_fail * nr + k] : c;
  if (!nfail && !nsame)
    snprintf(buf, n,
             "%.64s: safe to switch to %.64s: worst utilisation %.3g (%.64s, was %.3g under %.64s; "
             "%.3g%% of Q clipped) on %d shapes",
             w->name, policy, c->after.util_max, shapes[worst].name, c->before.util_max,
             c->before_policy, 100 * c->after.clipped_frac, na);
  else if (!nfail)
    snprintf(buf, n,
             "%.64s: %.64s is no worse than %.64s, but %d of %d shapes are over %g under both "
             "(worst %.64s: %.3g, was %.3g; %.3g%% of Q "
             "clipped): the current policy's problem too",
             w->name, policy, c->before_policy, nsame, na, threshold, shapes[worst].name,
             c->after.util_max, c->before.util_max, 100 * c->after.clipped_frac);
  else
    snprintf(buf, n,
             "%.64s: do not switch to %.64s: it fails on %d of %d shapes, most on %.64s "
             "(utilisation %.3g, was %.3g under %.64s; %.3g%% of Q "
             "clipped, was %.3g%%)",
             w->name, policy, nfail, na, shapes[worst_fail].name, f->after.util_max,
             f->before.util_max, f->before_policy, 100 * f->after.clipped_frac,
             100 * f->before.clipped_frac);
  return nfail > 0;
}

/* --inputs FILE... at argv[*i]: the files up to the next option into o->files; 1 when it is that
 * option (*rc set on a usage error), else 0 */
static int inputs_opt(const char *cmd, int argc, char **argv, int *i, pc_opts *o, int *rc) {
  const char *v;
  const int m = mlr_cli_opt(argc, argv, i, "inputs", &v);
  if (!m) return 0;
  if (m < 0 || o->nfiles == MAXSHAPES) {
    *rc = mlr_cli_usage_error(cmd, "--inputs needs FILE... (inputs files, a cell each; at most %d)",
                              MAXSHAPES);
    return 1;
  }
  o->files[o->nfiles++] = v;
  while (*i + 1 < argc && strncmp(argv[*i + 1], "--", 2) && o->nfiles < MAXSHAPES)
    o->files[o->nfiles++] = argv[++*i];
  return 1;
}

/* the numeric options at argv[*i]: 1 when one of them (*rc set on a usage error), else 0 */
static int number_opt(const char *cmd, int argc, char **argv, int *i, pc_opts *o, int *rc) {
  const char *v;
  int m;
  if ((m = mlr_cli_opt(argc, argv, i, "tolerance", &v)))
    *rc = mlr_cli_parse_tolerance(cmd, m > 0 ? v : NULL, &o->rtol, &o->atol);
  else if ((m = mlr_cli_opt(argc, argv, i, "threshold", &v))) {
    if (m < 0 || mlr_cli_parse_double(v, &o->threshold) || !(o->threshold > 0) ||
        !isfinite(o->threshold))
      *rc = mlr_cli_usage_error(
          cmd, "--threshold needs a number > 0 (the largest utilisation that passes)");
  } else if ((m = mlr_cli_opt(argc, argv, i, "margin", &v))) {
    if (m < 0 || mlr_cli_parse_double(v, &o->margin) || !(o->margin >= 0) || !isfinite(o->margin))
      *rc = mlr_cli_usage_error(cmd, "--margin needs a number >= 0 (how much higher a utilisation "
                                     "already over the threshold may get, 0.1 = 10%%)");
  }
  return m != 0;
}

/* the command line into o: MLR_EXIT_OK, or a usage error's exit code */
static int parse_args(const char *cmd, int argc, char **argv, pc_opts *o) {
  int rc = MLR_EXIT_OK;
  for (int i = 0; i < argc; i++) {
    const char *v;
    int m;
    if (mlr_cli_str(cmd, argc, argv, &i, "policy", "static:absmax=A|dynamic|per_head|per_token",
                    &o->policy, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "against", "static:absmax=A|dynamic|per_head|per_token",
                    &o->against, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "suite", mlr_suite_names(), &o->suite, &rc) ||
        mlr_cli_max_memory_opt(cmd, argc, argv, &i, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "gpu", "auto, off or require", &o->gpu, &rc) ||
        mlr_cli_list(cmd, argc, argv, &i, "recipe", "a name or file, or none", o->recipes, &o->nrec,
                     MAXREC, &rc) ||
        mlr_cli_threads_opt(cmd, argc, argv, &i, &o->threads, &rc) ||
        mlr_cli_kernel_opt(cmd, argc, argv, &i, &o->ka, &rc) ||
        inputs_opt(cmd, argc, argv, &i, o, &rc) || number_opt(cmd, argc, argv, &i, o, &rc)) {
      if (rc) return rc;
    } else if ((m = mlr_cli_opt(argc, argv, &i, "shape", &v))) {
      if (m < 0 || o->nshape == MAXSHAPES)
        return mlr_cli_usage_error(cmd, "--shape needs a SPEC, e.g. bs=4,kv=1024 (at most %d)",
                                   MAXSHAPES);
      o->shapes[o->nshape].name = v;
      o->shapes[o->nshape++].spec = v;
    } else if (!strcmp(argv[i], "--json"))
      o->json = 1;
    else
      return mlr_cli_unknown_option(cmd, argv[i],
                                    "--policy --against --suite --shape --inputs --recipe "
                                    "--tolerance --threshold --margin --threads --gpu "
                                    "--max-memory --json --kernel --kernel-recipe "
                                    "--kernel-timeout --kernel-rule --kernel-inputs");
  }
  return MLR_EXIT_OK;
}

/* the inputs files as cells, each named by its basename (once), read and checked now so that a
 * bad one costs nothing */
static int file_cells(const char *cmd, pc_opts *o) {
  for (int k = 0; k < o->nfiles; k++) {
    const char *slash = strrchr(o->files[k], '/'), *name = slash ? slash + 1 : o->files[k];
    for (int j = 0; j < k; j++)
      if (!strcmp(o->shapes[j].name, name))
        return mlr_cli_usage_error(cmd,
                                   "--inputs %s and %s: two cells named '%s' (a cell is named "
                                   "by its file's basename: give each file its own)",
                                   o->shapes[j].file, o->files[k], name);
    o->shapes[o->nshape++] = (shape){name, o->files[k], o->files[k]};
    double bytes;
    mlr_tensor_file tf;
    mlr_inputs in;
    int rc = mlr_cli_file_fits(cmd, o->files[k], &bytes);
    if (rc == MLR_EXIT_OK && (rc = mlr_cli_read_inputs(cmd, o->files[k], 0, &tf, &in)) == 0)
      mlr_tf_free(&tf);
    if (rc != MLR_EXIT_OK) return rc;
  }
  return MLR_EXIT_OK;
}

/* the shapes: the --shape specs (each checked), the inputs files, or the suite's (default
 * nightly) */
static int pick_shapes(const char *cmd, pc_opts *o) {
  if (o->suite && o->nshape)
    return mlr_cli_usage_error(cmd, "--suite and --shape: give one of them");
  if (o->nfiles && (o->suite || o->nshape))
    return mlr_cli_usage_error(cmd,
                               "--inputs and --%s: give one of them (the inputs files are "
                               "the cells)",
                               o->suite ? "suite" : "shape");
  if (o->nfiles) return file_cells(cmd, o);
  if (!o->nshape) {
    const mlr_suite *su = mlr_suite_find(o->suite ? o->suite : "nightly");
    if (!su)
      return mlr_cli_usage_error(cmd, "--suite '%s' is not a suite (valid: %s)", o->suite,
                                 mlr_suite_names());
    for (size_t k = 0; k < su->n && o->nshape < MAXSHAPES; k++)
      o->shapes[o->nshape++] = (shape){su->cells[k].name, su->cells[k].spec, NULL};
  }
  for (int k = 0; k < o->nshape; k++) {
    mlr_gen_spec gs;
    const int rc = mlr_cli_spec_fits(cmd, "shape", o->shapes[k].spec, &gs);
    if (rc != MLR_EXIT_OK) return rc;
    mlr_gen_spec_free(&gs);
  }
  return MLR_EXIT_OK;
}

/* every check before any work or output (bad input prints one line only): the options together,
 * both policies, every shape's spec or file */
static int check_inputs(const char *cmd, pc_opts *o) {
  if (!o->policy) return mlr_cli_usage_fail(cmd);
  if (strcmp(o->gpu, "auto") && strcmp(o->gpu, "off") && strcmp(o->gpu, "require"))
    return mlr_cli_usage_error(cmd, "--gpu '%s' is not one of auto|off|require", o->gpu);
  if (o->ka.npolicies)
    return mlr_cli_usage_error(cmd, "--kernel-policy: policy-check runs every kernel under "
                                    "--against and under --policy (no policy of its own)");
  if (o->nrec == 1 && !strcmp(o->recipes[0], "none") && !o->ka.nspecs)
    return mlr_cli_usage_error(cmd, "--recipe none leaves no kernel to check: give a --kernel");
  /* both policies parsed against a recipe with fp8 Q */
  mlr_recipe probe;
  mlr_recipe_builtin("fp32-seq", &probe);
  probe.q_format = MLR_Q_E4M3;
  probe.q_scale = MLR_QS_DYNAMIC;
  mlr_error err = {""};
  if (mlr_recipe_set_policy(&probe, o->policy, &err) != MLR_OK)
    return mlr_cli_usage_error(cmd, "--policy: %s", err.msg);
  if (o->against && mlr_recipe_set_policy(&probe, o->against, &err) != MLR_OK)
    return mlr_cli_usage_error(cmd, "--against: %s", err.msg);
  return pick_shapes(cmd, o);
}

/* the user kernels, each defined under the policy before (kb: --against, else its recipe's own)
 * and after (ka), as rows after the n already in rows */
static int add_user_kernels(const char *cmd, const pc_opts *o, mlr_kernel *kb, mlr_kernel *ka,
                            row *rows, int *n) {
  int rc = mlr_cli_kernels_define(cmd, &o->ka, NULL, kb); /* first each recipe as claimed */
  for (int k = 0; rc == MLR_EXIT_OK && k < o->ka.nspecs; k++)
    if (kb[k].recipe.q_format == MLR_Q_BF16)
      return mlr_cli_usage_error(cmd,
                                 "--kernel-recipe %s=%s: recipe '%s' has bf16 Q, which has no "
                                 "scale policy to check (claim a recipe with fp8 Q)",
                                 kb[k].name, kb[k].recipe_label, kb[k].recipe.name);
  if (rc == MLR_EXIT_OK && o->against) rc = mlr_cli_kernels_define(cmd, &o->ka, o->against, kb);
  if (rc == MLR_EXIT_OK) rc = mlr_cli_kernels_define(cmd, &o->ka, o->policy, ka);
  for (int k = 0; rc == MLR_EXIT_OK && k < o->ka.nspecs; k++) {
    if (!o->against) /* its own policy, named, so that {q_scale} is its static scale */
      mlr_recipe_policy_text(&kb[k].recipe, kb[k].policy, sizeof kb[k].policy);
    row *w = &rows[(*n)++];
    memset(w, 0, sizeof *w);
    w->r = kb[k].recipe;
    snprintf(w->name, sizeof w->name, "kernel %.63s", kb[k].name);
    w->kb = &kb[k];
    w->ka = &ka[k];
  }
  return rc;
}

/* the GPU kernels (gpu not "off" and a GPU found: its name into device, else ""): each fast-kernel
 * recipe of rows again, run on the GPU (on_gpu) */
static int add_gpu_kernels(const char *cmd, const char *gpu, row *rows, int *nrec, char *device,
                           size_t dn) {
  if (!strcmp(gpu, "off")) return MLR_EXIT_OK;
  mlr_error ge = {""};
  if (mlr_gpu_device(device, dn, &ge) != MLR_OK) {
    if (!strcmp(gpu, "require")) return mlr_cli_usage_error(cmd, "--gpu require: %s", ge.msg);
    device[0] = 0;
  }
  mlr_recipe fast;
  for (int k = 0, n0 = *nrec; device[0] && k < n0 && *nrec < MAXREC; k++)
    if (mlr_gpu_fast_fit(&rows[k].r, NULL, &ge) == MLR_OK ||
        mlr_gpu_fast_recipe(rows[k].r.name, &fast) == MLR_OK) {
      rows[*nrec] = rows[k];
      rows[*nrec].on_gpu = 1;
      snprintf(rows[*nrec].name, sizeof rows[*nrec].name, "%.56s (GPU)", rows[k].r.name);
      (*nrec)++;
    }
  return MLR_EXIT_OK;
}

static void print_header(const pc_opts *o, const row *rows, int nrow, const char *unaffected,
                         const char *device, int sw) {
  printf("mlaref policy-check: Q policy %s against %s; %d kernels x %d shapes; truth: certified, "
         "dequantized KV; utilisation |out - truth| / (%g + %g "
         "|truth|), pass at most %g (or, over it before too, at most %g%% higher)\n",
         o->policy, o->against ? o->against : "each recipe's own", nrow, o->nshape, o->atol,
         o->rtol, o->threshold, 100 * o->margin);
  if (unaffected[0]) printf("unaffected (bf16 Q, no scale): %s\n", unaffected);
  printf("GPU kernels: %s%s\n", device[0] ? "the fast kernel's own outputs on " : "none (",
         device[0]                ? device
         : !strcmp(o->gpu, "off") ? "--gpu off)"
                                  : "no GPU found)");
  for (int k = 0; k < nrow; k++)
    if (rows[k].kb)
      printf("user kernel %s: claims %s, run under both policies ({q_scale} %.9g before, %.9g "
             "after), its output checked against that recipe each time\n",
             rows[k].kb->name, rows[k].kb->recipe_label, mlr_kernel_q_scale(rows[k].kb),
             mlr_kernel_q_scale(rows[k].ka));
  printf("%-22s %-*s %-18s %9s %9s %9s  -> %9s %9s %9s  %s\n", "kernel", sw, "shape",
         "policy before", "util max", "p99.9", "clipped%", "util max", "p99.9", "clipped%",
         "verdict");
}

/* one point's three columns, or dashes where the output gave none */
static void print_point(const mlr_policy_point *p, int has) {
  if (has)
    printf("%9.4g %9.4g %9.3g", p->util_max, p->util_p999, 100 * p->clipped_frac);
  else
    printf("%9s %9s %9s", "-", "-", "-");
}

/* a cell's row of the table; a user kernel's failed checks below it */
static void print_cell(const row *w, const shape *sh, const cell *c, int sw, const char *policy) {
  if (!c->applicable) {
    printf("%-22s %-*s n/a: %s\n", w->name, sw, sh->name, c->reason);
    return;
  }
  const int user = w->kb != NULL;
  printf("%-22s %-*s %-18s ", w->name, sw, sh->name, c->before_policy);
  print_point(&c->before, !user || c->has_point[0]);
  printf("  -> ");
  print_point(&c->after, !user || c->has_point[1]);
  printf("  %s\n", VERDICT[c->verdict]);
  for (int side = 0; user && side < 2; side++)
    if (c->check[side] != MLR_KERNEL_PASS)
      printf("  check under %s: %s\n", side ? policy : c->before_policy, c->check_reason[side]);
}

/* every shape, its row a kernel printed as it comes (not with --json); sw: the shape column's
 * width; the user kernels' files in dir */
static int run_shapes(const char *cmd, const pc_opts *o, const row *rows, int nrow, int sw,
                      const char *dir, double t0, cell *cells) {
  const int progress = !o->json && isatty(2);
  int rc = MLR_EXIT_OK;
  for (int s = 0; s < o->nshape && rc == MLR_EXIT_OK; s++) {
    const shape *sh = &o->shapes[s];
    if (progress)
      fprintf(stderr, "\rpolicy-check: shape %d of %d (%s), %.0f s   ", s + 1, o->nshape, sh->name,
              mlr_cli_now() - t0);
    rc = run_shape(cmd, o, sh, rows, nrow, dir, &cells[s * nrow]);
    if (progress) fprintf(stderr, "\r%60s\r", "");
    for (int k = 0; !o->json && rc == MLR_EXIT_OK && k < nrow; k++)
      print_cell(&rows[k], sh, &cells[s * nrow + k], sw, o->policy);
    fflush(stdout);
  }
  return rc;
}

/* a user kernel's checks as JSON: under each policy, the verdict and reason */
static json_t *checks_json(const row *w, const cell *c, const char *policy) {
  json_t *a = json_array();
  for (int side = 0; side < 2; side++)
    json_array_append_new(a, json_pack("{s:s,s:s,s:s}", "policy", side ? policy : c->before_policy,
                                       "verdict", mlr_kernel_verdict_name(c->check[side]), "reason",
                                       c->check_reason[side]));
  (void)w;
  return a;
}

/* the cells of row k as JSON objects into jc */
static void cells_json(const pc_opts *o, const row *w, const cell *cells, int k, int nrow,
                       json_t *jc) {
  for (int s = 0; s < o->nshape; s++) {
    const cell *c = &cells[s * nrow + k];
    json_t *j = json_pack("{s:s,s:s,s:s,s:b}", "recipe", w->r.name, "shape", o->shapes[s].name,
                          "spec", o->shapes[s].spec, "applicable", c->applicable);
    if (w->kb) json_object_set_new(j, "kernel", json_string(w->kb->name));
    if (c->applicable) {
      if (!w->kb || c->has_point[0])
        json_object_set_new(j, "before", point_json(c->before_policy, &c->before, c->pass_before));
      if (!w->kb || c->has_point[1])
        json_object_set_new(j, "after", point_json(o->policy, &c->after, c->pass_after));
      if (w->kb) json_object_set_new(j, "checks", checks_json(w, c, o->policy));
      json_object_set_new(j, "verdict", json_string(VERDICT[c->verdict]));
    } else
      json_object_set_new(j, "reason", json_string(c->reason));
    json_array_append_new(jc, j);
  }
}

/* the user kernels' cells that FAIL, one line each: the utilisation that moved, or the check */
static void print_moved(const pc_opts *o, const row *rows, int nrow, const cell *cells) {
  int header = 0;
  for (int k = 0; k < nrow; k++)
    for (int s = 0; rows[k].kb && s < o->nshape; s++) {
      const cell *c = &cells[s * nrow + k];
      if (!c->applicable || (c->verdict != V_FAIL && c->verdict != V_CHECK)) continue;
      if (!header++) printf("user kernels' cells that FAIL:\n");
      if (c->verdict == V_FAIL)
        printf("  %s, cell %s: utilisation max %.4g under %s -> %.4g under %s (Q clipped %.3g%% "
               "-> %.3g%%)\n",
               rows[k].name, o->shapes[s].name, c->before.util_max, c->before_policy,
               c->after.util_max, o->policy, 100 * c->before.clipped_frac,
               100 * c->after.clipped_frac);
      for (int side = 0; side < 2; side++)
        if (c->verdict == V_CHECK && c->check[side] != MLR_KERNEL_PASS)
          printf("  under %s: %s\n", side ? o->policy : c->before_policy, c->check_reason[side]);
    }
}

/* the counts of applicable cells and failing ones over every row */
static void count_cells(const pc_opts *o, int nrow, const cell *cells, int *ncells, int *nfail) {
  *ncells = *nfail = 0;
  for (int i = 0; i < o->nshape * nrow; i++)
    if (cells[i].applicable) {
      (*ncells)++;
      *nfail += cells[i].verdict == V_FAIL || cells[i].verdict == V_CHECK;
    }
}

/* the whole result as one JSON document on stdout */
static void print_json(const pc_opts *o, json_t *jk, json_t *jc, const char *unaffected,
                       const char *device, const char *verdict) {
  json_t *root =
      json_pack("{s:s,s:s,s:s,s:f,s:f,s:f,s:f,s:s}", "mlaref_version", MLAREF_VERSION, "policy",
                o->policy, "against", o->against ? o->against : "own", "rtol", o->rtol, "atol",
                o->atol, "threshold", o->threshold, "margin", o->margin, "truth", "dequantized");
  json_object_set_new(root, "kernels", jk);
  json_object_set_new(root, "cells", jc);
  json_object_set_new(root, "unaffected", json_string(unaffected));
  json_object_set_new(root, "gpu_device", json_string(device)); /* "": the GPU kernels not run */
  json_object_set_new(root, "verdict", json_string(verdict));
  char *s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
  if (s) printf("%s\n", s);
  free(s);
  json_decref(root);
}

/* the recommendations, one a kernel, the user kernels' failing cells and the change's verdict:
 * printed, or the whole result as JSON; returns the number of kernels that fail */
static int report(const pc_opts *o, const row *rows, int nrow, const cell *cells,
                  const char *unaffected, const char *device, double t0) {
  int failing = 0, ncells, nfail;
  json_t *jk = json_array(), *jc = json_array();
  if (!o->json) printf("recommendations:\n");
  for (int k = 0; k < nrow; k++) {
    char line[1536];
    const int f = recommend(&rows[k], cells, k, nrow, o->shapes, o->nshape, o->policy, o->threshold,
                            line, sizeof line);
    failing += f;
    if (o->json) {
      json_t *j =
          json_pack("{s:s,s:b,s:s}", "recipe", rows[k].r.name, "fails", f, "recommendation", line);
      if (rows[k].kb) json_object_set_new(j, "kernel", json_string(rows[k].kb->name));
      json_array_append_new(jk, j);
      cells_json(o, &rows[k], cells, k, nrow, jc);
    } else
      printf("  %s\n", line);
  }
  count_cells(o, nrow, cells, &ncells, &nfail);
  char verdict[256];
  snprintf(verdict, sizeof verdict, "%.64s: %d of %d kernels fail on %d of %d kernel x shape cells",
           o->policy, failing, nrow, nfail, ncells);
  if (o->json) {
    print_json(o, jk, jc, unaffected, device, verdict);
    return failing;
  }
  json_decref(jk);
  json_decref(jc);
  print_moved(o, rows, nrow, cells);
  printf("policy-check: %s (%.1f s)\n", verdict, mlr_cli_now() - t0);
  return failing;
}

/* the rows: the recipes, the GPU kernels, the user kernels; an exit code */
static int pick_rows(const char *cmd, const pc_opts *o, row *rows, int *nrow, mlr_kernel *kb,
                     mlr_kernel *ka, char *unaffected, size_t un, char *device, size_t dn) {
  int rc = pick_recipes(cmd, o->recipes, o->nrec, rows, nrow, unaffected, un);
  if (rc == MLR_EXIT_OK) rc = add_user_kernels(cmd, o, kb, ka, rows, nrow);
  if (rc != MLR_EXIT_OK) return rc;
  /* the GPU copies go between the models and the user kernels: move the user kernels last */
  const int nuser = o->ka.nspecs, nmodel = *nrow - nuser;
  static row user[MLR_CLI_MAX_KERNELS];
  memcpy(user, rows + nmodel, (size_t)nuser * sizeof *rows);
  *nrow = nmodel;
  rc = add_gpu_kernels(cmd, o->gpu, rows, nrow, device, dn);
  memcpy(rows + *nrow, user, (size_t)nuser * sizeof *rows);
  *nrow += nuser;
  return rc;
}

int mlr_cmd_policy_check(int argc, char **argv) {
  const char *cmd = "policy-check";
  static pc_opts o;
  o = (pc_opts){.gpu = "auto", .rtol = 1e-2, .atol = 1e-2, .threshold = 1.0, .margin = 0.1};
  int rc = parse_args(cmd, argc, argv, &o);
  if (rc == MLR_EXIT_OK) rc = check_inputs(cmd, &o);
  if (rc != MLR_EXIT_OK) return rc;
  static row rows[MAXROWS];
  static mlr_kernel kb[MLR_CLI_MAX_KERNELS], ka[MLR_CLI_MAX_KERNELS];
  char unaffected[512], device[256] = "", dir[4096] = "";
  int nrow = 0;
  if ((rc = pick_rows(cmd, &o, rows, &nrow, kb, ka, unaffected, sizeof unaffected, device,
                      sizeof device)) != MLR_EXIT_OK)
    return rc;
  mlr_error err = {""};
  if (o.ka.nspecs && mlr_kernel_workdir(dir, &err) != MLR_OK)
    return mlr_cli_fail(cmd, "%s", err.msg);
  cell *cells = calloc((size_t)o.nshape * (size_t)nrow, sizeof *cells);
  if (!cells) {
    mlr_kernel_workdir_remove(dir);
    return mlr_cli_fail(cmd, "out of memory");
  }
  int sw = 12; /* the shape column: as wide as the longest name */
  for (int s = 0; s < o.nshape; s++)
    sw = (int)strlen(o.shapes[s].name) > sw ? (int)strlen(o.shapes[s].name) : sw;
  if (!o.json) print_header(&o, rows, nrow, unaffected, device, sw);
  const double t0 = mlr_cli_now();
  rc = run_shapes(cmd, &o, rows, nrow, sw, dir, t0, cells);
  mlr_kernel_workdir_remove(dir);
  const int failing = rc == MLR_EXIT_OK ? report(&o, rows, nrow, cells, unaffected, device, t0) : 0;
  free(cells);
  if (rc != MLR_EXIT_OK) return rc;
  return failing ? MLR_EXIT_FAIL : MLR_EXIT_OK;
}
