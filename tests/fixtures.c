/* fixtures: the generator (known answers, determinism, paging), tensor files (round trips,
 * hostile files), the input contract (every violation), suites. */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mlr_manifest.h"
#include "mlr_gen.h"
#include "mlr_inputs.h"
#include "test_gen.h"
#include "mlr_rng.h"
#include "mlr_suites.h"

static const void *data(const mlr_tensor_file *tf, const char *name) {
  const mlr_tensor *t = mlr_tf_find(tf, name);
  cr_assert_not_null(t, "no tensor %s", name);
  return t->data;
}

/* Generator v1 (MLR_RNG_VERSION 1): the first values for bs=1, kv=2, seed=4217. A change here
 * changes every generated input: bump MLR_RNG_VERSION and regenerate digests, never just this. */
Test(fixtures, generator_known_answers) {
  mlr_tensor_file tf;
  gen_file("bs=1,kv=2,seed=4217", &tf);
  const uint16_t *q = data(&tf, "q");
  const uint8_t *kv = data(&tf, "kv");
  const uint16_t q0[4] = {0xbf63, 0x3d99, 0x3ecb, 0x3e6d};
  const uint8_t kv0[4] = {0x71, 0x5a, 0x76, 0xf9}, kv1[4] = {0x71, 0xfa, 0x71, 0x60};
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(q[i], q0[i], "q[%d] = 0x%04x", i, q[i]);
    cr_assert_eq(kv[i], kv0[i], "kv[0][%d] = 0x%02x", i, kv[i]);
    cr_assert_eq(kv[576 + i], kv1[i], "kv[1][%d] = 0x%02x", i, kv[576 + i]);
  }
  cr_assert_eq(mlr_f32_bits(*(const float *)data(&tf, "kv_scale")), 0x3bf50000u);
  /* and by their definition: q = bf16(normal(seed, tensor 1, element 0)) */
  cr_assert_eq(q[0], mlr_encode_f64(mlr_rng_normal(4217, MLR_TENSOR_Q, 0, 0), MLR_FMT_BF16,
                                    MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT, 0));
  cr_assert_str_eq(mlr_tf_get_meta(&tf, "mlaref.shape"),
                   "bs=1,kv=2,q=1,page=1,seed=4217,dist=normal,fmt=e4m3");
  mlr_tf_free(&tf);
}

static int same_files(const mlr_tensor_file *a, const mlr_tensor_file *b) {
  if (a->n != b->n || a->nmeta != b->nmeta) return 0;
  for (size_t i = 0; i < a->n; i++) {
    const mlr_tensor *x = &a->t[i], *y = mlr_tf_find(b, x->name);
    if (!y || x->dtype != y->dtype || x->ndim != y->ndim || x->nbytes != y->nbytes ||
        memcmp(x->data, y->data, x->nbytes))
      return 0;
    for (int d = 0; d < x->ndim; d++)
      if (x->shape[d] != y->shape[d]) return 0;
  }
  for (size_t i = 0; i < a->nmeta; i++) {
    const char *v = mlr_tf_get_meta(b, a->meta[i].key);
    if (!v || strcmp(v, a->meta[i].value)) return 0;
  }
  return 1;
}

Test(fixtures, same_bits_for_any_thread_count) {
  mlr_tensor_file a, b;
  omp_set_num_threads(1);
  gen_file("lens=3:700:1:129,q=2,page=16,seed=99,dist=t3,bf16kv=1", &a);
  omp_set_num_threads(2);
  gen_file("lens=3:700:1:129,q=2,page=16,seed=99,dist=t3,bf16kv=1", &b);
  cr_assert(same_files(&a, &b));
  mlr_tf_free(&a);
  mlr_tf_free(&b);
}

/* Paged and unpaged layouts of one shape and seed hold the same logical values; the page
 * table is a permutation; unused slots hold NaN. */
Test(fixtures, paging_keeps_logical_values) {
  mlr_tensor_file a, p;
  gen_file("lens=5:40:33,seed=3,bf16kv=1", &a);
  gen_file("lens=5:40:33,page=16,seed=3,bf16kv=1", &p);
  mlr_inputs ia, ip;
  mlr_error err;
  cr_assert_eq(mlr_inputs_check(&a, "a", 0, &ia, &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(mlr_inputs_check(&p, "p", 0, &ip, &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(ip.P, 1 + 3 + 3);
  cr_assert_eq(ia.kv_scale, ip.kv_scale, "the NaN slots do not enter amax");
  int seen[7] = {0};
  for (int64_t i = 0; i < ip.P; i++) seen[ip.kv_indices[i]]++;
  for (int i = 0; i < 7; i++) cr_assert_eq(seen[i], 1, "page %d", i);
  for (int64_t b = 0; b < 3; b++) {
    cr_assert_eq(mlr_inputs_kv_len(&ia, b), mlr_inputs_kv_len(&ip, b));
    for (int64_t pos = 0; pos < mlr_inputs_kv_len(&ia, b); pos++) {
      const int64_t ra = mlr_inputs_kv_row(&ia, b, pos), rp = mlr_inputs_kv_row(&ip, b, pos);
      cr_assert(!memcmp((const uint8_t *)ia.kv + ra * 576, (const uint8_t *)ip.kv + rp * 576, 576),
                "b %lld pos %lld", (long long)b, (long long)pos);
      cr_assert(!memcmp(ia.kv_bf16 + ra * 576, ip.kv_bf16 + rp * 576, 576 * 2));
    }
  }
  /* batch 0 has 5 tokens in its page */
  const int64_t unused_row = (int64_t)ip.kv_indices[0] * 16 + 5;
  cr_assert(mlr_is_nan(MLR_FMT_E4M3, ((const uint8_t *)ip.kv)[unused_row * 576]));
  mlr_tf_free(&a);
  mlr_tf_free(&p);
}

/* The task's quantize_fp8 on hand-made values: amax = 4.5 (bf16 exact), so scale =
 * bf16(4.5 * f32(1/448)) and each value is bf16(v / scale), clamped, rounded to e4m3. */
Test(fixtures, quantize_fp8_task_rule) {
  const float vals[] = {4.5f, -4.5f, 1.0f, -0.0f, 0.001f, 2.25f};
  uint16_t src[6];
  uint8_t dst[6];
  for (int i = 0; i < 6; i++)
    src[i] =
        (uint16_t)mlr_encode_f32(vals[i], MLR_FMT_BF16, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT, 0);
  const float scale = mlr_quantize_fp8_task(dst, src, 6, MLR_FMT_E4M3);
  const float want_scale =
      mlr_decode(MLR_FMT_BF16, mlr_encode_f32(4.5f * (1.0f / 448.0f), MLR_FMT_BF16,
                                              MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT, 0));
  cr_assert_eq(scale, want_scale);
  for (int i = 0; i < 6; i++) {
    float x = mlr_round_f32(vals[i] / scale, MLR_FMT_BF16, MLR_OVF_NONSAT);
    x = x > 448.0f ? 448.0f : x < -448.0f ? -448.0f : x;
    cr_assert_eq(dst[i], mlr_encode_f32(x, MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT, 0),
                 "value %d", i);
  }
  cr_assert_eq(dst[0], 0x7E, "amax maps to max (or just below): 4.5/scale rounds to 448 here");
  cr_assert_eq(dst[3], 0x80, "-0 stays -0");
  /* all zeros: amax is clamped to bf16(1e-12), so the scale stays finite and codes are 0 */
  uint16_t z[3] = {0, 0x8000, 0};
  const float zs = mlr_quantize_fp8_task(dst, z, 3, MLR_FMT_E4M3FNUZ);
  cr_assert(zs > 0.0f && isfinite(zs));
  cr_assert(dst[0] == 0 && dst[1] == 0 && dst[2] == 0, "FNUZ has no -0");
  dst[0] = 0x55;
  cr_assert(isnan(mlr_quantize_fp8_task(dst, z, 3, MLR_FMT_E5M2)), "not a task format: NaN");
  cr_assert_eq(dst[0], 0x55, "and nothing written");
}

static char tmpdir[64];
static void make_tmpdir(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/mlr_fixtures_XXXXXX");
  cr_assert_not_null(mkdtemp(tmpdir));
}
static void rm_tmpdir(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  cr_assert_eq(system(cmd), 0);
}

Test(fixtures, roundtrip_safetensors_and_npy, .init = make_tmpdir, .fini = rm_tmpdir) {
  mlr_tensor_file a, b;
  mlr_error err = {""};
  gen_file("lens=2:30,q=3,page=16,fmt=e4m3fnuz,seed=5,bf16kv=1", &a);
  char path[512];
  snprintf(path, sizeof path, "%s/x.safetensors", tmpdir);
  cr_assert_eq(mlr_safetensors_write(path, &a, &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(mlr_safetensors_read(path, &b, &err), MLR_OK, "%s", err.msg);
  cr_assert(same_files(&a, &b));
  cr_assert_str_eq(mlr_tf_get_meta(&b, "mlaref.format.kv"), "e4m3fnuz");
  cr_assert_eq(mlr_tf_find(&b, "kv")->dtype, MLR_DT_U8, "FNUZ travels as U8 codes");
  /* every tensor through .npy and back */
  for (size_t i = 0; i < a.n; i++) {
    mlr_tensor_file c;
    mlr_tf_init(&c);
    snprintf(path, sizeof path, "%s/%s.npy", tmpdir, a.t[i].name);
    cr_assert_eq(mlr_npy_write(path, &a.t[i], &err), MLR_OK, "%s", err.msg);
    cr_assert_eq(mlr_npy_read(path, a.t[i].dtype, a.t[i].name, &c, &err), MLR_OK, "%s", err.msg);
    cr_assert_eq(c.t[0].nbytes, a.t[i].nbytes);
    cr_assert(!memcmp(c.t[0].data, a.t[i].data, a.t[i].nbytes));
    cr_assert_eq(c.t[0].ndim, a.t[i].ndim);
    mlr_tf_free(&c);
  }
  mlr_tf_free(&a);
  mlr_tf_free(&b);
}

/* A file written by PyTorch's safetensors writer (torch 2.11, safetensors.torch.save_file on the
 * H200, scripts/gpu/make_torch_testdata.py): one tensor of each dtype with known values. */
Test(fixtures, reads_a_file_written_by_pytorch) {
  mlr_tensor_file tf;
  mlr_error err = {""};
  cr_assert_eq(
      mlr_safetensors_read(MLAREF_SOURCE_DIR "/tests/data/torch_written.safetensors", &tf, &err),
      MLR_OK, "%s", err.msg);
  const mlr_tensor *t = mlr_tf_find(&tf, "bf16");
  cr_assert(t && t->dtype == MLR_DT_BF16 && t->ndim == 2 && t->shape[0] == 3 && t->shape[1] == 4);
  for (int i = 0; i < 12; i++) /* torch.arange(12) / 4 - 1 */
    cr_assert_eq(mlr_decode(MLR_FMT_BF16, ((const uint16_t *)t->data)[i]), (float)i / 4.0f - 1.0f);
  t = mlr_tf_find(&tf, "e4m3");
  cr_assert(t && t->dtype == MLR_DT_F8_E4M3 && t->ndim == 1 && t->shape[0] == 256);
  for (int i = 0; i < 256;
       i++) { /* every code, via torch.arange(256).to(uint8).view(float8_e4m3fn) */
    cr_assert_eq(((const uint8_t *)t->data)[i], i);
  }
  static const struct {
    const char *n;
    mlr_dtype d;
  } kinds[] = {{"f16", MLR_DT_F16},     {"f32", MLR_DT_F32}, {"f64", MLR_DT_F64},
               {"i32", MLR_DT_I32},     {"i64", MLR_DT_I64}, {"u8", MLR_DT_U8},
               {"e5m2", MLR_DT_F8_E5M2}};
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
    t = mlr_tf_find(&tf, kinds[k].n);
    cr_assert(t && t->dtype == kinds[k].d, "tensor %s", kinds[k].n);
  }
  cr_assert_eq(((const float *)mlr_tf_find(&tf, "f32")->data)[5], 5.0f / 4.0f - 1.0f);
  cr_assert_eq(((const int32_t *)mlr_tf_find(&tf, "i32")->data)[11], 11 * 1000 - 7);
  cr_assert_str_eq(mlr_tf_get_meta(&tf, "writer"), "torch");
  mlr_tf_free(&tf);
}

/* --- hostile files: each gives its error, names the file, and reads nothing --- */

static void write_raw(const char *path, const void *bytes, size_t n) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(bytes, 1, n, f), n);
  fclose(f);
}

/* a safetensors file with the given JSON header and data length */
static void write_st(const char *path, const char *json, size_t dlen) {
  const size_t jl = strlen(json);
  unsigned char *b = calloc(8 + jl + dlen, 1);
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)jl >> (8 * i));
  memcpy(b + 8, json, jl);
  write_raw(path, b, 8 + jl + dlen);
  free(b);
}

static void expect_bad(const char *path, mlr_status want, const char *fragment) {
  mlr_tensor_file tf;
  mlr_error err = {""};
  const mlr_status st = mlr_safetensors_read(path, &tf, &err);
  cr_assert_eq(st, want, "%s: status %d, message: %s", fragment, st, err.msg);
  cr_assert(strstr(err.msg, fragment), "'%s' not in: %s", fragment, err.msg);
  cr_assert(strstr(err.msg, path), "the message names the file: %s", err.msg);
  cr_assert_eq(tf.n, 0);
}

Test(fixtures, hostile_safetensors, .init = make_tmpdir, .fini = rm_tmpdir) {
  char p[512];
  snprintf(p, sizeof p, "%s/bad.safetensors", tmpdir);
  write_raw(p, "\x05\x00\x00", 3);
  expect_bad(p, MLR_EPARSE, "truncated");
  write_raw(p, "\xff\x00\x00\x00\x00\x00\x00\x00{}", 10);
  expect_bad(p, MLR_EPARSE, "runs past the end of the file");
  write_raw(p, "\x93NUMPY\x01\x00v\x00{'descr': '<f4'}", 26);
  expect_bad(p, MLR_EPARSE, "a .npy file");
  write_st(p, "{\"a\": 3", 0);
  expect_bad(p, MLR_EPARSE, "header is not a JSON object");
  write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"a\":{}}", 8);
  /* duplicate keys are refused by jansson */
  expect_bad(p, MLR_EPARSE, "header is not a JSON object");
  write_st(p, "{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
  expect_bad(p, MLR_EPARSE, "field dtype 'F33'");
  write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8);
  expect_bad(p, MLR_EPARSE, "shape[0]");
  write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", 8);
  expect_bad(p, MLR_EPARSE, "end past the data section");
  write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8);
  expect_bad(p, MLR_EPARSE, "needs 12");
  write_st(p,
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":"
           "\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
           12);
  expect_bad(p, MLR_EPARSE, "overlap");
  write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12);
  expect_bad(p, MLR_EPARSE, "gap of 4 bytes");
  write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 10);
  expect_bad(p, MLR_EPARSE, "2 bytes after the last tensor");
  write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[9223372036854775807],\"data_offsets\":[0,8]}}",
           8);
  expect_bad(p, MLR_EPARSE, "shape[0]");
  write_st(p,
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[2147483648,2147483648,8],\"data_offsets\":[0,8]}}",
           8);
  expect_bad(p, MLR_ERANGE, "size overflows");
  snprintf(p, sizeof p, "%s/none.safetensors", tmpdir);
  expect_bad(p, MLR_EIO, "cannot open");
  /* npy: wrong magic, wrong dtype, truncated data */
  snprintf(p, sizeof p, "%s/bad.npy", tmpdir);
  mlr_tensor_file tf;
  mlr_tf_init(&tf);
  mlr_error err;
  write_raw(p, "NUMPY\x01\x00", 7);
  cr_assert_eq(mlr_npy_read(p, MLR_DT_F32, "x", &tf, &err), MLR_EPARSE);
  const int64_t sh[1] = {4};
  mlr_tensor_file one;
  mlr_tf_init(&one);
  mlr_tensor *t;
  cr_assert_eq(mlr_tf_add(&one, "x", MLR_DT_F32, 1, sh, &t), MLR_OK);
  cr_assert_eq(mlr_npy_write(p, t, &err), MLR_OK);
  cr_assert_eq(mlr_npy_read(p, MLR_DT_BF16, "x", &tf, &err), MLR_ECONTRACT);
  cr_assert(strstr(err.msg, "'<f4' but BF16 needs '<u2'"), "%s", err.msg);
  cr_assert_eq(truncate(p, 140), 0); /* 128 header bytes, then 12 of the 16 data bytes */
  cr_assert_eq(mlr_npy_read(p, MLR_DT_F32, "x", &tf, &err), MLR_EPARSE);
  cr_assert(strstr(err.msg, "data section"), "%s", err.msg);
  mlr_tf_free(&one);
  mlr_tf_free(&tf);
}

/* --- the input contract: every violation gives MLR_ECONTRACT and says where --- */

static void expect_contract(mlr_tensor_file *tf, int allow, const char *fragment) {
  mlr_inputs in;
  mlr_error err = {""};
  cr_assert_eq(mlr_inputs_check(tf, "f.safetensors", allow, &in, &err), MLR_ECONTRACT,
               "expected a violation: %s", fragment);
  cr_assert(strstr(err.msg, fragment), "'%s' not in: %s", fragment, err.msg);
}

Test(fixtures, contract_violations) {
  mlr_tensor_file tf;
  mlr_inputs in;
  mlr_error err;
  gen_file("lens=4:20,page=16,seed=1", &tf);
  cr_assert_eq(mlr_inputs_check(&tf, "f", 0, &in, &err), MLR_OK, "%s", err.msg);
  int32_t *kvi = (int32_t *)mlr_tf_find(&tf, "kv_indptr")->data,
          *idx = (int32_t *)mlr_tf_find(&tf, "kv_indices")->data;
  int32_t *qo = (int32_t *)mlr_tf_find(&tf, "qo_indptr")->data;
  const int32_t idx1 = idx[1];
  idx[1] = 3; /* there are 3 pages: 0..2 */
  expect_contract(&tf, 0, "tensor 'kv_indices': element 1 (byte offset");
  idx[1] = idx1;
  cr_assert_eq(mlr_inputs_check(&tf, "f", 0, &in, &err), MLR_OK, "%s", err.msg);
  const int32_t k1 = kvi[1];
  kvi[1] = 5;
  expect_contract(&tf, 0, "tensor 'kv_indptr': element 2");
  kvi[1] = k1;
  qo[1] = 2;
  expect_contract(&tf, 0, "tensor 'qo_indptr'");
  qo[1] = 1;
  uint16_t *q = (uint16_t *)mlr_tf_find(&tf, "q")->data;
  const uint16_t q5 = q[5];
  q[5] = 0x7F80; /* +Inf */
  expect_contract(&tf, 0, "tensor 'q': element 5");
  cr_assert_eq(mlr_inputs_check(&tf, "f", 1, &in, &err), MLR_OK, "--allow-nonfinite accepts it");
  q[5] = q5;
  uint8_t *kv = (uint8_t *)mlr_tf_find(&tf, "kv")->data;
  const int64_t r = mlr_inputs_kv_row(&in, 1, 19);
  kv[r * 576 + 7] = 0x7F;
  expect_contract(&tf, 0, "column 7");
  kv[r * 576 + 7] = 0;
  mlr_tf_find(&tf, "kv")->dtype = MLR_DT_F16;
  expect_contract(&tf, 0, "tensor 'kv' is F16");
  mlr_tf_find(&tf, "kv")->dtype = MLR_DT_F8_E4M3;
  mlr_tf_find(&tf, "q")->shape[2] = 512;
  expect_contract(&tf, 0, "needs [T,H,576] with H in 1..128");
  mlr_tf_find(&tf, "q")->shape[2] = 576;
  mlr_tf_set_meta(&tf, "mlaref.page_size", "7");
  expect_contract(&tf, 0, "not a multiple of the page size 7");
  mlr_tf_set_meta(&tf, "mlaref.page_size", "16");
  int32_t *last = (int32_t *)mlr_tf_find(&tf, "kv_last_page_len")->data;
  last[0] = 17;
  expect_contract(&tf, 0, "tensor 'kv_last_page_len': element 0");
  last[0] = 4;
  cr_assert_eq(mlr_inputs_check(&tf, "f", 0, &in, &err), MLR_OK, "%s", err.msg);
  mlr_tf_free(&tf);
  gen_file("bs=1,kv=3,seed=2", &tf);
  strcpy(mlr_tf_find(&tf, "kv_scale")->name, "scale");
  expect_contract(&tf, 0, "missing tensor 'kv_scale'");
  mlr_tf_free(&tf);
}

Test(fixtures, spec_parse_errors) {
  static const struct {
    const char *s, *frag;
  } bad[] = {{"bs=4", "needs bs= and kv="},
             {"bs=0,kv=5", "bs='0'"},
             {"bs=2,kv=-1", "kv='-1'"},
             {"bs=2,kv=5,q=17", "q='17' is not an integer in 1..16"},
             {"bs=2,kv=5,heads=129", "heads='129' is not an integer in 1..128"},
             {"bs=2,kv=5,page=0", "page='0'"},
             {"bs=2,kv=5,dist=cauchy", "dist='cauchy'"},
             {"bs=2,kv=5,fmt=e5m2", "fmt='e5m2'"},
             {"bs=2,kv=5,color=red", "unknown shape field 'color'"},
             {"bs=2,kv=5,bogus", "not key=value"},
             {"lens=3:x", "'x' is not an integer"},
             {"bs=3,lens=1:2", "bs=3 but lens has 2"},
             {"bs=1,kv=1,q=4", "fewer than q-1"},
             {"lens=2147483647:2147483647", "exceed the int32 indptr range"},
             {"bs=2,kv=5,dist=outliers:2", "dist='outliers:2'"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    mlr_gen_spec s;
    mlr_error err = {""};
    cr_assert_neq(mlr_gen_spec_parse(bad[i].s, &s, &err), MLR_OK, "%s parsed", bad[i].s);
    cr_assert(strstr(err.msg, bad[i].frag), "%s: '%s' not in: %s", bad[i].s, bad[i].frag, err.msg);
  }
}

/* Every suite cell parses, its canonical text parses back to itself, and the small ones
 * generate inputs that conform to the contract. */
Test(fixtures, suites_are_valid) {
  size_t n;
  const mlr_suite *all = mlr_suites(&n);
  cr_assert_eq(n, 5);
  cr_assert_eq(mlr_suite_find("bench")->n, 8);
  cr_assert_eq(mlr_suite_find("test")->n, 4);
  cr_assert_eq(mlr_suite_find("probe")->n, 14);
  cr_assert_null(mlr_suite_find("nope"));
  for (size_t i = 0; i < n; i++)
    for (size_t c = 0; c < all[i].n; c++) {
      mlr_gen_spec s, s2;
      mlr_error err;
      char t1[512], t2[512];
      cr_assert_eq(mlr_gen_spec_parse(all[i].cells[c].spec, &s, &err), MLR_OK, "%s: %s",
                   all[i].cells[c].name, err.msg);
      mlr_gen_spec_format(&s, t1, sizeof t1);
      cr_assert_eq(mlr_gen_spec_parse(t1, &s2, &err), MLR_OK);
      mlr_gen_spec_format(&s2, t2, sizeof t2);
      cr_assert_str_eq(t1, t2);
      uint64_t bytes;
      cr_assert_eq(mlr_gen_bytes(&s, &bytes), MLR_OK);
      if (strcmp(all[i].name, "edge") == 0) {
        mlr_tensor_file tf;
        mlr_inputs in;
        cr_assert_eq(mlr_gen_inputs(&s, &tf, NULL, NULL, &err), MLR_OK);
        cr_assert_eq(mlr_inputs_check(&tf, all[i].cells[c].name, 0, &in, &err), MLR_OK, "%s",
                     err.msg);
        mlr_tf_free(&tf);
      }
      mlr_gen_spec_free(&s);
      mlr_gen_spec_free(&s2);
    }
}

/* The Q distributions against their definitions (mlr_gen.h): scaled and outliers exactly,
 * t3 and perhead by their tails and spreads (fixed seeds; bounds of about 6 standard errors). */
Test(fixtures, q_distributions) {
  mlr_tensor_file tf;
  const uint64_t seed = 77;
  const size_t n = 64 * 16 * 576;
  gen_file("bs=64,kv=1,seed=77,dist=scaled:0.02", &tf);
  const uint16_t *q = data(&tf, "q");
  for (size_t i = 0; i < n; i += 97)
    cr_assert_eq(q[i], mlr_encode_f64(0.02 * mlr_rng_normal(seed, MLR_TENSOR_Q, 0, i), MLR_FMT_BF16,
                                      MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT, 0));
  mlr_tf_free(&tf);
  gen_file("bs=64,kv=1,seed=77,dist=outliers:0.001", &tf);
  q = data(&tf, "q");
  size_t outliers = 0;
  for (size_t i = 0; i < n; i++) {
    const double z = mlr_rng_normal(seed, MLR_TENSOR_Q, 0, i);
    const int is_out = mlr_rng_uniform(seed, MLR_TENSOR_Q, 1, i) < 0.001;
    const double f = is_out ? 10.0 + 90.0 * mlr_rng_uniform(seed, MLR_TENSOR_Q, 2, i) : 1.0;
    outliers += is_out;
    cr_assert_eq(q[i], mlr_encode_f64(z * f, MLR_FMT_BF16, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT, 0),
                 "element %zu", i);
  }
  cr_assert(fabs((double)outliers / n - 0.001) < 6 * sqrt(0.001 / n), "outlier fraction %g",
            (double)outliers / n);
  mlr_tf_free(&tf);
  gen_file("bs=64,kv=1,seed=77,dist=t3", &tf);
  q = data(&tf, "q");
  size_t beyond4 = 0;
  for (size_t i = 0; i < n; i++) beyond4 += fabsf(mlr_decode(MLR_FMT_BF16, q[i])) > 4.0f;
  /* P(|T3| > 4) = 2 (1 - F(4)), F(t) = 1/2 + (atan(t/sqrt3) + sqrt3 t/(t^2 + 3)) / pi */
  const double p4 = 0.0280084560101459;
  cr_assert(fabs((double)beyond4 / n - p4) < 6 * sqrt(p4 / n), "t3 tail fraction %g, want %g",
            (double)beyond4 / n, p4);
  mlr_tf_free(&tf);
  gen_file("bs=64,kv=1,seed=77,dist=perhead", &tf);
  q = data(&tf, "q");
  for (int h = 0; h < 16; h++) {
    double s2 = 0;
    size_t m = 0;
    for (size_t t = 0; t < 64; t++)
      for (size_t d = 0; d < 576; d++, m++) {
        const double v = mlr_decode(MLR_FMT_BF16, q[(t * 16 + (size_t)h) * 576 + d]);
        s2 += v * v;
      }
    const double want = exp2(((double)h - 7.5) / 3.75), sd = sqrt(s2 / (double)m);
    cr_assert(fabs(sd / want - 1.0) < 6 * sqrt(0.5 / (double)m), "head %d: sd %g, want %g", h, sd,
              want);
  }
  mlr_tf_free(&tf);
}

/* Large shapes quantize in place (the bf16 buffer becomes the kv tensor); with kv_bf16 kept
 * they use a separate buffer. Both must give the same kv bytes (75 MB of bf16 here, above the
 * 64 MiB at which buffers are mapped). */
Test(fixtures, inplace_quantization_matches) {
  mlr_tensor_file a, b;
  omp_set_num_threads(2);
  gen_file("bs=8,kv=8192,seed=31", &a);
  gen_file("bs=8,kv=8192,seed=31,bf16kv=1", &b);
  const mlr_tensor *ka = mlr_tf_find(&a, "kv"), *kb = mlr_tf_find(&b, "kv");
  cr_assert(ka->mapped, "the in-place path must have run");
  cr_assert_eq(ka->nbytes, kb->nbytes);
  cr_assert(!memcmp(ka->data, kb->data, ka->nbytes), "in-place and separate quantization differ");
  cr_assert_eq(*(const float *)data(&a, "kv_scale"), *(const float *)data(&b, "kv_scale"));
  /* and both equal the public function's own pass over the bf16 KV (its own amax) */
  uint8_t *codes = malloc(ka->nbytes);
  const float scale = mlr_quantize_fp8_task(codes, data(&b, "kv_bf16"), ka->nbytes, MLR_FMT_E4M3);
  cr_assert_eq(scale, *(const float *)data(&a, "kv_scale"),
               "the amax taken while generating differs");
  cr_assert(!memcmp(codes, ka->data, ka->nbytes));
  free(codes);
  mlr_tf_free(&a);
  mlr_tf_free(&b);
}

/* The golden manifest's lines (fixtures/io/mlr_manifest.h): every committed row parses and formats
 * back to itself; each kind of damage is refused naming its field and column. */
Test(fixtures, golden_manifest_lines) {
  char path[4096];
  snprintf(path, sizeof path, "%s/fixtures/goldens/digests.tsv", MLAREF_SOURCE_DIR);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "%s", path);
  char *line = NULL, back[MLR_MANIFEST_LINE_MAX + 2];
  size_t cap = 0, rows = 0, lines = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) >= 0) {
    lines += line[0] != '#';
    if (len > 0 && line[len - 1] == '\n') len--;
    mlr_manifest_row r;
    int is_row;
    mlr_error err = {""};
    cr_assert_eq(mlr_manifest_parse_line(line, (size_t)len, &r, &is_row, &err), MLR_OK, "%s: %s",
                 line, err.msg);
    if (!is_row) continue;
    rows++;
    mlr_manifest_format_row(&r, back, sizeof back);
    cr_assert(strlen(back) == (size_t)len + 1 && strncmp(back, line, (size_t)len) == 0, "%s", line);
  }
  free(line);
  fclose(f);
  cr_assert(rows > 0 && rows == lines, "%zu rows of %zu lines", rows, lines);
  const char *D = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  char ok[512];
  snprintf(ok, sizeof ok, "edge\tbs1_kv1\tfp32-seq\t%s\t%s\t%s", D, D, D);
  static const struct {
    const char *what, *line, *msg;
  } BAD[] = {
      {"spaces for tabs", "edge bs1_kv1 fp32-seq", "field suite has the byte 0x20"},
      {"a short digest", "edge\tbs1_kv1\tfp32-seq\tabc",
       "column 23: field recipe_sha256 has 3 characters (valid: 64 lowercase hex digits)"},
      {"an empty name", "edge\t\tfp32-seq", "column 6: field cell has 0 characters"},
      {"too few fields", "edge\tbs1_kv1", "the line ends after field cell"},
  };
  for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; k++) {
    mlr_manifest_row r;
    int is_row;
    mlr_error err = {""};
    cr_assert_eq(mlr_manifest_parse_line(BAD[k].line, strlen(BAD[k].line), &r, &is_row, &err),
                 MLR_EPARSE, "%s", BAD[k].what);
    cr_assert(strstr(err.msg, BAD[k].msg), "%s: %s", BAD[k].what, err.msg);
  }
  mlr_manifest_row r;
  int is_row;
  mlr_error err = {""};
  cr_assert_eq(mlr_manifest_parse_line(ok, strlen(ok), &r, &is_row, &err), MLR_OK, "%s", err.msg);
  cr_assert(is_row && !strcmp(r.cell, "bs1_kv1") && !strcmp(r.lse_sha, D));
  char upper[512], extra[600];
  snprintf(upper, sizeof upper, "%s", ok);
  upper[strlen(upper) - 1] = 'F'; /* an uppercase hex digit */
  cr_assert_eq(mlr_manifest_parse_line(upper, strlen(upper), &r, &is_row, &err), MLR_EPARSE);
  cr_assert(strstr(err.msg, "field lse_sha256 has the byte 0x46"), "%s", err.msg);
  snprintf(extra, sizeof extra, "%s\tmore", ok);
  cr_assert_eq(mlr_manifest_parse_line(extra, strlen(extra), &r, &is_row, &err), MLR_EPARSE);
  cr_assert(strstr(err.msg, "more after the 6th field"), "%s", err.msg);
  cr_assert_eq(mlr_manifest_parse_line("# a comment", 11, &r, &is_row, &err), MLR_OK);
  cr_assert_eq(is_row, 0);
}
