/* The report's matrix, its baseline comparison and summary.json (mlr_report.h). */
#define _POSIX_C_SOURCE 200809L
#include "mlr_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures/gen/mlr_gen.h"
#include "fixtures/inputs/mlr_inputs.h"
#include "fixtures/io/mlr_manifest.h"
#include "fixtures/suites/mlr_suites.h"
#include "ref/budget/mlr_budget.h"
#include "ref/emulate/mlr_emulate.h"
#include "ref/oracle/mlr_oracle.h"
#include "ref/recipe/mlr_recipe.h"

enum { QUICK_CELLS = 6, QUICK_TOKENS = 4096, MAX_RECIPES = 32 };

/* the golden manifest's rows (NULL path or no file: none) */
typedef struct manifest {
  mlr_manifest_row *rows;
  size_t n;
} manifest;

static mlr_status read_manifest(const char *path, manifest *m, mlr_error *err) {
  m->rows = NULL, m->n = 0;
  return path ? mlr_manifest_read(path, &m->rows, &m->n, err) : MLR_OK;
}

static const char *cell_spec(const char *suite, const char *cell) {
  const mlr_suite *s = mlr_suite_find(suite);
  for (size_t k = 0; s && k < s->n; k++)
    if (!strcmp(s->cells[k].name, cell)) return s->cells[k].spec;
  return NULL;
}

/* the manifest row of (suite, cell, recipe), else one of another suite whose cell has the same
 * spec (the nightly suite's cells are the bench and edge suites' own) */
static const mlr_manifest_row *find_row(const manifest *m, const char *suite, const char *cell, const char *spec, const char *recipe) {
  const mlr_manifest_row *same_spec = NULL;
  for (size_t k = 0; k < m->n; k++) {
    const mlr_manifest_row *r = &m->rows[k];
    if (strcmp(r->recipe, recipe)) continue;
    if (!strcmp(r->suite, suite) && !strcmp(r->cell, cell)) return r;
    const char *sp = same_spec ? NULL : cell_spec(r->suite, r->cell);
    if (sp && !strcmp(sp, spec)) same_spec = r;
  }
  return same_spec;
}

/* the inputs of a shape spec, generated and checked against the contract (tf freed on failure) */
static mlr_status inputs_of(const char *spec_text, mlr_tensor_file *tf, mlr_inputs *in, mlr_error *err) {
  mlr_gen_spec spec;
  mlr_status st = mlr_gen_spec_parse(spec_text, &spec, err);
  if (st != MLR_OK) return st;
  st = mlr_gen_inputs(&spec, tf, NULL, NULL, err);
  mlr_gen_spec_free(&spec);
  if (st == MLR_OK && (st = mlr_inputs_check(tf, spec_text, 0, in, err)) != MLR_OK) mlr_tf_free(tf);
  return st;
}

/* one shape: inputs and the certified truth (dequantized KV), then every recipe */
static mlr_status run_shape(const mlr_suite_cell *sc, const char *suite, const mlr_recipe *rs, int nr, const manifest *man, double rtol,
                            double atol, int threads, mlr_report_cell *out, mlr_error *err) {
  mlr_tensor_file tf;
  mlr_inputs in;
  mlr_status st = inputs_of(sc->spec, &tf, &in, err);
  if (st != MLR_OK) return st;
  int64_t tokens = 0;
  for (int64_t b = 0; b < in.B; b++) tokens += mlr_inputs_kv_len(&in, b);
  const int64_t n = in.T * in.H * MLR_EMU_V_DIM;
  double *truth = NULL, *bound = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  if (!bound) st = mlr_error_set(err, MLR_ENOMEM, "out of memory for the bound of %s", sc->name);
  else st = mlr_oracle_o(&in, MLR_TRUTH_DEQUANTIZED, &truth, err);
  for (int k = 0; st == MLR_OK && k < nr; k++) {
    mlr_report_cell *c = &out[k];
    memset(c, 0, sizeof *c);
    snprintf(c->shape, sizeof c->shape, "%s", sc->name);
    snprintf(c->spec, sizeof c->spec, "%s", sc->spec);
    snprintf(c->recipe, sizeof c->recipe, "%.63s", rs[k].name);
    mlr_recipe_hash(&rs[k], c->recipe_sha);
    mlr_error fit = {""};
    if (mlr_emu_check_fit(&rs[k], &in, &fit) != MLR_OK) {
      snprintf(c->reason, sizeof c->reason, "%.255s", fit.msg);
      c->pass = 1; /* nothing to fail */
      continue;
    }
    c->applicable = 1;
    mlr_emu_opts opts = {threads, 0, MLR_FAULT_NONE};
    mlr_emu_result res;
    if ((st = mlr_emulate(&rs[k], &in, &opts, &res, err)) != MLR_OK) break;
    mlr_sha256_hex(res.o, mlr_emu_o_bytes(&res), c->o_sha);
    const mlr_manifest_row *row = find_row(man, suite, sc->name, sc->spec, rs[k].name);
    snprintf(c->golden, sizeof c->golden, "%s", !row ? "none" : strcmp(row->o_sha, c->o_sha) ? "differ" : "match");
    const mlr_cmp_tensor o = {res.out_format == MLR_OUT_FP32 ? MLR_CT_F32 : res.out_format == MLR_OUT_FP16 ? MLR_CT_F16 : MLR_CT_BF16, res.o, n},
                         t = {MLR_CT_F64, truth, n};
    c->bound_computed = tokens <= MLR_REPORT_BOUND_TOKENS;
    if ((st = mlr_compare_utilisation(&o, &t, rtol, atol, &c->util, err)) == MLR_OK && c->bound_computed &&
        (st = mlr_budget_bound(&rs[k], &in, MLR_TRUTH_DEQUANTIZED, truth, threads, bound, err)) == MLR_OK) {
      mlr_bound_use bu;
      if ((st = mlr_compare_bound(&o, &t, bound, 1.0, &bu, err)) == MLR_OK) c->bound_holds = bu.over == 0, c->bound_max_ratio = bu.max_ratio;
    }
    if (st == MLR_OK) {
      double se = 0, st2 = 0; /* relative L2 against the truth, over finite pairs */
      for (int64_t i = 0; i < n; i++) {
        const double v = res.out_format == MLR_OUT_FP32 ? ((const float *)res.o)[i]
                                                        : mlr_decode(res.out_format == MLR_OUT_FP16 ? MLR_FMT_FP16 : MLR_FMT_BF16, ((const uint16_t *)res.o)[i]);
        if (isfinite(v) && isfinite(truth[i])) se += (v - truth[i]) * (v - truth[i]), st2 += truth[i] * truth[i];
      }
      c->rel_l2 = st2 > 0 ? sqrt(se / st2) : 0;
    }
    c->pass = strcmp(c->golden, "differ") != 0 && (c->bound_holds || !c->bound_computed);
    mlr_emu_result_free(&res);
  }
  free(truth), free(bound);
  mlr_tf_free(&tf);
  return st;
}

/* the static-scale sweep: recipe r on spec with each Q distribution, absmax on a log grid (the
 * seeds' 6.0 added) */
static mlr_status run_sweep(mlr_report *rep, const mlr_recipe *base, const char *spec0, const char *const *dists, int nd, int np, int threads,
                            mlr_error *err) {
  double grid[MLR_REPORT_SWEEP_MAX];
  np = mlr_budget_sweep_grid(1.0, 448.0, np, grid);
  snprintf(rep->sweep_recipe, sizeof rep->sweep_recipe, "%s", base->name);
  snprintf(rep->sweep_shape, sizeof rep->sweep_shape, "%s", spec0);
  rep->nsweep_points = np, rep->nsweep_dists = nd, rep->seeds_absmax = MLR_BUDGET_SEEDS_ABSMAX;
  mlr_status st = MLR_OK;
  for (int d = 0; st == MLR_OK && d < nd; d++) {
    char spec[256];
    snprintf(spec, sizeof spec, "%s,dist=%s", spec0, dists[d]);
    snprintf(rep->sweep_dist[d], sizeof rep->sweep_dist[d], "%s", dists[d]);
    mlr_tensor_file tf;
    mlr_inputs in;
    if ((st = inputs_of(spec, &tf, &in, err)) != MLR_OK) break;
    double *truth;
    st = mlr_oracle_o(&in, MLR_TRUTH_DEQUANTIZED, &truth, err);
    for (int i = 0; st == MLR_OK && i < np; i++) {
      mlr_recipe r = *base;
      r.q_scale = MLR_QS_STATIC, r.q_absmax = grid[i];
      mlr_policy_point pt;
      if ((st = mlr_budget_policy_point(&r, &in, truth, rep->rtol, rep->atol, threads, &pt, err)) != MLR_OK) break;
      rep->sweep[d][i] = (mlr_report_sweep_point){grid[i], pt.clipped_frac, pt.util_max, pt.util_p999, pt.rel_l2};
    }
    free(truth);
    mlr_tf_free(&tf);
  }
  return st;
}

mlr_status mlr_report_run(const char *suite, const char *const *recipes, int nrecipes, int quick, const char *digests, int threads,
                          mlr_report_progress progress, void *ctx, mlr_report *rep, mlr_error *err) {
  memset(rep, 0, sizeof *rep);
  rep->rtol = rep->atol = 1e-2, rep->margin = 0.1, rep->quick = quick;
  snprintf(rep->suite, sizeof rep->suite, "%s", suite);
  const mlr_suite *su = mlr_suite_find(suite);
  if (!su) return mlr_error_set(err, MLR_EINVAL, "unknown suite '%s' (valid: %s)", suite, mlr_suite_names());
  static mlr_recipe rs[MAX_RECIPES];
  int nr = 0;
  if (nrecipes == 0) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", mlr_recipe_builtin_names());
    for (char *save = NULL, *tok = strtok_r(buf, "|", &save); tok && nr < MAX_RECIPES; tok = strtok_r(NULL, "|", &save)) mlr_recipe_builtin(tok, &rs[nr++]);
  } else
    for (int k = 0; k < nrecipes && nr < MAX_RECIPES; k++)
      if (mlr_recipe_builtin(recipes[k], &rs[nr++]) != MLR_OK)
        return mlr_error_set(err, MLR_EINVAL, "unknown recipe '%s' (valid: %s)", recipes[k], mlr_recipe_builtin_names());
  /* the cells: all, or the quick ones (small: up to QUICK_TOKENS KV tokens in all) */
  const mlr_suite_cell *cells[256];
  int ns = 0;
  for (size_t k = 0; k < su->n && ns < 256; k++) {
    if (quick) {
      mlr_gen_spec gs;
      if (mlr_gen_spec_parse(su->cells[k].spec, &gs, err) != MLR_OK) return MLR_EINVAL;
      int64_t tokens = 0;
      for (int64_t b = 0; b < gs.bs; b++) tokens += gs.lens[b];
      mlr_gen_spec_free(&gs);
      if (tokens > QUICK_TOKENS || ns == QUICK_CELLS) continue;
    }
    cells[ns++] = &su->cells[k];
  }
  manifest man;
  mlr_status st = read_manifest(digests, &man, err);
  if (st != MLR_OK) return st;
  rep->cells = calloc((size_t)(ns * nr > 0 ? ns * nr : 1), sizeof *rep->cells);
  if (!rep->cells) {
    free(man.rows);
    return mlr_error_set(err, MLR_ENOMEM, "out of memory for the report's cells");
  }
  for (int s = 0; st == MLR_OK && s < ns; s++) {
    if (progress) progress(cells[s]->name, s, ns + 1, ctx);
    st = run_shape(cells[s], suite, rs, nr, &man, rep->rtol, rep->atol, threads, &rep->cells[s * nr], err);
    if (st == MLR_OK) rep->ncells += nr;
  }
  free(man.rows);
  if (st != MLR_OK) return st;
  for (int k = 0; k < rep->ncells; k++) rep->nfailures += !rep->cells[k].pass;
  /* the sweep: the first fp8-Q recipe of the list on one bs=4 shape */
  for (int k = 0; k < nr; k++)
    if (rs[k].q_format != MLR_Q_BF16) {
      if (progress) progress("static-scale sweep", ns, ns + 1, ctx);
      static const char *const DISTS[] = {"normal", "t3", "outliers:0.001"};
      st = run_sweep(rep, &rs[k], quick ? "bs=1,kv=256,seed=4217" : "bs=4,kv=1024,seed=4217", DISTS, quick ? 2 : 3, quick ? 5 : 9, threads, err);
      break;
    }
  if (progress) progress("done", ns + 1, ns + 1, ctx);
  return st;
}
