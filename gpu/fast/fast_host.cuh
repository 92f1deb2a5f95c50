/* fast_host.cuh: the fast kernel's host side, shared by its translation units and the benchmark
 * probes (gpu/bench): the plan (struct mlr_gpu_fast), the timing of a launch, and the small host
 * functions through which one file launches another's kernels (each kernel's code lives in the
 * file that defines it: no relocatable device code). */
#ifndef MLR_FAST_HOST_CUH
#define MLR_FAST_HOST_CUH

#include "fast_common.cuh"

namespace mlr_fast {

enum {
  MAXBUF = 24,
  FLUSH_BYTES = (MLR_FAST_AMD ? 512 : 256)
                << 20 /* above the H200's 50 MiB of L2, MI300X's 256 MiB Infinity Cache */
};

/* what a timed run needs besides its kernels (time_kernels): two events, the flush buffer, for
 * the clean flush a second buffer read after the flush's write, and the readers' sink. One a plan
 * (mlr_gpu_fast), one a probe (launch floor, read bandwidth), made once, not once a run. */
struct timer {
  hipEvent_t ev[2];
  void *flush, *clean;
  unsigned long long *sink;
};
/* timer.cu: what tm lacks of the events, the flush buffer and (clean) the clean flush's buffer and
 * sink; its release; the L2 flush before a timed run (flush_val < 0: none) */
mlr_status timer_init(timer &tm, int clean, mlr_error *err);
void timer_free(timer &tm);
mlr_status timer_flush(const timer &tm, int flush_val, mlr_error *err);
/* timer.cu: k_read<u, check> on grid blocks of BW_THREADS over x[0..n) (the clean flush's read and
 * the read floor's readers, gpu/bench): u = 1, 4 or 8 loads a thread in flight; check = 1 sums the
 * words' 32-bit lanes into sink, 0 only reads them */
void read_words(int u, int check, unsigned grid, const uint4 *x, int64_t n,
                unsigned long long *sink);
int cmp_double(const void *a, const void *b);

/* The device-event time, in microseconds, of the kernels enqueue() puts on the stream (it
 * returns an mlr_status, its failing call named in err), the L2 first evicted by timer_flush (not
 * timed): the write alone leaves the L2 full of the flush's dirty lines, which the timed kernels
 * write back as they evict them (what the seeds' do_bench, zeroing a 256 MiB buffer, does too);
 * after the clean flush's read the L2 holds clean lines. One definition for the fast kernel's
 * launch, the launch floor and the read bandwidth, so all three are timed alike. */
template <class F>
mlr_status time_kernels(const timer &tm, int flush_val, F enqueue, double *us, mlr_error *err) {
  mlr_status st = MLR_OK;
  float ms = 0.0f;
  if ((st = timer_flush(tm, flush_val, err)) != MLR_OK) goto out;
  GPU_TRY(hipEventRecord(tm.ev[0], 0));
  if ((st = enqueue()) != MLR_OK) goto out;
  GPU_TRY(hipEventRecord(tm.ev[1], 0));
  GPU_TRY(hipEventSynchronize(tm.ev[1]));
  GPU_TRY(hipEventElapsedTime(&ms, tm.ev[0], tm.ev[1]));
  *us = (double)ms * 1e3;
out:
  return st;
}

/* the median over reps runs of time_kernels (run i flushes with the value i & 0xFF) */
template <class F>
mlr_status median_kernels(int reps, const timer &tm, F enqueue, double *median_us, mlr_error *err) {
  mlr_status st = MLR_OK;
  double *t = (double *)calloc((size_t)(reps > 0 ? reps : 1), sizeof(double));
  if (!t) return mlr_error_set(err, MLR_ENOMEM, "out of host memory");
  for (int i = 0; i < reps; i++)
    if ((st = time_kernels(tm, i, enqueue, &t[i], err)) != MLR_OK) break;
  if (st == MLR_OK) {
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    *median_us = t[reps / 2];
  }
  free(t);
  return st;
}

typedef void (*kernel_fn)(fparams);

/* an attention kernel and its name as mlr_gpu_fast_kernels gives it (one choice, so the name cannot
 * drift from the kernel) */
struct akernel {
  kernel_fn fn;
  const char *name;
};

#if !MLR_FAST_AMD
/* attn.cu: k_attn for p's KV format and recipe (p.kvw, p.fnuz, p.wg) */
akernel attn_kernel_plain(const fparams &p);
/* attn_ws.cu: k_attn_ws for p's KV format, recipe and copies (p.lin) */
akernel attn_kernel_ws(const fparams &p);
/* attn_rows.cu: k_attn_rows (p.rows) */
akernel attn_kernel_rows(const fparams &p);
/* host.cu: a launch that may begin before the previous kernel in the stream ends (griddep_wait);
 * cluster_y > 0: clusters of cluster_y blocks of grid.y */
cudaError_t launch_pdl(kernel_fn k, dim3 grid, unsigned threads, size_t smem, const fparams &p,
                       unsigned cluster_y = 0);
#else
/* mfma.cu: k_attn_mfma on grid */
hipError_t launch_attn_mfma(const fparams &p, dim3 grid);
#endif
/* qprep.cu: k_amax over the n Q codes; mfma.cu (AMD) or qprep.cu (NVIDIA): k_qprep over the n8
 * groups of 8 */
hipError_t launch_amax(const fparams &p, int64_t n);
hipError_t launch_qprep(const fparams &p, int64_t n8);
/* merge.cu: k_merge, a block per (query token, head): blocks = T H (NVIDIA: programmatic
 * dependent launch) */
hipError_t launch_merge(const fparams &p, unsigned blocks);

} // namespace mlr_fast

/* the plan: everything a launch needs, made once by mlr_gpu_fast_prepare */
struct mlr_gpu_fast {
  mlr_fast::fparams p;
  void *bufs[mlr_fast::MAXBUF];
  int nbufs, dyn;
  int64_t T, H, B, S, nq;
  mlr_fast::timer tm; /* mlr_gpu_fast_clean_flush adds the clean flush's buffer */
  int32_t *split_count, *split_len;
  float qscale_static;
  int ws;          /* k_attn_ws, not k_attn: the longest split has WS_MIN_TILES tiles or more */
  int64_t nkv;     /* the KV pool's rows */
  int64_t kv_read; /* bytes of KV the batches' tokens span (their rows, at most the pool's): the
                      read floor's */
  char kname[40];  /* NVIDIA: mlr_gpu_fast_kernels' answer, made once the plan is made */
};

/* the attention kernels' grid: a block a query token and group of 16 heads (x: blk_token,
 * blk_group), or with k_attn_rows (p.rows) a block a batch's 64 rows (x: batch x p.rc + block),
 * and split (y) */
inline int64_t head_groups(int64_t H) { return (H + 15) / 16; }
inline dim3 attn_grid(const mlr_gpu_fast *f) {
  return dim3((unsigned)(f->p.rows ? f->B * f->p.rc : f->T * head_groups(f->H)), (unsigned)f->S);
}

#endif
