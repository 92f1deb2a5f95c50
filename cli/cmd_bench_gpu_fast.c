/* mlaref bench gpu [--shape SPEC]... [--recipe NAME|FILE]... [--reps N] [--peers FILE] [--flush
 * dirty|clean]
 *                  [--warmup MS]
 * The fast kernel's speed (gpu/fast), measured like the seeds' peers: per shape (default the 8
 * bench shapes) and recipe (default fast-a8w8 and fast-a16w8), after --warmup ms of untimed
 * launches (default 25, as the seeds' do_bench: see warm_up), --reps launches
 * (default 200, at least 100), each after a 256 MiB write that evicts the L2 and leaves it dirty
 * (as the seeds' do_bench; --flush clean: then a 256 MiB read, the L2 clean), timed by device
 * events around the kernels alone; the median and the least, and the kernels run
 * (mlr_gpu_fast_kernels: the attention variant, its copies and the merge). Beside it: the read
 * bandwidth measured in the same run (mlr_gpu_read_bandwidth, 2 GiB, the L2 flushed clean, the best
 * of the read floor's readers) and the launch floor (mlr_gpu_launch_floor: kernels that do nothing,
 * launched and timed the same way, alone and as attention + merge), the time the roofline allows
 * (the bytes every kernel must move: KV read once, Q read, O written, at that bandwidth), the
 * achieved fraction, the read floor (mlr_gpu_fast_read_floor: the best of 18 kernels that only read
 * the shape's KV, flushed and timed as the fast kernel, on the shape's first recipe's plan), the
 * plan floor (mlr_gpu_fast_plan_floor, CUDA builds: the recipe's plan, its grid, clusters, copies,
 * stores and merge, with none of the attention's arithmetic, timed the same way), and with
 * --peers the best seed Triton time per shape from scripts/seed_peers.py's peers.json of the same
 * machine and the speed-up over it. Ends with the
 * bounds (the launch floor plus the roofline, their geomean; the shapes where 5x the seeds would be
 * under the roofline; the read floors' geomean and the targets that a kernel that only reads its KV
 * misses, the plan floors' geomean and the targets they miss) and the targets (issue 8) met or not.
 */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "mlr_compare.h"
#include "mlr_inputs.h"
#include "mlr_suites.h"
#include "mlr_gpu.h"
#include "mlr_gpu_fast.h"
#include "mlr_recipe.h"

enum { MAXSHAPES = 16, MAXREC = 4, MAXREPS = 10000, MAXWARMUP = 60000 };

/* the best seed Triton time (us) of shape (bs, kv) in a peers.json, or 0 */
static double peer_us(json_t *peers, long long bs, long long kv) {
  json_t *shapes = json_object_get(peers, "shapes"), *s;
  size_t i;
  double best = 0;
  json_array_foreach(shapes, i, s) {
    if (json_integer_value(json_object_get(s, "bs")) != bs ||
        json_integer_value(json_object_get(s, "kv")) != kv)
      continue;
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
      const double us = json_number_value(json_object_get(v, "us"));
      if (strncmp(k, "triton", 6) == 0 && us > 0 && (best == 0 || us < best)) best = us;
    }
  }
  return best;
}

/* Issue 8's targets on one fp8-KV shape for a time of us (the fast kernel's median, or the read
 * floor): kv=8192 and bs >= 32 at 85% of the read bandwidth bw (KV bytes kvb), bs=256 kv=8192
 * <= 330 us, bs=4 < 8 us, >= 5x the best seed kernel (pus, 0: none). Returns how many it misses and
 * names them in buf ("; " between). One definition for the fast kernel's verdict and the read
 * floor's. */
static int shape_misses(int64_t B, double kv_per_b, double kvb, double bw, double pus, double us,
                        char *buf, size_t n) {
  int miss = 0;
  size_t m = 0;
#define MISS(...) (miss++, m += m < n ? (size_t)snprintf(buf + m, n - m, __VA_ARGS__) : 0)
  if (n) buf[0] = 0;
  if (B >= 32 && kv_per_b == 8192 && kvb / (us * 1e-6) < 0.85 * bw)
    MISS("%s%.1f%% of the bandwidth, not 85%%", m ? "; " : "", 100 * kvb / (us * 1e-6) / bw);
  if (B == 256 && kv_per_b == 8192 && us > 330) MISS("%s%.1f us, not <= 330", m ? "; " : "", us);
  if (B == 4 && us >= 8) MISS("%s%.2f us, not < 8", m ? "; " : "", us);
  if (pus > 0 && pus / us < 5) MISS("%s%.2f us, not 5x the seeds' %.1f", m ? "; " : "", us, pus);
#undef MISS
  return miss;
}

/* Untimed launches of f, flushed as the timed ones, until ms of wall time have passed (every launch
 * waits for its kernels, so the host's clock counts them). The default is do_bench's 25 ms (the
 * issue asks for the seeds' method). A longer warm-up measures something else, the time under
 * sustained load: on the H200 (BENCHMARKS.md, session 11) a second of bs=256, kv=8192 takes the
 * board to its 700 W limit, the software power cap lowers the SM clock to 1290..1845 MHz, and the
 * shape's median rises from about 320 us to 347..387 us (--warmup 1000 or more). 200 launches of
 * that shape take about a tenth of a second. */
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

int mlr_bench_gpu_fast(int argc, char **argv) {
  const char *cmd = "bench gpu", *shapes[MAXSHAPES], *recipes[MAXREC], *peers_file = NULL;
  int nshape = 0, nrec = 0, rc = MLR_EXIT_OK, clean = 0;
  uint64_t reps = 200, warmup_ms = 25;
  for (int i = 0; i < argc; i++) {
    const char *v;
    int m;
    if (mlr_cli_str(cmd, argc, argv, &i, "peers", "a peers.json file", &peers_file, &rc)) {
      if (rc != MLR_EXIT_OK) return rc;
    } else if ((m = mlr_cli_opt(argc, argv, &i, "shape", &v))) {
      if (m < 0 || nshape == MAXSHAPES)
        return mlr_cli_usage_error(cmd, "--shape needs a SPEC (at most %d)", MAXSHAPES);
      shapes[nshape++] = v;
    } else if ((m = mlr_cli_opt(argc, argv, &i, "recipe", &v))) {
      if (m < 0 || nrec == MAXREC)
        return mlr_cli_usage_error(cmd, "--recipe needs a name or file (at most %d)", MAXREC);
      recipes[nrec++] = v;
    } else if ((m = mlr_cli_opt(argc, argv, &i, "reps", &v))) {
      if (m < 0 || mlr_cli_parse_u64(v, &reps) || reps < 100 || reps > MAXREPS)
        return mlr_cli_usage_error(
            cmd, "--reps: an integer in 100..%d (a median of at least 100 launches)", MAXREPS);
    } else if ((m = mlr_cli_opt(argc, argv, &i, "flush", &v))) {
      if (m < 0 || (strcmp(v, "dirty") && strcmp(v, "clean")))
        return mlr_cli_usage_error(
            cmd, "--flush: dirty (the seeds' way: a 256 MiB write) or clean (then a 256 MiB read)");
      clean = !strcmp(v, "clean");
    } else if ((m = mlr_cli_opt(argc, argv, &i, "warmup", &v))) {
      if (m < 0 || mlr_cli_parse_u64(v, &warmup_ms) || warmup_ms > MAXWARMUP)
        return mlr_cli_usage_error(cmd,
                                   "--warmup: milliseconds of untimed launches before each shape's "
                                   "timed ones, an integer in 0..%d",
                                   MAXWARMUP);
    } else
      return mlr_cli_usage_error(
          cmd, "unknown option '%s' (valid: --shape --recipe --reps --peers --flush --warmup)",
          argv[i]);
  }
  json_t *peers = NULL;
  if (peers_file) {
    json_error_t je;
    if (!(peers = json_load_file(peers_file, 0, &je)) ||
        !json_is_array(json_object_get(peers, "shapes"))) {
      json_decref(peers);
      return mlr_cli_usage_error(
          cmd, "--peers %s: not a peers.json (an object with a 'shapes' array): line %d: %s",
          peers_file, je.line, peers ? "no shapes array" : je.text);
    }
  }
  const mlr_suite *bench = mlr_suite_find("bench");
  if (!nshape)
    for (size_t k = 0; k < bench->n && k < MAXSHAPES; k++) shapes[nshape++] = bench->cells[k].spec;
  if (!nrec) { /* default: this build's fp8-KV recipes (names ending in w8), a8w8 first */
    static char plat[256];
    const char *w8[MAXREC];
    int n8 = 0;
    snprintf(plat, sizeof plat, "%s", mlr_gpu_fast_platform_recipes());
    for (char *save = NULL, *tok = strtok_r(plat, "|", &save); tok && n8 < MAXREC;
         tok = strtok_r(NULL, "|", &save))
      if (strlen(tok) > 2 && !strcmp(tok + strlen(tok) - 2, "w8")) w8[n8++] = tok;
    for (int pass = 0; pass < 2; pass++)
      for (int k = 0; k < n8; k++)
        if ((strstr(w8[k], "-a8w8") != NULL) == (pass == 0)) recipes[nrec++] = w8[k];
  }
  static mlr_recipe rs[MAXREC];
  for (int k = 0; k < nrec; k++)
    if ((rc = mlr_cli_recipe_sets(cmd, recipes[k], NULL, 0, &rs[k])) != MLR_EXIT_OK) goto done;
  char device[256];
  mlr_error err = {""};
  double bw = 0, floor1 = 0, floor2 = 0;
  if (mlr_gpu_device(device, sizeof device, &err) !=
      MLR_OK) { /* no usable GPU: the bad-input table's no-gpu case */
    rc = mlr_cli_usage_error(cmd, "%s", err.msg);
    goto done;
  }
  if (mlr_gpu_read_bandwidth(21, &bw, &err) != MLR_OK ||
      mlr_gpu_launch_floor(201, &floor1, &floor2, &err) != MLR_OK) {
    fprintf(stderr, "mlaref %s: %s\n", cmd,
            err.msg); /* a GPU that failed a run or a reader's check: a failed run, not bad input */
    rc = MLR_EXIT_FAIL;
    goto done;
  }
  printf("fast kernel on %s (%s runtime): %llu launches each after %llu ms of untimed ones, L2 "
         "flushed before each (%s), device "
         "events; read bandwidth measured now: %.3f TB/s (2 GiB, L2 flushed clean, the best of 18 "
         "readers' medians of 21)\n",
         device, mlr_gpu_backend(), (unsigned long long)reps, (unsigned long long)warmup_ms,
         clean ? "--flush clean: a 256 MiB write then a 256 MiB read, the L2 left clean"
               : "a 256 MiB write, the L2 left dirty, as the seeds' do_bench",
         bw / 1e12);
  printf("launch floor measured now (kernels that do nothing, launched and timed the same way, "
         "median of 201): %.2f us one kernel, "
         "%.2f us attention + merge (splits > 1)\n",
         floor1, floor2);
  printf("%-26s %-15s %6s %-30s %9s %9s %9s %10s %8s %9s %9s %9s %8s\n", "shape", "recipe",
         "splits", "kernels", "KV MB", "median us", "least us", "roofline", "of bw", "read-only",
         "plan us", "seeds us", "speed-up");
  double logsum[MAXREC] = {0}, peerlog[MAXREC] = {0},
         rflogk[MAXREC] = {0}; /* rflogk: the read floors of the shapes recipe k ran */
  int n_ok[MAXREC] = {0}, targets = 1;
  /* what no kernel timed this way can beat: the launch floor (one kernel) plus the roofline; and
   * the shapes where 5x the best seed kernel is below the roofline */
  double boundlog = 0, bound85log = 0;
  int nbound = 0;
  char unreach[1024] = "";
  size_t un = 0;
  /* the read floors: their geomean, the readers taken, and the targets they miss (issue 8's, as
   * `targets` below judges the fast kernel) */
  double rflog = 0;
  int nrf = 0;
  char readers[512] = "", rmiss[1024] = "";
  size_t rn = 0, rm = 0;
  /* the plan floors (where the build has them: mlr_gpu_fast_has_plan_floor): their logs by recipe
   * and the targets they miss */
  const int plan = mlr_gpu_fast_has_plan_floor();
  double pflogk[MAXREC] = {0};
  char pmiss[4096] = "";
  size_t pm = 0;
  for (int si = 0; si < nshape && rc == MLR_EXIT_OK; si++) {
    mlr_tensor_file tf;
    mlr_inputs in;
    if ((rc = mlr_cli_gen_memory(cmd, "--shape", shapes[si], &tf, &in, NULL)) != MLR_EXIT_OK) break;
    long long Lsum = 0;
    for (int64_t b = 0; b < in.B; b++) Lsum += mlr_inputs_kv_len(&in, b);
    const int kv8 =
        in.kv_format != MLR_FMT_BF16; /* the seeds and issue 8's targets are fp8-KV figures */
    const double kvb = (double)Lsum * 576 * (kv8 ? 1 : 2),
                 bytes = kvb + (double)in.T * in.H * (576 + 512) * 2;
    const double kv_per_b = in.B ? (double)Lsum / (double)in.B : 0;
    const double pus =
        peers && kv8 ? peer_us(peers, (long long)in.B, (long long)(kv_per_b + 0.5)) : 0;
    const double roof = bytes / bw * 1e6; /* us */
    boundlog += log(floor1 + roof), bound85log += log(floor1 + roof / 0.85), nbound++;
    if (pus > 0 && pus / 5 < roof && un < sizeof unreach)
      un += (size_t)snprintf(unreach + un, sizeof unreach - un, "%s%s (%.1f us, roofline %.2f us)",
                             un ? ", " : "", shapes[si], pus / 5, roof);
    double rfloor = 0, rfl = 0; /* this shape's read floor (us), measured on its first recipe's plan
                                   (rf_done), and its log */
    int rf_done = 0;
    for (int k = 0; k < nrec && rc == MLR_EXIT_OK; k++) {
      mlr_gpu_fast *f = NULL;
      mlr_status st = mlr_gpu_fast_prepare(&rs[k], &in, &f, &err);
      if (st == MLR_EINVAL) {
        printf("%-26s %-15s (not run: %s)\n", shapes[si], rs[k].name, err.msg);
        continue;
      }
      if (clean && st == MLR_OK) st = mlr_gpu_fast_clean_flush(f, &err);
      if (st == MLR_OK) st = warm_up(f, warmup_ms, &err);
      double *t = malloc(reps * sizeof *t);
      for (uint64_t r = 0; st == MLR_OK && t && r < reps; r++)
        st = mlr_gpu_fast_launch(f, (int)(r + 1), &t[r], &err);
      if (st == MLR_OK && t &&
          !rf_done) { /* after the kernel's own launches: the GPU as warm as for them */
        int rb = 0, ru = 0;
        if ((st = mlr_gpu_fast_read_floor(f, (int)reps, &rfloor, &rb, &ru, &err)) == MLR_OK) {
          rfl =
              log(rfloor > 0 ? rfloor : 1e-3); /* an event pair never times 0 us; guarded anyway */
          rf_done = 1, rflog += rfl, nrf++;
          if (rn < sizeof readers)
            rn += (size_t)snprintf(readers + rn, sizeof readers - rn, "%s%dx%d", rn ? ", " : "", rb,
                                   ru);
          char miss[256];
          if (kv8 && shape_misses(in.B, kv_per_b, kvb, bw, pus, rfloor, miss, sizeof miss) &&
              rm < sizeof rmiss)
            rm += (size_t)snprintf(rmiss + rm, sizeof rmiss - rm, "%s%s (%s)", rm ? ", " : "",
                                   shapes[si], miss);
        }
      }
      double pfloor = 0; /* the recipe's plan floor (us) */
      if (st == MLR_OK && t && plan &&
          (st = mlr_gpu_fast_plan_floor(f, (int)reps, &pfloor, &err)) == MLR_OK) {
        char miss[256];
        pflogk[k] += log(pfloor > 0 ? pfloor : 1e-3);
        if (kv8 && shape_misses(in.B, kv_per_b, kvb, bw, pus, pfloor, miss, sizeof miss) &&
            pm < sizeof pmiss)
          pm += (size_t)snprintf(pmiss + pm, sizeof pmiss - pm, "%s%s %s (%s)", pm ? ", " : "",
                                 shapes[si], rs[k].name, miss);
      }
      if (st != MLR_OK || !t) {
        fprintf(stderr, "mlaref %s: %s on %s: %s\n", cmd, rs[k].name, shapes[si],
                t ? err.msg : "out of memory");
        free(t), mlr_gpu_fast_free(f);
        rc = MLR_EXIT_FAIL;
        break;
      }
      mlr_sort_values(t, (int64_t)reps);
      const double med = mlr_sorted_quantile(t, (int64_t)reps, 0.5);
      char ptxt[16] = "-", sp[16] = "-", pft[16] = "-";
      if (pus > 0)
        snprintf(ptxt, sizeof ptxt, "%.1f", pus), snprintf(sp, sizeof sp, "%.2fx", pus / med);
      if (plan) snprintf(pft, sizeof pft, "%.2f", pfloor);
      printf("%-26s %-15s %6lld %-30s %9.1f %9.2f %9.2f %8.2f us %7.1f%% %9.2f %9s %9s %8s\n",
             shapes[si], rs[k].name, mlr_gpu_fast_splits(f), mlr_gpu_fast_kernels(f), kvb / 1e6,
             med, t[0], roof, 100.0 * roof / med, rfloor, pft, ptxt, sp);
      logsum[k] += log(med), rflogk[k] += rfl, n_ok[k]++;
      if (pus > 0) peerlog[k] += log(pus / med);
      if (kv8 && shape_misses(in.B, kv_per_b, kvb, bw, pus, med, NULL, 0))
        targets = 0; /* issue 8's targets on the bench shapes */
      free(t);
      mlr_gpu_fast_free(f);
    }
    mlr_tf_free(&tf);
  }
  if (rc == MLR_EXIT_OK)
    for (int k = 0; k < nrec; k++) {
      if (!n_ok[k]) continue;
      const double gm = exp(logsum[k] / n_ok[k]);
      printf("%s: geomean %.2f us over %d shapes (target <= 25 us: %s)", rs[k].name, gm, n_ok[k],
             gm <= 25 ? "met" : "NOT met");
      if (peers)
        printf("; geomean speed-up over the best seed Triton kernel %.2fx",
               exp(peerlog[k] / n_ok[k]));
      printf("; %.2f times the read floor (geomean of the ratios)",
             exp((logsum[k] - rflogk[k]) / n_ok[k]));
      if (plan)
        printf("; plan floor geomean %.2f us, the kernel %.2f times it (its arithmetic)",
               exp(pflogk[k] / n_ok[k]), exp((logsum[k] - pflogk[k]) / n_ok[k]));
      printf("\n");
      if (gm > 25) targets = 0;
    }
  if (rc == MLR_EXIT_OK && nbound) {
    printf("bounds (this run): a kernel timed this way takes at least the launch floor plus the "
           "roofline: geomean %.2f us over %d "
           "shapes at the read bandwidth, %.2f us at 85%% of it\n",
           exp(boundlog / nbound), nbound, exp(bound85log / nbound));
    if (un)
      printf("5x the best seed kernel asks for less than the roofline at %s: not reachable on this "
             "machine\n",
             unreach);
  }
  if (rc == MLR_EXIT_OK && nrf) {
    printf("read floor (this run): a kernel that only reads each shape's KV once, flushed and "
           "timed this way (the least median of 18 "
           "readers; blocks an SM x loads in flight: %s): geomean %.2f us over %d shapes%s\n",
           readers, exp(rflog / nrf), nrf,
           exp(rflog / nrf) > 25 ? " (above the 25 us target)" : "");
    printf("targets (issue 8) that a kernel that only reads its KV misses in this run: %s\n",
           rm ? rmiss : "none");
  }
  if (rc == MLR_EXIT_OK && plan && nrf)
    printf(
        "plan floor (this run): each recipe's plan (grid, clusters, KV copies through shared "
        "memory, stores, merge) with none of "
        "the attention's arithmetic, flushed and timed this way; targets (issue 8) it misses: %s\n",
        pm ? pmiss : "none");
  if (rc == MLR_EXIT_OK && clean)
    printf("targets (issue 8): not judged (--flush clean: not measured as the seeds are)\n");
  else if (rc == MLR_EXIT_OK)
    printf("targets (issue 8, every shape and recipe above): %s\n", targets ? "met" : "NOT met");
done:
  json_decref(peers);
  return rc;
}
