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
 * Mikaitis (tests/data/mma/, tests/mma.c): every one comes out bit-identical. Those e4m3 D are A.B
 * alone (the listed C is not in them); the own wgmma probe (gpu/probes/wgmma_probe.cu: QGMMA, the
 * fp8 unit) settled the rest: C is a term of the block's alignment, and a subnormal fp8 input takes
 * its format's least normal exponent (e4m3 -6, e5m2 -14: `sm90-e5m2`), which the published vectors
 * (C = 0) do not tell from its true one. mma.sync m16n8k32 with e4m3
 * operands is another matter on sm_90: ptxas lowers it (SASS read on the H200) to
 * F2FP.F16.E4M3.UNPACK_B (exact: every e4m3 value is an fp16 one) and two HMMA.16816.F32, the first
 * over the low byte pair of each operand register (k with (k & 3) < 2) from a zero accumulator, the
 * second over the high pair from the first's result, then FADD C: `sm90-e4m3-sync` (lowered = 1),
 * bit-identical on every e4m3 and e5m2 vector mma_probe ran (tests/data/mma/h200_probe_e4m3.txt,
 * _e5m2.txt).
 *
 * AMD CDNA3 (MI300) MFMA, from MMA-Sim's published description (Xie et al., arXiv 2511.10909, and
 * its simulator, github.com/microsoft/MMA-Sim, mmasim/simulator/amd.py and functions.py, read as a
 * description): not measured on hardware here, `verified` is 0; the bf16 unit agrees bit for bit
 * with MMA-Sim itself run on random and targeted blocks (scripts/mmasim_vectors.py, `mlaref mma
 * check`; docs/numerics.md has the counts), the fp8 one awaits a torch with float8 dtypes to run
 * MMA-Sim's fp8 path. These units work in two
 * stages (two_stage > 0) instead of steps 2-6:
 *   a. the products alone (C apart) are aligned to their largest exponent E_p and cut toward zero
 *      to multiples of 2^(E_p - frac_bits) (24), and summed exactly; fp8 (two_stage = 2): the even-
 *      and odd-indexed products so, separately (E_0, E_1), then each sum rounded down (toward -Inf)
 *      to a multiple of 2^(max(E_0, E_1) - 24) and the two added: E_p = max(E_0, E_1);
 *   b. M = max(E_p, e(C)) (C's exponent floor(log2 |C|), at least -126); the products' sum rounded
 *      down to a multiple of 2^(M - 31), C rounded down to one of 2^(M - 24) (fp8: C dropped when
 *      e(C) < M - 25); the two added exactly and rounded to binary32, nearest even;
 *   c. a product of 2^128 or more in magnitude: +-Inf (NaN with both signs); NaN or Inf operands:
 *      the IEEE sum, as for every unit here.
 * Blocks: 8 products for bf16 (cdna3-bf16: a k = 16 instruction is two blocks in order, the first's
 * D the second's C), 16 for fp8 (cdna3-fp8); a subnormal input at its format's least normal
 * exponent (bf16 -126; e4m3fnuz -7). The rounding down makes the unit's error asymmetric (MMA-Sim's
 * point). */
#ifndef MLR_MMA_H
#define MLR_MMA_H

#include <math.h>

#include "mlr_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MLR_MMA_RZ = 0, MLR_MMA_RNE = 1, MLR_MMA_RD = 2 } mlr_mma_round;

typedef enum {
  MLR_MMA_SM90_E4M3 = 0,  /* the published e4m3 vectors' unit (most likely wgmma; not mma.sync:
                             below), fp32 accumulator */
  MLR_MMA_SM90_BF16,      /* mma.sync m16n8k16, bf16 operands (wgmma's differs where C is
                             subnormal, docs/numerics.md) */
  MLR_MMA_SM90_F16,       /* mma.sync m16n8k16 and wgmma m64n8k16 (B K- or MN-major), fp16 */
  MLR_MMA_CDNA3_FP8,      /* MI300 v_mfma_f32_*_fp8 (agrees with MMA-Sim; not on hardware) */
  MLR_MMA_SM90_E4M3_SYNC, /* mma.sync m16n8k32 e4m3 or e5m2 as sm_90 runs it: two fp16 HMMAs
                             (lowered) */
  MLR_MMA_CDNA3_BF16,     /* MI300 v_mfma_f32_*_bf16 (agrees with MMA-Sim; not on hardware) */
  MLR_MMA_SM90_E5M2, /* wgmma m64nNk32 with e5m2 operands (sm90-e4m3's unit; e5m2's least normal
                        exponent) */
  MLR_MMA_UNITS
} mlr_mma_unit;

typedef struct mlr_mma_model {
  const char *name; /* "sm90-e4m3", ... (the recipe dot model's suffix) */
  int block;        /* products per block */
  int frac_bits;    /* fraction bits kept below 2^E (step 3) */
  int result_bits;  /* step 5; 0: none */
  int out_round;    /* mlr_mma_round, step 6 */
  int verified;     /* reproduces hardware measurements (tests/mma.c) */
  int sub_emin;     /* step 1 for inputs subnormal in their format: 0, their true exponent;
                       else this exponent (the format's least normal one: the exponent field's) */
  int lowered;      /* 1: the instruction is not a unit of its own but two blocks of the fp16 unit
                       (MLR_MMA_SM90_F16): the block's products with (i & 3) < 2 summed from 0, the
                       others from that result, then C + it rounded to binary32 (nearest even) */
  int two_stage;    /* 0: steps 2-6; 1: CDNA3's stages a-c; 2: the same with fp8's even/odd split */
} mlr_mma_model;

enum {
  MLR_MMA_CDNA3_SUM_BITS = 31,
  MLR_MMA_CDNA3_C_BITS = 24,
  MLR_MMA_CDNA3_C_DROP = 25
}; /* stage b */

/** The model of a unit, or NULL for an unknown one. */
const mlr_mma_model *mlr_mma_get(mlr_mma_unit u);
/** The model by name ("sm90-e4m3", "sm90-bf16", "sm90-f16", "cdna3-fp8", "sm90-e4m3-sync",
 * "cdna3-bf16", "sm90-e5m2"), or NULL. */
const mlr_mma_model *mlr_mma_find(const char *name);

/** One block: D = the unit's sum of a[i] * b[i] for i < n (n <= m->block) and c. The operands are
 *  values of the unit's input format held in binary32 (exact); c is the fp32 accumulator. */
float mlr_mma_block(const mlr_mma_model *m, const float *a, const float *b, int n, float c);

/** A lowered unit's block (n <= 64 products) as its two fp16 blocks: the operands of the products
 *  with (i & 3) < 2 into lo[0] (a) and lo[1] (b), *nl of them, the others into hi, *nh. */
void mlr_mma_lowered_split(const float *a, const float *b, int n, float lo[2][32], float hi[2][32],
                           int *nl, int *nh);

/** A K-long inner product as the unit runs it: blocks of m->block products in order, each block's
 *  D the next block's C, starting from c. */
float mlr_mma_dot(const mlr_mma_model *m, const float *a, const float *b, int64_t k, float c);

/* ---- the same block in binary64, for loops that run many blocks side by side (ref/emulate) ----
 * Every term (C, and each product a b, exact in binary64: at most 48 significant bits) times
 * 2^(F - E) is exact (a power of two, far from binary64's range limits: |a b| >= 2^-298 and
 * E <= 258), and trunc() of it is step 3's cut; the cut terms are integers below 2^(F + 2) (a
 * product is below 2^(E + 2)), so up to 64 of them sum exactly in binary64 in any order. The
 * block's E is the largest mlr_mma_in_exp(a) + mlr_mma_in_exp(b) and mlr_mma_c_exp(C), which
 * also sorts out the other cases: a zero term's exponent (MLR_MMA_EZERO) never wins, so a block
 * of zeros has E <= MLR_MMA_EZERO / 2 and D = +0; a NaN or Inf anywhere gives E >=
 * MLR_MMA_ENONFIN / 2, and then D is the model's IEEE sum, C + a_0 b_0 + ... in binary64 in order,
 * rounded to binary32. mlr_mma_finish does steps 5 and 6 on the sum. tests/mma.c checks this form
 * against mlr_mma_block on every measured vector and on random blocks. */
#define MLR_MMA_EZERO   (-100000) /* the exponent of a zero */
#define MLR_MMA_ENONFIN (1000000) /* of a NaN or Inf: wins over anything, zeros included */

static inline int mlr__mma_exp(uint32_t b) { /* b: |x|'s bits; subnormal: (63 - clz) - 149 */
  if (!b) return MLR_MMA_EZERO;
  if (b >= 0x7F800000u) return MLR_MMA_ENONFIN;
  return b >= 0x00800000u ? (int)(b >> 23) - 127 : -86 - MLR__CLZ64((uint64_t)b);
}

/** step 1's exponent of an input x (the unit's: a subnormal one raised to sub_emin) */
static inline int mlr_mma_in_exp(const mlr_mma_model *m, float x) {
  const int e = mlr__mma_exp(mlr_f32_bits(x) & 0x7FFFFFFFu);
  return m->sub_emin && e > MLR_MMA_EZERO && e < m->sub_emin ? m->sub_emin : e;
}

/** the exponent of the accumulator C (its true floor(log2 |C|)) */
static inline int mlr_mma_c_exp(float c) { return mlr__mma_exp(mlr_f32_bits(c) & 0x7FFFFFFFu); }

/** 2^k for -1022 <= k <= 1023, built from its bits (no libm call in the loops) */
static inline double mlr__mma_pow2(int k) { return mlr_bits_f64((uint64_t)(k + 1023) << 52); }

/** steps 5 and 6: S 2^(E - frac_bits), S the exact sum of the cut terms (an integer, |S| < 2^53).
 *  Step 5 clears S's significand below its top result_bits bits (toward zero, exactly). Step 6:
 *  v = S 2^(E - F) is exact; binary32's conversion rounds it to nearest even, and one step of
 *  its last bit toward zero (RZ) or down (RD) corrects that where it went the other way; a value
 *  of 2^128 or more is +-Inf in every mode, as the model has it (measured on the H200). */
static inline float mlr_mma_finish(const mlr_mma_model *m, double S, int E) {
  /* written without branches on the data, so loops over many blocks vectorise */
  const uint64_t keep = m->result_bits > 0 ? ~((1ull << (53 - m->result_bits)) - 1) : ~0ull;
  const double St = mlr_bits_f64(mlr_f64_bits(S) & keep);
  const double v = St * mlr__mma_pow2(E - m->frac_bits), av = fabs(v);
  const float f = (float)v;
  const uint32_t fb = mlr_f32_bits(f);
  uint32_t r = fb;
  if (m->out_round == MLR_MMA_RZ)
    r = fb - (fabs((double)f) > av);
  else if (m->out_round == MLR_MMA_RD)
    r = (double)f > v ? (v < 0 ? fb + 1 : fb - 1) : fb;
  r = av >= 0x1p128 ? (v < 0 ? 0xFF800000u : 0x7F800000u) : r;
  return S == 0.0 ? 0.0f : mlr_bits_f32(r);
}

#ifdef __cplusplus
}
#endif
#endif
