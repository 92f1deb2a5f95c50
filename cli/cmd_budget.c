/* mlaref budget --inputs IN | --shape SPEC  --recipe NAME|FILE [--set k=v]... [--policy P]
 *               [--sweep absmax [--points N] [--dists D1;D2...]] [--tolerance RTOL,ATOL]
 *               [--threshold X] [--rows N] [--threads N] [--allow-nonfinite] [--json]
 * Where the recipe's error against the truth comes from (ref/budget): the decomposition by
 * source, the a priori bound next to the measured error, the budget utilisation for a tolerance,
 * (--out: every element's truth, model, error and bound as F64 tensors in a .safetensors file),
 * and with --sweep absmax the static Q scale's cost against absmax (log grid from 1 to 448, the
 * seeds' 6.0 added and marked) for each Q distribution, next to the dynamic policies. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mlr_compare.h"
#include "mlr_gen.h"
#include "mlr_inputs.h"
#include "mlr_budget.h"
#include "mlr_emulate.h"
#include "mlr_recipe.h"

#define DV MLR_EMU_V_DIM
enum { MAX_POINTS = 64, MAX_DISTS = 8 };
static const char *const DEFAULT_DISTS = "normal;scaled:0.02;t3;outliers:0.001;perhead";

typedef struct opts {
  const char *inputs, *shape, *recipe, *policy, *sweep, *dists, *truth, *out, *sets[64];
  int nsets, points, threads, json, allow; /* allow: --allow-nonfinite */
  int64_t rows;
  double rtol, atol, threshold;
} opts;

/* printed once the inputs are in, so bad input prints only its error line */
static char header[512];

static void print_header(const opts *o) {
  if (!o->json && header[0]) fputs(header, stdout);
  header[0] = 0;
}

/* inputs from a file or generated from a shape (bf16kv=1 added, so kv_quant can be measured) */
static int load_inputs(const char *cmd, const opts *o, const char *shape, mlr_tensor_file *tf,
                       mlr_inputs *in) {
  if (o->inputs || !shape) {
    double bytes;
    const int rc = mlr_cli_file_fits(cmd, o->inputs, &bytes);
    if (rc != MLR_EXIT_OK) return rc;
    return mlr_cli_read_inputs(cmd, o->inputs, o->allow, tf, in);
  }
  char spec[1024];
  const int bf16kv = strstr(shape, "bf16kv") || strstr(shape, "fmt=bf16");
  snprintf(spec, sizeof spec, "%.1000s%s", shape, bf16kv ? "" : ",bf16kv=1");
  return mlr_cli_gen_memory(cmd, "--shape", spec, tf, in, NULL);
}

/* rows to measure: all, or n evenly spaced */
static int64_t *pick_rows(int64_t total, int64_t n, int64_t *count) {
  *count = total;
  if (n <= 0 || n >= total) return NULL;
  int64_t *r = malloc((size_t)n * sizeof *r);
  if (!r) return NULL; /* every row, then: slower, not wrong */
  for (int64_t k = 0; k < n; k++) r[k] = k * total / n;
  *count = n;
  return r;
}

/* --out: truth, model, error = model - truth and bound, each [T, H, 512] F64, written atomically */
static int write_elements(const char *cmd, const opts *o, const mlr_recipe *r, const mlr_inputs *in,
                          mlr_truth_from from, const double *truth, const double *model,
                          const double *bound) {
  const int64_t shape[3] = {in->T, in->H, DV}, n = in->T * in->H * DV;
  mlr_tensor_file tf;
  mlr_tf_init(&tf);
  mlr_tensor *t[4];
  const char *names[4] = {"truth", "model", "error", "bound"};
  mlr_status st = MLR_OK;
  for (int k = 0; k < 4 && st == MLR_OK; k++)
    st = mlr_tf_add(&tf, names[k], MLR_DT_F64, 3, shape, &t[k]);
  if (st == MLR_OK) {
    double *e = t[2]->data;
    memcpy(t[0]->data, truth, (size_t)n * sizeof(double));
    memcpy(t[1]->data, model, (size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) e[i] = model[i] - truth[i];
    memcpy(t[3]->data, bound, (size_t)n * sizeof(double));
  }
  char hash[65];
  mlr_recipe_hash(r, hash);
  const char *kv[][2] = {{"mlaref.version", MLAREF_VERSION},
                         {"mlaref.kind", "budget"},
                         {"mlaref.recipe", r->name},
                         {"mlaref.recipe.sha256", hash},
                         {"mlaref.truth.from", from == MLR_TRUTH_BF16 ? "bf16" : "dequantized"},
                         {"mlaref.inputs", o->inputs ? o->inputs : o->shape}};
  for (size_t k = 0; st == MLR_OK && k < sizeof kv / sizeof *kv; k++)
    st = mlr_tf_set_meta(&tf, kv[k][0], kv[k][1]);
  mlr_error err = {""};
  if (st == MLR_OK)
    st = mlr_safetensors_write(o->out, &tf, &err);
  else
    mlr_error_set(&err, st, "cannot allocate the element file (%s)", mlr_status_str(st));
  mlr_tf_free(&tf);
  return st == MLR_OK ? MLR_EXIT_OK : mlr_cli_usage_error(cmd, "%s", err.msg);
}

static json_t *stats_json(mlr_err_stats s) {
  return json_pack("{s:f,s:f,s:f}", "rms", s.rms, "max", s.max, "p999", s.p999);
}

/* the figures report prints: the decomposition, the bound's use and the utilisation */
typedef struct figures {
  mlr_decomp d;
  mlr_bound_use bu;
  mlr_util u;
  double bmax, bsum;              /* the finite bounds' largest and sum */
  double t_truth, t_dec, t_bound; /* seconds */
  int64_t N, n;                   /* rows (query tokens x heads) and elements */
} figures;

/* the certified truth once, the model once, then the decomposition, the bound and the
 * utilisation against them; --out: every element's truth, model, error and bound, side by side */
static int compute(const char *cmd, const opts *o, const mlr_recipe *r, mlr_inputs *in,
                   figures *f) {
  mlr_error err = {""};
  const int64_t N = in->T * in->H, n = N * DV;
  f->N = N;
  f->n = n;
  mlr_truth_from from_kind = in->kv_bf16 ? MLR_TRUTH_BF16 : MLR_TRUTH_DEQUANTIZED;
  if (o->truth) from_kind = strcmp(o->truth, "bf16") ? MLR_TRUTH_DEQUANTIZED : MLR_TRUTH_BF16;
  double *truth = malloc((size_t)n * sizeof(double)), *lse = malloc((size_t)N * sizeof(double)),
         *bound = malloc((size_t)n * sizeof(double));
  double *model = malloc((size_t)n * sizeof(double));
  int64_t nrows = N;
  int64_t *rows = pick_rows(N, o->rows, &nrows);
  if (!truth || !lse || !bound || !model) {
    free(truth);
    free(lse);
    free(bound);
    free(model);
    free(rows);
    return mlr_cli_fail(cmd, "out of memory for the truth and the bound");
  }
  mlr_oracle_stats os;
  double t0 = mlr_cli_now();
  mlr_status st = mlr_oracle(in, from_kind, truth, lse, &os, &err);
  f->t_truth = mlr_cli_now() - t0;
  t0 = mlr_cli_now(); /* the model once too: the decomposition's total and the utilisation */
  if (st == MLR_OK) st = mlr_budget_model(r, in, o->threads, model, NULL, &err);
  if (st == MLR_OK)
    st = mlr_budget_decompose(r, in, from_kind, truth, model, rows, nrows, o->threads, &f->d, &err);
  f->t_dec = mlr_cli_now() - t0;
  free(rows);
  t0 = mlr_cli_now();
  if (st == MLR_OK) st = mlr_budget_bound(r, in, f->d.from, truth, o->threads, bound, &err);
  f->t_bound = mlr_cli_now() - t0;
  mlr_cmp_tensor ta = {MLR_CT_F64, model, n}, tt = {MLR_CT_F64, truth, n};
  if (st == MLR_OK) st = mlr_compare_bound(&ta, &tt, bound, 1.0, &f->bu, &err);
  if (st == MLR_OK) st = mlr_compare_utilisation(&ta, &tt, o->rtol, o->atol, &f->u, &err);
  f->bmax = 0;
  f->bsum = 0;
  for (int64_t i = 0; st == MLR_OK && i < n; i++)
    if (isfinite(bound[i])) {
      f->bmax = fmax(f->bmax, bound[i]);
      f->bsum += bound[i];
    }
  int rc = MLR_EXIT_OK;
  if (st == MLR_OK && o->out) rc = write_elements(cmd, o, r, in, from_kind, truth, model, bound);
  free(truth);
  free(lse);
  free(bound);
  free(model);
  if (rc != MLR_EXIT_OK || st == MLR_OK) return rc;
  return st == MLR_EINVAL ? mlr_cli_usage_error(cmd, "%s", err.msg)
                          : mlr_cli_fail(cmd, "%s", err.msg);
}

static void report_json(const opts *o, const figures *f, json_t *root) {
  const mlr_decomp *d = &f->d;
  const char *from = d->from == MLR_TRUTH_BF16 ? "bf16" : "dequantized";
  json_t *src = json_object();
  for (int s = 0; s < MLR_NSRC; s++) {
    json_t *x = json_pack("{s:b,s:o,s:o,s:f}", "present", (int)(d->present >> s & 1u), "alone",
                          stats_json(d->alone[s]), "without", stats_json(d->without[s]), "rel_l2",
                          d->rel_l2_alone[s]);
    json_object_set_new(src, mlr_source_name(s), x);
  }
  json_object_set_new(root, "decomposition",
                      json_pack("{s:s,s:I,s:I,s:f,s:o,s:f,s:o,s:o,s:I,s:f,s:f}", "truth_from", from,
                                "rows", (json_int_t)d->rows, "elements", (json_int_t)d->n,
                                "truth_rms", d->truth_rms, "total", stats_json(d->total),
                                "rel_l2_total", d->rel_l2_total, "interaction",
                                stats_json(d->interaction), "sources", src, "closure_model_diff",
                                (json_int_t)d->closure_model_diff, "closure_truth_max",
                                d->closure_truth_max, "seconds", f->t_dec));
  json_object_set_new(root, "truth_seconds", json_real(f->t_truth));
  json_object_set_new(root, "bound",
                      json_pack("{s:s,s:I,s:I,s:f,s:f,s:f,s:f,s:f}", "truth_from", from, "elements",
                                (json_int_t)f->bu.n, "violations", (json_int_t)f->bu.over,
                                "max_error_over_bound", f->bu.max_ratio, "median_tightness",
                                f->bu.tight_p50, "max_bound", f->bmax, "mean_bound",
                                f->bsum / (double)(f->n ? f->n : 1), "seconds", f->t_bound));
  json_t *h = json_array();
  for (int k = 0; k < MLR_UTIL_BINS; k++) json_array_append_new(h, json_integer(f->u.hist[k]));
  json_object_set_new(root, "utilisation",
                      json_pack("{s:f,s:f,s:I,s:f,s:f,s:f,s:f,s:o}", "rtol", o->rtol, "atol",
                                o->atol, "over", (json_int_t)f->u.over, "max", f->u.max, "p50",
                                f->u.p50, "p99", f->u.p99, "p999", f->u.p999, "histogram", h));
}

static void report_text(const opts *o, const figures *f) {
  const mlr_decomp *d = &f->d;
  const mlr_bound_use *bu = &f->bu;
  const mlr_util *u = &f->u;
  const char *from = d->from == MLR_TRUTH_BF16 ? "bf16" : "dequantized";
  printf("error decomposition: %lld rows of %lld, %lld elements, against the certified truth from "
         "%s KV (RMS %.4g; %.2f s)\n",
         (long long)d->rows, (long long)f->N, (long long)d->n, from, d->truth_rms, f->t_truth);
  printf("  %-13s %-8s %-11s %-11s %-11s %-9s %s\n", "source", "present", "rms", "max", "p99.9",
         "rel L2", "model - model without it: rms");
  for (int s = 0; s < MLR_NSRC; s++) {
    if (!(d->present >> s & 1u)) {
      printf("  %-13s %-8s\n", mlr_source_name(s), "no");
      continue;
    }
    printf("  %-13s %-8s %-11.4g %-11.4g %-11.4g %-9.3g%% %.4g\n", mlr_source_name(s), "yes",
           d->alone[s].rms, d->alone[s].max, d->alone[s].p999, 100 * d->rel_l2_alone[s],
           d->without[s].rms);
  }
  printf("  %-13s %-8s %-11.4g %-11.4g %-11.4g\n", "interaction", "", d->interaction.rms,
         d->interaction.max, d->interaction.p999);
  printf("  %-13s %-8s %-11.4g %-11.4g %-11.4g %-9.3g%%\n", "total", "", d->total.rms, d->total.max,
         d->total.p999, 100 * d->rel_l2_total);
  printf("  closure: all sources on vs the model: %lld elements differ; all off vs the truth: max "
         "%.3g (%.2f s)\n",
         (long long)d->closure_model_diff, d->closure_truth_max, f->t_dec);
  printf("a priori bound (truth from %s KV): %s on %lld elements (%lld violations); max |error| / "
         "bound %.3g; median bound / |error| %.3g; "
         "max bound %.4g (%.2f s)\n",
         from, bu->over ? "VIOLATED" : "holds", (long long)bu->n, (long long)bu->over,
         bu->max_ratio, bu->tight_p50, f->bmax, f->t_bound);
  printf("budget utilisation |out - truth| / (%g + %g |truth|): max %.4g, p99.9 %.4g, p99 %.4g, "
         "p50 %.4g; %lld elements over 1\n",
         o->atol, o->rtol, u->max, u->p999, u->p99, u->p50, (long long)u->over);
  printf("  histogram:");
  for (int k = 0; k < MLR_UTIL_BINS; k++)
    printf(" [%g,%g) %lld", mlr_util_edges[k], mlr_util_edges[k + 1], (long long)u->hist[k]);
  printf("\n");
}

/* the decomposition, bound and utilisation of recipe r on the inputs: into root (--json) or
 * printed; exit 1 when the bound is violated */
static int report(const char *cmd, const opts *o, const mlr_recipe *r, mlr_inputs *in,
                  json_t *root) {
  figures f;
  const int rc = compute(cmd, o, r, in, &f);
  if (rc != MLR_EXIT_OK) return rc;
  if (root)
    report_json(o, &f, root);
  else
    report_text(o, &f);
  return f.bu.over ? MLR_EXIT_FAIL : MLR_EXIT_OK;
}

/* one distribution of the sweep: the grid, then the dynamic policies */
static int sweep_one(const char *cmd, const opts *o, const mlr_recipe *base, const char *label,
                     mlr_inputs *in, const double *grid, int np, json_t *arr) {
  mlr_error err = {""};
  double *truth;
  mlr_status st = mlr_oracle_o(in, MLR_TRUTH_DEQUANTIZED, &truth, &err);
  json_t *pts = json_array();
  double lo = NAN, hi = NAN;
  int gaps = 0, pending = 0; /* grid points over the threshold between lo and hi */
  if (!arr) {
    printf("Q distribution %s (truth: certified, dequantized KV; tolerance rtol %g, atol %g)\n",
           label, o->rtol, o->atol);
    printf("  %-16s %-10s %-11s %-11s %-10s %-10s %-10s\n", "policy", "clipped %", "rms", "max",
           "rel L2", "util max", "util p99.9");
  }
  for (int i = 0; st == MLR_OK && i < np + 3; i++) {
    mlr_recipe r = *base;
    char pol[64];
    if (i < np)
      snprintf(pol, sizeof pol, "static:absmax=%.6g", grid[i]);
    else
      snprintf(pol, sizeof pol, "%s", i == np ? "dynamic" : i == np + 1 ? "per_head" : "per_token");
    if ((st = mlr_recipe_set_policy(&r, pol, &err)) != MLR_OK) break;
    if (i < np) r.q_absmax = grid[i];
    mlr_policy_point pt;
    if ((st = mlr_budget_policy_point(&r, in, truth, o->rtol, o->atol, o->threads, &pt, &err)) !=
        MLR_OK)
      break;
    const int seeds = i < np && grid[i] == MLR_BUDGET_SEEDS_ABSMAX;
    if (i < np && pt.util_max < o->threshold) {
      if (isnan(lo)) lo = grid[i];
      hi = grid[i];
      gaps += pending;
      pending = 0;
    } else if (i < np && !isnan(lo))
      pending++; /* a gap only if a later point passes */
    if (arr)
      json_array_append_new(pts, json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:b}", "policy", pol,
                                           "absmax", pt.absmax, "clipped_fraction", pt.clipped_frac,
                                           "rms", pt.rms, "max_abs", pt.max_abs, "rel_l2",
                                           pt.rel_l2, "util_max", pt.util_max, "util_p999",
                                           pt.util_p999, "seeds", seeds));
    else
      printf("  %-16s %-10.3g %-11.4g %-11.4g %-10.4g %-10.4g %-10.4g%s\n", i < np ? pol + 7 : pol,
             100 * pt.clipped_frac, pt.rms, pt.max_abs, pt.rel_l2, pt.util_max, pt.util_p999,
             seeds ? "  <- the seeds' 6.0" : "");
  }
  free(truth);
  if (st != MLR_OK) {
    json_decref(pts);
    return st == MLR_EINVAL || st == MLR_EPARSE ? mlr_cli_usage_error(cmd, "%s", err.msg)
                                                : mlr_cli_fail(cmd, "%s", err.msg);
  }
  if (arr) {
    json_array_append_new(arr, json_pack("{s:s,s:o,s:o,s:o,s:i}", "distribution", label, "points",
                                         pts, "absmax_lo", isnan(lo) ? json_null() : json_real(lo),
                                         "absmax_hi", isnan(hi) ? json_null() : json_real(hi),
                                         "gaps", gaps));
  } else {
    json_decref(pts);
    if (isnan(lo))
      printf("  no absmax on the grid keeps the utilisation below %g\n", o->threshold);
    else
      printf("  absmax keeping the utilisation below %g: %.4g to %.4g (grid points; %d points "
             "between them do not)\n",
             o->threshold, lo, hi, gaps);
  }
  return MLR_EXIT_OK;
}

static int sweep(const char *cmd, const opts *o, const mlr_recipe *r, json_t *root) {
  double grid[MAX_POINTS + 1];
  const int np = mlr_budget_sweep_grid(1.0, 448.0, o->points, grid);
  json_t *arr = root ? json_array() : NULL;
  int rc = MLR_EXIT_OK;
  if (o->inputs) {
    mlr_tensor_file tf;
    mlr_inputs in;
    if ((rc = load_inputs(cmd, o, NULL, &tf, &in)) != MLR_EXIT_OK) return rc;
    print_header(o);
    rc = sweep_one(cmd, o, r, o->inputs, &in, grid, np, arr);
    mlr_tf_free(&tf);
  } else {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", o->dists);
    for (char *save = NULL, *dist = strtok_r(buf, ";", &save); dist && rc == MLR_EXIT_OK;
         dist = strtok_r(NULL, ";", &save)) {
      char shape[512];
      snprintf(shape, sizeof shape, "%s,dist=%s", o->shape, dist);
      mlr_tensor_file tf;
      mlr_inputs in;
      if ((rc = load_inputs(cmd, o, shape, &tf, &in)) != MLR_EXIT_OK) break;
      print_header(o);
      rc = sweep_one(cmd, o, r, dist, &in, grid, np, arr);
      mlr_tf_free(&tf);
    }
  }
  if (root)
    json_object_set_new(root, "sweep",
                        json_pack("{s:f,s:f,s:f,s:f,s:o}", "rtol", o->rtol, "atol", o->atol,
                                  "threshold", o->threshold, "seeds_absmax",
                                  MLR_BUDGET_SEEDS_ABSMAX, "distributions", arr));
  return rc;
}

/* budget's command line into o: an exit code */
static int budget_args(const char *cmd, int argc, char **argv, opts *o) {
  int rc = MLR_EXIT_OK;
  for (int i = 0; i < argc; i++) {
    const char *v;
    int m;
    if (mlr_cli_str(cmd, argc, argv, &i, "inputs", "a file", &o->inputs, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "shape", "a shape, e.g. bs=4,kv=1024", &o->shape, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "recipe", "a built-in name or a recipe file", &o->recipe,
                    &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "policy", "static:absmax=A|dynamic|per_head|per_token",
                    &o->policy, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "sweep", "what to sweep (absmax)", &o->sweep, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "dists", "Q distributions separated by ';'", &o->dists,
                    &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "truth", "bf16|dequantized", &o->truth, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "out", "a .safetensors file", &o->out, &rc) ||
        mlr_cli_max_memory_opt(cmd, argc, argv, &i, &rc) ||
        mlr_cli_list(cmd, argc, argv, &i, "set", "key=value", o->sets, &o->nsets, 64, &rc) ||
        mlr_cli_threads_opt(cmd, argc, argv, &i, &o->threads, &rc)) {
      if (rc) return rc;
      if (o->truth && strcmp(o->truth, "bf16") && strcmp(o->truth, "dequantized"))
        return mlr_cli_usage_error(cmd, "--truth '%s' is not one of bf16|dequantized", o->truth);
    } else if ((m = mlr_cli_opt(argc, argv, &i, "tolerance", &v))) {
      if ((rc = mlr_cli_parse_tolerance(cmd, m > 0 ? v : NULL, &o->rtol, &o->atol)) != MLR_EXIT_OK)
        return rc;
    } else if ((m = mlr_cli_opt(argc, argv, &i, "threshold", &v))) {
      if (m < 0 || mlr_cli_parse_double(v, &o->threshold) || !(o->threshold > 0))
        return mlr_cli_usage_error(cmd, "--threshold needs a number > 0");
    } else if ((m = mlr_cli_opt(argc, argv, &i, "points", &v))) {
      uint64_t p;
      if (m < 0 || mlr_cli_parse_u64(v, &p) || p < 2 || p > MAX_POINTS)
        return mlr_cli_usage_error(cmd, "--points needs a count from 2 to %d", MAX_POINTS);
      o->points = (int)p;
    } else if ((m = mlr_cli_opt(argc, argv, &i, "rows", &v))) {
      uint64_t p;
      if (m < 0 || mlr_cli_parse_u64(v, &p) || p > (1u << 30))
        return mlr_cli_usage_error(cmd, "--rows needs a count (0: every row)");
      o->rows = (int64_t)p;
    } else if (!strcmp(argv[i], "--json"))
      o->json = 1;
    else if (!strcmp(argv[i], "--allow-nonfinite"))
      o->allow = 1;
    else
      return mlr_cli_unknown_option(
          cmd, argv[i],
          "--inputs --shape --recipe --set --policy --truth --out --sweep "
          "--points --dists --tolerance --threshold --rows --threads "
          "--max-memory --allow-nonfinite --json");
  }
  return MLR_EXIT_OK;
}

/* the options together, and --out's folder writable: refused before the work, not after */
static int budget_check(const char *cmd, const opts *o) {
  if (!o->recipe || (!o->inputs == !o->shape)) return mlr_cli_usage_fail(cmd);
  if (o->sweep && strcmp(o->sweep, "absmax"))
    return mlr_cli_usage_error(cmd, "--sweep '%s': only absmax can be swept", o->sweep);
  if (o->sweep && o->out)
    return mlr_cli_usage_error(cmd,
                               "--out writes the elements of a report; with --sweep use --json");
  return o->out ? mlr_cli_out_file_check(cmd, o->out) : MLR_EXIT_OK;
}

/* the report on one set of inputs, once they are in and fit the memory */
static int report_inputs(const char *cmd, const opts *o, const mlr_recipe *r, json_t *root) {
  mlr_tensor_file tf;
  mlr_inputs in;
  int rc = load_inputs(cmd, o, o->shape, &tf, &in);
  if (rc != MLR_EXIT_OK) return rc;
  if (o->truth && !strcmp(o->truth, "bf16") && !in.kv_bf16)
    rc = mlr_cli_usage_error(
        cmd,
        "--truth bf16: the inputs have no kv_bf16 (the unquantized KV; mlaref gen ... bf16kv=1)");
  else
    /* with the figure: truth, model and bound in F64, the bound's Q tables (two F64 copies of Q:
     * 2 x 576/512 of o), and the element file of --out (four F64 tensors) */
    rc = mlr_cli_memory_fits(cmd,
                             (double)in.T * (double)in.H * DV * 8 * (3 + 2.25 + (o->out ? 4 : 0)),
                             "the budget of %s (%lld query tokens x %lld heads, F64%s)",
                             o->inputs ? o->inputs : o->shape, (long long)in.T, (long long)in.H,
                             o->out ? ", with --out" : "");
  if (rc == MLR_EXIT_OK) {
    print_header(o);
    rc = report(cmd, o, r, &in, root);
  }
  mlr_tf_free(&tf);
  return rc;
}

int mlr_cmd_budget(int argc, char **argv) {
  const char *cmd = "budget";
  opts o;
  memset(&o, 0, sizeof o);
  o.rtol = o.atol = 1e-2;
  o.threshold = 1.0;
  o.points = 19;
  o.dists = DEFAULT_DISTS;
  o.rows = 512;
  int rc = budget_args(cmd, argc, argv, &o);
  if (rc == MLR_EXIT_OK) rc = budget_check(cmd, &o);
  if (rc != MLR_EXIT_OK) return rc;
  mlr_recipe r;
  if ((rc = mlr_cli_recipe_sets(cmd, o.recipe, o.sets, o.nsets, &r)) != MLR_EXIT_OK) return rc;
  mlr_error err = {""};
  if (o.policy && mlr_recipe_set_policy(&r, o.policy, &err) != MLR_OK)
    return mlr_cli_usage_error(cmd, "%s", err.msg);
  if (o.sweep && r.q_format == MLR_Q_BF16)
    return mlr_cli_usage_error(
        cmd, "--sweep absmax: recipe '%s' has bf16 Q, which has no scale (--set q.format=e4m3)",
        r.name);
  char hash[65], pol[64];
  mlr_recipe_hash(&r, hash);
  mlr_recipe_policy_text(&r, pol, sizeof pol);
  json_t *root = o.json ? json_pack("{s:s,s:s,s:s,s:s,s:s}", "mlaref_version", MLAREF_VERSION,
                                    "recipe", r.name, "recipe_sha256", hash, "q_policy", pol,
                                    "inputs", o.inputs ? o.inputs : o.shape)
                        : NULL;
  snprintf(header, sizeof header,
           "mlaref budget: recipe %s (sha256 %.16s, Q policy %s), inputs %s\n", r.name, hash, pol,
           o.inputs ? o.inputs : o.shape);
  rc = o.sweep ? sweep(cmd, &o, &r, root) : report_inputs(cmd, &o, &r, root);
  if (root) {
    if (rc != MLR_EXIT_USAGE) {
      char *s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
      if (s) printf("%s\n", s);
      free(s);
    }
    json_decref(root);
  }
  return rc;
}
