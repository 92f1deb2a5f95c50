/* The report's matrix, its baseline comparison and summary.json (mlr_report.h). */
#define _POSIX_C_SOURCE 200809L
#include "mlr_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mlr_gen.h"
#include "mlr_inputs.h"
#include "mlr_manifest.h"
#include "mlr_suites.h"
#include "mlr_budget.h"
#include "mlr_emulate.h"
#include "mlr_oracle.h"
#include "mlr_recipe.h"
#include "mlr_gpu.h"
#include "mlr_gpu_fast.h"
#include "mlr_discriminate.h"
#include "mlr_shard.h"

enum { QUICK_CELLS = 6, QUICK_TOKENS = 4096, MAX_VARIANTS = 64 };
enum { MAX_COLS = MAX_VARIANTS + MLR_REPORT_MAX_KERNELS };

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* a column of the matrix: a recipe under its own Q policy, or under a point of the policy axis */
typedef struct variant {
  mlr_recipe r;
  char policy[48];
  int own;
} variant;

/* the GPU leg's state for one run */
typedef struct gpu_leg {
  int on, reps;
} gpu_leg;

/* the user kernels of one run and the folder their files live in */
typedef struct kernel_leg {
  const mlr_kernel *k;
  int n;
  char dir[4096];
  const char *commit;
} kernel_leg;

/* the golden manifest's rows (NULL path or no file: none) */
typedef struct manifest {
  mlr_manifest_row *rows;
  size_t n;
} manifest;

static mlr_status read_manifest(const char *path, manifest *m, mlr_error *err) {
  m->rows = NULL;
  m->n = 0;
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
static const mlr_manifest_row *find_row(const manifest *m, const char *suite, const char *cell,
                                        const char *spec, const char *recipe) {
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
static mlr_status inputs_of(const char *spec_text, mlr_tensor_file *tf, mlr_inputs *in,
                            mlr_error *err) {
  mlr_gen_spec spec;
  mlr_status st = mlr_gen_spec_parse(spec_text, &spec, err);
  if (st != MLR_OK) return st;
  st = mlr_gen_inputs(&spec, tf, NULL, NULL, err);
  mlr_gen_spec_free(&spec);
  if (st == MLR_OK && (st = mlr_inputs_check(tf, spec_text, 0, in, err)) != MLR_OK) mlr_tf_free(tf);
  return st;
}

static mlr_ctype out_kind(int f) {
  return f == MLR_OUT_FP32 ? MLR_CT_F32 : f == MLR_OUT_FP16 ? MLR_CT_F16 : MLR_CT_BF16;
}

/* the GPU leg of one cell: the fast kernel for the recipes it computes (timed: the median of reps
 * launches, L2 flushed before each), the exact kernel for the others; pass as documented in
 * mlr_report_cell. A recipe no GPU kernel computes, or inputs one does not take, leave gpu = 0 with
 * the reason; a GPU error fails the cell with its message. */
static void gpu_cell(const gpu_leg *g, const mlr_recipe *r, const mlr_inputs *in,
                     const mlr_emu_result *model, const double *truth, const double *bound,
                     mlr_report_cell *c) {
  mlr_error e = {""};
  const int64_t n = in->T * in->H * MLR_EMU_V_DIM;
  mlr_emu_result res;
  memset(&res, 0, sizeof res);
  mlr_status st;
  if (mlr_gpu_fast_fit(r, NULL, &e) == MLR_OK) {
    snprintf(c->gpu_kernel, sizeof c->gpu_kernel, "fast");
    mlr_gpu_fast *f = NULL;
    double us[64];
    const int reps = g->reps < 64 ? g->reps : 64;
    st = mlr_gpu_fast_prepare(r, in, NULL, &f, &e);
    for (int k = 0; st == MLR_OK && k < reps; k++) st = mlr_gpu_fast_launch(f, 1, &us[k], &e);
    if (st == MLR_OK) st = mlr_gpu_fast_result(f, &res, &e);
    mlr_gpu_fast_free(f);
    if (st == MLR_OK) { /* the median, as `bench gpu` takes it */
      mlr_sort_values(us, reps);
      c->gpu_us = mlr_sorted_quantile(us, reps, 0.5);
    }
  } else {
    snprintf(c->gpu_kernel, sizeof c->gpu_kernel, "exact");
    mlr_gpu_timing tm;
    memset(&tm, 0, sizeof tm);
    st = mlr_gpu_exact(r, in, &res, &tm, &e);
    c->gpu_us = tm.kernel_ms * 1e3;
  }
  if (st == MLR_EINVAL) { /* not a failure: this kernel does not take these inputs or this recipe */
    snprintf(c->gpu_note, sizeof c->gpu_note, "%.255s", e.msg);
    c->gpu_kernel[0] = 0;
    return;
  }
  c->gpu = 1;
  if (st != MLR_OK) {
    snprintf(c->gpu_note, sizeof c->gpu_note, "%.255s", e.msg);
    mlr_emu_result_free(&res);
    return; /* gpu_pass stays 0 */
  }
  mlr_sha256_hex(res.o, mlr_emu_o_bytes(&res), c->gpu_o_sha);
  const mlr_cmp_tensor o = {out_kind(res.out_format), res.o, n}, t = {MLR_CT_F64, truth, n},
                       mo = {out_kind(model->out_format), model->o, n};
  mlr_metrics mm; /* bit-identical to the model as `mlaref check` counts it (NaN for NaN) */
  c->gpu_identical = mlr_compare_metrics(&o, &mo, &mm, &e) != MLR_OK ? 0.0
                     : mm.n ? (double)mm.identical / (double)mm.n
                            : 1.0;
  mlr_compare_utilisation(&o, &t, 1e-2, 1e-2, &c->gpu_util, &e);
  if (!strcmp(c->gpu_kernel, "exact"))
    c->gpu_pass = !strcmp(c->gpu_o_sha, c->o_sha);
  else {
    mlr_bound_use bu;
    c->gpu_bound_holds =
        bound && mlr_compare_bound(&o, &t, bound, 1.0, &bu, &e) == MLR_OK && bu.over == 0;
    mlr_verdict_kind v = MLR_VERDICT_FAIL;
    const int fa3 = res.out_format == MLR_OUT_BF16 &&
                    mlr_disc_judge("fa3", n, res.o, model->o, truth, NULL, &v, &e) == MLR_OK &&
                    v == MLR_VERDICT_PASS;
    c->gpu_pass = fa3 && (bound ? c->gpu_bound_holds : 1);
  }
  mlr_emu_result_free(&res);
}

/* a kernel cell's identity: the shape, the kernel, the recipe and policy it claims */
static void kernel_column(const mlr_suite_cell *sc, const mlr_kernel *k, mlr_report_cell *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->shape, sizeof c->shape, "%s", sc->name);
  snprintf(c->spec, sizeof c->spec, "%s", sc->spec);
  snprintf(c->kernel, sizeof c->kernel, "%s", k->name);
  snprintf(c->recipe, sizeof c->recipe, "%.63s", k->recipe.name);
  mlr_recipe_hash(&k->recipe, c->recipe_sha);
  if (k->recipe.q_format == MLR_Q_BF16)
    snprintf(c->policy, sizeof c->policy, "none");
  else
    mlr_recipe_policy_text(&k->recipe, c->policy, sizeof c->policy);
  c->own_policy = !k->policy[0];
  snprintf(c->golden, sizeof c->golden, "none");
}

/* the verdict of one kernel on one cell; its output's digest and error against the truth where it
 * wrote an output of the right shape */
static mlr_status kernel_cell(const mlr_kernel *k, const mlr_kernel_cell *kc, const double *truth,
                              double rtol, double atol, mlr_report_cell *c, mlr_error *err) {
  mlr_kernel_result res;
  mlr_status st = mlr_kernel_run_cell(k, kc, &res, err);
  c->kernel_verdict = res.verdict;
  snprintf(c->kernel_reason, sizeof c->kernel_reason, "%s", res.reason);
  memcpy(c->kernel_checks, res.checks, sizeof res.checks);
  c->kernel_nchecks = res.nchecks;
  c->kernel_s = res.seconds;
  const mlr_tensor *o = mlr_tf_find(&res.out, "o");
  if (st == MLR_OK && o && res.verdict != MLR_KERNEL_ERROR) {
    const int64_t n = kc->in->T * kc->in->H * MLR_EMU_V_DIM;
    const mlr_cmp_tensor a = {o->dtype == MLR_DT_F32   ? MLR_CT_F32
                              : o->dtype == MLR_DT_F16 ? MLR_CT_F16
                                                       : MLR_CT_BF16,
                              o->data, n},
                         t = {MLR_CT_F64, truth, n};
    mlr_sha256_hex(o->data, o->nbytes, c->o_sha);
    st = mlr_compare_utilisation(&a, &t, rtol, atol, &c->util, err);
    c->rel_l2 = mlr_compare_rel_l2(&a, &t);
  }
  c->pass =
      res.verdict == MLR_KERNEL_PASS; /* a skip is no pass (nor a failure: mlr_report_count) */
  mlr_kernel_result_free(&res);
  return st;
}

/* every user kernel on one shape: its inputs written once for all of them, removed after */
static mlr_status kernel_cells(const kernel_leg *kl, const mlr_suite_cell *sc,
                               const mlr_tensor_file *tf, const mlr_inputs *in, const double *truth,
                               double rtol, double atol, int threads, const unsigned char *take,
                               mlr_report_cell *out, mlr_error *err) {
  char path[4096] = "";
  mlr_status st = MLR_OK;
  for (int k = 0; st == MLR_OK && k < kl->n; k++) {
    if (!take[k]) continue;
    const double t0 = now_s();
    mlr_report_cell *c = &out[k];
    kernel_column(sc, &kl->k[k], c);
    mlr_error fit = {""};
    if (mlr_emu_check_fit(&kl->k[k].recipe, in, &fit) != MLR_OK) {
      snprintf(c->reason, sizeof c->reason, "%.255s", fit.msg);
      c->pass = 1; /* the recipe it claims does not run on these inputs: nothing to hold it to */
      continue;
    }
    c->applicable = 1;
    if (!path[0] && (st = mlr_kernel_write_inputs(kl->dir, sc->name, tf, path, err)) != MLR_OK)
      break;
    const mlr_kernel_cell kc = {kl->dir, sc->name, path, in, sc->spec, threads, kl->commit};
    st = kernel_cell(&kl->k[k], &kc, truth, rtol, atol, c, err);
    c->seconds = now_s() - t0;
  }
  if (path[0]) remove(path);
  return st;
}

/* one shape: inputs and the certified truth (dequantized KV), then every column it takes (take:
 * the recipe columns', then the kernels'); each cell's seconds: its own work and its share of the
 * inputs and truth */
static mlr_status run_shape(const mlr_suite_cell *sc, const char *suite, const variant *vs, int nv,
                            const manifest *man, double rtol, double atol, int threads,
                            const gpu_leg *g, const kernel_leg *kl, const unsigned char *take,
                            mlr_report_cell *out, mlr_error *err) {
  const double t0 = now_s();
  mlr_tensor_file tf;
  mlr_inputs in;
  mlr_status st = inputs_of(sc->spec, &tf, &in, err);
  if (st != MLR_OK) return st;
  int64_t tokens = 0;
  for (int64_t b = 0; b < in.B; b++) tokens += mlr_inputs_kv_len(&in, b);
  const int64_t n = in.T * in.H * MLR_EMU_V_DIM;
  double *truth = NULL, *bound = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  if (!bound)
    st = mlr_error_set(err, MLR_ENOMEM, "out of memory for the bound of %s", sc->name);
  else
    st = mlr_oracle_o(&in, MLR_TRUTH_DEQUANTIZED, &truth, err);
  const double setup = now_s() - t0;
  for (int k = 0; st == MLR_OK && k < nv; k++) {
    if (!take[k]) continue;
    const double tc = now_s();
    const mlr_recipe *r = &vs[k].r;
    mlr_report_cell *c = &out[k];
    memset(c, 0, sizeof *c);
    snprintf(c->shape, sizeof c->shape, "%s", sc->name);
    snprintf(c->spec, sizeof c->spec, "%s", sc->spec);
    snprintf(c->recipe, sizeof c->recipe, "%.63s", r->name);
    snprintf(c->policy, sizeof c->policy, "%s", vs[k].policy);
    c->own_policy = vs[k].own;
    mlr_recipe_hash(r, c->recipe_sha);
    mlr_error fit = {""};
    if (mlr_emu_check_fit(r, &in, &fit) != MLR_OK) {
      snprintf(c->reason, sizeof c->reason, "%.255s", fit.msg);
      c->pass = 1; /* nothing to fail */
      continue;
    }
    c->applicable = 1;
    mlr_emu_opts opts = {threads, 0, MLR_FAULT_NONE, 0};
    mlr_emu_result res;
    if ((st = mlr_emulate(r, &in, &opts, &res, err)) != MLR_OK) break;
    mlr_sha256_hex(res.o, mlr_emu_o_bytes(&res), c->o_sha);
    const mlr_manifest_row *row =
        vs[k].own ? find_row(man, suite, sc->name, sc->spec, r->name) : NULL;
    snprintf(c->golden, sizeof c->golden, "%s",
             !row                           ? "none"
             : strcmp(row->o_sha, c->o_sha) ? "differ"
                                            : "match");
    const mlr_cmp_tensor o = {out_kind(res.out_format), res.o, n}, t = {MLR_CT_F64, truth, n};
    c->bound_computed = tokens <= MLR_REPORT_BOUND_TOKENS && mlr_budget_covers(r);
    if ((st = mlr_compare_utilisation(&o, &t, rtol, atol, &c->util, err)) == MLR_OK &&
        c->bound_computed &&
        (st = mlr_budget_bound(r, &in, MLR_TRUTH_DEQUANTIZED, truth, threads, bound, err)) ==
            MLR_OK) {
      mlr_bound_use bu;
      if ((st = mlr_compare_bound(&o, &t, bound, 1.0, &bu, err)) == MLR_OK) {
        c->bound_holds = bu.over == 0;
        c->bound_max_ratio = bu.max_ratio;
      }
    }
    if (st == MLR_OK) c->rel_l2 = mlr_compare_rel_l2(&o, &t);
    if (st == MLR_OK && g->on)
      gpu_cell(g, r, &in, &res, truth, c->bound_computed ? bound : NULL, c);
    c->pass = strcmp(c->golden, "differ") != 0 && (c->bound_holds || !c->bound_computed) &&
              (!c->gpu || c->gpu_pass);
    mlr_emu_result_free(&res);
    c->seconds = now_s() - tc;
  }
  if (st == MLR_OK && kl->n)
    st = kernel_cells(kl, sc, &tf, &in, truth, rtol, atol, threads, take + nv, &out[nv], err);
  int taken = 0;
  for (int k = 0; k < nv + kl->n; k++) taken += take[k];
  for (int k = 0; k < nv + kl->n; k++)
    if (take[k]) out[k].seconds += setup / taken;
  free(truth);
  free(bound);
  mlr_tf_free(&tf);
  return st;
}

/* the static-scale sweep: recipe r on spec with each Q distribution, absmax on a log grid (the
 * seeds' 6.0 added) */
static mlr_status run_sweep(mlr_report *rep, const mlr_recipe *base, const char *spec0,
                            const char *const *dists, int nd, int np, int threads, mlr_error *err) {
  double grid[MLR_REPORT_SWEEP_MAX];
  np = mlr_budget_sweep_grid(1.0, 448.0, np, grid);
  snprintf(rep->studies.sweep_recipe, sizeof rep->studies.sweep_recipe, "%s", base->name);
  snprintf(rep->studies.sweep_shape, sizeof rep->studies.sweep_shape, "%s", spec0);
  rep->studies.nsweep_points = np;
  rep->studies.nsweep_dists = nd;
  rep->studies.seeds_absmax = MLR_BUDGET_SEEDS_ABSMAX;
  mlr_status st = MLR_OK;
  for (int d = 0; st == MLR_OK && d < nd; d++) {
    char spec[256];
    snprintf(spec, sizeof spec, "%s,dist=%s", spec0, dists[d]);
    snprintf(rep->studies.sweep_dist[d], sizeof rep->studies.sweep_dist[d], "%s", dists[d]);
    mlr_tensor_file tf;
    mlr_inputs in;
    if ((st = inputs_of(spec, &tf, &in, err)) != MLR_OK) break;
    double *truth;
    st = mlr_oracle_o(&in, MLR_TRUTH_DEQUANTIZED, &truth, err);
    for (int i = 0; st == MLR_OK && i < np; i++) {
      mlr_recipe r = *base;
      r.q_scale = MLR_QS_STATIC;
      r.q_absmax = grid[i];
      mlr_policy_point pt;
      if ((st = mlr_budget_policy_point(&r, &in, truth, rep->rtol, rep->atol, threads, &pt, err)) !=
          MLR_OK)
        break;
      rep->studies.sweep[d][i] =
          (mlr_report_sweep_point){grid[i], pt.clipped_frac, pt.util_max, pt.util_p999, pt.rel_l2};
    }
    free(truth);
    mlr_tf_free(&tf);
  }
  return st;
}

/* the decomposition of every recipe (own policy) and the discrimination table, on one shape */
static mlr_status run_extras(mlr_report *rep, const variant *vs, int nv, const char *spec,
                             int threads, mlr_error *err) {
  snprintf(rep->studies.extra_shape, sizeof rep->studies.extra_shape, "%s", spec);
  mlr_tensor_file tf;
  mlr_inputs in;
  mlr_status st = inputs_of(spec, &tf, &in, err);
  if (st != MLR_OK) return st;
  const int64_t n = in.T * in.H * MLR_EMU_V_DIM;
  double *truth = malloc((size_t)(n > 0 ? n : 1) * sizeof(double)),
         *tlse = malloc((size_t)(in.T * in.H > 0 ? in.T * in.H : 1) * sizeof(double)),
         *model = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  mlr_oracle_stats ost;
  if (!truth || !tlse || !model)
    st = mlr_error_set(err, MLR_ENOMEM, "out of memory for the decomposition");
  else
    st = mlr_oracle(&in, MLR_TRUTH_DEQUANTIZED, truth, tlse, &ost, err);
  for (int k = 0; st == MLR_OK && k < nv && rep->studies.ndecomp < MLR_REPORT_MAX_RECIPES; k++) {
    if (!vs[k].own || mlr_emu_check_fit(&vs[k].r, &in, NULL) != MLR_OK ||
        !mlr_budget_covers(&vs[k].r))
      continue;
    mlr_decomp d;
    if ((st = mlr_budget_model(&vs[k].r, &in, threads, model, NULL, err)) != MLR_OK ||
        (st = mlr_budget_decompose(&vs[k].r, &in, MLR_TRUTH_DEQUANTIZED, truth, model, NULL, 0,
                                   threads, &d, err)) != MLR_OK)
      break;
    mlr_report_decomp *o = &rep->studies.decomp[rep->studies.ndecomp++];
    snprintf(o->recipe, sizeof o->recipe, "%.63s", vs[k].r.name);
    o->present = d.present;
    for (int s = 0; s < MLR_NSRC; s++) o->rms[s] = d.alone[s].rms;
    o->interaction_rms = d.interaction.rms;
    o->total_rms = d.total.rms;
    o->truth_rms = d.truth_rms;
  }
  /* the discrimination table: the first recipe of the list with a bf16 output and more than one
   * split (the merge faults act only there), else the first with a bf16 output */
  int pick = -1;
  for (int pass = 0; pass < 2 && pick < 0; pass++)
    for (int k = 0; k < nv && pick < 0; k++)
      if (vs[k].own && vs[k].r.out_format == MLR_OUT_BF16 &&
          (pass || vs[k].r.split_rule != MLR_SPLIT_NONE) && mlr_budget_covers(&vs[k].r) &&
          mlr_emu_check_fit(&vs[k].r, &in, NULL) == MLR_OK)
        pick = k;
  if (st == MLR_OK && pick >= 0) {
    snprintf(rep->studies.disc_recipe, sizeof rep->studies.disc_recipe, "%s", vs[pick].r.name);
    st = mlr_disc_table(&vs[pick].r, &in, truth, tlse, threads, rep->studies.disc,
                        &rep->studies.disc_model_ok, err);
    rep->studies.disc_done = st == MLR_OK;
  }
  free(truth);
  free(tlse);
  free(model);
  mlr_tf_free(&tf);
  return st;
}

/* the columns: each recipe under its own policy, then (fp8 Q) under each point of the axis that
 * differs from its own */
static mlr_status variants_of(const mlr_recipe *rs, int nr, mlr_report *rep, variant *vs, int *nv,
                              mlr_error *err) {
  *nv = 0;
  for (int k = 0; k < nr; k++) {
    if (*nv == MAX_VARIANTS)
      return mlr_error_set(err, MLR_EINVAL, "more than %d recipe and policy columns", MAX_VARIANTS);
    variant *v = &vs[(*nv)++];
    v->r = rs[k];
    v->own = 1;
    if (rs[k].q_format == MLR_Q_BF16)
      snprintf(v->policy, sizeof v->policy, "none");
    else
      mlr_recipe_policy_text(&rs[k], v->policy, sizeof v->policy);
    if (rs[k].q_format == MLR_Q_BF16) continue;
    for (int p = 0; p < rep->npolicies; p++) {
      variant w = {rs[k], "", 0};
      mlr_status st = mlr_recipe_set_policy(&w.r, rep->policies[p], err);
      if (st != MLR_OK) return st;
      mlr_recipe_policy_text(&w.r, w.policy, sizeof w.policy);
      if (!strcmp(w.policy, v->policy)) continue;
      if (*nv == MAX_VARIANTS)
        return mlr_error_set(err, MLR_EINVAL, "more than %d recipe and policy columns",
                             MAX_VARIANTS);
      vs[(*nv)++] = w;
    }
  }
  return MLR_OK;
}

/* the rows: the recipes named, or every built-in (and with a GPU every fast-kernel recipe) */
static mlr_status pick_recipes(const mlr_report_opts *o, int gpu, mlr_recipe *rs, int *nr,
                               mlr_error *err) {
  if (o->nrecipes == 1 && !strcmp(o->recipes[0], "none")) {
    if (o->nkernels) return MLR_OK;
    return mlr_error_set(err, MLR_EINVAL, "--recipe none leaves no column: give a --kernel");
  }
  if (o->nrecipes == 0) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s%s%s", mlr_recipe_builtin_names(), gpu ? "|" : "",
             gpu ? mlr_gpu_fast_recipe_names() : "");
    for (char *save = NULL, *tok = strtok_r(buf, "|", &save); tok && *nr < MLR_REPORT_MAX_RECIPES;
         tok = strtok_r(NULL, "|", &save))
      if (mlr_recipe_builtin(tok, &rs[*nr]) == MLR_OK ||
          mlr_gpu_fast_recipe(tok, &rs[*nr]) == MLR_OK)
        (*nr)++;
    return MLR_OK;
  }
  for (int k = 0; k < o->nrecipes && *nr < MLR_REPORT_MAX_RECIPES; k++) {
    if (mlr_recipe_builtin(o->recipes[k], &rs[*nr]) != MLR_OK &&
        mlr_gpu_fast_recipe(o->recipes[k], &rs[*nr]) != MLR_OK)
      return mlr_error_set(err, MLR_EINVAL, "unknown recipe '%s' (valid: %s|%s)", o->recipes[k],
                           mlr_recipe_builtin_names(), mlr_gpu_fast_recipe_names());
    (*nr)++;
  }
  return MLR_OK;
}

/* the policy axis into rep->policies: the policies named, or the default (quick) ones, each
 * checked on an fp8-Q recipe, whatever the recipe list holds */
static mlr_status policy_axis(const mlr_report_opts *o, mlr_report *rep, mlr_error *err) {
  static const char *const DEFAULT_POLICIES[] = {"static:absmax=6", "dynamic", "per_token"},
                           *const QUICK_POLICIES[] = {"static:absmax=6"};
  const char *const *pol = o->policies ? o->policies : o->quick ? QUICK_POLICIES : DEFAULT_POLICIES;
  const int np = o->policies ? o->npolicies : o->quick ? 1 : 3;
  for (int p = 0; p < np && p < MLR_REPORT_MAX_POLICIES; p++) {
    mlr_recipe probe;
    mlr_recipe_builtin("aiter-a8w8-ps", &probe);
    mlr_error pe = {""};
    if (mlr_recipe_set_policy(&probe, pol[p], &pe) != MLR_OK)
      return mlr_error_set(err, MLR_EINVAL, "--policy: %s", pe.msg);
    snprintf(rep->policies[rep->npolicies++], sizeof rep->policies[0], "%.47s", pol[p]);
  }
  return MLR_OK;
}

/* the user kernels as the report keeps them: their contracts, not their commands */
static mlr_status kernel_table(const mlr_report_opts *o, mlr_report *rep, mlr_error *err) {
  if (o->nkernels > MLR_REPORT_MAX_KERNELS)
    return mlr_error_set(err, MLR_EINVAL, "%d kernels: at most %d", o->nkernels,
                         MLR_REPORT_MAX_KERNELS);
  for (int k = 0; k < o->nkernels; k++) {
    const mlr_kernel *u = &o->kernels[k];
    mlr_report_kernel *d = &rep->kernels[rep->nkernels++];
    snprintf(d->name, sizeof d->name, "%s", u->name);
    snprintf(d->recipe, sizeof d->recipe, "%.63s", u->recipe.name);
    mlr_recipe_hash(&u->recipe, d->recipe_sha);
    snprintf(d->policy, sizeof d->policy, "%s", u->policy);
    d->timeout_s = u->timeout_s;
    for (int r = 0; r < u->nrules; r++)
      snprintf(d->rules[d->nrules++], sizeof d->rules[0], "%s", u->rules[r].text);
    for (int j = 0; j < k; j++)
      if (!strcmp(o->kernels[j].name, u->name))
        return mlr_error_set(err, MLR_EINVAL, "--kernel %s given twice", u->name);
  }
  return MLR_OK;
}

/* 1 when name is an item of the comma-separated list */
static int listed(const char *list, const char *name) {
  const size_t n = strlen(name);
  for (const char *p = list; p && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
    if (strcspn(p, ",") == n && !strncmp(p, name, n)) return 1;
  }
  return 0;
}

/* o->cells against the suite: every name one of its cells */
static mlr_status check_cells(const mlr_report_opts *o, const mlr_suite *su, mlr_error *err) {
  for (const char *p = o->cells; p && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
    const int n = (int)strcspn(p, ",");
    int found = 0;
    for (size_t k = 0; k < su->n; k++)
      found |= (int)strlen(su->cells[k].name) == n && !strncmp(p, su->cells[k].name, (size_t)n);
    if (!found)
      return mlr_error_set(err, MLR_EINVAL,
                           "--cells: no cell '%.*s' in suite %s (mlaref suite "
                           "show %s lists them)",
                           n, p, su->name, su->name);
  }
  return MLR_OK;
}

/* the shapes (at most 256): all, the quick ones (small: up to QUICK_TOKENS KV tokens in all), or
 * those o->cells names */
static mlr_status pick_cells(const mlr_report_opts *o, const mlr_suite *su,
                             const mlr_suite_cell **cells, int *ns, mlr_error *err) {
  int seen = 0;
  if (check_cells(o, su, err) != MLR_OK) return MLR_EINVAL;
  for (size_t k = 0; k < su->n && *ns < 256; k++) {
    if (o->cells && !listed(o->cells, su->cells[k].name)) continue;
    if (o->quick && !o->cells) { /* the cells named run whatever their size */
      mlr_gen_spec gs;
      if (mlr_gen_spec_parse(su->cells[k].spec, &gs, err) != MLR_OK) return MLR_EINVAL;
      int64_t tokens = 0;
      for (int64_t b = 0; b < gs.bs; b++) tokens += gs.lens[b];
      mlr_gen_spec_free(&gs);
      if (tokens > QUICK_TOKENS || seen == QUICK_CELLS) continue;
    }
    seen++;
    cells[(*ns)++] = &su->cells[k];
  }
  return MLR_OK;
}

/* a dot's cost beside the sequential fp32 one's, roughly: a matrix-unit model 2 more, AITER's lane
 * chains 20 more (`bench emulate --shape bs=32,kv=1024 --threads 2`: fp32-seq 0.029 s,
 * fast-a16w8 0.228 s, aiter-triton-decode 2.22 s) */
static double dot_factor(int dot) {
  return dot == MLR_DOT_AITER_LANES8 ? 20.0 : MLR_DOT_IS_MMA(dot) ? 2.0 : 0.0;
}

/* a column's relative cost */
static double column_factor(const variant *vs, int nv, int c) {
  if (c >= nv) return 1.0;
  const mlr_recipe *r = &vs[c].r;
  return 1.0 + dot_factor(r->qk_dot) + dot_factor(r->pv_dot);
}

/* the split of the run's cells (every shape x every column) over its shards, into rep->plan, and
 * each cell's estimated cost into cost[ns * nc]; shard 1 starts with the extras */
static mlr_status make_plan(const mlr_report_opts *o, const mlr_suite_cell *const *cells, int ns,
                            const variant *vs, int nv, mlr_report *rep, double *cost,
                            mlr_error *err) {
  mlr_report_plan *p = &rep->plan;
  const int nc = nv + o->nkernels;
  p->shapes = calloc((size_t)(ns ? ns : 1), sizeof *p->shapes);
  p->cols = calloc((size_t)(nc ? nc : 1), sizeof *p->cols);
  p->colsha = calloc((size_t)(nc ? nc : 1), sizeof *p->colsha);
  p->shard = calloc((size_t)(ns * nc > 0 ? ns * nc : 1), sizeof *p->shard);
  if (!p->shapes || !p->cols || !p->colsha || !p->shard)
    return mlr_error_set(err, MLR_ENOMEM, "out of memory for the shards' plan");
  p->nshapes = ns;
  p->ncols = nc;
  for (int c = 0; c < nc; c++)
    mlr_recipe_hash(c < nv ? &vs[c].r : &o->kernels[c - nv].recipe, p->colsha[c]);
  for (int c = 0; c < nc; c++)
    if (c >= nv)
      snprintf(p->cols[c], sizeof p->cols[c], "kernel %.63s", o->kernels[c - nv].name);
    else if (vs[c].own)
      snprintf(p->cols[c], sizeof p->cols[c], "%.63s", vs[c].r.name);
    else
      snprintf(p->cols[c], sizeof p->cols[c], "%.63s@%.47s", vs[c].r.name, vs[c].policy);
  for (int s = 0; s < ns; s++) {
    snprintf(p->shapes[s], sizeof p->shapes[s], "%s", cells[s]->name);
    mlr_gen_spec gs;
    if (mlr_gen_spec_parse(cells[s]->spec, &gs, err) != MLR_OK) return MLR_EINVAL;
    int64_t tokens = 0; /* the bound is worked out for cells of at most BOUND_TOKENS */
    for (int64_t b = 0; b < gs.bs; b++) tokens += gs.lens[b];
    const int bound = tokens <= MLR_REPORT_BOUND_TOKENS;
    for (int c = 0; c < nc; c++) /* a kernel's cell works out no bound */
      cost[s * nc + c] = mlr_shard_cost(&gs, bound && c < nv, column_factor(vs, nv, c));
    mlr_gen_spec_free(&gs);
  }
  double load[MLR_SHARD_MAX + 1];
  const int n = o->shard_n ? o->shard_n : 1;
  int own = 0, sweep = 0; /* what the extras study: the recipes of their own policies */
  for (int c = 0; c < nv; c++) {
    own += vs[c].own;
    sweep |= vs[c].r.q_format != MLR_Q_BF16;
  }
  if (mlr_shard_plan(cost, ns * nc, n, mlr_shard_extras(own, sweep, o->quick), p->shard, load))
    return mlr_error_set(err, MLR_ENOMEM, "out of memory for the shards' plan");
  rep->shard_cost = load[o->shard_n ? o->shard_i : 1];
  for (int i = 1; o->plan_only && i <= n; i++) {
    rep->shards[rep->nshards].i = i;
    rep->shards[rep->nshards++].cost = load[i];
  }
  return MLR_OK;
}

/* every cell of this shard: the recipe columns, then the kernel columns (their files in a folder of
 * this run's own, removed whatever happens), shape by shape */
static mlr_status run_cells(const mlr_report_opts *o, const mlr_suite_cell *const *cells, int ns,
                            const variant *vs, int nv, const gpu_leg *g, const double *cost,
                            mlr_report *rep, mlr_error *err) {
  kernel_leg kl = {o->kernels, o->nkernels, "", o->commit};
  const int nc = nv + kl.n, extras = !o->shard_n || o->shard_i == 1, steps = ns + 2 * extras;
  mlr_report_cell *tmp = calloc((size_t)(nc ? nc : 1), sizeof *tmp);
  manifest man;
  mlr_status st = read_manifest(o->digests, &man, err);
  if (st == MLR_OK && kl.n) st = mlr_kernel_workdir(kl.dir, err);
  if (st == MLR_OK &&
      (!tmp || !(rep->cells = calloc((size_t)(ns * nc > 0 ? ns * nc : 1), sizeof *rep->cells))))
    st = mlr_error_set(err, MLR_ENOMEM, "out of memory for the report's cells");
  for (int s = 0; st == MLR_OK && s < ns; s++) {
    unsigned char take[MAX_COLS];
    int any = 0;
    for (int c = 0; c < nc; c++)
      any |= take[c] = !o->shard_n || rep->plan.shard[s * nc + c] == o->shard_i;
    if (!any) continue;
    if (o->progress) o->progress(cells[s]->name, s, steps, o->ctx);
    st = run_shape(cells[s], o->suite, vs, nv, &man, rep->rtol, rep->atol, o->threads, g, &kl, take,
                   tmp, err);
    for (int c = 0; st == MLR_OK && c < nc; c++)
      if (take[c]) {
        tmp[c].column = c;
        tmp[c].cost = cost[s * nc + c];
        rep->shard_seconds += tmp[c].seconds;
        rep->cells[rep->ncells++] = tmp[c];
      }
  }
  free(tmp);
  free(man.rows);
  mlr_kernel_workdir_remove(kl.dir);
  return st;
}

mlr_status mlr_report_run(const mlr_report_opts *o, mlr_report *rep, mlr_error *err) {
  memset(rep, 0, sizeof *rep);
  rep->rtol = rep->atol = 1e-2;
  rep->margin = 0.1;
  rep->quick = o->quick;
  rep->gpu_margin = 0.15;
  rep->gpu_noise_us = 3.0;
  rep->shard_i = o->shard_i;
  rep->shard_n = o->shard_n;
  snprintf(rep->shard_from, sizeof rep->shard_from, "%s",
           o->shard_from ? o->shard_from
           : o->shard_n  ? "--shard"
                         : "");
  snprintf(rep->commit, sizeof rep->commit, "%s", o->commit ? o->commit : "unknown");
  rep->gpu_mode = o->gpu;
  snprintf(rep->suite, sizeof rep->suite, "%s", o->suite);
  const mlr_suite *su = mlr_suite_find(o->suite);
  if (!su)
    return mlr_error_set(err, MLR_EINVAL, "unknown suite '%s' (valid: %s)", o->suite,
                         mlr_suite_names());
  if (o->shard_n && (o->shard_n < 1 || o->shard_i < 1 || o->shard_i > o->shard_n))
    return mlr_error_set(err, MLR_EINVAL, "shard %d/%d: valid i/n with 1 <= i <= n", o->shard_i,
                         o->shard_n);
  /* the GPU leg: a device, or (require) an error saying why not */
  gpu_leg g = {0, o->quick ? 5 : 20};
  if (o->gpu != MLR_REPORT_GPU_OFF) {
    mlr_error ge = {""};
    if (mlr_gpu_device(rep->gpu_device, sizeof rep->gpu_device, &ge) == MLR_OK)
      g.on = 1;
    else if (o->gpu == MLR_REPORT_GPU_REQUIRE)
      return mlr_error_set(err, MLR_EDEVICE, "--gpu require: %s", ge.msg);
    else
      rep->gpu_device[0] = 0;
  }
  static mlr_recipe rs[MLR_REPORT_MAX_RECIPES];
  int nr = 0;
  mlr_status st = pick_recipes(o, g.on, rs, &nr, err);
  if (st == MLR_OK) st = policy_axis(o, rep, err);
  if (st != MLR_OK) return st;
  static variant vs[MAX_VARIANTS];
  int nv;
  if ((st = variants_of(rs, nr, rep, vs, &nv, err)) != MLR_OK) return st;
  const mlr_suite_cell *cells[256];
  int ns = 0;
  if ((st = pick_cells(o, su, cells, &ns, err)) != MLR_OK) return st;
  double *cost = malloc((size_t)(ns * (nv + o->nkernels) + 1) * sizeof *cost);
  if (!cost) return mlr_error_set(err, MLR_ENOMEM, "out of memory for the cells' costs");
  if ((st = make_plan(o, cells, ns, vs, nv, rep, cost, err)) == MLR_OK && !o->plan_only &&
      (st = kernel_table(o, rep, err)) == MLR_OK)
    st = run_cells(o, cells, ns, vs, nv, &g, cost, rep, err);
  free(cost);
  if (st != MLR_OK || o->plan_only) return st;
  const int extras = !o->shard_n || o->shard_i == 1, steps = ns + 2 * extras;
  mlr_report_count(rep);
  if (extras) {
    /* the sweep: the first fp8-Q recipe of the list on one bs=4 shape */
    for (int k = 0; k < nr; k++)
      if (rs[k].q_format != MLR_Q_BF16) {
        if (o->progress) o->progress("static-scale sweep", ns, steps, o->ctx);
        static const char *const DISTS[] = {"normal", "t3", "outliers:0.001"};
        st = run_sweep(rep, &rs[k], o->quick ? "bs=1,kv=256,seed=4217" : "bs=4,kv=1024,seed=4217",
                       DISTS, o->quick ? 2 : 3, o->quick ? 5 : 9, o->threads, err);
        break;
      }
    if (o->progress) o->progress("decomposition and discrimination", ns + 1, steps, o->ctx);
    if (st == MLR_OK)
      st = run_extras(rep, vs, nv, o->quick ? "bs=2,kv=256,seed=4217" : "bs=4,kv=1024,seed=4217",
                      o->threads, err);
  }
  if (o->progress) o->progress("done", steps, steps, o->ctx);
  return st;
}
