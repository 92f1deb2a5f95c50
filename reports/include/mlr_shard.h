/* mlr_shard.h: which share of a report's cells a run computes, and how the cells are split.
 *
 * The shard comes from `--shard i/n` (1-based) or, without it, from the engine that started the
 * run: a Slurm array (SLURM_ARRAY_TASK_ID, _MIN, _STEP, _COUNT: shard (ID - MIN) / STEP + 1 of
 * COUNT), a Kubernetes Indexed Job (JOB_COMPLETION_INDEX, 0-based, with the count from
 * `--shards N`) or a Buildkite parallel step (BUILDKITE_PARALLEL_JOB, 0-based, of
 * BUILDKITE_PARALLEL_JOB_COUNT). Sources that disagree are refused.
 *
 * The split: the report's units are its cells, one (shape, column) each. Each has an estimated
 * cost worked out from its shape spec and column alone (so every machine agrees on it); the units
 * go, largest first, to the shard with the least estimated cost so far (ties: the lower shard,
 * then the earlier unit), shard 1 starting with the cost of the run's extras (the sweep, the
 * decomposition and the discrimination table it alone computes). */
#ifndef MLR_SHARD_H
#define MLR_SHARD_H

#include "mlr_base.h"
#include "mlr_gen.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MLR_SHARD_MAX = 64 };

typedef struct mlr_shard {
  int i, n;       /* 1-based; n = 0: the whole run */
  char from[128]; /* "--shard", or the variables it came from, e.g. "SLURM_ARRAY_TASK_ID=2" */
} mlr_shard;

/** The shard of this run: from opt ("i/n", or NULL), shards (the count for JOB_COMPLETION_INDEX,
 *  0 when not given) and the environment read through env (getenv, or a test's table). MLR_OK
 *  with s->n = 0 when no source names one; MLR_EINVAL with one line for a malformed or
 *  out-of-range value, a count of 0, --shards without an index, or two sources that disagree. */
mlr_status mlr_shard_pick(const char *opt, int shards, const char *(*env)(const char *name),
                          mlr_shard *s, mlr_error *err);

/** The extras' estimated cost (shard 1's head start), in the units below: the decomposition and
 *  discrimination of `recipes` recipe columns of their own policies, the static-scale sweep
 *  where one has fp8 Q (sweep: 1), a quick run's a fifth. Fitted on the edge suite with one
 *  recipe with and without the sweep and the nightly suite's default (dev-vm, 2 threads,
 *  2026-12-05: 1.6 s, 3.5 s, 20.6 s). */
double mlr_shard_extras(int recipes, int sweep, int quick);

/** The estimated cost of one cell of a shape, in units of 1024 KV rows read by 16 heads without
 *  the a priori bound: the KV rows its query tokens read (sum over batches of q_len x length)
 *  times heads / 16, eleven times that where the cell works out the bound (bound: 1), plus a
 *  fixed part a batch and one for the cell's setup, times factor: the column's relative cost (1 for
 * a recipe with scalar dots; a matrix-unit model costs more). Fitted on a nightly run (dev-vm, 2
 * threads, 2026-12-05: about 4 us a row, 44 us with the bound, 0.01 s a cell). */
double mlr_shard_cost(const mlr_gen_spec *spec, int bound, double factor);

/** Units 0..n-1 with costs cost[] onto shards 1..nshards (shard_of[u]), largest first onto the
 *  least loaded; shard 1 starts at extras. load[1..nshards] (may be NULL) gets each shard's
 *  estimated cost. MLR_ENOMEM (nothing placed) when the order cannot be held. */
mlr_status mlr_shard_plan(const double *cost, int n, int nshards, double extras, int *shard_of,
                          double *load);

#ifdef __cplusplus
}
#endif
#endif
