/* mlaref report --suite NAME --out DIR [--recipe NAME]... [--baseline OLD/summary.json] [--quick]
 *               [--digests FILE] [--threads N]
 * The nightly accuracy report (reports/, issue 10, first version): the suite's cells x the
 * recipes against the certified truth and the golden manifest, one static-scale sweep, written
 * as DIR/summary.json, DIR/summary.md and DIR/index.html. Exit 0 clean, 1 a failure or a
 * regression against the baseline, 2 bad input (nothing written then). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "fixtures/suites/mlr_suites.h"
#include "reports/mlr_report.h"

enum { MAXREC = 16 };

static void progress(const char *what, int done, int total, void *ctx) {
  const double t0 = *(const double *)ctx;
  fprintf(stderr, "\rreport: %d of %d: %-40.40s %5.0f s", done, total, what, mlr_cli_now() - t0);
  if (done == total) fputc('\n', stderr);
}

int mlr_cmd_report(int argc, char **argv) {
  const char *cmd = "report", *suite = NULL, *out = NULL, *baseline = NULL, *digests = "fixtures/goldens/digests.tsv", *recipes[MAXREC];
  int nrec = 0, quick = 0, threads = 0, rc = MLR_EXIT_OK, digests_given = 0;
  for (int i = 0; i < argc; i++) {
    const char *v;
    int m;
    if (mlr_cli_str(cmd, argc, argv, &i, "suite", mlr_suite_names(), &suite, &rc) || mlr_cli_str(cmd, argc, argv, &i, "out", "a folder", &out, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "baseline", "a summary.json", &baseline, &rc)) {
      if (rc) return rc;
    } else if (mlr_cli_str(cmd, argc, argv, &i, "digests", "a golden manifest (digests.tsv)", &digests, &rc)) {
      if (rc) return rc;
      digests_given = 1;
    } else if ((m = mlr_cli_opt(argc, argv, &i, "recipe", &v))) {
      if (m < 0 || nrec == MAXREC) return mlr_cli_usage_error(cmd, "--recipe needs a built-in name (at most %d)", MAXREC);
      recipes[nrec++] = v;
    } else if ((m = mlr_cli_opt(argc, argv, &i, "threads", &v))) {
      uint64_t p;
      if (m < 0 || mlr_cli_parse_u64(v, &p) || p < 1 || p > 1024) return mlr_cli_usage_error(cmd, "--threads '%s': an integer in 1..1024", m < 0 ? "" : v);
      threads = (int)p;
    } else if (!strcmp(argv[i], "--quick")) quick = 1;
    else return mlr_cli_usage_error(cmd, "unknown option '%s' (valid: --suite --out --recipe --baseline --quick --digests --threads)", argv[i]);
  }
  if (!suite || !out)
    return mlr_cli_usage_error(cmd, "usage: report --suite NAME --out DIR [--recipe NAME]... [--baseline OLD/summary.json] [--quick] [--digests FILE] [--threads N]");
  if (!mlr_suite_find(suite)) return mlr_cli_usage_error(cmd, "--suite '%s' is not a suite (valid: %s)", suite, mlr_suite_names());
  struct stat sb;
  if (stat(out, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(out, W_OK) != 0)
    return mlr_cli_usage_error(cmd, "--out %s: not an existing writable folder", out);
  if (baseline && access(baseline, R_OK) != 0) return mlr_cli_usage_error(cmd, "--baseline %s: cannot read it", baseline);
  if (access(digests, R_OK) != 0) {
    if (digests_given) return mlr_cli_usage_error(cmd, "--digests %s: cannot read it", digests);
    digests = NULL; /* the committed manifest is found from the source tree only: elsewhere, no golden column */
  }
  mlr_report rep;
  mlr_error err = {""};
  double t0 = mlr_cli_now();
  mlr_status st = mlr_report_run(suite, recipes, nrec, quick, digests, threads, isatty(2) ? progress : NULL, &t0, &rep, &err);
  snprintf(rep.version, sizeof rep.version, "%s", MLAREF_VERSION);
  if (st == MLR_OK && baseline) st = mlr_report_baseline(&rep, baseline, &err);
  if (st == MLR_OK) st = mlr_report_write(&rep, out, "gnuplot", &err);
  if (st != MLR_OK) {
    mlr_report_free(&rep);
    if (st == MLR_EINVAL || st == MLR_EPARSE || st == MLR_EIO) return mlr_cli_usage_error(cmd, "%s", err.msg);
    fprintf(stderr, "mlaref %s: %s\n", cmd, err.msg);
    return MLR_EXIT_FAIL;
  }
  printf("report: suite %s%s: %d cells, %d failed, %d regressions%s%s; %s/index.html, summary.json, summary.md (%.1f s)\n", suite, quick ? " (quick)" : "",
         rep.ncells, rep.nfailures, rep.nregressions, baseline ? " against " : "", baseline ? baseline : "", out, mlr_cli_now() - t0);
  for (int k = 0; k < rep.nregressions; k++) printf("  regression: %s\n", rep.regressions[k]);
  rc = rep.nfailures || rep.nregressions ? MLR_EXIT_FAIL : MLR_EXIT_OK;
  mlr_report_free(&rep);
  return rc;
}
