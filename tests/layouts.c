/* layouts: every input layout mlr_inputs_from takes gives the contract's views (and so the
 * model's bits) of the equivalent contract file; the optional scales, sm_scale, causal and fp8 Q
 * each reach the model; malformed layouts name the tensor and the element. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "mlr_emulate.h"
#include "mlr_formats.h"
#include "mlr_gen.h"
#include "mlr_inputs.h"
#include "test_gen.h"

/* src's tensor name borrowed into dst under the same name (a layout test's starting point) */
static void take(mlr_tensor_file *dst, const mlr_tensor_file *src, const char *name) {
  const mlr_tensor *t = mlr_tf_find(src, name);
  cr_assert_not_null(t, "%s", name);
  cr_assert_eq(mlr_tf_borrow(dst, name, t->dtype, t->ndim, t->shape, t->data, NULL), MLR_OK);
}

static void *add(mlr_tensor_file *tf, const char *name, mlr_dtype d, int ndim,
                 const int64_t *shape) {
  mlr_tensor *t;
  cr_assert_eq(mlr_tf_add(tf, name, d, ndim, shape, &t), MLR_OK, "%s", name);
  return t->data;
}

static void scalar_f32(mlr_tensor_file *tf, const char *name, float v) {
  const int64_t one[1] = {1};
  *(float *)add(tf, name, MLR_DT_F32, 1, one) = v;
}

/* the model of recipe name (with sets) on the inputs; the o bits in *o (malloc'd), *n bytes */
static mlr_status model(const char *name, const char *sets, const mlr_inputs *in, void **o,
                        size_t *n, mlr_error *err) {
  mlr_recipe r;
  cr_assert_eq(mlr_recipe_builtin(name, &r), MLR_OK);
  if (sets) cr_assert_eq(mlr_recipe_set_list(&r, sets, err), MLR_OK, "%s", err->msg);
  mlr_emu_result res = {0};
  const mlr_status st = mlr_emulate(&r, in, NULL, &res, err);
  if (st == MLR_OK) {
    *n = mlr_emu_o_bytes(&res);
    *o = malloc(*n);
    memcpy(*o, res.o, *n);
  }
  mlr_emu_result_free(&res);
  return st;
}

static int same_model(const char *name, const char *sets, const mlr_inputs *a,
                      const mlr_inputs *b) {
  void *oa, *ob;
  size_t na, nb;
  mlr_error err = {""};
  cr_assert_eq(model(name, sets, a, &oa, &na, &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(model(name, sets, b, &ob, &nb, &err), MLR_OK, "%s", err.msg);
  const int same = na == nb && memcmp(oa, ob, na) == 0;
  free(oa);
  free(ob);
  return same;
}

static void from_ok(const mlr_tensor_file *src, mlr_tensor_file *dst, mlr_inputs *in) {
  mlr_error err = {""};
  cr_assert_eq(mlr_inputs_from(src, "src", 0, dst, in, &err), MLR_OK, "%s", err.msg);
}

static void from_bad(const mlr_tensor_file *src, const char *fragment) {
  mlr_tensor_file dst;
  mlr_inputs in;
  mlr_error err = {""};
  cr_assert_eq(mlr_inputs_from(src, "src", 0, &dst, &in, &err), MLR_ECONTRACT, "expected: %s",
               fragment);
  cr_assert(strstr(err.msg, fragment), "'%s' not in: %s", fragment, err.msg);
  mlr_tf_free(&dst);
}

static void same_ints(const int32_t *a, const int32_t *b, int64_t n, const char *what) {
  for (int64_t i = 0; i < n; i++) cr_assert_eq(a[i], b[i], "%s[%lld]", what, (long long)i);
}

/* a paged cache as [P,page,1,576], 4-D q, block_table (padded with -1 past each sequence's
 * pages) and seq_lens as I64: the contract's views, the same memory for q and kv */
Test(layouts, block_table_and_4d_shapes) {
  mlr_tensor_file a, src, dst;
  mlr_inputs ia, ib;
  gen_file("lens=5:40:16,q=2,page=16,seed=3", &a);
  from_ok(&a, &dst, &ia);
  mlr_tf_free(&dst);
  mlr_tf_init(&src);
  take(&src, &a, "kv_scale");
  const mlr_tensor *q = mlr_tf_find(&a, "q"), *kv = mlr_tf_find(&a, "kv");
  const int64_t qs[4] = {3, 2, 16, 576}, ks[4] = {kv->shape[0] / 16, 16, 1, 576};
  cr_assert_eq(mlr_tf_borrow(&src, "q", q->dtype, 4, qs, q->data, NULL), MLR_OK);
  cr_assert_eq(mlr_tf_borrow(&src, "kv", kv->dtype, 4, ks, kv->data, NULL), MLR_OK);
  const int64_t bts[2] = {3, 6}, sls[1] = {3};
  int64_t *bt = add(&src, "block_table", MLR_DT_I64, 2, bts);
  int64_t *sl = add(&src, "seq_lens", MLR_DT_I64, 1, sls);
  for (int b = 0; b < 3; b++) {
    sl[b] = mlr_inputs_kv_len(&ia, b);
    const int64_t pages = (sl[b] + 15) / 16;
    for (int j = 0; j < 6; j++) bt[b * 6 + j] = j < pages ? ia.kv_indices[ia.kv_indptr[b] + j] : -1;
  }
  from_ok(&src, &dst, &ib);
  cr_assert(ib.q == ia.q && ib.kv == ia.kv, "q and kv are borrowed, not copied");
  cr_assert_eq(ib.page, 16);
  cr_assert_eq(ib.P, ia.P);
  same_ints(ib.kv_indptr, ia.kv_indptr, 4, "kv_indptr");
  same_ints(ib.kv_indices, ia.kv_indices, ia.P, "kv_indices");
  same_ints(ib.kv_last_page_len, ia.kv_last_page_len, 3, "kv_last_page_len");
  same_ints(ib.qo_indptr, ia.qo_indptr, 4, "qo_indptr");
  bt[6 + 2] = 99; /* within batch 1's 3 pages: outside the cache */
  mlr_tf_free(&dst);
  from_bad(&src, "tensor 'block_table': element [1, 2] is 99, outside the");
  bt[6 + 2] = ia.kv_indices[ia.kv_indptr[1] + 2];
  sl[2] = 6 * 16 + 1;
  from_bad(&src, "tensor 'seq_lens': element 2 is 97 tokens");
  sl[2] = 16;
  mlr_tf_set_meta(&src, "mlaref.page_size", "8");
  from_bad(&src, "page_size 8 disagrees with tensor 'kv'");
  mlr_tf_free(&src);
  mlr_tf_free(&a);
}

/* req_to_token (page size 1) and token CSR with I64 indices, a pool with spare rows, q split into
 * q_nope and q_pe: the model's bits of the contract file */
Test(layouts, req_to_token_csr_split_q_and_pool) {
  mlr_tensor_file a, src, dst, dst2;
  mlr_inputs ia, ib;
  gen_file("lens=3:7:0:12,seed=2", &a);
  from_ok(&a, &dst2, &ia);
  mlr_tf_init(&src);
  take(&src, &a, "kv_scale");
  const mlr_tensor *q = mlr_tf_find(&a, "q"), *kv = mlr_tf_find(&a, "kv");
  const int64_t T = q->shape[0], N = kv->shape[0];
  const int64_t ns[3] = {T, 16, 512}, ps[3] = {T, 16, 64}, pool[3] = {N + 9, 1, 576};
  uint16_t *qn = add(&src, "q_nope", MLR_DT_BF16, 3, ns),
           *qp = add(&src, "q_pe", MLR_DT_BF16, 3, ps);
  for (int64_t r = 0; r < T * 16; r++) {
    memcpy(qn + r * 512, ia.q + r * 576, 512 * 2);
    memcpy(qp + r * 64, ia.q + r * 576 + 512, 64 * 2);
  }
  uint8_t *k = add(&src, "kv", kv->dtype, 3, pool);
  memcpy(k, kv->data, kv->nbytes);
  memset(k + kv->nbytes, 0x7F, 9 * 576); /* NaN rows no batch reads */
  const int64_t rts[2] = {4, 20}, sls[1] = {4};
  int32_t *rt = add(&src, "req_to_token", MLR_DT_I32, 2, rts);
  int64_t *sl = add(&src, "seq_lens", MLR_DT_I64, 1, sls);
  for (int b = 0; b < 4; b++) {
    sl[b] = mlr_inputs_kv_len(&ia, b);
    for (int j = 0; j < 20; j++) rt[b * 20 + j] = j < sl[b] ? ia.kv_indptr[b] + j : 1 << 30;
  }
  from_ok(&src, &dst, &ib);
  cr_assert_eq(ib.N, N + 9);
  cr_assert(same_model("aiter-a8w8-ps", NULL, &ia, &ib));
  cr_assert(same_model("triton-fp8-split", NULL, &ia, &ib));
  mlr_tf_free(&dst);
  mlr_tensor_file csr;
  mlr_tf_init(&csr);
  take(&csr, &src, "kv_scale");
  take(&csr, &src, "q_nope");
  take(&csr, &src, "q_pe");
  take(&csr, &src, "kv");
  const int64_t b1[1] = {5};
  int64_t *ip = add(&csr, "kv_indptr", MLR_DT_I64, 1, b1);
  for (int b = 0; b <= 4; b++) ip[b] = ia.kv_indptr[b];
  from_ok(&csr, &dst, &ib);
  cr_assert(same_model("aiter-a8w8-ps", NULL, &ia, &ib), "token CSR, I64, spare rows");
  mlr_tf_free(&dst);
  ip[4] = (int64_t)1 << 40;
  from_bad(&csr, "tensor 'kv_indptr': element 4 is 1099511627776, beyond the I32 range");
  take(&csr, &a, "q");
  from_bad(&csr, "give q, or q_nope and q_pe, not both");
  mlr_tf_free(&csr);
  mlr_tf_free(&src);
  mlr_tf_free(&dst2);
  mlr_tf_free(&a);
}

/* the optional scalars: the defaults given explicitly change no bit; other values reach the
 * model; malformed ones are refused */
Test(layouts, scales_sm_scale_and_causal) {
  mlr_tensor_file a, src, dst, d0;
  mlr_inputs ia, ib;
  gen_file("bs=2,kv=300,q=3,seed=5", &a);
  from_ok(&a, &d0, &ia);
  const float kvs = ia.kv_scale;
  mlr_tf_init(&src);
  for (size_t i = 0; i < a.n; i++) take(&src, &a, a.t[i].name);
  scalar_f32(&src, "k_scale", kvs);
  scalar_f32(&src, "v_scale", kvs);
  scalar_f32(&src, "kpe_scale", kvs);
  const int64_t one[1] = {1};
  double *sm = add(&src, "sm_scale", MLR_DT_F64, 1, one);
  *sm = 1.0 / sqrt(576.0);
  int32_t *causal = add(&src, "causal", MLR_DT_I32, 1, one);
  *causal = 1;
  from_ok(&src, &dst, &ib);
  cr_assert(same_model("aiter-a8w8-ps", NULL, &ia, &ib), "the defaults, given");
  cr_assert(same_model("triton-fp8-split", NULL, &ia, &ib), "the defaults, given");
  mlr_tf_free(&dst);
  const char *const cases[] = {"sm_scale", "k_scale", "v_scale", "kpe_scale", "causal"};
  for (int c = 0; c < 5; c++) {
    float *f = c >= 1 && c <= 3 ? (float *)mlr_tf_find(&src, cases[c])->data : NULL;
    if (c == 0) *sm = 0.1352;
    if (f) *f = kvs * 1.5f;
    if (c == 4) *causal = 0;
    from_ok(&src, &dst, &ib);
    cr_assert(!same_model("triton-fp8-split", NULL, &ia, &ib), "%s", cases[c]);
    mlr_tf_free(&dst);
    if (c == 0) *sm = 1.0 / 24.0;
    if (f) *f = kvs;
    if (c == 4) *causal = 1;
  }
  *sm = -1;
  from_bad(&src, "tensor 'sm_scale' is -1: the softmax scale must be finite and > 0");
  *sm = 1.0 / 24.0;
  *(float *)mlr_tf_find(&src, "k_scale")->data = 0;
  from_bad(&src, "tensor 'k_scale' is 0: a scale must be nonzero");
  *(float *)mlr_tf_find(&src, "k_scale")->data = NAN;
  from_bad(&src, "tensor 'k_scale' is nan: non-finite inputs are refused");
  *(float *)mlr_tf_find(&src, "k_scale")->data = kvs;
  *causal = 2;
  from_bad(&src, "tensor 'causal' must be I32 [1] holding 0 or 1");
  mlr_tf_free(&src);
  mlr_tf_free(&d0);
  mlr_tf_free(&a);
}

/* kpe_scale apart from k_scale: folded recipes refuse, operand recipes take it; v.scale_at and
 * logit.scale_precision are recipe keys the model honours */
Test(layouts, scale_placements) {
  mlr_tensor_file a, src, dst, d0;
  mlr_inputs ia, ib;
  gen_file("bs=2,kv=900,seed=6", &a);
  from_ok(&a, &d0, &ia);
  mlr_tf_init(&src);
  for (size_t i = 0; i < a.n; i++) take(&src, &a, a.t[i].name);
  scalar_f32(&src, "kpe_scale", ia.kv_scale * 0.75f);
  from_ok(&src, &dst, &ib);
  void *o = NULL;
  size_t n;
  mlr_error err = {""};
  cr_assert_eq(model("aiter-a8w8-ps", NULL, &ib, &o, &n, &err), MLR_EINVAL);
  cr_assert(strstr(err.msg, "needs kpe_scale = k_scale"), "%s", err.msg);
  cr_assert(!same_model("triton-fp8-split", NULL, &ia, &ib));
  mlr_tf_free(&dst);
  /* v_scale after the merge differs from on each split's result (folded) somewhere */
  void *o1, *o2;
  size_t n1, n2;
  cr_assert_eq(model("triton-fp8-split", NULL, &ia, &o1, &n1, &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(model("triton-fp8-split", "v.scale_at=merged", &ia, &o2, &n2, &err), MLR_OK);
  cr_assert(n1 == n2 && memcmp(o1, o2, n1) != 0, "v.scale_at=merged changes bits");
  free(o1);
  free(o2);
  mlr_tf_free(&src);
  mlr_tf_free(&d0);
  mlr_tf_free(&a);
}

/* Q pre-quantized to fp8 with its descale: the same bits as the recipe quantizing the bf16 Q
 * with that scale itself */
Test(layouts, fp8_q_with_its_scale) {
  mlr_tensor_file a, src, dst, d0;
  mlr_inputs ia, ib;
  gen_file("bs=3,kv=200,seed=7", &a);
  from_ok(&a, &d0, &ia);
  mlr_recipe r;
  cr_assert_eq(mlr_recipe_builtin("aiter-a8w8-ps", &r), MLR_OK);
  cr_assert_eq(mlr_recipe_set_policy(&r, "static:absmax=6", NULL), MLR_OK);
  const int64_t nq = ia.T * ia.H * 576;
  float *qv = malloc((size_t)nq * sizeof(float)), *qs = malloc((size_t)(ia.T * ia.H) * 4), *sc;
  int64_t ns, clip;
  cr_assert_eq(mlr_emu_q_values(&r, &ia, qv, qs, &sc, &ns, &clip), MLR_OK);
  mlr_tf_init(&src);
  for (size_t i = 0; i < a.n; i++)
    if (strcmp(a.t[i].name, "q")) take(&src, &a, a.t[i].name);
  const int64_t qsh[3] = {ia.T, ia.H, 576};
  uint8_t *q8 = add(&src, "q", MLR_DT_F8_E4M3, 3, qsh);
  for (int64_t k = 0; k < nq; k++) /* exact: the values are e4m3 values */
    q8[k] = (uint8_t)mlr_encode_f32(qv[k], MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE, 0);
  from_bad(&src, "tensor 'q' is fp8: its descale q_scale F32 [1] is required");
  scalar_f32(&src, "q_scale", sc[0]);
  from_ok(&src, &dst, &ib);
  cr_assert_not_null(ib.q8);
  mlr_emu_result ra = {0}, rb = {0};
  mlr_error err = {""};
  cr_assert_eq(mlr_emulate(&r, &ia, NULL, &ra, &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(mlr_emulate(&r, &ib, NULL, &rb, &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(memcmp(ra.o, rb.o, mlr_emu_o_bytes(&ra)), 0,
               "fp8 Q = the recipe's own quantization");
  mlr_emu_result_free(&ra);
  mlr_emu_result_free(&rb);
  free(qv);
  free(qs);
  free(sc);
  mlr_tf_free(&dst);
  mlr_tf_free(&src);
  mlr_tf_free(&d0);
  mlr_tf_free(&a);
}

/* 128 heads and 8 query tokens a batch through gen and the model */
Test(layouts, heads_128_and_q_len_8) {
  mlr_tensor_file a, d0;
  mlr_inputs ia;
  gen_file("bs=2,kv=40,q=8,heads=128,seed=8", &a);
  from_ok(&a, &d0, &ia);
  cr_assert_eq(ia.H, 128);
  cr_assert_eq(ia.T, 16);
  void *o;
  size_t n;
  mlr_error err = {""};
  cr_assert_eq(model("triton-fp8-split", NULL, &ia, &o, &n, &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(n, (size_t)16 * 128 * 512 * 2);
  free(o);
  mlr_tf_free(&d0);
  mlr_tf_free(&a);
}

/* a folder of .npy files with metadata.json (mlr_inputs_write_npy) loads as the file it came from:
 * fp8 codes keep their format (OCP and FNUZ), the page table its page size */
Test(layouts, npy_folder_round_trip) {
  static const char *const specs[] = {"lens=5:40,q=2,page=16,seed=3", "bs=2,kv=9,fmt=e4m3fnuz"};
  for (int k = 0; k < 2; k++) {
    mlr_tensor_file a, d0, raw, dst;
    mlr_inputs ia, ib;
    gen_file(specs[k], &a);
    from_ok(&a, &d0, &ia);
    char dir[] = "/tmp/mlr_layouts_npy_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    mlr_error err = {""};
    cr_assert_eq(mlr_inputs_write_npy(&a, dir, &err), MLR_OK, "%s", err.msg);
    cr_assert_eq(mlr_inputs_load(dir, 0, &raw, &dst, &ib, &err), MLR_OK, "%s", err.msg);
    cr_assert_eq(ib.kv_format, ia.kv_format);
    cr_assert_eq(ib.page, ia.page);
    cr_assert(same_model("triton-fp8-split", NULL, &ia, &ib), "%s", specs[k]);
    mlr_tf_free(&dst);
    mlr_tf_free(&raw);
    mlr_tf_free(&d0);
    mlr_tf_free(&a);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
  }
}
