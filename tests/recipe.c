/* ref/recipe: built-ins, the text form and its errors, --set, checks, canonical string, hash. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "mlr_recipe.h"

static const char *const NAMES[] = {"triton-fp8-single", "triton-fp8-split", "aiter-a8w8-ps",
                                    "aiter-a16w8-ps",    "aiter-bf16-np",    "torch-bmm-bf16",
                                    "aiter-test-ref",    "fp32-seq"};

/* Every built-in loads, passes its checks, and its text form parses back to the same canonical
 * string; all eight are different numerics. */
Test(recipe, builtins_roundtrip_and_differ) {
  char hashes[8][65];
  for (int i = 0; i < 8; i++) {
    mlr_recipe r, r2;
    mlr_error err = {""};
    cr_assert_eq(mlr_recipe_builtin(NAMES[i], &r), MLR_OK, "%s", NAMES[i]);
    cr_assert(strstr(mlr_recipe_builtin_names(), NAMES[i]));
    cr_assert_eq(mlr_recipe_check(&r, &err), MLR_OK, "%s: %s", NAMES[i], err.msg);
    char text[4096], c1[2048], c2[2048];
    mlr_recipe_text(&r, text, sizeof text);
    cr_assert_eq(mlr_recipe_parse(text, "t.recipe", &r2, &err), MLR_OK, "%s: %s", NAMES[i],
                 err.msg);
    mlr_recipe_canonical(&r, c1, sizeof c1);
    mlr_recipe_canonical(&r2, c2, sizeof c2);
    cr_assert_str_eq(c1, c2);
    cr_assert_eq(mlr_recipe_hash(&r, hashes[i]), MLR_OK);
    for (int j = 0; j < i; j++)
      cr_assert_str_neq(hashes[i], hashes[j], "%s and %s have the same numerics", NAMES[i],
                        NAMES[j]);
  }
  mlr_recipe r;
  cr_assert_eq(mlr_recipe_builtin("triton-fp8", &r), MLR_EINVAL);
}

/* The canonical string and hash of fp32-seq, pinned: a change to the canonical form changes
 * every golden file's recipe hash, so it must be deliberate. The SHA-256 was computed with
 * `printf '%s' STRING | sha256sum` from the string below. */
Test(recipe, canonical_form_is_pinned) {
  mlr_recipe r;
  cr_assert_eq(mlr_recipe_builtin("fp32-seq", &r), MLR_OK);
  char c[2048], h[65];
  mlr_recipe_canonical(&r, c, sizeof c);
  cr_assert_str_eq(
      c,
      "q.format=bf16;q.scale=none;q.absmax=0x1.8p+2;kv.scale_at=operand;qk.operand=fp32;qk.dot=seq;"
      "qk.result=fp32;logit.format=fp32;softmax.exp=e;softmax.block=32;softmax.clamp=0x1."
      "19799812dea11p-40;"
      "p.format=fp32;pv.operand=fp32;pv.dot=seq;pv.accumulate=block;update.fma=no;split.rule=none;"
      "split.count=1;split.cus=256;split.max=32;"
      "split.min_tokens=196;split.align=16;partial.normalized=yes;lse.base=e;merge.rule=running_"
      "max;"
      "out.format=bf16");
  cr_assert_eq(mlr_recipe_hash(&r, h), MLR_OK);
  cr_assert_str_eq(h, MLR_TEST_FP32SEQ_SHA256);
  /* the name is not numerics */
  char h2[65];
  snprintf(r.name, sizeof r.name, "renamed");
  mlr_recipe_hash(&r, h2);
  cr_assert_str_eq(h, h2);
}

Test(recipe, text_form_and_set) {
  mlr_recipe r;
  mlr_error err = {""};
  const char *text = "# a8w8 with a static Q scale\n"
                     "base = aiter-a8w8-ps\n"
                     "q.scale = static   # absmax 4\n"
                     "q.absmax = 4\n"
                     "\n"
                     "split.cus=304\n";
  cr_assert_eq(mlr_recipe_parse(text, "my.recipe", &r, &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(r.q_scale, MLR_QS_STATIC);
  cr_assert_eq(r.q_absmax, 4.0);
  cr_assert_eq(r.split_cus, 304);
  cr_assert_eq(r.p_format, MLR_P_E4M3, "the rest comes from the base");
  cr_assert_str_eq(r.name, "my.recipe");
  cr_assert_eq(mlr_recipe_set(&r, "split.count = 4", &err), MLR_OK);
  cr_assert_eq(r.split_count, 4);
  cr_assert_eq(mlr_recipe_set(&r, "softmax.clamp=0x1p-40", &err), MLR_OK);
  cr_assert_eq(r.softmax_clamp, 0x1p-40);
}

static void bad(const char *text, const char *frag) {
  mlr_recipe r;
  mlr_error err = {""};
  cr_assert_eq(mlr_recipe_parse(text, "f.recipe", &r, &err), MLR_EPARSE, "parsed: %s", text);
  cr_assert(strstr(err.msg, frag), "'%s' not in: %s", frag, err.msg);
}

Test(recipe, parse_errors_name_line_and_column) {
  bad("q.format = e4m3\nqk.dot = fma\n",
      "f.recipe:2:10: qk.dot = 'fma' is not one of seq|nope_rope|exact");
  bad("softmax.block = -1", "f.recipe:1:17: softmax.block = '-1' is not an integer in 0..1048576");
  bad("\n  q.absmax = inf", "f.recipe:2:14: q.absmax = 'inf' is not a finite number");
  bad("colour = red", "f.recipe:1:1: unknown key 'colour' (valid: base, q.format,");
  bad("q.format = bf16\nq.format = e4m3", "f.recipe:2:1: key 'q.format' given twice");
  bad("just words", "f.recipe:1:1: expected 'key = value'");
  bad("q.format = bf16\nbase = fp32-seq", "f.recipe:2:1: 'base' must come before every other key");
  bad("base = triton",
      "f.recipe:1:8: base = 'triton' is not a built-in recipe (valid: triton-fp8-single|");
  bad("split.rule =", "f.recipe:1:13: split.rule needs a value");
  char text[1200] = "# ";
  memset(text + 2, 'c', 700); /* a comment of any length is skipped, a setting is held to 511 */
  strcpy(text + 702, "\nq.format = bf16\n");
  mlr_recipe c;
  mlr_error cerr = {""};
  cr_assert_eq(mlr_recipe_parse(text, "f.recipe", &c, &cerr), MLR_OK, "%s", cerr.msg);
  text[0] = 'q', text[1] = '=';
  bad(text, "f.recipe:1:1: line longer than 511 characters");
  mlr_recipe r;
  mlr_error err = {""};
  mlr_recipe_builtin("fp32-seq", &r);
  cr_assert_eq(mlr_recipe_set(&r, "qk.dot", &err), MLR_EPARSE);
  cr_assert(strstr(err.msg, "is not key=value"));
  cr_assert_eq(mlr_recipe_set(&r, "nokey=1", &err), MLR_EPARSE);
  cr_assert(strstr(err.msg, "unknown recipe key 'nokey'"));
}

Test(recipe, combination_checks) {
  mlr_recipe r;
  mlr_error err = {""};
  mlr_recipe_builtin("fp32-seq", &r);
  r.q_format = MLR_Q_E4M3;
  cr_assert_eq(mlr_recipe_check(&r, &err), MLR_EINVAL);
  cr_assert(strstr(err.msg, "needs a scale policy"), "%s", err.msg);
  r.q_scale = MLR_QS_STATIC;
  r.q_absmax = 0.0;
  cr_assert_eq(mlr_recipe_check(&r, &err), MLR_EINVAL);
  r.q_absmax = 6.0;
  cr_assert_eq(mlr_recipe_check(&r, &err), MLR_OK);
  r.pv_dot = MLR_DOT_NOPE_ROPE;
  cr_assert_eq(mlr_recipe_check(&r, &err), MLR_EINVAL);
  r.pv_dot = MLR_DOT_SEQ;
  r.split_count = 3;
  cr_assert_eq(mlr_recipe_check(&r, &err), MLR_EINVAL);
  cr_assert(strstr(err.msg, "needs split.rule = fixed"));
  r.split_rule = MLR_SPLIT_FIXED;
  cr_assert_eq(mlr_recipe_check(&r, &err), MLR_OK, "%s", err.msg);
  /* every rule but fixed picks the count itself: a count there would be ignored */
  const int others[] = {MLR_SPLIT_AITER_V1, MLR_SPLIT_WAVES, MLR_SPLIT_FLASHMLA};
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
    r.split_rule = others[i];
    cr_assert_eq(mlr_recipe_check(&r, &err), MLR_EINVAL, "rule %d", others[i]);
    cr_assert(strstr(err.msg, "needs split.rule = fixed"), "%s", err.msg);
  }
}

/* the keys that model Triton and CUDA on an H200: each refuses the recipes it cannot describe */
Test(recipe, triton_key_checks) {
  mlr_recipe r;
  mlr_error err = {""};
  static const struct {
    const char *sets, *says;
  } BAD[] = {
      {"dot.k_order=triton", "needs qk.dot or pv.dot = mma:*"},
      {"qk.operand=fp8;q.format=e4m3;q.scale=static;kv.scale_at=folded;qk.dot=mma:sm90-e4m3;"
       "dot.k_order=triton",
       "qk.dot must be mma:sm90-bf16 or mma:sm90-f16"},
      {"pv.operand=bf16;pv.dot=mma:sm90-bf16;softmax.block=64;dot.k_order=triton",
       "needs softmax.block = 32"},
      {"softmax.sum=tl32x4;softmax.block=64", "needs softmax.block = 32"},
      {"lse.log=cuda-logf;lse.base=2", "needs lse.base = e"},
      {"lse.log=cuda-logf;softmax.exp=2", "needs lse.base = e"},
      {"softmax.form=fa2", "needs softmax.exp = 2"},
      {"softmax.form=fa2;softmax.exp=2;logit.format=bf16", "qk.result and logit.format = fp32"},
      {"softmax.sum=lanes4;softmax.block=12;softmax.order=reverse",
       "softmax.block a multiple of 8"},
      {"softmax.sum=lanes4;softmax.block=64", "softmax.order = reverse"},
      {"softmax.form=fa2;softmax.exp=2;partial.normalized=no", "needs partial.normalized = yes"},
      {"softmax.form=fa2;softmax.exp=2;softmax.schedule=seesaw;pv.dot=exact",
       "pv.accumulate = into_acc"},
      {"softmax.order=reverse;softmax.block=0", "needs softmax.block > 0"},
      {"split.rule=flashmla;split.align=48;softmax.block=32", "split.align a multiple of"},
      {"merge.rule=flashmla;partial.normalized=no", "it needs partial.normalized = yes"},
      {"softmax.schedule=seesaw;softmax.exp=2", "needs softmax.form = fa2"},
      {"qk.dot=aiter-lanes8", "qk.dot = aiter-lanes8 multiplies bf16 operands: it needs "
                              "qk.operand = bf16"},
      {"pv.operand=bf16;pv.dot=aiter-lanes8", "it needs softmax.block = 4, p.format = fp32 and "
                                              "pv.accumulate = block"},
  };
  for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
    mlr_recipe_builtin("fp32-seq", &r);
    cr_assert_eq(mlr_recipe_set_list(&r, BAD[i].sets, &err), MLR_OK, "%s: %s", BAD[i].sets,
                 err.msg);
    cr_assert_eq(mlr_recipe_check(&r, &err), MLR_EINVAL, "%s", BAD[i].sets);
    cr_assert(strstr(err.msg, BAD[i].says), "%s: %s", BAD[i].sets, err.msg);
  }
  static const char *const GOOD[] = {
      "aiter-triton-decode-dot", "aiter-triton-decode", "triton-fp8-single-sm90",
      "triton-fp8-split-sm90",   "flashmla-fp8",        "flashmla-bf16"};
  for (size_t i = 0; i < sizeof GOOD / sizeof GOOD[0]; i++) {
    cr_assert_eq(mlr_recipe_builtin(GOOD[i], &r), MLR_OK);
    cr_assert_eq(mlr_recipe_check(&r, &err), MLR_OK, "%s: %s", GOOD[i], err.msg);
  }
}

/* matrix-unit dot models: names, the canonical form, and the operand formats each unit needs */
Test(recipe, matrix_unit_dots) {
  mlr_recipe r;
  mlr_error err = {""};
  mlr_recipe_builtin("aiter-a16w8-ps", &r);
  cr_assert_eq(mlr_recipe_set(&r, "qk.dot=mma:sm90-bf16", &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(mlr_recipe_set(&r, "pv.dot=mma:sm90-bf16", &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(r.qk_dot, MLR_DOT_MMA_SM90_BF16);
  cr_assert_eq(mlr_recipe_check(&r, &err), MLR_OK, "%s", err.msg);
  char canon[1024];
  mlr_recipe_canonical(&r, canon, sizeof canon);
  cr_assert(strstr(canon, "qk.dot=mma:sm90-bf16;") && strstr(canon, "pv.dot=mma:sm90-bf16;"), "%s",
            canon);
  mlr_recipe back;
  char text[2048];
  mlr_recipe_text(&r, text, sizeof text);
  cr_assert_eq(mlr_recipe_parse(text, "text", &back, &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(back.qk_dot, MLR_DOT_MMA_SM90_BF16);
  cr_assert_eq(mlr_recipe_set(&r, "qk.dot=mma:sm90-e4m3", &err), MLR_OK);
  cr_assert_eq(mlr_recipe_check(&r, &err), MLR_EINVAL);
  cr_assert(
      strstr(err.msg, "qk.dot = mma:sm90-e4m3 multiplies e4m3 operands: it needs qk.operand = fp8"),
      "%s", err.msg);
  cr_assert_eq(mlr_recipe_set(&r, "qk.dot=mma:sm90-f16", &err), MLR_OK);
  cr_assert_eq(mlr_recipe_check(&r, &err), MLR_EINVAL);
  cr_assert(strstr(err.msg, "needs qk.operand = fp16"), "%s", err.msg);
  mlr_recipe_builtin("aiter-a8w8-ps", &r);
  cr_assert_eq(mlr_recipe_set(&r, "qk.dot=mma:sm90-e4m3", &err), MLR_OK);
  cr_assert_eq(mlr_recipe_set(&r, "pv.dot=mma:sm90-e4m3", &err), MLR_OK);
  cr_assert_eq(mlr_recipe_check(&r, &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(mlr_recipe_set(&r, "pv.dot=mma:cdna3-fp8", &err), MLR_OK);
  cr_assert_eq(mlr_recipe_check(&r, &err), MLR_EINVAL);
  cr_assert(
      strstr(err.msg, "pv.dot = mma:cdna3-fp8 multiplies e4m3fnuz P: it needs p.format = e4m3fnuz"),
      "%s", err.msg);
  cr_assert_eq(mlr_recipe_set(&r, "qk.dot=mma:sm80-tf32", &err), MLR_EPARSE);
  /* the built-ins' hashes do not move: the new values come after the old ones */
  mlr_recipe_builtin("aiter-a8w8-ps", &r);
  cr_assert_eq(r.qk_dot, MLR_DOT_EXACT);
}

/* AITER metadata v1 on 256 CUs (ROCm/aiter at f3be04a1): bs4/kv1k 5 splits, bs4/kv8k 32,
 * bs32/kv1k 5, bs32/kv8k 8, bs64 4, bs256 1; split lengths in multiples of 16. The seeds'
 * Triton rule: split length ceil(ceil(L/NS)/32)*32. */
typedef struct {
  int64_t bs, L, n;
} split_case;
/* n splits of len tokens: L when one, else lengths in multiples of align that cover L with no
 * split wholly past it */
static void lengths_cover(int64_t n, int64_t len, int64_t L, int64_t align) {
  cr_assert(n == 1 ? len == L : (len % align == 0 && n * len >= L && (n - 1) * len < L),
            "%lld splits of %lld for %lld tokens", (long long)n, (long long)len, (long long)L);
}
/* each case's count, and its lengths (lengths_cover) */
static void splits_are(const mlr_recipe *r, const split_case *c, size_t k, int64_t align) {
  for (size_t i = 0; i < k; i++) {
    int64_t n, len;
    mlr_recipe_splits(r, c[i].bs, c[i].bs, 16, c[i].L, &n, &len);
    cr_assert_eq(n, c[i].n, "bs%lld kv%lld: %lld splits", (long long)c[i].bs, (long long)c[i].L,
                 (long long)n);
    lengths_cover(n, len, c[i].L, align);
  }
}

Test(recipe, split_rules) {
  mlr_recipe r;
  mlr_recipe_builtin("aiter-a8w8-ps", &r);
  static const split_case aiter[] = {{4, 1024, 5},  {4, 8192, 32}, {32, 1024, 5},  {32, 8192, 8},
                                     {64, 1024, 4}, {64, 8192, 4}, {256, 1024, 1}, {256, 8192, 1}};
  splits_are(&r, aiter, sizeof aiter / sizeof *aiter, 16);
  int64_t n, len;
  mlr_recipe_splits(&r, 4, 4, 16, 100, &n, &len); /* shorter than min_tokens: one split */
  cr_assert(n == 1 && len == 100);
  mlr_recipe_builtin("triton-fp8-split", &r);
  mlr_recipe_set(&r, "split.count=8", NULL);
  mlr_recipe_splits(&r, 4, 4, 16, 1000, &n, &len); /* ceil(1000/8) = 125 -> 128 */
  cr_assert(n == 8 && len == 128);
  mlr_recipe_splits(&r, 4, 4, 16, 33, &n, &len); /* ceil(33/8) = 5 -> 32: splits 2..7 are empty */
  cr_assert(n == 8 && len == 32);
  mlr_recipe_builtin("fp32-seq", &r);
  mlr_recipe_splits(&r, 4, 4, 16, 777, &n, &len);
  cr_assert(n == 1 && len == 777);
}

/* fp32-seq with the fast recipes' waves rule: 132 SMs, 128-token tiles, a block's cost 18 tiles */
static void waves_132(mlr_recipe *r) {
  mlr_error err = {""};
  mlr_recipe_builtin("fp32-seq", r);
  cr_assert_eq(mlr_recipe_set_list(r,
                                   "split.rule=waves;split.cus=132;split.max=64;split.min_tokens="
                                   "128;split.align=128;split.overhead=18",
                                   &err),
               MLR_OK, "%s", err.msg);
}

/* The waves rule (the NVIDIA fast recipes', gpu/fast/fast_recipe.c): the fewest splits n that
 * minimize ceil(bs n / cus) (tiles + overhead). The counts below were worked by hand for 132 SMs,
 * 128-token tiles and a block's cost of 18 tiles, e.g. bs=133, kv=8192: n = 1 costs 2 (64 + 18) =
 * 164, n = 2 3 (32 + 18) = 150, n = 3 4 (22 + 18) = 160, n = 4 5 (16 + 18) = 170; bs=96, kv=8192:
 * n = 1 82, n = 2 2 (32 + 18) = 100, n = 4 3 (16 + 18) = 102; bs=140, kv=4096: n = 1 2 (32 + 18) =
 * 100, n = 2 3 (16 + 18) = 102. The 8 bench shapes keep AITER's counts for 128 CUs. */
Test(recipe, split_rule_waves) {
  mlr_recipe r;
  mlr_error err = {""};
  waves_132(&r);
  cr_assert_eq(mlr_recipe_check(&r, &err), MLR_OK, "%s", err.msg);
  static const split_case want[] =
      {
          {4, 1024, 8},   {4, 8192, 32},  {32, 1024, 4},  {32, 8192, 4}, {64, 1024, 2},
          {64, 8192, 2},  {256, 1024, 1}, {256, 8192, 1}, {96, 8192, 1}, {133, 8192, 2},
          {160, 8192, 2}, {200, 8192, 1}, {133, 1024, 1}, {4, 100, 1},   {1, 0, 1},
          {140, 4096, 1}, {67, 8192, 3}, /* 1: 82; 2: 2 (32 + 18) = 100; 3: 2 (22 + 18) = 80; 5: 3
                                            (13 + 18) = 93 */
      };
  splits_are(&r, want, sizeof want / sizeof *want, 128);
  /* ties go to fewer splits: one SM, 2 tiles, no overhead: 1 x 2 = 2 x 1 */
  int64_t n, len;
  cr_assert_eq(mlr_recipe_set_list(&r, "split.cus=1;split.overhead=0", &err), MLR_OK, "%s",
               err.msg);
  mlr_recipe_splits(&r, 1, 1, 16, 256, &n, &len);
  cr_assert(n == 1 && len == 256, "%lld %lld", (long long)n, (long long)len);
  /* split.max bounds n; no overhead and a GPU wider than the batch: the most splits that shorten a
   * block */
  cr_assert_eq(mlr_recipe_set_list(&r, "split.cus=132;split.max=16", &err), MLR_OK, "%s", err.msg);
  mlr_recipe_splits(&r, 4, 4, 16, 8192, &n, &len);
  cr_assert(n == 16 && len == 512, "%lld %lld", (long long)n, (long long)len);
  /* costs past 2^63 saturate (equal: the first, one split), no overflow */
  mlr_recipe_splits(&r, INT64_MAX / 2, INT64_MAX / 2, 16, (int64_t)1 << 40, &n, &len);
  cr_assert(n == 1 && len == (int64_t)1 << 40, "%lld", (long long)n);
  /* split.overhead is a later key: absent from the canonical string at 0, after split.align when
   * set */
  char c[2048];
  mlr_recipe_canonical(&r, c, sizeof c);
  cr_assert_null(strstr(c, "split.overhead"), "%s", c);
  cr_assert(strstr(c, ";split.rule=waves;"), "%s", c);
  cr_assert_eq(mlr_recipe_set(&r, "split.overhead=18", &err), MLR_OK);
  mlr_recipe_canonical(&r, c, sizeof c);
  cr_assert(strstr(c, ";split.align=128;split.overhead=18;partial.normalized="), "%s", c);
  cr_assert_eq(mlr_recipe_set(&r, "split.overhead=-1", &err), MLR_EPARSE);
  cr_assert(strstr(err.msg, "split.overhead"), "%s", err.msg);
  cr_assert_eq(mlr_recipe_set(&r, "split.rule=wave", &err), MLR_EPARSE);
  cr_assert_str_eq(err.msg, "split.rule = 'wave' is not one of none|fixed|aiter_v1|waves|flashmla");
}

/* split.per = token: the waves rule counts a split's blocks as the query tokens (the fast kernel's
 * grid is tokens x splits), not the batches. Worked by hand for 132 SMs, 128-token tiles, overhead
 * 18: bs=33 q_len=4 kv=8192 (132 tokens): per batch n = 4 costs ceil(132 / 132) (16 + 18) = 34 (n =
 * 3: 40, n = 5: 2 (13 + 18) = 62); per token n = 1 costs 64 + 18 = 82, n = 2 2 (32 + 18) = 100, any
 * n n (ceil(64 / n) + 18) >= 64 + 18 n: 1. bs=66 q_len=2 kv=4096: per batch 2 (1 (16 + 18) = 34
 * against 32 + 18 = 50), per token 1 (2 (16 + 18) = 68). bs=20 q_len=4 kv=8192: per batch 6
 * (ceil(120 / 132) (11 + 18) = 29), per token 3 (80 blocks a split: n = 1 82, n = 2 2 (32 + 18) =
 * 100, n = 3 2 (22 + 18) = 80, n = 4 3 (16 + 18) = 102). With one query token a batch the two
 * agree. */
Test(recipe, split_rule_waves_per_token) {
  mlr_recipe r, aiter;
  mlr_error err = {""};
  waves_132(&r);
  static const int64_t c[][5] = {
      /* bs, tokens, L, n per batch, n per token */
      {33, 132, 8192, 4, 1}, {66, 132, 4096, 2, 1}, {20, 80, 8192, 6, 3},   {48, 96, 8192, 2, 1},
      {4, 4, 8192, 32, 32},  {64, 64, 8192, 2, 2},  {133, 133, 8192, 2, 2}, {0, 0, 1024, 8, 8}};
  for (size_t i = 0; i < sizeof c / sizeof *c; i++)
    for (int per = 0; per < 2; per++) {
      int64_t n, len;
      r.split_per = per;
      mlr_recipe_splits(&r, c[i][0], c[i][1], 16, c[i][2], &n, &len);
      cr_assert_eq(n, c[i][3 + per], "per %s bs=%lld tokens=%lld kv=%lld: %lld splits",
                   per ? "token" : "batch", (long long)c[i][0], (long long)c[i][1],
                   (long long)c[i][2], (long long)n);
      lengths_cover(n, len, c[i][2], 128);
    }
  /* the other rules count batches whatever split.per says (AITER's rule is AITER's) */
  aiter = r;
  cr_assert_eq(
      mlr_recipe_set_list(&aiter, "split.rule=aiter_v1;split.cus=128;split.per=token", &err),
      MLR_OK, "%s", err.msg);
  int64_t n, len;
  mlr_recipe_splits(&aiter, 32, 128, 16, 8192, &n, &len);
  cr_assert_eq(n, 4, "%lld", (long long)n);
  /* a later key: absent from the canonical string at batch, after split.overhead at token */
  char s[2048];
  cr_assert_eq(mlr_recipe_set(&r, "split.per=batch", &err), MLR_OK);
  mlr_recipe_canonical(&r, s, sizeof s);
  cr_assert_null(strstr(s, "split.per"), "%s", s);
  cr_assert_eq(mlr_recipe_set(&r, "split.per=token", &err), MLR_OK);
  mlr_recipe_canonical(&r, s, sizeof s);
  cr_assert(strstr(s, ";split.overhead=18;split.per=token;partial.normalized="), "%s", s);
  mlr_recipe_text(&r, s, sizeof s);
  cr_assert(strstr(s, "\nsplit.per = token\n"), "%s", s);
  cr_assert_eq(mlr_recipe_set(&r, "split.per=tokens", &err), MLR_EPARSE);
  cr_assert_str_eq(err.msg, "split.per = 'tokens' is not one of batch|token|rows");
}

/* split.per = rows: a split's blocks are a batch's q_len x H (query token, head) rows in groups of
 * split.heads (k_attn_rows' grid, fast-wgmma-fp8's). Worked by hand for 132 SMs, 128-token tiles,
 * overhead 18, split.heads 64: bs=32 q_len=4 H=16 kv=8192: 32 blocks a split (one a batch), n = 4
 * costs ceil(128 / 132) (16 + 18) = 34 (n = 3: 22 + 18 = 40, n = 5: 2 (13 + 18) = 62), where
 * per token 128 blocks take n = 1 (82; n = 2: 2 (32 + 18) = 100); bs=8 q_len=3 H=16: 8 blocks, n =
 * 16 costs 4 + 18 = 22 (n = 15: 5 + 18; n = 17: 2 (4 + 18)), per token 24 blocks n = 5 (13 + 18 =
 * 31); at 128 heads (bs=32 q_len=2: 4 blocks a batch, as per token) the two agree; without
 * split.heads rows counts batches. */
Test(recipe, split_rule_waves_per_rows) {
  mlr_recipe r;
  mlr_error err = {""};
  waves_132(&r);
  cr_assert_eq(mlr_recipe_set_list(&r, "split.heads=64;split.per=rows", &err), MLR_OK, "%s",
               err.msg);
  static const int64_t c[][6] = {/* bs, tokens, H, L, n by rows, n by token */
                                 {32, 128, 16, 8192, 4, 1},
                                 {8, 24, 16, 8192, 16, 5},
                                 {32, 64, 128, 8192, 1, 1},
                                 {4, 4, 128, 8192, 16, 16}};
  for (size_t i = 0; i < sizeof c / sizeof *c; i++)
    for (int per = 1; per < 3; per++) {
      int64_t n, len;
      r.split_per = per;
      mlr_recipe_splits(&r, c[i][0], c[i][1], c[i][2], c[i][3], &n, &len);
      cr_assert_eq(n, c[i][per == 2 ? 4 : 5], "per %d bs=%lld tokens=%lld H=%lld: %lld splits", per,
                   (long long)c[i][0], (long long)c[i][1], (long long)c[i][2], (long long)n);
      lengths_cover(n, len, c[i][3], 128);
    }
  int64_t n, len, nb, lenb;
  r.split_heads = 0; /* rows without split.heads: per batch */
  r.split_per = MLR_SPLIT_PER_ROWS;
  mlr_recipe_splits(&r, 32, 128, 16, 8192, &n, &len);
  r.split_per = MLR_SPLIT_PER_BATCH;
  mlr_recipe_splits(&r, 32, 128, 16, 8192, &nb, &lenb);
  cr_assert(n == nb && len == lenb && n == 4, "%lld %lld", (long long)n, (long long)nb);
  char s[2048];
  r.split_per = MLR_SPLIT_PER_ROWS;
  mlr_recipe_canonical(&r, s, sizeof s);
  cr_assert(strstr(s, ";split.per=rows;"), "%s", s);
}

/* split.heads = h: the waves rule counts ceil(H / h) blocks a token (or batch), so a split's grid
 * is tokens x ceil(H / h) blocks. Worked by hand for 132 SMs, 128-token tiles, overhead 18, h = 64,
 * one query token a batch: at 128 heads, bs=64 kv=1024 (128 blocks a split): n = 1 costs 8 + 18 =
 * 26, n = 2 2 (4 + 18) = 44; bs=32 kv=8192 (64 blocks): n = 1 82, n = 2 32 + 18 = 50, n = 3 2 (22 +
 * 18) = 80; bs=4 kv=8192 (8 blocks): n = 16 costs 4 + 18 = 22 (every n <= 16 is one wave, n = 17
 * two: 2 (4 + 18)). At H <= h, and at h = 0, the counts without it. */
Test(recipe, split_rule_waves_heads) {
  mlr_recipe r;
  mlr_error err = {""};
  waves_132(&r);
  r.split_per = MLR_SPLIT_PER_TOKEN;
  static const int64_t c[][6] = {
      /* bs, tokens, L, H, n at split.heads = 0, n at 64 */
      {64, 64, 1024, 128, 2, 1}, {32, 32, 8192, 128, 4, 2}, {4, 4, 8192, 128, 32, 16},
      {32, 32, 1024, 128, 4, 2}, {64, 64, 8192, 128, 2, 1}, {256, 256, 8192, 128, 1, 1},
      {4, 4, 1024, 128, 8, 8},   {32, 32, 8192, 64, 4, 4},  {64, 64, 1024, 16, 2, 2},
      {32, 64, 8192, 128, 2, 1}, {16, 16, 4096, 128, 8, 4}, {48, 48, 2048, 128, 2, 1},
      {33, 33, 8192, 65, 4, 2},  {4, 4, 8192, 0, 32, 32},   {1, 1, 8192, 128, 64, 64}};
  for (size_t i = 0; i < sizeof c / sizeof *c; i++)
    for (int h = 0; h < 2; h++) {
      int64_t n, len;
      r.split_heads = 64 * h;
      mlr_recipe_splits(&r, c[i][0], c[i][1], c[i][3], c[i][2], &n, &len);
      cr_assert_eq(n, c[i][4 + h], "split.heads=%d bs=%lld tokens=%lld kv=%lld H=%lld: %lld",
                   64 * h, (long long)c[i][0], (long long)c[i][1], (long long)c[i][2],
                   (long long)c[i][3], (long long)n);
      lengths_cover(n, len, c[i][2], 128);
    }
  /* a later key: absent from the canonical string at 0, after split.per when set */
  char s[2048];
  r.split_heads = 0;
  mlr_recipe_canonical(&r, s, sizeof s);
  cr_assert_null(strstr(s, "split.heads"), "%s", s);
  cr_assert_eq(mlr_recipe_set(&r, "split.heads=64", &err), MLR_OK, "%s", err.msg);
  mlr_recipe_canonical(&r, s, sizeof s);
  cr_assert(strstr(s, ";split.per=token;split.heads=64;partial.normalized="), "%s", s);
  cr_assert_eq(mlr_recipe_set(&r, "split.heads=-1", &err), MLR_EPARSE);
  cr_assert_str_eq(err.msg, "split.heads = '-1' is not an integer in 0..65536");
}

Test(recipe, q_policies_parse_and_print) {
  mlr_recipe r;
  mlr_error err = {""};
  char buf[64];
  cr_assert_eq(mlr_recipe_builtin("aiter-a8w8-ps", &r), MLR_OK);
  const char *ok[] = {"static:absmax=4", "static:absmax=0.5", "dynamic", "per_head", "per_token"};
  for (size_t k = 0; k < sizeof ok / sizeof *ok; k++) {
    cr_assert_eq(mlr_recipe_set_policy(&r, ok[k], &err), MLR_OK, "%s: %s", ok[k], err.msg);
    cr_assert_eq(mlr_recipe_check(&r, &err), MLR_OK, "%s", err.msg);
    mlr_recipe_policy_text(&r, buf, sizeof buf);
    cr_assert_str_eq(buf, ok[k]);
  }
  cr_assert_eq(mlr_recipe_set_policy(&r, "static:absmax=4", &err), MLR_OK);
  cr_assert(r.q_scale == MLR_QS_STATIC && r.q_absmax == 4.0);
  const char *bad[] = {"static",
                       "static:absmax=",
                       "static:absmax=0",
                       "static:absmax=-2",
                       "static:absmax=inf",
                       "static:absmax=4x",
                       "none",
                       ""};
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++)
    cr_assert_eq(mlr_recipe_set_policy(&r, bad[k], &err), MLR_EPARSE, "%s", bad[k]);
  cr_assert(r.q_scale == MLR_QS_STATIC && r.q_absmax == 4.0, "a refused policy changes nothing");
  cr_assert_eq(mlr_recipe_builtin("fp32-seq", &r), MLR_OK);
  cr_assert_eq(mlr_recipe_set_policy(&r, "dynamic", &err), MLR_EINVAL);
  cr_assert(strstr(err.msg, "has bf16 Q"), "%s", err.msg);
}

/* Keys added later (softmax.exp_unit, softmax.sum) enter the canonical string only when set, so
 * the recipes hashed before them keep their hashes (canonical_form_is_pinned above); set, they
 * change the hash, round-trip through the text form, and exp_unit needs a base-2 exp. */
Test(recipe, later_keys) {
  mlr_recipe r, r2;
  mlr_error err = {""};
  char c[2048], c2[2048], h[65], h2[65], text[4096];
  cr_assert_eq(mlr_recipe_builtin("fp32-seq", &r), MLR_OK);
  mlr_recipe_canonical(&r, c, sizeof c);
  cr_assert_null(strstr(c, "softmax.exp_unit"));
  cr_assert_null(strstr(c, "softmax.sum"));
  mlr_recipe_hash(&r, h);
  cr_assert_eq(
      mlr_recipe_set_list(&r, "softmax.exp=2;softmax.exp_unit=sm90-ex2;softmax.sum=warp16", &err),
      MLR_OK, "%s", err.msg);
  cr_assert_eq(mlr_recipe_check(&r, &err), MLR_OK, "%s", err.msg);
  mlr_recipe_canonical(&r, c, sizeof c);
  cr_assert(strstr(c, ";softmax.clamp=0x1.19799812dea11p-40;softmax.exp_unit=sm90-ex2;softmax.sum="
                      "warp16;p.format="),
            "%s", c);
  mlr_recipe_hash(&r, h2);
  cr_assert_str_neq(h, h2);
  mlr_recipe_text(&r, text, sizeof text);
  cr_assert_eq(mlr_recipe_parse(text, "t.recipe", &r2, &err), MLR_OK, "%s", err.msg);
  mlr_recipe_canonical(&r2, c2, sizeof c2);
  cr_assert_str_eq(c, c2);
  cr_assert_eq(mlr_recipe_set(&r, "softmax.exp=e", &err), MLR_OK);
  cr_assert_eq(mlr_recipe_check(&r, &err), MLR_EINVAL);
  cr_assert_str_eq(err.msg,
                   "softmax.exp_unit = sm90-ex2 computes 2^x: it needs softmax.exp = 2 or e_via_2");
  cr_assert_eq(mlr_recipe_set(&r, "softmax.sum=tree", &err), MLR_EPARSE);
  cr_assert_str_eq(err.msg, "softmax.sum = 'tree' is not one of seq|warp16|tl32x4|lanes4|tl4");
}
