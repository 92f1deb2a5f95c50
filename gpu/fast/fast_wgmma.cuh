/* fast_wgmma.cuh: the logits on wgmma's fp8 unit (recipe fast-wgmma-a8w8; the WG = 1 variants of
 * k_attn and k_attn_ws). NVIDIA sm_90a only. */
#ifndef MLR_FAST_WGMMA_CUH
#define MLR_FAST_WGMMA_CUH

#include "fast_sm90.cuh"

namespace mlr_fast {

/* ---- k_attn's logits on wgmma's fp8 unit (WG = 1, recipe fast-wgmma-a8w8): S^T = K Q^T with M = a
 * warpgroup's 64 tokens (warp w's 16: the tokens k_attn's warp w computes), N = the 16 heads, and
 * the 576 columns in 18 steps of 32 in order, each step's D the next one's C from +0: the recipe's
 * mma:sm90-e4m3 dot. A, K's codes as they are, from registers: an ldmatrix of 8 rows x 16 bytes
 * gives lane (g, j) row g's bytes 4j..4j+3, the fp8 A fragment (wgmma_probe.cu's layout). B, Q's
 * e4m3 codes, from shared memory, K-major without swizzle: the core matrix of column chunk kc (16
 * bytes) and heads 8 hg..8 hg+7 at 256 kc + 128 hg, its rows 16 bytes apart; the descriptor's
 * leading byte offset (the K direction) 256, stride byte offset (N) 128. ---- */
/* wgmma exists on sm_90a only: another target's build traps here (and mlr_gpu_fast_prepare refuses
 * the recipe: MLR_FAST_WGMMA, set by gpu/CMakeLists.txt for 90a) */
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_ASM(...) __trap()
#else
#define WG_ASM(...) asm volatile(__VA_ARGS__)
#endif
__device__ __forceinline__ void wgmma_e4m3(float (&d)[2][4], const uint32_t (&a)[4],
                                           uint64_t desc) {
  /* the trapping build uses none */
  (void)d;
  (void)a;
  (void)desc;
  WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
         "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0,%1,%2,%3,%4,%5,%6,%7}, "
         "{%8,%9,%10,%11}, %12, p, 1, 1;\n}\n"
         : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
           "+f"(d[1][2]), "+f"(d[1][3])
         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
/* n accumulators tied to the asm statements around them, so no use of them moves across the
 * wgmma's issue or its wait (they are written asynchronously) */
template <int N>
__device__ __forceinline__ void wg_fence_regs(float *d) {
#pragma unroll
  for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ __forceinline__ void wg_fence(float (&d)[2][4]) { wg_fence_regs<8>(&d[0][0]); }
/* the warpgroup's register writes ordered before its next wgmma; its wgmmas since the last commit
 * made a group; wait until at most N groups are pending */
__device__ __forceinline__ void wg_fence_all() {
  WG_ASM("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_commit() {
  WG_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wg_wait_n() {
  WG_ASM("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
enum { WG_LBO = 256, WG_SBO = 128 };
/* a shared-memory operand without swizzle (bits 62-63 = 0): core matrices of 8 rows x 16 bytes,
 * each 128 contiguous bytes; lbo the byte step between core matrices along K, sbo along M or N */
__device__ __forceinline__ uint64_t wg_desc_at(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr >> 4) & 0x3FFF) | (uint64_t)(lbo >> 4) << 16 | (uint64_t)(sbo >> 4) << 32;
}
__device__ __forceinline__ uint64_t wg_desc(uint32_t addr) {
  return wg_desc_at(addr, WG_LBO, WG_SBO);
}
/* eight staged codes x as e4m3 codes by wg_q8's policy (below), the clamp's count added to
 * *clipped; wg_q8's and k_attn_rows' */
__device__ __forceinline__ uint2 wg_q8_codes(const fparams &p, uint4 x, int *clipped) {
  uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int k = 0; k < 4; k++)
    w[k] = p.qin ? mlr__q_static_e4m3x2_codes(w[k], p.static_scale, p.qrecip, clipped)
                 : mlr__f16x2_e4m3x2(w[k]);
  return make_uint2(w[0] | w[1] << 16, w[2] | w[3] << 16);
}
/* wgmma's B operand, Q's e4m3 codes, straight from q_load's staging (q_operands is not run): p.qin,
 * the static policy's quantization of the bf16 codes (mlr__q_static_e4m3x2_codes: the codes that
 * q_operands would widen to fp16), the clamp's count by split 0's block; else k_qprep's fp16
 * codes of e4m3 values, narrowed (exact). Rows past H are zero codes either way. Eight codes (half
 * a 16-column chunk) a step, so the 384 threads of k_attn_ws_wg take 3 steps each (with whole
 * chunks half the threads would take 2 and the rest 1: 32 divisions on the longest path, not 24).
 * Then the fence that makes the generic stores visible to wgmma. */
__device__ __forceinline__ void wg_q8(const fparams &p, const uint16_t *q_sm, uint8_t *q8_sm,
                                      int s) {
  int clipped = 0;
  for (int c = threadIdx.x; c < 16 * (QK / 8);
       c += blockDim.x) { /* head h's codes 8 k8 .. 8 k8 + 7 */
    const int h = c / (QK / 8), k8 = c % (QK / 8);
    /* the core matrix of column chunk k8 / 2 and heads 8 (h >> 3) .. (wg_desc's strides), row h & 7
     */
    *(uint2 *)(q8_sm + WG_LBO * (k8 >> 1) + WG_SBO * (h >> 3) + 16 * (h & 7) + 8 * (k8 & 1)) =
        wg_q8_codes(p, *(const uint4 *)(q_sm + h * QSTR + 8 * k8), &clipped);
  }
  if (p.qin) add_clipped(p, clipped, s == 0);
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* P in the rope columns (the WG kernels): the 16-byte chunk of head h and tokens 8 tc .. 8 tc + 7
 * (tc counted from a slot half's start) is the rope chunk 32 + (h >> 3) of row 8 tc + (h & 7).
 * wg_p_lane: the PV's ldmatrix of P from a step's first row (vrow), matrices heads (lane & 7) + 8
 * ((lane >> 3) & 1), tokens 8 (lane >> 4) ..: the 8 rows of a matrix fall on 8 distinct groups of
 * 4 banks (rows 4 banks apart mod 8, the swizzle's xor). */
__device__ __forceinline__ uint32_t wg_p_chunk(int tc, int h) {
  return ring<1>::chunk(8 * tc + (h & 7), 32 + (h >> 3));
}
__device__ __forceinline__ uint32_t wg_p_lane(int lane) {
  return wg_p_chunk(lane >> 4, (lane & 7) + 8 * ((lane >> 3) & 1));
}
/* a warp's A fragments' lane addresses: its 16 tokens from 16 w, row 16 w + (lane & 7) + 8 ((lane
 * >> 3) & 1), chunk 2 e + (lane >> 4) */
__device__ __forceinline__ void wg_k_lanes(int warp, int lane, uint32_t (&wk_lane)[2]) {
  for (int e = 0; e < 2; e++)
    wk_lane[e] =
        ring<1>::chunk(16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1), 2 * e + (lane >> 4));
}
/* a warp's A fragments of its 16 tokens for the 18 steps (qb: the slot half's start; wk_lane: the
 * lane's row and chunk 2 (ks % 2) + (lane >> 4), so step ks is wk_lane[ks % 2] + 64 (ks >> 1)),
 * which stay in ka until wg_wait; wg_mma starts the warpgroup's chain into d from +0 */
__device__ __forceinline__ void wg_frags(uint32_t qb, const uint32_t (&wk_lane)[2],
                                         uint32_t (&ka)[NKB / 2][4]) {
#pragma unroll
  for (int ks = 0; ks < NKB / 2; ks++)
    ldsm4(qb + wk_lane[ks & 1] + 64 * (ks >> 1), ka[ks][0], ka[ks][1], ka[ks][2], ka[ks][3]);
}
__device__ __forceinline__ void wg_mma(float (&d)[2][4], const uint32_t (&ka)[NKB / 2][4],
                                       uint64_t qdesc) {
#pragma unroll
  for (int i = 0; i < 8; i++) (&d[0][0])[i] = 0.0f;
  wg_fence(d);
  wg_fence_all();
#pragma unroll
  for (int ks = 0; ks < NKB / 2; ks++)
    wgmma_e4m3(d, ka[ks],
               qdesc + (uint64_t)(2 * WG_LBO * ks / 16)); /* column chunks 2 ks, 2 ks + 1 */
  wg_commit();
}
__device__ __forceinline__ void wg_wait(float (&d)[2][4]) {
  wg_wait_n<0>();
  wg_fence(d);
}

/* The softmax on a warp's wgmma D (16 tokens as rows): lane (g, j) holds tokens g, g + 8 of heads
 * 8 nh + 2 j + e. wg_fold_max folds its two tokens' masked logits sv into mx[nh][e]; wg_allmax
 * takes the max across the warp's lanes of the same j (xor 4, 8, 16): the max is exact in any
 * order. */
__device__ __forceinline__ void wg_fold_max(const float (&sv)[2][4], float (&mx)[2][2]) {
#pragma unroll
  for (int nh = 0; nh < 2; nh++)
#pragma unroll
    for (int e = 0; e < 2; e++) mx[nh][e] = fmaxf(fmaxf(mx[nh][e], sv[nh][e]), sv[nh][2 + e]);
}
__device__ __forceinline__ void wg_allmax(float (&mx)[2][2]) {
#pragma unroll
  for (int nh = 0; nh < 2; nh++)
#pragma unroll
    for (int e = 0; e < 2; e++)
#pragma unroll
      for (int o = 4; o <= 16; o *= 2) mx[nh][e] = fmaxf(mx[nh][e], MLR_SHFL_XOR(mx[nh][e], o));
}
/* v[nh][e], the lane's heads' values (the same in every lane of its j), into red[head * stride +
 * col] by the lanes g = 0 (lead) */
__device__ __forceinline__ void wg_put_heads(float *red, int stride, int col,
                                             const float (&v)[2][2], bool lead) {
  const int j = threadIdx.x & 3;
  if (lead)
#pragma unroll
    for (int nh = 0; nh < 2; nh++)
#pragma unroll
      for (int e = 0; e < 2; e++) red[(8 * nh + 2 * j + e) * stride + col] = v[nh][e];
}
/* a row value v[rr] of rows g + 8 rr (the PV layout: m, l, the new max) for the lane's heads
 * 8 nh + 2 j + e: lane 4 (2 j + e) holds head 8 nh + 2 j + e's as its v[nh] */
__device__ __forceinline__ void wg_heads(const float (&v)[2], float (&vh)[2][2]) {
  const int j = threadIdx.x & 3;
#pragma unroll
  for (int nh = 0; nh < 2; nh++)
#pragma unroll
    for (int e = 0; e < 2; e++) vh[nh][e] = MLR_SHFL(v[nh], 4 * (2 * j + e));
}
/* p = 2^(s - m') of a warp's 16 tokens (sv; m' of the lane's heads in mh) as fp16 P into their
 * tile's rope columns (wg_p_chunk from the slot half's start pb, a generic pointer; the tokens'
 * first chunk tc0 = 2 w), and their sum in the recipe's warp16 tree into t[nh][e] (every lane):
 * ((t0 + t1) + (t2 + t3)), t_i = (p[2i] + p[2i+1]) + (p[2i+8] + p[2i+9]), the tokens of lanes g =
 * 2i, 2i + 1 (xor 4), then i ^ 1 (xor 8) and i ^ 2 (xor 16): k_attn's sums term for term. */
__device__ __forceinline__ void wg_p_sums(const float (&sv)[2][4], const float (&mh)[2][2],
                                          uint8_t *pb, int tc0, float (&t)[2][2]) {
  const int g = (threadIdx.x & 31) >> 2, j = threadIdx.x & 3;
#pragma unroll
  for (int nh = 0; nh < 2; nh++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const float a = ex2(sv[nh][e] - mh[nh][e]),
                  b = ex2(sv[nh][2 + e] - mh[nh][e]); /* tokens g, g + 8 */
      const uint32_t h2 = mlr__f16x2(a, b);
      const int h = 8 * nh + 2 * j + e;
      *(uint16_t *)(pb + wg_p_chunk(tc0, h) + 2 * g) = (uint16_t)h2;
      *(uint16_t *)(pb + wg_p_chunk(tc0 + 1, h) + 2 * g) = (uint16_t)(h2 >> 16);
      float v = (a + MLR_SHFL_XOR(a, 4)) + (b + MLR_SHFL_XOR(b, 4));
      v += MLR_SHFL_XOR(v, 8);
      v += MLR_SHFL_XOR(v, 16);
      t[nh][e] = v;
    }
}

} // namespace mlr_fast

#endif
