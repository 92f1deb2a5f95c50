/* mlr_recipe.h: the numerics contract of a kernel (docs/recipes.md): every choice that
 * decides its output bits, as a struct, a text form and a canonical string with a SHA-256 hash.
 *
 * Text form: one `key = value` per line; '#' starts a comment; blank lines are ignored; keys may
 * come in any order and each at most once; keys not given keep the value of the base recipe
 * (`base = NAME` on the first line, default fp32-seq). Errors name file:line:column and list
 * the valid values. The canonical string lists every numerics key in the fixed order of the key
 * table, `key=value` joined by ';' (the keys added later, key.later in recipe.c, only when not at
 * their default, so the recipes hashed before them keep their hashes); the recipe's name is not
 * part of it, so the hash identifies the numerics, not the label.
 */
#ifndef MLR_RECIPE_H
#define MLR_RECIPE_H

#include <stddef.h>
#include <stdint.h>

#include "mlr_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MLR_Q_BF16, MLR_Q_E4M3, MLR_Q_E4M3FNUZ } mlr_qfmt; /* Q's format */
typedef enum {
  MLR_QS_NONE,
  MLR_QS_STATIC,
  MLR_QS_DYNAMIC,
  MLR_QS_PER_HEAD,
  MLR_QS_PER_TOKEN
} mlr_qscale;
/* kv.scale_at: k_scale (kpe_scale on the 64 rope columns) and v_scale go into the K and V
 * operands, or k_scale is folded into the logit scale and v_scale into each split's result */
typedef enum { MLR_KVS_OPERAND, MLR_KVS_FOLDED } mlr_kvscale_at;
/* v.scale_at: as kv.scale_at says, or once on the merged output (SGLang applies v_scale after
 * the merge; V operands and split results are then unscaled) */
typedef enum { MLR_VS_AS_KV, MLR_VS_MERGED } mlr_vscale_at;
/* logit.scale_precision: c = fp32(sm_scale [* log2 e]), then * q_scale, * k_scale in fp32 left to
 * right (fp32); or the whole product in binary64, rounded once to fp32 (fp64: a scale a host
 * computes in Python and passes as a float, as SGLang does); or as fp32 with sm_scale first
 * rounded to binary32 (fp32_arg: a kernel that takes sm_scale as a float argument and forms
 * float(sm_scale * M_LOG2E) in double, as FlashMLA does) */
typedef enum { MLR_SP_FP32, MLR_SP_FP64, MLR_SP_FP32_ARG } mlr_scaleprec;
typedef enum {
  MLR_OP_FP32,
  MLR_OP_FP16,
  MLR_OP_BF16,
  MLR_OP_FP8
} mlr_operand; /* fp8: the input's own */
/* accumulation model. mma:UNIT: a matrix unit (ref/mma, mlr_mma_unit in the same order from
 * MLR_DOT_MMA_SM90_E4M3): blocks of the unit's size along the summed dimension in order, each
 * block's D the next block's C (the fragments of mma.sync / wgmma / MFMA as a kernel steps k) */
typedef enum {
  MLR_DOT_SEQ,
  MLR_DOT_NOPE_ROPE,
  MLR_DOT_EXACT,
  MLR_DOT_MMA_SM90_E4M3,
  MLR_DOT_MMA_SM90_BF16,
  MLR_DOT_MMA_SM90_F16,
  MLR_DOT_MMA_CDNA3_FP8,
  MLR_DOT_MMA_SM90_E4M3_SYNC,
  MLR_DOT_MMA_CDNA3_BF16,
  MLR_DOT_AITER_LANES8 /* AITER's per-head Triton stage (ref/emulate/lanes8.h): bf16 lane chains
                        * for QK (its fp8-KV or bf16-KV build), its 4-token block order for PV */
} mlr_dot;
#define MLR_DOT_IS_MMA(d)   ((d) >= MLR_DOT_MMA_SM90_E4M3 && (d) <= MLR_DOT_MMA_CDNA3_BF16)
#define MLR_DOT_MMA_UNIT(d) ((d)-MLR_DOT_MMA_SM90_E4M3) /* its mlr_mma_unit */
typedef enum { MLR_R_FP32, MLR_R_BF16 } mlr_rfmt;       /* a rounded intermediate */
typedef enum {
  MLR_EXP_E,
  MLR_EXP_2,
  MLR_EXP_E_VIA_2
} mlr_expbase; /* e_via_2: e^x as 2^(x*log2e), an exp only */
/* how the online softmax's exps (p and alpha) are computed: correctly rounded, or by a hardware
 * unit (ref/sfu: sm90-ex2 is Hopper's ex2.approx.f32, for softmax.exp = 2 or e_via_2) */
typedef enum { MLR_EXPU_EXACT, MLR_EXPU_SM90_EX2 } mlr_expunit;
/* the order of a block's row sum of p: in token order (seq), or the fast kernel's tree (warp16:
 * groups of 16 tokens, one a warp; in a group the four lanes j = 0..3 each add
 * (p[2j] + p[2j+1]) + (p[2j+8] + p[2j+9]), then (l0 + l1) + (l2 + l3); the groups in order), or
 * Triton's tl.sum over a 32-token mma.sync tile of 4 warps (tl32x4: mlr__emu_rowsum_tl32x4) */
/* lanes4: FlashAttention-2's per-thread sums (FlashMLA): four lanes hold a row, lane q the tokens
 * with (j mod 8) / 2 = q of every block in token order; each lane keeps its own sum across blocks
 * (fma(alpha, l_q, its first p), then adds in order) and the lanes combine once, after the last
 * block, as (l0 + l2) + (l1 + l3) */
/* tl4: tl.sum over a block of 4 tokens held by 8 lanes each (AITER's per-head stage): (p0 + p2) +
 * (p1 + p3), blocks of 4 added in order */
typedef enum {
  MLR_SUM_SEQ,
  MLR_SUM_WARP16,
  MLR_SUM_TL32X4,
  MLR_SUM_LANES4,
  MLR_SUM_TL4
} mlr_rowsum;
typedef enum { MLR_PV_BLOCK, MLR_PV_INTO_ACC } mlr_pvacc;
typedef enum { MLR_P_FP32, MLR_P_FP16, MLR_P_BF16, MLR_P_E4M3, MLR_P_E4M3FNUZ } mlr_pfmt;
typedef enum {
  MLR_SPLIT_NONE,
  MLR_SPLIT_FIXED,
  MLR_SPLIT_AITER_V1,
  MLR_SPLIT_WAVES,
  MLR_SPLIT_FLASHMLA /* FlashMLA's tile scheduler over every batch: mlr_recipe_split_plan */
} mlr_split;
/* what the waves rule counts as a split's blocks: one a batch (AITER's grid), one a query token
 * (the fast kernel's grid: tokens x splits), or a batch's rows in groups of split.heads
 * (k_attn_rows' grid; without split.heads one a batch) */
typedef enum { MLR_SPLIT_PER_BATCH, MLR_SPLIT_PER_TOKEN, MLR_SPLIT_PER_ROWS } mlr_splitper;
/* flashmla: FlashMLA's combine: M the largest split lse (0 if none is finite), w_s =
 * exp(lse_s - M) summed over a warp (lane i takes splits i, i + 32, ... in order, then xor
 * butterflies at 16, 8, 4, 2, 1), lse = fma(log2(sum), fp32(ln 2), M) or M + log(sum), o = the fma
 * chain of exp(lse_s - lse) o_s over the splits in order from 0, no division */
typedef enum { MLR_MERGE_RUNNING, MLR_MERGE_GLOBAL, MLR_MERGE_AITER, MLR_MERGE_FLASHMLA } mlr_merge;
/* how the partials' and the merge's divisions are computed (div.unit): IEEE binary32, or the H200's
 * div.full.f32 (ref/sfu: operands scaled into range, then x times rcp.approx(y), one rounding) */
typedef enum { MLR_DIV_IEEE, MLR_DIV_SM90_FULL, MLR_DIV_SM90_APPROX } mlr_divunit;
/* the natural log of the lse (lse.log): correctly rounded, or CUDA's libdevice logf (Triton's
 * tl.log on NVIDIA: mlr__emu_logf_cuda) */
typedef enum { MLR_LOG_EXACT, MLR_LOG_CUDA_LOGF, MLR_LOG_SM90_LG2 } mlr_logunit;
/* the order of a matrix-unit dot's products (dot.k_order): in index order, or Triton's (triton):
 * on fp8 KV, whose K and V a kernel converts in registers into a 2-byte dot operand, in each 32 of
 * the reduced index the first mma.sync takes the pairs at 4t and 16 + 4t, the second those at
 * 4t + 2 and 16 + 4t + 2 (t = 0..3); on bf16 KV, loaded as it is, index order */
typedef enum { MLR_KORDER_SEQ, MLR_KORDER_TRITON } mlr_korder;
/* softmax.form: the logit scaled and rounded before the max (scaled), or FlashAttention-2's form
 * (fa2): the max of the raw dots m, p = 2^(fma(s, c, -fp32(m c))), alpha = 2^(fp32((m_old - m) c)),
 * lse = fma(c_e, m, log(l)) with c_e the natural-base logit scale (needs softmax.exp = 2), or
 * fused_aligned: scaled, but in a batch whose KV length is a multiple of softmax.block p takes
 * fma(s, c, -m) of the raw dot s (m still the max of the rounded s c): Triton's single-pass kernel,
 * compiled for its constexpr length, has no padding mask there and contracts the scale into the
 * subtraction */
typedef enum { MLR_SMF_SCALED, MLR_SMF_FA2, MLR_SMF_FUSED_ALIGNED } mlr_smform;
/* softmax.order: the blocks of a split from its first token (forward), or, aligned at multiples of
 * softmax.block from the batch's first token, from the last to the first (reverse) */
typedef enum { MLR_ORDER_FORWARD, MLR_ORDER_REVERSE } mlr_smorder;
/* normalize: a normalized partial is acc / l (times v_scale where folded: divide), or acc times
 * fp32(v_scale / l) (reciprocal; v_scale 1 unless folded) */
typedef enum { MLR_NORM_DIVIDE, MLR_NORM_RECIPROCAL } mlr_normalize;
/* softmax.schedule: one running state a row (single), or FlashMLA's dense bf16 decode's two
 * warpgroups (seesaw): blocks in pairs from the split's start, the max kept scaled (m = max(m,
 * fp32(max s x c)), alpha = 2^(m_old - m)); the pair's first block k0 feeds O's left half (columns
 * 0..255) and lane sums A, the second k1 the right half and lane sums B (a matrix-unit QK dot
 * chains k0's columns from 0, k1's from 256: 256..575 then 0..255, the second warpgroup's order):
 *   O_L = O_L a0 + bf16(p0) V0_L, then O_L a1 + bf16(p1) V1_L (A_q = fma(A_q, a0, s0_q), then
 *   A_q a1); O_R = O_R fp32(a1 a0) + bf16(p1) V1_R + bf16(fp32(p0 a1)) V0_R (B_q = fma(B_q,
 *   fp32(a1 a0), s1_q)); a lane's block sum s_q adds the pairs (p[8i + 2q] + p[8i + 2q + 1]) in
 *   order; at the end l = ((A0 + A1) + (A2 + A3)) + ((B0 + B1) + (B2 + B3)). Masked tokens are
 *   -1e33 before the max, the running max starts at -1e30 (the kernel's constants). Needs
 *   softmax.form = fa2 (p = 2^(fma(s, c, -m))) */
typedef enum { MLR_SCHED_SINGLE, MLR_SCHED_SEESAW } mlr_schedule;
typedef enum { MLR_OUT_BF16, MLR_OUT_FP16, MLR_OUT_FP32 } mlr_outfmt;

typedef struct mlr_recipe {
  char name[64];
  int q_format;         /* mlr_qfmt */
  int q_scale;          /* mlr_qscale */
  double q_absmax;      /* static policy: scale = absmax / format max */
  int kv_scale_at;      /* mlr_kvscale_at */
  int qk_operand;       /* mlr_operand: Q and K are converted to it before the QK product */
  int qk_dot;           /* mlr_dot */
  int qk_result;        /* mlr_rfmt: the dot's result format (bf16: a bf16 GEMM output) */
  int logit_format;     /* mlr_rfmt: where the logit scale is applied */
  int softmax_exp;      /* mlr_expbase: 2 means log2(e) folded into the logit scale; e_via_2
                           means e^x computed as 2^(x * fp32(log2 e)) (Triton's tl.exp on NVIDIA) */
  int softmax_block;    /* tokens per online-softmax block; 0: one pass with the global max */
  double softmax_clamp; /* l and sums are clamped below at this (1e-12) */
  int softmax_exp_unit; /* mlr_expunit */
  int softmax_sum;      /* mlr_rowsum */
  int p_format;         /* mlr_pfmt: P's format before the PV product (fp8: unscaled) */
  int pv_operand;       /* mlr_operand */
  int pv_dot;           /* mlr_dot (nope_rope is not valid here) */
  int pv_accumulate;    /* mlr_pvacc: a block's PV dot starts at 0 and is then combined with
                           acc*alpha (block), or starts at acc*alpha (into_acc: Triton folds
                           `acc*alpha + dot(p, v)` into the dot's accumulator) */
  int update_fma;       /* 1: the running updates l*alpha + sum, acc*alpha + dot and the merge's
                           acc*a + part*w, sum*a + w are fused multiply-adds (Triton's default
                           contraction); 0: separate multiply and add */
  int split_rule;       /* mlr_split */
  int split_count;      /* fixed rule: splits per batch */
  int split_cus;        /* aiter_v1, waves: compute units (waves: blocks that run at once) */
  int split_max;        /* aiter_v1, waves: most splits per batch */
  int split_min_tokens; /* aiter_v1, waves: tokens per split at least (196) */
  int split_align;      /* split lengths are multiples of this many tokens */
  int split_overhead;   /* waves: a block's fixed cost, in the time of split_align tokens */
  int split_per; /* mlr_splitper: waves: a split's blocks, one per batch, one per query token, or
                    a batch's (query token, head) rows in groups of split_heads */
  int partial_normalized; /* split partials stored as acc/l (1) or raw acc (0) */
  int lse_base;           /* mlr_expbase of the stored log-sum-exp */
  int merge_rule;         /* mlr_merge: running max, global max, or AITER's (running for 2-3) */
  int out_format;         /* mlr_outfmt, rounded to nearest even */
  int v_scale_at;         /* mlr_vscale_at: where v_scale enters */
  int logit_scale_prec;   /* mlr_scaleprec: the precision the logit scale c is formed in */
  int out_lse_base;       /* mlr_expbase (e or 2) of the lse the kernel returns */
  int div_unit;           /* mlr_divunit */
  int lse_log;            /* mlr_logunit */
  int dot_korder;         /* mlr_korder of the qk and pv mma dots */
  int merge_exp_unit;     /* mlr_expunit of the merge's exps (sm90-ex2: as softmax.exp_unit, a
                             base-e exp handed to the unit as fp32(x * fp32(log2 e))) */
  int softmax_form;       /* mlr_smform */
  int softmax_order;      /* mlr_smorder */
  int normalize;          /* mlr_normalize */
  int softmax_schedule;   /* mlr_schedule */
  int split_heads; /* waves: a block's heads; a query token (or batch) counts ceil(H / split_heads)
                      blocks a split (0: one, whatever H) */
} mlr_recipe;

/* Problems are reported in an mlr_error (mlr_base.h; may be NULL) as one line. */

/** The built-in recipe of that name (a copy into *out): MLR_OK or MLR_EINVAL. */
mlr_status mlr_recipe_builtin(const char *name, mlr_recipe *out);
/** The built-ins' names with '|' between them: "triton-fp8-single|triton-fp8-split|aiter-a8w8-ps|
 *  aiter-a16w8-ps|aiter-bf16-np|torch-bmm-bf16|aiter-test-ref|fp32-seq" (one string, no newline).
 */
const char *mlr_recipe_builtin_names(void);
/** One line saying which kernel the recipe of that name models (a built-in, or one of the fast
 *  GPU kernel's recipes), for `mlaref recipe list`; NULL for any other name. */
const char *mlr_recipe_builtin_description(const char *name);

/** Parse the text form. source names it in messages (a file name). MLR_EPARSE on error. */
mlr_status mlr_recipe_parse(const char *text, const char *source, mlr_recipe *out, mlr_error *err);
/** Apply one "key=value" override (as --set does). */
mlr_status mlr_recipe_set(mlr_recipe *r, const char *assignment, mlr_error *err);
/** Apply "key=value;key=value;..." overrides in order (at most 1023 characters); stops at the first
 *  that fails, with mlr_recipe_set's status and message (MLR_ERANGE: the list is too long). */
mlr_status mlr_recipe_set_list(mlr_recipe *r, const char *settings, mlr_error *err);
/** Apply a Q scale policy: "static:absmax=A" (A > 0, finite), "dynamic", "per_head" or
 *  "per_token" (q.scale and q.absmax). The recipe must have an fp8 q.format: MLR_EINVAL (saying
 *  so) for bf16 Q, MLR_EPARSE with the valid forms for anything else. */
mlr_status mlr_recipe_set_policy(mlr_recipe *r, const char *policy, mlr_error *err);
/** The policy's text in the form above (e.g. "static:absmax=6"). */
size_t mlr_recipe_policy_text(const mlr_recipe *r, char *buf, size_t n);

/** Check the combination of values (e.g. nope_rope is a QK model only). MLR_EINVAL with a
 *  reason. */
mlr_status mlr_recipe_check(const mlr_recipe *r, mlr_error *err);

/** The canonical string; returns its length (like snprintf). */
size_t mlr_recipe_canonical(const mlr_recipe *r, char *buf, size_t n);
/** The recipe's text form, one `key = value` per line, parseable by mlr_recipe_parse. */
size_t mlr_recipe_text(const mlr_recipe *r, char *buf, size_t n);
/** How a recipe splits one batch's L KV tokens (bs batches and tokens query tokens in all,
 *  tokens >= bs for batches of one query token or more; heads query heads a token): *nsplits
 *  splits of split_len tokens each (the last ones may be shorter or empty).
 *  none:     1 split of L tokens.
 *  fixed:    split.count splits of ceil(ceil(L / count) / align) * align tokens (the seeds'
 *            Triton rule, align = BLOCK_N); trailing splits may be empty, as in the kernel.
 *  aiter_v1: min(floor(L / min_tokens), ceil(cus / bs), max) splits, at least 1, of
 *            ceil(ceil(L / splits) / align) * align tokens (AITER metadata v1, intra-batch mode,
 *            ROCm/aiter at f3be04a1; the counts are its, the exact boundaries are unverified).
 *  waves:    the fewest splits n in 1 .. min(max, floor(L / min_tokens)) (at least 1) that
 *            minimize ceil(g n / cus) (ceil(len_n / align) + overhead), with
 *            len_n = ceil(ceil(L / n) / align) * align and g = bs (split.per = batch) or
 *            max(tokens, bs) (split.per = token), times ceil(heads / split.heads) when
 *            split.heads > 0; or (split.per = rows, split.heads > 0; else as batch) bs times
 *            ceil(q heads / split.heads), q = ceil(max(tokens, bs) / bs) a batch's query tokens:
 *            the waves of blocks times a block's time (its tiles of align tokens and a fixed
 *            cost), for a GPU that runs cus blocks at once (the fast kernel: one an SM) and a grid
 *            of g blocks a split. Splits of len_n tokens (L when n = 1), as aiter_v1. */
void mlr_recipe_splits(const mlr_recipe *r, int64_t bs, int64_t tokens, int64_t heads, int64_t L,
                       int64_t *nsplits, int64_t *split_len);
/** The splits of every batch at once, for a rule that plans across batches (flashmla; any other
 *  rule: mlr_recipe_splits per batch, first = split_len). Batch b's split 0 covers tokens
 *  [0, first[b]), split s > 0 [first[b] + (s - 1) len[b], first[b] + s len[b]), each cut at L_b.
 *  flashmla, FlashMLA's get_mla_metadata (its dense decode): parts = max(1, cus / ceil(rows / 64))
 *  with rows = q_len x heads (the query rows a KV head serves); a batch costs ceil(L / align)
 *  blocks + overhead, a part ceil(sum / parts) + overhead; the parts are filled in batch order, a
 *  batch cut where a part's payload ends (no piece of overhead blocks or fewer). lens: B lengths;
 *  tokens, heads: mlr_recipe_splits'. */
void mlr_recipe_split_plan(const mlr_recipe *r, int64_t B, int64_t tokens, int64_t heads,
                           const int64_t *lens, int64_t rows, int64_t *nsplits, int64_t *first,
                           int64_t *split_len);

/** SHA-256 of the canonical string, as 64 lowercase hex digits and a NUL. */
mlr_status mlr_recipe_hash(const mlr_recipe *r, char hex[65]);

#ifdef __cplusplus
}
#endif
#endif
