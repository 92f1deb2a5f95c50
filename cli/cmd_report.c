/* mlaref report --suite NAME --out DIR [--recipe NAME|none]... [--policy P]...
 *               [--baseline OLD/summary.json] [--quick] [--gpu auto|off|require] [--shard i/n]
 *               [--digests FILE] [--threads N]
 *               [--kernel NAME='CMD {inputs} {out}' --kernel-recipe NAME=R [--kernel-policy NAME=P]
 *                [--kernel-timeout [NAME=]S] [--kernel-rule NAME=RULE]...
 *                [--kernel-inputs NAME=safetensors|npy]]...
 * mlaref report merge --out DIR [--baseline OLD/summary.json] SHARD_DIR...
 * The nightly accuracy report (reports/): the suite's cells x the recipes x the Q policy axis (x
 * the GPU kernels where a GPU is) against the certified truth and the golden manifest, the
 * static-scale sweep, the decomposition and the discrimination table, written as
 * DIR/summary.json, DIR/summary.md and DIR/index.html; shards merge into the same report. Exit 0
 * clean, 1 a failure or a regression against the baseline, 2 bad input (nothing written then). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mlr_gen.h"
#include "mlr_suites.h"
#include "mlr_report.h"
#include "mlr_shard.h"

enum { MAXREC = 16, MAXK = MLR_REPORT_MAX_KERNELS, MAXKRULES = 4 * MLR_REPORT_MAX_KERNELS };

static void progress(const char *what, int done, int total, void *ctx) {
  const double t0 = *(const double *)ctx;
  fprintf(stderr, "\rreport: %d of %d: %-40.40s %5.0f s", done, total, what, mlr_cli_now() - t0);
  if (done == total) fputc('\n', stderr);
}

/* print the result line and the regressions; the exit code */
static int finish(const char *cmd, mlr_report *rep, const char *out, const char *baseline,
                  double t0) {
  char missing[48] = "";
  if (rep->nmissing) snprintf(missing, sizeof missing, ", %d missing (incomplete)", rep->nmissing);
  printf("report: suite %s%s: %d cells, %d failed, %d regressions%s%s%s; %s/index.html, "
         "summary.json, summary.md (%.1f s)\n",
         rep->suite, rep->quick ? " (quick)" : "", rep->ncells, rep->nfailures, rep->nregressions,
         missing, baseline ? " against " : "", baseline ? baseline : "", out, mlr_cli_now() - t0);
  if (rep->gpu_mode != MLR_REPORT_GPU_OFF)
    printf("  GPU leg: %s\n",
           rep->gpu_device[0] ? rep->gpu_device : "no GPU found (--gpu auto): CPU only");
  int nk = 0, npass = 0;
  for (int k = 0; k < rep->ncells; k++) { /* the kernels' cells: a count, then each not passing */
    const mlr_report_cell *c = &rep->cells[k];
    nk += c->kernel[0] != 0;
    npass += c->kernel[0] && c->pass;
  }
  if (nk) printf("  kernels: %d cells, %d passed or n/a, %d skipped\n", nk, npass, rep->nskipped);
  for (int k = 0; k < rep->ncells; k++)
    if (rep->cells[k].kernel[0] && !rep->cells[k].pass)
      printf("  kernel %s: %s\n", mlr_kernel_verdict_name(rep->cells[k].kernel_verdict),
             rep->cells[k].kernel_reason);
  for (int k = 0; k < rep->nregressions; k++) printf("  regression: %s\n", rep->regressions[k]);
  if (rep->shard_n)
    printf("  shard %d/%d (from %s): estimated cost %.0f, measured %.1f s in its cells\n",
           rep->shard_i, rep->shard_n, rep->shard_from, rep->shard_cost, rep->shard_seconds);
  for (int k = 0; k < rep->nshards; k++)
    printf("  shard %d (from %s): estimated cost %.0f, measured %.1f s in its cells\n",
           rep->shards[k].i, rep->shards[k].from, rep->shards[k].cost, rep->shards[k].seconds);
  if (rep->nmissing) /* a shard that never wrote its folder: the run is incomplete, not a pass */
    fprintf(stderr, "mlaref %s: incomplete: %d missing from shards not given: %s%s\n", cmd,
            rep->nmissing, rep->missing[0], rep->nmissing > 1 ? ", ..." : "");
  const int rc = mlr_report_exit_code(rep) ? MLR_EXIT_FAIL : MLR_EXIT_OK;
  mlr_report_free(rep);
  return rc;
}

/* --plan: each shard's cells and estimated cost, and the most loaded against the mean */
static int print_plan(mlr_report *rep) {
  const mlr_report_plan *p = &rep->plan;
  double most = 0, sum = 0;
  printf("report plan: suite %s, %d shapes x %d columns over %d shards (shard 1 also runs the "
         "sweep, decomposition and discrimination table)\n",
         rep->suite, p->nshapes, p->ncols, rep->nshards);
  for (int k = 0; k < rep->nshards; k++) {
    int cells = 0;
    for (int u = 0; u < p->nshapes * p->ncols; u++) cells += p->shard[u] == rep->shards[k].i;
    printf("  shard %d: %d cells, estimated cost %.0f\n", rep->shards[k].i, cells,
           rep->shards[k].cost);
    most = rep->shards[k].cost > most ? rep->shards[k].cost : most;
    sum += rep->shards[k].cost;
  }
  printf("most loaded / mean: %.3f\n", rep->nshards ? most / (sum / rep->nshards) : 0.0);
  mlr_report_free(rep);
  return MLR_EXIT_OK;
}

/* the environment, for the engines' shard variables (mlr_shard.h) */
static const char *env(const char *name) { return getenv(name); }

/* --out: a writable folder, or one that can be made (made when the report is written) */
static int check_out(const char *cmd, const char *out) {
  return mlr_cli_out_dir_check(cmd, "--out", out);
}

/* a baseline read before any work, so a bad one costs nothing */
static int read_baseline(const char *cmd, const char *baseline, mlr_report *base) {
  memset(base, 0, sizeof *base);
  if (!baseline) return MLR_EXIT_OK;
  if (access(baseline, R_OK) != 0)
    return mlr_cli_usage_error(cmd, "--baseline %s: cannot read it", baseline);
  mlr_error err = {""};
  if (mlr_report_read(baseline, base, &err) != MLR_OK)
    return mlr_cli_usage_error(cmd, "%s", err.msg);
  return MLR_EXIT_OK;
}

/* the write, the baseline's regressions: an exit code */
static int conclude(const char *cmd, mlr_report *rep, mlr_report *base, const char *baseline,
                    const char *out, double t0) {
  mlr_error err = {""};
  if (mlr_cli_make_dir(cmd, "--out", out) != MLR_EXIT_OK) {
    mlr_report_free(base);
    mlr_report_free(rep);
    return MLR_EXIT_USAGE;
  }
  const mlr_status st =
      mlr_report_finish(rep, baseline ? base : NULL, baseline, out, "gnuplot", &err);
  mlr_report_free(base);
  if (st != MLR_OK) {
    mlr_report_free(rep);
    if (st == MLR_EINVAL || st == MLR_EPARSE || st == MLR_EIO)
      return mlr_cli_usage_error(cmd, "%s", err.msg);
    fprintf(stderr, "mlaref %s: %s\n", cmd, err.msg);
    return MLR_EXIT_FAIL;
  }
  return finish(cmd, rep, out, baseline, t0);
}

/* mlaref report merge --out DIR [--baseline F] DIR...: the shards of one run as one report */
static int merge_main(int argc, char **argv) {
  const char *cmd = "report merge", *out = NULL, *baseline = NULL, *dirs[64];
  int nd = 0, rc = MLR_EXIT_OK;
  for (int i = 0; i < argc; i++) {
    if (mlr_cli_str(cmd, argc, argv, &i, "out", "a folder", &out, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "baseline", "a summary.json", &baseline, &rc)) {
      if (rc) return rc;
    } else if (argv[i][0] == '-' && argv[i][1] == '-')
      return mlr_cli_unknown_option(cmd, argv[i], "--out --baseline");
    else if (nd == 64)
      return mlr_cli_usage_error(cmd, "at most 64 shard folders");
    else
      dirs[nd++] = argv[i];
  }
  if (!out || nd == 0) return mlr_cli_usage_fail(cmd);
  if ((rc = check_out(cmd, out)) != MLR_EXIT_OK) return rc;
  mlr_report base;
  if ((rc = read_baseline(cmd, baseline, &base)) != MLR_EXIT_OK) return rc;
  static mlr_report parts[64];
  mlr_error err = {""};
  for (int k = 0; k < nd; k++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/summary.json", dirs[k]);
    if (mlr_report_read(path, &parts[k], &err) != MLR_OK) {
      for (int j = 0; j < k; j++) mlr_report_free(&parts[j]);
      mlr_report_free(&base);
      return mlr_cli_usage_error(cmd, "%s", err.msg);
    }
  }
  mlr_report rep;
  const double t0 = mlr_cli_now();
  const mlr_status st = mlr_report_merge(parts, nd, &rep, &err);
  for (int k = 0; k < nd; k++) mlr_report_free(&parts[k]);
  if (st != MLR_OK) {
    mlr_report_free(&base);
    return mlr_cli_usage_error(cmd, "%s", err.msg);
  }
  if (mlr_report_plotter_check("gnuplot", &err) != MLR_OK) {
    mlr_report_free(&rep);
    mlr_report_free(&base);
    return mlr_cli_usage_error(cmd, "%s", err.msg);
  }
  return conclude(cmd, &rep, &base, baseline, out, t0);
}

int mlr_cmd_report(int argc, char **argv) {
  if (argc >= 1 && !strcmp(argv[0], "merge")) return merge_main(argc - 1, argv + 1);
  const char *cmd = "report", *suite = NULL, *out = NULL, *baseline = NULL,
             *digests = MLR_REPORT_DEFAULT_DIGESTS, *recipes[MAXREC],
             *policies[MLR_REPORT_MAX_POLICIES], *gpu = "auto", *shard = NULL, *cells = NULL;
  int nrec = 0, npol = 0, quick = 0, threads = 0, rc = MLR_EXIT_OK, digests_given = 0, plan = 0;
  uint64_t shards = 0;
  mlr_cli_kernel_args ka = {0};
  for (int i = 0; i < argc; i++) {
    if (mlr_cli_str(cmd, argc, argv, &i, "suite", mlr_suite_names(), &suite, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "out", "a folder", &out, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "baseline", "a summary.json", &baseline, &rc) ||
        mlr_cli_max_memory_opt(cmd, argc, argv, &i, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "gpu", "auto, off or require", &gpu, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "shard", "i/n", &shard, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "cells", "the suite's cell names, comma-separated", &cells,
                    &rc) ||
        mlr_cli_count(cmd, argc, argv, &i, "shards", 1, MLR_SHARD_MAX, &shards, &rc) ||
        mlr_cli_list(cmd, argc, argv, &i, "recipe", "a built-in name", recipes, &nrec, MAXREC,
                     &rc) ||
        mlr_cli_list(cmd, argc, argv, &i, "policy", "static:absmax=A|dynamic|per_head|per_token",
                     policies, &npol, MLR_REPORT_MAX_POLICIES, &rc) ||
        mlr_cli_threads_opt(cmd, argc, argv, &i, &threads, &rc) ||
        mlr_cli_kernel_opt(cmd, argc, argv, &i, &ka, &rc)) {
      if (rc) return rc;
    } else if (mlr_cli_str(cmd, argc, argv, &i, "digests", "a golden manifest (digests.tsv)",
                           &digests, &rc)) {
      if (rc) return rc;
      digests_given = 1;
    } else if (!strcmp(argv[i], "--quick"))
      quick = 1;
    else if (!strcmp(argv[i], "--plan"))
      plan = 1;
    else
      return mlr_cli_unknown_option(cmd, argv[i],
                                    "--suite --out --recipe --policy --baseline --quick --gpu "
                                    "--cells --shard --shards --plan --digests --threads "
                                    "--max-memory "
                                    "--kernel "
                                    "--kernel-recipe --kernel-policy --kernel-timeout "
                                    "--kernel-rule --kernel-inputs");
  }
  if (!suite || (!out && !plan)) return mlr_cli_usage_fail(cmd);
  static mlr_kernel kernels[MAXK];
  if ((rc = mlr_cli_kernels_define(cmd, &ka, NULL, kernels)) != MLR_EXIT_OK) return rc;
  for (int k = 0; k < nrec; k++)
    if (!strcmp(recipes[k], "none") && (nrec > 1 || !ka.nspecs))
      return mlr_cli_usage_error(cmd, nrec > 1 ? "--recipe none is given alone (no recipe column)"
                                               : "--recipe none leaves no column: give a --kernel");
  const mlr_suite *su = mlr_suite_find(suite);
  if (!su)
    return mlr_cli_usage_error(cmd, "--suite '%s' is not a suite (valid: %s)", suite,
                               mlr_suite_names());
  const int gpu_mode = !strcmp(gpu, "off")       ? MLR_REPORT_GPU_OFF
                       : !strcmp(gpu, "auto")    ? MLR_REPORT_GPU_AUTO
                       : !strcmp(gpu, "require") ? MLR_REPORT_GPU_REQUIRE
                                                 : -1;
  if (gpu_mode < 0)
    return mlr_cli_usage_error(cmd, "--gpu '%s' is not one of auto|off|require", gpu);
  mlr_shard sh;
  mlr_error serr = {""};
  if (plan && shards && !shard) /* the split over N, whatever shard the engine says this is */
    sh = (mlr_shard){1, (int)shards, "--plan --shards"};
  else if (mlr_shard_pick(shard, (int)shards, env, &sh, &serr) != MLR_OK)
    return mlr_cli_usage_error(cmd, "%s", serr.msg);
  if (plan && !sh.n)
    return mlr_cli_usage_error(cmd, "--plan needs the shard count: --shards N, --shard i/n or an "
                                    "engine's variables (Slurm, Kubernetes, Buildkite)");
  if (sh.n && !plan && gpu_mode == MLR_REPORT_GPU_AUTO) /* the columns may not depend on the node */
    return mlr_cli_usage_error(cmd,
                               "shard %d/%d (from %s) with --gpu auto: each machine would "
                               "pick its own columns; give --gpu off or --gpu require",
                               sh.i, sh.n, sh.from);
  for (size_t k = 0; k < su->n;
       k++) { /* every cell's inputs against the memory limit before the first cell runs */
    mlr_gen_spec gs;
    if ((rc = mlr_cli_spec_fits(cmd, "cell", su->cells[k].spec, &gs)) != MLR_EXIT_OK) return rc;
    mlr_gen_spec_free(&gs);
  }
  if (!plan && (rc = check_out(cmd, out)) != MLR_EXIT_OK) return rc;
  if (access(digests, R_OK) != 0) {
    if (digests_given) return mlr_cli_usage_error(cmd, "--digests %s: cannot read it", digests);
    digests = NULL; /* the committed manifest is found from the source tree only: elsewhere, no
                       golden column */
  }
  mlr_error err = {""};
  if (mlr_report_plotter_check("gnuplot", &err) != MLR_OK)
    return mlr_cli_usage_error(cmd, "%s", err.msg);
  mlr_report base, rep;
  if ((rc = read_baseline(cmd, baseline, &base)) != MLR_EXIT_OK) return rc;
  double t0 = mlr_cli_now();
  const mlr_report_opts o = {.suite = suite,
                             .recipes = nrec ? recipes : NULL,
                             .nrecipes = nrec,
                             .kernels = kernels,
                             .nkernels = ka.nspecs,
                             .commit = MLAREF_COMMIT,
                             .policies = npol ? policies : NULL,
                             .npolicies = npol,
                             .quick = quick,
                             .cells = cells,
                             .digests = digests,
                             .threads = threads,
                             .gpu = gpu_mode,
                             .shard_i = sh.i,
                             .shard_n = sh.n,
                             .shard_from = sh.from,
                             .plan_only = plan,
                             .progress = isatty(2) ? progress : NULL,
                             .ctx = &t0};
  mlr_status st = mlr_report_run(&o, &rep, &err);
  snprintf(rep.version, sizeof rep.version, "%s", MLAREF_VERSION);
  if (st != MLR_OK) {
    mlr_report_free(&rep);
    mlr_report_free(&base);
    if (st == MLR_EINVAL || st == MLR_EDEVICE) return mlr_cli_usage_error(cmd, "%s", err.msg);
    fprintf(stderr, "mlaref %s: %s\n", cmd, err.msg);
    return MLR_EXIT_FAIL;
  }
  if (plan) {
    mlr_report_free(&base);
    return print_plan(&rep);
  }
  return conclude(cmd, &rep, &base, baseline, out, t0);
}
