/* mlaref bench gpu [--shape SPEC]... [--recipe NAME|FILE]... [--reps N] [--peers FILE]...
 *                  [--flush dirty|clean] [--warmup MS] [--variant KEY=V[,KEY=V]...]
 * The fast kernel's speed (gpu/fast), measured like the seeds' peers: per shape (default the 8
 * bench shapes) and recipe (default this build's fp8-KV recipes), after --warmup ms of untimed
 * launches (default 25, as the seeds' do_bench: see warm_up), --reps launches (default 200, at
 * least 100), each after a 256 MiB write that evicts the L2 and leaves it dirty (as the seeds'
 * do_bench; --flush clean: then a 256 MiB read, the L2 clean), timed by device events around the
 * kernels alone; the median and the least, and the kernels run (mlr_gpu_fast_kernels: the
 * attention variant, its copies and the merge; --variant forces them, mlr_gpu_fast_opts).
 * Beside it, from gpu/bench (mlr_gpu_bench.h): the read bandwidth measured in the same run (2 GiB,
 * the L2 flushed clean, the best of the read floor's readers) and the launch floor (kernels that
 * do nothing, launched and timed the same way, alone and as attention + merge), the time the
 * roofline allows (the bytes every kernel must move: KV read once, Q read, O written, at that
 * bandwidth), the achieved fraction, the read floor (the best of 18 kernels that only read the
 * shape's KV, flushed and timed as the fast kernel, on the shape's first recipe's plan), the plan
 * floor (CUDA builds: the recipe's plan, its grid, clusters, copies, stores and merge, with none of
 * the attention's arithmetic, timed the same way), and with --peers the best seed Triton time per
 * shape from .peers/seed_peers.py's peers.json of the same machine and the speed-up over it, and
 * other people's kernels' times from scripts/gpu/third_party_bench.py's file of the same run
 * (bench_peers.h), each shape's and recipe's speed-up over each and their geomeans. Ends
 * with the bounds (the launch floor plus the roofline, their geomean; the shapes where 5x the
 * seeds would be under the roofline; the read floors' geomean and the targets that a kernel that
 * only reads its KV misses, the plan floors' geomean and the targets they miss) and the task's
 * targets met or not. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_peers.h"
#include "cli.h"
#include "mlr_compare.h"
#include "mlr_inputs.h"
#include "mlr_suites.h"
#include "mlr_gpu.h"
#include "mlr_gpu_bench.h"
#include "mlr_gpu_fast.h"
#include "mlr_recipe.h"

enum { MAXSHAPES = 16, MAXREC = 4, MAXREPS = 10000, MAXWARMUP = 60000 };

/* a run of the benchmark: its options, the bounds measured first, and what the shapes add up */
struct bench {
  const char *shapes[MAXSHAPES], *recipes[MAXREC], *peers_files[MLR_BENCH_PEER_FILES];
  int nshape, nrec, npeers, clean;
  uint64_t reps, warmup_ms;
  mlr_gpu_fast_opts opts; /* --variant */
  mlr_bench_peers pk;     /* --peers: the seeds' and other people's kernels' times */
  mlr_recipe rs[MAXREC];
  double bw, floor1, floor2; /* the read bandwidth; the launch floor, one kernel and two */
  /* per recipe: the logs of the medians, of the speed-ups over the seeds, of the read floors and
   * the plan floors of the shapes it ran, and how many it ran */
  double logsum[MAXREC], peerlog[MAXREC], rflogk[MAXREC], pflogk[MAXREC];
  int n_ok[MAXREC], npeer[MAXREC], targets; /* npeer: the shapes with a seed time */
  /* per recipe and third-party kernel: the logs of the speed-ups, how many, the least */
  double tplog[MAXREC][MLR_BENCH_PEER_KERNELS], tpmin[MAXREC][MLR_BENCH_PEER_KERNELS];
  int ntp[MAXREC][MLR_BENCH_PEER_KERNELS];
  /* per recipe: the speed-up over each shape's best peer (the fastest of the seeds and the
   * third-party kernels): the logs, how many, the least */
  double bestlog[MAXREC], bestmin[MAXREC];
  int nbest[MAXREC];
  /* what no kernel timed this way can beat: the launch floor (one kernel) plus the roofline; and
   * the shapes where 5x the best seed kernel is below the roofline */
  double boundlog, bound85log;
  int nbound;
  char unreach[1024];
  size_t un;
  /* the read floors: their geomean, the readers taken, and the targets they miss */
  double rflog;
  int nrf;
  char readers[512], rmiss[1024];
  size_t rn, rm;
  /* the plan floors (where the build has them: mlr_gpu_fast_has_plan_floor): the targets they
   * miss */
  int plan;
  char pmiss[4096];
  size_t pm;
};

/* one shape's figures, shared by its recipes */
struct shape {
  const char *spec;
  mlr_inputs in;
  int kv8;                   /* fp8 KV: the seeds and the task's targets are fp8-KV figures */
  double kvb, kv_per_b, pus; /* KV bytes, KV tokens a batch, the best seed's time (0: none) */
  double tpus[MLR_BENCH_PEER_KERNELS]; /* the third-party kernels' times (0: none) */
  double roof;                         /* the roofline's time, us */
  double rfloor, rfl; /* the read floor (us), measured on the first recipe's plan, its log */
  int rf_done;
};

/* one missed target, printf's way, appended to buf[0..n) at *m ("; " between): 1 */
static int miss_add(char *buf, size_t n, size_t *m, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int miss_add(char *buf, size_t n, size_t *m, const char *fmt, ...) {
  char one[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(one, sizeof one, fmt, ap);
  va_end(ap);
  if (*m < n) *m += (size_t)snprintf(buf + *m, n - *m, "%s%s", *m ? "; " : "", one);
  return 1;
}

/* The task's targets on one fp8-KV shape for a time of us (the fast kernel's median, or a floor):
 * kv=8192 and bs >= 32 at 85% of the read bandwidth bw (KV bytes kvb), bs=256 kv=8192 <= 330 us,
 * bs=4 < 8 us, >= 5x the best seed kernel (pus, 0: none). Returns how many it misses and names them
 * in buf ("; " between). One definition for the fast kernel's verdict and the floors'. */
static int shape_misses(int64_t B, double kv_per_b, double kvb, double bw, double pus, double us,
                        char *buf, size_t n) {
  int miss = 0;
  size_t m = 0;
  if (n) buf[0] = 0;
  if (B >= 32 && kv_per_b == 8192 && kvb / (us * 1e-6) < 0.85 * bw)
    miss += miss_add(buf, n, &m, "%.1f%% of the bandwidth, not 85%%", 100 * kvb / (us * 1e-6) / bw);
  if (B == 256 && kv_per_b == 8192 && us > 330)
    miss += miss_add(buf, n, &m, "%.1f us, not <= 330", us);
  if (B == 4 && us >= 8) miss += miss_add(buf, n, &m, "%.2f us, not < 8", us);
  if (pus > 0 && pus / us < 5)
    miss += miss_add(buf, n, &m, "%.2f us, not 5x the seeds' %.1f", us, pus);
  return miss;
}

/* Untimed launches of f, flushed as the timed ones, until ms of wall time have passed (every launch
 * waits for its kernels, so the host's clock counts them). The default is do_bench's 25 ms, the
 * seeds' method. A longer warm-up measures something else, the time under sustained load: on an
 * H200 a second of bs=256, kv=8192 takes the board to its power limit and the power cap lowers the
 * SM clock, so the shape's median rises by a tenth or more (compare `--warmup 3000` with the
 * default). 200 launches of that shape take about a tenth of a second. */
static mlr_status warm_up(mlr_gpu_fast *f, uint64_t ms, mlr_error *err) {
  struct timespec t0, t1;
  mlr_status st = MLR_OK;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int k = 1; ms > 0 && st == MLR_OK; k++) {
    st = mlr_gpu_fast_launch(f, k, NULL, err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6 >=
        (double)ms)
      break;
  }
  return st;
}

/* the options into b: an exit code (the message printed) */
static int parse_args(const char *cmd, int argc, char **argv, struct bench *b) {
  int rc = MLR_EXIT_OK;
  for (int i = 0; i < argc; i++) {
    const char *v;
    int m;
    if (mlr_cli_list(cmd, argc, argv, &i, "peers", "a peers file", b->peers_files, &b->npeers,
                     MLR_BENCH_PEER_FILES, &rc) ||
        mlr_cli_list(cmd, argc, argv, &i, "shape", "a SPEC", b->shapes, &b->nshape, MAXSHAPES,
                     &rc) ||
        mlr_cli_list(cmd, argc, argv, &i, "recipe", "a name or file", b->recipes, &b->nrec, MAXREC,
                     &rc)) {
      if (rc != MLR_EXIT_OK) return rc;
    } else if ((m = mlr_cli_opt(argc, argv, &i, "reps", &v))) {
      if (m < 0 || mlr_cli_parse_u64(v, &b->reps) || b->reps < 100 || b->reps > MAXREPS)
        return mlr_cli_usage_error(
            cmd, "--reps: an integer in 100..%d (a median of at least 100 launches)", MAXREPS);
    } else if ((m = mlr_cli_opt(argc, argv, &i, "flush", &v))) {
      if (m < 0 || (strcmp(v, "dirty") && strcmp(v, "clean")))
        return mlr_cli_usage_error(
            cmd, "--flush: dirty (the seeds' way: a 256 MiB write) or clean (then a 256 MiB read)");
      b->clean = !strcmp(v, "clean");
    } else if ((m = mlr_cli_opt(argc, argv, &i, "warmup", &v))) {
      if (m < 0 || mlr_cli_parse_u64(v, &b->warmup_ms) || b->warmup_ms > MAXWARMUP)
        return mlr_cli_usage_error(cmd,
                                   "--warmup: milliseconds of untimed launches before each shape's "
                                   "timed ones, an integer in 0..%d",
                                   MAXWARMUP);
    } else if ((m = mlr_cli_opt(argc, argv, &i, "variant", &v))) {
      mlr_error err = {""};
      if (m < 0)
        return mlr_cli_usage_error(cmd, "--variant needs key=value[,key=value]... (ws, cluster, "
                                        "toktable, qdiv, lin, rows, tma)");
      if (mlr_gpu_fast_opts_parse(v, &b->opts, &err) != MLR_OK)
        return mlr_cli_usage_error(cmd, "--variant %s", err.msg);
    } else
      return mlr_cli_unknown_option(cmd, argv[i],
                                    "--shape --recipe --reps --peers --flush --warmup --variant");
  }
  return rc;
}

/* the peers file, the default shapes and recipes, the recipes read: an exit code */
static int setup(const char *cmd, struct bench *b) {
  for (int f = 0; f < b->npeers; f++) {
    char why[256];
    if (mlr_bench_peers_load(&b->pk, b->peers_files[f], why, sizeof why))
      return mlr_cli_usage_error(
          cmd, "--peers %s: not a peers file (a JSON object with a 'shapes' array): %s",
          b->peers_files[f], why);
  }
  const mlr_suite *bench = mlr_suite_find("bench");
  if (!b->nshape)
    for (size_t k = 0; k < bench->n && k < MAXSHAPES; k++)
      b->shapes[b->nshape++] = bench->cells[k].spec;
  if (!b->nrec) { /* default: this build's fp8-KV recipes (names ending in w8 or fp8), a8w8 first */
    static char plat[256];
    const char *w8[MAXREC];
    int n8 = 0;
    snprintf(plat, sizeof plat, "%s", mlr_gpu_fast_platform_recipes());
    for (char *save = NULL, *tok = strtok_r(plat, "|", &save); tok && n8 < MAXREC;
         tok = strtok_r(NULL, "|", &save))
      if (strlen(tok) > 3 &&
          (!strcmp(tok + strlen(tok) - 2, "w8") || !strcmp(tok + strlen(tok) - 3, "fp8")))
        w8[n8++] = tok;
    for (int pass = 0; pass < 2; pass++)
      for (int k = 0; k < n8; k++)
        if ((strstr(w8[k], "-a8w8") != NULL) == (pass == 0)) b->recipes[b->nrec++] = w8[k];
  }
  for (int k = 0; k < b->nrec; k++) {
    const int rc = mlr_cli_recipe_sets(cmd, b->recipes[k], NULL, 0, &b->rs[k]);
    if (rc != MLR_EXIT_OK) return rc;
  }
  return MLR_EXIT_OK;
}

/* the device, the read bandwidth and the launch floor, and the table's header: an exit code */
static int measure_bounds(const char *cmd, struct bench *b) {
  char device[256];
  mlr_error err = {""};
  if (mlr_gpu_device(device, sizeof device, &err) != MLR_OK) /* the bad-input table's no-gpu case */
    return mlr_cli_usage_error(cmd, "%s", err.msg);
  if (mlr_gpu_read_bandwidth(21, &b->bw, &err) != MLR_OK ||
      mlr_gpu_launch_floor(201, &b->floor1, &b->floor2, &err) != MLR_OK) {
    /* a GPU that failed a run or a reader's check: a failed run, not bad input */
    fprintf(stderr, "mlaref %s: %s\n", cmd, err.msg);
    return MLR_EXIT_FAIL;
  }
  printf("fast kernel on %s (%s runtime): %llu launches each after %llu ms of untimed ones, L2 "
         "flushed before each (%s), device "
         "events; read bandwidth measured now: %.3f TB/s (2 GiB, L2 flushed clean, the best of 18 "
         "readers' medians of 21)\n",
         device, mlr_gpu_backend(), (unsigned long long)b->reps, (unsigned long long)b->warmup_ms,
         b->clean ? "--flush clean: a 256 MiB write then a 256 MiB read, the L2 left clean"
                  : "a 256 MiB write, the L2 left dirty, as the seeds' do_bench",
         b->bw / 1e12);
  printf("launch floor measured now (kernels that do nothing, launched and timed the same way, "
         "median of 201): %.2f us one kernel, "
         "%.2f us attention + merge (splits > 1)\n",
         b->floor1, b->floor2);
  printf("%-26s %-15s %6s %-30s %9s %9s %9s %10s %8s %9s %9s %9s %8s\n", "shape", "recipe",
         "splits", "kernels", "KV MB", "median us", "least us", "roofline", "of bw", "read-only",
         "plan us", "seeds us", "speed-up");
  return MLR_EXIT_OK;
}

/* the read floor on f's plan, once a shape (after the kernel's own launches: the GPU as warm as
 * for them), into sh and b's read-floor figures */
static mlr_status read_floor(struct bench *b, struct shape *sh, mlr_gpu_fast *f, mlr_error *err) {
  int rb = 0, ru = 0;
  mlr_status st = mlr_gpu_fast_read_floor(f, (int)b->reps, &sh->rfloor, &rb, &ru, err);
  if (st != MLR_OK) return st;
  sh->rfl = log(sh->rfloor > 0 ? sh->rfloor : 1e-3); /* an event pair never times 0 us */
  sh->rf_done = 1;
  b->rflog += sh->rfl;
  b->nrf++;
  if (b->rn < sizeof b->readers)
    b->rn += (size_t)snprintf(b->readers + b->rn, sizeof b->readers - b->rn, "%s%dx%d",
                              b->rn ? ", " : "", rb, ru);
  char miss[256];
  if (sh->kv8 &&
      shape_misses(sh->in.B, sh->kv_per_b, sh->kvb, b->bw, sh->pus, sh->rfloor, miss,
                   sizeof miss) &&
      b->rm < sizeof b->rmiss)
    b->rm += (size_t)snprintf(b->rmiss + b->rm, sizeof b->rmiss - b->rm, "%s%s (%s)",
                              b->rm ? ", " : "", sh->spec, miss);
  return MLR_OK;
}

/* recipe k's plan floor on f's plan into *pfloor and b's plan-floor figures */
static mlr_status plan_floor(struct bench *b, const struct shape *sh, int k, mlr_gpu_fast *f,
                             double *pfloor, mlr_error *err) {
  mlr_status st = mlr_gpu_fast_plan_floor(f, (int)b->reps, pfloor, err);
  if (st != MLR_OK) return st;
  char miss[256];
  b->pflogk[k] += log(*pfloor > 0 ? *pfloor : 1e-3);
  if (sh->kv8 &&
      shape_misses(sh->in.B, sh->kv_per_b, sh->kvb, b->bw, sh->pus, *pfloor, miss, sizeof miss) &&
      b->pm < sizeof b->pmiss)
    b->pm += (size_t)snprintf(b->pmiss + b->pm, sizeof b->pmiss - b->pm, "%s%s %s (%s)",
                              b->pm ? ", " : "", sh->spec, b->rs[k].name, miss);
  return MLR_OK;
}

/* recipe k's median med on shape sh against each third-party kernel's: a line, and the figures
 * for the summary; med 0: the recipe did not run, the kernels' times alone */
static void beside(struct bench *b, const struct shape *sh, int k, double med) {
  char line[512];
  size_t n = 0;
  for (int m = 0; m < b->pk.nname; m++) {
    const double us = sh->tpus[m];
    if (us <= 0 || (med <= 0 && k > 0)) continue; /* not run: the times once a shape */
    if (med > 0) { /* the figures first: a line too long for the buffer drops text only */
      b->tplog[k][m] += log(us / med);
      if (!b->ntp[k][m]++ || us / med < b->tpmin[k][m]) b->tpmin[k][m] = us / med;
    }
    if (n < sizeof line)
      n += (size_t)snprintf(line + n, sizeof line - n, "%s%s %.2f us", n ? ", " : "",
                            b->pk.names[m], us);
    if (med > 0 && n < sizeof line)
      n += (size_t)snprintf(line + n, sizeof line - n, " (%.2fx)", us / med);
  }
  double best = sh->pus; /* the fastest peer on this shape (0: none) */
  for (int m = 0; m < b->pk.nname; m++)
    if (sh->tpus[m] > 0 && (best <= 0 || sh->tpus[m] < best)) best = sh->tpus[m];
  if (med > 0 && best > 0) {
    b->bestlog[k] += log(best / med);
    if (!b->nbest[k]++ || best / med < b->bestmin[k]) b->bestmin[k] = best / med;
    if (n && n < sizeof line)
      n += (size_t)snprintf(line + n, sizeof line - n, "; best peer %.2f us (%.2fx)", best,
                            best / med);
  }
  if (n)
    printf("%-26s %-15s beside it%s: %s\n", sh->spec, b->rs[k].name, med > 0 ? " (speed-up)" : "",
           line);
}

/* recipe k on shape sh: its launches timed, the floors, its row of the table: an exit code */
static int bench_recipe(const char *cmd, struct bench *b, struct shape *sh, int k) {
  mlr_error err = {""};
  mlr_gpu_fast *f = NULL;
  const uint64_t reps = b->reps;
  mlr_status st = mlr_gpu_fast_prepare(&b->rs[k], &sh->in, &b->opts, &f, &err);
  if (st == MLR_EINVAL) {
    printf("%-26s %-15s (not run: %s)\n", sh->spec, b->rs[k].name, err.msg);
    beside(b, sh, k, 0);
    return MLR_EXIT_OK;
  }
  if (b->clean && st == MLR_OK) st = mlr_gpu_fast_clean_flush(f, &err);
  if (st == MLR_OK) st = warm_up(f, b->warmup_ms, &err);
  double *t = malloc(reps * sizeof *t);
  for (uint64_t r = 0; st == MLR_OK && t && r < reps; r++)
    st = mlr_gpu_fast_launch(f, (int)(r + 1), &t[r], &err);
  if (st == MLR_OK && t && !sh->rf_done) st = read_floor(b, sh, f, &err);
  double pfloor = 0; /* the recipe's plan floor (us) */
  if (st == MLR_OK && t && b->plan) st = plan_floor(b, sh, k, f, &pfloor, &err);
  if (st != MLR_OK || !t) {
    fprintf(stderr, "mlaref %s: %s on %s: %s\n", cmd, b->rs[k].name, sh->spec,
            t ? err.msg : "out of memory");
    free(t);
    mlr_gpu_fast_free(f);
    return MLR_EXIT_FAIL;
  }
  mlr_sort_values(t, (int64_t)reps);
  const double med = mlr_sorted_quantile(t, (int64_t)reps, 0.5);
  char ptxt[16] = "-", sp[16] = "-", pft[16] = "-";
  if (sh->pus > 0) {
    snprintf(ptxt, sizeof ptxt, "%.1f", sh->pus);
    snprintf(sp, sizeof sp, "%.2fx", sh->pus / med);
  }
  if (b->plan) snprintf(pft, sizeof pft, "%.2f", pfloor);
  printf("%-26s %-15s %6lld %-30s %9.1f %9.2f %9.2f %8.2f us %7.1f%% %9.2f %9s %9s %8s\n", sh->spec,
         b->rs[k].name, mlr_gpu_fast_splits(f), mlr_gpu_fast_kernels(f), sh->kvb / 1e6, med, t[0],
         sh->roof, 100.0 * sh->roof / med, sh->rfloor, pft, ptxt, sp);
  beside(b, sh, k, med);
  b->logsum[k] += log(med);
  b->rflogk[k] += sh->rfl;
  b->n_ok[k]++;
  if (sh->pus > 0) {
    b->peerlog[k] += log(sh->pus / med);
    b->npeer[k]++;
  }
  if (sh->kv8 && shape_misses(sh->in.B, sh->kv_per_b, sh->kvb, b->bw, sh->pus, med, NULL, 0))
    b->targets = 0; /* the task's targets on the bench shapes */
  free(t);
  mlr_gpu_fast_free(f);
  return MLR_EXIT_OK;
}

/* shape si: its inputs, bytes, roofline and seed time, then every recipe: an exit code */
static int bench_shape(const char *cmd, struct bench *b, int si) {
  struct shape sh;
  memset(&sh, 0, sizeof sh);
  sh.spec = b->shapes[si];
  mlr_tensor_file tf;
  int rc = mlr_cli_gen_memory(cmd, "--shape", sh.spec, &tf, &sh.in, NULL);
  if (rc != MLR_EXIT_OK) return rc;
  long long Lsum = 0;
  for (int64_t bi = 0; bi < sh.in.B; bi++) Lsum += mlr_inputs_kv_len(&sh.in, bi);
  sh.kv8 = sh.in.kv_format != MLR_FMT_BF16;
  sh.kvb = (double)Lsum * 576 * (sh.kv8 ? 1 : 2);
  const double bytes = sh.kvb + (double)sh.in.T * sh.in.H * (576 + 512) * 2;
  sh.kv_per_b = sh.in.B ? (double)Lsum / (double)sh.in.B : 0;
  const int64_t kv = (int64_t)(sh.kv_per_b + 0.5), q = sh.in.B ? sh.in.T / sh.in.B : 1;
  sh.pus = sh.kv8 ? mlr_bench_peers_seed_us(&b->pk, sh.in.B, kv, sh.in.H, q) : 0;
  /* the third-party times are fp8-KV figures, as the seeds' */
  for (int m = 0; m < b->pk.nname; m++)
    sh.tpus[m] = sh.kv8 ? mlr_bench_peers_kernel_us(&b->pk, m, sh.in.B, kv, sh.in.H, q) : 0;
  sh.roof = bytes / b->bw * 1e6; /* us */
  b->boundlog += log(b->floor1 + sh.roof);
  b->bound85log += log(b->floor1 + sh.roof / 0.85);
  b->nbound++;
  if (sh.pus > 0 && sh.pus / 5 < sh.roof && b->un < sizeof b->unreach)
    b->un += (size_t)snprintf(b->unreach + b->un, sizeof b->unreach - b->un,
                              "%s%s (%.1f us, roofline %.2f us)", b->un ? ", " : "", sh.spec,
                              sh.pus / 5, sh.roof);
  for (int k = 0; k < b->nrec && rc == MLR_EXIT_OK; k++) rc = bench_recipe(cmd, b, &sh, k);
  mlr_tf_free(&tf);
  return rc;
}

/* the recipes' geomeans, the bounds, the floors and the task's targets */
static void print_summary(const struct bench *b) {
  int targets = b->targets;
  for (int k = 0; k < b->nrec; k++) {
    if (!b->n_ok[k]) continue;
    const double gm = exp(b->logsum[k] / b->n_ok[k]);
    printf("%s: geomean %.2f us over %d shapes (target <= 25 us: %s)", b->rs[k].name, gm,
           b->n_ok[k], gm <= 25 ? "met" : "NOT met");
    if (b->npeer[k])
      printf("; geomean speed-up over the best seed Triton kernel %.2fx over %d shapes",
             exp(b->peerlog[k] / b->npeer[k]), b->npeer[k]);
    for (int m = 0; m < b->pk.nname; m++)
      if (b->ntp[k][m])
        printf("; speed-up over %s: geomean %.2fx over %d shapes, least %.2fx", b->pk.names[m],
               exp(b->tplog[k][m] / b->ntp[k][m]), b->ntp[k][m], b->tpmin[k][m]);
    if (b->nbest[k])
      printf("; speed-up over each shape's best peer: geomean %.2fx over %d shapes, least %.2fx",
             exp(b->bestlog[k] / b->nbest[k]), b->nbest[k], b->bestmin[k]);
    printf("; %.2f times the read floor (geomean of the ratios)",
           exp((b->logsum[k] - b->rflogk[k]) / b->n_ok[k]));
    if (b->plan)
      printf("; plan floor geomean %.2f us, the kernel %.2f times it (its arithmetic)",
             exp(b->pflogk[k] / b->n_ok[k]), exp((b->logsum[k] - b->pflogk[k]) / b->n_ok[k]));
    printf("\n");
    if (gm > 25) targets = 0;
  }
  if (b->nbound) {
    printf("bounds (this run): a kernel timed this way takes at least the launch floor plus the "
           "roofline: geomean %.2f us over %d "
           "shapes at the read bandwidth, %.2f us at 85%% of it\n",
           exp(b->boundlog / b->nbound), b->nbound, exp(b->bound85log / b->nbound));
    if (b->un)
      printf("5x the best seed kernel asks for less than the roofline at %s: not reachable on this "
             "machine\n",
             b->unreach);
  }
  if (b->nrf) {
    printf("read floor (this run): a kernel that only reads each shape's KV once, flushed and "
           "timed this way (the least median of 18 "
           "readers; blocks an SM x loads in flight: %s): geomean %.2f us over %d shapes%s\n",
           b->readers, exp(b->rflog / b->nrf), b->nrf,
           exp(b->rflog / b->nrf) > 25 ? " (above the 25 us target)" : "");
    printf("the task's targets that a kernel that only reads its KV misses in this run: %s\n",
           b->rm ? b->rmiss : "none");
  }
  if (b->plan && b->nrf)
    printf("plan floor (this run): each recipe's plan (grid, clusters, KV copies through shared "
           "memory, stores, merge) with none of the attention's arithmetic, flushed and timed "
           "this way; the task's targets it misses: %s\n",
           b->pm ? b->pmiss : "none");
  if (b->clean)
    printf("the task's targets: not judged (--flush clean: not measured as the seeds are)\n");
  else
    printf("the task's targets (every shape and recipe above): %s\n", targets ? "met" : "NOT met");
}

int mlr_bench_gpu_fast(int argc, char **argv) {
  const char *cmd = "bench gpu";
  static struct bench b; /* large: its recipes and lists */
  memset(&b, 0, sizeof b);
  b.reps = 200;
  b.warmup_ms = 25;
  b.targets = 1;
  mlr_gpu_fast_opts_init(&b.opts);
  int rc = parse_args(cmd, argc, argv, &b);
  if (rc == MLR_EXIT_OK) rc = setup(cmd, &b);
  if (rc == MLR_EXIT_OK) rc = measure_bounds(cmd, &b);
  b.plan = mlr_gpu_fast_has_plan_floor();
  for (int si = 0; si < b.nshape && rc == MLR_EXIT_OK; si++) rc = bench_shape(cmd, &b, si);
  if (rc == MLR_EXIT_OK) print_summary(&b);
  mlr_bench_peers_free(&b.pk);
  return rc;
}
