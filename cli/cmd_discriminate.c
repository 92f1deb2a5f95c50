/* mlaref discriminate: which check catches which wrong kernel, over the cells of suites
 * (mlr_discriminate.h): a table a suite (the probe suite first, a random suite after it for
 * comparison). Exit 1 when the model fails its own checks on a cell (a false alarm) or a wrong
 * kernel passes the default rules on every cell of the first suite. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "mlr_discriminate.h"
#include "mlr_gen.h"
#include "mlr_inputs.h"
#include "mlr_oracle.h"
#include "mlr_suites.h"

#define CMD "discriminate"
enum { MAX_SUITES = 4 };

typedef struct tally {
  int caught[MLR_DISC_WRONG][MLR_DISC_RULES]; /* cells where the check fails the wrong kernel */
  int acting[MLR_DISC_WRONG];                 /* cells where the mutation changes the output */
  int cells, model_ok;                        /* cells run; cells where the model passes */
} tally;

/* one cell: its inputs, truth and table, added to t; 1 when the recipe does not fit it */
static int run_cell(const mlr_recipe *r, const mlr_suite_cell *sc, int threads, tally *t) {
  mlr_tensor_file tf;
  mlr_inputs in;
  int rc = mlr_cli_gen_memory(CMD, "cell", sc->spec, &tf, &in, NULL);
  if (rc != MLR_EXIT_OK) return -rc;
  mlr_error err = {""};
  if (mlr_emu_check_fit(r, &in, &err) != MLR_OK) {
    fprintf(stderr, "mlaref %s: cell %s skipped: %s\n", CMD, sc->name, err.msg);
    mlr_tf_free(&tf);
    return 1;
  }
  const int64_t n = in.T * in.H * MLR_EMU_V_DIM, nl = in.T * in.H;
  double *truth = malloc((size_t)(n > 0 ? n : 1) * sizeof *truth),
         *tlse = malloc((size_t)(nl > 0 ? nl : 1) * sizeof *tlse);
  mlr_oracle_stats ost;
  int table[MLR_DISC_WRONG][MLR_DISC_RULES], ok = 0;
  mlr_status st = truth && tlse ? mlr_oracle(&in, MLR_TRUTH_DEQUANTIZED, truth, tlse, &ost, &err)
                                : mlr_error_set(&err, MLR_ENOMEM, "out of memory for the truth");
  if (st == MLR_OK) st = mlr_disc_table(r, &in, truth, tlse, threads, table, &ok, &err);
  free(truth);
  free(tlse);
  mlr_tf_free(&tf);
  if (st != MLR_OK) return -mlr_cli_fail(CMD, "cell %s: %s", sc->name, err.msg);
  t->cells++;
  t->model_ok += ok;
  if (!ok)
    fprintf(stderr, "mlaref %s: cell %s: the model itself fails its checks\n", CMD, sc->name);
  for (int k = 0; k < MLR_DISC_WRONG; k++) {
    t->acting[k] += table[k][0] >= 0;
    for (int q = 0; q < MLR_DISC_RULES; q++) t->caught[k][q] += table[k][q] == 1;
  }
  fprintf(stderr, "mlaref %s: cell %s done\n", CMD, sc->name);
  return 0;
}

static int run_suite(const mlr_recipe *r, const mlr_suite *s, int max_bs, int threads, tally *t) {
  memset(t, 0, sizeof *t);
  for (size_t c = 0; c < s->n; c++) {
    mlr_gen_spec spec;
    mlr_error err = {""};
    if (mlr_gen_spec_parse(s->cells[c].spec, &spec, &err) != MLR_OK)
      return mlr_cli_fail(CMD, "cell %s: %s", s->cells[c].name, err.msg);
    const int64_t bs = spec.bs;
    mlr_gen_spec_free(&spec);
    if (max_bs && bs > max_bs) continue;
    const int rc = run_cell(r, &s->cells[c], threads, t);
    if (rc < 0) return -rc;
  }
  return MLR_EXIT_OK;
}

/* "caught/acting", or "n/a" where the mutation changes no cell's output */
static void count(int caught, int acting) {
  if (acting)
    printf(" %d/%d |", caught, acting);
  else
    printf(" n/a |");
}

/* one suite's table: every check's count for every wrong kernel */
static void print_table(const char *name, const tally *t) {
  printf("\nsuite %s: %d cells; the model passes the default rules and its bound on %d\n\n"
         "| wrong kernel |",
         name, t->cells, t->model_ok);
  for (int q = 0; q < MLR_DISC_RULES; q++) printf(" %s |", mlr_disc_rules[q]);
  printf("\n| --- |");
  for (int q = 0; q < MLR_DISC_RULES; q++) printf(" ---: |");
  printf("\n");
  for (int k = 0; k < MLR_DISC_WRONG; k++) {
    printf("| %s |", mlr_disc_wrong_name(k));
    for (int q = 0; q < MLR_DISC_RULES; q++) count(t->caught[k][q], t->acting[k]);
    printf("\n");
  }
}

int mlr_cmd_discriminate(int argc, char **argv) {
  const char *names[MAX_SUITES], *recipe = "triton-fp8-split";
  int ns = 0, threads = 0, rc = MLR_EXIT_OK;
  uint64_t max_bs = 0;
  for (int i = 0; i < argc; i++) {
    if (mlr_cli_list(CMD, argc, argv, &i, "suite", "a suite name", names, &ns, MAX_SUITES, &rc) ||
        mlr_cli_str(CMD, argc, argv, &i, "recipe", "a recipe", &recipe, &rc) ||
        mlr_cli_count(CMD, argc, argv, &i, "max-bs", 1, 1 << 20, &max_bs, &rc) ||
        mlr_cli_threads_opt(CMD, argc, argv, &i, &threads, &rc)) {
      if (rc != MLR_EXIT_OK) return rc;
      continue;
    }
    return mlr_cli_unknown_option(CMD, argv[i], "--suite, --recipe, --max-bs, --threads");
  }
  if (!ns) return mlr_cli_usage_fail(CMD);
  const mlr_suite *suites[MAX_SUITES];
  for (int s = 0; s < ns; s++)
    if (!(suites[s] = mlr_suite_find(names[s])))
      return mlr_cli_usage_error(CMD, "--suite '%s' is not a suite (valid: %s)", names[s],
                                 mlr_suite_names());
  mlr_recipe r;
  if ((rc = mlr_cli_recipe(CMD, recipe, &r)) != MLR_EXIT_OK) return rc;
  if (r.out_format != MLR_OUT_BF16)
    return mlr_cli_usage_error(CMD, "--recipe %s: the wrong kernels are made from a bf16 output",
                               r.name);
  tally *t = calloc(MAX_SUITES, sizeof *t);
  if (!t) return mlr_cli_fail(CMD, "out of memory");
  for (int s = 0; s < ns && rc == MLR_EXIT_OK; s++)
    rc = run_suite(&r, suites[s], (int)max_bs, threads, &t[s]);
  if (rc == MLR_EXIT_OK) {
    printf("wrong kernels made from %s; a count is the cells where the check fails the wrong "
           "kernel / the cells where the mutation changes the output\n",
           r.name);
    for (int s = 0; s < ns; s++) print_table(names[s], &t[s]);
    /* a false alarm, or a wrong kernel the first suite lets through: a failed check */
    int escaped = 0, alarms = 0;
    for (int k = 0; k < MLR_DISC_WRONG; k++)
      escaped += !t[0].caught[k][MLR_DISC_DEFAULT]; /* one the suite cannot show escapes too */
    for (int s = 0; s < ns; s++) alarms += t[s].cells - t[s].model_ok;
    printf("\n%d wrong kernels pass the default rules on every cell of %s; %d false alarms\n",
           escaped, names[0], alarms);
    rc = escaped || alarms ? MLR_EXIT_FAIL : MLR_EXIT_OK;
  }
  free(t);
  return rc;
}
