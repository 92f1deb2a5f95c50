/* mlaref bench formats: throughput of the conversions and of the random variates, on one
 * core and on all cores. A benchmark prints figures; it is not a test. */
#define _POSIX_C_SOURCE 200809L
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "mlr_rng.h"
#include "mlr_formats.h"

static void print_machine(void) {
  char model[256];
  mlr_cli_cpu_model(model, sizeof model);
  printf("machine: %s, %d cores available to OpenMP\n", model, omp_get_num_procs());
}

typedef struct bufs {
  size_t n;
  float *f32;
  double *f64;
  uint8_t *u8;
  uint16_t *u16;
} bufs;

/* the operations timed: a conversion of the format (with the rounding; overflow saturates) or the
 * normal variates, and the target of one core in elements per second (0: none) */
typedef enum { OP_ENC32, OP_ENC64, OP_DEC, OP_NORMAL } bench_op;
static const struct bench {
  const char *name;
  bench_op op;
  mlr_format format;
  mlr_rounding rounding;
  double target_1core;
} BENCHES[] = {
    {"encode binary32 -> e4m3 (rne, sat)", OP_ENC32, MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, 500e6},
    {"encode binary32 -> bf16 (rne, sat)", OP_ENC32, MLR_FMT_BF16, MLR_RND_NEAREST_EVEN, 0},
    {"encode binary64 -> e4m3 (rne, sat)", OP_ENC64, MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, 0},
    {"encode binary32 -> e4m3 (rtz, sat)", OP_ENC32, MLR_FMT_E4M3, MLR_RND_TOWARD_ZERO, 0},
    {"decode e4m3 -> binary32", OP_DEC, MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, 1e9},
    {"decode fp16 -> binary32", OP_DEC, MLR_FMT_FP16, MLR_RND_NEAREST_EVEN, 0},
    {"normal variates (Philox + AS241)", OP_NORMAL, MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, 100e6},
};
enum { NBENCH = sizeof BENCHES / sizeof BENCHES[0] };

static void run_one(const struct bench *bn, bufs *b) {
  const mlr_cvt_opts o = {bn->format, bn->rounding, MLR_OVF_SATURATE};
  void *codes = mlr_format_get(bn->format).bits == 8 ? (void *)b->u8 : (void *)b->u16;
  switch (bn->op) {
  case OP_ENC32:
    mlr_encode_f32_array(codes, b->f32, b->n, &o, NULL);
    break;
  case OP_ENC64:
    mlr_encode_f64_array(codes, b->f64, b->n, &o, NULL);
    break;
  case OP_DEC:
    mlr_decode_array(b->f32 + b->n, codes, b->n, bn->format);
    break;
  case OP_NORMAL:
    mlr_rng_normal_array(b->f64 + b->n, b->n, 42, 7, 0, 0);
    break;
  }
}

/* Best of several repetitions: the least disturbed run. */
static double rate(const struct bench *bn, bufs *b, int threads, int reps) {
  omp_set_num_threads(threads);
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    const double t0 = mlr_cli_now();
    run_one(bn, b);
    const double dt = mlr_cli_now() - t0;
    if (dt < best) best = dt;
  }
  return (double)b->n / best;
}

int mlr_cmd_bench(int argc, char **argv) {
  const char *cmd = "bench";
#ifndef MLAREF_FORMATS_ONLY
  if (argc >= 1 && strcmp(argv[0], "emulate") == 0) return mlr_bench_emulate(argc - 1, argv + 1);
  if (argc >= 1 && strcmp(argv[0], "oracle") == 0) return mlr_bench_oracle(argc - 1, argv + 1);
  if (argc >= 1 && strcmp(argv[0], "gpu-exact") == 0)
    return mlr_bench_gpu_exact(argc - 1, argv + 1);
  if (argc >= 1 && strcmp(argv[0], "gpu") == 0) return mlr_bench_gpu_fast(argc - 1, argv + 1);
  if (argc >= 1 && strcmp(argv[0], "mma") == 0) return mlr_bench_mma(argc - 1, argv + 1);
#endif
  if (argc < 1 || strcmp(argv[0], "formats") != 0)
    return mlr_cli_usage_error(
        cmd,
        "unknown or missing benchmark '%s' (valid: formats, emulate, oracle, gpu, gpu-exact, mma)",
        argc ? argv[0] : "");
  uint64_t n = 1u << 24;
  int reps = 7;
  for (int i = 1; i < argc; i++) {
    const char *v;
    int m = mlr_cli_opt(argc, argv, &i, "n", &v);
    if (m != 0) {
      if (m < 0 || mlr_cli_parse_u64(v, &n) || n < 1024 || n > (1ull << 28))
        return mlr_cli_usage_error("bench formats", "--n must be an integer in 1024..268435456");
      continue;
    }
    return mlr_cli_unknown_option("bench formats", argv[i], "--n");
  }
  bufs b = {(size_t)n, malloc(2 * n * sizeof(float)), malloc(2 * n * sizeof(double)), malloc(n),
            malloc(2 * n)};
  if (!b.f32 || !b.f64 || !b.u8 || !b.u16) {
    free(b.f32);
    free(b.f64);
    free(b.u8);
    free(b.u16);
    return mlr_cli_usage_error("bench formats", "cannot allocate buffers for --n %llu",
                               (unsigned long long)n);
  }
  /* Inputs: normal variates times 100, spanning the e4m3 range (subnormals to overflow). */
  mlr_rng_normal_array(b.f64, b.n, 1, 1, 0, 0);
  for (size_t i = 0; i < b.n; i++) {
    b.f64[i] *= 100.0;
    b.f32[i] = (float)b.f64[i];
  }
  mlr_cvt_opts o8 = {MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE},
               o16 = {MLR_FMT_FP16, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE};
  mlr_encode_f32_array(b.u8, b.f32, b.n, &o8, NULL);
  mlr_encode_f32_array(b.u16, b.f32, b.n, &o16, NULL);
  print_machine();
  printf("elements per run: %zu, best of %d runs\n\n", b.n, reps);
  const int all = omp_get_num_procs();
  printf("%-40s %14s %14s   %s\n", "operation", "1 core /s", "all cores /s", "target (1 core)");
  for (int k = 0; k < NBENCH; k++) {
    const struct bench *bn = &BENCHES[k];
    const double r1 = rate(bn, &b, 1, reps), ra = rate(bn, &b, all, reps);
    char tgt[64] = "";
    if (bn->target_1core > 0)
      snprintf(tgt, sizeof tgt, ">= %.0f M/s: %s", bn->target_1core / 1e6,
               r1 >= bn->target_1core ? "met" : "NOT met");
    printf("%-40s %12.1f M %12.1f M   %s\n", bn->name, r1 / 1e6, ra / 1e6, tgt);
  }
  free(b.f32);
  free(b.f64);
  free(b.u8);
  free(b.u16);
  return MLR_EXIT_OK;
}
