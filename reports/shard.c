/* A run's shard and the split of the cells (mlr_shard.h). */
#define _POSIX_C_SOURCE 200809L
#include "mlr_shard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a decimal integer, the whole string, in [lo, hi]: 0, else -1 */
static int integer(const char *s, long lo, long hi, long *v) {
  char *end;
  errno = 0;
  const long x = s && *s ? strtol(s, &end, 10) : 0;
  if (!s || !*s || *end || errno || x < lo || x > hi) return -1;
  *v = x;
  return 0;
}

/* one source's shard, checked: i in 1..n, n in 1..MLR_SHARD_MAX */
static mlr_status source(long i, long n, const char *from, mlr_shard *s, mlr_error *err) {
  if (n < 1 || n > MLR_SHARD_MAX)
    return mlr_error_set(err, MLR_EINVAL, "%s: %ld shards; the count must be 1..%d", from, n,
                         MLR_SHARD_MAX);
  if (i < 1 || i > n)
    return mlr_error_set(err, MLR_EINVAL, "%s: shard %ld is outside 1..%ld", from, i, n);
  s->i = (int)i;
  s->n = (int)n;
  snprintf(s->from, sizeof s->from, "%s", from);
  return MLR_OK;
}

/* an engine variable that must be a number */
static mlr_status var(const char *(*env)(const char *), const char *name, long dflt, long *v,
                      mlr_error *err) {
  const char *x = env(name);
  if (!x) {
    if (dflt >= 0) {
      *v = dflt;
      return MLR_OK;
    }
    return mlr_error_set(err, MLR_EINVAL, "%s is not set (the shard count)", name);
  }
  if (integer(x, 0, 1L << 30, v))
    return mlr_error_set(err, MLR_EINVAL, "%s='%s' is not a number in 0..2^30", name, x);
  return MLR_OK;
}

static mlr_status from_slurm(const char *(*env)(const char *), mlr_shard *s, mlr_error *err) {
  long id = 0, min = 0, step = 1, count = 0;
  mlr_status st = var(env, "SLURM_ARRAY_TASK_ID", -1, &id, err);
  if (st == MLR_OK) st = var(env, "SLURM_ARRAY_TASK_MIN", 0, &min, err);
  if (st == MLR_OK) st = var(env, "SLURM_ARRAY_TASK_STEP", 1, &step, err);
  if (st == MLR_OK) st = var(env, "SLURM_ARRAY_TASK_COUNT", -1, &count, err);
  if (st != MLR_OK) return st;
  char from[128];
  snprintf(from, sizeof from, "SLURM_ARRAY_TASK_ID=%ld (min %ld, step %ld, count %ld)", id, min,
           step, count);
  if (step < 1 || id < min || (id - min) % step)
    return mlr_error_set(err, MLR_EINVAL, "%s: not min + k x step", from);
  return source((id - min) / step + 1, count, from, s, err);
}

static mlr_status from_index(const char *(*env)(const char *), const char *name,
                             const char *count_name, long count, mlr_shard *s, mlr_error *err) {
  long idx = 0;
  mlr_status st = var(env, name, -1, &idx, err);
  if (st == MLR_OK && count_name) st = var(env, count_name, -1, &count, err);
  if (st != MLR_OK) return st;
  if (count == 0 && !count_name)
    return mlr_error_set(err, MLR_EINVAL, "%s=%ld names a shard: give their count with --shards N",
                         name, idx);
  char from[128];
  snprintf(from, sizeof from, "%s=%ld (0-based, of %ld)", name, idx, count);
  return source(idx + 1, count, from, s, err);
}

mlr_status mlr_shard_pick(const char *opt, int shards, const char *(*env)(const char *name),
                          mlr_shard *s, mlr_error *err) {
  memset(s, 0, sizeof *s);
  mlr_shard got[4];
  int n = 0;
  mlr_status st = MLR_OK;
  if (opt) { /* two decimal integers around one slash, nothing else */
    const char *slash = strchr(opt, '/');
    char left[24] = "";
    long i = 0, c = 0;
    if (slash && (size_t)(slash - opt) < sizeof left) memcpy(left, opt, (size_t)(slash - opt));
    if (!slash || integer(left, 0, 1L << 30, &i) || integer(slash + 1, 0, 1L << 30, &c))
      return mlr_error_set(err, MLR_EINVAL, "--shard '%s' is not i/n (1 <= i <= n <= %d)", opt,
                           MLR_SHARD_MAX);
    char from[128];
    snprintf(from, sizeof from, "--shard %s", opt);
    st = source(i, c, from, &got[n++], err);
  }
  if (st == MLR_OK && env("SLURM_ARRAY_TASK_ID")) st = from_slurm(env, &got[n++], err);
  if (st == MLR_OK && env("JOB_COMPLETION_INDEX"))
    st = from_index(env, "JOB_COMPLETION_INDEX", NULL, shards, &got[n++], err);
  if (st == MLR_OK && env("BUILDKITE_PARALLEL_JOB"))
    st = from_index(env, "BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT", 0, &got[n++],
                    err);
  if (st != MLR_OK) return st;
  if (shards && !n)
    return mlr_error_set(err, MLR_EINVAL,
                         "--shards %d needs the shard's index: JOB_COMPLETION_INDEX (a Kubernetes "
                         "Indexed Job), or give --shard i/n",
                         shards);
  for (int k = 1; k < n; k++)
    if (got[k].i != got[0].i || got[k].n != got[0].n)
      return mlr_error_set(err, MLR_EINVAL, "%s (shard %d/%d) disagrees with %s (shard %d/%d)",
                           got[0].from, got[0].i, got[0].n, got[k].from, got[k].i, got[k].n);
  if (n && shards && got[0].n != shards)
    return mlr_error_set(err, MLR_EINVAL, "--shards %d disagrees with %s (%d shards)", shards,
                         got[0].from, got[0].n);
  if (n) *s = got[0];
  return MLR_OK;
}

/* the fixed parts, as KV rows of a 16-head cell: a cell's setup (its inputs, truth, golden
 * lookup: the edge suite's cells of a few hundred rows took about 0.01 s each) and a batch's (the
 * bs=256, kv=1024 cells took twice what their rows alone predict) */
enum { SETUP_ROWS = 2560, BATCH_ROWS = 1024, BOUND_FACTOR = 11 };

double mlr_shard_cost(const mlr_gen_spec *spec, int bound, double factor) {
  double rows = 0;
  for (int64_t b = 0; b < spec->bs; b++) rows += (double)spec->lens[b] * spec->q_len;
  rows *= spec->heads / 16.0 * (bound ? BOUND_FACTOR : 1);
  return factor * (rows + (double)spec->bs * BATCH_ROWS + SETUP_ROWS) / 1024.0;
}

double mlr_shard_extras(int recipes, int sweep, int quick) {
  enum { RECIPE = 560, SWEEP = 480 }; /* about 2.2 s and 1.9 s at 0.004 s a unit */
  return ((double)recipes * RECIPE + (sweep ? SWEEP : 0)) / (quick ? 5.0 : 1.0);
}

mlr_status mlr_shard_plan(const double *cost, int n, int nshards, double extras, int *shard_of,
                          double *load) {
  double l[MLR_SHARD_MAX + 1] = {0};
  l[1] = extras;
  int *order = malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
  if (!order) return MLR_ENOMEM; /* never a split of another order: every machine must agree */
  for (int u = 0; u < n; u++) order[u] = u;
  /* largest first, the earlier unit first among equals (an insertion sort: a run has at most a
   * few thousand cells, and the order must not depend on a library's sort) */
  for (int a = 1; a < n; a++) {
    const int u = order[a];
    int b = a;
    for (; b > 0 && cost[order[b - 1]] < cost[u]; b--) order[b] = order[b - 1];
    order[b] = u;
  }
  for (int k = 0; k < n; k++) {
    const int u = order[k];
    int best = 1;
    for (int s = 2; s <= nshards; s++)
      if (l[s] < l[best]) best = s;
    shard_of[u] = best;
    l[best] += cost[u];
  }
  free(order);
  for (int s = 1; load && s <= nshards; s++) load[s] = l[s];
  return MLR_OK;
}
