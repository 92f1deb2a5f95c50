/* mfma.cu: the fast kernel's AMD variant (CDNA3 MFMA, written for gfx942/gfx950, compiled for
 * gfx940 by CI's hipcc; HIP builds only), beside the shared k_amax (qprep.cu) and k_merge
 * (merge.cu). It computes the recipes fast-mi300-a16w8 / fast-mi300-a8w8 (fast_recipe.c) step for
 * step as the emulator does (ref/emulate/emulate.c, run_split_row): the only part not exact by
 * construction is the MFMA unit itself, whose model (mma:cdna3-bf16) is MMA-Sim's description.
 * NOT RUN: this project has no AMD GPU; nothing here has executed on hardware.
 *
 *   k_qprep      fp8 Q only: Q's operand codes (the recipe's policy by the generic encoders, the
 *                fp8 value as a bf16 code: exact), once per element
 *   k_attn_mfma  a block of 4 wavefronts (64 lanes) per (query token, split); 64-token tiles of
 *                fp8 KV through LDS (36 KB, plus Q's 18 KB: 62 KB of the 64); no pipelining
 *                (plain loads into LDS, then compute).
 *     logits   wave w: tokens 16w..16w+15 of the tile, v_mfma_f32_16x16x16_bf16 (M = the 16
 *              heads, N = 16 tokens, K = 16 columns) chained over the 36 column blocks in order
 *              from 0: the recipe's dot in blocks of 8 (a k = 16 instruction is two of the model's
 *              blocks in order). fp8 codes become bf16 operands through a 256-entry table (exact).
 *     softmax  per head, base 2: m' = max(m, block max), alpha = 2^(m - m'), p = 2^(s - m')
 *              (mlr__emu_exp: correctly rounded, the recipe's softmax.exp_unit = exact), the row
 *              sum in token order (softmax.sum = seq), l = l * alpha + sum, P rounded to bf16.
 *     PV       wave w: output columns 128w..128w+127 (8 tiles of 16), C = acc * alpha, then the
 *              tile's 4 token blocks of 16 in order.
 * Operand layouts (the 16x16x16 bf16 MFMA, wave64; AMD's matrix instruction calculator): lane l,
 * r = l % 16, q = l / 16: A[r][4q + j] and B[4q + j][r] in element j of the 4-vectors; D[4q +
 * j][r] in element j of the result. */
#include "fast_host.cuh"

namespace mlr_fast {
namespace {

typedef short mlr_bf16x4 __attribute__((ext_vector_type(4)));
typedef float mlr_f32x4 __attribute__((ext_vector_type(4)));

enum {
  MF_TT = 64,
  MF_THR = 256,
  MF_QS = QK + 8 /* Q's row in LDS, halves */,
  MF_PS = MF_TT + 8 /* P's row */
};

/* fp8 Q's operand codes: the recipe's policy (mlr__emu_q_quant, the emulator's), the fp8 value as a
 * bf16 code (exact: 4 significant bits, exponents within bf16's; a NaN stays a NaN); 8 elements a
 * thread, the clamp's count added once a group of 32 lanes */
__global__ void __launch_bounds__(QPREP_THREADS) k_qprep(fparams p, int64_t n8) {
  const float qs = q_scale(p);
  int clipped = 0;
  const int64_t i = blockIdx.x * (int64_t)QPREP_THREADS + threadIdx.x;
  if (i < n8)
    for (int k = 0; k < 8; k++) {
      int c;
      const float v = mlr__emu_q_quant(p.q[8 * i + k], qs, (mlr_format)p.qfmt, !p.qstatic, &c);
      clipped += c;
      p.qop[8 * i + k] = (uint16_t)(mlr_f32_bits(v) >> 16);
    }
  add_clipped(p, clipped, true);
}

/* four bf16 codes (element j in bits 16j..16j+15 of lo, hi) as an MFMA operand */
__device__ __forceinline__ mlr_bf16x4 mf_bf16x4(uint32_t lo, uint32_t hi) {
  mlr_bf16x4 v;
  v[0] = (short)(lo & 0xFFFFu);
  v[1] = (short)(lo >> 16);
  v[2] = (short)(hi & 0xFFFFu);
  v[3] = (short)(hi >> 16);
  return v;
}

__global__ void __launch_bounds__(MF_THR) k_attn_mfma(fparams p) {
  __shared__ __attribute__((aligned(16)))
  uint8_t kv_sm[MF_TT * QK]; /* the tile's fp8 codes, row by row */
  __shared__ __attribute__((aligned(16)))
  uint16_t q_sm[16 * MF_QS];         /* Q's bf16 operand codes, rows past H zero */
  __shared__ float s_sm[16 * MF_TT]; /* a tile's logits, then its p */
  __shared__ __attribute__((aligned(16))) uint16_t p_sm[16 * MF_PS]; /* P's bf16 codes */
  __shared__ uint16_t lut[256];                                      /* fp8 code -> bf16 code */
  __shared__ float m_sm[16], l_sm[16], mn_sm[16], al_sm[16];
  const int t = blk_token(p), s = blockIdx.y;
  const tokinfo ti = tok_of(p, t);
  if (s >= ti.nsplit) return; /* this batch has fewer splits (uniform over the block) */
  const int tid = threadIdx.x, wave = tid >> 6, lane = tid & 63, lr = lane & 15, lq = lane >> 4,
            H = grp_heads(p); /* the block's group of heads */
  const int64_t L = ti.L, start = (int64_t)s * ti.slen;
  const int64_t end = start + ti.slen < L ? start + ti.slen : L;
  lut[tid] = (uint16_t)(mlr_f32_bits(
                            mlr_decode(p.fnuz ? MLR_FMT_E4M3FNUZ : MLR_FMT_E4M3, (uint32_t)tid)) >>
                        16);
  const uint16_t *qsrc = p.qin ? p.q : p.qop; /* bf16 Q: its codes are its operands */
  for (int c = tid; c < 16 * (QK / 4); c += MF_THR) {
    const int h = c / (QK / 4), k4 = c % (QK / 4);
    const uint2 v =
        h < H ? *(const uint2 *)(qsrc + head_row(p, t, h) * QK + 4 * k4) : make_uint2(0u, 0u);
    *(uint2 *)(q_sm + h * MF_QS + 4 * k4) = v;
  }
  if (tid < 16) {
    m_sm[tid] = -INFINITY;
    l_sm[tid] = 0.0f;
  }
  float c = p.c0; /* the logit scale: fp32(log2 e / 24) [* q_scale] * kv_scale, left to right */
  if (p.qfp8) c = c * q_scale(p);
  c = c * p.kvs;
  mlr_f32x4 acc[8];
  for (int nt = 0; nt < 8; nt++) acc[nt] = mlr_f32x4{0.0f, 0.0f, 0.0f, 0.0f};
  __syncthreads();

  for (int64_t j0 = start; j0 < end; j0 += MF_TT) {
    const int n = end - j0 < MF_TT ? (int)(end - j0) : MF_TT;
    /* the tile's rows, 16 bytes a load; rows past the split's end zero */
    for (int k = tid; k < MF_TT * (QK / 16); k += MF_THR) {
      const int r = k / (QK / 16), ch = k % (QK / 16);
      const int64_t pos = j0 + r;
      uint4 v = make_uint4(0u, 0u, 0u, 0u);
      if (r < n)
        v = *(const uint4 *)(p.kv + kv_ref_row(p, kv_ref(p, ti.base, pos, true)) * QK + 16 * ch);
      *(uint4 *)(kv_sm + r * QK + 16 * ch) = v;
    }
    __syncthreads();
    /* logits of tokens 16 wave + lr: D[head 4 lq + j][token] */
    {
      mlr_f32x4 d = {0.0f, 0.0f, 0.0f, 0.0f};
      const uint8_t *krow = kv_sm + (16 * wave + lr) * QK;
      const uint16_t *qrow = q_sm + lr * MF_QS;
      for (int kb = 0; kb < NKB; kb++) {
        const int col = 16 * kb + 4 * lq;
        const uint2 qa = *(const uint2 *)(qrow + col);
        const uint32_t k4 = *(const uint32_t *)(krow + col);
        const mlr_bf16x4 b = mf_bf16x4(lut[k4 & 0xFFu] | (uint32_t)lut[k4 >> 8 & 0xFFu] << 16,
                                       lut[k4 >> 16 & 0xFFu] | (uint32_t)lut[k4 >> 24] << 16);
        d = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(mf_bf16x4(qa.x, qa.y), b, d, 0, 0, 0);
      }
      const int tok = 16 * wave + lr;
      for (int j = 0; j < 4; j++) s_sm[(4 * lq + j) * MF_TT + tok] = tok < n ? d[j] * c : -INFINITY;
    }
    __syncthreads();
    /* softmax: 16 threads a head, 4 tokens each (the max is exact in any order) */
    {
      const int h = tid >> 4, q = tid & 15;
      float *srow = s_sm + h * MF_TT;
      float bm =
          fmaxf(fmaxf(srow[4 * q], srow[4 * q + 1]), fmaxf(srow[4 * q + 2], srow[4 * q + 3]));
      for (int m = 8; m; m >>= 1)
        bm = fmaxf(bm, MLR_SHFL_XOR(bm, m)); /* within the head's 16 lanes */
      const float mo = m_sm[h], mn = fmaxf(mo, bm);
      for (int k = 4 * q; k < 4 * q + 4; k++) {
        const float pk = mlr__emu_sm_exp(MLR_EXP_2, NULL, srow[k] - mn);
        srow[k] = pk;
        p_sm[h * MF_PS + k] = (uint16_t)mlr__encode_f32_rne(
            pk, MLR_FMT_BF16, MLR_OVF_NONSAT); /* P's format and operand: bf16 */
      }
      if (q == 0) {
        mn_sm[h] = mn;
        al_sm[h] = mlr__emu_sm_exp(MLR_EXP_2, NULL, mo - mn);
      }
    }
    __syncthreads();
    if (tid < 16) { /* the row sum in token order over the tile's tokens, then l and m */
      const float ls = mlr__emu_rowsum(MLR_SUM_SEQ, s_sm + tid * MF_TT, n);
      l_sm[tid] = mlr__emu_upd(l_sm[tid], al_sm[tid], ls, 0);
      m_sm[tid] = mn_sm[tid];
    }
    /* PV: columns 128 wave + 16 nt + lr; C = acc * alpha (rows 4 lq + j), then 4 token blocks */
    for (int nt = 0; nt < 8; nt++)
      for (int j = 0; j < 4; j++) acc[nt][j] = acc[nt][j] * al_sm[4 * lq + j];
    for (int kb = 0; kb < MF_TT / 16; kb++) {
      const uint2 pa = *(const uint2 *)(p_sm + lr * MF_PS + 16 * kb + 4 * lq);
      const uint8_t *vrow = kv_sm + (16 * kb + 4 * lq) * QK + 128 * wave + lr;
      for (int nt = 0; nt < 8; nt++) {
        const uint8_t *v = vrow + 16 * nt;
        const mlr_bf16x4 b = mf_bf16x4(lut[v[0]] | (uint32_t)lut[v[QK]] << 16,
                                       lut[v[2 * QK]] | (uint32_t)lut[v[3 * QK]] << 16);
        acc[nt] =
            __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(mf_bf16x4(pa.x, pa.y), b, acc[nt], 0, 0, 0);
      }
    }
    __syncthreads(); /* the tile's LDS is read: the next tile may load; l and m written */
  }
  /* the split's result: acc / max(l, clamp) * kv_scale; lse = (m + log2(max(l, clamp))) * ln 2 */
  const int direct = ti.nsplit == 1;
  for (int j = 0; j < 4; j++) {
    const int h = 4 * lq + j;
    if (h >= H) continue;
    const float lc = fmaxf(l_sm[h], p.clamp);
    const int64_t row = head_row(p, t, h);
    for (int nt = 0; nt < 8; nt++) {
      const int col = 128 * wave + 16 * nt + lr;
      const float v = acc[nt][j] / lc * p.kvs;
      if (direct)
        p.o[row * DV + col] = mlr__emu_out_code(v, MLR_OUT_BF16);
      else
        p.part_o[(row * p.S + s) * DV + col] = v;
    }
  }
  if (tid < H) store_lse(p, head_row(p, t, tid), s, m_sm[tid], fmaxf(l_sm[tid], p.clamp), direct);
}

} // namespace

hipError_t launch_qprep(const fparams &p, int64_t n8) {
  k_qprep<<<(unsigned)((n8 + QPREP_THREADS - 1) / QPREP_THREADS), QPREP_THREADS>>>(p, n8);
  return hipGetLastError();
}

hipError_t launch_attn_mfma(const fparams &p, dim3 grid) {
  k_attn_mfma<<<grid, MF_THR>>>(p);
  return hipGetLastError();
}

} // namespace mlr_fast
