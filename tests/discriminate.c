/* Discrimination: mlaref's default rules (fa3 against the binary64 truth, with the kernel's recipe
 * model as the same-precision reference, and structure: the same in each batch and head) fail
 * every wrong kernel of the table (mlr_discriminate.h: 30 mutations of the emulated
 * triton-fp8-split kernel) on every probe cell it acts on, and the gross ones at the bs=4 bench
 * shapes too, and never fail a correct kernel. The probe suite's table is written to
 * $MLAREF_TABLE_OUT (default discrimination.md in the build folder).
 *
 * The correct kernels: each built-in recipe's model, and a twin of it with other correct
 * roundings (twin_of), both against the recipe's model under the default rules (o and lse), on
 * every probe cell the recipe runs and for 100 seeds of each bs=4 bench shape (label slow: 5
 * seeds of each larger shape too). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_compare.h"
#include "mlr_gen.h"
#include "mlr_inputs.h"
#include "mlr_suites.h"
#include "mlr_budget.h"
#include "mlr_emulate.h"
#include "mlr_oracle.h"
#include "mlr_discriminate.h"
#include "test_gen.h"

#define DV 512

typedef struct cell {
  mlr_tensor_file tf;
  mlr_inputs in;
  double *truth, *tlse;
  int64_t n;
} cell;

static void cell_make(cell *c, const char *spec) {
  mlr_error err = {""};
  gen g;
  gen_make(&g, spec);
  c->tf = g.tf;
  c->in = g.in;
  c->n = c->in.T * c->in.H * DV;
  c->truth = malloc((size_t)c->n * sizeof(double));
  c->tlse = malloc((size_t)(c->in.T * c->in.H) * sizeof(double));
  cr_assert_eq(mlr_truth_f64(&c->in, MLR_TRUTH_DEQUANTIZED, c->truth, c->tlse, &err), MLR_OK, "%s",
               err.msg);
}

static void cell_free(cell *c) {
  free(c->truth);
  free(c->tlse);
  mlr_tf_free(&c->tf);
}

static void emulate(const mlr_recipe *r, const mlr_inputs *in, int fault, mlr_emu_result *res) {
  mlr_emu_opts o = {0, 0, fault, 0};
  mlr_error err = {""};
  cr_assert_eq(mlr_emulate(r, in, &o, res, &err), MLR_OK, "%s: %s", r->name, err.msg);
}

/* the default rules' verdict (o and lse) on candidate res against the model of r */
static mlr_verdict_kind judge_default(const cell *c, const mlr_recipe *r,
                                      const mlr_emu_result *model, const mlr_emu_result *res) {
  const mlr_disc_refs ref = {r, &c->in, model, c->truth, c->tlse, NULL};
  mlr_verdict_kind v[MLR_DISC_RULES];
  mlr_error err = {""};
  cr_assert_eq(mlr_disc_judge_all(&ref, res->o, res->lse_out, v, &err), MLR_OK, "%s", err.msg);
  return v[MLR_DISC_DEFAULT];
}

/* a wrong kernel returns lse as a kernel does (out.lse_base, by the recipe's own formula:
 * FlashMLA's unsplit rows are not one conversion of the base-2 lse): where its mistake cannot act,
 * its lse is the model's lse_out bit for bit; a mistake in the lse alone changes it, "lse returned
 * in base 2" to the other base than the recipe's (a base-2 recipe's: ln) */
Test(discriminate, inert_wrong_kernels_return_the_models_lse_out) {
  const char *const recipes[] = {"flashmla-bf16", "triton-fp8-split", "triton-fp8-split"};
  for (int i = 0; i < 3; i++) {
    cell c;
    cell_make(&c, i ? "bs=2,kv=300,seed=3" : "bs=2,kv=300,fmt=bf16,seed=3");
    mlr_recipe r;
    mlr_error e = {""};
    cr_assert_eq(mlr_recipe_builtin(recipes[i], &r), MLR_OK);
    if (i == 2) cr_assert_eq(mlr_recipe_set(&r, "out.lse_base=2", &e), MLR_OK, "%s", e.msg);
    const float to_other =
        r.out_lse_base == MLR_EXP_2 ? 0x1.62e43p-1f : (float)0x1.71547652b82fep+0;
    mlr_emu_result model;
    emulate(&r, &c.in, 0, &model);
    const int64_t nl = c.in.T * c.in.H;
    int inert = 0, base2 = 0;
    for (int k = 0; k < MLR_DISC_WRONG; k++) {
      mlr_disc_out w;
      mlr_error err = {""};
      cr_assert_eq(mlr_disc_wrong_output(k, &r, &c.in, &model, 0, &w, &err), MLR_OK, "%s", err.msg);
      /* o unchanged: the mistake cannot act, or it is in the lse alone */
      if (!memcmp(w.o, model.o, (size_t)c.n * 2)) {
        const int lse_wrong = strstr(mlr_disc_wrong_name(k), "lse") != NULL;
        inert += !lse_wrong;
        cr_assert_eq(!memcmp(w.lse, model.lse_out, (size_t)nl * sizeof(float)), !lse_wrong,
                     "%s: '%s' returns %s lse", r.name, mlr_disc_wrong_name(k),
                     lse_wrong ? "the model's" : "another");
      }
      if (!strcmp(mlr_disc_wrong_name(k), "lse returned in base 2") && ++base2)
        for (int64_t j = 0; j < nl; j++) {
          const float want = model.lse_out[j] * to_other;
          cr_assert(!memcmp(&w.lse[j], &want, 4), "%s: lse %lld not in the other base", r.name,
                    (long long)j);
        }
      mlr_disc_out_free(&w);
    }
    cr_assert(inert > 0 && base2 == 1, "%s: no wrong kernel is inert on the cell", r.name);
    mlr_emu_result_free(&model);
    cell_free(&c);
  }
}

#ifndef MLR_SLOW
/* the table of one cell, added to caught (cells where the default rules fail a wrong kernel) */
static void table_of(const mlr_recipe *r, const char *name, const char *spec,
                     int caught[MLR_DISC_WRONG][MLR_DISC_RULES], int acting[MLR_DISC_WRONG],
                     int gross_only) {
  static cell c;
  cell_make(&c, spec);
  int table[MLR_DISC_WRONG][MLR_DISC_RULES], model_ok;
  mlr_error err = {""};
  cr_assert_eq(mlr_disc_table(r, &c.in, c.truth, c.tlse, 0, table, &model_ok, &err), MLR_OK, "%s",
               err.msg);
  cr_assert(model_ok, "%s: the model itself fails the default rules or its bound", name);
  for (int k = 0; k < MLR_DISC_WRONG; k++) {
    acting[k] += table[k][0] >= 0;
    for (int q = 0; q < MLR_DISC_RULES; q++) caught[k][q] += table[k][q] == 1;
    if (gross_only && k < 12) /* the output and scale mistakes, the merge and split faults */
      cr_assert(table[k][MLR_DISC_DEFAULT] == 1, "%s: '%s' passes the default rules", name,
                mlr_disc_wrong_name(k));
  }
  cell_free(&c);
}

Test(discriminate, every_wrong_kernel_fails_on_the_probe_suite, .timeout = 1200) {
  const mlr_suite *probe = mlr_suite_find("probe");
  cr_assert(probe != NULL);
  mlr_recipe r;
  cr_assert_eq(mlr_recipe_builtin("triton-fp8-split", &r), MLR_OK);
  int caught[MLR_DISC_WRONG][MLR_DISC_RULES] = {{0}}, acting[MLR_DISC_WRONG] = {0};
  for (size_t s = 0; s < probe->n; s++)
    table_of(&r, probe->cells[s].name, probe->cells[s].spec, caught, acting, 0);
  const char *path = getenv("MLAREF_TABLE_OUT") ? getenv("MLAREF_TABLE_OUT") : "discrimination.md";
  FILE *f = fopen(path, "w");
  cr_assert(f != NULL);
  fprintf(f, "| wrong kernel (mutation of triton-fp8-split), probe cells caught / acting |");
  for (int q = 0; q < MLR_DISC_RULES; q++) fprintf(f, " %s |", mlr_disc_rules[q]);
  fprintf(f, "\n| --- |");
  for (int q = 0; q < MLR_DISC_RULES; q++) fprintf(f, " ---: |");
  fprintf(f, "\n");
  for (int k = 0; k < MLR_DISC_WRONG; k++) {
    fprintf(f, "| %s |", mlr_disc_wrong_name(k));
    for (int q = 0; q < MLR_DISC_RULES; q++) fprintf(f, " %d/%d |", caught[k][q], acting[k]);
    fprintf(f, "\n");
    cr_expect(caught[k][MLR_DISC_DEFAULT] == acting[k] && acting[k] > 0,
              "'%s': the default rules fail it on %d of the %d probe cells it acts on",
              mlr_disc_wrong_name(k), caught[k][MLR_DISC_DEFAULT], acting[k]);
  }
  fclose(f);
}

Test(discriminate, gross_wrong_kernels_fail_at_the_bs4_bench_shapes, .timeout = 1200) {
  const mlr_suite *bench = mlr_suite_find("bench");
  mlr_recipe r;
  cr_assert_eq(mlr_recipe_builtin("triton-fp8-split", &r), MLR_OK);
  int caught[MLR_DISC_WRONG][MLR_DISC_RULES] = {{0}}, acting[MLR_DISC_WRONG] = {0};
  for (size_t s = 0; s < 2; s++)
    table_of(&r, bench->cells[s].name, bench->cells[s].spec, caught, acting, 1);
}
#endif

/* a correct twin of a recipe: other roundings of the same computation (the updates fused or not,
 * the QK chain split into nope and rope or not, exact dots as fma chains, the PV dot started from
 * 0 or from acc * alpha) */
static void twin_of(const mlr_recipe *r, mlr_recipe *t) {
  *t = *r;
  t->update_fma = !r->update_fma;
  t->qk_dot = r->qk_dot == MLR_DOT_SEQ ? MLR_DOT_NOPE_ROPE : MLR_DOT_SEQ;
  t->pv_dot = MLR_DOT_SEQ;
  t->pv_accumulate = r->pv_dot == MLR_DOT_EXACT ? r->pv_accumulate : !r->pv_accumulate;
}

static const char *const BUILTINS[] = {"triton-fp8-single", "triton-fp8-split", "aiter-a8w8-ps",
                                       "aiter-a16w8-ps",    "aiter-bf16-np",    "torch-bmm-bf16",
                                       "aiter-test-ref",    "fp32-seq"};

/* every built-in that runs on the cell, and its twin, pass the default rules; returns the checks
 * made */
static int no_false_alarm_on(const char *spec) {
  static cell c;
  cell_make(&c, spec);
  int checks = 0;
  for (size_t i = 0; i < sizeof BUILTINS / sizeof *BUILTINS; i++) {
    mlr_recipe r, t;
    cr_assert_eq(mlr_recipe_builtin(BUILTINS[i], &r), MLR_OK);
    if (mlr_emu_check_fit(&r, &c.in, NULL) != MLR_OK) continue;
    twin_of(&r, &t);
    mlr_emu_result a, b;
    emulate(&r, &c.in, 0, &b);
    emulate(&t, &c.in, 0, &a);
    cr_assert_eq(judge_default(&c, &r, &b, &b), MLR_VERDICT_PASS, "%s %s: the model", spec,
                 BUILTINS[i]);
    cr_assert_eq(judge_default(&c, &r, &b, &a), MLR_VERDICT_PASS,
                 "%s %s: a correct twin fails the default rules", spec, BUILTINS[i]);
    checks += 2;
    mlr_emu_result_free(&a);
    mlr_emu_result_free(&b);
  }
  cell_free(&c);
  return checks;
}

static void no_false_alarm(const char *spec_fmt, uint64_t seed0, int seeds) {
  for (int k = 0; k < seeds; k++) {
    char spec[128];
    snprintf(spec, sizeof spec, spec_fmt, (unsigned long long)(seed0 + (uint64_t)k));
    no_false_alarm_on(spec);
  }
}

#ifndef MLR_SLOW
Test(discriminate, correct_kernels_pass_on_the_probe_suite, .timeout = 1200) {
  const mlr_suite *probe = mlr_suite_find("probe");
  int checks = 0;
  for (size_t s = 0; s < probe->n; s++) checks += no_false_alarm_on(probe->cells[s].spec);
  cr_assert(checks >= 150, "only %d model and twin checks ran on the probe suite", checks);
}
Test(discriminate, correct_kernels_pass_bs4_kv1024_100_seeds, .timeout = 1800) {
  no_false_alarm("bs=4,kv=1024,seed=%llu", 4217, 100);
}
Test(discriminate, correct_kernels_pass_bs4_kv8192_100_seeds, .timeout = 1800) {
  no_false_alarm("bs=4,kv=8192,seed=%llu", 4220, 100);
}
#else
/* label slow: 5 seeds of every larger bench shape (about half an hour on 2 cores) */
Test(discriminate_slow, correct_kernels_pass_larger_shapes_5_seeds, .timeout = 7200) {
  static const char *const shapes[] = {"bs=32,kv=1024", "bs=32,kv=8192",  "bs=64,kv=1024",
                                       "bs=64,kv=8192", "bs=256,kv=1024", "bs=256,kv=8192"};
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
    char fmt[64];
    snprintf(fmt, sizeof fmt, "%s,seed=%%llu", shapes[i]);
    no_false_alarm(fmt, 1000 + 10 * i, 5);
  }
}
#endif
