/* mlaref bench mma [--dots N] [--reps R]
 * The matrix-unit models' cost on one core: N inner products of K = 576 (a QK logit's length),
 * operands normal variates rounded to each unit's input format, run through mlr_mma_dot and
 * through a binary32 fma chain (the emulator's seq dot) on the same operands; best of R runs each;
 * nanoseconds a product and the ratio of the two. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <math.h>

#include "cli.h"
#include "mlr_rng.h"
#include "mlr_formats.h"
#include "mlr_mma.h"

enum { K = 576 };

static float chain(const float *a, const float *b) {
  float s = 0.0f;
  for (int i = 0; i < K; i++) s = fmaf(a[i], b[i], s);
  return s;
}

int mlr_bench_mma(int argc, char **argv) {
  const char *cmd = "bench mma";
  uint64_t dots = 100000, reps = 3;
  int rc = MLR_EXIT_OK;
  for (int i = 0; i < argc && rc == MLR_EXIT_OK; i++)
    if (!mlr_cli_count(cmd, argc, argv, &i, "dots", 1, 10000000, &dots, &rc) &&
        !mlr_cli_count(cmd, argc, argv, &i, "reps", 1, 100, &reps, &rc))
      rc = mlr_cli_unknown_option(cmd, argv[i], "--dots --reps");
  if (rc != MLR_EXIT_OK) return rc;
  /* 64 distinct operand pairs, reused (they stay in cache, as a row of Q does) */
  const size_t n = 2 * (size_t)K * 64;
  double *g = malloc(n * sizeof *g);
  float *x = malloc(n * sizeof *x);
  if (!g || !x) {
    free(g);
    free(x);
    return mlr_cli_usage_error(cmd, "cannot allocate the operands");
  }
  mlr_rng_normal_array(g, n, 7, 1, 0, 0);
  char model[256];
  mlr_cli_cpu_model(model, sizeof model);
  printf("machine: %s; one core; %llu inner products of K = %d a run, best of %llu\n", model,
         (unsigned long long)dots, K, (unsigned long long)reps);
  printf("%-15s %12s %12s %8s\n", "model", "mma ns/prod", "fma ns/prod", "ratio");
  const struct {
    mlr_mma_unit u;
    mlr_format f;
  } units[] = {{MLR_MMA_SM90_E4M3, MLR_FMT_E4M3},      {MLR_MMA_SM90_BF16, MLR_FMT_BF16},
               {MLR_MMA_SM90_F16, MLR_FMT_FP16},       {MLR_MMA_CDNA3_FP8, MLR_FMT_E4M3FNUZ},
               {MLR_MMA_SM90_E4M3_SYNC, MLR_FMT_E4M3}, {MLR_MMA_CDNA3_BF16, MLR_FMT_BF16},
               {MLR_MMA_SM90_E5M2, MLR_FMT_E5M2}};
  for (size_t k = 0; k < sizeof units / sizeof *units; k++) {
    const mlr_mma_model *m = mlr_mma_get(units[k].u);
    for (size_t i = 0; i < n; i++)
      x[i] = mlr_decode(
          units[k].f, mlr_encode_f64(g[i], units[k].f, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE, 0));
    double best[2] = {1e30, 1e30};
    volatile float sink = 0.0f;
    for (uint64_t r = 0; r < reps; r++)
      for (int which = 0; which < 2; which++) {
        const double t0 = mlr_cli_now();
        float acc = 0.0f;
        for (uint64_t d = 0; d < dots; d++) {
          const float *a = x + (d % 64) * 2 * K, *b = a + K;
          acc += which ? chain(a, b) : mlr_mma_dot(m, a, b, K, 0.0f);
        }
        sink = sink + acc;
        const double dt = mlr_cli_now() - t0;
        if (dt < best[which]) best[which] = dt;
      }
    const double per = 1e9 / ((double)dots * K);
    printf("%-15s %12.2f %12.2f %8.1f\n", m->name, best[0] * per, best[1] * per, best[0] / best[1]);
  }
  free(g);
  free(x);
  return MLR_EXIT_OK;
}
