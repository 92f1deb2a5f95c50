/* mlr_report.h: the nightly accuracy report. A run is a matrix of shapes (a suite's
 * cells) x recipes x Q scale policies (fp8-Q recipes) x the GPU kernels where a GPU is: per cell
 * the model's output digest against the golden manifest, its error against the certified truth as
 * budget utilisation |o - truth| / (atol + rtol |truth|) (max, quantiles, histogram), and the a
 * priori bound (ref/budget) checked on every element; plus one static-scale sweep, the error
 * decomposition per recipe and the discrimination table. Written as summary.json (schema
 * reports/summary.schema.json, "mlaref.report/1"), summary.md and a self-contained index.html with
 * gnuplot's SVG plots (reports/render.c). A baseline summary.json turns changes into regressions,
 * listed first. */
#ifndef MLR_REPORT_H
#define MLR_REPORT_H

#include <stdint.h>

#include "mlr_compare.h"
#include "mlr_base.h"
#include "mlr_budget.h"
#include "mlr_discriminate.h"
#include "mlr_kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MLR_REPORT_SCHEMA          "mlaref.report/1"
/* the a priori bound costs about as much as the rest of a cell many times over (every element,
 * every recipe: the bench suite's largest cells take most of an hour for the eight built-ins), so
 * the report works it out for cells of at most this many KV tokens (the bs=4, bs=32 and bs=64
 * kv=1024 and bs=4 kv=8192 cells, the edge and distribution cells); `mlaref check --rule budget`
 * and the slow tests cover the rest */
#define MLR_REPORT_BOUND_TOKENS    65536
/* the golden manifest a report reads by default, relative to the source tree (where it runs) */
#define MLR_REPORT_DEFAULT_DIGESTS "fixtures/goldens/digests.tsv"

/* the GPU leg: off, where a GPU is found, or required (no GPU: an error) */
enum { MLR_REPORT_GPU_OFF = 0, MLR_REPORT_GPU_AUTO = 1, MLR_REPORT_GPU_REQUIRE = 2 };

typedef struct mlr_report_cell {
  char shape[64], spec[192], recipe[64], recipe_sha[65];
  char policy[48];  /* the Q scale policy ("none": bf16 Q) */
  int own_policy;   /* the recipe's own policy (0: a point of the policy axis) */
  int applicable;   /* the recipe runs on the shape's inputs */
  char reason[256]; /* why not */
  char o_sha[65];   /* SHA-256 of the output codes */
  char golden[8]; /* "match", "differ" or "none" (no manifest row; a policy-axis point has none) */
  mlr_util util;  /* against the certified truth from the dequantized KV */
  double rel_l2;
  int bound_computed; /* the a priori bound is worked out for cells of at most
                         MLR_REPORT_BOUND_TOKENS KV tokens in all */
  int bound_holds;    /* every element within its a priori bound */
  double bound_max_ratio;
  int pass; /* golden not "differ", the bound (where computed) holds, and the GPU kernel (where run)
               passes; a user kernel's cell: its verdict is pass (0 when skipped: not a pass, nor
               a failure either, see mlr_report_cell_skipped) */
  /* the GPU leg: the exact kernel must be bit-identical to the model; the fast kernel (fast-*
   * recipes) within the recipe's bound (where computed) and fa3 against the model */
  int gpu;            /* a GPU kernel ran this cell */
  char gpu_kernel[8]; /* "exact" or "fast" */
  char gpu_note[256]; /* why no kernel ran (a recipe no GPU kernel computes), or its error */
  char gpu_o_sha[65];
  double gpu_identical; /* fraction of elements bit-identical to the model */
  mlr_util gpu_util;
  int gpu_bound_holds;
  double gpu_us; /* kernel time: the median of the launches, L2 flushed before each (fast); one run
                    (exact) */
  int gpu_pass;
  /* a user kernel's column (mlr_kernel.h; kernel "": a recipe's): recipe and policy are those it
   * claims; o_sha, util and rel_l2 its output's where it wrote one of the right shape */
  char kernel[64];
  int kernel_verdict; /* mlr_kernel_verdict (MLR_KERNEL_SKIP: the kernel declined the cell) */
  char kernel_reason[1024];
  mlr_kernel_check kernel_checks[MLR_KERNEL_MAX_CHECKS];
  int kernel_nchecks;
  double kernel_s; /* the command's wall time */
  /* the split (mlr_shard.h): the cell's column in the run (recipe columns, then kernels), its
   * estimated cost, and the seconds it took (its column's work, and its share of the shape's
   * inputs and truth) */
  int column;
  double cost, seconds;
  /* from the baseline (mlr_report_baseline), for the trend plot */
  int has_base;
  double base_util_max, base_gpu_us; /* base_gpu_us 0: none */
} mlr_report_cell;

typedef struct mlr_report_sweep_point {
  double absmax, clipped_frac, util_max, util_p999, rel_l2;
} mlr_report_sweep_point;

/* the error by source (ref/budget's decomposition) of one recipe on the report's extra shape */
typedef struct mlr_report_decomp {
  char recipe[64];
  unsigned present;     /* bits of the sources the recipe has */
  double rms[MLR_NSRC]; /* only this source rounded, against the truth */
  double interaction_rms, total_rms, truth_rms;
} mlr_report_decomp;

enum {
  MLR_REPORT_SWEEP_MAX = 16,
  MLR_REPORT_MAX_RECIPES = 32,
  MLR_REPORT_MAX_POLICIES = 8,
  MLR_REPORT_MAX_KERNELS = 16
};

/* a user kernel as the report keeps it: its contract, not its command (which may name private
 * paths) */
typedef struct mlr_report_kernel {
  char name[64], recipe[64], recipe_sha[65];
  char policy[48]; /* "": the recipe's own */
  double timeout_s;
  char rules[MLR_KERNEL_MAX_RULES][64];
  int nrules;
} mlr_report_kernel;

/* what a run works out once, beside its cells (shard 1 of a sharded run) */
typedef struct mlr_report_studies {
  /* the static Q scale's sweep: one recipe on one shape, per Q distribution */
  char sweep_recipe[64], sweep_shape[192];
  int nsweep_dists, nsweep_points;
  char sweep_dist[4][32];
  mlr_report_sweep_point sweep[4][MLR_REPORT_SWEEP_MAX];
  double seeds_absmax;
  /* on one extra shape: the error decomposition of every recipe, the discrimination table of one */
  char extra_shape[192];
  int ndecomp;
  mlr_report_decomp decomp[MLR_REPORT_MAX_RECIPES];
  int disc_done, disc_model_ok;
  char disc_recipe[64];
  int disc[MLR_DISC_WRONG][MLR_DISC_RULES];
} mlr_report_studies;

/* a sharded run's split of its cells (mlr_shard.h): every shape's shard for every column */
typedef struct mlr_report_plan {
  int nshapes, ncols;
  char (*shapes)[64]; /* the suite's cell names, in order */
  char (*cols)[128];  /* the columns: "RECIPE", "RECIPE@POLICY" (the policy axis), "kernel NAME" */
  char (*colsha)[65]; /* each column's recipe SHA-256 (a kernel's: the recipe it claims) */
  int *shard;         /* [nshapes * ncols]: 1..n */
} mlr_report_plan;

/* one shard of a merged run */
typedef struct mlr_report_shard_info {
  int i;
  char from[128];
  double cost, seconds; /* estimated cost; measured seconds (the run's cells) */
} mlr_report_shard_info;

typedef struct mlr_report {
  char suite[32], version[64]; /* version: the caller's (the command sets mlaref's) */
  char commit[64];             /* the build's commit (the command's); shards of one run share it */
  int quick;
  int shard_i, shard_n;             /* this run's share of the cells (1-based); 0, 0: all */
  char shard_from[128];             /* where the shard came from (mlr_shard.h) */
  double shard_cost, shard_seconds; /* this shard's estimated cost and measured seconds */
  mlr_report_plan plan;             /* a sharded run's split (nshapes 0: not sharded) */
  mlr_report_shard_info shards[64]; /* a merged run: its shards */
  int nshards;
  char (*missing)[200]; /* a merged run: the cells of shards not given ("SHAPE COLUMN") */
  int nmissing;
  double rtol, atol, margin; /* margin: how much higher a utilisation may get before it regresses */
  double gpu_margin, gpu_noise_us; /* a GPU time regresses when over (1 + gpu_margin) x the
                                      baseline's and gpu_noise_us more */
  mlr_report_cell *cells;
  int ncells;
  char policies[MLR_REPORT_MAX_POLICIES]
               [48]; /* the policy axis for fp8-Q recipes (besides their own) */
  int npolicies;
  mlr_report_kernel kernels[MLR_REPORT_MAX_KERNELS]; /* the user kernels' columns */
  int nkernels;
  mlr_report_studies studies; /* the sweep, the decomposition and the discrimination table */
  /* the GPU leg */
  int gpu_mode;
  char gpu_device[256]; /* "": none ran */
  /* against a baseline: regressions, one line each */
  char **regressions;
  int nregressions, nfailures; /* nfailures: cells not passing, the skipped ones apart */
  int nskipped;                /* user kernels' cells the kernel declined */
  char baseline[512];
} mlr_report;

typedef void (*mlr_report_progress)(const char *what, int done, int total, void *ctx);

typedef struct mlr_report_opts {
  const char *suite;
  const char *const *recipes; /* names; NULL: every built-in (and the fast kernel's recipes when the
                                 GPU leg runs); the one name "none": no recipe column */
  int nrecipes;
  const mlr_kernel *kernels; /* user kernels: every cell also runs through each (mlr_kernel.h) */
  int nkernels;
  const char *commit;          /* for the kernels' reproducer lines; NULL: "unknown" */
  const char *const *policies; /* the policy axis; NULL: the default (static:absmax=6, dynamic,
                                  per_token; quick: static:absmax=6) */
  int npolicies;
  int quick;           /* the suite's first cells of at most 4096 KV tokens in all, at most 6 */
  const char *cells;   /* NULL, or the suite's cells to run, by name, comma-separated */
  const char *digests; /* the golden manifest (NULL: none) */
  int threads;
  int gpu;              /* MLR_REPORT_GPU_* */
  int shard_i, shard_n; /* this run's cells: the split's (mlr_shard.h), shard 1 with the sweep, the
                           decomposition and the discrimination table */
  const char *shard_from; /* where the shard came from, for summary.json (NULL: "--shard") */
  int plan_only;          /* 1: work out the split alone (every shard's estimated cost into
                             rep->shards, shard_n of them), run no cell */
  mlr_report_progress progress;
  void *ctx;
} mlr_report_opts;

/** 1 when the cell is a user kernel's that the kernel skipped: neither passed nor failed. */
int mlr_report_cell_skipped(const mlr_report_cell *c);
/** rep->nfailures and rep->nskipped from its cells. */
void mlr_report_count(mlr_report *rep);

/** Run the matrix: the suite's cells x the recipes x (for fp8-Q recipes) the policy axis, each
 *  cell's inputs through every user kernel (their files in a folder of the run's own, removed at
 *  the end; a kernel's failure is its cell's verdict), then the
 *  sweep, the decomposition and the discrimination table. MLR_EINVAL for an unknown suite, recipe
 * or policy, a bad shard; MLR_EDEVICE for --gpu require without a GPU; MLR_ENOMEM, the generators'
 *  errors. */
mlr_status mlr_report_run(const mlr_report_opts *o, mlr_report *rep, mlr_error *err);

/** Compare with a baseline summary.json: regressions (a cell that passed now fails, an output
 *  digest that changed, a utilisation max up by more than rep->margin, a GPU time up by more than
 *  rep->gpu_margin and rep->gpu_noise_us) into rep->regressions. MLR_EIO / MLR_EPARSE for an
 *  unreadable or foreign file (named). */
mlr_status mlr_report_baseline(mlr_report *rep, const char *path, mlr_error *err);
/** The same against a baseline already read (mlr_report_read; path: its name for the page). */
mlr_status mlr_report_compare(mlr_report *rep, const mlr_report *base, const char *path,
                              mlr_error *err);

/** Read a summary.json back (every field the writer writes; a file from another run or machine,
 *  so each field is checked). MLR_EIO / MLR_EPARSE naming the file and the field. */
mlr_status mlr_report_read(const char *path, mlr_report *rep, mlr_error *err);

/** Merge the shards of one run (one build, the same suite, settings, columns and split; each
 *  shard at most once) into *out, the cells in the suite's order and each shape's in column order.
 *  A shard not given is not an error: its cells are listed in out->missing, and the exit code
 *  (mlr_report_exit_code) is 1. MLR_EINVAL naming what differs or comes twice. */
mlr_status mlr_report_merge(const mlr_report *parts, int n, mlr_report *out, mlr_error *err);

/** Write DIR/summary.json, DIR/summary.md and DIR/index.html (each atomically); gnuplot draws the
 *  plots (gnuplot_cmd: the program, e.g. "gnuplot"). MLR_EIO naming the file or the tool. */
mlr_status mlr_report_write(const mlr_report *rep, const char *dir, const char *gnuplot_cmd,
                            mlr_error *err);
/** What `mlaref report` does after the run: compare with the baseline already read (base NULL:
 *  none; path its name), then write the files into dir (which exists). Statuses as
 *  mlr_report_compare's and mlr_report_write's. */
mlr_status mlr_report_finish(mlr_report *rep, const mlr_report *base, const char *path,
                             const char *dir, const char *gnuplot_cmd, mlr_error *err);
/** The command's exit code for a finished report: 1 when a cell fails or a regression is found
 *  (a skipped cell is neither), else 0. */
int mlr_report_exit_code(const mlr_report *rep);

/* MLR_OK when the plotting tool runs (`GNUPLOT --version` answers); MLR_EIO with the message
 * otherwise, so a report is refused before its cells are computed. */
mlr_status mlr_report_plotter_check(const char *gnuplot_cmd, mlr_error *err);

void mlr_report_free(mlr_report *rep);

#ifdef __cplusplus
}
#endif
#endif
