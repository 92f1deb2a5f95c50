/* mlr_gpu_fast.h: the production fast kernel (gpu/fast): MLA decode over an fp8 or bf16 KV cache
 * with matrix units for both products, online softmax, split-K and a log-sum-exp merge. Unlike the
 * exact kernel (gpu/exact) it does not run arbitrary recipes: it computes its own, bit for bit
 * (mlr_gpu_fast_recipe: fp8 KV fast-a16w8 for bf16 Q, fast-a8w8 for fp8 Q, fast-wgmma-a8w8 for fp8
 * Q and OCP e4m3 KV with the logits on wgmma's fp8 unit, fast-wgmma-fp8 with the PV there too; bf16
 * KV fast-a16w16, fast-a8w16), with the
 * matrix unit's, the hardware exp2's and its row sum's rounding in the recipe (mma:sm90-f16,
 * softmax.exp_unit = sm90-ex2, softmax.sum = warp16), and `mlaref check` holds it to that recipe
 * and the truth.
 *
 * What it computes, per query token, split and group of 16 heads (a block of 8 warps; the group's
 * heads = the 16 rows of the unit's tile; 1..128 heads, a token's groups in blocks side by side,
 * each reading the split's KV: a row's arithmetic does not depend on its group):
 *   Q        bf16, or fp8 by a static or dynamic scale (the recipe's policy), as fp16 operands
 *            (exact for fp8 values; bf16 values round to fp16: exact for |q| in [2^-17, 65504]).
 *   K, V     fp8 codes (OCP e4m3, or e4m3fnuz read as twice its value with 1/2 folded into the
 *            scales, both exact) or bf16 codes (rounded to nearest even: exact for |v| in
 *            [2^-17, 65504]) converted to fp16 operands in registers; kv_scale folded into the
 *            logit scale and the output.
 *   QK       mma.sync m16n8k16 (fp16 in, fp32 accumulate) over the 576 columns in blocks of 16 in
 *            order from 0 (the recipe's mma:sm90-f16). logits = dot * c, c = fp32(log2 e / 24)
 *            [* q_scale] * kv_scale.
 *   softmax  blocks of 128 tokens (bf16 KV: 64) from the split's start: m' = max(m, max s),
 *            alpha = 2^(m - m'), p = 2^(s - m') (ex2.approx.f32), l = l*alpha + sum p (a
 *            warp-shuffle tree, then the warps in order), P rounded to fp16.
 *   PV       mma.sync m16n8k16 over the block's tokens in blocks of 16 in order from acc*alpha.
 *   result   (partial.normalized = no) the raw partial, acc times kv_scale, with the split's m
 *            and l; the emulator's global-max merge (k_merge) divides once: o = sum(part * w) /
 *            max(sum(l * w), clamp), w = 2^(m - M), lse = (M + log2 of the divisor) * ln 2; a
 *            token with one split is that merge done by the attention kernel itself. (The AMD
 *            recipes keep normalized partials.)
 *
 * fast-wgmma-a8w8 (NVIDIA sm_90a, a build with MLAREF_GPU_ARCHS 90a, the default): the same but for
 * QK, which multiplies Q's and K's e4m3 codes as they are on wgmma's fp8 unit (wgmma.mma_async
 * m64n16k32, the logits transposed: 64 tokens of a warpgroup by the 16 heads, the 576 columns in
 * 18 steps of 32 in order: the recipe's mma:sm90-e4m3 dot, qk.operand = fp8); the softmax reduces
 * the transposed logits across lanes in the warp16 order, and P is kept in the tile's rope columns
 * (dead once its logits are done) to leave shared memory for Q's codes. Kernels k_attn_ws<0, 1, 1>
 * (k_attn_ws_wg: 4 logit warps, 8 PV warps; at every split length) and k_attn<0, 1, 1>
 * (k_attn_wg, variant ws = 0); at 64 or 128 heads with splits of 2 tiles or more, k_attn_rows
 * (attn_rows.cu: a batch's 64 rows a block, the rows as wgmma's M, the PV on wgmma's fp16 unit;
 * variant rows).
 *
 * fast-wgmma-fp8: fast-wgmma-a8w8 but for P, e4m3 codes of the fp32 p (nearest even, saturating;
 * the row sums over the fp32 p), and the PV, V's e4m3 codes times P's on wgmma's fp8 unit, 32
 * tokens a step in order from acc alpha (mma:sm90-e4m3). Kernel k_attn_rows<1> only, at any head
 * count, over batches that each have the same q_len (KV lengths may differ; others: EINVAL); where
 * a block holds two tokens' rows (H not a multiple of 64, q_len > 1), exact unless the KV holds a
 * NaN code.
 *
 * NVIDIA sm_90 (mma.sync, ldmatrix, cp.async, cvt from e4m3), two variants of the same operations
 * in the same order (so the same recipe, bit for bit): k_attn (gpu/fast/attn.cu: 8 warps doing
 * logits and PV) and, when the longest split has 32 tiles or more, k_attn_ws (attn_ws.cu: 4 logit
 * warps and 4 PV warps on different tiles at once). The merge of a token's splits: inside the
 * attention kernel when there are 2 to 8 splits and the grid's thread-block clusters of them fit
 * the GPU at once (the partials read across the cluster from shared memory), else the kernel
 * k_merge (merge.cu); the same arithmetic either way. mlr_gpu_fast_opts forces any of these
 * choices (the tests run each). A HIP build has the AMD (MFMA) variant instead (gpu/fast/mfma.cu,
 * recipes fast-mi300-a16w8 / fast-mi300-a8w8: bf16 operands on v_mfma_f32_16x16x16_bf16, fp8 KV
 * only; written for CDNA3, compiled for gfx940, never run: no AMD GPU here). Builds without GPU
 * code answer MLR_EDEVICE. The benchmark probes beside the kernel (read floor, plan floor, read
 * bandwidth, launch floor) are gpu/bench's (mlr_gpu_bench.h). */
#ifndef MLR_GPU_FAST_H
#define MLR_GPU_FAST_H

#include <stddef.h>

#include "mlr_base.h"
#include "mlr_inputs_view.h"
#include "mlr_emulate.h"
#include "mlr_recipe.h"

#ifdef __cplusplus
extern "C" {
#endif

/** "fast-a16w8|fast-a8w8|fast-wgmma-a8w8|fast-wgmma-fp8|fast-a16w16|fast-a8w16|fast-mi300-a16w8|
 *  fast-mi300-a8w8": the fast kernel's recipes, every variant's (any of them runs on the CPU
 *  model). */
const char *mlr_gpu_fast_recipe_names(void);

/** The recipes this build's kernel computes: the NVIDIA ones, or in a HIP build the AMD ones
 *  (fast-mi300-*). */
const char *mlr_gpu_fast_platform_recipes(void);

/** The fast kernel's recipe NAME into out: MLR_OK, or MLR_EINVAL for another name. */
mlr_status mlr_gpu_fast_recipe(const char *name, mlr_recipe *out);

/** MLR_OK when the fast kernel computes recipe r on inputs in (in may be NULL: the recipe alone);
 *  else MLR_EINVAL naming the first key (or input property) it does not implement and its valid
 *  values. Pure C: available in every build. */
mlr_status mlr_gpu_fast_fit(const mlr_recipe *r, const mlr_inputs *in, mlr_error *err);

typedef struct mlr_gpu_fast mlr_gpu_fast;

/** The plan's variants, forced (tests and benchmarks; a caller that does not care passes NULL to
 *  mlr_gpu_fast_prepare). Each field is -1 for the plan's own choice, else a value below. Every
 *  variant computes the same recipe, bit for bit; they differ in speed only, so forcing one where
 *  the plan would take another tests it on inputs it would not otherwise see.
 *    ws        0: k_attn (8 warps doing logits and PV); 1: k_attn_ws (warp-specialised). The plan
 *              takes k_attn_ws when the longest split has 32 tiles or more, and for
 *              fast-wgmma-a8w8 always.
 *    cluster   0: k_merge, a second kernel, merges a token's splits; 1: the splits' thread-block
 *              cluster merges them (cluster_merge). Only where a token has 2..8 splits; the plan
 *              takes the cluster when the grid's clusters fit the GPU at once.
 *    toktable  1: the kernels read the token table even where a uniform batch lets them work each
 *              token's entry out (tok_uniform); 0 or -1: the plan's (worked out where it can be).
 *    qdiv      1: static e4m3 Q is divided by its scale in k_qprep even where the attention kernel
 *              may multiply by the reciprocal (exact only for the scales mlr__q_recip_fits finds);
 *              0 or -1: the plan's (the reciprocal where it is exact).
 *    lin       k_attn_ws with unpaged KV: 0 copies the KV rows row by row, 1 as contiguous chunks
 *              by copy_lin (the wgmma kernel only; other recipes take 0), 2 by lin_copy. The plan
 *              takes 1 for fast-wgmma-a8w8 when every batch's split is 2..16 tiles, 2 when every
 *              one is longer, else 0.
 *    rows      fast-wgmma-a8w8 over batches of one q_len: 1 runs k_attn_rows, a block a batch's 64
 *              rows (query token, head) with the rows as wgmma's M; 0 a block a token and group of
 *              16 heads. The plan takes k_attn_rows over uniform batches (one KV length and
 *              kv_indptr step too) at 64 or 128 heads (no block holds two tokens' rows) when the
 *              splits have 2 tiles or more, unless ws or lin is forced; fast-wgmma-fp8 always (rows
 *              = 0, ws, lin: EINVAL). Forced where a block holds two tokens' rows (causal q_len >
 *              1), it is exact unless the KV holds NaN codes.
 *    tma       k_attn_rows: 1 copies each half tile whose 64 rows lie in one page (unpaged: every
 *              one) and before the split's end by the tensor memory accelerator, the others by
 *              cp.async; 0 all by cp.async (the same bytes in the same places: no bit changes).
 *              The plan takes 1; a pool of fewer than 64 rows is copied by cp.async only.
 *  `mlaref gpu run --kernel fast --variant ws=1,lin=2` and `mlaref bench gpu --variant ...` take
 *  them in mlr_gpu_fast_opts_parse's form. */
typedef struct mlr_gpu_fast_opts {
  int ws, cluster, toktable, qdiv, lin, rows, tma;
  int fault; /* a planted fault, in builds with -DMLAREF_GPU_FAULTS=ON only (key fault=1..4:
                gpu/fast/host.cu); 0 everywhere else */
} mlr_gpu_fast_opts;

/** Every field -1: the plan's own choices. */
void mlr_gpu_fast_opts_init(mlr_gpu_fast_opts *o);

/** MLR_OK when every field is -1 or one of its values, else MLR_EINVAL naming the field. */
mlr_status mlr_gpu_fast_opts_check(const mlr_gpu_fast_opts *o, mlr_error *err);

/** o from "key=value[,key=value]..." (keys ws, cluster, toktable, qdiv, lin, rows, tma; values 0 or
 *  1, lin 0, 1 or 2; each key at most once), the keys not given -1: MLR_OK, or MLR_EINVAL with
 *  err naming the bad item and the valid keys and values. Pure C: available in every build. */
mlr_status mlr_gpu_fast_opts_parse(const char *spec, mlr_gpu_fast_opts *o, mlr_error *err);

/** Checks the fit and the options (opts may be NULL: the plan's own choices), uploads the inputs
 *  and allocates everything on GPU 0: MLR_OK, or MLR_EINVAL (fit, options), MLR_ERANGE (grid
 *  limits, size overflow), MLR_ENOMEM, MLR_EDEVICE (no GPU, HIP or CPU-only build,
 *  the wgmma recipes in a build without sm_90a code, a runtime call failed). *f is NULL on failure.
 */
mlr_status mlr_gpu_fast_prepare(const mlr_recipe *r, const mlr_inputs *in,
                                const mlr_gpu_fast_opts *opts, mlr_gpu_fast **f, mlr_error *err);

/** One run of the kernels (Q scale, attention, merge). flush_l2: first overwrite a buffer larger
 *  than the L2 cache with the byte flush_l2 & 0xFF (not timed; the L2 left dirty, or clean after
 *  mlr_gpu_fast_clean_flush). *us: device-event time of the kernels alone (may be NULL). */
mlr_status mlr_gpu_fast_launch(mlr_gpu_fast *f, int flush_l2, double *us, mlr_error *err);

/** Makes each later flushing launch leave the L2 clean: after the flush's 256 MiB write, a read of
 *  a second 256 MiB buffer (allocated here, once; not timed). The write alone, as the seeds'
 *  do_bench zeroes its buffer, leaves the L2 full of dirty lines that the timed kernels write back
 *  as they evict them. MLR_OK, MLR_ENOMEM, MLR_EDEVICE. */
mlr_status mlr_gpu_fast_clean_flush(mlr_gpu_fast *f, mlr_error *err);

/** The last launch's outputs: o (bf16), lse, split_count, split_len, q_scales, q_clipped. Fails
 *  with MLR_EDEVICE naming an output element no launch wrote. */
mlr_status mlr_gpu_fast_result(mlr_gpu_fast *f, mlr_emu_result *res, mlr_error *err);

/** Splits of the widest batch (the grid's second dimension). */
long long mlr_gpu_fast_splits(const mlr_gpu_fast *f);

/** The attention kernel a launch runs and how its splits merge: "k_attn", "k_attn_ws", "k_attn_wg",
 *  "k_attn_ws_wg" or "k_attn_rows" (NVIDIA; "(copy_lin)" or "(lin_copy)" after k_attn_ws when it
 *  copies unpaged KV as contiguous chunks; "k_attn_mfma" on AMD), then "+cluster" (cluster_merge,
 *  in the attention kernel) or "+k_merge" (a second kernel) when the grid has splits; "-" for no
 *  query token or no GPU build. Valid while f is. */
const char *mlr_gpu_fast_kernels(const mlr_gpu_fast *f);

void mlr_gpu_fast_free(mlr_gpu_fast *f);

#ifdef __cplusplus
}
#endif
#endif
