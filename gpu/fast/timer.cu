/* timer.cu: the timing of the fast kernel's launches (fast_host.cuh's time_kernels): the events,
 * the L2 flush before a timed run, and k_read, the reader kernel of the clean flush and of the
 * benchmark probes' read floor and read bandwidth (gpu/bench). */
#include "fast_host.cuh"

namespace mlr_fast {
namespace {

/* the read-bandwidth probe and the read floor's readers: every 16-byte word of n read once, U
 * independent loads a thread in flight (the grid strides U times before using them). Timed
 * (CHECK = 0): an xor of the words, written only on a value it almost never has, so that the loads
 * stay and nothing else costs. CHECK = 1 (untimed, mlr_gpu_fast_read_floor's proof that the reader
 * reads each word once): the 32-bit lanes summed mod 2^64 into sink. */
template <int U, int CHECK = 0>
__global__ void __launch_bounds__(BW_THREADS)
    k_read(const uint4 *x, int64_t n, unsigned long long *sink) {
  uint32_t v = 0;
  unsigned long long sum = 0;
  const int64_t step = (int64_t)gridDim.x * BW_THREADS;
  int64_t i = blockIdx.x * (int64_t)BW_THREADS + threadIdx.x;
  for (; i + (U - 1) * step < n; i += U * step) {
    uint4 w[U];
#pragma unroll
    for (int u = 0; u < U; u++) w[u] = x[i + u * step];
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (CHECK)
        sum += (unsigned long long)w[u].x + w[u].y + w[u].z + w[u].w;
      else
        v ^= w[u].x ^ w[u].y ^ w[u].z ^ w[u].w;
    }
  }
  for (; i < n; i += step) { /* the last words, fewer than U strides of them */
    const uint4 w = x[i];
    if (CHECK)
      sum += (unsigned long long)w.x + w.y + w.z + w.w;
    else
      v ^= w.x ^ w.y ^ w.z ^ w.w;
  }
  if (CHECK)
    atomicAdd(sink, sum);
  else if (v == 0x9E3779B9u)
    sink[0] = v; /* almost never taken; the compiler cannot know */
}

} // namespace

/* k_read with C (check its sum or not) fixed, U words in flight a thread: 1, 4 or 8 */
template <int C>
static void read_words_c(int u, unsigned grid, const uint4 *x, int64_t n,
                         unsigned long long *sink) {
  if (u == 1)
    k_read<1, C><<<grid, BW_THREADS>>>(x, n, sink);
  else if (u == 4)
    k_read<4, C><<<grid, BW_THREADS>>>(x, n, sink);
  else
    k_read<8, C><<<grid, BW_THREADS>>>(x, n, sink);
}

void read_words(int u, int check, unsigned grid, const uint4 *x, int64_t n,
                unsigned long long *sink) {
  if (check)
    read_words_c<1>(u, grid, x, n, sink);
  else
    read_words_c<0>(u, grid, x, n, sink);
}

void timer_free(timer &tm) {
  for (int k = 0; k < 2; k++)
    if (tm.ev[k]) (void)hipEventDestroy(tm.ev[k]);
  (void)hipFree(tm.flush);
  (void)hipFree(tm.clean);
  (void)hipFree(tm.sink);
  tm = timer{};
}

mlr_status timer_init(timer &tm, int clean, mlr_error *err) {
  mlr_status st = MLR_OK;
  if (!tm.flush) GPU_TRY(hipMalloc(&tm.flush, FLUSH_BYTES));
  for (int k = 0; k < 2; k++)
    if (!tm.ev[k]) GPU_TRY(hipEventCreate(&tm.ev[k]));
  if (clean && !tm.clean) {
    GPU_TRY(hipMalloc(&tm.clean, FLUSH_BYTES));
    GPU_TRY(hipMemset(tm.clean, 0x5A, FLUSH_BYTES));
  }
  /* the readers' sink (k_read: the clean flush, the read floor) */
  if (!tm.sink) GPU_TRY(hipMalloc((void **)&tm.sink, 8));
out:
  return st;
}

/* the L2 evicted by writing flush_val over tm.flush (flush_val < 0: nothing), then, when tm has the
 * clean flush, by reading tm.clean (FLUSH_BYTES) */
mlr_status timer_flush(const timer &tm, int flush_val, mlr_error *err) {
  mlr_status st = MLR_OK;
  if (flush_val >= 0) GPU_TRY(hipMemset(tm.flush, flush_val & 0xFF, FLUSH_BYTES));
  if (flush_val >= 0 && tm.clean) {
    read_words(1, 0, CLEAN_BLOCKS, (const uint4 *)tm.clean, FLUSH_BYTES / 16, tm.sink);
    GPU_TRY(hipGetLastError());
  }
out:
  return st;
}

int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

} // namespace mlr_fast
