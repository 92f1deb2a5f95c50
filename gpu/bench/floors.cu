/* floors.cu: the bounds `mlaref bench gpu` judges the fast kernel against (mlr_gpu_bench.h): the
 * read floor of a plan, the read bandwidth and the launch floor, timed as the fast kernel's launch
 * is (fast_host.cuh's time_kernels). Both vendors. */
#include "../fast/fast_host.cuh"
#include "mlr_gpu_bench.h"

using namespace mlr_fast;

namespace {

/* the launch floor's kernels (mlr_gpu_launch_floor): an attention kernel that does nothing, and a
 * merge that does nothing after waiting for it (as k_merge waits for k_attn) */
__global__ void k_nop(fparams p) { (void)p; }
__global__ void k_nop_dep(fparams p) {
  (void)p;
  griddep_wait();
}

/* The readers of the read floor and the read bandwidth: k_read (timer.cu) with 1, 4 or 8 loads a
 * thread in flight on 1 to 32 blocks of BW_THREADS an SM. The fewest blocks suit the small reads
 * (one load a thread, all issued at once: the launch, one round trip, the transfer), the most and
 * the deeper unrolls the large ones (more bytes in flight). */
const int RF_BLOCKS[] = {1, 2, 4, 8, 16, 32};
const int RF_UNROLL[] = {1, 4, 8};

/* The least, over the readers, of each one's median_kernels time reading x[0..n) (timed with tm's
 * flush), and the reader (*blocks_per_sm, *unroll). Each reader is first run untimed with CHECK =
 * 1: its sum of the words' 32-bit lanes must be want (mod 2^64), else MLR_EDEVICE (what names the
 * buffer): a reader that skipped or repeated a word does not time anything. */
mlr_status best_reader(const timer &tm, const uint4 *x, int64_t n, unsigned long long want,
                       const char *what, int reps, double *us, int *blocks_per_sm, int *unroll,
                       mlr_error *err) {
  mlr_status st = MLR_OK;
  hipDeviceProp_t prop;
  double best = 0;
  unsigned long long got = 0;
  GPU_TRY(hipGetDeviceProperties(&prop, 0));
  for (int ui = 0; ui < (int)(sizeof RF_UNROLL / sizeof *RF_UNROLL) && st == MLR_OK; ui++)
    for (int b = 0; b < (int)(sizeof RF_BLOCKS / sizeof *RF_BLOCKS) && st == MLR_OK; b++) {
      const unsigned grid = (unsigned)(prop.multiProcessorCount * RF_BLOCKS[b]);
      const int u = RF_UNROLL[ui];
      double t = 0;
      GPU_TRY(hipMemset(tm.sink, 0, 8));
      /* n = 0 (no KV) launches anyway: the floor is then a launch's */
      read_words(u, 1, grid, x, n, tm.sink);
      GPU_TRY(hipGetLastError());
      GPU_TRY(hipMemcpy(&got, tm.sink, 8, hipMemcpyDeviceToHost));
      if (got != want) {
        st = mlr_error_set(err, MLR_EDEVICE,
                           "the reader of %d blocks an SM and %d loads a thread summed %s's words "
                           "to %llu, not %llu: "
                           "it did not read each word once",
                           RF_BLOCKS[b], u, what, got, want);
        break;
      }
      st = median_kernels(
          reps, tm,
          [&]() {
            read_words(u, 0, grid, x, n, tm.sink);
            GPU_TRY(hipGetLastError());
          out:
            return st;
          },
          &t, err);
      if (st == MLR_OK && ((ui == 0 && b == 0) || t < best)) {
        best = t;
        *blocks_per_sm = RF_BLOCKS[b];
        *unroll = u;
      }
    }
  if (st == MLR_OK) *us = best;
out:
  return st;
}

} // namespace

extern "C" mlr_status mlr_gpu_fast_read_floor(mlr_gpu_fast *f, int reps, double *us,
                                              int *blocks_per_sm, int *unroll, mlr_error *err) {
  mlr_status st = MLR_OK;
  const int64_t n = f->kv_read / 16; /* QK * kvw bytes a row: 36 or 72 words of 16 bytes */
  unsigned long long want = 0;
  uint32_t *host = (uint32_t *)malloc((size_t)(n > 0 ? n : 1) * 16);
  if (!host)
    return mlr_error_set(err, MLR_ENOMEM,
                         "out of host memory for the read floor's check (%lld bytes)",
                         (long long)n * 16);
  GPU_TRY(hipMemcpy(host, f->p.kv, (size_t)n * 16, hipMemcpyDeviceToHost));
  for (int64_t k = 0; k < 4 * n; k++) want += host[k]; /* mod 2^64, as the readers sum */
  /* f->tm has its sink */
  st = best_reader(f->tm, (const uint4 *)f->p.kv, n, want, "the KV", reps, us, blocks_per_sm,
                   unroll, err);
out:
  free(host);
  return st;
}

extern "C" mlr_status mlr_gpu_launch_floor(int reps, double *one_us, double *chain_us,
                                           mlr_error *err) {
  mlr_status st = MLR_OK;
  hipDeviceProp_t prop;
  fparams p = {}; /* the kernels' argument block, as large as the fast kernel's */
  timer tm = {};  /* the flush as the fast kernel's default (a write: nothing here reads memory) */
  GPU_TRY(hipGetDeviceProperties(&prop, 0));
  if ((st = timer_init(tm, 0, err)) != MLR_OK) goto out;
  for (int chain = 0; chain < 2 && st == MLR_OK; chain++) {
    /* one block of NTHR threads an SM (a full wave, as the larger shapes' attention), launched as
     * mlr_gpu_fast_launch launches its kernels */
    const dim3 grid((unsigned)prop.multiProcessorCount);
    st = median_kernels(
        reps, tm,
        [&]() {
#if MLR_FAST_AMD
          k_nop<<<grid, NTHR>>>(p);
          GPU_TRY(hipGetLastError());
          if (chain) {
            k_nop_dep<<<grid, MERGE_THREADS>>>(p);
            GPU_TRY(hipGetLastError());
          }
#else
          GPU_TRY(launch_pdl(k_nop, grid, NTHR, 0, p));
          if (chain) GPU_TRY(launch_pdl(k_nop_dep, grid, MERGE_THREADS, 0, p));
#endif
        out:
          return st;
        },
        chain ? chain_us : one_us, err);
  }
out:
  timer_free(tm);
  return st;
}

extern "C" mlr_status mlr_gpu_read_bandwidth(int reps, double *bytes_per_s, mlr_error *err) {
  mlr_status st = MLR_OK;
  const int64_t n = (int64_t)2 << 30;
  void *x = NULL;
  double us = 0;
  int blocks = 0, unroll = 0;
  /* the clean flush: after the flush's write alone the read would also write back up to the L2's
   * size (50 MiB on the H200) of the flush's dirty lines, and count it as reading time */
  timer tm = {};
  if ((st = timer_init(tm, 1, err)) != MLR_OK) goto out;
  GPU_TRY(hipMalloc(&x, (size_t)n));
  GPU_TRY(hipMemset(x, 0x5A, (size_t)n));
  /* every 32-bit lane is 0x5A5A5A5A: n / 4 of them */
  st = best_reader(tm, (const uint4 *)x, n / 16, (unsigned long long)(n / 4) * 0x5A5A5A5Aull,
                   "the 2 GiB buffer", reps, &us, &blocks, &unroll, err);
  if (st == MLR_OK) *bytes_per_s = (double)n / (us * 1e-6);
out:
  timer_free(tm);
  (void)hipFree(x);
  return st;
}
