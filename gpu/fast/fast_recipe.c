/* fast_recipe.c: the fast kernel's recipes and the test of whether it computes a given recipe
 * (mlr_gpu_fast.h). Pure C, in every build: `mlaref recipe show fast-a16w8` and the fit test need
 * no GPU. Each setting below is what gpu/fast/fast.cu does; change both together. */
#include <stdio.h>
#include <string.h>

#include "../../ref/formats/mlr_formats.h"
#include "mlr_gpu_fast.h"

/* Shared by both variants: fp16 operands on the sm90 fp16 unit for both products (fp8 KV values
 * are exact in fp16), kv_scale folded, base-2 softmax over blocks of 128 tokens (the kernel's KV
 * tile) with P in fp16, the PV dot from acc*alpha, normalized partials with lse in ln units, the
 * global-max merge, bf16 output. Splits: AITER's metadata-v1 rule with 128 "CUs" (the H200 has
 * 132 SMs; the rule rounds bs up, so 128 keeps 32 and 64 batches at 4 and 2 splits = one wave of
 * 128 blocks), at least 128 tokens (one tile) a split, aligned to the tile. */
#define FAST_COMMON                                                                                                    \
  "kv.scale_at=folded;qk.operand=fp16;qk.dot=mma:sm90-f16;qk.result=fp32;logit.format=fp32;softmax.exp=2;"            \
  "softmax.block=128;softmax.clamp=1e-12;p.format=fp16;pv.operand=fp16;pv.dot=mma:sm90-f16;pv.accumulate=into_acc;"  \
  "update.fma=no;split.rule=aiter_v1;split.cus=128;split.max=64;split.min_tokens=128;split.align=128;"                \
  "partial.normalized=yes;lse.base=e;merge.rule=global_max;out.format=bf16"

static const struct {
  const char *name, *settings;
} FAST[] = {
  /* bf16 Q (a16w8): Q rounded to fp16 operands */
  {"fast-a16w8", "q.format=bf16;q.scale=none;" FAST_COMMON},
  /* fp8 Q (a8w8) with the seeds' static scale (absmax 6; --set q.scale=dynamic for the task's) */
  {"fast-a8w8", "q.format=e4m3;q.scale=static;q.absmax=6;" FAST_COMMON},
};

const char *mlr_gpu_fast_recipe_names(void) { return "fast-a16w8|fast-a8w8"; }

mlr_status mlr_gpu_fast_recipe(const char *name, mlr_recipe *out) {
  for (size_t i = 0; name && i < sizeof FAST / sizeof FAST[0]; i++) {
    if (strcmp(name, FAST[i].name) != 0) continue;
    mlr_recipe_builtin("fp32-seq", out);
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", FAST[i].settings);
    for (char *save = NULL, *a = strtok_r(buf, ";", &save); a; a = strtok_r(NULL, ";", &save))
      if (mlr_recipe_set(out, a, NULL) != MLR_OK) return MLR_EINVAL; /* a bug in the table: tests catch it */
    snprintf(out->name, sizeof out->name, "%s", name);
    return MLR_OK;
  }
  return MLR_EINVAL;
}

#define NOFIT(...) mlr_error_set(err, MLR_EINVAL, __VA_ARGS__)

mlr_status mlr_gpu_fast_fit(const mlr_recipe *r, const mlr_inputs *in, mlr_error *err) {
  mlr_recipe ref;
  mlr_gpu_fast_recipe("fast-a16w8", &ref);
  /* every key the kernel fixes: the recipe's value must be the kernel's */
  static const struct {
    const char *key;
    size_t off;
  } FIXED[] = {
#define F(k, field) {k, offsetof(mlr_recipe, field)}
    F("kv.scale_at", kv_scale_at), F("qk.operand", qk_operand), F("qk.dot", qk_dot), F("qk.result", qk_result),
    F("logit.format", logit_format), F("softmax.exp", softmax_exp), F("softmax.block", softmax_block),
    F("p.format", p_format), F("pv.operand", pv_operand), F("pv.dot", pv_dot), F("pv.accumulate", pv_accumulate),
    F("update.fma", update_fma), F("partial.normalized", partial_normalized), F("lse.base", lse_base),
    F("merge.rule", merge_rule), F("out.format", out_format),
#undef F
  };
  for (size_t i = 0; i < sizeof FIXED / sizeof FIXED[0]; i++)
    if (*(const int *)((const char *)r + FIXED[i].off) != *(const int *)((const char *)&ref + FIXED[i].off)) {
      char want[4096], *at;
      mlr_recipe_text(&ref, want, sizeof want);
      at = strstr(want, FIXED[i].key);
      const char *eol = at ? strchr(at, '\n') : NULL;
      return NOFIT("recipe '%s': the fast kernel computes %.*s only (see `mlaref recipe show fast-a16w8`)", r->name,
                   at ? (int)(eol ? eol - at : (long)strlen(at)) : 0, at ? at : "");
    }
  if (r->q_format != MLR_Q_BF16 && r->q_scale != MLR_QS_STATIC && r->q_scale != MLR_QS_DYNAMIC)
    return NOFIT("recipe '%s': the fast kernel quantizes Q with one scale (q.scale = static or dynamic), not per head or token", r->name);
  if (!in) return MLR_OK;
  if (in->kv_format != MLR_FMT_E4M3 && in->kv_format != MLR_FMT_E4M3FNUZ)
    return NOFIT("the fast kernel reads fp8 KV (e4m3 or e4m3fnuz); these inputs have bf16 KV");
  if (in->H < 1 || in->H > 16) return NOFIT("the fast kernel runs 1..16 heads; the inputs have %lld", (long long)in->H);
  return mlr_emu_check_fit(r, in, err);
}
