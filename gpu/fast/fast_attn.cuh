/* fast_attn.cuh: the pieces k_attn (attn.cu) and k_attn_ws (attn_ws.cu) share: Q's staging and
 * operands, a logit step, a PV step's products, and the end of a split (its result stored, or
 * merged in its cluster). NVIDIA sm_90. */
#ifndef MLR_FAST_ATTN_CUH
#define MLR_FAST_ATTN_CUH

#include <type_traits>

#include "fast_cluster.cuh"
#include "fast_sm90.cuh"
#include "fast_wgmma.cuh"

namespace mlr_fast {

/* Q's 16 x 576 codes into q_sm (rows past H zero-filled), rows QSTR halves apart (1168 bytes: the
 * 8 rows of an ldmatrix hit 8 distinct groups of 4 banks), one cp.async group: p.qin, the bf16 or
 * e4m3 codes (made operands by q_operands), else k_qprep's fp16 codes */
__device__ __forceinline__ void q_load(const fparams &p, uint16_t *q_sm, int t) {
  const uint16_t *qsrc = p.qin ? p.q : p.qop;
  const int hn = grp_heads(p);
  for (int c = threadIdx.x; c < 16 * (QK / 8); c += blockDim.x) { /* 16 bytes a copy: 8 codes */
    const int h = c / (QK / 8), k8 = c % (QK / 8);
    cp_async16(smem_addr(q_sm + h * QSTR + 8 * k8),
               h < hn ? qsrc + head_row(p, t, h) * QK + 8 * k8 : qsrc, h < hn ? 16 : 0);
  }
  cp_commit();
}

/* Q's operands in place, by the block, a 16-column block (8 words) a thread, in small loops (not
 * by each warp in unrolled code with a test a pair, which is several times slower): p.qin, the
 * recipe's Q policy (bf16 codes -> fp16 operands, q_operand's rounding; e4m3 with the static
 * scale, the clamp's count by split 0's block, once a token); fp8 KV, each block's columns put in
 * the k order of the K rows' ldmatrix (logit_step), so that an ldmatrix gives each lane its A
 * fragment: column pair P (columns 2P, 2P+1) to word 4 (P & 1) + (P >> 1). One loop per policy,
 * so that no policy computes another's divisions. */
template <int W, int PERM = (W == 1)>
__device__ __forceinline__ void q_operands(const fparams &p, uint16_t *q_sm, int s) {
  auto each_block = [&](auto op) {
    for (int c = threadIdx.x; c < grp_heads(p) * NKB; c += blockDim.x) {
      uint4 *b4 = (uint4 *)(q_sm + (c / NKB) * QSTR + 16 * (c % NKB));
      const uint4 x0 = b4[0], x1 = b4[1];
      const uint32_t w[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      uint32_t o[8];
#pragma unroll
      for (int k = 0; k < 8; k++) o[PERM ? 4 * (k & 1) + (k >> 1) : k] = op(w[k]);
      b4[0] = make_uint4(o[0], o[1], o[2], o[3]);
      b4[1] = make_uint4(o[4], o[5], o[6], o[7]);
    }
  };
  int clipped = 0;
  if (!p.qin)
    each_block([](uint32_t x) { return x; }); /* k_qprep's fp16 codes */
  else if (!p.qfp8)
    each_block([](uint32_t x) { return mlr__bf16x2_f16x2(x); });
  else {
    each_block(
        [&](uint32_t x) { return mlr__q_static_e4m3x2(x, p.static_scale, p.qrecip, &clipped); });
    add_clipped(p, clipped, s == 0);
  }
}

/* each lane's A fragments for the 36 column blocks by ldmatrix: matrices rows 0-7 and 8-15 of
 * block positions 0-7, then of 8-15 (lane l: row (l & 7) + 8 ((l >> 3) & 1), position 8 (l >> 4)).
 * fp8: k = 2j, 2j+1 <-> columns 4j, 4j+1 and k = 2j+8, 2j+9 <-> columns 4j+2, 4j+3 (q_operands'
 * order); bf16: the natural order (k = column) */
__device__ __forceinline__ void q_frags(const uint16_t *q_sm, int lane, uint32_t (&qa)[NKB][4]) {
  const uint32_t qaddr =
      smem_addr(q_sm + ((lane & 7) + 8 * ((lane >> 3) & 1)) * QSTR + 8 * (lane >> 4));
#pragma unroll
  for (int kb = 0; kb < NKB; kb++)
    ldsm4(qaddr + 32 * kb, qa[kb][0], qa[kb][1], qa[kb][2], qa[kb][3]);
}

/* step q4 of a tile's logits, NT n-tiles of 8 tokens (n-tile nt: the rows at qb + qk_lane + 8 nt
 * RB), each an mma chain over the column blocks in order. 4 matrices of 8 tokens x 16 bytes,
 * chunks 4*q4 .. 4*q4+3. fp8: column blocks 4*q4 .. 4*q4+3, lane (g, j) gets token g's columns
 * 4j..4j+3 of each; bf16: column blocks 2*q4, 2*q4+1, lane (g, j) gets token g's columns 2j, 2j+1
 * of each 8. FNUZ (FIX = 0): sp collects the special codes' flags */
template <int FNUZ, int FIX, int W, int NT>
__device__ __forceinline__ void logit_step(uint32_t qb, int q4, const uint32_t (&qk_lane)[2],
                                           const uint32_t (&qa)[NKB][4], float (&sacc)[NT][4],
                                           uint32_t &sp) {
  constexpr int RB = QK * W;
#pragma unroll
  for (int nt = 0; nt < NT; nt++) {
    uint32_t r[4];
    ldsm4(qb + qk_lane[q4 % 2] + 8 * nt * RB + 64 * (q4 - q4 % 2), r[0], r[1], r[2], r[3]);
    if (W == 1) {
#pragma unroll
      for (int i = 0; i < 4; i++) {
        uint32_t lo, hi;
        if (FNUZ && !FIX) sp |= fnuz_special(r[i]);
        fp8x4<FIX>(r[i], lo, hi);
        mma(sacc[nt], qa[4 * q4 + i], lo, hi);
      }
    } else {
      mma(sacc[nt], qa[2 * q4], mlr__bf16x2_f16x2(r[0]), mlr__bf16x2_f16x2(r[1]));
      mma(sacc[nt], qa[2 * q4 + 1], mlr__bf16x2_f16x2(r[2]), mlr__bf16x2_f16x2(r[3]));
    }
  }
}

/* one PV step's products: P's fragment pa (tokens 16 kb .., the natural k order), V's rows at
 * vrow, NA groups of 32 output columns (fp8; bf16: 2 NA groups of 16) from the lane's pv_lane:
 * acc[a][h2][e] is n-tile 4a + 2 h2 + e */
template <int FIX, int W, int NA>
__device__ __forceinline__ void pv_products(uint32_t vrow, const uint32_t (&pa)[4],
                                            const uint32_t (&pv_lane)[NA * W],
                                            float (&acc)[NA][2][2][4]) {
  if (W == 1) {
#pragma unroll
    for (int a = 0; a < NA; a++) {
      /* transposed 8x8 matrices of 16-bit pairs: lane (g, j) gets tokens 2j, 2j+1 of byte columns
       * 2g, 2g+1: m0 tokens 0-7 and m1 tokens 8-15 of columns c0..c0+15, m2 and m3 of c0+16.. */
      uint32_t r[4];
      ldsm4t(vrow + pv_lane[a], r[0], r[1], r[2], r[3]);
#pragma unroll
      for (int h2 = 0; h2 < 2; h2++) {
        /* bytes (t 2j col 2g, t 2j col 2g+1, t 2j+1 col 2g, t 2j+1 col 2g+1) -> column 2g's two
         * tokens in the low half, column 2g+1's in the high half */
        uint32_t e0, o0, e1, o1;
        fp8x4<FIX>(prmt(r[2 * h2], 0x3120), e0, o0);
        fp8x4<FIX>(prmt(r[2 * h2 + 1], 0x3120), e1, o1);
        mma(acc[a][h2][0], pa, e0, e1); /* n = g <-> column c + 32a + 16 h2 + 2g */
        mma(acc[a][h2][1], pa, o0, o1); /* n = g <-> column c + 32a + 16 h2 + 2g + 1 */
      }
    }
  } else {
#pragma unroll
    for (int a2 = 0; a2 < 2 * NA; a2++) {
      /* transposed: m0 (tokens 0-7) and m1 (tokens 8-15) of columns 8c..8c+7, m2 and m3 of
       * 8c+8..: lane (g, j) gets tokens 2j, 2j+1 of column 8c + g */
      uint32_t r[4];
      ldsm4t(vrow + pv_lane[a2], r[0], r[1], r[2], r[3]);
      mma(acc[a2 >> 1][a2 & 1][0], pa, mlr__bf16x2_f16x2(r[0]),
          mlr__bf16x2_f16x2(r[1])); /* columns c + 16 a2 + g */
      mma(acc[a2 >> 1][a2 & 1][1], pa, mlr__bf16x2_f16x2(r[2]),
          mlr__bf16x2_f16x2(r[3])); /* columns c + 16 a2 + 8 + g */
    }
  }
}

/* a lone split's row: its divisor sc = max(0 + l exp2(m - m), clamp) (merge_one for one split; the
 * software exp2 only for m = +Inf) and whether it is merged at all (m > MLR_EMU_SKIP_BELOW); its
 * lse is store_lse(live ? m : -Inf, sc) (store_lone_lse). One definition for store_result and
 * k_attn_ws's logit warps */
__device__ __forceinline__ float direct_sc(const fparams &p, float m, float l, bool &live,
                                           float &wv) {
  live = m > MLR_EMU_SKIP_BELOW;
  const float z = m - m;
  wv = live ? (z == 0.0f ? 1.0f : mlr__emu_exp(MLR_EXP_2, z)) : 0.0f;
  return fmaxf(live ? 0.0f + l * wv : 0.0f, p.clamp);
}
/* that lse from direct_sc's sc and live */
__device__ __forceinline__ void store_lone_lse(const fparams &p, int64_t row, float m, float sc,
                                               bool live) {
  store_lse(p, row, 0, live ? m : -INFINITY, sc, 1);
}

/* the split's result from a lane's accumulators (output columns c0 .. of rows g, g+8) and the
 * rows' m and l: raw partials (the recipes' partial.normalized = no: no division a partial
 * element), the split's acc * kv_scale, its m and l, merged by k_merge; a token with one split,
 * that merge here (mlr_emulate.h's merge_one for one split: the split skipped unless m >
 * MLR_EMU_SKIP_BELOW, weight exp2(m - m), o = (0 + part * weight) / max(0 + l * weight, clamp),
 * lse = (M + log2 of that) * ln 2) as the bf16 output. lead: this lane writes the rows' m, l or lse
 */
template <int W, int NA>
__device__ __forceinline__ void store_result(const fparams &p, const float (&acc)[NA][2][2][4],
                                             const float (&m)[2], const float (&l)[2], int t, int s,
                                             bool direct, int c0, bool lead, float *cl,
                                             bool lse = true) {
  const int g = (threadIdx.x & 31) >> 2, j = threadIdx.x & 3;
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const int h = g + 8 * rr;
    if (h >= grp_heads(p)) continue; /* rows past the group's heads: zero Q, no output */
    const int64_t row = head_row(p, t, h);
    bool live = false;
    float wv = 0.0f, sc = 0.0f; /* direct only: whether merged, exp2(m - m) (1 but for m = +Inf: the
                                   software exp2 only then), the divisor */
    if (direct) sc = direct_sc(p, m[rr], l[rr], live, wv);
    /* direct: the row's outputs (0 + a kv_scale w) / sc, by div_row, index ((2 a + h2) 2 + x) 2 + y
     * for acc[a][h2][x][2 rr + y] */
    float q[8 * NA];
    if (direct) {
      float nv[8 * NA];
#pragma unroll
      for (int i = 0; i < 8 * NA; i++)
        nv[i] = live ? 0.0f + acc[i / 8][i / 4 % 2][i / 2 % 2][2 * rr + i % 2] * p.kvs * wv : 0.0f;
      div_row<8 * NA>(nv, sc, q);
    }
    float *po = cl ? cl + h * DV + c0
                   : p.part_o + (row * p.S + s) * DV +
                         c0; /* cl: this block's shared memory (cluster_merge) */
    uint16_t *oo = p.o + row * DV + c0;
#pragma unroll
    for (int a = 0; a < NA; a++)
#pragma unroll
      for (int h2 = 0; h2 < 2; h2++) {
        const int i0 = 8 * a + 4 * h2; /* q's index of acc[a][h2][0][2 rr] */
        if (W == 1) { /* c0 (n = 2j), c1 (n = 2j+1) of the even and odd tiles: columns 4j, 4j+2 and
                         4j+1, 4j+3 */
          const int col = 32 * a + 16 * h2 + 4 * j;
          const float v[4] = {acc[a][h2][0][2 * rr], acc[a][h2][1][2 * rr],
                              acc[a][h2][0][2 * rr + 1], acc[a][h2][1][2 * rr + 1]};
          if (direct)
            *(uint2 *)(oo + col) = make_uint2(mlr__out_bf16x2(q[i0], q[i0 + 2]),
                                              mlr__out_bf16x2(q[i0 + 1], q[i0 + 3]));
          else
            *(float4 *)(po + col) =
                make_float4(v[0] * p.kvs, v[1] * p.kvs, v[2] * p.kvs, v[3] * p.kvs);
        } else /* n-tile 4a + 2 h2 + e: columns 8 (4a + 2 h2 + e) + 2j, + 1 */
#pragma unroll
          for (int e = 0; e < 2; e++) {
            const int col = 8 * (4 * a + 2 * h2 + e) + 2 * j;
            const float v0 = acc[a][h2][e][2 * rr], v1 = acc[a][h2][e][2 * rr + 1];
            if (direct)
              *(uint32_t *)(oo + col) = mlr__out_bf16x2(q[i0 + 2 * e], q[i0 + 2 * e + 1]);
            else
              *(float2 *)(po + col) = make_float2(v0 * p.kvs, v1 * p.kvs);
          }
      }
    if (lead) {
      if (direct) {
        if (lse) store_lone_lse(p, row, m[rr], sc, live);
      } else if (cl) {
        cl[CL_X + h] = m[rr];
        cl[CL_SUM + h] = l[rr];
      } else {
        p.part_x[row * p.S + s] = m[rr];
        p.part_sum[row * p.S + s] = l[rr];
      }
    }
  }
}

/* the end of a split's block, k_attn's and k_attn_ws's alike: its result stored (in its own shared
 * memory when its token's splits merge in their cluster), then that merge */
template <int W, int NA>
__device__ __forceinline__ void finish_split(const fparams &p, uint8_t *sm,
                                             const float (&acc)[NA][2][2][4], const float (&m)[2],
                                             const float (&l)[2], int t, int s, const tokinfo &ti,
                                             int c0, bool lead, bool lse = true) {
  store_result<W, NA>(p, acc, m, l, t, s, ti.nsplit == 1, c0, lead,
                      p.cl && ti.nsplit > 1 ? (float *)sm : nullptr, lse);
  if (p.cl) cluster_merge(p, (float *)sm, t, ti.nsplit);
}

} // namespace mlr_fast

#endif
