/* A summary.json read back, compared with this run (the baseline's regressions) and merged from
 * shards (mlr_report.h): apart from the matrix, so the reader (a file from someone else's CI)
 * builds alone for its fuzz target. Every field is checked: a wrong type or range names the field.
 */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_suites.h"
#include "mlr_report.h"
#include "mlr_shard.h"

static mlr_status add_regression(mlr_report *rep, mlr_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static mlr_status add_regression(mlr_report *rep, mlr_error *err, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  char **nr = realloc(rep->regressions, (size_t)(rep->nregressions + 1) * sizeof *nr);
  if (!nr || !(nr[rep->nregressions] = strdup(line))) {
    if (nr) rep->regressions = nr;
    return mlr_error_set(err, MLR_ENOMEM, "out of memory for the regressions");
  }
  rep->regressions = nr;
  rep->nregressions++;
  return MLR_OK;
}

/* ---- the reader: typed fields, each error naming the file and the field's path ---- */
typedef struct rd {
  const char *path;
  mlr_error *err;
  mlr_status st;
} rd;

static void bad(rd *r, const char *field, const char *what) {
  if (r->st == MLR_OK)
    r->st = mlr_error_set(r->err, MLR_EPARSE, "%s: %s: %s", r->path, field, what);
}

/* a string into dst (n bytes): required, or optional (absent: dst unchanged) */
static void get_str(rd *r, json_t *o, const char *key, const char *where, char *dst, size_t n,
                    int required) {
  json_t *v = json_object_get(o, key);
  char field[160];
  snprintf(field, sizeof field, "%s%s", where, key);
  if (!v) {
    if (required) bad(r, field, "missing");
    return;
  }
  const char *s = json_string_value(v);
  if (!s)
    bad(r, field, "not a string");
  else if (strlen(s) >= n)
    bad(r, field, "too long");
  else
    snprintf(dst, n, "%s", s);
}

static double get_num(rd *r, json_t *o, const char *key, const char *where, int required) {
  json_t *v = json_object_get(o, key);
  char field[160];
  snprintf(field, sizeof field, "%s%s", where, key);
  if (!v) {
    if (required) bad(r, field, "missing");
    return 0;
  }
  if (!json_is_number(v)) {
    bad(r, field, "not a number");
    return 0;
  }
  const double x = json_number_value(v);
  if (!isfinite(x)) bad(r, field, "not finite");
  return x;
}

static int get_bool(rd *r, json_t *o, const char *key, const char *where, int required, int dflt) {
  json_t *v = json_object_get(o, key);
  char field[160];
  snprintf(field, sizeof field, "%s%s", where, key);
  if (!v) {
    if (required) bad(r, field, "missing");
    return dflt;
  }
  if (!json_is_boolean(v)) bad(r, field, "not true or false");
  return json_is_true(v);
}

static int get_int(rd *r, json_t *o, const char *key, const char *where, int lo, int hi) {
  const double x = get_num(r, o, key, where, 1);
  if (r->st == MLR_OK && (x != floor(x) || x < lo || x > hi)) {
    char field[160], what[64];
    snprintf(field, sizeof field, "%s%s", where, key);
    snprintf(what, sizeof what, "not an integer in %d..%d", lo, hi);
    bad(r, field, what);
  }
  return (int)x;
}

static void get_util(rd *r, json_t *u, const char *where, mlr_util *out) {
  if (!json_is_object(u)) {
    bad(r, where, "not an object");
    return;
  }
  char w[120];
  snprintf(w, sizeof w, "%.110s.", where);
  out->max = get_num(r, u, "max", w, 1);
  out->p999 = get_num(r, u, "p999", w, 1);
  out->p99 = get_num(r, u, "p99", w, 1);
  out->p50 = get_num(r, u, "p50", w, 1);
  out->n = (int64_t)get_num(r, u, "n", w, 1);
  out->over = (int64_t)get_num(r, u, "over", w, 1);
  json_t *h = json_object_get(u, "hist");
  if (!json_is_array(h) || json_array_size(h) != MLR_UTIL_BINS) {
    char field[160];
    snprintf(field, sizeof field, "%shist", w);
    bad(r, field,
        "not an array of "
        "8"
        " counts");
    return;
  }
  for (int k = 0; k < MLR_UTIL_BINS; k++) {
    json_t *x = json_array_get(h, (size_t)k);
    if (!json_is_integer(x) || json_integer_value(x) < 0) {
      char field[160];
      snprintf(field, sizeof field, "%shist[%d]", w, k);
      bad(r, field, "not a count");
    } else
      out->hist[k] = (int64_t)json_integer_value(x);
  }
}

static int verdict_of(const char *v) {
  return !strcmp(v, "pass")      ? MLR_KERNEL_PASS
         : !strcmp(v, "fail")    ? MLR_KERNEL_FAIL
         : !strcmp(v, "skipped") ? MLR_KERNEL_SKIP
                                 : -1;
}

int mlr_report_cell_skipped(const mlr_report_cell *c) {
  return c->kernel[0] && c->applicable && c->kernel_verdict == MLR_KERNEL_SKIP;
}

void mlr_report_count(mlr_report *rep) {
  rep->nfailures = rep->nskipped = 0;
  for (int k = 0; k < rep->ncells; k++) {
    const int skipped = mlr_report_cell_skipped(&rep->cells[k]);
    rep->nskipped += skipped;
    rep->nfailures += !rep->cells[k].pass && !skipped;
  }
}

/* a user kernel's cell: its verdict, reason and rules; its output's digest and utilisation where
 * it wrote one */
static void get_kernel(rd *r, json_t *b, const char *w, mlr_report_cell *c) {
  char f[96], v[8] = "";
  snprintf(f, sizeof f, "%skernel.", w);
  json_t *kj = json_object_get(b, "kernel");
  get_str(r, kj, "name", f, c->kernel, sizeof c->kernel, 1);
  if (r->st == MLR_OK && !c->kernel[0]) bad(r, f, "name: empty");
  if (!c->applicable) return;
  get_str(r, kj, "verdict", f, v, sizeof v, 1);
  c->kernel_verdict = verdict_of(v);
  if (r->st == MLR_OK && c->kernel_verdict < 0) {
    if (strcmp(v, "error")) bad(r, f, "verdict: not pass, fail, error or skipped");
    c->kernel_verdict = MLR_KERNEL_ERROR;
  }
  get_str(r, kj, "reason", f, c->kernel_reason, sizeof c->kernel_reason, 1);
  c->kernel_s = get_num(r, kj, "seconds", f, 0);
  json_t *rules = json_object_get(kj, "rules");
  if (!json_is_array(rules) || json_array_size(rules) > MLR_KERNEL_MAX_CHECKS)
    bad(r, f, "rules: not an array of at most 10");
  for (size_t i = 0; r->st == MLR_OK && i < json_array_size(rules); i++) {
    char rw[128];
    snprintf(rw, sizeof rw, "%srules[%zu].", f, i);
    json_t *x = json_array_get(rules, i), *m = json_object_get(x, "measured"),
           *l = json_object_get(x, "limit");
    mlr_kernel_check *ck = &c->kernel_checks[c->kernel_nchecks++];
    get_str(r, x, "tensor", rw, ck->tensor, sizeof ck->tensor, 1);
    get_str(r, x, "rule", rw, ck->rule, sizeof ck->rule, 1);
    get_str(r, x, "verdict", rw, ck->verdict, sizeof ck->verdict, 1);
    ck->measured = json_is_null(m) ? NAN : get_num(r, x, "measured", rw, 1);
    ck->limit = json_is_null(l) ? NAN : get_num(r, x, "limit", rw, 1);
  }
  get_str(r, b, "o_sha256", w, c->o_sha, sizeof c->o_sha, 0);
  if (!c->o_sha[0]) return;
  snprintf(f, sizeof f, "%sutilisation", w);
  get_util(r, json_object_get(b, "utilisation"), f, &c->util);
  c->rel_l2 = get_num(r, b, "rel_l2", w, 0);
}

static void get_cell(rd *r, json_t *b, int k, mlr_report_cell *c) {
  char w[64];
  snprintf(w, sizeof w, "cells[%d].", k);
  if (!json_is_object(b)) {
    bad(r, w, "not an object");
    return;
  }
  get_str(r, b, "shape", w, c->shape, sizeof c->shape, 1);
  get_str(r, b, "spec", w, c->spec, sizeof c->spec, 0);
  get_str(r, b, "recipe", w, c->recipe, sizeof c->recipe, 1);
  get_str(r, b, "recipe_sha256", w, c->recipe_sha, sizeof c->recipe_sha, 0);
  /* absent in first-version files: the recipe's own */
  get_str(r, b, "policy", w, c->policy, sizeof c->policy, 0);
  c->own_policy = get_bool(r, b, "own_policy", w, 0, 1);
  c->applicable = get_bool(r, b, "applicable", w, 1, 0);
  c->pass = get_bool(r, b, "pass", w, 1, 0);
  /* absent in files of earlier versions: the column in the row's order, no cost or time */
  c->column = json_object_get(b, "column") ? get_int(r, b, "column", w, 0, 100000) : -1;
  c->cost = get_num(r, b, "cost", w, 0);
  c->seconds = get_num(r, b, "seconds", w, 0);
  if (json_object_get(b, "kernel")) get_kernel(r, b, w, c);
  if (c->kernel[0] && c->applicable) return;
  if (!c->applicable) {
    get_str(r, b, "reason", w, c->reason, sizeof c->reason, 0);
    return;
  }
  get_str(r, b, "o_sha256", w, c->o_sha, sizeof c->o_sha, 1);
  get_str(r, b, "golden", w, c->golden, sizeof c->golden, 0);
  char f[96];
  snprintf(f, sizeof f, "%sutilisation", w);
  get_util(r, json_object_get(b, "utilisation"), f, &c->util);
  c->rel_l2 = get_num(r, b, "rel_l2", w, 0);
  json_t *bo = json_object_get(b, "bound");
  if (json_is_object(bo)) {
    snprintf(f, sizeof f, "%sbound.", w);
    c->bound_computed = get_bool(r, bo, "computed", f, 1, 0);
    if (c->bound_computed) {
      c->bound_holds = get_bool(r, bo, "holds", f, 1, 0);
      c->bound_max_ratio = get_num(r, bo, "max_ratio", f, 1);
    }
  }
  json_t *g = json_object_get(b, "gpu");
  if (g) {
    snprintf(f, sizeof f, "%sgpu.", w);
    if (!json_is_object(g)) {
      bad(r, f, "not an object");
      return;
    }
    c->gpu = get_bool(r, g, "ran", f, 1, 0);
    get_str(r, g, "kernel", f, c->gpu_kernel, sizeof c->gpu_kernel, 0);
    get_str(r, g, "note", f, c->gpu_note, sizeof c->gpu_note, 0);
    if (c->gpu) {
      get_str(r, g, "o_sha256", f, c->gpu_o_sha, sizeof c->gpu_o_sha, 0);
      c->gpu_identical = get_num(r, g, "identical", f, 1);
      c->gpu_us = get_num(r, g, "us", f, 1);
      c->gpu_bound_holds = get_bool(r, g, "bound_holds", f, 0, 0);
      c->gpu_pass = get_bool(r, g, "pass", f, 1, 0);
      char uf[128];
      snprintf(uf, sizeof uf, "%sutilisation", f);
      if (json_object_get(g, "utilisation"))
        get_util(r, json_object_get(g, "utilisation"), uf, &c->gpu_util);
    }
  }
}

static void get_extras(rd *r, json_t *root, mlr_report_studies *s) {
  json_t *sw = json_object_get(root, "sweep");
  if (json_is_object(sw)) {
    get_str(r, sw, "recipe", "sweep.", s->sweep_recipe, sizeof s->sweep_recipe, 0);
    get_str(r, sw, "shape", "sweep.", s->sweep_shape, sizeof s->sweep_shape, 0);
    s->seeds_absmax = get_num(r, sw, "seeds_absmax", "sweep.", 0);
    json_t *ds = json_object_get(sw, "distributions");
    if (ds && (!json_is_array(ds) || json_array_size(ds) > 4))
      bad(r, "sweep.distributions", "not an array of at most 4");
    for (size_t d = 0; r->st == MLR_OK && json_is_array(ds) && d < json_array_size(ds); d++) {
      char w[64];
      snprintf(w, sizeof w, "sweep.distributions[%zu].", d);
      json_t *dj = json_array_get(ds, d), *pts = json_object_get(dj, "points");
      get_str(r, dj, "distribution", w, s->sweep_dist[d], sizeof s->sweep_dist[d], 1);
      if (!json_is_array(pts) || json_array_size(pts) > MLR_REPORT_SWEEP_MAX ||
          (d && (int)json_array_size(pts) != s->nsweep_points)) {
        bad(r, w, "points: not an array of at most 16, as long as the first distribution's");
        break;
      }
      s->nsweep_points = (int)json_array_size(pts);
      s->nsweep_dists = (int)d + 1;
      for (int i = 0; i < s->nsweep_points; i++) {
        char pw[96];
        snprintf(pw, sizeof pw, "%spoints[%d].", w, i);
        json_t *p = json_array_get(pts, (size_t)i);
        mlr_report_sweep_point *sp = &s->sweep[d][i];
        sp->absmax = get_num(r, p, "absmax", pw, 1);
        sp->clipped_frac = get_num(r, p, "clipped_fraction", pw, 1);
        sp->util_max = get_num(r, p, "util_max", pw, 1);
        sp->util_p999 = get_num(r, p, "util_p999", pw, 1);
        sp->rel_l2 = get_num(r, p, "rel_l2", pw, 1);
      }
    }
  }
  get_str(r, root, "extra_shape", "", s->extra_shape, sizeof s->extra_shape, 0);
  json_t *dec = json_object_get(root, "decomposition");
  if (dec && (!json_is_array(dec) || json_array_size(dec) > MLR_REPORT_MAX_RECIPES))
    bad(r, "decomposition", "not an array of at most 32");
  for (size_t k = 0; r->st == MLR_OK && json_is_array(dec) && k < json_array_size(dec); k++) {
    char w[64];
    snprintf(w, sizeof w, "decomposition[%zu].", k);
    json_t *d = json_array_get(dec, k), *src = json_object_get(d, "sources");
    mlr_report_decomp *o = &s->decomp[s->ndecomp++];
    get_str(r, d, "recipe", w, o->recipe, sizeof o->recipe, 1);
    o->total_rms = get_num(r, d, "total_rms", w, 1);
    o->interaction_rms = get_num(r, d, "interaction_rms", w, 1);
    o->truth_rms = get_num(r, d, "truth_rms", w, 1);
    if (!json_is_object(src)) {
      bad(r, w, "sources: not an object");
      break;
    }
    for (int s = 0; s < MLR_NSRC; s++) {
      json_t *x = json_object_get(src, mlr_source_name(s));
      if (!x) continue; /* absent: the recipe does not have it */
      if (!json_is_number(x) || !isfinite(json_number_value(x)))
        bad(r, w, "sources: a value that is not a finite number");
      else {
        o->present |= 1u << s;
        o->rms[s] = json_number_value(x);
      }
    }
  }
  json_t *dj = json_object_get(root, "discrimination");
  if (dj) {
    json_t *rows = json_object_get(dj, "caught");
    get_str(r, dj, "recipe", "discrimination.", s->disc_recipe, sizeof s->disc_recipe, 1);
    s->disc_model_ok = get_bool(r, dj, "model_passes", "discrimination.", 1, 0);
    if (!json_is_array(rows)) bad(r, "discrimination.caught", "not an array of rows");
    /* a table of another set of wrong kernels or checks (an older mlaref's) is not this one's:
     * it is left out, not refused */
    const int same = json_array_size(rows) == MLR_DISC_WRONG &&
                     json_array_size(json_array_get(rows, 0)) == MLR_DISC_RULES;
    for (size_t k = 0; r->st == MLR_OK && same && k < MLR_DISC_WRONG; k++) {
      json_t *row = json_array_get(rows, k);
      if (!json_is_array(row) || json_array_size(row) != MLR_DISC_RULES) {
        bad(r, "discrimination.caught", "rows of unequal length");
        break;
      }
      for (size_t q = 0; q < MLR_DISC_RULES; q++) {
        json_t *x = json_array_get(row, q);
        if (!json_is_boolean(x) && !json_is_null(x))
          bad(r, "discrimination.caught", "a value that is not true, false or null");
        s->disc[k][q] = json_is_null(x) ? -1 : json_is_true(x);
      }
    }
    s->disc_done = r->st == MLR_OK && same;
  }
}

/* a sharded run's plan (absent in files of earlier versions): shapes, columns and each cell's
 * shard in 1..n */
static void get_plan(rd *r, json_t *p, int n, mlr_report_plan *out) {
  if (!p) return;
  json_t *shapes = json_object_get(p, "shapes"), *cols = json_object_get(p, "columns"),
         *shard = json_object_get(p, "shard");
  const size_t ns = json_array_size(shapes), nc = json_array_size(cols);
  if (!json_is_array(shapes) || !json_is_array(cols) || !json_is_array(shard) || ns > 256 ||
      nc > 256 || json_array_size(shard) != ns) {
    bad(r, "plan", "not shapes, columns and a shard row a shape (at most 256 each)");
    return;
  }
  out->shapes = calloc(ns ? ns : 1, sizeof *out->shapes);
  out->cols = calloc(nc ? nc : 1, sizeof *out->cols);
  out->colsha = calloc(nc ? nc : 1, sizeof *out->colsha);
  out->shard = calloc(ns * nc > 0 ? ns * nc : 1, sizeof *out->shard);
  if (!out->shapes || !out->cols || !out->colsha || !out->shard) {
    r->st = mlr_error_set(r->err, MLR_ENOMEM, "out of memory for %s", r->path);
    return;
  }
  out->nshapes = (int)ns;
  out->ncols = (int)nc;
  json_t *sha = json_object_get(p, "column_sha256");
  for (size_t c = 0; r->st == MLR_OK && c < nc; c++) {
    const char *h = json_string_value(json_array_get(sha, c));
    if (sha && (!h || strlen(h) != 64 || strspn(h, "0123456789abcdef") != 64))
      bad(r, "plan.column_sha256", "an entry that is not 64 lowercase hex digits");
    else if (h)
      snprintf(out->colsha[c], sizeof out->colsha[0], "%s", h);
    const char *x = json_string_value(json_array_get(cols, c));
    if (!x || strlen(x) >= sizeof out->cols[0])
      bad(r, "plan.columns", "not a short string");
    else
      snprintf(out->cols[c], sizeof out->cols[0], "%s", x);
  }
  for (size_t k = 0; r->st == MLR_OK && k < ns; k++) {
    const char *x = json_string_value(json_array_get(shapes, k));
    json_t *row = json_array_get(shard, k);
    if (!x || strlen(x) >= sizeof out->shapes[0] || json_array_size(row) != nc) {
      bad(r, "plan", "a shape that is not a short name with a shard for every column");
      break;
    }
    snprintf(out->shapes[k], sizeof out->shapes[0], "%s", x);
    for (size_t c = 0; c < nc; c++) {
      json_t *v = json_array_get(row, c);
      const json_int_t i = json_is_integer(v) ? json_integer_value(v) : 0;
      if (i < 1 || i > n) {
        bad(r, "plan.shard", "a shard outside 1..n");
        break;
      }
      out->shard[k * nc + c] = (int)i;
    }
  }
}

/* a merged run's missing cells (an incomplete run stays incomplete when merged again) */
static void get_missing(rd *r, json_t *m, mlr_report *rep) {
  if (!m) return;
  const size_t n = json_array_size(m);
  if (!json_is_array(m) || n > 100000) {
    bad(r, "missing", "not an array of at most 100000 cell names");
    return;
  }
  if (n && !(rep->missing = calloc(n, sizeof *rep->missing))) {
    r->st = mlr_error_set(r->err, MLR_ENOMEM, "out of memory for %s", r->path);
    return;
  }
  for (size_t k = 0; r->st == MLR_OK && k < n; k++) {
    const char *x = json_string_value(json_array_get(m, k));
    if (!x || strlen(x) >= sizeof rep->missing[0])
      bad(r, "missing", "an entry that is not a short string");
    else
      snprintf(rep->missing[rep->nmissing++], sizeof rep->missing[0], "%s", x);
  }
}

/* the kernels' contracts (absent in files of runs without kernels) */
static void get_kernels(rd *r, json_t *ks, mlr_report *rep) {
  if (ks && (!json_is_array(ks) || json_array_size(ks) > MLR_REPORT_MAX_KERNELS))
    bad(r, "kernels", "not an array of at most 16");
  for (size_t k = 0; r->st == MLR_OK && k < json_array_size(ks); k++) {
    char w[64];
    snprintf(w, sizeof w, "kernels[%zu].", k);
    json_t *x = json_array_get(ks, k), *rules = json_object_get(x, "rules");
    mlr_report_kernel *u = &rep->kernels[rep->nkernels++];
    get_str(r, x, "name", w, u->name, sizeof u->name, 1);
    get_str(r, x, "recipe", w, u->recipe, sizeof u->recipe, 1);
    get_str(r, x, "recipe_sha256", w, u->recipe_sha, sizeof u->recipe_sha, 1);
    get_str(r, x, "policy", w, u->policy, sizeof u->policy, 1);
    u->timeout_s = get_num(r, x, "timeout_s", w, 1);
    if (!json_is_array(rules) || json_array_size(rules) > MLR_KERNEL_MAX_RULES) {
      bad(r, w, "rules: not an array of at most 5");
      break;
    }
    for (size_t q = 0; q < json_array_size(rules); q++) {
      const char *t = json_string_value(json_array_get(rules, q));
      if (!t || strlen(t) >= sizeof u->rules[0])
        bad(r, w, "rules: an entry that is not a short string");
      else
        snprintf(u->rules[u->nrules++], sizeof u->rules[0], "%s", t);
    }
  }
}

mlr_status mlr_report_read(const char *path, mlr_report *rep, mlr_error *err) {
  memset(rep, 0, sizeof *rep);
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je);
  if (!root)
    return mlr_error_set(err, MLR_EIO, "baseline %s: not readable JSON: line %d: %s", path, je.line,
                         je.text);
  const char *schema = json_string_value(json_object_get(root, "schema"));
  json_t *cells = json_object_get(root, "cells");
  if (!json_is_object(root) || !schema || strcmp(schema, MLR_REPORT_SCHEMA) ||
      !json_is_array(cells)) {
    json_decref(root);
    return mlr_error_set(err, MLR_EPARSE,
                         "baseline %s: not a summary.json of schema %s (a cells array)", path,
                         MLR_REPORT_SCHEMA);
  }
  rd r = {path, err, MLR_OK};
  get_str(&r, root, "suite", "", rep->suite, sizeof rep->suite, 1);
  get_str(&r, root, "mlaref_version", "", rep->version, sizeof rep->version, 0);
  rep->quick = get_bool(&r, root, "quick", "", 0, 0);
  json_t *tol = json_object_get(root, "tolerance");
  rep->rtol = get_num(&r, tol, "rtol", "tolerance.", 1);
  rep->atol = get_num(&r, tol, "atol", "tolerance.", 1);
  rep->margin = get_num(&r, root, "margin", "", 0);
  get_str(&r, root, "mlaref_commit", "", rep->commit, sizeof rep->commit, 0);
  json_t *sh = json_object_get(root, "shard");
  if (sh) {
    rep->shard_i = get_int(&r, sh, "i", "shard.", 1, 64);
    rep->shard_n = get_int(&r, sh, "n", "shard.", 1, 64);
    get_str(&r, sh, "from", "shard.", rep->shard_from, sizeof rep->shard_from, 0);
    rep->shard_cost = get_num(&r, sh, "cost", "shard.", 0);
    rep->shard_seconds = get_num(&r, sh, "seconds", "shard.", 0);
    get_plan(&r, json_object_get(root, "plan"), rep->shard_n, &rep->plan);
  }
  json_t *pol = json_object_get(root, "policies");
  for (size_t k = 0; r.st == MLR_OK && json_is_array(pol) && k < json_array_size(pol) &&
                     k < MLR_REPORT_MAX_POLICIES;
       k++) {
    const char *p = json_string_value(json_array_get(pol, k));
    if (!p || strlen(p) >= sizeof rep->policies[0])
      bad(&r, "policies", "an entry that is not a short string");
    else
      snprintf(rep->policies[rep->npolicies++], sizeof rep->policies[0], "%s", p);
  }
  get_kernels(&r, json_object_get(root, "kernels"), rep);
  get_missing(&r, json_object_get(root, "missing"), rep);
  json_t *g = json_object_get(root, "gpu");
  if (json_is_object(g)) {
    rep->gpu_mode = get_int(&r, g, "mode", "gpu.", 0, 2);
    get_str(&r, g, "device", "gpu.", rep->gpu_device, sizeof rep->gpu_device, 0);
    rep->gpu_margin = get_num(&r, g, "margin", "gpu.", 0);
    rep->gpu_noise_us = get_num(&r, g, "noise_us", "gpu.", 0);
  }
  const size_t n = json_array_size(cells);
  if (n > 100000)
    bad(&r, "cells", "more than 100000 cells");
  else if (r.st == MLR_OK && !(rep->cells = calloc(n ? n : 1, sizeof *rep->cells)))
    r.st = mlr_error_set(err, MLR_ENOMEM, "out of memory for %s", path);
  for (size_t k = 0; r.st == MLR_OK && k < n; k++) {
    get_cell(&r, json_array_get(cells, k), (int)k, &rep->cells[k]);
    rep->ncells = (int)k + 1;
  }
  if (r.st == MLR_OK) get_extras(&r, root, &rep->studies);
  mlr_report_count(rep);
  json_decref(root);
  if (r.st != MLR_OK) mlr_report_free(rep);
  return r.st;
}

/* ---- against the baseline ---- */
/* the same column of the matrix: shape, recipe, and the policy (a recipe's own policy matches its
 * own: a first-version baseline has no policy field, its cells are the recipes' own) */
static int same_column(const mlr_report_cell *a, const mlr_report_cell *b) {
  return !strcmp(a->shape, b->shape) && !strcmp(a->recipe, b->recipe) &&
         !strcmp(a->kernel, b->kernel) && a->own_policy == b->own_policy &&
         (a->own_policy || !strcmp(a->policy, b->policy));
}

/* a kernel cell against its baseline: passing then and failing or erring now, or a utilisation max
 * up by more than the margin. Not a changed digest: a kernel may differ run to run (atomics, split
 * order) and be right each time; its rules judge it. A skip is no regression (the kernel says it
 * does not run the cell), and a skip in the baseline was no pass to regress from */
static mlr_status kernel_regressions(mlr_report *rep, mlr_report_cell *c,
                                     const mlr_report_cell *old, mlr_error *err) {
  const int had_o = old->o_sha[0] != 0, has_o = c->o_sha[0] != 0;
  c->has_base = had_o;
  c->base_util_max = had_o ? old->util.max : 0;
  mlr_status st = MLR_OK;
  if (old->pass && !c->pass && !mlr_report_cell_skipped(c))
    st = add_regression(rep, err, "%s / kernel %s: passed in the baseline, fails now (%s: %.400s)",
                        c->shape, c->kernel, mlr_kernel_verdict_name(c->kernel_verdict),
                        c->kernel_reason);
  if (st == MLR_OK && had_o && has_o && old->util.max > 0 &&
      c->util.max > (1 + rep->margin) * old->util.max)
    st = add_regression(rep, err,
                        "%s / kernel %s: utilisation max up from %.4g to %.4g (more than %g%%)",
                        c->shape, c->kernel, old->util.max, c->util.max, 100 * rep->margin);
  return st;
}

mlr_status mlr_report_compare(mlr_report *rep, const mlr_report *base, const char *path,
                              mlr_error *err) {
  snprintf(rep->baseline, sizeof rep->baseline, "%s", path);
  mlr_status st = MLR_OK;
  for (int k = 0; st == MLR_OK && k < rep->ncells; k++) {
    mlr_report_cell *c = &rep->cells[k];
    const mlr_report_cell *old = NULL;
    for (int i = 0; i < base->ncells && !old; i++)
      if (same_column(&base->cells[i], c)) old = &base->cells[i];
    if (!old || !old->applicable || !c->applicable) continue;
    if (c->kernel[0]) {
      st = kernel_regressions(rep, c, old, err);
      continue;
    }
    c->has_base = 1;
    c->base_util_max = old->util.max;
    c->base_gpu_us = old->gpu ? old->gpu_us : 0;
    const char *col = c->own_policy ? "" : " @ ", *pol = c->own_policy ? "" : c->policy;
    if (old->pass && !c->pass)
      st = add_regression(rep, err,
                          "%s / %s%s%s: passed in the baseline, fails now (golden %s, bound %s%s)",
                          c->shape, c->recipe, col, pol, c->golden,
                          !c->bound_computed ? "not computed"
                          : c->bound_holds   ? "holds"
                                             : "VIOLATED",
                          c->gpu && !c->gpu_pass ? ", GPU kernel FAIL" : "");
    if (st == MLR_OK && old->o_sha[0] && strcmp(old->o_sha, c->o_sha))
      st = add_regression(rep, err,
                          "%s / %s%s%s: output digest changed: %.16s in the baseline, %.16s now",
                          c->shape, c->recipe, col, pol, old->o_sha, c->o_sha);
    if (st == MLR_OK && old->util.max > 0 && c->util.max > (1 + rep->margin) * old->util.max)
      st = add_regression(
          rep, err, "%s / %s%s%s: utilisation max up from %.4g to %.4g (more than %g%%)", c->shape,
          c->recipe, col, pol, old->util.max, c->util.max, 100 * rep->margin);
    if (st == MLR_OK && c->gpu && old->gpu && old->gpu_us > 0 &&
        c->gpu_us > (1 + rep->gpu_margin) * old->gpu_us &&
        c->gpu_us - old->gpu_us > rep->gpu_noise_us)
      st = add_regression(rep, err,
                          "%s / %s%s%s: GPU %s kernel slower: %.1f us in the baseline, %.1f us now "
                          "(over %g%% and %g us)",
                          c->shape, c->recipe, col, pol, c->gpu_kernel, old->gpu_us, c->gpu_us,
                          100 * rep->gpu_margin, rep->gpu_noise_us);
  }
  return st;
}

mlr_status mlr_report_baseline(mlr_report *rep, const char *path, mlr_error *err) {
  mlr_report base;
  mlr_status st = mlr_report_read(path, &base, err);
  if (st != MLR_OK) return st;
  st = mlr_report_compare(rep, &base, path, err);
  mlr_report_free(&base);
  return st;
}

/* ---- shards ---- */
static int suite_pos(const mlr_suite *su, const char *cell) {
  for (size_t k = 0; su && k < su->n; k++)
    if (!strcmp(su->cells[k].name, cell)) return (int)k;
  return -1;
}

/* 1 when two plans split the same cells the same way */
static int same_plan(const mlr_report_plan *a, const mlr_report_plan *b) {
  if (a->nshapes != b->nshapes || a->ncols != b->ncols) return 0;
  for (int k = 0; k < a->nshapes; k++)
    if (strcmp(a->shapes[k], b->shapes[k])) return 0;
  for (int c = 0; c < a->ncols; c++)
    if (strcmp(a->cols[c], b->cols[c]) || strcmp(a->colsha[c], b->colsha[c])) return 0;
  return !a->nshapes ||
         !memcmp(a->shard, b->shard, (size_t)(a->nshapes * a->ncols) * sizeof *a->shard);
}

/* part p against the first: the same run (suite, build, settings, columns, split) */
static mlr_status same_run(const mlr_report *p0, const mlr_report *p, int sn, mlr_error *err) {
  if (strcmp(p->version, p0->version) || strcmp(p->commit, p0->commit))
    return mlr_error_set(err, MLR_EINVAL,
                         "shard %d of %d: built from mlaref %s, commit %s; the first from mlaref "
                         "%s, commit %s: the shards of a run come from one build",
                         p->shard_i, p->shard_n, p->version, p->commit, p0->version, p0->commit);
  if (strcmp(p->suite, p0->suite) || p->quick != p0->quick || p->rtol != p0->rtol ||
      p->atol != p0->atol || (p->shard_n ? p->shard_n : 1) != sn || p->npolicies != p0->npolicies ||
      memcmp(p->policies, p0->policies, sizeof p->policies) || p->gpu_mode != p0->gpu_mode ||
      p->nkernels != p0->nkernels || memcmp(p->kernels, p0->kernels, sizeof p->kernels) ||
      !same_plan(&p->plan, &p0->plan))
    return mlr_error_set(err, MLR_EINVAL,
                         "shard %d of %d: not of the same run as the first (suite %s, quick %d, "
                         "tolerance %g,%g, %d shards, %d policies, gpu mode %d, %d kernels, the "
                         "same recipes (names and SHA-256) and split)",
                         p->shard_i, p->shard_n, p0->suite, p0->quick, p0->rtol, p0->atol, sn,
                         p0->npolicies, p0->gpu_mode, p0->nkernels);
  return MLR_OK;
}

/* the cells of the shards not given, by the plan ("SHAPE COLUMN"; without a plan, the shard),
 * after those the parts themselves lack (a merged run merged again) */
static mlr_status list_missing(const mlr_report *parts, int np, const int *seen, int sn,
                               mlr_report *out, mlr_error *err) {
  const mlr_report_plan *pl = &parts[0].plan;
  int cap = pl->nshapes * pl->ncols + sn + 1;
  for (int k = 0; k < np; k++) cap += parts[k].nmissing;
  if (!(out->missing = calloc((size_t)cap, sizeof *out->missing)))
    return mlr_error_set(err, MLR_ENOMEM, "out of memory for the missing cells");
  for (int k = 0; k < np; k++)
    for (int j = 0; j < parts[k].nmissing; j++)
      memcpy(out->missing[out->nmissing++], parts[k].missing[j], sizeof out->missing[0]);
  for (int i = 1; i <= sn; i++) {
    if (seen[i]) continue;
    int named = 0;
    for (int u = 0; u < pl->nshapes * pl->ncols; u++)
      if (pl->shard[u] == i) {
        snprintf(out->missing[out->nmissing++], sizeof out->missing[0], "%s %s",
                 pl->shapes[u / pl->ncols], pl->cols[u % pl->ncols]);
        named = 1;
      }
    if (i == 1) /* shard 1 alone works out the extras */
      snprintf(out->missing[out->nmissing++], sizeof out->missing[0],
               "shard 1/%d's sweep, decomposition and discrimination table", sn);
    else if (!named)
      snprintf(out->missing[out->nmissing++], sizeof out->missing[0], "every cell of shard %d/%d",
               i, sn);
  }
  return MLR_OK;
}

/* the merged cells in the suite's order, each shape's in column order */
static mlr_status gather(const mlr_report *parts, int n, int total, mlr_report *out,
                         mlr_error *err) {
  out->cells = calloc((size_t)(total ? total : 1), sizeof *out->cells);
  if (!out->cells) return mlr_error_set(err, MLR_ENOMEM, "out of memory for the merged cells");
  const mlr_suite *su = mlr_suite_find(parts[0].suite);
  for (int pos = -1; pos < (su ? (int)su->n : 0); pos++) {
    const int from = out->ncells;
    for (int k = 0; k < n; k++)
      for (int c = 0; c < parts[k].ncells; c++)
        if (suite_pos(su, parts[k].cells[c].shape) == pos)
          out->cells[out->ncells++] = parts[k].cells[c];
    for (int a = from + 1; a < out->ncells; a++) { /* by column: an insertion sort, stable */
      const mlr_report_cell x = out->cells[a];
      int b = a;
      for (; b > from && out->cells[b - 1].column > x.column; b--)
        out->cells[b] = out->cells[b - 1];
      out->cells[b] = x;
    }
  }
  for (int k = 0; k < out->ncells; k++) out->cells[k].has_base = 0;
  return MLR_OK;
}

mlr_status mlr_report_merge(const mlr_report *parts, int n, mlr_report *out, mlr_error *err) {
  memset(out, 0, sizeof *out);
  if (n < 1) return mlr_error_set(err, MLR_EINVAL, "no shard to merge");
  const mlr_report *p0 = &parts[0];
  const int sn = p0->shard_n ? p0->shard_n : 1;
  int seen[MLR_SHARD_MAX + 1] = {0}, total = 0;
  for (int k = 0; k < n; k++) {
    const mlr_report *p = &parts[k];
    mlr_status st = same_run(p0, p, sn, err);
    if (st != MLR_OK) return st;
    const int i = p->shard_n ? p->shard_i : 1;
    if (i < 1 || i > sn || seen[i]++)
      return mlr_error_set(err, MLR_EINVAL, "shard %d/%d given twice", i, sn);
    total += p->ncells;
  }
  *out = *p0; /* the run's settings and shard 1's extras below */
  out->cells = NULL;
  out->ncells = 0;
  out->regressions = NULL;
  out->nregressions = 0;
  out->nfailures = 0;
  out->baseline[0] = 0;
  out->shard_i = out->shard_n = 0;
  memset(&out->plan, 0, sizeof out->plan); /* p0's, freed with p0 */
  out->missing = NULL;
  out->nmissing = out->nshards = 0;
  for (int k = 0; k < n; k++) {
    const mlr_report *p = &parts[k];
    if ((p->shard_n ? p->shard_i : 1) == 1) out->studies = p->studies; /* shard 1's extras */
    mlr_report_shard_info *si = &out->shards[out->nshards++];
    si->i = p->shard_n ? p->shard_i : 1;
    snprintf(si->from, sizeof si->from, "%s", p->shard_from);
    si->cost = p->shard_cost;
    si->seconds = p->shard_seconds;
  }
  mlr_status st = list_missing(parts, n, seen, sn, out, err);
  if (st == MLR_OK) st = gather(parts, n, total, out, err);
  if (st != MLR_OK) {
    mlr_report_free(out);
    return st;
  }
  mlr_report_count(out);
  return MLR_OK;
}

void mlr_report_free(mlr_report *rep) {
  for (int k = 0; k < rep->nregressions; k++) free(rep->regressions[k]);
  free(rep->regressions);
  free(rep->cells);
  free(rep->plan.shapes);
  free(rep->plan.cols);
  free(rep->plan.colsha);
  free(rep->plan.shard);
  free(rep->missing);
  memset(rep, 0, sizeof *rep);
}
