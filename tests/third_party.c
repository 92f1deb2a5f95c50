/* Kernels mlaref did not write, run on an H200, held to their recipes bit for bit: AITER's Triton
 * MLA decode and FlashMLA's dense fp8 decode (tests/data/third_party/, made by
 * scripts/gpu/third_party_run.py; README there) and the seeds' Triton kernels (tests/data/peer/).
 * Every element of o, lse and the split partials the kernel returned must equal the model's
 * encoding. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mlr_emulate.h"
#include "mlr_tensor.h"
#include "test_gen.h"

#define DATA MLAREF_SOURCE_DIR "/tests/data/"

static void recipe_with(const char *name, const char *sets, mlr_recipe *r) {
  mlr_error err = {""};
  cr_assert_eq(mlr_recipe_builtin(name, r), MLR_OK, "%s", name);
  if (*sets) cr_assert_eq(mlr_recipe_set_list(r, sets, &err), MLR_OK, "%s", err.msg);
}

/* a NaN's encoding (bf16 or f32): the GPU writes its canonical NaN (bf16 0x7FFF), the model the
 * format's quiet NaN (0x7FC0); a NaN is compared by class, as `check` does */
static int is_nan(const void *p, size_t width) {
  if (width == 2) {
    const uint16_t c = *(const uint16_t *)p;
    return (c & 0x7F80u) == 0x7F80u && (c & 0x7Fu);
  }
  uint32_t b;
  memcpy(&b, p, 4);
  return (b & 0x7F800000u) == 0x7F800000u && (b & 0x7FFFFFu);
}

/* the elements of tensor `name` in the kernel's file that differ from the model's (want),
 * compared as encodings of their width */
static size_t differ(const mlr_tensor_file *k, const char *name, const void *want, size_t n,
                     size_t width, const char *what) {
  const mlr_tensor *t = mlr_tf_find(k, name);
  cr_assert(t != NULL, "%s: no tensor '%s'", what, name);
  cr_assert_eq(t->nbytes, n * width, "%s: '%s' has %zu bytes, the model %zu", what, name, t->nbytes,
               n * width);
  size_t d = 0;
  for (size_t i = 0; i < n; i++) {
    const char *a = (const char *)t->data + i * width, *b = (const char *)want + i * width;
    d += memcmp(a, b, width) != 0 && !(is_nan(a, width) && is_nan(b, width));
  }
  return d;
}

/* run the recipe on the inputs and hold the kernel's outputs (file) to it */
static void hold(const mlr_inputs *in, const char *file, const char *recipe, const char *sets) {
  mlr_recipe r;
  recipe_with(recipe, sets, &r);
  mlr_tensor_file k;
  mlr_error err = {""};
  cr_assert_eq(mlr_safetensors_read(file, &k, &err), MLR_OK, "%s", err.msg);
  const int parts = mlr_tf_find(&k, "partial_o") != NULL;
  mlr_emu_opts o = {0, parts, MLR_FAULT_NONE, 0};
  mlr_emu_result m;
  cr_assert_eq(mlr_emulate(&r, in, &o, &m, &err), MLR_OK, "%s: %s", file, err.msg);
  const size_t th = (size_t)(m.T * m.H);
  cr_expect_eq(differ(&k, "o", m.o, th * 512, 2, file), 0, "%s: o", file);
  if (mlr_tf_find(&k, "lse"))
    cr_expect_eq(differ(&k, "lse", m.lse, th, 4, file), 0, "%s: lse", file);
  if (parts) {
    cr_expect_eq(differ(&k, "partial_o", m.part_o, th * (size_t)m.S * 512, 4, file), 0,
                 "%s: partial_o", file);
    cr_expect_eq(differ(&k, "partial_lse", m.part_lse, th * (size_t)m.S, 4, file), 0,
                 "%s: partial_lse", file);
  }
  mlr_emu_result_free(&m);
  mlr_tf_free(&k);
}

/* AITER's grouped tl.dot decode on suite cells (the spec each was generated from): three edge
 * cells (one of bf16 KV, where Triton keeps the dots' operands in index order) and the probe
 * cells with 20 heads, an sm_scale, k_scale apart from v_scale and lengths
 * 0, 1, 2, 65, 129, 1025, at 4 and 16 splits */
/* a kernel's output on a suite cell: the spec the cell was generated from, the file, the recipe's
 * changes */
struct run {
  const char *spec, *file, *sets;
};

/* each run's inputs regenerated and its outputs held to the recipe */
static void hold_runs(const struct run *runs, size_t n, const char *recipe) {
  for (size_t i = 0; i < n; i++) {
    gen g;
    gen_make(&g, runs[i].spec);
    char path[512];
    snprintf(path, sizeof path, DATA "third_party/%s.safetensors", runs[i].file);
    hold(&g.in, path, recipe, runs[i].sets);
    mlr_tf_free(&g.tf);
  }
}

Test(third_party, aiter_triton_decode_dot_bit_for_bit, .timeout = 120) {
  static const struct run RUNS[] = {
      {"bs=3,kv=1000,seed=4", "edge-bs3_kv1000.aiter-dot.s4", "split.count=4"},
      {"bs=2,kv=33,seed=3", "edge-bs2_kv33.aiter-dot.s16", "split.count=16"},
      {"bs=2,kv=300,seed=13,fmt=bf16", "edge-bf16kv.aiter-dot.s4", "split.count=4"},
      {"bs=3,kv=500,seed=109,heads=20,needle=499:0:250", "probe-heads20.aiter-dot.s16",
       "split.count=16"},
      {"bs=2,kv=600,seed=112,needle=599:300,sm=0.072168783648703216", "probe-sm.aiter-dot.s4",
       "split.count=4"},
      {"bs=3,kv=600,seed=110,needle=599:0:300,kscale=2,vscale=0.25", "probe-scales.aiter-dot.s16",
       "split.count=16"},
      {"lens=0:1:2:65:129:1025,seed=102,needle=none:0:1:64:128:1024", "probe-lengths.aiter-dot.s4",
       "split.count=4"},
  };
  hold_runs(RUNS, sizeof RUNS / sizeof RUNS[0], "aiter-triton-decode-dot");
}

/* AITER's per-head tl.sum stage (ROCm's path), launched on the H200 as ROCm launches it, on the
 * same kinds of cells, fp8 KV and bf16 KV (Triton's other build of the stage: another layout of the
 * dots); edge-bs2_kv33 and the paged bf16 shape with their split partials */
Test(third_party, aiter_triton_decode_bit_for_bit, .timeout = 120) {
  static const struct run RUNS[] = {
      {"bs=3,kv=1000,seed=4", "edge-bs3_kv1000.aiter-sum.s4", "split.count=4"},
      {"bs=2,kv=33,seed=3", "edge-bs2_kv33.aiter-sum.s4", "split.count=4"},
      {"bs=3,kv=500,seed=109,heads=20,needle=499:0:250", "probe-heads20.aiter-sum.s16",
       "split.count=16"},
      {"bs=2,kv=600,seed=112,needle=599:300,sm=0.072168783648703216", "probe-sm.aiter-sum.s4",
       "split.count=4"},
      {"bs=3,kv=600,seed=110,needle=599:0:300,kscale=2,vscale=0.25", "probe-scales.aiter-sum.s16",
       "split.count=16"},
      {"lens=0:1:2:65:129:1025,seed=102,needle=none:0:1:64:128:1024", "probe-lengths.aiter-sum.s16",
       "split.count=16"},
      {"bs=2,kv=300,seed=13,fmt=bf16", "edge-bf16kv.aiter-sum.s4", "split.count=4"},
      {"bs=2,kv=300,page=16,fmt=bf16,heads=20,seed=34", "shape-bs2_kv300_h20_p16.aiter-sum.s4",
       "split.count=4"},
  };
  hold_runs(RUNS, sizeof RUNS / sizeof RUNS[0], "aiter-triton-decode");
}

/* the seeds' single-pass and split kernels (o, and the split partials with their lse) */
Test(third_party, seed_triton_kernels_bit_for_bit, .timeout = 120) {
  static const struct {
    const char *inputs, *out, *recipe, *sets;
  } RUNS[] = {
      {"bs_1_kv_64_seed_1", "bs_1_kv_64_seed_1.single", "triton-fp8-single-sm90", ""},
      {"bs_1_kv_64_seed_1", "bs_1_kv_64_seed_1.split4", "triton-fp8-split-sm90", "split.count=4"},
      {"bs_3_kv_40_seed_3", "bs_3_kv_40_seed_3.split8", "triton-fp8-split-sm90", "split.count=8"},
  };
  for (size_t i = 0; i < sizeof RUNS / sizeof RUNS[0]; i++) {
    char in_path[512], out_path[512];
    snprintf(in_path, sizeof in_path, DATA "peer/%s.safetensors", RUNS[i].inputs);
    snprintf(out_path, sizeof out_path, DATA "peer/%s.safetensors", RUNS[i].out);
    mlr_tensor_file ti;
    mlr_inputs in;
    mlr_error err = {""};
    cr_assert_eq(mlr_safetensors_read(in_path, &ti, &err), MLR_OK, "%s", err.msg);
    cr_assert_eq(mlr_inputs_check(&ti, in_path, 0, &in, &err), MLR_OK, "%s", err.msg);
    hold(&in, out_path, RUNS[i].recipe, RUNS[i].sets);
    mlr_tf_free(&ti);
  }
  /* a length that is a multiple of BLOCK_N: p from fma(s, sm_scale, -m) (fused_aligned) */
  gen g;
  gen_make(&g, "bs=4,kv=1024,seed=4220");
  hold(&g.in, DATA "peer/bs_4_kv_1024_seed_4220.single.safetensors", "triton-fp8-single-sm90", "");
  mlr_tf_free(&g.tf);
}

/* FlashMLA's tile scheduler: each batch's split count (num_splits, cumulative) is the model's */
static void same_splits(const mlr_tensor_file *k, const mlr_emu_result *m, const char *path) {
  const mlr_tensor *ns = mlr_tf_find(k, "num_splits");
  cr_assert(ns && ns->nbytes == (size_t)(m->B + 1) * 4, "%s: num_splits", path);
  const int32_t *c = (const int32_t *)ns->data;
  for (int64_t b = 0; b < m->B; b++)
    cr_expect_eq(c[b + 1] - c[b], m->split_count[b], "%s: batch %lld's splits", path, (long long)b);
}

/* the kernel's inputs for FlashMLA's fp8 decode: the cell's Q quantized with a per-tensor scale,
 * as FILE.q.safetensors holds it */
static void fp8_q(gen *g, const mlr_tensor_file *qf, const char *path) {
  const mlr_tensor *q = mlr_tf_find(qf, "q"), *qs = mlr_tf_find(qf, "q_scale");
  cr_assert(q && qs && q->nbytes == (size_t)(g->in.T * g->in.H * 576), "%s", path);
  g->in.q = NULL;
  g->in.q8 = (const uint8_t *)q->data;
  g->in.q_format = MLR_FMT_E4M3;
  memcpy(&g->in.q_scale, qs->data, 4);
  g->in.has_q_scale = 1;
}

/* the lse bit for bit, as the kernel returns it (FlashMLA's is [B, H, q_len]) */
static void lse_same(const mlr_tensor_file *k, const mlr_emu_result *m, const char *path) {
  const mlr_tensor *lse = mlr_tf_find(k, "lse");
  cr_assert(lse && lse->nbytes == (size_t)(m->T * m->H) * 4, "%s: lse", path);
  const int64_t sq = m->T / m->B;
  for (int64_t t = 0; t < m->T; t++)
    for (int64_t h = 0; h < m->H; h++) {
      uint32_t a, bb;
      memcpy(&a, (const char *)lse->data + 4 * (((t / sq) * m->H + h) * sq + t % sq), 4);
      memcpy(&bb, &m->lse_out[t * m->H + h], 4);
      cr_expect_eq(a, bb, "%s: lse of token %lld head %lld: %08x, the model %08x", path,
                   (long long)t, (long long)h, a, bb);
    }
}

/* the probe suite's cell with an sm_scale of its own */
#define SM_SPEC "lens=600:600,sm=0.07216878364870322,needle=599:300,seed=112"

/* FlashMLA's dense decode, fp8 (its fp8 Q and descale in FILE.q) and bf16 (the cell as it is; fp8
 * KV dequantized as the recipe's K and V operands are): o bit for bit, the tile scheduler's split
 * counts, and the lse as the kernel returns it (lse_same) */
Test(third_party, flashmla_bit_for_bit, .timeout = 120) {
  static const struct {
    const char *spec, *file, *recipe;
  } RUNS[] = {
      {"bs=2,kv=33,seed=3", "edge-bs2_kv33.flashmla-fp8", "flashmla-fp8"},
      {"bs=1,kv=3,q=4,seed=6", "edge-q4_kv3.flashmla-fp8", "flashmla-fp8"},
      {"lens=1000:1000:129,page=64,spare=4,needle=63:64:128,seed=104", "probe-page64.flashmla-fp8",
       "flashmla-fp8"},
      /* sm_scale 0.0722: c = fp32(fp32(sm_scale) x log2 e) (logit.scale_precision = fp32_arg) */
      {SM_SPEC, "probe-sm.flashmla-fp8", "flashmla-fp8"},
      {"bs=2,kv=33,seed=3", "edge-bs2_kv33.flashmla-bf16", "flashmla-bf16"},
      {"bs=1,kv=3,q=4,seed=6", "edge-q4_kv3.flashmla-bf16", "flashmla-bf16"},
      {"lens=1:64:65:300,page=64,seed=10", "edge-page64.flashmla-bf16", "flashmla-bf16"},
      {"bs=2,kv=300,seed=13,fmt=bf16", "edge-bf16kv.flashmla-bf16", "flashmla-bf16"},
      /* 20 splits of two blocks a batch: the second warpgroup's logits from column 256 */
      {"bs=3,kv=2500,bf16kv=1,page=16,seed=32", "shape-bs3_kv2500.flashmla-bf16", "flashmla-bf16"},
      {SM_SPEC, "probe-sm.flashmla-bf16", "flashmla-bf16"},
  };
  for (size_t i = 0; i < sizeof RUNS / sizeof RUNS[0]; i++) {
    const int fp8 = strstr(RUNS[i].recipe, "fp8") != NULL;
    gen g;
    gen_make(&g, RUNS[i].spec);
    char path[512];
    mlr_tensor_file qf = {0}, k;
    mlr_error err = {""};
    if (fp8) {
      snprintf(path, sizeof path, DATA "third_party/%s.q.safetensors", RUNS[i].file);
      cr_assert_eq(mlr_safetensors_read(path, &qf, &err), MLR_OK, "%s", err.msg);
      fp8_q(&g, &qf, path);
    }
    snprintf(path, sizeof path, DATA "third_party/%s.safetensors", RUNS[i].file);
    cr_assert_eq(mlr_safetensors_read(path, &k, &err), MLR_OK, "%s", err.msg);
    mlr_recipe r;
    recipe_with(RUNS[i].recipe, "", &r);
    mlr_emu_result m;
    cr_assert_eq(mlr_emulate(&r, &g.in, NULL, &m, &err), MLR_OK, "%s: %s", path, err.msg);
    cr_expect_eq(differ(&k, "o", m.o, (size_t)(m.T * m.H) * 512, 2, path), 0, "%s: o", path);
    same_splits(&k, &m, path);
    lse_same(&k, &m, path);
    mlr_emu_result_free(&m);
    mlr_tf_free(&k);
    if (fp8) mlr_tf_free(&qf);
    mlr_tf_free(&g.tf);
  }
}
