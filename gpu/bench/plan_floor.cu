/* plan_floor.cu: the plan floor (mlr_gpu_bench.h): the fast kernel's plan with none of the
 * attention's arithmetic, NVIDIA sm_90 (a HIP build answers MLR_EDEVICE). The same grid (a block a
 * query token and split, or k_attn_rows' block a batch's 64 rows and split, whose floor copies as
 * the plan's p.lin says; the plan's splits and split lengths from the token table), the same
 * clusters (p.cl) or the same second kernel, one block an SM (the attention kernel's dynamic shared
 * memory), each split's KV rows copied tile by tile into a ring of three tiles in shared memory by
 * cp.async with two tiles in flight, as the attention kernels copy them (the page table read
 * through kv_ref, four threads a row, chunks swizzled; or, where the launch takes k_attn_ws<..,
 * LIN> (p.lin), as contiguous chunks, copy_lin or lin_copy), then the split's result stored as the
 * fast kernel stores it: a lone split's 16 x 512 bf16 outputs and lse; or its fp32 partial in its
 * own shared memory, a cluster barrier, one round of loads of the splits' row scalars, a 1/S share
 * of the token's outputs summed over the S partials through distributed shared memory, bf16 stores,
 * a last cluster barrier; or its partial in global memory and a second kernel (k_merge's launch and
 * grid) summing them. The fast kernel's time minus this is what its arithmetic costs, this minus
 * the read floor what the plan's structure costs. What a block computes, so that the untimed check
 * sees every copy and merge happen: v, a sum of one byte a thread of each tile (the copies are
 * used, as k_attn uses them), goes to the outputs; the lse of every row is the number of KV rows
 * the token's blocks copied (their splits' row counts, summed across the merge: integers, exact in
 * fp32 below 2^24), which the host checks against the token's length. */
#include "../fast/fast_host.cuh"
#include "mlr_gpu_bench.h"

#if MLR_FAST_AMD
extern "C" int mlr_gpu_fast_has_plan_floor(void) { return 0; }
extern "C" mlr_status mlr_gpu_fast_plan_floor(mlr_gpu_fast *f, int reps, double *us,
                                              mlr_error *err) {
  (void)f;
  (void)reps;
  (void)us;
  return mlr_error_set(err, MLR_EDEVICE,
                       "the plan floor is built for NVIDIA only (cp.async, thread-block clusters), "
                       "not for the AMD variant");
}
#else
#include "../fast/fast_cluster.cuh"
#include "../fast/fast_sm90.cuh"

using namespace mlr_fast;

namespace {

/* the cluster's merge without its arithmetic: every block of the token's cluster calls it after its
 * partial (cl[0 .. 16 DV)) and its rows' counts (cl[CL_X + h], where cluster_merge_ finds m) are in
 * its shared memory; blocks s >= ns hold none and only share the work, and a token of one split
 * only takes part in the barriers, as in cluster_merge_ */
__device__ __forceinline__ void skel_cluster(const fparams &p, float *cl, int t, int ns) {
  cluster_barrier();
  if (ns < 2) {
    cluster_barrier_exit();
    return;
  }
  const uint32_t base = smem_addr(cl);
  const int d = threadIdx.x;
  uint32_t rank, nb;
  asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  asm("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(nb));
  const int n4 = 16 * DV / 4, per = (n4 + (int)nb - 1) / (int)nb,
            end = min(((int)rank + 1) * per, n4);
  if (d < 16 * CL_MAX) { /* row h's split k, one round of loads for all (cluster_merge_'s m and l):
                            the rows' counts summed */
    const int h = d / CL_MAX, k = d % CL_MAX;
    float rows = k < ns ? ld_dsmem(dsmem(base + 4 * (CL_X + h), k)) : 0.0f;
    for (int o = CL_MAX / 2; o; o >>= 1)
      rows += MLR_SHFL_XOR(rows, o); /* integers below 2^24: exact in any order */
    if (rank == 0 && k == 0 && h < grp_heads(p)) p.lse[head_row(p, t, h)] = rows;
  }
  for (int i = (int)rank * per + d; i < end; i += NTHR) {
    const int h = i / (DV / 4), c4 = i % (DV / 4);
    if (h >= grp_heads(p)) break;
    float4 v[CL_MAX]; /* every split's four values in flight at once, as cluster_merge_ */
#pragma unroll
    for (int k = 0; k < CL_MAX; k++)
      if (k < ns) v[k] = ld_dsmem4(dsmem(base + 4 * (h * DV + 4 * c4), k));
    float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < CL_MAX; k++)
      if (k < ns) {
        a[0] += v[k].x;
        a[1] += v[k].y;
        a[2] += v[k].z;
        a[3] += v[k].w;
      }
    *(uint2 *)(p.o + head_row(p, t, h) * DV + 4 * c4) =
        make_uint2(mlr__out_bf16x2(a[0], a[1]), mlr__out_bf16x2(a[2], a[3]));
  }
  cluster_barrier_exit();
}

template <int W>
__global__ void __launch_bounds__(NTHR, 1) k_skel(fparams p) {
  constexpr int TT = TILE / W, RB = QK * W,
                TB = TT * RB; /* a tile's tokens and bytes (73,728 either way) */
  constexpr int TPR = 4 * W,
                RPP =
                    NTHR / TPR; /* threads a row, rows a pass: as k_attn's loads (a slot a pass) */
  static_assert(RPP * 2 == TT && (RB / 16) % TPR == 0 && 3 * TB <= SM_KV,
                "a tile's rows split evenly over two passes; three tiles fit the ring");
  extern __shared__ __align__(16) uint8_t sm[];
  float *cl = (float *)sm; /* the partial, after the last tile (as cluster_merge's) */
  /* the block's nrow rows from orow0: a token's group of 16 heads, or with p.rows (k_attn_rows) a
   * batch's 64 rows (query token, head) from its row r0, whose KV reaches the last one's end */
  const int s = blockIdx.y;
  const rows_blk rb = p.rows ? rows_of_block(p) : rows_blk{};
  const int nrow = p.rows ? rb.nr : grp_heads(p);
  const int t = p.rows ? (int)rb.tlast : blk_token(p);
  const int64_t orow0 = p.rows ? rb.t0 * p.H + rb.r0 : head_row(p, t, 0);
  const tokinfo ti = tok_of(p, t);
  if (s >= ti.nsplit) {
    if (p.cl) skel_cluster(p, cl, t, ti.nsplit);
    return;
  }
  const int64_t start = (int64_t)s * ti.slen, end = start + ti.slen < ti.L ? start + ti.slen : ti.L;
  const int ntiles = end > start ? (int)((end - start + TT - 1) / TT) : 0;
  const int lr = threadIdx.x / TPR, lk = threadIdx.x % TPR;
  const int lin =
      p.kv_indices ? 0 : p.lin; /* copied as the attention kernel copies (k_attn_ws<.., LIN>) */
  lin_copy<W, TT, NTHR> lc;
  if (lin == 2) lc.init(threadIdx.x);
  auto issue =
      [&](int i) { /* tile i into ring position i % 3; an empty group past the split's end */
                   if (i < ntiles && lin) {
                     const int64_t pos0 = start + (int64_t)i * TT;
                     const uint8_t *src0 = p.kv + (ti.base + pos0) * RB;
                     const uint32_t dst0 = smem_addr(sm) + (uint32_t)((i % 3) * TB);
                     if (lin == 1)
                       copy_lin<W, TT, NTHR>(src0, p.kv, dst0, end - pos0, threadIdx.x);
                     else
                       lc(src0, p.kv, dst0, end - pos0, threadIdx.x);
                   } else if (i < ntiles) {
#pragma unroll
                     for (int r = lr; r < TT; r += RPP) {
                       const int64_t pos = start + (int64_t)i * TT + r;
                       const int64_t row = kv_ref_row(p, kv_ref(p, ti.base, pos, pos < end));
                       const uint32_t dst = smem_addr(sm) + (uint32_t)((i % 3) * TB + r * RB);
#pragma unroll
                       for (int k = lk; k < RB / 16; k += TPR)
                         cp_async16(dst + 16 * kv_swz<W>(r, k),
                                    row >= 0 ? p.kv + row * RB + 16 * k : p.kv, row >= 0 ? 16 : 0);
                     }
                   }
                   cp_commit();
      };
  issue(0);
  issue(1);
  float v = 0.0f;
  for (int i = 0; i < ntiles; i++) {
    asm volatile("cp.async.wait_group 1;\n" ::
                     : "memory"); /* tile i (tile i + 1 may be in flight) */
    __syncthreads();              /* tile i landed for all; tile i - 1 read by all */
    issue(i + 2);                 /* into tile i - 1's place */
    v += (float)sm[(i % 3) * TB + threadIdx.x * (TB / NTHR)];
  }
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  __syncthreads(); /* every tile read: the ring's start may hold the partial */
  griddep_launch_dependents();
  const float rows = (float)(end > start ? end - start : 0);
  /* row i's count: its own token's rows of the split (p.rows: tokens before the last see fewer) */
  auto count = [&](int i) {
    if (!p.rows) return rows;
    const int64_t L = rows_row_len(p, rb, i), e = end < L ? end : L;
    return (float)(e > start ? e - start : 0);
  };
  if (ti.nsplit == 1) { /* a lone split: its outputs and lse */
    for (int i = threadIdx.x; i < nrow * DV / 4; i += NTHR)
      *(uint2 *)(p.o + (orow0 + i / (DV / 4)) * DV + 4 * (i % (DV / 4))) =
          make_uint2(mlr__out_bf16x2(v, v), mlr__out_bf16x2(v, v));
    if ((int)threadIdx.x < nrow) p.lse[orow0 + threadIdx.x] = count(threadIdx.x);
    if (p.cl)
      skel_cluster(p, cl, t, 1); /* the barriers of its cluster (the plan's other tokens merge) */
  } else if (p.cl) {
    for (int i = threadIdx.x; i < 16 * DV / 4; i += NTHR)
      ((float4 *)cl)[i] = make_float4(v, v, v, v);
    if (threadIdx.x < 16) cl[CL_X + threadIdx.x] = rows;
    skel_cluster(p, cl, t, ti.nsplit);
  } else { /* each head row's partial of this split to its slot (row t H + h, split s), for
              k_skel_merge */
    for (int i = threadIdx.x; i < nrow * (DV / 4); i += NTHR)
      ((float4 *)(p.part_o + ((orow0 + i / (DV / 4)) * p.S + s) * DV))[i % (DV / 4)] =
          make_float4(v, v, v, v);
    if ((int)threadIdx.x < nrow) p.part_x[(orow0 + threadIdx.x) * p.S + s] = count(threadIdx.x);
  }
}

/* k_merge's launch and grid (a block per token and head, four columns a thread) without its
 * arithmetic: the token's split partials summed in split order */
__global__ void __launch_bounds__(MERGE_THREADS) k_skel_merge(fparams p) {
  const int64_t row = blockIdx.x, t = row / p.H;
  const int64_t ns = tok_of(p, t).nsplit;
  if (ns < 2) return; /* written by k_skel */
  griddep_wait();
  const int d = threadIdx.x;
  const float4 *part = (const float4 *)(p.part_o + row * p.S * DV) + d;
  float a[4] = {0.0f, 0.0f, 0.0f, 0.0f}, rows = 0.0f;
  enum { MB = 16 }; /* the partials MB at a time in flight, as k_merge */
  for (int64_t k0 = 0; k0 < ns; k0 += MB) {
    float4 pv[MB];
#pragma unroll
    for (int u = 0; u < MB; u++)
      pv[u] = k0 + u < ns ? part[(k0 + u) * (DV / 4)] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int u = 0; u < MB; u++) {
      a[0] += pv[u].x;
      a[1] += pv[u].y;
      a[2] += pv[u].z;
      a[3] += pv[u].w;
    }
  }
  *(uint2 *)(p.o + row * DV + 4 * d) =
      make_uint2(mlr__out_bf16x2(a[0], a[1]), mlr__out_bf16x2(a[2], a[3]));
  if (d == 0) {
    for (int64_t k = 0; k < ns; k++) rows += p.part_x[row * p.S + k];
    p.lse[row] = rows;
  }
}

} // namespace

/* k_skel with the plan's grid, clusters and merge, writing outputs of its own (the plan's o and lse
 * are the last launch's result), first run untimed and checked, then timed as mlr_gpu_fast_launch
 * times the fast kernel. */
extern "C" int mlr_gpu_fast_has_plan_floor(void) { return 1; }
extern "C" mlr_status mlr_gpu_fast_plan_floor(mlr_gpu_fast *f, int reps, double *us,
                                              mlr_error *err) {
  mlr_status st = MLR_OK;
  const int64_t T = f->T, H = f->H, n = T * H;
  fparams q = f->p;
  tokinfo *tok = (tokinfo *)malloc((size_t)(T > 0 ? T : 1) * sizeof(tokinfo));
  float *lse = (float *)malloc((size_t)(n > 0 ? n : 1) * 4);
  uint16_t *o = (uint16_t *)malloc((size_t)(n > 0 ? n : 1) * DV * 2);
  void (*const k)(fparams) = q.kvw == 2 ? k_skel<2> : k_skel<1>;
  auto enqueue =
      [&]() { /* GPU_TRY sets st and err */
              if (T > 0) {
                GPU_TRY(launch_pdl(k, attn_grid(f), NTHR, SMEM, q, q.cl ? (unsigned)f->S : 0));
                if (f->S > 1 && !q.cl)
                  GPU_TRY(launch_pdl(k_skel_merge, dim3((unsigned)n), MERGE_THREADS, 0, q));
              }
            out:
              return st;
      };
  q.o = NULL;
  q.lse = NULL;
  if (!tok || !lse || !o) {
    st = mlr_error_set(err, MLR_ENOMEM, "out of host memory for the plan floor's check");
    goto out;
  }
  GPU_TRY(hipMalloc((void **)&q.o, (size_t)(n > 0 ? n : 1) * DV * 2));
  GPU_TRY(hipMalloc((void **)&q.lse, (size_t)(n > 0 ? n : 1) * 4));
  GPU_TRY(
      hipMemset(q.o, 0xFF,
                (size_t)n * DV *
                    2)); /* the all-ones pattern, which no output is (a count, or sums of bytes) */
  GPU_TRY(hipMemset(q.lse, 0xFF, (size_t)n * 4));
  GPU_TRY(hipFuncSetAttribute((const void *)k, hipFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  /* untimed first: every output written, every row's lse its token's length */
  if ((st = enqueue()) != MLR_OK) goto out;
  GPU_TRY(hipDeviceSynchronize());
  GPU_TRY(hipMemcpy(o, q.o, (size_t)n * DV * 2, hipMemcpyDeviceToHost));
  GPU_TRY(hipMemcpy(lse, q.lse, (size_t)n * 4, hipMemcpyDeviceToHost));
  if (T > 0 && !q.unq)
    GPU_TRY(hipMemcpy(tok, q.tok, (size_t)T * sizeof(tokinfo),
                      hipMemcpyDeviceToHost)); /* else worked out below */
  for (int64_t r = 0; r < n; r++) {
    const tokinfo ti = q.unq ? tok_uniform(q.tu, q.unq, q.ustride, r / H) : tok[r / H];
    if (lse[r] != (float)ti.L) {
      st = mlr_error_set(err, MLR_EDEVICE,
                         "the plan floor's kernels counted %.0f KV rows for query token %lld, head "
                         "%lld, not its %lld",
                         (double)lse[r], (long long)(r / H), (long long)(r % H), (long long)ti.L);
      goto out;
    }
    for (int c = 0; c < DV; c++)
      if (o[r * DV + c] == 0xFFFFu) {
        st = mlr_error_set(err, MLR_EDEVICE,
                           "the plan floor's kernels left o[%lld][%lld][%d] unwritten",
                           (long long)(r / H), (long long)(r % H), c);
        goto out;
      }
  }
  st = median_kernels(reps, f->tm, enqueue, us, err);
out:
  (void)hipFree(q.o);
  (void)hipFree(q.lse);
  free(tok);
  free(lse);
  free(o);
  return st;
}
#endif
