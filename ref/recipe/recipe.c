/* Recipes: one key table drives parsing, --set, the text form and the canonical string. */
#define _POSIX_C_SOURCE 200809L
#include "mlr_recipe.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { K_ENUM, K_INT, K_DOUBLE } ktype;
typedef struct key {
  const char *name;
  ktype type;
  size_t off;
  const char *values; /* K_ENUM: the names of values 0, 1, ... joined by '|' */
  long lo, hi;        /* K_INT range */
  int later; /* a key added after recipes were hashed: in the canonical string only when not
                at its default (value 0), so every earlier recipe keeps its hash */
} key;

#define OFF(f) offsetof(mlr_recipe, f)
/* value lists two keys share (and mlr_recipe_check names values from) */
static const char DOT_VALUES[] = "seq|nope_rope|exact|mma:sm90-e4m3|mma:sm90-bf16|mma:sm90-f16|mma:"
                                 "cdna3-fp8|mma:sm90-e4m3-sync|mma:cdna3-bf16|aiter-lanes8";
static const char OPERAND_VALUES[] = "fp32|fp16|bf16|fp8";

static const key KEYS[] = {
    {"q.format", K_ENUM, OFF(q_format), "bf16|e4m3|e4m3fnuz", 0, 0, 0},
    {"q.scale", K_ENUM, OFF(q_scale), "none|static|dynamic|per_head|per_token", 0, 0, 0},
    {"q.absmax", K_DOUBLE, OFF(q_absmax), NULL, 0, 0, 0},
    {"kv.scale_at", K_ENUM, OFF(kv_scale_at), "operand|folded", 0, 0, 0},
    {"qk.operand", K_ENUM, OFF(qk_operand), OPERAND_VALUES, 0, 0, 0},
    {"qk.dot", K_ENUM, OFF(qk_dot), DOT_VALUES, 0, 0, 0},
    {"qk.result", K_ENUM, OFF(qk_result), "fp32|bf16", 0, 0, 0},
    {"logit.format", K_ENUM, OFF(logit_format), "fp32|bf16", 0, 0, 0},
    {"softmax.exp", K_ENUM, OFF(softmax_exp), "e|2|e_via_2", 0, 0, 0},
    {"softmax.block", K_INT, OFF(softmax_block), NULL, 0, 1 << 20, 0},
    {"softmax.clamp", K_DOUBLE, OFF(softmax_clamp), NULL, 0, 0, 0},
    {"softmax.exp_unit", K_ENUM, OFF(softmax_exp_unit), "exact|sm90-ex2", 0, 0, 1},
    {"softmax.sum", K_ENUM, OFF(softmax_sum), "seq|warp16|tl32x4|lanes4|tl4", 0, 0, 1},
    {"p.format", K_ENUM, OFF(p_format), "fp32|fp16|bf16|e4m3|e4m3fnuz", 0, 0, 0},
    {"pv.operand", K_ENUM, OFF(pv_operand), OPERAND_VALUES, 0, 0, 0},
    {"pv.dot", K_ENUM, OFF(pv_dot), DOT_VALUES, 0, 0, 0},
    {"pv.accumulate", K_ENUM, OFF(pv_accumulate), "block|into_acc", 0, 0, 0},
    {"update.fma", K_ENUM, OFF(update_fma), "no|yes", 0, 0, 0},
    {"split.rule", K_ENUM, OFF(split_rule), "none|fixed|aiter_v1|waves|flashmla", 0, 0, 0},
    {"split.count", K_INT, OFF(split_count), NULL, 1, 1 << 16, 0},
    {"split.cus", K_INT, OFF(split_cus), NULL, 1, 1 << 16, 0},
    {"split.max", K_INT, OFF(split_max), NULL, 1, 1 << 16, 0},
    {"split.min_tokens", K_INT, OFF(split_min_tokens), NULL, 1, 1 << 20, 0},
    {"split.align", K_INT, OFF(split_align), NULL, 1, 1 << 20, 0},
    {"split.overhead", K_INT, OFF(split_overhead), NULL, 0, 1 << 16, 1},
    {"split.per", K_ENUM, OFF(split_per), "batch|token|rows", 0, 0, 1},
    {"split.heads", K_INT, OFF(split_heads), NULL, 0, 1 << 16, 1},
    {"partial.normalized", K_ENUM, OFF(partial_normalized), "no|yes", 0, 0, 0},
    {"lse.base", K_ENUM, OFF(lse_base), "e|2", 0, 0, 0},
    {"merge.rule", K_ENUM, OFF(merge_rule), "running_max|global_max|aiter|flashmla", 0, 0, 0},
    {"out.format", K_ENUM, OFF(out_format), "bf16|fp16|fp32", 0, 0, 0},
    {"v.scale_at", K_ENUM, OFF(v_scale_at), "as_kv|merged", 0, 0, 1},
    {"logit.scale_precision", K_ENUM, OFF(logit_scale_prec), "fp32|fp64|fp32_arg", 0, 0, 1},
    {"out.lse_base", K_ENUM, OFF(out_lse_base), "e|2", 0, 0, 1},
    {"div.unit", K_ENUM, OFF(div_unit), "ieee|sm90-full|sm90-approx", 0, 0, 1},
    {"lse.log", K_ENUM, OFF(lse_log), "exact|cuda-logf|sm90-lg2", 0, 0, 1},
    {"merge.exp_unit", K_ENUM, OFF(merge_exp_unit), "exact|sm90-ex2", 0, 0, 1},
    {"dot.k_order", K_ENUM, OFF(dot_korder), "seq|triton", 0, 0, 1},
    {"softmax.form", K_ENUM, OFF(softmax_form), "scaled|fa2|fused_aligned", 0, 0, 1},
    {"softmax.order", K_ENUM, OFF(softmax_order), "forward|reverse", 0, 0, 1},
    {"normalize", K_ENUM, OFF(normalize), "divide|reciprocal", 0, 0, 1},
    {"softmax.schedule", K_ENUM, OFF(softmax_schedule), "single|seesaw", 0, 0, 1},
};
#define NKEYS (sizeof KEYS / sizeof KEYS[0])

#define rfail mlr_error_set /* (err, status, format, ...) */

/* the index of value v in "a|b|c", or -1 */
static int enum_index(const char *values, const char *v, size_t vl) {
  int i = 0;
  for (const char *p = values;; i++) {
    const char *bar = strchr(p, '|');
    const size_t n = bar ? (size_t)(bar - p) : strlen(p);
    if (n == vl && strncmp(p, v, vl) == 0) return i;
    if (!bar) return -1;
    p = bar + 1;
  }
}

static const char *enum_name(const char *values, int idx, char *buf, size_t n) {
  const char *p = values;
  for (int i = 0; i < idx && p; i++) {
    p = strchr(p, '|');
    if (p) p++;
  }
  if (!p) return "?";
  const char *bar = strchr(p, '|');
  snprintf(buf, n, "%.*s", (int)(bar ? (size_t)(bar - p) : strlen(p)), p);
  return buf;
}

static const key *find_key(const char *k, size_t kl) {
  for (size_t i = 0; i < NKEYS; i++)
    if (strlen(KEYS[i].name) == kl && strncmp(KEYS[i].name, k, kl) == 0) return &KEYS[i];
  return NULL;
}

static const char *key_names(void) {
  static char buf[768]; /* every key's name, ", " between them (about 530 bytes) */
  size_t at = 0;
  if (!buf[0])
    for (size_t i = 0; i < NKEYS && at < sizeof buf; i++)
      at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", KEYS[i].name,
                             i + 1 < NKEYS ? ", " : "");
  return buf;
}

/* set key k from value text v; where prefixes messages ("file:line:col: " or "") */
static mlr_status set_value(mlr_recipe *r, const key *k, const char *v, size_t vl,
                            const char *where, mlr_error *err) {
  char buf[64];
  if (vl == 0 || vl >= sizeof buf)
    return rfail(err, MLR_EPARSE, "%s%s needs a value", where, k->name);
  memcpy(buf, v, vl);
  buf[vl] = 0;
  char *field = (char *)r + k->off;
  if (k->type == K_ENUM) {
    const int i = enum_index(k->values, v, vl);
    if (i < 0)
      return rfail(err, MLR_EPARSE, "%s%s = '%s' is not one of %s", where, k->name, buf, k->values);
    *(int *)field = i;
  } else if (k->type == K_INT) {
    char *end;
    errno = 0;
    const long x = strtol(buf, &end, 10);
    if (*end || errno || x < k->lo || x > k->hi)
      return rfail(err, MLR_EPARSE, "%s%s = '%s' is not an integer in %ld..%ld", where, k->name,
                   buf, k->lo, k->hi);
    *(int *)field = (int)x;
  } else {
    char *end;
    const double x = strtod(buf, &end);
    if (*end || !isfinite(x) || x < 0.0)
      return rfail(err, MLR_EPARSE,
                   "%s%s = '%s' is not a finite number >= 0 (decimal or hex float)", where, k->name,
                   buf);
    *(double *)field = x;
  }
  return MLR_OK;
}

mlr_status mlr_recipe_set(mlr_recipe *r, const char *a, mlr_error *err) {
  const char *eq = strchr(a, '=');
  if (!eq) return rfail(err, MLR_EPARSE, "'%s' is not key=value (keys: %s)", a, key_names());
  size_t kl = (size_t)(eq - a);
  while (kl && isspace((unsigned char)a[kl - 1])) kl--;
  const key *k = find_key(a, kl);
  if (!k)
    return rfail(err, MLR_EPARSE, "unknown recipe key '%.*s' (valid: %s)", (int)kl, a, key_names());
  const char *v = eq + 1;
  while (isspace((unsigned char)*v)) v++;
  size_t vl = strlen(v);
  while (vl && isspace((unsigned char)v[vl - 1])) vl--;
  return set_value(r, k, v, vl, "", err);
}

/* The built-ins, as settings over fp32-seq, each with where its steps come from (the letters name
 * the kernels); everything the seeds' Python or AITER's sources do not fix is marked. */
static const struct {
  const char *name, *settings;
} BUILTINS[] = {
    /* The simplest contract: bf16 Q, KV dequantized into the operands, fp32 operands, sequential
     * fp32 accumulation, base-e exp, online softmax over 32-token blocks, fp32 P, bf16 output. */
    {"fp32-seq", ""},
    /* (a) seeds 000/001 _flash_fp8_single: Q bf16 -> fp16; K,V fp8 -> fp32 x kv_scale -> fp16;
     * logits = dot(q_nope, k_nope) + dot(q_rope, k_rope) (fp16 operands, fp32 accumulation), x
     * sm_scale in fp32; BLOCK_N 32; P -> fp16 for the PV dot. From the PTX Triton 3.6 generates on
     * an H200 (scripts/gpu/seed_triton_outputs.py saves it): the rope product accumulates onto the
     * nope product's accumulator (one chain over 576 columns: qk.dot = seq, not nope_rope);
     * `acc*alpha + dot(p, v)` becomes the PV dot's initial accumulator (pv.accumulate = into_acc);
     * `l*alpha + sum(p)` is an fma (update.fma = yes); tl.exp is ex2.approx(x * 0x3FB8AA3B)
     * (softmax.exp = e_via_2, with an exact exp2 in place of ex2.approx). Not modelled, so the
     * known differences: the tensor-core accumulation (sequential fp32 FMA here), the
     * hardware ex2.approx, the row sum's tree order (sequential here) and div.full.f32, the
     * approximate division of the final acc / l. */
    {"triton-fp8-single",
     "qk.operand=fp16;p.format=fp16;pv.operand=fp16;softmax.exp=e_via_2;pv.accumulate=into_acc;"
     "update.fma=yes"},
    /* (b) _flash_fp8_split_s1/_s2: as (a) per split; split length ceil(ceil(L/NS)/32)*32; partials
     * normalized (acc / max(l, 1e-12)), lse = m + log(max(l, 1e-12)); merge in split order with a
     * running max, acc = fma(acc, a, part*w), sum = fma(sum, a, w) (PTX). NS defaults to 8
     * (--set split.count=N). Not modelled: as (a), and the merge's ex2.approx and div.full.f32. */
    {"triton-fp8-split",
     "qk.operand=fp16;p.format=fp16;pv.operand=fp16;softmax.exp=e_via_2;pv.accumulate=into_acc;"
     "update.fma=yes;split.rule=fixed;split.count=8;split.align=32;partial.normalized=yes;lse.base="
     "e;"
     "merge.rule=running_max"},
    /* (c) AITER mla_a8w8 persistent on gfx950: Q and KV OCP fp8 (Q by the task's dynamic
     * per-tensor quantization); logits descaled by q_scale*kv_scale*sm_scale (scales folded);
     * P cast to fp8 unscaled; output descaled by kv_scale/l; metadata-v1 split rule for 256 CUs
     * (splits = min(L/196, ceil(CUs/bs), 32), multiples of 16 tokens); normalized fp32 partials,
     * lse in ln; reduce: running max for 2-3 splits, global max for 4 or more. Unverified: the
     * MFMA accumulation (exact here), the exp base and the softmax block (one pass here). */
    {"aiter-a8w8-ps",
     "q.format=e4m3;q.scale=dynamic;kv.scale_at=folded;qk.operand=fp8;qk.dot=exact;softmax.block=0;"
     "p.format=e4m3;pv.operand=fp8;pv.dot=exact;split.rule=aiter_v1;split.cus=256;split.max=32;"
     "split.min_tokens=196;split.align=16;merge.rule=aiter"},
    /* (d) AITER a16w8 persistent: bf16 Q with fp8 KV; as (c) otherwise. Unverified: the operand
     * format of the QK product (bf16 here) and P's format (bf16 here). */
    {"aiter-a16w8-ps", "kv.scale_at=folded;qk.operand=bf16;qk.dot=exact;softmax.block=0;p.format="
                       "bf16;pv.operand=bf16;"
                       "pv.dot=exact;split.rule=aiter_v1;split.cus=256;split.max=32;split.min_"
                       "tokens=196;split.align=16;"
                       "merge.rule=aiter"},
    /* (d) AITER bf16 non-persistent: bf16 Q and KV, a fixed number of splits (num_kv_splits, 16
     * here), running-max merge. Unverified: everything inside the kernel. */
    {"aiter-bf16-np",
     "qk.operand=bf16;qk.dot=exact;softmax.block=0;p.format=bf16;pv.operand=bf16;pv.dot=exact;"
     "split.rule=fixed;split.count=16;split.align=16;merge.rule=running_max"},
    /* (e) the seeds' _bmm: bmm(q, k^T) in bf16 (fp32 accumulation inside the GEMM, rounded to
     * bf16), x sm_scale in bf16, softmax in fp32 over the whole row, P -> bf16, bmm(P, V). The
     * GEMM's accumulation order is modelled as exact: unverified. */
    {"torch-bmm-bf16",
     "qk.operand=bf16;qk.dot=exact;qk.result=bf16;logit.format=bf16;softmax.block=0;p.format=bf16;"
     "pv.operand=bf16;pv.dot=exact"},
    /* (f) AITER's test reference: fp32 einsum logits x (sm_scale*q_scale*kv_scale), global max,
     * exp, P -> fp8 unscaled -> fp32, PV in fp32, / l, x kv_scale. einsum's order: sequential here.
     */
    {"aiter-test-ref", "q.format=e4m3;q.scale=dynamic;kv.scale_at=folded;qk.operand=fp32;softmax."
                       "block=0;p.format=e4m3;"
                       "pv.operand=fp32"},
    /* (a') and (b') the seeds' kernels as an H200 runs them (Triton 3.6, the PTX and SASS): as
     * (a) and (b) with the logits and PV on mma.sync m16n8k16 f16 in Triton's operand order
     * (dot.k_order = triton), tl.exp on ex2.approx.f32, tl.sum of p over the 4-warp tile
     * (tl32x4), acc / l by div.full.f32, the lse's tl.log by libdevice logf, and the merge's
     * exps on ex2.approx.f32 too; the single-pass kernel's p from fma(s, sm_scale, -m) where its
     * constexpr KV_LEN is a multiple of BLOCK_N (softmax.form = fused_aligned). */
    {"triton-fp8-single-sm90",
     "qk.operand=fp16;p.format=fp16;pv.operand=fp16;softmax.exp=e_via_2;pv.accumulate=into_acc;"
     "update.fma=yes;qk.dot=mma:sm90-f16;pv.dot=mma:sm90-f16;dot.k_order=triton;"
     "softmax.exp_unit=sm90-ex2;softmax.sum=tl32x4;div.unit=sm90-full;lse.log=cuda-logf;"
     "softmax.form=fused_aligned"},
    {"triton-fp8-split-sm90",
     "qk.operand=fp16;p.format=fp16;pv.operand=fp16;softmax.exp=e_via_2;pv.accumulate=into_acc;"
     "update.fma=yes;qk.dot=mma:sm90-f16;pv.dot=mma:sm90-f16;dot.k_order=triton;"
     "softmax.exp_unit=sm90-ex2;softmax.sum=tl32x4;div.unit=sm90-full;lse.log=cuda-logf;"
     "split.rule=fixed;split.count=8;split.align=32;merge.rule=running_max;"
     "merge.exp_unit=sm90-ex2"},
    /* (g) AITER's Triton MLA decode (ROCm/aiter e4048607, aiter/ops/triton/attention/
     * mla_decode.py), the grouped tl.dot stage 1 it takes on NVIDIA, from the PTX and SASS Triton
     * 3.6 emits on an H200 (scripts/gpu/third_party_run.py): K and V fp8 -> fp32 x k_scale
     * (v_scale) -> bf16; the logits on mma.sync m16n8k16 bf16 (the rope dot continues the nope
     * chain), x sm_scale in fp32; BLOCK_N 32; tl.exp = ex2.approx.f32(x * 0x3FB8AA3B); tl.sum of
     * p over its 4-warp mma tile (tl32x4); P -> bf16, `acc *= re_scale; acc += dot(p, v)` the dot's
     * initial accumulator; e_sum = fma(e_sum, re_scale, sum); no clamp; acc / e_sum and the lse's
     * log by div.full.f32 and libdevice logf; splits cdiv(L, num_kv_splits) (4 here: --set
     * split.count=N); stage 2: running max, exps on ex2.approx, acc = fma(acc, a, w*part),
     * sum = fma(sum, a, w), o = acc / sum (div.full.f32), lse = M + logf(sum). */
    {"aiter-triton-decode-dot",
     "qk.operand=bf16;qk.dot=mma:sm90-bf16;softmax.exp=e_via_2;softmax.exp_unit=sm90-ex2;"
     "softmax.sum=tl32x4;softmax.clamp=0;p.format=bf16;pv.operand=bf16;pv.dot=mma:sm90-bf16;"
     "pv.accumulate=into_acc;update.fma=yes;split.rule=fixed;split.count=4;split.align=1;"
     "div.unit=sm90-full;lse.log=cuda-logf;merge.exp_unit=sm90-ex2;dot.k_order=triton"},
    /* (g') the same kernel's per-head stage 1 (_fwd_kernel_stage1), the path ROCm takes for
     * 576-wide keys, launched as it launches it (BLOCK_N 4, one warp) on the H200: the logits
     * tl.sum(q * k) in bf16 lane chains (qk.dot = aiter-lanes8: ref/emulate/lanes8.h, both builds)
     * x sm_scale in fp32; p in fp32; tl.sum(p * v) over the 4 tokens in its column orders, acc =
     * fma(acc, re_scale, that); tl.sum(p) as (p0 + p2) + (p1 + p3) (softmax.sum = tl4); the rest,
     * and stage 2, as the grouped path */
    {"aiter-triton-decode",
     "qk.operand=bf16;qk.dot=aiter-lanes8;softmax.block=4;softmax.exp=e_via_2;"
     "softmax.exp_unit=sm90-ex2;softmax.sum=tl4;softmax.clamp=0;p.format=fp32;pv.operand=bf16;"
     "pv.dot=aiter-lanes8;pv.accumulate=block;update.fma=yes;split.rule=fixed;split.count=4;"
     "split.align=1;div.unit=sm90-full;lse.log=cuda-logf;merge.exp_unit=sm90-ex2"},
    /* (h) FlashMLA's dense fp8 decode (vLLM's fork, csrc/extension/sm90/dense_fp8), from its
     * source and the PTX nvcc 13 emits for sm_90a with its setup.py's flags (--use_fast_math):
     * e4m3 Q with its descale and e4m3 KV on wgmma's fp8 unit (m64n64k32, 18 blocks a logit),
     * the scales folded (c = fp32(fp32(sm_scale) x log2 e) x descale_q x descale_k); 64-token
     * blocks from the last to the first; FlashAttention-2's softmax (raw-dot max,
     * ex2.approx.ftz(fma(s, c, -m c)), the four lanes' own sums, fma(alpha, l, p) then adds);
     * acc *= alpha before each PV wgmma with P cast to e4m3 unscaled; o = acc x
     * div.approx.ftz(descale_k, l); its tile scheduler for 132 SMs; the combine kernel; the
     * lse's logs on lg2.approx.ftz (x fp32(ln 2), as __logf) */
    {"flashmla-fp8",
     "q.format=e4m3;q.scale=static;kv.scale_at=folded;logit.scale_precision=fp32_arg;"
     "qk.operand=fp8;qk.dot=mma:sm90-e4m3;"
     "softmax.exp=2;softmax.block=64;softmax.clamp=0;softmax.exp_unit=sm90-ex2;"
     "softmax.sum=lanes4;softmax.form=fa2;softmax.order=reverse;p.format=e4m3;pv.operand=fp8;"
     "pv.dot=mma:sm90-e4m3;pv.accumulate=into_acc;split.rule=flashmla;split.cus=132;"
     "split.align=64;split.overhead=5;merge.rule=flashmla;merge.exp_unit=sm90-ex2;"
     "div.unit=sm90-approx;normalize=reciprocal;lse.log=sm90-lg2"},
    /* (i) FlashMLA's dense bf16 decode (csrc/sm90/decode/dense/splitkv_mla.cu, another kernel
     * than the fp8 one): bf16 Q and K on wgmma (k16 blocks, 36 a logit), two warpgroups over
     * 64-token blocks in pairs, each holding half of O's columns (softmax.schedule = seesaw:
     * mlr_schedule), ex2.approx.ftz(fma(s, c, -m)) (c = fp32(fp32(sm_scale) x log2 e)) with the max
     * kept scaled, P to bf16, o = O x
     * rcp(l) (div.approx.ftz), partial lse in base 2 (m + log2 l), its tile scheduler and its
     * base-2 combine, the lse's logs on lg2.approx.ftz. fp8 KV is taken as the runner dequantizes
     * it, fp32(code x k_scale) to bf16 */
    {"flashmla-bf16",
     "logit.scale_precision=fp32_arg;qk.operand=bf16;qk.dot=mma:sm90-bf16;softmax.exp=2;"
     "softmax.block=64;softmax.clamp=0;"
     "softmax.exp_unit=sm90-ex2;softmax.form=fa2;softmax.schedule=seesaw;p.format=bf16;"
     "pv.operand=bf16;pv.dot=mma:sm90-bf16;pv.accumulate=into_acc;split.rule=flashmla;"
     "split.cus=132;split.align=64;split.overhead=5;lse.base=2;out.lse_base=e;"
     "merge.rule=flashmla;merge.exp_unit=sm90-ex2;div.unit=sm90-approx;normalize=reciprocal;"
     "lse.log=sm90-lg2"},
};
#define NBUILTINS (sizeof BUILTINS / sizeof BUILTINS[0])

static void fp32_seq(mlr_recipe *r) {
  memset(r, 0, sizeof *r);
  snprintf(r->name, sizeof r->name, "fp32-seq");
  r->q_format = MLR_Q_BF16;
  r->q_scale = MLR_QS_NONE;
  r->q_absmax = 6.0; /* the seeds' static absmax */
  r->kv_scale_at = MLR_KVS_OPERAND;
  r->qk_operand = MLR_OP_FP32;
  r->qk_dot = MLR_DOT_SEQ;
  r->qk_result = MLR_R_FP32;
  r->logit_format = MLR_R_FP32;
  r->softmax_exp = MLR_EXP_E;
  r->softmax_block = 32;
  r->softmax_clamp = 1e-12;
  r->p_format = MLR_P_FP32;
  r->pv_operand = MLR_OP_FP32;
  r->pv_dot = MLR_DOT_SEQ;
  r->pv_accumulate = MLR_PV_BLOCK;
  r->update_fma = 0;
  r->split_rule = MLR_SPLIT_NONE;
  r->split_count = 1;
  r->split_cus = 256;
  r->split_max = 32;
  r->split_min_tokens = 196;
  r->split_align = 16;
  r->partial_normalized = 1;
  r->lse_base = MLR_EXP_E;
  r->merge_rule = MLR_MERGE_RUNNING;
  r->out_format = MLR_OUT_BF16;
}

const char *mlr_recipe_builtin_names(void) {
  return "triton-fp8-single|triton-fp8-split|aiter-a8w8-ps|aiter-a16w8-ps|aiter-bf16-np|torch-bmm-"
         "bf16|aiter-test-ref|triton-fp8-single-sm90|triton-fp8-split-sm90|aiter-triton-decode-dot|"
         "aiter-triton-decode|flashmla-fp8|flashmla-bf16|fp32-seq";
}

mlr_status mlr_recipe_builtin(const char *name, mlr_recipe *out) {
  for (size_t i = 0; name && i < NBUILTINS; i++) {
    if (strcmp(name, BUILTINS[i].name) != 0) continue;
    fp32_seq(out);
    snprintf(out->name, sizeof out->name, "%s", name);
    return mlr_recipe_set_list(out, BUILTINS[i].settings, NULL) == MLR_OK
               ? MLR_OK
               : MLR_EINVAL; /* a bug in the table: tests catch it */
  }
  return MLR_EINVAL;
}

mlr_status mlr_recipe_set_list(mlr_recipe *r, const char *settings, mlr_error *err) {
  char buf[1024];
  if ((size_t)snprintf(buf, sizeof buf, "%s", settings) >= sizeof buf)
    return rfail(err, MLR_ERANGE, "settings longer than %zu characters", sizeof buf - 1);
  for (char *save = NULL, *a = strtok_r(buf, ";", &save); a; a = strtok_r(NULL, ";", &save)) {
    const mlr_status st = mlr_recipe_set(r, a, err);
    if (st != MLR_OK) return st;
  }
  return MLR_OK;
}

mlr_status mlr_recipe_parse(const char *text, const char *source, mlr_recipe *out, mlr_error *err) {
  fp32_seq(out);
  snprintf(out->name, sizeof out->name, "%s", source ? source : "recipe");
  int seen[NKEYS] = {0}, line = 0, any = 0;
  for (const char *p = text; p && *p;) {
    const char *eol = strchr(p, '\n');
    size_t ll = eol ? (size_t)(eol - p) : strlen(p);
    const char *hash = memchr(p, '#', ll);
    if (hash) ll = (size_t)(hash - p); /* a comment, of any length (recipe show's canonical line) */
    line++;
    char l[512];
    if (ll >= sizeof l)
      return rfail(err, MLR_EPARSE, "%s:%d:1: line longer than %zu characters", source, line,
                   sizeof l - 1);
    memcpy(l, p, ll);
    l[ll] = 0;
    p = eol ? eol + 1 : NULL;
    size_t a = 0, e = strlen(l);
    while (a < e && isspace((unsigned char)l[a])) a++;
    while (e > a && isspace((unsigned char)l[e - 1])) e--;
    if (a == e) continue;
    char *eq = memchr(l + a, '=', e - a);
    if (!eq)
      return rfail(err, MLR_EPARSE, "%s:%d:%zu: expected 'key = value'", source, line, a + 1);
    size_t ke = (size_t)(eq - l);
    while (ke > a && isspace((unsigned char)l[ke - 1])) ke--;
    size_t vs = (size_t)(eq - l) + 1;
    while (vs < e && isspace((unsigned char)l[vs])) vs++;
    char where[128];
    snprintf(where, sizeof where, "%s:%d:%zu: ", source, line, vs + 1);
    if (ke - a == 4 && strncmp(l + a, "base", 4) == 0) {
      if (any)
        return rfail(err, MLR_EPARSE, "%s:%d:%zu: 'base' must come before every other key", source,
                     line, a + 1);
      char nm[64];
      snprintf(nm, sizeof nm, "%.*s", (int)(e - vs), l + vs);
      if (mlr_recipe_builtin(nm, out) != MLR_OK)
        return rfail(err, MLR_EPARSE, "%sbase = '%s' is not a built-in recipe (valid: %s)", where,
                     nm, mlr_recipe_builtin_names());
      snprintf(out->name, sizeof out->name, "%s", source ? source : "recipe");
      any = 1;
      continue;
    }
    const key *k = find_key(l + a, ke - a);
    if (!k)
      return rfail(err, MLR_EPARSE, "%s:%d:%zu: unknown key '%.*s' (valid: base, %s)", source, line,
                   a + 1, (int)(ke - a), l + a, key_names());
    if (seen[k - KEYS]++)
      return rfail(err, MLR_EPARSE, "%s:%d:%zu: key '%s' given twice", source, line, a + 1,
                   k->name);
    mlr_status st = set_value(out, k, l + vs, e - vs, where, err);
    if (st != MLR_OK) return st;
    any = 1;
  }
  return MLR_OK;
}

mlr_status mlr_recipe_check(const mlr_recipe *r, mlr_error *err) {
  if ((r->q_format == MLR_Q_BF16) != (r->q_scale == MLR_QS_NONE))
    return rfail(
        err, MLR_EINVAL,
        "q.format = bf16 goes with q.scale = none, and an fp8 q.format needs a scale policy");
  if (r->q_scale == MLR_QS_STATIC && !(r->q_absmax > 0.0))
    return rfail(err, MLR_EINVAL, "q.scale = static needs q.absmax > 0");
  if (r->pv_dot == MLR_DOT_NOPE_ROPE)
    return rfail(err, MLR_EINVAL,
                 "pv.dot = nope_rope: the nope/rope split exists only for the QK product");
  /* only the fixed rule reads split.count: another value under another rule would change the
   * hash and none of the bits */
  if (r->split_rule != MLR_SPLIT_FIXED && r->split_count != 1)
    return rfail(err, MLR_EINVAL,
                 "split.count = %d needs split.rule = fixed (the other rules pick the count)",
                 r->split_count);
  if (!(r->softmax_clamp >= 0.0)) return rfail(err, MLR_EINVAL, "softmax.clamp must be >= 0");
  if (r->softmax_exp_unit == MLR_EXPU_SM90_EX2 && r->softmax_exp == MLR_EXP_E)
    return rfail(err, MLR_EINVAL,
                 "softmax.exp_unit = sm90-ex2 computes 2^x: it needs softmax.exp = 2 or e_via_2");
  if (r->lse_base == MLR_EXP_E_VIA_2) return rfail(err, MLR_EINVAL, "lse.base must be e or 2");
  if (r->dot_korder == MLR_KORDER_TRITON && !MLR_DOT_IS_MMA(r->qk_dot) &&
      !MLR_DOT_IS_MMA(r->pv_dot))
    return rfail(err, MLR_EINVAL,
                 "dot.k_order = triton orders matrix-unit dots: it needs "
                 "qk.dot or pv.dot = mma:*");
  for (int side = 0; r->dot_korder == MLR_KORDER_TRITON && side < 2; side++) {
    const int d = side ? r->pv_dot : r->qk_dot; /* Triton's order is of 16-product 2-byte blocks */
    if (MLR_DOT_IS_MMA(d) && d != MLR_DOT_MMA_SM90_BF16 && d != MLR_DOT_MMA_SM90_F16)
      return rfail(err, MLR_EINVAL,
                   "dot.k_order = triton orders mma.sync m16n8k16 on 2-byte operands: %s.dot "
                   "must be mma:sm90-bf16 or mma:sm90-f16",
                   side ? "pv" : "qk");
  }
  if (r->dot_korder == MLR_KORDER_TRITON && MLR_DOT_IS_MMA(r->pv_dot) && r->softmax_block != 32)
    return rfail(err, MLR_EINVAL,
                 "dot.k_order = triton on the PV dot orders blocks of 32 tokens: it needs "
                 "softmax.block = 32");
  if (r->softmax_sum == MLR_SUM_TL32X4 && r->softmax_block != 32)
    return rfail(err, MLR_EINVAL,
                 "softmax.sum = tl32x4 sums blocks of 32 tokens: it needs softmax.block = 32");
  if (r->softmax_sum == MLR_SUM_LANES4 &&
      (r->softmax_block <= 0 || r->softmax_block % 8 || r->softmax_order != MLR_ORDER_REVERSE))
    return rfail(err, MLR_EINVAL,
                 "softmax.sum = lanes4 deals each 8 tokens of an aligned block to four lanes: it "
                 "needs softmax.block a multiple of 8 and softmax.order = reverse");
  if (r->softmax_form == MLR_SMF_FA2 && !r->partial_normalized)
    return rfail(err, MLR_EINVAL,
                 "softmax.form = fa2 keeps the raw dots' max, which a raw partial's merge cannot "
                 "take: it needs partial.normalized = yes");
  if (r->softmax_form == MLR_SMF_FA2 && r->softmax_exp != MLR_EXP_2)
    return rfail(err, MLR_EINVAL,
                 "softmax.form = fa2 computes 2^(s c - m c) with log2 e in c: it needs softmax.exp "
                 "= 2");
  if (r->softmax_form == MLR_SMF_FA2 &&
      (r->qk_result != MLR_R_FP32 || r->logit_format != MLR_R_FP32))
    return rfail(err, MLR_EINVAL,
                 "softmax.form = fa2 takes the dots as they are: it needs qk.result and "
                 "logit.format = fp32");
  if (r->softmax_schedule == MLR_SCHED_SEESAW &&
      (r->softmax_form != MLR_SMF_FA2 || r->softmax_order != MLR_ORDER_FORWARD ||
       r->softmax_sum != MLR_SUM_SEQ || r->softmax_block <= 0 || r->softmax_block % 8))
    return rfail(err, MLR_EINVAL,
                 "softmax.schedule = seesaw is FlashMLA's own order and sums: it needs "
                 "softmax.form = fa2, softmax.order = forward, softmax.sum = seq and "
                 "softmax.block a multiple of 8");
  if (r->softmax_schedule == MLR_SCHED_SEESAW &&
      (r->pv_dot == MLR_DOT_EXACT || r->pv_accumulate != MLR_PV_INTO_ACC ||
       r->dot_korder != MLR_KORDER_SEQ || r->update_fma))
    return rfail(err, MLR_EINVAL,
                 "softmax.schedule = seesaw accumulates each half of O in its PV dots: it needs "
                 "pv.dot = seq or mma:*, pv.accumulate = into_acc, dot.k_order = seq and "
                 "update.fma = no");
  if (r->softmax_order == MLR_ORDER_REVERSE && r->softmax_block <= 0)
    return rfail(err, MLR_EINVAL, "softmax.order = reverse needs softmax.block > 0");
  if (r->split_rule == MLR_SPLIT_FLASHMLA && r->softmax_block > 0 &&
      r->split_align % r->softmax_block)
    return rfail(err, MLR_EINVAL,
                 "split.rule = flashmla cuts at multiples of split.align: it needs split.align a "
                 "multiple of softmax.block");
  if (r->merge_rule == MLR_MERGE_FLASHMLA && !r->partial_normalized)
    return rfail(err, MLR_EINVAL,
                 "merge.rule = flashmla merges normalized partials: it needs partial.normalized = "
                 "yes");
  if (r->lse_log == MLR_LOG_CUDA_LOGF && (r->lse_base != MLR_EXP_E || r->softmax_exp == MLR_EXP_2))
    return rfail(err, MLR_EINVAL,
                 "lse.log = cuda-logf is a natural log: it needs lse.base = e and softmax.exp = e "
                 "or e_via_2");
  const int qk8 = r->qk_operand == MLR_OP_FP8, pv8 = r->pv_operand == MLR_OP_FP8;
  if (qk8 && r->q_format == MLR_Q_BF16)
    return rfail(err, MLR_EINVAL, "qk.operand = fp8 keeps Q's own codes: it needs an fp8 q.format");
  if ((qk8 || pv8) && r->kv_scale_at != MLR_KVS_FOLDED)
    return rfail(err, MLR_EINVAL,
                 "%s.operand = fp8 keeps the KV codes as they are: it needs kv.scale_at = folded",
                 qk8 ? "qk" : "pv");
  if (pv8 && r->p_format != MLR_P_E4M3 && r->p_format != MLR_P_E4M3FNUZ)
    return rfail(err, MLR_EINVAL,
                 "pv.operand = fp8 keeps P's own codes: it needs p.format = e4m3 or e4m3fnuz");
  if ((r->qk_dot == MLR_DOT_AITER_LANES8 && r->qk_operand != MLR_OP_BF16) ||
      (r->pv_dot == MLR_DOT_AITER_LANES8 && r->pv_operand != MLR_OP_BF16))
    return rfail(err, MLR_EINVAL,
                 "%s.dot = aiter-lanes8 multiplies bf16 operands: it needs %s.operand = bf16",
                 r->qk_dot == MLR_DOT_AITER_LANES8 && r->qk_operand != MLR_OP_BF16 ? "qk" : "pv",
                 r->qk_dot == MLR_DOT_AITER_LANES8 && r->qk_operand != MLR_OP_BF16 ? "qk" : "pv");
  if (r->pv_dot == MLR_DOT_AITER_LANES8 &&
      (r->softmax_block != 4 || r->p_format != MLR_P_FP32 || r->pv_accumulate != MLR_PV_BLOCK))
    return rfail(err, MLR_EINVAL,
                 "pv.dot = aiter-lanes8 sums blocks of 4 tokens of fp32 P: it needs softmax.block "
                 "= 4, p.format = fp32 and pv.accumulate = block");
  /* a matrix unit multiplies its own input format: the operands must be in it */
  for (int side = 0; side < 2; side++) {
    const int d = side ? r->pv_dot : r->qk_dot, op = side ? r->pv_operand : r->qk_operand;
    if (!MLR_DOT_IS_MMA(d)) continue;
    const char *nm = side ? "pv" : "qk";
    const int fp8 = d == MLR_DOT_MMA_SM90_E4M3 || d == MLR_DOT_MMA_CDNA3_FP8 ||
                    d == MLR_DOT_MMA_SM90_E4M3_SYNC,
              fnuz = d == MLR_DOT_MMA_CDNA3_FP8;
    const int want = fp8                                                         ? MLR_OP_FP8
                     : d == MLR_DOT_MMA_SM90_BF16 || d == MLR_DOT_MMA_CDNA3_BF16 ? MLR_OP_BF16
                                                                                 : MLR_OP_FP16;
    /* the unit's input format */
    const char *in = fp8 ? (fnuz ? "e4m3fnuz" : "e4m3") : want == MLR_OP_BF16 ? "bf16" : "fp16";
    char dn[32], on[8];
    enum_name(DOT_VALUES, d, dn, sizeof dn);
    enum_name(OPERAND_VALUES, want, on, sizeof on);
    if (op != want)
      return rfail(err, MLR_EINVAL, "%s.dot = %s multiplies %s operands: it needs %s.operand = %s",
                   nm, dn, in, nm, on);
    if (fp8 && !side && r->q_format != (fnuz ? MLR_Q_E4M3FNUZ : MLR_Q_E4M3))
      return rfail(err, MLR_EINVAL, "qk.dot = %s multiplies %s Q: it needs q.format = %s", dn, in,
                   in);
    if (fp8 && side && r->p_format != (fnuz ? MLR_P_E4M3FNUZ : MLR_P_E4M3))
      return rfail(err, MLR_EINVAL, "pv.dot = %s multiplies %s P: it needs p.format = %s", dn, in,
                   in);
  }
  return MLR_OK;
}

static size_t emit(const mlr_recipe *r, char *buf, size_t n, const char *sep, const char *eq,
                   int hex) {
  size_t at = 0;
  for (size_t i = 0; i < NKEYS; i++) {
    const key *k = &KEYS[i];
    const char *field = (const char *)r + k->off;
    char v[64];
    if (k->later && hex && *(const int *)field == 0)
      continue; /* the canonical string: see key.later */
    if (k->type == K_ENUM)
      enum_name(k->values, *(const int *)field, v, sizeof v);
    else if (k->type == K_INT)
      snprintf(v, sizeof v, "%d", *(const int *)field);
    else
      snprintf(v, sizeof v, hex ? "%a" : "%.17g", *(const double *)field);
    const int lines = sep[0] == '\n'; /* text: a line a key; canonical: ';' between keys */
    at += (size_t)snprintf(at < n ? buf + at : NULL, at < n ? n - at : 0, "%s%s%s%s%s",
                           !lines && at ? sep : "", k->name, eq, v, lines ? sep : "");
  }
  return at;
}

/* Doubles in hex, so the string is exact: the hash of 1e-12 is the hash of its binary64 bits. */
size_t mlr_recipe_canonical(const mlr_recipe *r, char *buf, size_t n) {
  return emit(r, buf, n, ";", "=", 1);
}
size_t mlr_recipe_text(const mlr_recipe *r, char *buf, size_t n) {
  return emit(r, buf, n, "\n", " = ", 0);
}

mlr_status mlr_recipe_hash(const mlr_recipe *r, char hex[65]) {
  char s[2048];
  const size_t len = mlr_recipe_canonical(r, s, sizeof s);
  if (len >= sizeof s) return MLR_ERANGE;
  return mlr_sha256_hex(s, len, hex);
}

static int64_t ceil_div(int64_t a, int64_t b) {
  return a / b + (a % b != 0);
} /* a >= 0, b >= 1: no overflow */
/* a b for a, b >= 0, saturated at INT64_MAX (the waves rule's costs; no batch reaches it) */
static int64_t mul_sat(int64_t a, int64_t b) {
  return b != 0 && a > INT64_MAX / b ? INT64_MAX : a * b;
}
/* a split's length in units of split.align when L tokens go to n splits: the lengths the rules
 * produce, and the tiles the waves rule counts (one formula, so the cost is of the split it picks)
 */
static int64_t split_units(const mlr_recipe *r, int64_t L, int64_t n) {
  return ceil_div(ceil_div(L, n), r->split_align);
}

void mlr_recipe_splits(const mlr_recipe *r, int64_t bs, int64_t tokens, int64_t heads, int64_t L,
                       int64_t *nsplits, int64_t *split_len) {
  const int64_t b = bs > 0 ? bs : 1;
  /* g: a split's blocks, each of split.heads of a token's (or batch's) heads, or (rows) of a
   * batch's q x heads (query token, head) rows */
  const int64_t t = tokens > b ? tokens : b, hb = r->split_heads > 0 && heads > 0;
  const int64_t g = r->split_per == MLR_SPLIT_PER_ROWS && hb
                        ? mul_sat(b, ceil_div(mul_sat(ceil_div(t, b), heads), r->split_heads))
                        : mul_sat(r->split_per == MLR_SPLIT_PER_TOKEN ? t : b,
                                  hb ? ceil_div(heads, r->split_heads) : 1);
  int64_t n = 1;
  if (r->split_rule == MLR_SPLIT_FIXED)
    n = r->split_count;
  else if (r->split_rule == MLR_SPLIT_AITER_V1) {
    n = L / r->split_min_tokens;
    const int64_t by_cus = ceil_div(r->split_cus, b);
    if (by_cus < n) n = by_cus;
    if (r->split_max < n) n = r->split_max;
    if (n < 1) n = 1;
  } else if (r->split_rule == MLR_SPLIT_WAVES) {
    /* integers only, so the choice is exact; the first n to reach the least cost wins (ties go to
     * fewer splits: fewer partials to merge) */
    int64_t most = L / r->split_min_tokens, best = -1;
    if (r->split_max < most) most = r->split_max;
    for (int64_t k = 1; k <= (most > 1 ? most : 1); k++) {
      const int64_t cost =
          mul_sat(ceil_div(mul_sat(g, k), r->split_cus), split_units(r, L, k) + r->split_overhead);
      if (best < 0 || cost < best) {
        best = cost;
        n = k;
      }
    }
  }
  *nsplits = n;
  *split_len =
      n == 1 && r->split_rule != MLR_SPLIT_FIXED ? L : split_units(r, L, n) * r->split_align;
}

/* FlashMLA's get_mla_metadata (flash_fwd_mla_metadata.cu), in blocks of align tokens */
static void flashmla_plan(const mlr_recipe *r, int64_t B, const int64_t *lens, int64_t rows,
                          int64_t *nsplits, int64_t *first, int64_t *split_len) {
  const int64_t blk = r->split_align, over = r->split_overhead;
  int64_t parts = r->split_cus / ceil_div(rows > 0 ? rows : 1, 64), total = 0;
  if (parts < 1) parts = 1;
  for (int64_t b = 0; b < B; b++) total += ceil_div(lens[b], blk) + over;
  const int64_t payload = ceil_div(total, parts) + over;
  int64_t remain = payload; /* of the part being filled */
  for (int64_t b = 0; b < B; b++) {
    const int64_t nb = ceil_div(lens[b], blk);
    int64_t done = 0;
    nsplits[b] = 0;
    first[b] = 0;
    for (;;) {
      if (remain >= nb - done + over) { /* the rest of the batch fits this part */
        remain -= nb - done + over;
        if (!nsplits[b]) first[b] = nb;
        nsplits[b]++;
        break;
      }
      if (remain - over > 0) { /* a piece of remain - over blocks, then a new part */
        if (!nsplits[b]) first[b] = remain - over;
        done += remain - over;
        nsplits[b]++;
      }
      remain = payload;
    }
    first[b] *= blk;
    split_len[b] = nsplits[b] > 1 ? (payload - over) * blk : first[b];
    if (nsplits[b] == 1) first[b] = split_len[b] = lens[b];
  }
}

void mlr_recipe_split_plan(const mlr_recipe *r, int64_t B, int64_t tokens, int64_t heads,
                           const int64_t *lens, int64_t rows, int64_t *nsplits, int64_t *first,
                           int64_t *split_len) {
  if (r->split_rule == MLR_SPLIT_FLASHMLA) {
    flashmla_plan(r, B, lens, rows, nsplits, first, split_len);
    return;
  }
  for (int64_t b = 0; b < B; b++) {
    mlr_recipe_splits(r, B, tokens, heads, lens[b], &nsplits[b], &split_len[b]);
    first[b] = split_len[b];
  }
}

mlr_status mlr_recipe_set_policy(mlr_recipe *r, const char *policy, mlr_error *err) {
  static const char *const forms = "static:absmax=A (A > 0), dynamic, per_head, per_token";
  int qs;
  double a = r->q_absmax;
  if (!strcmp(policy, "dynamic"))
    qs = MLR_QS_DYNAMIC;
  else if (!strcmp(policy, "per_head"))
    qs = MLR_QS_PER_HEAD;
  else if (!strcmp(policy, "per_token"))
    qs = MLR_QS_PER_TOKEN;
  else if (!strncmp(policy, "static:absmax=", 14)) {
    char *end;
    a = strtod(policy + 14, &end);
    if (end == policy + 14 || *end || !isfinite(a) || !(a > 0))
      return mlr_error_set(err, MLR_EPARSE, "policy '%s': absmax must be a number > 0 (valid: %s)",
                           policy, forms);
    qs = MLR_QS_STATIC;
  } else
    return mlr_error_set(err, MLR_EPARSE, "policy '%s' is not one of %s", policy, forms);
  if (r->q_format == MLR_Q_BF16)
    return mlr_error_set(
        err, MLR_EINVAL,
        "policy '%s': recipe '%s' has bf16 Q, which has no scale (--set q.format=e4m3)", policy,
        r->name);
  r->q_scale = qs;
  r->q_absmax = a;
  return MLR_OK;
}

size_t mlr_recipe_policy_text(const mlr_recipe *r, char *buf, size_t n) {
  switch (r->q_scale) {
  case MLR_QS_STATIC:
    return (size_t)snprintf(buf, n, "static:absmax=%g", r->q_absmax);
  case MLR_QS_DYNAMIC:
    return (size_t)snprintf(buf, n, "dynamic");
  case MLR_QS_PER_HEAD:
    return (size_t)snprintf(buf, n, "per_head");
  case MLR_QS_PER_TOKEN:
    return (size_t)snprintf(buf, n, "per_token");
  default:
    return (size_t)snprintf(buf, n, "none");
  }
}
