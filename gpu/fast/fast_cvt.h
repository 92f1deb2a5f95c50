/* fast_cvt.h: the fast kernel's conversions by hardware instructions (NVIDIA sm_90:
 * cvt.rn.f16x2.f32, cvt.rn.bf16x2.f32, cvt.rn.satfinite.e4m3x2.f32, cvt.rn.f16x2.e4m3x2,
 * cvt.rn.satfinite.e4m3x2.f16x2) in place of the generic encoders, each the encoder's result bit
 * for bit on the inputs it is given, and the static Q quantization by a reciprocal with its
 * host-side exhaustive check (mlr__q_recip_fits, run by the plan). gpu/probes/cvt_probe.cu includes
 * this header and checks every function against the encoders exhaustively on the GPU
 * (scripts/gpu_run.sh, step fast): a change here is a change there. CUDA only. */
#ifndef MLR_GPU_FAST_CVT_H
#define MLR_GPU_FAST_CVT_H

#include <stdint.h>

#include "mlr_emu_ops.h"

/* two fp32 values as fp16x2, lo in bits 0..15: round to nearest even with subnormals, overflow to
 * Inf (mlr__emu_round_to(.., fp16), mlr__emu_p_round's fp16) */
__device__ __forceinline__ uint32_t mlr__f16x2(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

/* bf16x2 (lo in bits 0..15) as fp16x2, each as mlr__emu_to_operand(.., fp16) (a bf16 value is exact
 * in fp32; a NaN stays a NaN) */
__device__ __forceinline__ uint32_t mlr__bf16x2_f16x2(uint32_t x) {
  return mlr__f16x2(mlr_bits_f32(x << 16), mlr_bits_f32(x & 0xFFFF0000u));
}

/* two values as the output's bf16 codes (lo in bits 0..15), mlr__emu_out_code's: cvt.rn.bf16x2.f32
 * rounds to nearest even with subnormals and overflows to Inf, as the encoder; its NaN is 0x7FFF,
 * the encoder's 0x7FC0 with the sign, so a NaN takes the encoder */
__device__ __forceinline__ uint32_t mlr__out_bf16x2(float lo, float hi) {
  if (isnan(lo) || isnan(hi))
    return mlr__emu_out_code(lo, MLR_OUT_BF16) | (uint32_t)mlr__emu_out_code(hi, MLR_OUT_BF16)
                                                     << 16;
  uint32_t d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

/* q / s by r = 1 / s rounded: y = q r, then the residual q - s y (exact: one fma) times r added
 * back (the correction step of Markstein's fma division): 3 operations a value against the IEEE
 * division's sequence (a reciprocal refined by fmas, then a special-case test and branch). No
 * theorem is relied on: the plan takes it only for a scale whose every bf16 code gives the
 * division's e4m3 code and clamp (mlr__q_recip_fits). An infinite y (q infinite, or q r
 * overflowing) is returned as it is (the residual would be NaN); a NaN q gives a NaN. */
__host__ __device__ __forceinline__ float mlr__q_div_recip(float q, float s, float r) {
  /* the residual as -(s y - q), so that a zero keeps its sign (fmaf(-s, y, q) is +0 for q = -0) */
  const float y = q * r, v = fmaf(-fmaf(s, y, -q), r, y);
  return isinf(y) ? y : v;
}
/* 1 when mlr__q_div_recip(q, s, r) with r = fp32(1 / s) clamps and rounds to mlr__emu_q_code(q, s,
 * E4M3, 0, ..)'s code and clamp on all 2^16 bf16 codes q (so on every Q the static policy can be
 * given), else 0 (k_qprep divides instead); *r: that r. Both quotients go through the model's own
 * clamp and cast (mlr__emu_q_code_of), so only the quotient differs; the kernel's clamp and cast
 * by cvt.rn.satfinite is checked against them by gpu/probes/cvt_probe.cu. */
static inline int mlr__q_recip_fits(float s, float *r) {
  *r = 1.0f / s;
  if (!(s > 0.0f) || isinf(s) || isinf(*r) || *r == 0.0f) return 0;
  for (uint32_t c = 0; c < 0x10000u; c++) {
    int cl_div = 0, cl = 0;
    const uint8_t want = mlr__emu_q_code((uint16_t)c, s, MLR_FMT_E4M3, 0, &cl_div);
    const uint8_t got =
        mlr__emu_q_code_of(mlr__q_div_recip(mlr_bits_f32(c << 16), s, *r), MLR_FMT_E4M3, &cl);
    if (cl != cl_div ||
        (got != want && !(mlr_is_nan(MLR_FMT_E4M3, got) && mlr_is_nan(MLR_FMT_E4M3, want))))
      return 0;
  }
  return 1;
}

/* two bf16 Q codes (lo in bits 0..15) quantized with the static scale s to e4m3 as
 * mlr__emu_q_code(.., s, E4M3, 0, ..) (q / s in binary32, clamped to +-448, nearest even): their
 * e4m3 codes (lo in bits 0..7); *clipped += the values the clamp changed. q / s is
 * mlr__q_div_recip with r, so s must be a scale for which mlr__q_recip_fits(s, &r) holds. After
 * the clamp the saturating conversion never saturates; a NaN gives e4m3's NaN (the encoder's NaN
 * may differ in sign: the unit's result is its canonical NaN either way) */
__device__ __forceinline__ uint32_t mlr__q_static_e4m3x2_codes(uint32_t x, float s, float r,
                                                               int *clipped) {
  float v[2] = {mlr__q_div_recip(mlr_bits_f32(x << 16), s, r),
                mlr__q_div_recip(mlr_bits_f32(x & 0xFFFF0000u), s, r)};
  for (int k = 0; k < 2; k++)
    if (fabsf(v[k]) > 448.0f) v[k] = v[k] > 0 ? 448.0f : -448.0f, ++*clipped;
  uint16_t c;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(c) : "f"(v[1]), "f"(v[0]));
  return c;
}
/* the same as the fp16 operand codes of the e4m3 values (exact; a NaN an fp16 NaN) */
__device__ __forceinline__ uint32_t mlr__q_static_e4m3x2(uint32_t x, float s, float r,
                                                         int *clipped) {
  const uint16_t c = (uint16_t)mlr__q_static_e4m3x2_codes(x, s, r, clipped);
  uint32_t h;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h) : "h"(c));
  return h;
}

/* two fp16 codes of e4m3 values (lo in bits 0..15) as their e4m3 codes (lo in bits 0..7; the wgmma
 * recipe's Q operands): exact, an e4m3 value being an fp16 value; a NaN stays a NaN */
__device__ __forceinline__ uint32_t mlr__f16x2_e4m3x2(uint32_t x) {
  uint16_t d;
  asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;\n" : "=h"(d) : "r"(x));
  return d;
}

#endif
