/* compare/: metrics on hand-made vectors whose figures are worked out in the comments, rule
 * parsing and verdicts, and the command's exit codes and reproducer lines. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mlr_compare.h"
#include "mlr_formats.h"

Test(compare, ulp_distance_counts_codes_across_zero) {
  /* bf16: +0 and -0 are 0 apart; the least positive subnormal 0x0001 and its negative 0x8001 are
   * 2 apart (one code each side of zero); 1.0 (0x3F80) and the next (0x3F81) are 1 apart */
  const uint16_t a[4] = {0x0000, 0x0001, 0x3F80, 0x3F80}, b[4] = {0x8000, 0x8001, 0x3F81, 0x3F80};
  mlr_cmp_tensor ta = {MLR_CT_BF16, a, 4}, tb = {MLR_CT_BF16, b, 4};
  mlr_metrics m;
  cr_assert_eq(mlr_compare_metrics(&ta, &tb, &m, NULL), MLR_OK);
  cr_assert_eq(m.identical, 1);
  cr_assert_eq(m.ulp_max, 2);
  cr_assert_eq(m.worst[0].index, 1);
  cr_assert_eq(m.worst[0].ulp, 2);
  cr_assert_eq(m.worst[1].index, 2);
  cr_assert_eq(m.ulp_p50, 0.0); /* sorted 0,0,1,2: nearest rank ceil(0.5*4) = 2 -> 0 */
  cr_assert_eq(m.ulp_p99, 2.0);
}

static int cmp_i64_t(const void *x, const void *y) {
  const int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

/* the percentiles count small distances and sort only large ones (metrics.c's ulp_ranks): here
 * against a sort of all of them, for distances below, at and above that split (4096), and with
 * ranks that fall among the large ones */
Test(compare, ulp_percentiles_agree_with_a_sort) {
  enum { N = 20000 };
  uint32_t *a = malloc(N * 4), *b = malloc(N * 4);
  int64_t *u = malloc(N * sizeof *u);
  uint64_t x = 88172645463325252ull;
  for (int big = 0; big < 4; big++) { /* 0: all small; 1: 1 in 50 large; 2: 1 in 2; 3: all large */
    for (int i = 0; i < N; i++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      const int large = big == 3 || (big == 1 && x % 50 == 0) || (big == 2 && (x >> 8) % 2);
      const uint32_t d = large ? 4094u + (uint32_t)(x >> 40) % 100000u : (uint32_t)(x >> 33) % 40u;
      a[i] = 0x3F800000u;
      b[i] = 0x3F800000u + d; /* positive and finite: ulp distance d */
      u[i] = d;
    }
    mlr_cmp_tensor ta = {MLR_CT_F32, a, N}, tb = {MLR_CT_F32, b, N};
    mlr_metrics m;
    cr_assert_eq(mlr_compare_metrics(&ta, &tb, &m, NULL), MLR_OK);
    qsort(u, N, sizeof *u, cmp_i64_t);
    cr_assert_eq(m.ulp_p50, (double)u[N / 2 - 1], "case %d", big);
    cr_assert_eq(m.ulp_p99, (double)u[(int)ceil(0.99 * N) - 1], "case %d", big);
    cr_assert_eq(m.ulp_p999, (double)u[(int)ceil(0.999 * N) - 1], "case %d", big);
    cr_assert_eq(m.ulp_max, u[N - 1], "case %d", big);
  }
  free(a);
  free(b);
  free(u);
}

Test(compare, norms_of_a_small_case) {
  /* a = (1, 2), b = (1, 1): |a-b| = (0, 1); RMSE = sqrt(1/2); rel L2 = 1/sqrt(2); NMSE = 1/2;
   * cos diff = 1 - 2*(1+2)/(1+4+1+1) = 1 - 6/7 = 1/7; max rel = 1; max abs = 1 */
  const float a[2] = {1, 2}, b[2] = {1, 1};
  mlr_cmp_tensor ta = {MLR_CT_F32, a, 2}, tb = {MLR_CT_F32, b, 2};
  mlr_metrics m;
  cr_assert_eq(mlr_compare_metrics(&ta, &tb, &m, NULL), MLR_OK);
  cr_assert_float_eq(m.rmse, sqrt(0.5), 1e-15);
  cr_assert_float_eq(m.rel_l2, 1 / sqrt(2.0), 1e-15);
  cr_assert_float_eq(m.nmse, 0.5, 1e-15);
  cr_assert_float_eq(m.cos_diff, 1.0 / 7.0, 1e-15);
  cr_assert_eq(m.max_abs, 1.0);
  cr_assert_eq(m.max_rel, 1.0);
  cr_assert_eq(m.ulp_max, 1 << 23); /* 2 and 1 are one binade apart: 2^23 binary32 codes */
}

Test(compare, unwritten_and_class_mismatch_fail_every_rule) {
  const uint16_t a[4] = {0xFFFF, 0x7FC0, 0x3F80, 0x7F80}, b[4] = {0x3F80, 0x3F80, 0x3F80, 0x7F80};
  mlr_cmp_tensor ta = {MLR_CT_BF16, a, 4}, tb = {MLR_CT_BF16, b, 4};
  mlr_metrics m;
  cr_assert_eq(mlr_compare_metrics(&ta, &tb, &m, NULL), MLR_OK);
  cr_assert_eq(m.unwritten, 1);
  cr_assert_eq(m.class_mismatch, 1); /* NaN vs 1 */
  cr_assert_eq(m.finite, 1);
  cr_assert_eq(m.identical, 2);      /* 1 = 1 and +Inf = +Inf */
  cr_assert_eq(m.worst[0].index, 0); /* the unwritten element first */
  const char *rules[] = {"exact", "ulp:1000", "allclose:1,1,0.9", "nmse:1", "cos:1"};
  for (size_t k = 0; k < 5; k++) {
    mlr_rule r;
    cr_assert_eq(mlr_rule_parse(rules[k], &r, NULL), MLR_OK);
    cr_assert_eq(mlr_rule_apply(&r, &m, &ta, &tb, NULL, NULL).kind, MLR_VERDICT_FAIL, "%s",
                 rules[k]);
  }
}

Test(compare, rules_parse_and_decide) {
  mlr_rule r;
  mlr_error err = {""};
  cr_assert_eq(mlr_rule_parse("allclose:0.1,0.1,0.05", &r, NULL), MLR_OK);
  cr_assert(r.kind == MLR_RULE_ALLCLOSE && r.x == 0.1 && r.y == 0.1 && r.z == 0.05);
  cr_assert_eq(mlr_rule_parse("fa3", &r, NULL), MLR_OK);
  cr_assert(r.kind == MLR_RULE_FA3 && r.x == 2.0 && r.y == 1e-5);
  const char *bad[] = {"ulp",       "ulp:1.5",  "allclose:0.1", "allclose:0.1,0.1,2",
                       "cos:-1",    "nmse:x",   "exact:1",      "frob",
                       "fa3:1,2,3", "budget:0", "budget:1,2"};
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    cr_assert_eq(mlr_rule_parse(bad[k], &r, &err), MLR_EPARSE, "%s", bad[k]);
    cr_assert(strstr(err.msg, mlr_rule_forms()), "%s", err.msg);
  }
  /* allclose: |1.1 - 1| = 0.1 <= 0.01 + 0.1*1 passes; |2 - 1| = 1 does not: 1 of 2 = 50% */
  const float a[2] = {1.1f, 2}, b[2] = {1, 1};
  mlr_cmp_tensor ta = {MLR_CT_F32, a, 2}, tb = {MLR_CT_F32, b, 2};
  mlr_metrics m;
  mlr_compare_metrics(&ta, &tb, &m, NULL);
  mlr_rule_parse("allclose:0.1,0.01,0.5", &r, NULL);
  cr_assert_eq(mlr_rule_apply(&r, &m, &ta, &tb, NULL, NULL).kind, MLR_VERDICT_PASS);
  mlr_rule_parse("allclose:0.1,0.01,0.49", &r, NULL);
  cr_assert_eq(mlr_rule_apply(&r, &m, &ta, &tb, NULL, NULL).kind, MLR_VERDICT_FAIL);
  mlr_rule_parse("budget", &r, NULL);
  mlr_verdict v = mlr_rule_apply(&r, &m, &ta, &tb, NULL, NULL);
  cr_assert_eq(v.kind, MLR_VERDICT_NA);
  cr_assert(strstr(v.detail, "needs the recipe's a priori bound"), "%s", v.detail);
  mlr_rule_parse("fa3", &r, NULL);
  cr_assert_eq(mlr_rule_apply(&r, &m, &ta, &tb, NULL, NULL).kind, MLR_VERDICT_NA,
               "fa3 without the truth");
  /* fa3: out - truth max 0.5, ref - truth max 0.3: 0.5 <= 2*0.3 + 1e-5 passes; 1.0 would not */
  const double t[2] = {1.0, 1.0};
  const float r2[2] = {1.3f, 1.0f}, o2[2] = {1.5f, 1.0f}, o3[2] = {2.0f, 1.0f};
  mlr_cmp_tensor tt = {MLR_CT_F64, t, 2}, tr = {MLR_CT_F32, r2, 2}, to = {MLR_CT_F32, o2, 2},
                 to3 = {MLR_CT_F32, o3, 2};
  mlr_metrics mt, mr, m3;
  mlr_compare_metrics(&to, &tt, &mt, NULL);
  mlr_compare_metrics(&tr, &tt, &mr, NULL);
  cr_assert_eq(mlr_rule_apply(&r, &m, &to, &tr, &mt, &mr).kind, MLR_VERDICT_PASS);
  mlr_compare_metrics(&to3, &tt, &m3, NULL);
  cr_assert_eq(mlr_rule_apply(&r, &m, &to3, &tr, &m3, &mr).kind, MLR_VERDICT_FAIL);
}

Test(compare, wider_reference_is_rounded_to_the_candidates_format) {
  /* bf16 has 7 fraction bits, so the truth 1 + 2^-9 (binary64) rounds to 1.0 (0x3F80): 0 ulp
   * from a = 1.0, though not identical */
  const uint16_t a[1] = {0x3F80};
  const double t[1] = {1.0 + 0x1p-9};
  mlr_cmp_tensor ta = {MLR_CT_BF16, a, 1}, tt = {MLR_CT_F64, t, 1};
  mlr_metrics m;
  cr_assert_eq(mlr_compare_metrics(&ta, &tt, &m, NULL), MLR_OK);
  cr_assert_eq(m.ulp_max, 0);
  cr_assert_eq(m.identical, 0);
  cr_assert_float_eq(m.max_abs, 0x1p-9, 0);
  mlr_cmp_tensor tf = {MLR_CT_F64, t, 1};
  cr_assert_eq(mlr_compare_metrics(&tf, &ta, &m, NULL), MLR_EINVAL,
               "a binary64 candidate against bf16");
  /* binary32 against binary64: the distance counts binary32 codes (8 between -1 and -1 - 2^-20;
   * the sign bit is binary32's) */
  const float a32[1] = {-1.0f - 0x1p-20f};
  const double t1[1] = {-1.0};
  mlr_cmp_tensor t32 = {MLR_CT_F32, a32, 1}, t64 = {MLR_CT_F64, t1, 1};
  cr_assert_eq(mlr_compare_metrics(&t32, &t64, &m, NULL), MLR_OK);
  cr_assert_eq(m.ulp_max, 8);
}

/* ---- the command ---- */

static int run(const char *args, char **out) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, MLAREF_BIN " %s > mlr_cmp_out.txt 2>&1", args);
  const int st = system(cmd);
  FILE *f = fopen("mlr_cmp_out.txt", "r");
  *out = calloc(1 << 16, 1);
  if (f) {
    fread(*out, 1, (1 << 16) - 1, f);
    fclose(f);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(compare, command_exit_codes_and_reproducers) {
  char *o;
  cr_assert_eq(system("rm -rf mlr_cmp && mkdir -p mlr_cmp && " MLAREF_BIN
                      " gen --shape bs=2,kv=50,seed=3 --out mlr_cmp/in.safetensors >/dev/null"
                      " && " MLAREF_BIN " run --recipe fp32-seq --inputs mlr_cmp/in.safetensors "
                      "--out mlr_cmp/a.safetensors >/dev/null"
                      " && " MLAREF_BIN
                      " run --recipe triton-fp8-single --inputs mlr_cmp/in.safetensors --out "
                      "mlr_cmp/b.safetensors >/dev/null"),
               0);
  cr_assert_eq(run("compare mlr_cmp/a.safetensors mlr_cmp/a.safetensors", &o), 0, "%s", o);
  cr_assert(strstr(o, "32768 elements, 32768 bit-identical (100.0000%)") ||
                strstr(o, "16384 elements, 16384 bit-identical (100.0000%)"),
            "%s", o);
  free(o);
  cr_assert_eq(
      run("compare mlr_cmp/b.safetensors mlr_cmp/a.safetensors --inputs mlr_cmp/in.safetensors",
          &o),
      1, "%s", o);
  cr_assert(strstr(o, "rule exact                    FAIL"), "%s", o);
  cr_assert(strstr(o, "reproduce batch "), "%s", o);
  cr_assert(strstr(o, "shape bs=2,kv=50,q=1,page=1,seed=3"), "%s", o);
  cr_assert(strstr(o, " ulp; "), "%s", o);
  cr_assert(strstr(o, " column "), "%s", o);
  free(o);
  /* lse is [T, H]: its reproducer names token and head, no column */
  cr_assert_eq(run("compare mlr_cmp/b.safetensors mlr_cmp/a.safetensors --tensor lse --inputs "
                   "mlr_cmp/in.safetensors",
                   &o),
               1, "%s", o);
  cr_assert(strstr(o, "reproduce batch ") && strstr(o, " head ") && !strstr(o, "column"), "%s", o);
  free(o);
  cr_assert_eq(run("compare mlr_cmp/b.safetensors mlr_cmp/a.safetensors --rule "
                   "allclose:0.1,0.1,0.05 --rule cos:1e-3 --json",
                   &o),
               0, "%s", o);
  cr_assert(strstr(o, "\"rule\": \"allclose:0.1,0.1,0.05\", \"verdict\": \"pass\""), "%s", o);
  free(o);
  cr_assert_eq(run("compare mlr_cmp/b.safetensors mlr_cmp/a.safetensors --rule budget", &o), 2,
               "%s", o);
  cr_assert(strstr(o, "budget needs the recipe's a priori bound"), "%s", o);
  free(o);
  cr_assert_eq(run("compare mlr_cmp/b.safetensors mlr_cmp/a.safetensors --rule frob", &o), 2);
  cr_assert(strstr(o, "rule 'frob' is not one of exact|ulp:N"), "%s", o);
  free(o);
  cr_assert_eq(run("compare mlr_cmp/b.safetensors mlr_cmp/in.safetensors", &o), 2);
  cr_assert(strstr(o, "no tensor 'o'"), "%s", o);
  free(o);
  cr_assert_eq(run("compare mlr_cmp/b.safetensors", &o), 2);
  cr_assert(strstr(o, "usage: compare A B"), "%s", o);
  free(o);
  cr_assert_eq(run("compare mlr_cmp/b.safetensors mlr_cmp/a.safetensors --tensor q_scales", &o), 2);
  free(o);
  cr_assert_eq(system("rm -rf mlr_cmp"), 0);
}

Test(compare, utilisation_and_bound) {
  /* t = (1, 0, -2, 4), a = (1.02f, 0.005f, -2, NaN) (binary32: 1.0199999809..., 0.0049999998...);
   * rtol = atol = 0.01: utilisation |a - t| / (0.01 + 0.01 |t|) = 0.99999905, 0.49999999, 0; the
   * NaN pair is skipped */
  const double t[4] = {1, 0, -2, 4};
  const float a[4] = {1.02f, 0.005f, -2, NAN}, a2[4] = {1.02f, 0.005f, -2, 4};
  mlr_cmp_tensor ta = {MLR_CT_F32, a, 4}, ta2 = {MLR_CT_F32, a2, 4}, tt = {MLR_CT_F64, t, 4};
  mlr_util u;
  cr_assert_eq(mlr_compare_utilisation(&ta, &tt, 0.01, 0.01, &u, NULL), MLR_OK);
  cr_assert_eq(u.n, 3);
  cr_assert_float_eq(u.max, 0.99999905, 1e-7);
  cr_assert_eq(u.over, 0);
  cr_assert(u.hist[0] == 1 && u.hist[3] == 1 && u.hist[4] == 1,
            "0 in the first bin, 0.49999999 in [1/4,1/2), 0.99999905 in [1/2,1)");
  cr_assert_float_eq(u.p50, 0.5, 1e-7);
  /* the bound: |a - t| = 0.0199999809, 0.0049999998, 0 against bounds 0.04, 0.004, 0: the
   * second is over (ratio 1.2499999), the third passes (0 <= 0) */
  const double bd[4] = {0.04, 0.004, 0, 1};
  mlr_bound_use bu;
  cr_assert_eq(mlr_compare_bound(&ta, &tt, bd, 1.0, &bu, NULL), MLR_OK);
  cr_assert_eq(bu.n, 3);
  cr_assert_eq(bu.over, 1);
  cr_assert_eq(bu.worst, 1);
  cr_assert_float_eq(bu.max_ratio, 1.25, 1e-6);
  cr_assert_eq(mlr_compare_bound(&ta, &tt, bd, 1.5, &bu, NULL), MLR_OK);
  cr_assert_eq(bu.over, 0, "factor 1.5 covers 1.25");
  mlr_rule r;
  cr_assert_eq(mlr_rule_parse("budget:1.5", &r, NULL), MLR_OK);
  cr_assert_eq(r.x, 1.5);
  mlr_metrics mt;
  cr_assert_eq(mlr_compare_metrics(&ta2, &tt, &mt, NULL), MLR_OK);
  cr_assert_eq(mlr_rule_apply_budget(&r, &mt, &ta2, &tt, bd).kind, MLR_VERDICT_PASS);
  cr_assert_eq(mlr_rule_parse("budget", &r, NULL), MLR_OK);
  mlr_verdict v = mlr_rule_apply_budget(&r, &mt, &ta2, &tt, bd);
  cr_assert_eq(v.kind, MLR_VERDICT_FAIL);
  cr_assert(strstr(v.detail, "1 elements beyond 1 x their bound; worst element 1"), "%s", v.detail);
  /* a NaN/Inf class mismatch fails whatever the bound */
  cr_assert_eq(mlr_compare_metrics(&ta, &tt, &mt, NULL), MLR_OK);
  cr_assert_eq(mlr_rule_apply_budget(&r, &mt, &ta, &tt, bd).kind, MLR_VERDICT_FAIL);
}

/* structure: each batch and head against the model's error there; a batch out of line fails
 * though the global fa3 passes; empty batches, -Inf lse rows and NaN classes; parsing; n/a in
 * compare */
Test(compare, structure_rule_groups) {
  /* 3 batches (tokens 0, 1-2, none), 2 heads, 2 columns: the model is off by 1e-3 in batch 0 and
   * by 1e-5 in batch 1; the candidate off by 9e-4 in batch 0 and 9e-4 in batch 1 */
  const int32_t qo[4] = {0, 1, 3, 3};
  const mlr_groups g = {3, 2, 2, 3, qo};
  double t[12];
  float m[12], a[12];
  for (int i = 0; i < 12; i++) {
    t[i] = 0.25 * (i + 1);
    m[i] = (float)(t[i] + (i < 4 ? 1e-3 : 1e-5));
    a[i] = (float)(t[i] + 9e-4);
  }
  const mlr_cmp_tensor ta = {MLR_CT_F32, a, 12}, tm = {MLR_CT_F32, m, 12}, tt = {MLR_CT_F64, t, 12};
  mlr_rule r, fa3;
  cr_assert_eq(mlr_rule_parse("structure", &r, NULL), MLR_OK);
  cr_assert_eq(mlr_rule_parse("fa3", &fa3, NULL), MLR_OK);
  mlr_metrics mat, mmt, mam;
  cr_assert_eq(mlr_compare_metrics(&ta, &tt, &mat, NULL), MLR_OK);
  cr_assert_eq(mlr_compare_metrics(&tm, &tt, &mmt, NULL), MLR_OK);
  cr_assert_eq(mlr_compare_metrics(&ta, &tm, &mam, NULL), MLR_OK);
  cr_expect_eq(mlr_rule_apply(&fa3, &mam, &ta, &tm, &mat, &mmt).kind, MLR_VERDICT_PASS);
  mlr_verdict v = mlr_rule_apply_structure(&r, &ta, &tm, &tt, &g);
  cr_expect_eq(v.kind, MLR_VERDICT_FAIL, "%s", v.detail);
  cr_expect(strstr(v.detail, "worst batch 1") != NULL, "%s", v.detail);
  /* the model itself passes, at half its limit */
  v = mlr_rule_apply_structure(&r, &tm, &tm, &tt, &g);
  cr_expect_eq(v.kind, MLR_VERDICT_PASS, "%s", v.detail);
  cr_expect(v.measured < 0.51, "%g", v.measured);
  /* structure:100 lets batch 1 through */
  cr_assert_eq(mlr_rule_parse("structure:100,0", &r, NULL), MLR_OK);
  cr_expect_eq(mlr_rule_apply_structure(&r, &ta, &tm, &tt, &g).kind, MLR_VERDICT_PASS);
  /* lse rows: -Inf where a batch sees no token; the candidate's -Inf there has no error, a NaN
   * does; structure:0,0 on an exact candidate passes (no 0/0) */
  float la[6] = {1, 2, 3, 4, -INFINITY, -INFINITY}, lm[6] = {1, 2, 3, 4, -INFINITY, -INFINITY};
  double lt[6] = {1, 2, 3, 4, -INFINITY, -INFINITY};
  const int32_t qo2[3] = {0, 2, 3};
  const mlr_groups g2 = {3, 2, 1, 2, qo2};
  const mlr_cmp_tensor lta = {MLR_CT_F32, la, 6}, ltm = {MLR_CT_F32, lm, 6},
                       ltt = {MLR_CT_F64, lt, 6};
  cr_assert_eq(mlr_rule_parse("structure:0,0", &r, NULL), MLR_OK);
  v = mlr_rule_apply_structure(&r, &lta, &ltm, &ltt, &g2);
  cr_expect(v.kind == MLR_VERDICT_PASS && isfinite(v.measured), "%s", v.detail);
  la[5] = NAN;
  v = mlr_rule_apply_structure(&r, &lta, &ltm, &ltt, &g2);
  cr_expect_eq(v.kind, MLR_VERDICT_FAIL, "%s", v.detail);
  /* parsing, and compare without the groups */
  mlr_error err = {""};
  cr_expect_eq(mlr_rule_parse("structure:1,2,3", &r, &err), MLR_EPARSE);
  cr_expect(strstr(err.msg, "structure[:K[,ATOL]]") != NULL, "%s", err.msg);
  cr_assert_eq(mlr_rule_parse("structure", &r, NULL), MLR_OK);
  cr_expect_eq(mlr_rule_apply(&r, &mam, &ta, &tm, &mat, &mmt).kind, MLR_VERDICT_NA);
}
