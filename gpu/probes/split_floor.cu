// split_floor: the least time of a split-K decode kernel that merges its splits in a thread-block
// cluster, with no attention arithmetic at all, timed as `mlaref bench gpu` times the fast kernel:
// the L2 flushed before each launch by writing 256 MiB (the dirty lines the seeds' do_bench leaves),
// device events, the median of `reps` launches. Why: issue 8 asks for bs=4 shapes under 8 us; the
// read floor (`bench gpu`'s read-only column) says how long reading the KV takes, and this says how
// long a kernel built as the fast kernel is built (a block a split, the splits' partials merged
// through distributed shared memory) takes before it does any of the attention's work.
// A block per (token, split), the S splits of a token one cluster (S > 8: the non-portable sizes,
// up to 16 on sm_90). Each block copies its rows of KV (576 bytes each, at most 256 rows) into
// shared memory with cp.async, as k_attn does, then, by mode:
//   read   nothing more (one word of its rows added to a sink, so the copies are used)
//   part   a 16 x 512 fp32 "partial" (one value of its rows, kept in a register as k_attn keeps its
//          accumulators) into shared memory, then out as bf16: a lone split's store
//   merge  the partial into shared memory, a cluster barrier, its 1/S share of the token's 16 x 512
//          outputs summed over the S partials read across the cluster, bf16 stores, a last cluster
//          barrier: cluster_merge's data movement and barriers (gpu/fast/fast.cu)
//   gmerge the merge with the partials through global memory (L2) instead of distributed shared
//          memory: each block stores its partial from registers to global memory, a cluster
//          barrier (its release and acquire order the global stores too), its share of the S
//          partials read from the L2; no last barrier (no block reads another's shared memory)
//   ticket the partials to global memory instead, no cluster: a fence, the token's counter
//          incremented, and the block that finds S - 1 merges the S partials from the L2 (the
//          "last block merges" scheme: one kernel, no cluster barrier)
// Every output is checked (the KV bytes are 0x3C, so a partial value is 60 and a merged one 60 S,
// exact in bf16); a wrong one fails the run. Usage: split_floor bs kv S read|part|merge|ticket|gmerge
// [reps]: prints one line; exit 2 on bad arguments, 1 on a CUDA error or a wrong output.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 (scripts/gpu_run.sh, step fastbench runs it).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#define CK(x)                                                                                                          \
  do {                                                                                                                 \
    cudaError_t e_ = (x);                                                                                              \
    if (e_ != cudaSuccess) {                                                                                           \
      fprintf(stderr, "split_floor: %s: %s\n", #x, cudaGetErrorString(e_));                                            \
      exit(1);                                                                                                         \
    }                                                                                                                  \
  } while (0)

enum { RB = 576, NT = 256, DV = 512, MAXROWS = 256, KV_SM = MAXROWS * RB, PART = 16 * DV };
enum { SMEM = KV_SM + PART * 4 };

__device__ __forceinline__ uint32_t saddr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cluster_sync_rel() { asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_sync_exit() { asm volatile("barrier.cluster.arrive.relaxed;\nbarrier.cluster.wait;\n" ::: "memory"); }
__device__ __forceinline__ float4 ld_dsmem4(uint32_t a, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];\n" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(r) : "memory");
  return v;
}

/* four merged values as bf16 codes at o[4 i ..] */
__device__ __forceinline__ void store4(uint16_t *o, int64_t i, float4 v) {
  const __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
  *(uint2 *)(o + 4 * i) = make_uint2(*(const uint32_t *)&a, *(const uint32_t *)&b);
}
/* the merge of every scheme: groups of four columns i0, i0 + NT, .. below i1, each the sum over the
 * S partials of load(k, i) in split order, stored as bf16 at o */
template <class Load>
__device__ __forceinline__ void merge_groups(uint16_t *o, int i0, int i1, int S, Load load) {
  for (int i = i0; i < i1; i += NT) {
    float4 acc = make_float4(0, 0, 0, 0);
    for (int k = 0; k < S; k++) {
      const float4 v = load(k, i);
      acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
    }
    store4(o, i, acc);
  }
}

/* mode 0 read, 1 part, 2 merge, 3 ticket, 4 gmerge */
template <int MODE>
__global__ void __launch_bounds__(NT, 1) k_skel(const uint8_t *kv, int kvlen, int S, uint16_t *o, unsigned *sink, float *gpart, unsigned *count) {
  extern __shared__ __align__(16) uint8_t sm[];
  float *part = (float *)(sm + KV_SM);
  const int t = blockIdx.x, s = blockIdx.y, slen = (kvlen + S - 1) / S;
  const int r0 = s * slen, r1 = min(r0 + slen, kvlen), nrows = max(r1 - r0, 0);
  const uint8_t *src = kv + ((int64_t)t * kvlen + r0) * RB;
  for (int c = threadIdx.x; c < nrows * (RB / 16); c += NT) {
    const uint32_t dst = saddr(sm + 16 * c);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src + 16 * c) : "memory");
  }
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  /* a value from the block's rows (nrows >= 1: main asks kv to be a multiple of S), kept in a
   * register as k_attn keeps its accumulators; the token's outputs, its S partials in global memory,
   * and this block's share of the merge (groups of four columns) */
  const float pv = (float)sm[threadIdx.x];
  uint16_t *ot = o + (int64_t)t * PART;
  const float4 *gall = (const float4 *)(gpart + (int64_t)t * S * PART);
  float4 *gmine = (float4 *)(gpart + ((int64_t)t * S + s) * PART);
  const int n4 = PART / 4, per = (n4 + S - 1) / S, i0 = s * per + threadIdx.x, i1 = min((s + 1) * per, n4);
  if constexpr (MODE == 0) {
    if (threadIdx.x == 0 && nrows > 0) atomicAdd(sink, sm[0] + sm[nrows * RB - 1]);
  } else if constexpr (MODE == 1) { /* the partial through shared memory, out as bf16 */
    for (int i = threadIdx.x; i < PART; i += NT) part[i] = pv;
    __syncthreads();
    for (int i = threadIdx.x; i < PART / 2; i += NT) {
      const float2 v = ((const float2 *)part)[i];
      __nv_bfloat162 b = __floats2bfloat162_rn(v.x, v.y);
      ((uint32_t *)o)[((int64_t)t * S + s) * (PART / 2) + i] = *(uint32_t *)&b;
    }
  } else if constexpr (MODE == 2) { /* the partial in shared memory, merged across the cluster */
    for (int i = threadIdx.x; i < PART; i += NT) part[i] = pv;
    cluster_sync_rel();
    const uint32_t base = saddr(part);
    merge_groups(ot, i0, i1, S, [&](int k, int i) { return ld_dsmem4(base + 16 * i, k); });
    cluster_sync_exit();
  } else if constexpr (MODE == 3) { /* the partial through shared memory to global memory; the token's last block merges all of it */
    for (int i = threadIdx.x; i < PART; i += NT) part[i] = pv;
    __syncthreads();
    for (int i = threadIdx.x; i < n4; i += NT) gmine[i] = ((const float4 *)part)[i];
    __threadfence();
    __syncthreads();
    __shared__ unsigned last;
    if (threadIdx.x == 0) last = atomicAdd(&count[t], 1u) == (unsigned)S - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    merge_groups(ot, threadIdx.x, n4, S, [&](int k, int i) { return __ldcg(gall + (int64_t)k * n4 + i); });
    if (threadIdx.x == 0) count[t] = 0; /* for the next launch */
  } else { /* gmerge: the partial to global memory, the cluster's barrier, the shares from the L2 */
    for (int i = threadIdx.x; i < n4; i += NT) gmine[i] = make_float4(pv, pv, pv, pv);
    cluster_sync_rel();
    merge_groups(ot, i0, i1, S, [&](int k, int i) { return __ldcg(gall + (int64_t)k * n4 + i); });
  }
}
__global__ void k_nop() {}

/* argument i as an integer in lo..hi, or exit 2 with one line naming it */
static int arg_int(char **argv, int i, const char *what, int lo, int hi) {
  char *end = NULL;
  const long v = strtol(argv[i], &end, 10);
  if (end == argv[i] || *end || v < lo || v > hi) {
    fprintf(stderr, "split_floor: argument %d ('%s'): %s, an integer in %d..%d\n", i, argv[i], what, lo, hi);
    exit(2);
  }
  return (int)v;
}

int main(int argc, char **argv) {
  if (argc < 5 || argc > 6) {
    fprintf(stderr, "split_floor: %d arguments; usage: split_floor bs kv S read|part|merge|ticket|gmerge [reps]\n", argc - 1);
    return 2;
  }
  const int bs = arg_int(argv, 1, "bs, the query tokens", 1, 4096), S = arg_int(argv, 3, "S, the splits a token (a cluster)", 1, 16);
  const int kv = arg_int(argv, 2, "kv, the KV rows a token (at most 256 a split)", 1, MAXROWS * S), reps = argc > 5 ? arg_int(argv, 5, "reps, the launches timed", 1, 100000) : 100;
  if (kv % S) { /* every split then has kv / S >= 1 rows, so every partial has its value */
    fprintf(stderr, "split_floor: argument 2 ('%s'): kv, the KV rows a token, a multiple of S = %d\n", argv[2], S);
    return 2;
  }
  const char *modes[] = {"read", "part", "merge", "ticket", "gmerge"};
  int mode = -1;
  for (int m = 0; m < 5; m++)
    if (!strcmp(argv[4], modes[m])) mode = m;
  if (mode < 0) {
    fprintf(stderr, "split_floor: argument 4 ('%s'): the mode, one of read, part, merge, ticket, gmerge\n", argv[4]);
    return 2;
  }
  uint8_t *kvb, *flush;
  uint16_t *o;
  unsigned *sink, *count;
  float *gpart;
  const size_t kvbytes = (size_t)bs * kv * RB, FL = 256u << 20;
  CK(cudaMalloc(&kvb, kvbytes));
  CK(cudaMemset(kvb, 0x3C, kvbytes));
  CK(cudaMalloc(&flush, FL));
  CK(cudaMalloc(&o, (size_t)bs * S * PART * 2));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMalloc(&gpart, (size_t)bs * S * PART * 4));
  CK(cudaMalloc(&count, (size_t)bs * 4));
  CK(cudaMemset(count, 0, (size_t)bs * 4));
  void (*k)(const uint8_t *, int, int, uint16_t *, unsigned *, float *, unsigned *) = mode == 0 ? k_skel<0> : mode == 1 ? k_skel<1> : mode == 2 ? k_skel<2> : mode == 3 ? k_skel<3> : k_skel<4>;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  if (S > 8) CK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute at[1];
  cfg.gridDim = dim3(bs, S), cfg.blockDim = dim3(NT), cfg.dynamicSmemBytes = SMEM;
  at[0].id = cudaLaunchAttributeClusterDimension, at[0].val.clusterDim.x = 1, at[0].val.clusterDim.y = S, at[0].val.clusterDim.z = 1;
  cfg.attrs = at, cfg.numAttrs = mode == 2 || mode == 4 ? 1 : 0;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto median = [&](auto launch) {
    std::vector<double> t(reps);
    for (int i = 0; i < reps; i++) {
      CK(cudaMemset(flush, i & 0xFF, FL));
      CK(cudaEventRecord(e0));
      launch();
      CK(cudaGetLastError());
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      t[i] = ms * 1e3;
    }
    std::sort(t.begin(), t.end());
    return t[reps / 2];
  };
  const double nop = median([&]() { k_nop<<<1, 32>>>(); });
  const double us = median([&]() { CK(cudaLaunchKernelEx(&cfg, k, (const uint8_t *)kvb, kv, S, o, sink, gpart, count)); });
  /* the outputs: a lone split's values are 60 (the bytes 0x3C), a merged one 60 S (exact in fp32
   * and in bf16 for S <= 16: 15 S < 256 has at most 8 significant bits) */
  if (mode >= 1) {
    std::vector<uint16_t> h((size_t)bs * (mode == 1 ? S : 1) * PART);
    CK(cudaMemcpy(h.data(), o, h.size() * 2, cudaMemcpyDeviceToHost));
    const float want = 60.0f * (mode == 1 ? 1 : S);
    uint32_t wb;
    memcpy(&wb, &want, 4);
    for (size_t i = 0; i < h.size(); i++)
      if (h[i] != (uint16_t)(wb >> 16)) {
        fprintf(stderr, "split_floor: %s: output %zu is 0x%04x, not 0x%04x\n", argv[4], i, h[i], wb >> 16);
        return 1;
      }
  }
  printf("bs=%d kv=%d S=%d %s: %.2f us (median of %d, dirty flush; empty kernel %.2f us)\n", bs, kv, S, argv[4], us, reps, nop);
  return 0;
}
