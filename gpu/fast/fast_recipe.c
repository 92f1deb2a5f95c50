/* fast_recipe.c: the fast kernel's recipes and the test of whether it computes a given recipe
 * (mlr_gpu_fast.h). Pure C, in every build: `mlaref recipe show fast-a16w8` and the fit test need
 * no GPU. Each setting below is what the kernels in gpu/fast do; change both together. */
#include <stdio.h>
#include <string.h>

#include "mlr_formats.h"
#include "mlr_gpu_fast.h"

/* Shared by the NVIDIA variants: fp16 operands on the sm90 fp16 unit for both products (fp8 KV
 * values are exact in fp16; bf16 KV values round to fp16, exact for |v| in [2^-17, 65504]),
 * kv_scale folded, base-2 softmax over blocks of the kernel's KV tile (128 tokens of fp8 KV, 64 of
 * bf16 KV: the same 72 KiB of shared memory) with the hardware exp2 (ex2.approx.f32: sm90-ex2) and
 * the kernel's row-sum tree (warp16), P in fp16, the PV dot from acc*alpha, raw partials (acc *
 * kv_scale, m and l: no division a partial element; the merge divides once), lse in ln units, the
 * global-max merge, bf16 output. Splits: the waves rule (mlr_recipe.h) for the H200's 132 SMs (one
 * block an SM), counting a split's blocks as the kernel's grid does, one a query token (split.per
 * = token), at least 128 tokens a split, aligned to 128, a block's fixed cost 18 tiles (its start
 * and end against a tile's time). The rule, its cost and its counting of query tokens were chosen
 * by timing `mlaref bench gpu` on an H200 with recipe files that set other split.rule,
 * split.overhead and split.per values, over the bench shapes and shapes between them (q_len 1 to
 * 4): 18 keeps the 8 bench shapes' counts and picks the fastest count at every shape timed;
 * docs/perf/fast-kernel.md has the figures. */
#define FAST_COMMON(block) FAST_QK("qk.operand=fp16;qk.dot=mma:sm90-f16;", block)
#define FAST_QK(qk, block)                                                                         \
  "kv.scale_at=folded;" qk "qk.result=fp32;logit.format=fp32;softmax.exp=2;"                       \
  "softmax.block=" block                                                                           \
  ";softmax.clamp=1e-12;softmax.exp_unit=sm90-ex2;softmax.sum=warp16;p.format=fp16;"               \
  "pv.operand=fp16;pv.dot=mma:sm90-f16;pv.accumulate=into_acc;"                                    \
  "update.fma=no;split.rule=waves;split.cus=132;split.max=64;split.min_tokens=128;split.align="    \
  "128;split.overhead=18;split.per=token;"                                                         \
  "partial.normalized=no;lse.base=e;merge.rule=global_max;out.format=bf16"
#define Q_BF16   "q.format=bf16;q.scale=none;"
#define Q_E4M3   "q.format=e4m3;q.scale=static;q.absmax=6;"
/* fp8 Q and OCP e4m3 KV, the logits on wgmma's fp8 unit (k_attn<.., WG = 1>): Q's e4m3 codes and
 * K's codes multiplied as they are (no fp16 operands: no conversions of K), the unit's model
 * mma:sm90-e4m3 (blocks of 32 products in order, 13 fraction bits truncated;
 * gpu/probes/wgmma_probe.cu checks it against the hardware), everything else as fast-a8w8. Its
 * error budget against fast-a8w8's (`mlaref budget --shape SPEC --recipe fast-wgmma-a8w8`, then
 * `--recipe fast-a8w8`): the accumulation's part grows, the static Q scale's still dominates. Its
 * splits count a block for every 64 of a token's heads (split.heads = 64), as k_attn_rows' grid
 * does (64 rows a block; one-tile splits run on k_attn_ws_wg, 16 heads a block, which the count
 * leaves out). At 128 heads that halves the splits where the grid ran in two waves: bs=64, kv=1024
 * takes one split (one wave of 8 tiles a block, no partials to merge) instead of two (two waves of
 * 4), 120.8 -> 65.1 us on an H100 (`mlaref bench gpu --shape bs=64,kv=1024,heads=128`). At 64 heads
 * or fewer the counts are unchanged. */
#define FAST_WG  FAST_QK("qk.operand=fp8;qk.dot=mma:sm90-e4m3;", "128") ";split.heads=64"
/* Both products on wgmma's fp8 unit (k_attn_rows<1>, over batches of one q_len): fast-wgmma-a8w8
 * but for P, e4m3 codes of the fp32 p (cvt.rn.satfinite: nearest even, the row sums still over
 * the fp32 p), and the PV, V's e4m3 codes times P's on the unit (mma:sm90-e4m3, blocks of 32
 * tokens in order from acc * alpha). That is where FlashMLA's dense fp8 kernel and AITER's a8w8
 * put P (recipes flashmla-fp8, aiter-a8w8-ps); the PV at the fp8 unit's rate, twice the fp16
 * one's. Its cost in accuracy: `mlaref budget --shape SPEC --recipe fast-wgmma-fp8` against
 * fast-wgmma-a8w8 (docs/recipes.md has the figures). Its splits count k_attn_rows' grid at every
 * head count and q_len, a batch's q_len x H rows in blocks of 64 (split.per = rows): at 16 heads
 * and q_len 4 one block a batch, where counting tokens would take a quarter of the splits. */
#define FAST_WG8 FAST_WG ";p.format=e4m3;pv.operand=fp8;pv.dot=mma:sm90-e4m3;split.per=rows"

/* The AMD (MFMA) variant, written for CDNA3 (MI300, gfx942) and compiled for gfx940; not run here
 * (no AMD GPU): bf16 operands on v_mfma_f32_16x16x16_bf16 for both products (fp8 KV and fp8 Q
 * values are exact in bf16; the unit's model mma:cdna3-bf16 is MMA-Sim's, agreeing with MMA-Sim
 * on 1.1 million inner products, not run on an MI300),
 * blocks of 64 tokens (a tile in 64 KB of LDS), the correctly rounded exp2 (software: no model of
 * v_exp_f32 yet), the row sum in token order, P in bf16, splits for MI300X's 304 CUs; e4m3fnuz Q
 * (MI300's fp8) with the seeds' static scale. */
#define MI300_COMMON                                                                               \
  "kv.scale_at=folded;qk.operand=bf16;qk.dot=mma:cdna3-bf16;qk.result=fp32;logit.format=fp32;"     \
  "softmax.exp=2;"                                                                                 \
  "softmax.block=64;softmax.clamp=1e-12;softmax.exp_unit=exact;softmax.sum=seq;p.format=bf16;"     \
  "pv.operand=bf16;pv.dot=mma:cdna3-bf16;pv.accumulate=into_acc;"                                  \
  "update.fma=no;split.rule=aiter_v1;split.cus=304;split.max=64;split.min_tokens=128;split.align=" \
  "128;"                                                                                           \
  "partial.normalized=yes;lse.base=e;merge.rule=global_max;out.format=bf16"

static const struct {
  const char *name, *settings;
} FAST[] = {
    /* fp8 KV (e4m3, e4m3fnuz). bf16 Q (a16w8): Q rounded to fp16 operands */
    {"fast-a16w8", Q_BF16 FAST_COMMON("128")},
    /* fp8 Q (a8w8) with the seeds' static scale (absmax 6; --set q.scale=dynamic for the task's) */
    {"fast-a8w8", Q_E4M3 FAST_COMMON("128")},
    /* fp8 Q, OCP e4m3 KV: the logits on wgmma's fp8 unit */
    {"fast-wgmma-a8w8", Q_E4M3 FAST_WG},
    /* the same with e4m3 P and the PV on the fp8 unit */
    {"fast-wgmma-fp8", Q_E4M3 FAST_WG8},
    /* bf16 KV: the same with blocks of 64 tokens */
    {"fast-a16w16", Q_BF16 FAST_COMMON("64")},
    {"fast-a8w16", Q_E4M3 FAST_COMMON("64")},
    /* AMD MFMA, fp8 KV */
    {"fast-mi300-a16w8", Q_BF16 MI300_COMMON},
    {"fast-mi300-a8w8", "q.format=e4m3fnuz;q.scale=static;q.absmax=6;" MI300_COMMON},
};

const char *mlr_gpu_fast_recipe_names(void) {
  return "fast-a16w8|fast-a8w8|fast-wgmma-a8w8|fast-wgmma-fp8|fast-a16w16|fast-a8w16|fast-mi300-"
         "a16w8|fast-mi300-a8w8";
}

/* the recipes this build's kernel computes: MLR_FAST_MFMA is defined for the HIP build's library */
const char *mlr_gpu_fast_platform_recipes(void) {
#ifdef MLR_FAST_MFMA
  return "fast-mi300-a16w8|fast-mi300-a8w8";
#else
  return "fast-a16w8|fast-a8w8|fast-wgmma-a8w8|fast-wgmma-fp8|fast-a16w16|fast-a8w16";
#endif
}

mlr_status mlr_gpu_fast_recipe(const char *name, mlr_recipe *out) {
  for (size_t i = 0; name && i < sizeof FAST / sizeof FAST[0]; i++) {
    if (strcmp(name, FAST[i].name) != 0) continue;
    mlr_recipe_builtin("fp32-seq", out);
    if (mlr_recipe_set_list(out, FAST[i].settings, NULL) != MLR_OK)
      return MLR_EINVAL; /* a bug in the table: tests catch it */
    snprintf(out->name, sizeof out->name, "%s", name);
    return MLR_OK;
  }
  return MLR_EINVAL;
}

#define NOFIT(...) mlr_error_set(err, MLR_EINVAL, __VA_ARGS__)

/* the line "key = value" of a recipe's text form: its start in *line, its length returned */
static int key_line(const char *text, const char *key, const char **line) {
  const size_t kl = strlen(key);
  for (const char *l = text; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
    if (strncmp(l, key, kl) == 0 && strncmp(l + kl, " = ", 3) == 0) {
      *line = l;
      return (int)strcspn(l, "\n");
    }
  *line = "";
  return 0;
}

/* the first of the keys the kernel fixes whose value in r is not the reference recipe's: its
 * line "key = value" in ref's text form copied into line[256], 1 returned; 0 when all match */
static int first_mismatch(const mlr_recipe *r, const char *ref_name, char *line) {
  static const char *const FIXED[] = {
      "kv.scale_at",   "qk.operand",    "qk.dot",           "qk.result",   "logit.format",
      "softmax.exp",   "softmax.block", "softmax.exp_unit", "softmax.sum", "p.format",
      "pv.operand",    "pv.dot",        "pv.accumulate",    "update.fma",  "partial.normalized",
      "lse.base",      "merge.rule",    "out.format",       "v.scale_at",  "logit.scale_precision",
      "div.unit",      "lse.log",       "merge.exp_unit",   "dot.k_order", "softmax.form",
      "softmax.order", "normalize",     "softmax.schedule"};
  mlr_recipe ref;
  char have[4096], want[4096];
  mlr_gpu_fast_recipe(ref_name, &ref);
  mlr_recipe_text(r, have, sizeof have);
  mlr_recipe_text(&ref, want, sizeof want);
  for (size_t i = 0; i < sizeof FIXED / sizeof FIXED[0]; i++) {
    const char *h, *w;
    const int hl = key_line(have, FIXED[i], &h), wl = key_line(want, FIXED[i], &w);
    if (hl != wl || strncmp(h, w, (size_t)wl) != 0) {
      snprintf(line, 256, "%.*s", wl, w);
      return 1;
    }
  }
  return 0;
}

/* the checks after the recipe's keys, the same for both variants; kv_bf16: the variant reads bf16
 * KV */
static mlr_status fit_rest(const mlr_recipe *r, const mlr_inputs *in, int kv_bf16, mlr_error *err) {
  if (r->q_format != MLR_Q_BF16 && r->q_scale != MLR_QS_STATIC && r->q_scale != MLR_QS_DYNAMIC)
    return NOFIT("recipe '%s': the fast kernel quantizes Q with one scale (q.scale = static or "
                 "dynamic), not per head or token",
                 r->name);
  if (r->split_rule == MLR_SPLIT_FLASHMLA)
    return NOFIT("recipe '%s': the fast kernel plans its splits a batch at a time; split.rule = "
                 "flashmla plans across batches (`mlaref run` runs it)",
                 r->name);
  if (!in) return MLR_OK;
  const char *what = mlr_inputs_gpu_unsupported(in);
  if (what) return NOFIT("the fast kernel does not run inputs with %s; `mlaref run` does", what);
  if (!kv_bf16 && in->kv_format == MLR_FMT_BF16)
    return NOFIT(
        "the fast kernel's AMD variant reads fp8 KV (e4m3 or e4m3fnuz); these inputs have bf16 KV");
  if (in->H < 1 || in->H > 128) /* a block takes 16 of a token's heads */
    return NOFIT("the fast kernel runs 1..128 heads; the inputs have %lld", (long long)in->H);
  return mlr_emu_check_fit(r, in, err);
}

mlr_status mlr_gpu_fast_fit(const mlr_recipe *r, const mlr_inputs *in, mlr_error *err) {
#ifdef MLR_FAST_MFMA
  /* the AMD variant: fp8 KV only (a bf16 tile of 64 tokens would not fit the 64 KB of LDS) */
  char wm[256];
  if (first_mismatch(r, "fast-mi300-a16w8", wm))
    return NOFIT("recipe '%s': the fast kernel (AMD MFMA) computes %s only (see `mlaref recipe "
                 "show fast-mi300-a16w8`)",
                 r->name, wm);
  return fit_rest(r, in, 0, err);
#else
  if (r->qk_dot == MLR_DOT_MMA_SM90_E4M3) { /* the logits on wgmma's fp8 unit: fast-wgmma-a8w8 or,
                                               with an fp8 PV, fast-wgmma-fp8; OCP e4m3 only */
    const char *wn = r->pv_dot == MLR_DOT_MMA_SM90_E4M3 ? "fast-wgmma-fp8" : "fast-wgmma-a8w8";
    char ww[256];
    if (first_mismatch(r, wn, ww))
      return NOFIT("recipe '%s': with qk.dot = mma:sm90-e4m3 the fast kernel computes %s only (see "
                   "`mlaref recipe show %s`)",
                   r->name, ww, wn);
    if (r->q_format != MLR_Q_E4M3)
      return NOFIT("recipe '%s': the fast kernel's wgmma logits multiply OCP e4m3 codes: q.format "
                   "= e4m3 only",
                   r->name);
    if (in && in->kv_format != MLR_FMT_E4M3)
      return NOFIT("recipe '%s': the fast kernel's wgmma logits multiply OCP e4m3 codes; these "
                   "inputs have %s KV (e4m3 only)",
                   r->name, mlr_format_name((mlr_format)in->kv_format));
    /* the fp8 PV runs on k_attn_rows alone, whose grid is batches x blocks of one q_len's rows */
    int64_t b = 0;
    if (in && r->pv_dot == MLR_DOT_MMA_SM90_E4M3 && mlr_inputs_one_q_len(in, &b) < 0)
      return NOFIT("recipe '%s': the fast kernel's fp8 PV (k_attn_rows) takes batches of one "
                   "q_len; these inputs' batch %lld has %lld query tokens, batch 0 %lld "
                   "(`mlaref run` runs them)",
                   r->name, (long long)b, (long long)(in->qo_indptr[b + 1] - in->qo_indptr[b]),
                   (long long)(in->qo_indptr[1] - in->qo_indptr[0]));
    return fit_rest(r, in, 0, err);
  }
  /* every key the kernel fixes must have the kernel's value for the KV format (fp8: fast-a16w8's,
   * bf16: fast-a16w16's; the recipe alone: either) */
  char w8[256], w16[256]; /* -1: not asked (the inputs' KV format is the other one) */
  const int l8 = in && in->kv_format == MLR_FMT_BF16 ? -1 : first_mismatch(r, "fast-a16w8", w8);
  const int l16 = in && in->kv_format != MLR_FMT_BF16 ? -1 : first_mismatch(r, "fast-a16w16", w16);
  if (l8 != 0 && l16 != 0) {
    if (l16 < 0)
      return NOFIT("recipe '%s': with fp8 KV the fast kernel computes %s only (see `mlaref recipe "
                   "show fast-a16w8`)",
                   r->name, w8);
    if (l8 < 0)
      return NOFIT("recipe '%s': with bf16 KV the fast kernel computes %s only (see `mlaref recipe "
                   "show fast-a16w16`)",
                   r->name, w16);
    return NOFIT("recipe '%s': the fast kernel computes %s only (fp8 KV; see `mlaref recipe show "
                 "fast-a16w8`; bf16 KV: fast-a16w16)",
                 r->name, w8);
  }
  return fit_rest(r, in, 1, err);
#endif
}
