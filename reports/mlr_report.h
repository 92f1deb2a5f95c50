/* mlr_report.h: the nightly accuracy report (issue 10, first version). A run is a matrix of shapes
 * (a suite's cells) x recipes: per cell the model's output digest against the golden manifest,
 * its error against the certified truth as budget utilisation |o - truth| / (atol + rtol |truth|)
 * (max, quantiles, histogram), and the a priori bound (ref/budget) checked on every element; plus
 * one static-scale sweep. Written as summary.json (schema reports/summary.schema.json, "mlaref.report/1"),
 * summary.md and a self-contained index.html with gnuplot's SVG plots (reports/render.c). A
 * baseline summary.json turns changes into regressions, listed first. */
#ifndef MLR_REPORT_H
#define MLR_REPORT_H

#include <stdint.h>

#include "compare/mlr_compare.h"
#include "ref/base/mlr_base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MLR_REPORT_SCHEMA "mlaref.report/1"
/* the a priori bound costs about as much as the rest of a cell many times over (every element,
 * every recipe: the bench suite's largest cells take most of an hour for the eight built-ins), so
 * the report works it out for cells of at most this many KV tokens (the bs=4, bs=32 and bs=64
 * kv=1024 and bs=4 kv=8192 cells, the edge and distribution cells); `mlaref check --rule budget`
 * and the slow tests cover the rest */
#define MLR_REPORT_BOUND_TOKENS 65536

typedef struct mlr_report_cell {
  char shape[64], spec[192], recipe[64], recipe_sha[65];
  int applicable;            /* the recipe runs on the shape's inputs */
  char reason[256];          /* why not */
  char o_sha[65];            /* SHA-256 of the output codes */
  char golden[8];            /* "match", "differ" or "none" (no manifest row) */
  mlr_util util;             /* against the certified truth from the dequantized KV */
  double rel_l2;
  int bound_computed;        /* the a priori bound is worked out for cells of at most MLR_REPORT_BOUND_TOKENS KV tokens in all */
  int bound_holds;           /* every element within its a priori bound */
  double bound_max_ratio;
  int pass;                  /* golden not "differ" and the bound (where computed) holds */
} mlr_report_cell;

typedef struct mlr_report_sweep_point {
  double absmax, clipped_frac, util_max, util_p999, rel_l2;
} mlr_report_sweep_point;

enum { MLR_REPORT_SWEEP_MAX = 16 };

typedef struct mlr_report {
  char suite[32], version[64]; /* version: the caller's (the command sets mlaref's) */
  int quick;
  double rtol, atol, margin; /* margin: how much higher a utilisation may get before it regresses */
  mlr_report_cell *cells;
  int ncells;
  /* the static Q scale's sweep: one recipe on one shape, per Q distribution */
  char sweep_recipe[64], sweep_shape[192];
  int nsweep_dists, nsweep_points;
  char sweep_dist[4][32];
  mlr_report_sweep_point sweep[4][MLR_REPORT_SWEEP_MAX];
  double seeds_absmax;
  /* against a baseline: regressions, one line each */
  char **regressions;
  int nregressions, nfailures;
  char baseline[512];
} mlr_report;

typedef void (*mlr_report_progress)(const char *what, int done, int total, void *ctx);

/** Run the matrix: the suite's cells (quick: its first cells of at most 4096 KV tokens in all, at most
 *  6) x the recipes (names; NULL: every built-in), then the sweep. digests: the golden manifest
 *  (NULL: none). MLR_EINVAL for an unknown suite or recipe, MLR_ENOMEM, the generators' errors. */
mlr_status mlr_report_run(const char *suite, const char *const *recipes, int nrecipes, int quick, const char *digests, int threads,
                          mlr_report_progress progress, void *ctx, mlr_report *rep, mlr_error *err);

/** Compare with a baseline summary.json: regressions (a cell that passed now fails, an output
 *  digest that changed, a utilisation max up by more than rep->margin) into rep->regressions.
 *  MLR_EIO / MLR_EPARSE for an unreadable or foreign file (named). */
mlr_status mlr_report_baseline(mlr_report *rep, const char *path, mlr_error *err);

/** Write DIR/summary.json, DIR/summary.md and DIR/index.html (each atomically); gnuplot draws the
 *  plots (gnuplot_cmd: the program, e.g. "gnuplot"). MLR_EIO naming the file or the tool. */
mlr_status mlr_report_write(const mlr_report *rep, const char *dir, const char *gnuplot_cmd, mlr_error *err);

void mlr_report_free(mlr_report *rep);

#ifdef __cplusplus
}
#endif
#endif
