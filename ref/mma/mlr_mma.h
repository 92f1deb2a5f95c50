/* mlr_mma.h: models of matrix units (tensor cores, MFMA): the bits of one block fused multiply-add
 * D = sum of n products a_i * b_i (+ C), as the hardware computes it, which is not IEEE.
 *
 * The parameterised model (every instance below is a setting of these):
 *   1. products are exact; the exponent of a product is e(a) + e(b), e(x) = floor(log2 |x|) of the
 *      input (the significands' product, in [1, 4), is not renormalised);
 *   2. the block's alignment exponent E is the largest such exponent over the nonzero products and
 *      e(C) (C joins the block as one more term);
 *   3. every term is cut to a multiple of 2^(E - frac_bits), toward zero (its magnitude truncated);
 *   4. the cut terms are summed exactly;
 *   5. result_bits > 0: the sum truncated (toward zero) to that many significant bits;
 *   6. the value rounded to binary32 (out_round: toward zero, nearest even, or down).
 * NaN or Inf among the operands: the IEEE result of the plain sum (not measured).
 *
 * Instances: Hopper (sm_90) mma.sync/wgmma with e4m3 operands, and with bf16 or fp16 operands,
 * fitted to and checked against the 5000 vectors of each measured on an H200 by Khattak and
 * Mikaitis (tests/data/mma/, tests/mma.c): every one comes out bit-identical. What the vectors do
 * not pin down: for e4m3 the measured D are A.B alone (the listed C is not in them), so how C joins
 * an fp8 block is this model's choice (as for bf16: a term of the alignment; the 14-bit block result
 * then bounds the accumulator too, DeepSeek-V3's "around 14 bits"); subnormal fp8 inputs take their
 * true exponent (3373 of the e4m3 operands are subnormal, all reproduced). AMD CDNA3 fp8 MFMA from
 * MMA-Sim's published description (NUMERICS.md section 5), not measured here: `verified` is 0; its
 * even/odd split with rounding down is not modelled (no AMD hardware to settle it). */
#ifndef MLR_MMA_H
#define MLR_MMA_H

#include "../base/mlr_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MLR_MMA_RZ = 0, MLR_MMA_RNE = 1, MLR_MMA_RD = 2 } mlr_mma_round;

typedef enum {
  MLR_MMA_SM90_E4M3 = 0, /* mma.sync m16n8k32 / wgmma, e4m3 or e5m2 operands, fp32 accumulator */
  MLR_MMA_SM90_BF16,     /* mma.sync m16n8k16 / wgmma, bf16 operands */
  MLR_MMA_SM90_F16,      /* mma.sync m16n8k16 / wgmma, fp16 operands */
  MLR_MMA_CDNA3_FP8,     /* MI300 v_mfma_f32_*_fp8 (unverified) */
  MLR_MMA_UNITS
} mlr_mma_unit;

typedef struct mlr_mma_model {
  const char *name;   /* "sm90-e4m3", ... (the recipe dot model's suffix) */
  int block;          /* products per block */
  int frac_bits;      /* fraction bits kept below 2^E (step 3) */
  int result_bits;    /* step 5; 0: none */
  int out_round;      /* mlr_mma_round, step 6 */
  int verified;       /* reproduces hardware measurements (tests/mma.c) */
  int sub_emin;       /* step 1 for inputs subnormal in their format: 0, their true exponent;
                         else this exponent (the format's least normal one: the exponent field's) */
} mlr_mma_model;

/** The model of a unit, or NULL for an unknown one. */
const mlr_mma_model *mlr_mma_get(mlr_mma_unit u);
/** The model by name ("sm90-e4m3", "sm90-bf16", "sm90-f16", "cdna3-fp8"), or NULL. */
const mlr_mma_model *mlr_mma_find(const char *name);

/** One block: D = the unit's sum of a[i] * b[i] for i < n (n <= m->block) and c. The operands are
 *  values of the unit's input format held in binary32 (exact); c is the fp32 accumulator. */
float mlr_mma_block(const mlr_mma_model *m, const float *a, const float *b, int n, float c);

/** A K-long inner product as the unit runs it: blocks of m->block products in order, each block's
 *  D the next block's C, starting from c. */
float mlr_mma_dot(const mlr_mma_model *m, const float *a, const float *b, int64_t k, float c);

#ifdef __cplusplus
}
#endif
#endif
