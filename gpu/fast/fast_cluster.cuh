/* fast_cluster.cuh: the split-K merge inside the attention kernel when a token's splits are one
 * thread-block cluster (p.cl), and the cluster primitives the plan floor (gpu/bench) uses too.
 * NVIDIA sm_90. */
#ifndef MLR_FAST_CLUSTER_CUH
#define MLR_FAST_CLUSTER_CUH

#include "fast_sm90.cuh"

namespace mlr_fast {

/* The split-K merge within a cluster (p.cl): the S blocks of a token (S <= CL_MAX) are one
 * cluster; each leaves its raw partial in its own shared memory (the ring's start: every tile's
 * reads are done) and, after a cluster barrier, merges a 1/S share of the token's 16 x 512 outputs
 * from all S partials through distributed shared memory: no partials in global memory, no second
 * kernel's launch and no wait for the whole grid. The
 * arithmetic is k_merge's (the emulator's merge_one with the global-max rule), term for term: the
 * max over the merged splits, each split's weight once a row, the mass and column terms added in
 * split order. Layout (floats from the ring's start): [16][DV] the partial, then the rows' m and
 * l, then the merge's tables (a row's weights and masses by split, sc, M and the merged splits). */
enum {
  CL_X = 16 * DV,
  CL_SUM = CL_X + 16,
  CL_W = CL_SUM + 16,
  CL_MS = CL_W + 16 * CL_MAX,
  CL_SC = CL_MS + 16 * CL_MAX,
  CL_M = CL_SC + 16,
  CL_IN = CL_M + 16,
  CL_END = CL_IN + 16
};
static_assert(CL_END * 4 <= 2 * SLOT * QK, "the cluster's partial fits in the ring's first tile");
__device__ __forceinline__ void cluster_barrier() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
/* the merge's last barrier only keeps each block's shared memory alive until the others have read
 * it: every value read from another block's memory has been used (stored as an output) before the
 * arrive, and a load's value is back before an instruction using it issues (in-order issue), so the
 * arrive needs no release (its MEMBAR.ALL.GPU, a GPU-scope fence that waits for the output stores).
 * ptxas keeps the arrive after the merge's last store (`cuobjdump -sass` shows it). The wait keeps
 * its default .acquire, the only one PTX has. */
__device__ __forceinline__ void cluster_barrier_exit() {
  asm volatile("barrier.cluster.arrive.relaxed;\nbarrier.cluster.wait;\n" ::: "memory");
}
__device__ __forceinline__ uint32_t
dsmem(uint32_t a, uint32_t rank) { /* shared address a in the cluster's block rank */
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
  return r;
}
__device__ __forceinline__ float ld_dsmem(uint32_t a) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(a) : "memory");
  return v;
}
__device__ __forceinline__ float4 ld_dsmem4(uint32_t a) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(a)
               : "memory");
  return v;
}
struct clmerge { /* what cluster_merge reads of fparams (a reference to the kernel's parameters
                    would copy them to the stack) */
  uint16_t *o;   /* o and lse from the block's head group's first row */
  float *lse, clamp;
  int H, hn, raw; /* H: a token's heads (the rows' stride); hn: the group's */
};
/* every thread of every block of the cluster calls it once, after its block's partial is stored
 * (ns: the token's splits; blocks s >= ns hold none and only share the work) */
__device__ __noinline__ inline void cluster_merge_(clmerge p, float *cl, int t, int ns) {
  cluster_barrier(); /* every split's partial in its block's shared memory */
  if (ns >= 2) {
    const int d = threadIdx.x, eb = p.raw ? MLR_EXP_2 : MLR_EXP_E;
    const uint32_t base = smem_addr(cl);
    if (d < 16 * CL_MAX) { /* row h's split k, all loads at once: M (exact in any order: the 8 lanes
                              of a row), the weight */
      const int h = d / CL_MAX, k = d % CL_MAX;
      const float x = k < ns ? ld_dsmem(dsmem(base + 4 * (CL_X + h), k)) : -INFINITY;
      const float ms = k < ns && p.raw ? ld_dsmem(dsmem(base + 4 * (CL_SUM + h), k)) : 1.0f;
      const bool merged = k < ns && x > MLR_EMU_SKIP_BELOW;
      float M = merged ? x : -INFINITY;
      for (int o = CL_MAX / 2; o; o >>= 1) M = fmaxf(M, MLR_SHFL_XOR(M, o));
      const float w = merged ? mlr__emu_exp(eb, x - M) : 0.0f; /* NaN for x = M = +Inf, as there */
      cl[CL_W + 16 * k + h] = w;
      cl[CL_MS + 16 * k + h] = ms;
      const int lane0 = d & 31 & ~(CL_MAX - 1); /* the row's first lane in the warp */
      const unsigned in = __ballot_sync(0xFFFFFFFFu, merged) >> lane0 & ((1u << CL_MAX) - 1);
      /* row h's mass sum in split order, by its lane k = 0 from the row's 8 lanes (merge_term's
       * unfused sum + ms * w: each lane's product, then the sums in order; no barrier, no reads
       * back) */
      float sum = 0.0f, unused = 0.0f;
#pragma unroll
      for (int kk = 0; kk < CL_MAX; kk++) {
        const float wk = __shfl_sync(0xFFFFFFFFu, w, lane0 + kk),
                    mk = __shfl_sync(0xFFFFFFFFu, ms, lane0 + kk);
        if (in >> kk & 1) mlr__emu_merge_term(0.0f, mk, wk, 0, &unused, &sum);
      }
      if (k == 0) {
        cl[CL_M + h] = M;
        ((int *)cl)[CL_IN + h] = (int)in;
        cl[CL_SC + h] = fmaxf(sum, p.clamp);
      }
    }
    __syncthreads();
    uint32_t rank, nb;
    asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    asm("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(nb));
    const int n4 = 16 * DV / 4, per = (n4 + (int)nb - 1) / (int)nb,
              end = min(((int)rank + 1) * per, n4);
#pragma unroll 1
    for (int i = (int)rank * per + d; i < end; i += blockDim.x) { /* four columns of one row */
      const int h = i / (DV / 4), c4 = i % (DV / 4), in = ((const int *)cl)[CL_IN + h];
      if (h >= p.hn) break;
      float4 v[CL_MAX]; /* every split's four values in flight at once */
#pragma unroll
      for (int k = 0; k < CL_MAX; k++)
        if (in >> k & 1) v[k] = ld_dsmem4(dsmem(base + 4 * (h * DV + 4 * c4), k));
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, unused = 0.0f;
#pragma unroll
      for (int k = 0; k < CL_MAX; k++)
        if (in >> k & 1) {
          const float w = cl[CL_W + 16 * k + h], ms = cl[CL_MS + 16 * k + h];
          mlr__emu_merge_term(v[k].x, ms, w, 0, &acc[0], &unused);
          mlr__emu_merge_term(v[k].y, ms, w, 0, &acc[1], &unused);
          mlr__emu_merge_term(v[k].z, ms, w, 0, &acc[2], &unused);
          mlr__emu_merge_term(v[k].w, ms, w, 0, &acc[3], &unused);
        }
      *(uint2 *)(p.o + ((int64_t)t * p.H + h) * DV + 4 * c4) = merge_out4(acc, cl[CL_SC + h]);
    }
    /* the lse (a binary64 log) by the block's last 16 threads, which have the fewest merge steps
     * (none at 8 splits): by threads 0 .. 15 it came after their full share */
    const int lh = d - ((int)blockDim.x - 16);
    if (rank == 0 && lh >= 0 && lh < p.hn) {
      const float M = cl[CL_M + lh], sc = cl[CL_SC + lh];
      p.lse[(int64_t)t * p.H + lh] = merged_lse(p.raw, M, sc);
    }
  }
  cluster_barrier_exit(); /* no block leaves while another reads its shared memory */
}
__device__ __forceinline__ void cluster_merge(const fparams &p, float *cl, int t, int ns) {
  const int64_t r0 = head_row(p, 0, 0);
  cluster_merge_({p.o + r0 * DV, p.lse + r0, p.clamp, p.H, grp_heads(p), p.raw}, cl, t, ns);
}

} // namespace mlr_fast

#endif
