/* Discrimination: mlaref's default rule (fa3 against the binary64 truth, with the kernel's recipe
 * model as the same-precision reference) fails every wrong kernel at every bench shape and never
 * fails a correct one. The wrong kernels are small mutations of the emulated triton-fp8-split
 * kernel (8 splits at every shape, so the merge faults act everywhere): faults inside the model
 * (mlr_emu_fault) and mistakes in the output (all zeros, q[..., :512]/24, batches swapped, one
 * head copied to another). The table of which rule catches what is written to
 * $MLAREF_TABLE_OUT (default discrimination.md in the build folder) and goes in the README.
 *
 * The correct kernels: each built-in recipe's model, and a twin of it with other correct
 * roundings (twin_of), both against the recipe's model under the default rule, for 100 seeds of
 * each bs=4 bench shape (label slow: 5 seeds of each larger shape too). */
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

/* the verdict of rule text on candidate a (bf16 codes) against the model b and the truth */
static mlr_verdict_kind judge(const char *rule, const cell *c, const uint16_t *a, const uint16_t *b,
                              const double *bound) {
  mlr_verdict_kind v;
  mlr_error err = {""};
  cr_assert_eq(mlr_disc_judge(rule, c->n, a, b, c->truth, bound, &v, &err), MLR_OK, "%s", err.msg);
  return v;
}

#ifndef MLR_SLOW
Test(discriminate, every_wrong_kernel_fails_at_every_bench_shape, .timeout = 1200) {
  const mlr_suite *bench = mlr_suite_find("bench");
  cr_assert(bench != NULL);
  mlr_recipe r;
  cr_assert_eq(mlr_recipe_builtin("triton-fp8-split", &r), MLR_OK);
  int caught[MLR_DISC_WRONG][MLR_DISC_RULES] = {{0}};
  for (size_t s = 0; s < bench->n; s++) {
    static cell c;
    cell_make(&c, bench->cells[s].spec);
    int table[MLR_DISC_WRONG][MLR_DISC_RULES], model_ok;
    mlr_error err = {""};
    cr_assert_eq(mlr_disc_table(&r, &c.in, c.truth, 0, table, &model_ok, &err), MLR_OK, "%s",
                 err.msg);
    cr_assert(model_ok, "%s: the model itself fails fa3 or its bound", bench->cells[s].name);
    for (int k = 0; k < MLR_DISC_WRONG; k++) {
      for (int q = 0; q < MLR_DISC_RULES; q++) caught[k][q] += table[k][q] == 1;
      /* rule 1: fa3 */
      cr_assert(table[k][1] == 1,
                "%s: '%s' passes the default rule (or leaves the output unchanged)",
                bench->cells[s].name, mlr_disc_wrong[k]);
    }
    cell_free(&c);
  }
  const char *path = getenv("MLAREF_TABLE_OUT") ? getenv("MLAREF_TABLE_OUT") : "discrimination.md";
  FILE *f = fopen(path, "w");
  cr_assert(f != NULL);
  fprintf(f, "| wrong kernel (mutation of triton-fp8-split) | task rule allclose:0.1,0.1,0.05 | "
             "fa3 (default) | nmse:5e-4 | cos:1e-2 | budget |\n");
  fprintf(f, "| --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (int k = 0; k < MLR_DISC_WRONG; k++) {
    fprintf(f, "| %s |", mlr_disc_wrong[k]);
    for (int q = 0; q < MLR_DISC_RULES; q++) fprintf(f, " %d/%zu |", caught[k][q], bench->n);
    fprintf(f, "\n");
  }
  fclose(f);
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

static void no_false_alarm(const char *spec_fmt, uint64_t seed0, int seeds) {
  static const char *const names[] = {"triton-fp8-single", "triton-fp8-split", "aiter-a8w8-ps",
                                      "aiter-a16w8-ps",    "aiter-bf16-np",    "torch-bmm-bf16",
                                      "aiter-test-ref",    "fp32-seq"};
  for (int k = 0; k < seeds; k++) {
    char spec[128];
    snprintf(spec, sizeof spec, spec_fmt, (unsigned long long)(seed0 + (uint64_t)k));
    static cell c;
    cell_make(&c, spec);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
      mlr_recipe r, t;
      cr_assert_eq(mlr_recipe_builtin(names[i], &r), MLR_OK);
      twin_of(&r, &t);
      mlr_emu_result a, b;
      emulate(&r, &c.in, 0, &b);
      emulate(&t, &c.in, 0, &a);
      cr_assert_eq(judge("fa3", &c, b.o, b.o, NULL), MLR_VERDICT_PASS, "%s %s: the model", spec,
                   names[i]);
      cr_assert_eq(judge("fa3", &c, a.o, b.o, NULL), MLR_VERDICT_PASS,
                   "%s %s: a correct twin fails the default rule", spec, names[i]);
      mlr_emu_result_free(&a);
      mlr_emu_result_free(&b);
    }
    cell_free(&c);
  }
}

#ifndef MLR_SLOW
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
