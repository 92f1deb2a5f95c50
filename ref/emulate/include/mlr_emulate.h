/* mlr_emulate.h: the bit-accurate model of an MLA decode kernel described by a recipe
 * (docs/recipes.md; the semantics of each key are in mlr_recipe.h).
 *
 * For each query token t (of batch b, token i of n, seeing the first L_b - (n-1-i) KV tokens,
 * or all L_b when the inputs are not causal) and head h, in this order of operations:
 *   Q:      the recipe's scale policy turns q into Q values (bf16, or fp8 codes with a scale per
 *           tensor, head or token); converted to the QK operand format. Q given as fp8 codes
 *           (mlr_inputs.q8) is taken as it is, with q_scale its scale, whatever the policy.
 *   K, V:   KV codes decoded; with kv.scale_at = operand, fp32(value * k_scale) (kpe_scale on the
 *           64 rope columns) and fp32(value * v_scale), then the operand format; with folded,
 *           the operand format directly (exact), k_scale joins the logit scale and v_scale the
 *           split results (the inputs' kpe_scale must equal k_scale). v.scale_at = merged: V and
 *           the split results unscaled, o = fp32(o * v_scale) before the output rounding.
 *   logits: s = dot(Q, K) by the dot model (seq: fp32 fma chain from 0 in column order;
 *           nope_rope: columns 0..511 and 512..575 as two chains, then added; exact: rounded
 *           once), rounded to qk.result, times c = fp32(sm_scale [* log2 e]) [* q_scale]
 *           [* k_scale] (multiplied left to right in fp32; logit.scale_precision = fp64: the
 *           product in binary64, rounded once), rounded to logit.format. sm_scale is the
 *           inputs' (binary64; default 1/sqrt(576) = 1/24, as Python computes it).
 *   splits: the recipe's split rule cuts batch b's L_b tokens into splits (mlr_recipe_splits);
 *           each split runs the online softmax alone over blocks of softmax.block tokens from
 *           its start (0: one block, the whole split).
 *   block:  m' = max(m, max_j s_j); alpha = exp(m - m'); p_j = exp(s_j - m') (fp32);
 *           l = l*alpha + sum_j p_j (fp32 p; the sum in token order from 0, or with softmax.sum =
 *           warp16 the fast kernel's tree, mlr_recipe.h);
 *           PV dot of P (p rounded to p.format, then the PV operand format) with V, over the
 *           block's tokens in order, from 0 (pv.accumulate = block; then acc = acc*alpha + dot)
 *           or from acc*alpha (into_acc). update.fma fuses the updates. exp is the recipe's:
 *           e^x, 2^x (log2 e folded into c) or 2^(fp32(x * fp32(log2 e))) (e_via_2), each the
 *           binary64 pmath result rounded to binary32; with softmax.exp_unit = sm90-ex2, alpha's
 *           and p's 2^x are the H200's ex2.approx.f32 (ref/sfu; the merge's exps stay pmath's).
 *   split result: normalized: part = acc / max(l, clamp) [* v_scale]; raw: part = acc
 *           [* v_scale]; lse = m + log(max(l, clamp)) in the softmax's units, converted to
 *           lse.base by one fp32 multiply (by log2 e or ln 2) when they differ.
 *   merge:  splits in order; a split with lse <= -1e30 (raw: m <= -1e30) is skipped (an empty
 *           split). running_max: M' = max(M, x_s), a = exp(M - M'), w = exp(x_s - M'),
 *           acc = acc*a + part*w, sum = sum*a + mass*w; global_max: M = max x_s first, then
 *           acc += part*w, sum += mass*w; aiter: running for 2-3 splits, global for 4 or more.
 *           x_s = lse_s and mass = 1 (normalized) or x_s = m_s and mass = l_s (raw); exp in the
 *           lse base. o = acc / max(sum, clamp). A batch with one normalized split skips the merge
 *           (its result is bit-identical to merging one split: w = exp(0) = 1); raw partials
 *           always go through the merge, the only place they are divided by l.
 *   output: o rounded to out.format (nearest even; overflow to Inf); lse (fp32) is the split's,
 *           or M + log(max(sum, clamp)) after a merge.
 * Work is spread over (batch, split) with OpenMP; the heads of a query token are computed
 * together (they share each KV row), each element in the order above, so the bits do not depend
 * on the thread count. */
#ifndef MLR_EMULATE_H
#define MLR_EMULATE_H

#include <stdint.h>

#include "mlr_base.h"
#include "mlr_inputs_view.h"
#include "mlr_recipe.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MLR_EMU_QK_DIM = 576, MLR_EMU_V_DIM = 512, MLR_EMU_NOPE = 512 };

/* Deliberate bugs, for the discrimination test (tests/discriminate.c): a check must fail each. */
typedef enum mlr_emu_fault {
  MLR_FAULT_NONE = 0,
  MLR_FAULT_DROP_ROPE,        /* the logits leave out the rope columns 512..575 */
  MLR_FAULT_SM_SCALE_512,     /* sm_scale = 1/sqrt(512) */
  MLR_FAULT_KV_SCALE_TWICE,   /* kv_scale applied twice */
  MLR_FAULT_KV_SCALE_NONE,    /* kv_scale not applied */
  MLR_FAULT_SKIP_LAST,        /* the last token of each split skipped */
  MLR_FAULT_LSE_LOG2,         /* split lse in log2 where the merge expects ln (or the reverse) */
  MLR_FAULT_P_UNNORMALIZED,   /* acc not divided by l */
  MLR_FAULT_MERGE_NO_RESCALE, /* the merge keeps a running max but never rescales acc and sum
                                 by exp(M - M') when it grows */
  MLR_FAULT_SKIP_FIRST,       /* each batch's first KV token skipped */
  MLR_FAULT_DROP_LAST,        /* each batch's last KV token never read (a loop bound off by
                                 one: the queries that see every token see one fewer) */
  MLR_FAULT_DROP_LAST_B0,     /* the same in batch 0 only */
  MLR_FAULT_CAUSAL_SHIFT,     /* the causal mask one token late: query i sees one token more */
  MLR_FAULT_SPLIT_EDGE_TWICE, /* a split's end inclusive: its last token also read by the next */
  MLR_FAULT_MERGE_DROP_LAST   /* the merge leaves out the last split */
} mlr_emu_fault;

typedef struct mlr_emu_opts {
  int threads;  /* OpenMP threads; 0: the OpenMP default */
  int partials; /* also return the per-split partials */
  int fault;    /* mlr_emu_fault; 0 for the model itself */
  int no_x2;    /* 1: exact dots never in two binary64 chains (the 128-bit fixed point or the long
                 * accumulator instead: the same bits, slower; tests take every path with it) */
} mlr_emu_opts;

typedef struct mlr_emu_result {
  int64_t T, H, B, S;   /* query tokens, heads, batches, most splits of any batch */
  int out_format;       /* the recipe's mlr_outfmt */
  void *o;              /* [T, H, 512]: bf16 / fp16 codes (uint16_t) or binary32 (float) */
  float *lse;           /* [T, H], in lse.base */
  float *lse_out;       /* [T, H], in out.lse_base as the kernel returns it (lse converted by one
                         * multiply, or the recipe's own formula: softmax.schedule = seesaw) */
  int32_t *split_count; /* [B] splits of each batch */
  int32_t *split_len;   /* [B] tokens per split (the last ones may be shorter or empty) */
  /* with opts.partials (else NULL): [T, H, S, 512] and [T, H, S]; slots s >= split_count[b]
   * hold NaN. part_max / part_sum are the split's running max m and sum l. */
  float *part_o, *part_lse, *part_max, *part_sum;
  /* Q quantization: scales used ([n_q_scales]: 1, H or T of them; none for bf16 Q) and the
   * number of elements the clamp to the format's max changed */
  float *q_scales;
  int64_t n_q_scales, q_clipped;
} mlr_emu_result;

/** Run the model. The inputs must have passed mlr_inputs_check (shapes and indices are trusted;
 *  non-finite values flow through the arithmetic). MLR_EINVAL with err naming the problem for a
 *  recipe that fails mlr_recipe_check or does not fit the inputs (fp8 operands with bf16 KV, Q
 *  heads other than 16 are fine), MLR_ENOMEM, MLR_ERANGE when sizes overflow. */
mlr_status mlr_emulate(const mlr_recipe *r, const mlr_inputs *in, const mlr_emu_opts *opts,
                       mlr_emu_result *res, mlr_error *err);

void mlr_emu_result_free(mlr_emu_result *res);

/** Whether a recipe can run on the inputs (mlr_recipe_check, a KV format the model knows, no fp8
 *  operands on bf16 KV, at least one token and head): MLR_OK, else MLR_EINVAL with the reason.
 *  mlr_emulate's first step; the GPU exact kernel checks the same. */
mlr_status mlr_emu_check_fit(const mlr_recipe *r, const mlr_inputs *in, mlr_error *err);

/** Each batch's splits as mlr_emulate plans them (mlr_recipe_split_plan on the inputs' lengths;
 *  the rows a KV head serves are the largest q_len x heads, FlashMLA's one q_len): ns, first, len
 *  [B] each. MLR_OK or MLR_ENOMEM. */
mlr_status mlr_emu_split_plan(const mlr_recipe *r, const mlr_inputs *in, int64_t *ns,
                              int64_t *first, int64_t *len);

/** Bytes of res->o: T x H x 512 elements of the output format (2 bytes, 4 for binary32). */
static inline size_t mlr_emu_o_bytes(const mlr_emu_result *res) {
  return (size_t)(res->T * res->H * MLR_EMU_V_DIM) * (res->out_format == MLR_OUT_FP32 ? 4 : 2);
}

/** The recipe's Q scale policy alone (the "Q" step above): q bf16 [T, H, 576] -> qval [T*H*576]
 *  the Q values the kernel multiplies (bf16 values, or decoded fp8 codes) and qs [T*H] the scale of
 *  each (token, head) (1 for bf16 Q); *scales (malloc'd, *nscales of them) the distinct scales and
 *  *clipped the elements the clamp changed. Shared with ref/budget. MLR_ENOMEM. */
mlr_status mlr_emu_q_values(const mlr_recipe *r, const mlr_inputs *in, float *qval, float *qs,
                            float **scales, int64_t *nscales, int64_t *clipped);

/** The model's binary32 exp functions, by mlr_expbase (exposed for tests and the GPU kernel). */
float mlr_emu_exp(int base, float x);

#ifdef __cplusplus
}
#endif
#endif
