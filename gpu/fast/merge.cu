/* merge.cu: k_merge, the merge of a query token's splits when it is not done inside the attention
 * kernel (fast_cluster.cuh's cluster_merge does the same arithmetic there). Both vendors: raw
 * partials for the NVIDIA recipes, normalized ones for the AMD recipes. */
#include "fast_host.cuh"

namespace mlr_fast {
namespace {

/* the emulator's merge_one with the global-max rule (mlr__emu_merge_column's, bit for bit):
 * normalized partials (x = lse in ln units, mass 1, weights exp) or raw ones (p.raw: x = m in the
 * softmax's base-2 units, mass l, weights exp2, lse = (M + log2 sc) * ln 2). A block per (query
 * token, head), four columns a thread (128 threads, so that the T x H blocks fit the GPU in one
 * wave: with a column a thread, 512 threads, they take several waves of latency-bound blocks). The
 * max (exact in any order), each split's weight and mass * weight's operands are
 * worked out once a block, MERGE_THREADS splits at a time, not once a column: the columns then
 * sum their terms in split order. */
__global__ void __launch_bounds__(MERGE_THREADS) k_merge(fparams p) {
  __shared__ float w_sm[MERGE_THREADS], ms_sm[MERGE_THREADS], red[MERGE_THREADS / 32];
  __shared__ bool in_sm[MERGE_THREADS]; /* the split is merged (its x > MLR_EMU_SKIP_BELOW) */
  const int64_t row = blockIdx.x, t = row / p.H;
  const int64_t ns = tok_of(p, t).nsplit;
  if (ns < 2) return; /* written by k_attn */
  griddep_wait();     /* k_attn's partials */
  const int d = threadIdx.x, eb = p.raw ? MLR_EXP_2 : MLR_EXP_E;
  const float *x = p.part_x + row * p.S;
  const float4 *part = (const float4 *)(p.part_o + row * p.S * DV) +
                       d; /* split k's columns 4d.. at part[k * DV / 4] */
  /* the partials MB splits at a time into registers, all loads in flight at once (not one at a time
   * behind a test of the split's weight: a chain of L2 round trips); the first MB before the max
   * and the weights, which they do not need. Every split below
   * ns has its partial written (an empty one 0), so the loads need no test. */
  enum { MB = 16 };
  float4 pv[MB];
  auto load_chunk = [&](int64_t k0) {
#pragma unroll
    for (int u = 0; u < MB; u++)
      pv[u] = k0 + u < ns ? part[(k0 + u) * (DV / 4)] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  };
  /* this thread's split among the first MERGE_THREADS: its x and mass loaded beside the partials
   * (loaded after the max and its barrier, the mass would be an L2 round trip of its own on every
   * block's path) */
  const float x0 = d < ns ? x[d] : -INFINITY,
              ms0 = d < ns && p.raw ? p.part_sum[row * p.S + d] : 1.0f;
  load_chunk(0);
  /* splits with x <= MLR_EMU_SKIP_BELOW (empty ones; NaN) are skipped, as there; the thread's own
   * split first (x0, already loaded), then every MERGE_THREADS-th after it (a max: any order) */
  float M = x0 > MLR_EMU_SKIP_BELOW ? x0 : -INFINITY;
  for (int64_t s = d + MERGE_THREADS; s < ns; s += MERGE_THREADS) {
    const float xs = x[s];
    if (xs > MLR_EMU_SKIP_BELOW) M = fmaxf(M, xs);
  }
  for (int k = 16; k; k >>= 1) M = fmaxf(M, MLR_SHFL_XOR(M, k));
  if ((d & 31) == 0) red[d >> 5] = M;
  __syncthreads();
  for (int w = 0; w < MERGE_THREADS / 32; w++) M = fmaxf(M, red[w]);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sum = 0.0f, sum_unused = 0.0f;
  for (int64_t c0 = 0; c0 < ns; c0 += MERGE_THREADS) {
    __syncthreads(); /* the previous chunk's weights are read */
    if (c0 + d < ns) {
      const float xs = c0 == 0 ? x0 : x[c0 + d];
      in_sm[d] = xs > MLR_EMU_SKIP_BELOW;
      w_sm[d] = in_sm[d] ? mlr__emu_exp(eb, xs - M) : 0.0f; /* NaN for x = M = +Inf, as there */
      ms_sm[d] = c0 == 0 ? ms0 : p.raw ? p.part_sum[row * p.S + c0 + d] : 1.0f;
    }
    __syncthreads();
    const int n = ns - c0 < MERGE_THREADS ? (int)(ns - c0) : MERGE_THREADS;
    for (int k0 = 0; k0 < n;
         k0 += MB) { /* MERGE_THREADS is a multiple of MB: chunks stay within c0's */
      if (c0 + k0 > 0) load_chunk(c0 + k0);
#pragma unroll
      for (int u = 0; u < MB;
           u++) /* the terms in split order, as mlr__emu_merge_column; the sum once */
        if (k0 + u < n && in_sm[k0 + u]) {
          const float w = w_sm[k0 + u], ms = ms_sm[k0 + u];
          mlr__emu_merge_term(pv[u].x, ms, w, 0, &acc[0], &sum);
          mlr__emu_merge_term(pv[u].y, ms, w, 0, &acc[1], &sum_unused);
          mlr__emu_merge_term(pv[u].z, ms, w, 0, &acc[2], &sum_unused);
          mlr__emu_merge_term(pv[u].w, ms, w, 0, &acc[3], &sum_unused);
        }
    }
  }
  const float sc = fmaxf(sum, p.clamp);
  *(uint2 *)(p.o + row * DV + 4 * d) = merge_out4(acc, sc);
  if (d == 0) p.lse[row] = merged_lse(p.raw, M, sc);
}

} // namespace

hipError_t launch_merge(const fparams &p, unsigned blocks) {
#if MLR_FAST_AMD
  k_merge<<<blocks, MERGE_THREADS>>>(p);
  return hipGetLastError();
#else
  return launch_pdl(k_merge, dim3(blocks), MERGE_THREADS, 0, p);
#endif
}

} // namespace mlr_fast
