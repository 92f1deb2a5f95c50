/* mlaref bench gpu-exact [--shape SPEC]... [--recipe NAME|FILE]... [--reps N]
 * The GPU exact kernel's speed: per shape (default the 8 bench shapes) and recipe (default every
 * built-in), --reps runs (default 5) of mlr_gpu_exact on inputs generated in memory; prints the
 * median and least kernel time (device events, Q preparation to the merge), the median time of
 * the whole call (copies both ways included), the median of each stage (Q, QK, the splits, the
 * merge, ms), and whether the largest bench shape meets the 20 ms target. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "mlr_compare.h"
#include "mlr_inputs.h"
#include "mlr_suites.h"
#include "mlr_gpu.h"
#include "mlr_recipe.h"

enum { MAXREPS = 100 };

int mlr_bench_gpu_exact(int argc, char **argv) {
  const char *cmd = "bench gpu-exact", *shapes[16], *recipes[16];
  int nshape = 0, nrec = 0;
  uint64_t reps = 5;
  int rc = MLR_EXIT_OK;
  for (int i = 0; i < argc && rc == MLR_EXIT_OK; i++)
    if (!mlr_cli_list(cmd, argc, argv, &i, "shape", "a SPEC", shapes, &nshape, 16, &rc) &&
        !mlr_cli_list(cmd, argc, argv, &i, "recipe", "a name or file", recipes, &nrec, 16, &rc) &&
        !mlr_cli_count(cmd, argc, argv, &i, "reps", 1, MAXREPS, &reps, &rc))
      rc = mlr_cli_unknown_option(cmd, argv[i], "--shape --recipe --reps");
  if (rc != MLR_EXIT_OK) return rc;
  const mlr_suite *bench = mlr_suite_find("bench");
  if (!nshape)
    for (size_t k = 0; k < bench->n && k < 16; k++) shapes[nshape++] = bench->cells[k].spec;
  static mlr_recipe rs[16];
  const int rrc = mlr_cli_recipes(cmd, recipes, nrec, rs, &nrec);
  if (rrc != MLR_EXIT_OK) return rrc;
  char device[256];
  mlr_error err = {""};
  if (mlr_gpu_device(device, sizeof device, &err) != MLR_OK)
    return mlr_cli_usage_error(cmd, "%s", err.msg);
  printf("GPU exact kernel on %s (%s runtime); %llu runs each, median and least kernel time "
         "(device events), median of the whole call\n",
         device, mlr_gpu_backend(), (unsigned long long)reps);
  printf("%-28s %-18s %10s %10s %9s %8s %8s %8s %8s\n", "shape", "recipe", "kernel ms", "least ms",
         "call ms", "Q", "QK", "splits", "merge");
  double worst_largest = 0;
  const char *largest = bench->cells[bench->n - 1].spec;
  for (int si = 0; si < nshape; si++) {
    mlr_tensor_file tf;
    mlr_inputs in;
    const int grc = mlr_cli_gen_memory(cmd, "--shape", shapes[si], &tf, &in, NULL);
    if (grc != MLR_EXIT_OK) return grc;
    for (int k = 0; k < nrec; k++) {
      if (mlr_emu_check_fit(&rs[k], &in, NULL) != MLR_OK)
        continue; /* the recipe does not fit these inputs */
      double kern[MAXREPS], call[MAXREPS], part[4][MAXREPS];
      for (uint64_t r = 0; r < reps; r++) {
        mlr_emu_result res;
        mlr_gpu_timing tm;
        const mlr_status st = mlr_gpu_exact(&rs[k], &in, &res, &tm, &err);
        if (st != MLR_OK) {
          fprintf(stderr, "mlaref %s: %s on %s: %s\n", cmd, rs[k].name, shapes[si], err.msg);
          mlr_tf_free(&tf);
          return MLR_EXIT_FAIL;
        }
        kern[r] = tm.kernel_ms;
        call[r] = tm.total_ms;
        part[0][r] = tm.q_ms;
        part[1][r] = tm.qk_ms;
        part[2][r] = tm.split_ms;
        part[3][r] = tm.merge_ms;
        mlr_emu_result_free(&res);
      }
      mlr_sort_values(kern, (int64_t)reps);
      mlr_sort_values(call, (int64_t)reps);
      double pm[4];
      for (int q = 0; q < 4; q++) {
        mlr_sort_values(part[q], (int64_t)reps);
        pm[q] = mlr_sorted_quantile(part[q], (int64_t)reps, 0.5);
      }
      const double med = mlr_sorted_quantile(kern, (int64_t)reps, 0.5);
      printf("%-28s %-18s %10.3f %10.3f %9.1f %8.3f %8.3f %8.3f %8.3f\n", shapes[si], rs[k].name,
             med, kern[0], mlr_sorted_quantile(call, (int64_t)reps, 0.5), pm[0], pm[1], pm[2],
             pm[3]);
      if (strcmp(shapes[si], largest) == 0 && med > worst_largest) worst_largest = med;
    }
    mlr_tf_free(&tf);
  }
  if (worst_largest > 0)
    printf("target: the largest bench shape (%s) in at most 20 ms for every recipe: %s (slowest "
           "%.3f ms)\n",
           largest, worst_largest <= 20 ? "met" : "NOT met", worst_largest);
  return MLR_EXIT_OK;
}
