/* A run's shard from the option or the engine's variables (Slurm arrays, Kubernetes Indexed Jobs,
 * Buildkite parallel steps), the refusals, and the split of the nightly suite's cells by cost. */
#include <criterion/criterion.h>
#include <string.h>

#include "mlr_gen.h"
#include "mlr_report.h"
#include "mlr_shard.h"
#include "mlr_suites.h"

/* a Slurm array task's variables: ID, MIN, STEP, COUNT */
#define SLURM(id, min, step, count)                                                                \
  {                                                                                                \
    "SLURM_ARRAY_TASK_ID", id, "SLURM_ARRAY_TASK_MIN", min, "SLURM_ARRAY_TASK_STEP", step,         \
        "SLURM_ARRAY_TASK_COUNT", count, NULL                                                      \
  }

/* a fake environment: NAME=VALUE pairs */
static const char *const *vars;
static const char *lookup(const char *name) {
  for (int k = 0; vars && vars[k]; k += 2)
    if (!strcmp(vars[k], name)) return vars[k + 1];
  return NULL;
}

static mlr_shard pick(const char *opt, int shards, const char *const *env) {
  vars = env;
  mlr_shard s;
  mlr_error err = {""};
  cr_assert_eq(mlr_shard_pick(opt, shards, lookup, &s, &err), MLR_OK, "%s", err.msg);
  return s;
}

static void refused(const char *opt, int shards, const char *const *env, const char *fragment) {
  vars = env;
  mlr_shard s;
  mlr_error err = {""};
  cr_assert_eq(mlr_shard_pick(opt, shards, lookup, &s, &err), MLR_EINVAL);
  cr_assert(strstr(err.msg, fragment), "'%s' not in: %s", fragment, err.msg);
}

Test(shard, from_each_source) {
  mlr_shard s = pick(NULL, 0, NULL);
  cr_expect_eq(s.n, 0);
  s = pick("2/5", 0, NULL);
  cr_expect(s.i == 2 && s.n == 5 && !strcmp(s.from, "--shard 2/5"));
  static const char *const slurm[] = SLURM("7", "3", "2", "4");
  s = pick(NULL, 0, slurm); /* --array=3-9:2: tasks 3, 5, 7, 9 */
  cr_expect(s.i == 3 && s.n == 4, "%d/%d", s.i, s.n);
  cr_expect(strstr(s.from, "SLURM_ARRAY_TASK_ID=7") != NULL, "%s", s.from);
  static const char *const k8s[] = {"JOB_COMPLETION_INDEX", "0", NULL};
  s = pick(NULL, 6, k8s);
  cr_expect(s.i == 1 && s.n == 6);
  static const char *const bk[] = {"BUILDKITE_PARALLEL_JOB", "3", "BUILDKITE_PARALLEL_JOB_COUNT",
                                   "4", NULL};
  s = pick(NULL, 0, bk);
  cr_expect(s.i == 4 && s.n == 4);
  s = pick("4/4", 0, bk); /* the option and the engine agree */
  cr_expect(s.i == 4 && !strcmp(s.from, "--shard 4/4"));
}

Test(shard, refusals) {
  static const char *const bk[] = {"BUILDKITE_PARALLEL_JOB", "3", "BUILDKITE_PARALLEL_JOB_COUNT",
                                   "4", NULL};
  refused("3/4", 0, bk, "--shard 3/4 (shard 3/4) disagrees with BUILDKITE_PARALLEL_JOB=3");
  refused("0/4", 0, NULL, "shard 0 is outside 1..4");
  refused("5/4", 0, NULL, "shard 5 is outside 1..4");
  refused("1/0", 0, NULL, "0 shards; the count must be 1..64");
  refused("2of4", 0, NULL, "is not i/n");
  static const char *const zero[] = {"SLURM_ARRAY_TASK_ID", "0", "SLURM_ARRAY_TASK_COUNT", "0",
                                     NULL};
  refused(NULL, 0, zero, "0 shards; the count must be 1..64");
  static const char *const past[] = {"BUILDKITE_PARALLEL_JOB", "4", "BUILDKITE_PARALLEL_JOB_COUNT",
                                     "4", NULL};
  refused(NULL, 0, past, "shard 5 is outside 1..4");
  static const char *const k8s[] = {"JOB_COMPLETION_INDEX", "2", NULL};
  refused(NULL, 0, k8s, "give their count with --shards N");
  refused(NULL, 3, NULL, "--shards 3 needs the shard's index");
  static const char *const off[] = SLURM("4", "3", "2", "4");
  refused(NULL, 0, off, "not min + k x step");
  static const char *const bad[] = {"SLURM_ARRAY_TASK_ID", "x", "SLURM_ARRAY_TASK_COUNT", "4",
                                    NULL};
  refused(NULL, 0, bad, "SLURM_ARRAY_TASK_ID='x' is not a number");
  static const char *const two[] = {
      "SLURM_ARRAY_TASK_ID", "1", "SLURM_ARRAY_TASK_COUNT", "4", "JOB_COMPLETION_INDEX", "2", NULL};
  refused(NULL, 4, two, "disagrees with JOB_COMPLETION_INDEX=2");
}

/* the nightly suite's 25 shapes x 12 columns (the built-ins and the policy axis) over 8 shards:
 * the most loaded shard within 1.25x of the mean, every cell placed once */
Test(shard, nightly_split_8_ways_is_balanced) {
  const mlr_suite *su = mlr_suite_find("nightly");
  enum { COLS = 12 };
  const int n = (int)su->n * COLS;
  double cost[25 * COLS], load[MLR_SHARD_MAX + 1], sum = 0;
  int shard[25 * COLS];
  cr_assert_eq(su->n, 25);
  for (size_t s = 0; s < su->n; s++) {
    mlr_gen_spec g;
    mlr_error err = {""};
    cr_assert_eq(mlr_gen_spec_parse(su->cells[s].spec, &g, &err), MLR_OK);
    int64_t tokens = 0;
    for (int64_t b = 0; b < g.bs; b++) tokens += g.lens[b];
    for (int c = 0; c < COLS; c++)
      sum += cost[s * COLS + c] = mlr_shard_cost(&g, tokens <= MLR_REPORT_BOUND_TOKENS, 1.0);
    mlr_gen_spec_free(&g);
  }
  const double extras = mlr_shard_extras(8, 1, 0); /* the built-ins, aiter-a8w8-ps's sweep */
  cr_assert_eq(mlr_shard_plan(cost, n, 8, extras, shard, load), MLR_OK);
  double most = 0, total = 0;
  for (int s = 1; s <= 8; s++) {
    most = load[s] > most ? load[s] : most;
    total += load[s];
  }
  cr_expect_float_eq(total, sum + extras, 1e-6 * total);
  cr_expect(most <= 1.25 * total / 8, "most loaded %g, mean %g", most, total / 8);
  for (int u = 0; u < n; u++) cr_expect(shard[u] >= 1 && shard[u] <= 8);
}
