/* mlaref policy-check --policy P [--against P0] [--suite NAME | --shape SPEC...]
 *                     [--recipe NAME|FILE]... [--tolerance RTOL,ATOL] [--threshold X]
 *                     [--margin M] [--threads N] [--gpu auto|off|require] [--json]
 * What a change of the fp8 Q scale policy does to every kernel, run whenever the policy changes.
 * For every recipe with fp8 Q (default: the built-ins' and the fast GPU kernel's; bf16-Q recipes
 * have no scale and are listed as unaffected) and every shape (default the nightly suite: the
 * bench and edge shapes and the Q distributions), the model's error against the certified truth
 * from the dequantized KV (so only Q's policy and the kernel's own arithmetic differ, as in
 * `budget --sweep`) under the current policy (--against, default the recipe's own) and under P:
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
#include "mlr_oracle.h"
#include "mlr_recipe.h"

enum { MAXREC = 24, MAXSHAPES = 64 };

typedef struct cell {
  int applicable;   /* the recipe fits the inputs */
  char reason[256]; /* why not */
  mlr_policy_point before, after;
  char before_policy[64];
  int pass_before, pass_after; /* utilisation max at most the threshold */
  int verdict;                 /* V_PASS, V_SAME or V_FAIL */
} cell;

enum { V_PASS, V_SAME, V_FAIL };
static const char *const VERDICT[] = {"pass", "no worse", "FAIL"};

typedef struct shape {
  const char *name, *spec;
} shape;

/* the recipes to check: the named ones, or every built-in and fast-kernel recipe with fp8 Q (the
 * bf16-Q ones' names into unaffected) */
static int pick_recipes(const char *cmd, const char **names, int n, mlr_recipe *out, int *nout,
                        char *unaffected, size_t un) {
  *nout = 0;
  unaffected[0] = 0;
  if (n) {
    for (int k = 0; k < n; k++) {
      const int rc = mlr_cli_recipe_sets(cmd, names[k], NULL, 0, &out[*nout]);
      if (rc != MLR_EXIT_OK) return rc;
      if (out[*nout].q_format == MLR_Q_BF16)
        return mlr_cli_usage_error(cmd,
                                   "recipe '%s' has bf16 Q, which has no scale policy to check "
                                   "(--recipe names a recipe with fp8 Q)",
                                   names[k]);
      (*nout)++;
    }
    return MLR_EXIT_OK;
  }
  for (int src = 0; src < 2; src++) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", src ? mlr_gpu_fast_recipe_names() : mlr_recipe_builtin_names());
    for (char *save = NULL, *t = strtok_r(buf, "|", &save); t && *nout < MAXREC;
         t = strtok_r(NULL, "|", &save)) {
      mlr_recipe r;
      if (src)
        mlr_gpu_fast_recipe(t, &r);
      else
        mlr_recipe_builtin(t, &r);
      if (r.q_format != MLR_Q_BF16)
        out[(*nout)++] = r;
      else
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
  if (st != MLR_OK) return st;
  /* its values in binary64, then the model's own figures (mlr_budget_point_of) */
  const int64_t n = in->T * in->H * MLR_EMU_V_DIM;
  const mlr_cmp_tensor o = {res.out_format == MLR_OUT_FP32 ? MLR_CT_F32 : MLR_CT_BF16, res.o, n};
  double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  if (!v) st = mlr_error_set(err, MLR_ENOMEM, "out of memory for the GPU kernel's output");
  for (int64_t i = 0; v && i < n; i++) v[i] = mlr_cmp_value(&o, i);
  if (st == MLR_OK) st = mlr_budget_point_of(r, in, v, res.q_clipped, truth, rtol, atol, p, err);
  free(v);
  mlr_emu_result_free(&res);
  return st;
}

/* one shape: its inputs, the truth once, then every recipe under both policies (on_gpu[k]: the
 * fast kernel's own output, not the model's) */
static int run_shape(const char *cmd, const shape *sh, const mlr_recipe *rs, const int *on_gpu,
                     int nr, const char *policy, const char *against, double rtol, double atol,
                     double threshold, double margin, int threads, cell *out) {
  mlr_tensor_file tf;
  mlr_inputs in;
  int rc = mlr_cli_gen_memory(cmd, "shape", sh->spec, &tf, &in, NULL);
  if (rc != MLR_EXIT_OK) return rc;
  mlr_error err = {""};
  double *truth;
  mlr_status st = mlr_oracle_o(&in, MLR_TRUTH_DEQUANTIZED, &truth, &err);
  for (int k = 0; st == MLR_OK && k < nr; k++) {
    cell *c = &out[k];
    memset(c, 0, sizeof *c);
    mlr_recipe before = rs[k], after = rs[k];
    if (against && (st = mlr_recipe_set_policy(&before, against, &err)) != MLR_OK) break;
    if ((st = mlr_recipe_set_policy(&after, policy, &err)) != MLR_OK) break;
    mlr_recipe_policy_text(&before, c->before_policy, sizeof c->before_policy);
    mlr_error fit = {""};
    if (mlr_emu_check_fit(&before, &in, &fit) != MLR_OK ||
        (on_gpu[k] && (mlr_gpu_fast_fit(&before, &in, &fit) != MLR_OK ||
                       mlr_gpu_fast_fit(&after, &in, &fit) != MLR_OK))) {
      /* e.g. bf16 KV for an fp8-KV recipe, a policy the GPU kernel does not compute: not this
       * kernel's input */
      snprintf(c->reason, sizeof c->reason, "%.255s", fit.msg);
      continue;
    }
    c->applicable = 1;
    if (on_gpu[k]) {
      if ((st = gpu_point(&before, &in, truth, rtol, atol, &c->before, &err)) != MLR_OK) break;
      if ((st = gpu_point(&after, &in, truth, rtol, atol, &c->after, &err)) != MLR_OK) break;
    } else {
      if ((st = mlr_budget_policy_point(&before, &in, truth, rtol, atol, threads, &c->before,
                                        &err)) != MLR_OK)
        break;
      if ((st = mlr_budget_policy_point(&after, &in, truth, rtol, atol, threads, &c->after,
                                        &err)) != MLR_OK)
        break;
    }
    c->pass_before = c->before.util_max <= threshold;
    c->pass_after = c->after.util_max <= threshold;
    c->verdict = c->pass_after ? V_PASS
                 : !c->pass_before && c->after.util_max <= (1 + margin) * c->before.util_max
                     ? V_SAME
                     : V_FAIL;
  }
  free(truth);
  mlr_tf_free(&tf);
  if (st == MLR_OK) return MLR_EXIT_OK;
  if (st == MLR_EINVAL || st == MLR_EPARSE)
    return mlr_cli_usage_error(cmd, "%s: %s", sh->name, err.msg);
  fprintf(stderr, "mlaref %s: %s: %s\n", cmd, sh->name, err.msg);
  return MLR_EXIT_FAIL;
}

/* the recommendation for recipe k over every shape: into buf; returns 1 when a cell FAILs */
static int recommend(const mlr_recipe *r, const cell *cells, int k, int nr, const shape *shapes,
                     int ns, const char *policy, double threshold, char *buf, size_t n) {
  int na = 0, nfail = 0, nsame = 0, worst = -1, worst_fail = -1;
  for (int s = 0; s < ns; s++) {
    const cell *c = &cells[s * nr + k];
    if (!c->applicable) continue;
    na++;
    nfail += c->verdict == V_FAIL;
    nsame += c->verdict == V_SAME;
    if (worst < 0 || c->after.util_max > cells[worst * nr + k].after.util_max) worst = s;
    if (c->verdict == V_FAIL &&
        (worst_fail < 0 ||
         c->after.util_max - c->before.util_max > cells[worst_fail * nr + k].after.util_max -
                                                      cells[worst_fail * nr + k].before.util_max))
      worst_fail = s;
  }
  if (!na) {
    snprintf(buf, n, "%.64s: no shape it runs on (nothing checked)", r->name);
    return 0;
  }
  const cell *w = &cells[worst * nr + k];
  if (!nfail && !nsame)
    snprintf(buf, n,
             "%.64s: safe to switch to %.64s: worst utilisation %.3g (%.64s, was %.3g under %.64s; "
             "%.3g%% of Q clipped) on %d shapes",
             r->name, policy, w->after.util_max, shapes[worst].name, w->before.util_max,
             w->before_policy, 100 * w->after.clipped_frac, na);
  else if (!nfail)
    snprintf(buf, n,
             "%.64s: %.64s is no worse than %.64s, but %d of %d shapes are over %g under both "
             "(worst %.64s: %.3g, was %.3g; %.3g%% of Q "
             "clipped): the current policy's problem too",
             r->name, policy, w->before_policy, nsame, na, threshold, shapes[worst].name,
             w->after.util_max, w->before.util_max, 100 * w->after.clipped_frac);
  else {
    const cell *f = &cells[worst_fail * nr + k];
    snprintf(buf, n,
             "%.64s: do not switch to %.64s: it fails on %d of %d shapes, most on %.64s "
             "(utilisation %.3g, was %.3g under %.64s; %.3g%% of Q "
             "clipped, was %.3g%%)",
             r->name, policy, nfail, na, shapes[worst_fail].name, f->after.util_max,
             f->before.util_max, f->before_policy, 100 * f->after.clipped_frac,
             100 * f->before.clipped_frac);
  }
  return nfail > 0;
}

typedef struct pc_opts {
  const char *policy, *against, *suite, *gpu;
  const char *recipes[MAXREC];
  shape shapes[MAXSHAPES];
  int nshape, nrec, threads, json;
  double rtol, atol, threshold, margin;
} pc_opts;

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
        mlr_cli_list(cmd, argc, argv, &i, "recipe", "a name or file", o->recipes, &o->nrec, MAXREC,
                     &rc) ||
        mlr_cli_threads_opt(cmd, argc, argv, &i, &o->threads, &rc)) {
      if (rc) return rc;
    } else if ((m = mlr_cli_opt(argc, argv, &i, "shape", &v))) {
      if (m < 0 || o->nshape == MAXSHAPES)
        return mlr_cli_usage_error(cmd, "--shape needs a SPEC, e.g. bs=4,kv=1024 (at most %d)",
                                   MAXSHAPES);
      o->shapes[o->nshape].name = v;
      o->shapes[o->nshape++].spec = v;
    } else if ((m = mlr_cli_opt(argc, argv, &i, "tolerance", &v))) {
      if ((rc = mlr_cli_parse_tolerance(cmd, m > 0 ? v : NULL, &o->rtol, &o->atol)) != MLR_EXIT_OK)
        return rc;
    } else if ((m = mlr_cli_opt(argc, argv, &i, "threshold", &v))) {
      if (m < 0 || mlr_cli_parse_double(v, &o->threshold) || !(o->threshold > 0) ||
          !isfinite(o->threshold))
        return mlr_cli_usage_error(
            cmd, "--threshold needs a number > 0 (the largest utilisation that passes)");
    } else if ((m = mlr_cli_opt(argc, argv, &i, "margin", &v))) {
      if (m < 0 || mlr_cli_parse_double(v, &o->margin) || !(o->margin >= 0) || !isfinite(o->margin))
        return mlr_cli_usage_error(cmd,
                                   "--margin needs a number >= 0 (how much higher a utilisation "
                                   "already over the threshold may get, 0.1 = 10%%)");
    } else if (!strcmp(argv[i], "--json"))
      o->json = 1;
    else
      return mlr_cli_unknown_option(cmd, argv[i],
                                    "--policy --against --suite --shape --recipe --tolerance "
                                    "--threshold --margin --threads --gpu --max-memory --json");
  }
  return MLR_EXIT_OK;
}

/* every check before any work or output (bad input prints one line only): the options together,
 * both policies, every shape's spec; the suite's shapes (default nightly) where no --shape is */
static int check_inputs(const char *cmd, pc_opts *o) {
  if (!o->policy)
    return mlr_cli_usage_error(
        cmd, "usage: policy-check --policy static:absmax=A|dynamic|per_head|per_token [--against "
             "P] [--suite NAME | --shape SPEC...] "
             "[--recipe R]... [--tolerance RTOL,ATOL] [--threshold X] [--margin M] [--json]");
  if (o->suite && o->nshape)
    return mlr_cli_usage_error(cmd, "--suite and --shape: give one of them");
  if (strcmp(o->gpu, "auto") && strcmp(o->gpu, "off") && strcmp(o->gpu, "require"))
    return mlr_cli_usage_error(cmd, "--gpu '%s' is not one of auto|off|require", o->gpu);
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
  if (!o->nshape) {
    const mlr_suite *su = mlr_suite_find(o->suite ? o->suite : "nightly");
    if (!su)
      return mlr_cli_usage_error(cmd, "--suite '%s' is not a suite (valid: %s)", o->suite,
                                 mlr_suite_names());
    for (size_t k = 0; k < su->n && o->nshape < MAXSHAPES; k++) {
      o->shapes[o->nshape].name = su->cells[k].name;
      o->shapes[o->nshape++].spec = su->cells[k].spec;
    }
  }
  for (int k = 0; k < o->nshape; k++) {
    mlr_gen_spec gs;
    const int rc = mlr_cli_spec_fits(cmd, "shape", o->shapes[k].spec, &gs);
    if (rc != MLR_EXIT_OK) return rc;
    mlr_gen_spec_free(&gs);
  }
  return MLR_EXIT_OK;
}

/* the GPU kernels (gpu not "off" and a GPU found: its name into device, else ""): each fast-kernel
 * recipe of rs again, run on the GPU (on_gpu) */
static int add_gpu_kernels(const char *cmd, const char *gpu, mlr_recipe *rs, int *nrec, int *on_gpu,
                           char *device, size_t dn) {
  if (!strcmp(gpu, "off")) return MLR_EXIT_OK;
  mlr_error ge = {""};
  if (mlr_gpu_device(device, dn, &ge) != MLR_OK) {
    if (!strcmp(gpu, "require")) return mlr_cli_usage_error(cmd, "--gpu require: %s", ge.msg);
    device[0] = 0;
  }
  mlr_recipe fast;
  for (int k = 0, n0 = *nrec; device[0] && k < n0 && *nrec < MAXREC; k++)
    if (mlr_gpu_fast_fit(&rs[k], NULL, &ge) == MLR_OK ||
        mlr_gpu_fast_recipe(rs[k].name, &fast) == MLR_OK) {
      rs[*nrec] = rs[k];
      on_gpu[*nrec] = 1;
      snprintf(rs[*nrec].name, sizeof rs[*nrec].name, "%.56s (GPU)", rs[k].name);
      (*nrec)++;
    }
  return MLR_EXIT_OK;
}

static void print_header(const pc_opts *o, int nrec, const char *unaffected, const char *device,
                         int sw) {
  printf("mlaref policy-check: Q policy %s against %s; %d kernels x %d shapes; truth: certified, "
         "dequantized KV; utilisation |out - truth| / (%g + %g "
         "|truth|), pass at most %g (or, over it before too, at most %g%% higher)\n",
         o->policy, o->against ? o->against : "each recipe's own", nrec, o->nshape, o->atol,
         o->rtol, o->threshold, 100 * o->margin);
  if (unaffected[0]) printf("unaffected (bf16 Q, no scale): %s\n", unaffected);
  printf("GPU kernels: %s%s\n", device[0] ? "the fast kernel's own outputs on " : "none (",
         device[0]                ? device
         : !strcmp(o->gpu, "off") ? "--gpu off)"
                                  : "no GPU found)");
  printf("%-22s %-*s %-18s %9s %9s %9s  -> %9s %9s %9s  %s\n", "kernel", sw, "shape",
         "policy before", "util max", "p99.9", "clipped%", "util max", "p99.9", "clipped%",
         "verdict");
}

/* every shape, its row a kernel printed as it comes (not with --json); sw: the shape column's
 * width */
static int run_shapes(const char *cmd, const pc_opts *o, const mlr_recipe *rs, const int *on_gpu,
                      int nrec, int sw, double t0, cell *cells) {
  const int progress = !o->json && isatty(2);
  int rc = MLR_EXIT_OK;
  for (int s = 0; s < o->nshape && rc == MLR_EXIT_OK; s++) {
    const shape *sh = &o->shapes[s];
    if (progress)
      fprintf(stderr, "\rpolicy-check: shape %d of %d (%s), %.0f s   ", s + 1, o->nshape, sh->name,
              mlr_cli_now() - t0);
    rc = run_shape(cmd, sh, rs, on_gpu, nrec, o->policy, o->against, o->rtol, o->atol, o->threshold,
                   o->margin, o->threads, &cells[s * nrec]);
    for (int k = 0; !o->json && rc == MLR_EXIT_OK && k < nrec; k++) {
      const cell *c = &cells[s * nrec + k];
      if (progress) fprintf(stderr, "\r%60s\r", "");
      if (!c->applicable) {
        printf("%-22s %-*s n/a: %s\n", rs[k].name, sw, sh->name, c->reason);
        continue;
      }
      printf("%-22s %-*s %-18s %9.4g %9.4g %9.3g  -> %9.4g %9.4g %9.3g  %s\n", rs[k].name, sw,
             sh->name, c->before_policy, c->before.util_max, c->before.util_p999,
             100 * c->before.clipped_frac, c->after.util_max, c->after.util_p999,
             100 * c->after.clipped_frac, VERDICT[c->verdict]);
    }
    fflush(stdout);
  }
  if (progress) fprintf(stderr, "\r%60s\r", "");
  return rc;
}

/* the cells as JSON objects into jc */
static void cells_json(const pc_opts *o, const mlr_recipe *r, const cell *cells, int k, int nrec,
                       json_t *jc) {
  for (int s = 0; s < o->nshape; s++) {
    const cell *c = &cells[s * nrec + k];
    json_t *j = json_pack("{s:s,s:s,s:s,s:b}", "recipe", r->name, "shape", o->shapes[s].name,
                          "spec", o->shapes[s].spec, "applicable", c->applicable);
    if (c->applicable) {
      json_object_set_new(j, "before", point_json(c->before_policy, &c->before, c->pass_before));
      json_object_set_new(j, "after", point_json(o->policy, &c->after, c->pass_after));
      json_object_set_new(j, "verdict", json_string(VERDICT[c->verdict]));
    } else
      json_object_set_new(j, "reason", json_string(c->reason));
    json_array_append_new(jc, j);
  }
}

/* the recommendations, one a kernel, and the change's verdict: printed, or the whole result as
 * JSON; returns the number of kernels that fail */
static int report(const pc_opts *o, const mlr_recipe *rs, int nrec, const cell *cells,
                  const char *unaffected, const char *device, double t0) {
  int failing = 0, ncells = 0, nfail = 0;
  json_t *jk = json_array(), *jc = json_array();
  if (!o->json) printf("recommendations:\n");
  for (int k = 0; k < nrec; k++) {
    char line[1024];
    const int f = recommend(&rs[k], cells, k, nrec, o->shapes, o->nshape, o->policy, o->threshold,
                            line, sizeof line);
    failing += f;
    if (o->json)
      json_array_append_new(
          jk, json_pack("{s:s,s:b,s:s}", "recipe", rs[k].name, "fails", f, "recommendation", line));
    else
      printf("  %s\n", line);
    for (int s = 0; s < o->nshape; s++) {
      const cell *c = &cells[s * nrec + k];
      if (c->applicable) {
        ncells++;
        nfail += c->verdict == V_FAIL;
      }
    }
    if (o->json) cells_json(o, &rs[k], cells, k, nrec, jc);
  }
  char verdict[256];
  snprintf(verdict, sizeof verdict, "%.64s: %d of %d kernels fail on %d of %d kernel x shape cells",
           o->policy, failing, nrec, nfail, ncells);
  if (!o->json) {
    json_decref(jk);
    json_decref(jc);
    printf("policy-check: %s (%.1f s)\n", verdict, mlr_cli_now() - t0);
    return failing;
  }
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
  return failing;
}

int mlr_cmd_policy_check(int argc, char **argv) {
  const char *cmd = "policy-check";
  pc_opts o = {.gpu = "auto", .rtol = 1e-2, .atol = 1e-2, .threshold = 1.0, .margin = 0.1};
  int rc = parse_args(cmd, argc, argv, &o);
  if (rc == MLR_EXIT_OK) rc = check_inputs(cmd, &o);
  if (rc != MLR_EXIT_OK) return rc;
  static mlr_recipe rs[MAXREC];
  char unaffected[512];
  int nrec = 0;
  if ((rc = pick_recipes(cmd, o.recipes, o.nrec, rs, &nrec, unaffected, sizeof unaffected)) !=
      MLR_EXIT_OK)
    return rc;
  int on_gpu[MAXREC] = {0};
  char device[256] = "";
  if ((rc = add_gpu_kernels(cmd, o.gpu, rs, &nrec, on_gpu, device, sizeof device)) != MLR_EXIT_OK)
    return rc;
  cell *cells = calloc((size_t)o.nshape * (size_t)nrec, sizeof *cells);
  if (!cells) {
    fprintf(stderr, "mlaref %s: out of memory\n", cmd);
    return MLR_EXIT_FAIL;
  }
  int sw = 12; /* the shape column: as wide as the longest name */
  for (int s = 0; s < o.nshape; s++)
    sw = (int)strlen(o.shapes[s].name) > sw ? (int)strlen(o.shapes[s].name) : sw;
  if (!o.json) print_header(&o, nrec, unaffected, device, sw);
  const double t0 = mlr_cli_now();
  rc = run_shapes(cmd, &o, rs, on_gpu, nrec, sw, t0, cells);
  const int failing = rc == MLR_EXIT_OK ? report(&o, rs, nrec, cells, unaffected, device, t0) : 0;
  free(cells);
  if (rc != MLR_EXIT_OK) return rc;
  return failing ? MLR_EXIT_FAIL : MLR_EXIT_OK;
}
