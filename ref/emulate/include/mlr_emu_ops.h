/* mlr_emu_ops.h: the scalar steps of the model (mlr_emulate.h) that the CPU emulator and the GPU
 * exact kernel (gpu/exact) share: one source, compiled for both (MLR_HD), so a step cannot drift
 * between them. Each is a fixed sequence of IEEE binary32 operations, or a pmath function
 * (binary64, correctly rounded on both), so it gives the same bits on the host and the device. */
#ifndef MLR_EMU_OPS_H
#define MLR_EMU_OPS_H

#include <math.h>

#include "mlr_formats.h"
#include "mlr_pmath.h"
#include "mlr_recipe.h"
#include "mlr_sfu.h"

#define MLR_EMU_SM_SCALE   (1.0 / 24.0)         /* 1/sqrt(576); sqrt(576) = 24 exactly */
#define MLR_EMU_LOG2E_F    0x1.715476p+0f       /* fp32(log2 e) = 0x3FB8AA3B, as in Triton's PTX */
#define MLR_EMU_LN2_F      0x1.62e43p-1f        /* fp32(ln 2) = 0x3F317218 */
#define MLR_EMU_LOG2E_D    0x1.71547652b82fep+0 /* binary64 log2 e */
#define MLR_EMU_SKIP_BELOW -1e30f /* the seeds' stage 2 skips lse <= -1e30 (empty splits) */

/* the logit scale's binary64 start: sm_scale [x log2 e] (base2), sm_scale first rounded to binary32
 * under logit.scale_precision = fp32_arg (mlr_scaleprec); the caller rounds and scales on */
MLR_HD static inline double mlr__emu_logit_c0(int prec, double sm, int base2) {
  const double s = prec == MLR_SP_FP32_ARG ? (double)(float)sm : sm;
  return base2 ? s * MLR_EMU_LOG2E_D : s;
}

/* exp by mlr_expbase: e^x, 2^x, or 2^(fp32(x * fp32(log2 e))); each the binary64 pmath result
 * rounded once to binary32 */
MLR_HD static inline float mlr__emu_exp(int base, float x) {
  if (base == MLR_EXP_2) return mlr_exp2f(x);
  if (base == MLR_EXP_E_VIA_2) return mlr_exp2f(x * MLR_EMU_LOG2E_F);
  return mlr_expf(x);
}

/* the online softmax's exp (p and alpha, softmax.exp_unit): mlr__emu_exp, or the exp2 unit with
 * its table ex2 (NULL: exact); e_via_2 hands the unit fp32(x * fp32(log2 e)), as Triton's tl.exp */
MLR_HD static inline float mlr__emu_sm_exp(int base, const uint32_t *ex2, float x) {
  if (!ex2) return mlr__emu_exp(base, x);
  return mlr__sfu_ex2(ex2, base == MLR_EXP_E_VIA_2 ? x * MLR_EMU_LOG2E_F : x);
}

/* warp16's token k = 0..3 of lane j = 0..3 in the group of 16 from g0: 2j, 2j+1, 2j+8, 2j+9 (the
 * fast kernel's m16n8 fragments: two n-tiles of 8 tokens, two columns a lane) */
MLR_HD static inline int64_t mlr__emu_warp16_token(int64_t g0, int j, int k) {
  return g0 + 2 * j + (k & 1) + 8 * (k >> 1);
}

/* a block's row sum of p[0..n) in the recipe's order (softmax.sum, mlr_rowsum). warp16 is the fast
 * kernel's: tokens past n are its masked ones, p = 0 (adding +0 to a sum of p >= 0 changes no bit)
 */
MLR_HD static inline float mlr__emu_rowsum_tl32x4(const float *p, int64_t n);
MLR_HD static inline float mlr__emu_rowsum(int order, const float *p, int64_t n) {
  float ls = 0.0f;
  if (order == MLR_SUM_TL32X4) return mlr__emu_rowsum_tl32x4(p, n);
  if (order == MLR_SUM_TL4) {
    for (int64_t g0 = 0; g0 < n; g0 += 4) {
      float v[4];
      for (int k = 0; k < 4; k++) v[k] = g0 + k < n ? p[g0 + k] : 0.0f;
      ls = ls + ((v[0] + v[2]) + (v[1] + v[3]));
    }
    return ls;
  }
  if (order != MLR_SUM_WARP16) {
    for (int64_t j = 0; j < n; j++) ls = ls + p[j];
    return ls;
  }
  for (int64_t g0 = 0; g0 < n; g0 += 16) {
    float lane[4];
    for (int j = 0; j < 4; j++) {
      float v[4];
      for (int k = 0; k < 4; k++) {
        const int64_t at = mlr__emu_warp16_token(g0, j, k);
        v[k] = at < n ? p[at] : 0.0f;
      }
      lane[j] = (v[0] + v[1]) + (v[2] + v[3]);
    }
    ls = ls + ((lane[0] + lane[1]) + (lane[2] + lane[3]));
  }
  return ls;
}

/* dot.k_order = triton on fp8 KV: the index that position p of an operand row holds. Where a
 * kernel converts fp8 K or V in registers into a 2-byte dot operand, Triton 3.6 lays the operands
 * out with 4 consecutive values a thread (kWidth 4): a thread's 64-bit shared load fills the pair
 * registers of two mma.sync m16n8k16 at once, so in each 32 of the reduced index the first
 * instruction takes 4t, 4t+1 and 16+4t, 16+4t+1 (t = 0..3, its k = 2t, 2t+1 and 8+2t, 9+2t), the
 * second the same plus 2 (the PTX of AITER's grouped decode: its logits match mma.sync blocks over
 * these sets, not over 16 consecutive columns; with bf16 KV they match consecutive ones).
 * Positions 16i..16i+15 are one block of the unit. */
MLR_HD static inline int mlr__emu_k4_index(int p) {
  const int r = p & 31, j = r >> 4, i = r & 15;
  return (p & ~31) + ((i >> 3) << 4) + (((i & 7) >> 1) << 2) + 2 * j + (i & 1);
}

/* tl32x4: Triton's tl.sum over a block of 32 tokens held as an mma.sync m16n8 accumulator by 4
 * warps (the PTX of AITER's grouped decode and the seeds' kernels: BLOCK_N = 32, num_warps = 4):
 * warp w holds tokens 8w..8w+7, its lane q = 0..3 the pair 8w+2q, 8w+2q+1, which it adds; the
 * lanes combine by shfl.bfly 2 then 1, (a0 + a2) + (a1 + a3); the warps' sums, through shared
 * memory, the same way, (b0 + b2) + (b1 + b3). Tokens past n are masked: p = 0. */
MLR_HD static inline float mlr__emu_rowsum_tl32x4(const float *p, int64_t n) {
  float b[4];
  for (int w = 0; w < 4; w++) {
    float a[4];
    for (int q = 0; q < 4; q++) {
      const int64_t j = 8 * w + 2 * q;
      a[q] = (j < n ? p[j] : 0.0f) + (j + 1 < n ? p[j + 1] : 0.0f);
    }
    b[w] = (a[0] + a[2]) + (a[1] + a[3]);
  }
  return (b[0] + b[2]) + (b[1] + b[3]);
}

MLR_HD static inline float mlr__emu_log(int base, float x) {
  return base == MLR_EXP_2 ? mlr_log2f(x) : mlr_logf(x);
}

/* fma.rn.ftz.f32: subnormal inputs and results flushed to zero, sign kept */
MLR_HD static inline float mlr__emu_ftz(float x) {
  return fabsf(x) < 0x1p-126f ? copysignf(0.0f, x) : x;
}
MLR_HD static inline float mlr__emu_fma_ftz(float a, float b, float c) {
  return mlr__emu_ftz(fmaf(mlr__emu_ftz(a), mlr__emu_ftz(b), mlr__emu_ftz(c)));
}

/* ln x as CUDA's libdevice __nv_logf computes it (what Triton's tl.log links on NVIDIA), step for
 * step from the PTX Triton 3.6 emits on an H200: x = 2^i (1 + f) with 1 + f in [2/3, 4/3)
 * (subnormal x scaled by 2^23 first), a degree-9 polynomial in f by fma.rn.ftz (its coefficients
 * as the PTX spells them), then i ln 2 added by one fma. Every step is one IEEE binary32
 * operation, so this is that sequence's bits, not an approximation of it. */
MLR_HD static inline float mlr__emu_logf_cuda(float x) {
  static const uint32_t c[9] = {0xBE055027u, 0x3E1039F6u, 0xBDF8CDCCu, 0x3E0F2955u, 0xBE2AD8B9u,
                                0x3E4CED0Bu, 0xBE7FFF22u, 0x3EAAAA78u, 0xBF000000u};
  const int sub = x < 0x1p-126f;
  const float xs = sub ? x * 0x1p23f : x;
  const uint32_t b = mlr_f32_bits(xs);
  const int32_t e = (int32_t)((b - 0x3F2AAAABu) & 0xFF800000u);
  const float m = mlr_bits_f32(b - (uint32_t)e),
              i = mlr__emu_fma_ftz((float)e, 0x1p-23f, sub ? -23.0f : 0.0f);
  const float f = m - 1.0f;
  float p = mlr__emu_fma_ftz(mlr_bits_f32(c[0]), f, mlr_bits_f32(c[1]));
  for (int k = 2; k < 9; k++) p = mlr__emu_fma_ftz(p, f, mlr_bits_f32(c[k]));
  float r = mlr__emu_fma_ftz(f * p, f, f);
  r = mlr__emu_fma_ftz(i, MLR_EMU_LN2_F, r);
  if (!(b < 0x7F800000u)) r = mlr__emu_fma_ftz(xs, INFINITY, INFINITY); /* Inf, NaN, x < 0 */
  return xs == 0.0f ? -INFINITY : r;
}

/* x / y by div.unit: IEEE binary32, or the H200's div.full.f32 with the reciprocal table rcp */
MLR_HD static inline float mlr__emu_div(const uint32_t *rcp, float x, float y) {
  return rcp ? mlr__sfu_div_full(rcp, x, y) : x / y;
}

/* a running update a*alpha + b: one fused multiply-add, or a rounded product then a rounded sum */
MLR_HD static inline float mlr__emu_upd(float a, float alpha, float b, int fused) {
  return fused ? fmaf(a, alpha, b) : a * alpha + b;
}

MLR_HD static inline float mlr__emu_round_to(float x, mlr_format f) {
  return mlr_decode(f, mlr__encode_f32_rne(x, f, MLR_OVF_NONSAT));
}

/* a value converted to an operand format (mlr_operand); fp32 and fp8 keep it as it is (fp8
 * operands are the decoded codes, already exact) */
MLR_HD static inline float mlr__emu_to_operand(float x, int op) {
  if (op == MLR_OP_FP16) return mlr__emu_round_to(x, MLR_FMT_FP16);
  if (op == MLR_OP_BF16) return mlr__emu_round_to(x, MLR_FMT_BF16);
  return x;
}

/* p rounded to P's format (mlr_pfmt): nearest even; fp8 saturates (the kernels' cast of p <= 1
 * never overflows, saturation only matters for a NaN-free contract) */
MLR_HD static inline float mlr__emu_p_round(float p, int pf) {
  switch (pf) {
  case MLR_P_FP16:
    return mlr__emu_round_to(p, MLR_FMT_FP16);
  case MLR_P_BF16:
    return mlr__emu_round_to(p, MLR_FMT_BF16);
  case MLR_P_E4M3:
    return mlr_decode(MLR_FMT_E4M3, mlr__encode_f32_rne(p, MLR_FMT_E4M3, MLR_OVF_SATURATE));
  case MLR_P_E4M3FNUZ:
    return mlr_decode(MLR_FMT_E4M3FNUZ, mlr__encode_f32_rne(p, MLR_FMT_E4M3FNUZ, MLR_OVF_SATURATE));
  default:
    return p;
  }
}

/* the output code of one o value (bf16 / fp16 code; binary32 outputs are stored as they are) */
MLR_HD static inline uint16_t mlr__emu_out_code(float v, int out_format) {
  return (uint16_t)mlr__encode_f32_rne(v, out_format == MLR_OUT_FP16 ? MLR_FMT_FP16 : MLR_FMT_BF16,
                                       MLR_OVF_NONSAT);
}

/* one Q element's last steps, on its unclamped quotient x: clamped to the format's max (*clipped
 * set to 1 when the clamp changed it) and cast (nearest even): the code (mlr__emu_q_code's; the
 * fast kernel's plan checks another way of computing x through it, gpu/fast/fast_cvt.h) */
MLR_HD static inline uint8_t mlr__emu_q_code_of(float x, mlr_format f8, int *clipped) {
  const float fmax = mlr_format_max(f8);
  *clipped = fabsf(x) > fmax;
  if (*clipped) x = x > 0 ? fmax : -fmax;
  return (uint8_t)mlr__encode_f32_rne(x, f8, MLR_OVF_NONSAT);
}
/* one Q element quantized with scale s (mlr_emulate.h, "Q"): the dynamic policies use the task's
 * bf16 arithmetic (mlr_task_quant_unclamped); the static one divides in binary32, as (q / scale)
 * does for a bf16 tensor and a float32 tensor (type promotion), then clamps to the format's max
 * (*clipped set to 1 when the clamp changed it) and casts (nearest even): the code */
MLR_HD static inline uint8_t mlr__emu_q_code(uint16_t q, float s, mlr_format f8, int task_arith,
                                             int *clipped) {
  return mlr__emu_q_code_of(task_arith ? mlr_task_quant_unclamped(q, s)
                                       : mlr_bits_f32((uint32_t)q << 16) / s,
                            f8, clipped);
}
/* the same as a value */
MLR_HD static inline float mlr__emu_q_quant(uint16_t q, float s, mlr_format f8, int task_arith,
                                            int *clipped) {
  return mlr_decode(f8, mlr__emu_q_code(q, s, f8, task_arith, clipped));
}

/* one split's term under the global-max rule, weight wv = exp(x[s] - max): acc += pt * wv and
 * sum += ms * wv, fused or not (the fast kernel's k_merge runs it with weights worked out once a
 * block) */
MLR_HD static inline void mlr__emu_merge_term(float pt, float ms, float wv, int fused, float *acc,
                                              float *sum) {
  *acc = fused ? fmaf(pt, wv, *acc) : *acc + pt * wv;
  *sum = fused ? fmaf(ms, wv, *sum) : *sum + ms * wv;
}

/* one column's merge over ns splits (mlr_emulate.h, "merge"), as the GPU kernels run it (a column
 * per thread): x[s] the split's lse (normalized partials, mass NULL: 1) or its running max (raw:
 * mass[s] its sum l), part[s * stride] its partial; rule running_max, global_max or aiter (running
 * for 2-3 splits), exp in base eb, updates fused or not. Returns acc / max(sum, clamp); *M gets the
 * merged max and *sc max(sum, clamp), for the lse. */
MLR_HD static inline float mlr__emu_merge_column(const float *x, const float *mass,
                                                 const float *part, int64_t stride, int64_t ns,
                                                 int rule, int eb, int fused, float clamp, float *M,
                                                 float *sc) {
  if (rule == MLR_MERGE_AITER) rule = ns <= 3 ? MLR_MERGE_RUNNING : MLR_MERGE_GLOBAL;
  float m = -INFINITY, sum = 0.0f, acc = 0.0f;
  if (rule == MLR_MERGE_GLOBAL)
    for (int64_t s = 0; s < ns; s++)
      if (x[s] > MLR_EMU_SKIP_BELOW) m = fmaxf(m, x[s]);
  for (int64_t s = 0; s < ns; s++) {
    if (!(x[s] > MLR_EMU_SKIP_BELOW)) continue;
    const float ms = mass ? mass[s] : 1.0f, pt = part[s * stride];
    if (rule == MLR_MERGE_RUNNING) {
      const float mn = fmaxf(m, x[s]), a = mlr__emu_exp(eb, m - mn),
                  wv = mlr__emu_exp(eb, x[s] - mn);
      acc = mlr__emu_upd(acc, a, pt * wv, fused);
      sum = mlr__emu_upd(sum, a, ms * wv, fused);
      m = mn;
    } else
      mlr__emu_merge_term(pt, ms, mlr__emu_exp(eb, x[s] - m), fused, &acc, &sum);
  }
  *M = m;
  *sc = fmaxf(sum, clamp);
  return acc / *sc;
}

/* the units of the lse base: lse from the softmax's units (m + log l) to lse.base, one binary32
 * multiply when they differ */
MLR_HD static inline float mlr__emu_lse_convert(float lse, int softmax_exp, int lse_base) {
  if (softmax_exp == MLR_EXP_2 && lse_base == MLR_EXP_E) return lse * MLR_EMU_LN2_F;
  if (softmax_exp != MLR_EXP_2 && lse_base == MLR_EXP_2) return lse * MLR_EMU_LOG2E_F;
  return lse;
}

#endif
