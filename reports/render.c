/* The report's files (mlr_report.h): summary.json, summary.md and index.html, the plots drawn by
 * gnuplot's SVG terminal and inlined, so the page needs nothing but itself. Each file is written
 * atomically (fixtures/io: temporary file, fsync, rename). */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mlr_tensor.h"
#include "mlr_discriminate.h"
#include "mlr_report.h"

/* ---- a growing text buffer ---- */
typedef struct buf {
  char *s;
  size_t n, cap;
  int oom;
} buf;

static void bprintf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(buf *b, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    const int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) {
      b->oom = 1;
      return;
    }
    if (b->s && b->n + (size_t)k < b->cap) {
      b->n += (size_t)k;
      return;
    }
    const size_t cap = (b->cap + (size_t)k + 1) * 2;
    char *ns = realloc(b->s, cap);
    if (!ns) {
      b->oom = 1;
      return;
    }
    b->s = ns;
    b->cap = cap;
  }
}

/* text escaped for HTML */
static void bhtml(buf *b, const char *s) {
  for (; *s; s++) {
    if (*s == '<')
      bprintf(b, "&lt;");
    else if (*s == '>')
      bprintf(b, "&gt;");
    else if (*s == '&')
      bprintf(b, "&amp;");
    else if (*s == '"')
      bprintf(b, "&quot;");
    else
      bprintf(b, "%c", *s);
  }
}

static mlr_status write_file(const char *dir, const char *name, const char *text, size_t n,
                             mlr_error *err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  mlr_atomic_file af;
  mlr_status st = mlr_atomic_open(&af, path, err);
  if (st != MLR_OK) return st;
  if (fwrite(text, 1, n, (FILE *)af.fp) != n) {
    mlr_atomic_abort(&af);
    return mlr_error_set(err, MLR_EIO, "%s: write failed", path);
  }
  return mlr_atomic_commit(&af, err);
}

/* ---- summary.json ---- */
static json_t *util_json(const mlr_util *u) {
  json_t *hist = json_array();
  for (int k = 0; k < MLR_UTIL_BINS; k++) json_array_append_new(hist, json_integer(u->hist[k]));
  return json_pack("{s:f,s:f,s:f,s:f,s:I,s:I,s:o}", "max", u->max, "p999", u->p999, "p99", u->p99,
                   "p50", u->p50, "n", (json_int_t)u->n, "over", (json_int_t)u->over, "hist", hist);
}

/* a sharded run's split: the shapes, the columns and each cell's shard */
static json_t *plan_json(const mlr_report_plan *p) {
  json_t *shapes = json_array(), *cols = json_array(), *sha = json_array(), *shard = json_array();
  for (int s = 0; s < p->nshapes; s++) {
    json_t *row = json_array();
    for (int c = 0; c < p->ncols; c++)
      json_array_append_new(row, json_integer(p->shard[s * p->ncols + c]));
    json_array_append_new(shapes, json_string(p->shapes[s]));
    json_array_append_new(shard, row);
  }
  for (int c = 0; c < p->ncols; c++) {
    json_array_append_new(cols, json_string(p->cols[c]));
    json_array_append_new(sha, json_string(p->colsha[c]));
  }
  return json_pack("{s:o,s:o,s:o,s:o}", "shapes", shapes, "columns", cols, "column_sha256", sha,
                   "shard", shard);
}

/* the decomposition, the discrimination table, the shard, the policy axis and the GPU leg */
static void extras_json(const mlr_report *r, json_t *root) {
  json_t *dec = json_array(), *pol = json_array();
  for (int k = 0; k < r->studies.ndecomp; k++) {
    const mlr_report_decomp *d = &r->studies.decomp[k];
    json_t *src = json_object();
    for (int s = 0; s < MLR_NSRC; s++)
      if (d->present >> s & 1u) json_object_set_new(src, mlr_source_name(s), json_real(d->rms[s]));
    json_array_append_new(dec, json_pack("{s:s,s:f,s:f,s:f,s:o}", "recipe", d->recipe, "total_rms",
                                         d->total_rms, "interaction_rms", d->interaction_rms,
                                         "truth_rms", d->truth_rms, "sources", src));
  }
  json_object_set_new(root, "extra_shape", json_string(r->studies.extra_shape));
  json_object_set_new(root, "decomposition", dec);
  if (r->studies.disc_done) {
    json_t *rows = json_array(), *wrong = json_array(), *rules = json_array();
    for (int k = 0; k < MLR_DISC_WRONG; k++) {
      json_t *row = json_array();
      for (int q = 0; q < MLR_DISC_RULES; q++)
        json_array_append_new(row, r->studies.disc[k][q] < 0 ? json_null()
                                                             : json_boolean(r->studies.disc[k][q]));
      json_array_append_new(rows, row);
      json_array_append_new(wrong, json_string(mlr_disc_wrong_name(k)));
    }
    for (int q = 0; q < MLR_DISC_RULES; q++)
      json_array_append_new(rules, json_string(mlr_disc_rules[q]));
    json_object_set_new(root, "discrimination",
                        json_pack("{s:s,s:b,s:o,s:o,s:o}", "recipe", r->studies.disc_recipe,
                                  "model_passes", r->studies.disc_model_ok, "wrong_kernels", wrong,
                                  "rules", rules, "caught", rows));
  }
  for (int k = 0; k < r->npolicies; k++) json_array_append_new(pol, json_string(r->policies[k]));
  json_object_set_new(root, "policies", pol);
  json_t *ks = json_array();
  for (int k = 0; k < r->nkernels; k++) {
    const mlr_report_kernel *u = &r->kernels[k];
    json_t *rules = json_array();
    for (int q = 0; q < u->nrules; q++) json_array_append_new(rules, json_string(u->rules[q]));
    json_array_append_new(ks, json_pack("{s:s,s:s,s:s,s:s,s:f,s:o}", "name", u->name, "recipe",
                                        u->recipe, "recipe_sha256", u->recipe_sha, "policy",
                                        u->policy, "timeout_s", u->timeout_s, "rules", rules));
  }
  json_object_set_new(root, "kernels", ks);
  json_object_set_new(root, "mlaref_commit", json_string(r->commit));
  if (r->shard_n) {
    json_object_set_new(root, "shard",
                        json_pack("{s:i,s:i,s:s,s:f,s:f}", "i", r->shard_i, "n", r->shard_n, "from",
                                  r->shard_from, "cost", r->shard_cost, "seconds",
                                  r->shard_seconds));
    json_object_set_new(root, "plan", plan_json(&r->plan));
  }
  if (r->nshards) {
    json_t *sh = json_array(), *miss = json_array();
    for (int k = 0; k < r->nshards; k++)
      json_array_append_new(sh, json_pack("{s:i,s:s,s:f,s:f}", "i", r->shards[k].i, "from",
                                          r->shards[k].from, "cost", r->shards[k].cost, "seconds",
                                          r->shards[k].seconds));
    for (int k = 0; k < r->nmissing; k++) json_array_append_new(miss, json_string(r->missing[k]));
    json_object_set_new(root, "shards", sh);
    json_object_set_new(root, "missing", miss);
  }
  json_object_set_new(root, "gpu",
                      json_pack("{s:i,s:s,s:f,s:f}", "mode", r->gpu_mode, "device", r->gpu_device,
                                "margin", r->gpu_margin, "noise_us", r->gpu_noise_us));
}

/* a number, or null where JSON has none */
static json_t *num_or_null(double x) { return isfinite(x) ? json_real(x) : json_null(); }

/* a user kernel's verdict: the rules the check held it to, the reason; its output's digest and
 * error against the truth where it wrote one (no golden, no bound: fa3 and its rules judge it) */
static void kernel_json(const mlr_report_cell *c, json_t *o) {
  json_t *rules = json_array();
  for (int k = 0; k < c->kernel_nchecks; k++) {
    const mlr_kernel_check *x = &c->kernel_checks[k];
    json_array_append_new(rules,
                          json_pack("{s:s,s:s,s:s,s:o,s:o}", "tensor", x->tensor, "rule", x->rule,
                                    "verdict", x->verdict, "measured", num_or_null(x->measured),
                                    "limit", num_or_null(x->limit)));
  }
  json_object_set_new(o, "kernel",
                      json_pack("{s:s,s:s,s:s,s:o,s:f}", "name", c->kernel, "verdict",
                                mlr_kernel_verdict_name(c->kernel_verdict), "reason",
                                c->kernel_reason, "rules", rules, "seconds", c->kernel_s));
  if (!c->o_sha[0]) return;
  json_object_set_new(o, "o_sha256", json_string(c->o_sha));
  json_object_set_new(o, "utilisation", util_json(&c->util));
  json_object_set_new(o, "rel_l2", json_real(c->rel_l2));
}

static json_t *cell_json(const mlr_report_cell *c) {
  json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:b,s:b,s:b,s:i,s:f,s:f}", "shape", c->shape, "spec",
                        c->spec, "recipe", c->recipe, "recipe_sha256", c->recipe_sha, "policy",
                        c->policy, "own_policy", c->own_policy, "applicable", c->applicable, "pass",
                        c->pass, "column", c->column, "cost", c->cost, "seconds", c->seconds);
  if (c->kernel[0] && c->applicable) {
    kernel_json(c, o);
    return o;
  }
  if (c->kernel[0]) json_object_set_new(o, "kernel", json_pack("{s:s}", "name", c->kernel));
  if (!c->applicable) {
    json_object_set_new(o, "reason", json_string(c->reason));
    return o;
  }
  json_object_set_new(o, "o_sha256", json_string(c->o_sha));
  json_object_set_new(o, "golden", json_string(c->golden));
  json_object_set_new(o, "utilisation", util_json(&c->util));
  json_object_set_new(o, "rel_l2", json_real(c->rel_l2));
  json_object_set_new(o, "bound",
                      c->bound_computed ? json_pack("{s:b,s:b,s:f}", "computed", 1, "holds",
                                                    c->bound_holds, "max_ratio", c->bound_max_ratio)
                                        : json_pack("{s:b}", "computed", 0));
  if (c->gpu || c->gpu_note[0] || c->gpu_kernel[0]) {
    json_t *g =
        json_pack("{s:b,s:s,s:s}", "ran", c->gpu, "kernel", c->gpu_kernel, "note", c->gpu_note);
    if (c->gpu) {
      json_object_set_new(g, "o_sha256", json_string(c->gpu_o_sha));
      json_object_set_new(g, "identical", json_real(c->gpu_identical));
      json_object_set_new(g, "us", json_real(c->gpu_us));
      json_object_set_new(g, "bound_holds", json_boolean(c->gpu_bound_holds));
      json_object_set_new(g, "pass", json_boolean(c->gpu_pass));
      json_object_set_new(g, "utilisation", util_json(&c->gpu_util));
    }
    json_object_set_new(o, "gpu", g);
  }
  return o;
}

static char *summary_json(const mlr_report *r) {
  json_t *cells = json_array(), *edges = json_array(), *regs = json_array(), *sweep = json_array();
  for (int k = 0; k < r->ncells; k++) json_array_append_new(cells, cell_json(&r->cells[k]));
  for (int k = 0; k <= MLR_UTIL_BINS; k++)
    json_array_append_new(edges,
                          isinf(mlr_util_edges[k]) ? json_null() : json_real(mlr_util_edges[k]));
  for (int k = 0; k < r->nregressions; k++)
    json_array_append_new(regs, json_string(r->regressions[k]));
  for (int d = 0; d < r->studies.nsweep_dists; d++) {
    json_t *pts = json_array();
    for (int i = 0; i < r->studies.nsweep_points; i++) {
      const mlr_report_sweep_point *p = &r->studies.sweep[d][i];
      json_array_append_new(pts,
                            json_pack("{s:f,s:f,s:f,s:f,s:f}", "absmax", p->absmax,
                                      "clipped_fraction", p->clipped_frac, "util_max", p->util_max,
                                      "util_p999", p->util_p999, "rel_l2", p->rel_l2));
    }
    json_array_append_new(
        sweep, json_pack("{s:s,s:o}", "distribution", r->studies.sweep_dist[d], "points", pts));
  }
  json_t *root = json_pack(
      "{s:s,s:s,s:s,s:b,s:{s:f,s:f},s:f,s:o,s:o,s:{s:s,s:s,s:f,s:o},s:o,s:i,s:s}", "schema",
      MLR_REPORT_SCHEMA, "mlaref_version", r->version, "suite", r->suite, "quick", r->quick,
      "tolerance", "rtol", r->rtol, "atol", r->atol, "margin", r->margin, "hist_edges", edges,
      "cells", cells, "sweep", "recipe", r->studies.sweep_recipe, "shape", r->studies.sweep_shape,
      "seeds_absmax", r->studies.seeds_absmax, "distributions", sweep, "regressions", regs,
      "failures", r->nfailures, "baseline", r->baseline);
  if (root) json_object_set_new(root, "skipped", json_integer(r->nskipped));
  if (root) extras_json(r, root);
  char *s = root ? json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) : NULL;
  json_decref(root);
  return s;
}

mlr_status mlr_report_plotter_check(const char *gnuplot_cmd, mlr_error *err) {
  char cmd[4200], line[256];
  snprintf(cmd, sizeof cmd, "%s --version 2>/dev/null", gnuplot_cmd);
  FILE *g = popen(cmd, "r");
  int ok = g && fgets(line, sizeof line, g) != NULL;
  if (g) ok = pclose(g) == 0 && ok;
  return ok ? MLR_OK
            : mlr_error_set(err, MLR_EIO,
                            "the plotting tool '%s' failed (is gnuplot installed? scripts/setup.sh "
                            "installs gnuplot-nox)",
                            gnuplot_cmd);
}

/* ---- plots: gnuplot's SVG terminal, read back to be inlined ---- */
static mlr_status plot(const char *gnuplot_cmd, const char *script, int w, int h, buf *out,
                       mlr_error *err) {
  char svg[64], cmd[4200];
  snprintf(svg, sizeof svg, "/tmp/mlr_report_%ld.svg", (long)getpid());
  snprintf(cmd, sizeof cmd, "%s 2>/dev/null", gnuplot_cmd);
  /* a plotting tool that is missing or dies early closes the pipe: the write must fail, not kill
   * the process with SIGPIPE (the caller's disposition is restored after) */
  struct sigaction ign, old;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGPIPE, &ign, &old);
  FILE *g = popen(cmd, "w");
  int bad = !g;
  if (g) {
    fprintf(g,
            "set terminal svg size %d,%d dynamic noenhanced font 'sans,11' background "
            "'#ffffff'\nset output '%s'\n%s\nunset output\n",
            w, h, svg, script);
    bad = fflush(g) != 0;
    bad = pclose(g) != 0 || bad;
  }
  sigaction(SIGPIPE, &old, NULL);
  if (bad) {
    remove(svg);
    return mlr_error_set(err, MLR_EIO,
                         "the plotting tool '%s' failed (is gnuplot installed? scripts/setup.sh "
                         "installs gnuplot-nox)",
                         gnuplot_cmd);
  }
  FILE *f = fopen(svg, "rb");
  if (!f) return mlr_error_set(err, MLR_EIO, "the plotting tool '%s' wrote no SVG", gnuplot_cmd);
  char chunk[8192];
  size_t k;
  int skip_header = 1;
  while ((k = fread(chunk, 1, sizeof chunk - 1, f)) > 0) {
    chunk[k] = 0;
    const char *p = chunk;
    if (skip_header) { /* inline SVG: drop the XML declaration */
      const char *svgtag = strstr(chunk, "<svg");
      if (svgtag) p = svgtag;
      skip_header = 0;
    }
    bprintf(out, "%s", p);
  }
  fclose(f);
  remove(svg);
  return out->oom ? mlr_error_set(err, MLR_ENOMEM, "out of memory for a plot") : MLR_OK;
}

/* a column of the matrix: the recipe, with the policy when it is a point of the policy axis */
static const char *col_label(const mlr_report_cell *c, char *buf, size_t n) {
  if (c->kernel[0])
    snprintf(buf, n, "kernel %s", c->kernel);
  else
    snprintf(buf, n, "%s%s%s", c->recipe, c->own_policy ? "" : " @ ",
             c->own_policy ? "" : c->policy);
  return buf;
}

/* gnuplot single-quoted text: a quote is doubled */
static void gq(buf *b, const char *s) {
  for (; *s; s++) bprintf(b, *s == '\'' ? "''" : "%c", *s);
}

static mlr_status run_plot(buf *s, const char *gp, int w, int h, buf *out, mlr_error *err) {
  mlr_status st =
      s->oom ? mlr_error_set(err, MLR_ENOMEM, "out of memory") : plot(gp, s->s, w, h, out, err);
  free(s->s);
  return st;
}

/* the heatmap of utilisation max, shapes x columns (n/a cells blank) */
static mlr_status heatmap(const mlr_report *r, const char *gp, buf *out, mlr_error *err) {
  static char shapes[256][64], recipes[64][128];
  char lab[128];
  int ns = 0, nr = 0;
  for (int k = 0; k < r->ncells; k++) {
    int i;
    for (i = 0; i < ns && strcmp(shapes[i], r->cells[k].shape); i++) {}
    if (i == ns && ns < 256) snprintf(shapes[ns++], 64, "%s", r->cells[k].shape);
    col_label(&r->cells[k], lab, sizeof lab);
    for (i = 0; i < nr && strcmp(recipes[i], lab); i++) {}
    if (i == nr && nr < 64) snprintf(recipes[nr++], 128, "%s", lab);
  }
  buf s = {0};
  bprintf(&s, "$d << EOD\n");
  for (int k = 0; k < r->ncells; k++) {
    const mlr_report_cell *c = &r->cells[k];
    int x = 0, y = 0;
    col_label(c, lab, sizeof lab);
    while (x < nr - 1 && strcmp(recipes[x], lab)) x++;
    while (y < ns - 1 && strcmp(shapes[y], c->shape)) y++;
    if (c->applicable && (!c->kernel[0] || c->o_sha[0]))
      bprintf(&s, "%d %d %.6g\n", x, y, c->util.max);
  }
  bprintf(&s,
          "EOD\nset title 'budget utilisation max |o - truth| / (%g + %g |truth|)'\nset xrange "
          "[-0.5:%d.5]\nset yrange [-0.5:%d.5] reverse\n",
          r->atol, r->rtol, nr - 1, ns - 1);
  bprintf(&s, "set xtics rotate by 30 right (");
  for (int i = 0; i < nr; i++) {
    bprintf(&s, "%s'", i ? ", " : "");
    gq(&s, recipes[i]);
    bprintf(&s, "' %d", i);
  }
  bprintf(&s, ")\nset ytics (");
  for (int i = 0; i < ns; i++) bprintf(&s, "%s'%s' %d", i ? ", " : "", shapes[i], i);
  bprintf(
      &s,
      ")\nset logscale cb\nset cbrange [0.01:100]\nset palette defined (0 '#1a9850', 0.5 "
      "'#ffffbf', 1 '#d73027')\nunset key\n"
      "plot $d using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 noborder fc palette notitle, "
      "$d using 1:2:(sprintf('%%.2g',$3)) with labels font 'sans,8' notitle\n");
  return run_plot(&s, gp, 240 + 56 * nr, 200 + 20 * ns, out, err);
}

/* the static-scale sweep: utilisation max against absmax per distribution, clipped % on y2 */
static mlr_status sweep_plot(const mlr_report *r, const char *gp, buf *out, mlr_error *err) {
  buf s = {0};
  for (int d = 0; d < r->studies.nsweep_dists; d++) {
    bprintf(&s, "$s%d << EOD\n", d);
    for (int i = 0; i < r->studies.nsweep_points; i++)
      bprintf(&s, "%.9g %.6g %.6g\n", r->studies.sweep[d][i].absmax,
              r->studies.sweep[d][i].util_max, 100 * r->studies.sweep[d][i].clipped_frac);
    bprintf(&s, "EOD\n");
  }
  bprintf(&s,
          "set title \"%s, static Q scale: utilisation max (solid) and Q clipped %% "
          "(dashed)\"\nset logscale x\nset logscale y\nset xlabel 'absmax'\n"
          "set ylabel 'utilisation max'\nset y2label 'clipped %%'\nset y2tics\nset ytics "
          "nomirror\nset y2range [0:*]\nset key outside bottom center horizontal\n"
          "set arrow from %g, graph 0 to %g, graph 1 nohead dt 2 lc rgb '#555555'\nset label "
          "\"seeds' %g\" at %g, graph 0.95 offset 0.5,0\nplot ",
          r->studies.sweep_recipe, r->studies.seeds_absmax, r->studies.seeds_absmax,
          r->studies.seeds_absmax, r->studies.seeds_absmax);
  for (int d = 0; d < r->studies.nsweep_dists; d++)
    bprintf(&s,
            "%s$s%d using 1:2 with linespoints lw 2 lc %d title '%s', $s%d using 1:3 axes x1y2 "
            "with lines dt 3 lc %d notitle",
            d ? ", " : "", d, d + 1, r->studies.sweep_dist[d], d, d + 1);
  bprintf(&s, "\n");
  return run_plot(&s, gp, 720, 420, out, err);
}

/* the error by source per recipe as 100% stacked bars: each source's share of the sum of the
 * sources' mean squares (alone: only that source rounded), the interaction beside them */
static mlr_status decomp_plot(const mlr_report *r, const char *gp, buf *out, mlr_error *err) {
  if (!r->studies.ndecomp) return MLR_OK;
  buf s = {0};
  bprintf(&s, "$d << EOD\nrecipe");
  for (int k = 0; k < MLR_NSRC; k++) bprintf(&s, " %s", mlr_source_name(k));
  bprintf(&s, " interaction\n");
  for (int i = 0; i < r->studies.ndecomp; i++) {
    const mlr_report_decomp *d = &r->studies.decomp[i];
    double sum = d->interaction_rms * d->interaction_rms;
    for (int k = 0; k < MLR_NSRC; k++) sum += d->rms[k] * d->rms[k];
    bprintf(&s, "%s", d->recipe);
    for (int k = 0; k <= MLR_NSRC; k++) {
      const double x = k < MLR_NSRC ? d->rms[k] : d->interaction_rms;
      bprintf(&s, " %.6g", sum > 0 ? 100 * x * x / sum : 0);
    }
    bprintf(&s, "\n");
  }
  bprintf(&s,
          "EOD\nset title 'error by source on %s: share of the mean square (only that source "
          "rounded)'\nset style data histograms\n"
          "set style histogram rowstacked\nset style fill solid 0.9 border -1\nset boxwidth "
          "0.7\nset yrange [0:100]\nset ylabel '%% of the sum'\n"
          "set xtics rotate by 30 right\nset key outside right top vertical\nplot ",
          r->studies.extra_shape);
  for (int k = 0; k <= MLR_NSRC; k++)
    bprintf(&s, "%s$d using %d%s title columnheader", k ? ", " : "", k + 2, k ? "" : ":xtic(1)");
  bprintf(&s, "\n");
  return run_plot(&s, gp, 820, 440, out, err);
}

/* the error histogram of every applicable cell: one bar a cell, the elements' shares per
 * utilisation bin stacked green (far under the tolerance) to red (over it) */
static mlr_status hist_plot(const mlr_report *r, const char *gp, buf *out, mlr_error *err) {
  static const char *const COLOURS[MLR_UTIL_BINS] = {"#1a9850", "#66bd63", "#a6d96a", "#d9ef8b",
                                                     "#fee08b", "#fdae61", "#f46d43", "#d73027"};
  buf s = {0};
  char lab[128];
  int n = 0;
  bprintf(&s, "$h << EOD\n");
  for (int k = 0; k < r->ncells; k++) {
    const mlr_report_cell *c = &r->cells[k];
    if (!c->applicable || c->util.n == 0) continue;
    bprintf(&s, "\"%s / %s\"", c->shape, col_label(c, lab, sizeof lab));
    for (int b = 0; b < MLR_UTIL_BINS; b++)
      bprintf(&s, " %.6g", 100.0 * (double)c->util.hist[b] / (double)c->util.n);
    bprintf(&s, "\n");
    n++;
  }
  if (!n) {
    free(s.s);
    return MLR_OK;
  }
  bprintf(&s, "EOD\nset title 'error histogram per cell: %% of elements per bin of |o - truth| / "
              "tolerance'\nset style data histograms\n"
              "set style histogram rowstacked\nset style fill solid 1.0 noborder\nset boxwidth "
              "0.9\nset yrange [0:100]\nset xtics rotate by 90 right font 'sans,7'\n"
              "set key outside right top vertical title 'bin'\nplot ");
  for (int b = 0; b < MLR_UTIL_BINS; b++)
    bprintf(&s, "%s$h using %d%s lc rgb '%s' title '[%g, %g)'", b ? ", " : "", b + 2,
            b ? "" : ":xtic(1)", COLOURS[b], mlr_util_edges[b], mlr_util_edges[b + 1]);
  bprintf(&s, "\n");
  return run_plot(&s, gp, 300 + 9 * (n > 40 ? n : 40), 560, out, err);
}

/* the trend against the baseline: utilisation max now against then per cell (log-log; on the
 * diagonal nothing moved, above it the error grew), and the GPU kernels' times likewise */
static mlr_status trend_plot(const mlr_report *r, const char *gp, buf *out, mlr_error *err) {
  buf s = {0};
  int ngpu = 0;
  bprintf(&s, "$u << EOD\n");
  for (int k = 0; k < r->ncells; k++)
    if (r->cells[k].has_base && r->cells[k].base_util_max > 0 && r->cells[k].util.max > 0)
      bprintf(&s, "%.6g %.6g %d\n", r->cells[k].base_util_max, r->cells[k].util.max,
              r->cells[k].util.max > (1 + r->margin) * r->cells[k].base_util_max);
  bprintf(&s, "EOD\n$g << EOD\n");
  for (int k = 0; k < r->ncells; k++)
    if (r->cells[k].has_base && r->cells[k].gpu && r->cells[k].base_gpu_us > 0) {
      bprintf(&s, "%.6g %.6g\n", r->cells[k].base_gpu_us, r->cells[k].gpu_us);
      ngpu++;
    }
  bprintf(&s,
          "EOD\nset multiplot layout 1,%d\nset logscale xy\nset key top left\nset title "
          "'utilisation max: baseline (x) and now (y)'\n"
          "set xlabel 'baseline'\nset ylabel 'now'\nplot $u using 1:2:($3 > 0.5 ? 7 : 2) with "
          "points pt 7 ps 0.6 lc variable title 'cells (red: regressed)', "
          "x with lines dt 2 lc rgb '#555555' title 'no change', (1 + %g) * x with lines dt 3 lc "
          "rgb '#d73027' title '+%g%%'\n",
          ngpu ? 2 : 1, r->margin, 100 * r->margin);
  if (ngpu)
    bprintf(&s, "set title 'GPU kernel time (us): baseline (x) and now (y)'\nplot $g using 1:2 "
                "with points pt 7 ps 0.6 lc rgb '#1f78b4' title 'cells', "
                "x with lines dt 2 lc rgb '#555555' title 'no change'\n");
  bprintf(&s, "unset multiplot\n");
  return run_plot(&s, gp, ngpu ? 1000 : 560, 460, out, err);
}

static void gpu_text(const mlr_report_cell *c, buf *b, int html);

/* ---- the user kernels' cells ---- */
/* the rules a kernel was held to: "fa3 pass 0.0114 / 0.0227; lse fa3 pass ..." */
static void kernel_rules_text(const mlr_report_cell *c, char *t, size_t n) {
  size_t at = 0;
  t[0] = 0;
  for (int k = 0; k < c->kernel_nchecks && at < n; k++) {
    const mlr_kernel_check *x = &c->kernel_checks[k];
    at += (size_t)snprintf(t + at, n - at, "%s%s%s %s %.4g / %.4g", k ? "; " : "",
                           strcmp(x->tensor, "o") ? "lse " : "", x->rule, x->verdict, x->measured,
                           x->limit);
  }
}

/* a kernel cell's verdict as the tables show it */
static const char *kernel_verdict_text(const mlr_report_cell *c) {
  return !c->applicable                         ? "n/a"
         : c->kernel_verdict == MLR_KERNEL_PASS ? "pass"
         : c->kernel_verdict == MLR_KERNEL_FAIL ? "FAIL"
         : c->kernel_verdict == MLR_KERNEL_SKIP ? "skipped"
                                                : "ERROR";
}

/* where a kernel cell goes in its table: failures and errors (0), then skipped cells (1), then
 * the passes and n/a (2) */
static int kernel_rank(const mlr_report_cell *c) {
  return mlr_report_cell_skipped(c) ? 1 : c->pass ? 2 : 0;
}

/* the counts of the kernel cells: all, failed, errors, skipped */
static void kernel_counts(const mlr_report *r, int *n, int *failed, int *errors, int *skipped) {
  *n = *failed = *errors = *skipped = 0;
  for (int k = 0; k < r->ncells; k++) {
    const mlr_report_cell *c = &r->cells[k];
    if (!c->kernel[0]) continue;
    (*n)++;
    *failed += c->applicable && c->kernel_verdict == MLR_KERNEL_FAIL;
    *errors += c->applicable && c->kernel_verdict == MLR_KERNEL_ERROR;
    *skipped += mlr_report_cell_skipped(c);
  }
}

/* a kernel cell's rules (measured / limit) and its utilisation ("" without an output), as both
 * tables show them */
static void kernel_row_texts(const mlr_report_cell *c, char rules[640], char util[32]) {
  kernel_rules_text(c, rules, 640);
  util[0] = 0;
  if (c->o_sha[0]) snprintf(util, 32, "%.4g", c->util.max);
}

/* text in a Markdown table cell: a '|' escaped */
static void bmd(buf *b, const char *s) {
  for (; *s; s++) bprintf(b, *s == '|' ? "\\|" : "%c", *s);
}

static void kernels_md(const mlr_report *r, buf *b) {
  int n, failed, errors, skipped;
  kernel_counts(r, &n, &failed, &errors, &skipped);
  if (!n) return;
  bprintf(b,
          "\n## Kernels: %d cells, %d failed, %d errors, %d skipped\n\n| shape | kernel | recipe @ "
          "policy | "
          "verdict | rules (measured / limit) | util max | o digest | reason |\n"
          "| --- | --- | --- | --- | --- | ---: | --- | --- |\n",
          n, failed, errors, skipped);
  for (int rank = 0; rank < 3; rank++) /* failures and errors first, then the skipped cells */
    for (int k = 0; k < r->ncells; k++) {
      const mlr_report_cell *c = &r->cells[k];
      if (!c->kernel[0] || kernel_rank(c) != rank) continue;
      char rules[640], util[32];
      kernel_row_texts(c, rules, util);
      bprintf(b, "| %s | %s | %s @ %s | %s | ", c->shape, c->kernel, c->recipe, c->policy,
              kernel_verdict_text(c));
      bmd(b, rules);
      bprintf(b, " | %s | %.16s | ", util, c->o_sha);
      bmd(b, c->applicable ? c->kernel_reason : c->reason);
      bprintf(b, " |\n");
    }
}

/* ---- summary.md ---- */
/* a merged run's shards (estimated cost against measured time) and the cells it lacks */
static void shards_md(const mlr_report *r, buf *b) {
  if (!r->nshards) return;
  bprintf(b,
          "## Shards: %d merged, %d missing\n\n| shard | from | estimated cost | measured s |\n"
          "| ---: | --- | ---: | ---: |\n",
          r->nshards, r->nmissing);
  for (int k = 0; k < r->nshards; k++)
    bprintf(b, "| %d | %s | %.0f | %.1f |\n", r->shards[k].i, r->shards[k].from, r->shards[k].cost,
            r->shards[k].seconds);
  if (r->nmissing) bprintf(b, "\nMissing (the run is incomplete):\n\n");
  for (int k = 0; k < r->nmissing; k++) bprintf(b, "- %s\n", r->missing[k]);
  bprintf(b, "\n");
}

static void markdown(const mlr_report *r, buf *b) {
  bprintf(b,
          "# mlaref report: suite %s%s\n\nmlaref %s; %d cells; tolerance rtol %g, atol %g; truth: "
          "certified, dequantized KV\n\n",
          r->suite, r->quick ? " (quick)" : "", r->version, r->ncells, r->rtol, r->atol);
  bprintf(b, "## Regressions against the baseline%s%s\n\n", r->baseline[0] ? " " : "", r->baseline);
  if (!r->baseline[0])
    bprintf(b, "No baseline given.\n\n");
  else if (!r->nregressions)
    bprintf(b, "None.\n\n");
  for (int k = 0; k < r->nregressions; k++) bprintf(b, "- %s\n", r->regressions[k]);
  if (r->nregressions) bprintf(b, "\n");
  shards_md(r, b);
  int nk, kfailed, kerrors, kskipped;
  kernel_counts(r, &nk, &kfailed, &kerrors, &kskipped);
  /* this table holds the recipe columns' cells; the kernels' failures are in their own table */
  bprintf(b, "## Failures: %d", r->nfailures);
  if (kfailed + kerrors) bprintf(b, " (%d in the kernels' cells, below)", kfailed + kerrors);
  bprintf(b, "\n\n| shape | recipe | golden | util max | util p99.9 | rel L2 | bound "
             "(max ratio) | GPU kernel | verdict |\n"
             "| --- | --- | --- | ---: | ---: | ---: | --- | --- | --- |\n");
  for (int pass = 0; pass < 2; pass++) /* failures first */
    for (int k = 0; k < r->ncells; k++) {
      const mlr_report_cell *c = &r->cells[k];
      if (c->pass != pass || c->kernel[0]) continue;
      char lab[128];
      col_label(c, lab, sizeof lab);
      if (!c->applicable) {
        bprintf(b, "| %s | %s | n/a | | | | | | n/a |\n", c->shape, lab);
        continue;
      }
      char was[48] = "";
      if (c->has_base) snprintf(was, sizeof was, " (baseline %.4g)", c->base_util_max);
      bprintf(b, "| %s | %s | %s | %.4g%s | %.4g | %.3g%% | %s (%.3g) | ", c->shape, lab, c->golden,
              c->util.max, was, c->util.p999, 100 * c->rel_l2,
              !c->bound_computed ? "not computed"
              : c->bound_holds   ? "holds"
                                 : "VIOLATED",
              c->bound_max_ratio);
      gpu_text(c, b, 0);
      bprintf(b, " | %s |\n", c->pass ? "pass" : "FAIL");
    }
  kernels_md(r, b);
  if (r->studies.disc_done) {
    bprintf(b,
            "\n## Discrimination (%s on %s; FAIL: the rule catches the wrong kernel)\n\n| wrong "
            "kernel |",
            r->studies.disc_recipe, r->studies.extra_shape);
    for (int q = 0; q < MLR_DISC_RULES; q++) bprintf(b, " %s |", mlr_disc_rules[q]);
    bprintf(b, "\n| --- |");
    for (int q = 0; q < MLR_DISC_RULES; q++) bprintf(b, " --- |");
    bprintf(b, "\n");
    for (int k = 0; k < MLR_DISC_WRONG; k++) {
      bprintf(b, "| %s |", mlr_disc_wrong_name(k));
      for (int q = 0; q < MLR_DISC_RULES; q++)
        bprintf(b, " %s |",
                r->studies.disc[k][q] < 0 ? "no effect"
                : r->studies.disc[k][q]   ? "FAIL"
                                          : "passes");
      bprintf(b, "\n");
    }
  }
}

/* a cell's GPU leg in a few words (html: escaped) */
static void gpu_text(const mlr_report_cell *c, buf *b, int html) {
  char t[512];
  if (c->gpu && c->gpu_note[0])
    snprintf(t, sizeof t, "%s: ERROR %s", c->gpu_kernel, c->gpu_note);
  else if (c->gpu) {
    char base[40] = "";
    if (c->has_base && c->base_gpu_us > 0)
      snprintf(base, sizeof base, " (baseline %.1f us)", c->base_gpu_us);
    snprintf(t, sizeof t, "%s %.1f us%s, %.2f%% bit-identical, util max %.3g%s: %s", c->gpu_kernel,
             c->gpu_us, base, 100 * c->gpu_identical, c->gpu_util.max,
             !strcmp(c->gpu_kernel, "fast")
                 ? (c->gpu_bound_holds ? ", bound holds" : ", bound not held or not computed")
                 : "",
             c->gpu_pass ? "pass" : "FAIL");
  } else if (c->gpu_note[0])
    snprintf(t, sizeof t, "not run: %s", c->gpu_note);
  else
    snprintf(t, sizeof t, "-");
  if (html)
    bhtml(b, t);
  else
    bprintf(b, "%s", t);
}

/* the decomposition, the discrimination table and the GPU leg's summary */
static mlr_status extras_html(const mlr_report *r, const char *gp, buf *b, mlr_error *err) {
  mlr_status st = MLR_OK;
  if (r->studies.ndecomp) {
    bprintf(b, "<h2>Error by source</h2>\n<p>Each recipe on ");
    bhtml(b, r->studies.extra_shape);
    bprintf(b, " against the certified truth: the RMS error with only one source of rounding "
               "switched on (ref/budget's decomposition); the bars "
               "show each source's share of the sum of their mean squares.</p>\n");
    st = decomp_plot(r, gp, b, err);
    bprintf(b, "<table><tr><th>recipe</th>");
    for (int k = 0; k < MLR_NSRC; k++) bprintf(b, "<th>%s</th>", mlr_source_name(k));
    bprintf(b, "<th>interaction</th><th>total</th><th>truth RMS</th></tr>\n");
    for (int i = 0; i < r->studies.ndecomp; i++) {
      const mlr_report_decomp *d = &r->studies.decomp[i];
      bprintf(b, "<tr><td>");
      bhtml(b, d->recipe);
      bprintf(b, "</td>");
      for (int k = 0; k < MLR_NSRC; k++)
        if (d->present >> k & 1u)
          bprintf(b, "<td>%.3g</td>", d->rms[k]);
        else
          bprintf(b, "<td>-</td>");
      bprintf(b, "<td>%.3g</td><td>%.3g</td><td>%.3g</td></tr>\n", d->interaction_rms, d->total_rms,
              d->truth_rms);
    }
    bprintf(b, "</table>\n");
  }
  if (r->studies.disc_done) {
    bprintf(b, "<h2>Discrimination</h2>\n<p>Wrong kernels made from ");
    bhtml(b, r->studies.disc_recipe);
    bprintf(b, " on ");
    bhtml(b, r->studies.extra_shape);
    bprintf(
        b,
        ", judged by each rule against the recipe's model and the certified truth (FAIL: the rule "
        "catches it; no effect: the "
        "mutation leaves this kernel's output unchanged on this shape). The model itself %s.</p>\n"
        "<table><tr><th>wrong kernel</th>",
        r->studies.disc_model_ok ? "passes the default rules and its bound"
                                 : "<b>does not pass the default rules and its bound</b>");
    for (int q = 0; q < MLR_DISC_RULES; q++) bprintf(b, "<th>%s</th>", mlr_disc_rules[q]);
    bprintf(b, "</tr>\n");
    for (int k = 0; k < MLR_DISC_WRONG; k++) {
      bprintf(b, "<tr><td>");
      bhtml(b, mlr_disc_wrong_name(k));
      bprintf(b, "</td>");
      for (int q = 0; q < MLR_DISC_RULES; q++)
        bprintf(b, "<td%s>%s</td>", r->studies.disc[k][q] ? "" : " class=\"fail\"",
                r->studies.disc[k][q] < 0 ? "no effect"
                : r->studies.disc[k][q]   ? "FAIL"
                                          : "passes");
      bprintf(b, "</tr>\n");
    }
    bprintf(b, "</table>\n");
  }
  bprintf(b, "<h2>GPU leg</h2>\n<p>");
  if (r->gpu_mode == MLR_REPORT_GPU_OFF)
    bprintf(b, "Off (--gpu off).");
  else if (!r->gpu_device[0])
    bprintf(b, "No GPU found (--gpu auto): the report is the CPU's alone.");
  else {
    int ran = 0, pass = 0;
    for (int k = 0; k < r->ncells; k++) {
      ran += r->cells[k].gpu;
      pass += r->cells[k].gpu && r->cells[k].gpu_pass;
    }
    bprintf(b, "On ");
    bhtml(b, r->gpu_device);
    bprintf(b,
            ": %d cells ran a GPU kernel, %d passed (exact kernel: bit-identical to the model; "
            "fast kernel: within the bound where computed and fa3 "
            "against its recipe's model). Times: fast, the median of the launches with L2 flushed "
            "before each; exact, one run of its stages.",
            ran, pass);
  }
  bprintf(b, "</p>\n");
  return st;
}

/* ---- index.html ---- */
/* the page's head, title and the regressions against the baseline */
static void html_head(const mlr_report *r, buf *b) {
  bprintf(
      b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mlaref report: ");
  bhtml(b, r->suite);
  bprintf(b, "</"
             "title>\n<style>body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-"
             "collapse:collapse;font-size:12px}"
             "td,th{border:1px solid #ccc;padding:2px "
             "6px;text-align:right}td:first-child,td:nth-child(2){text-align:left}"
             ".fail{background:#f8d7da}.reg{color:#a00;font-weight:bold}svg{max-width:100%%;height:"
             "auto}</style></head><body>\n");
  bprintf(b, "<h1>mlaref report: suite ");
  bhtml(b, r->suite);
  int nk, kfailed, kerrors, kskipped;
  kernel_counts(r, &nk, &kfailed, &kerrors, &kskipped);
  bprintf(b,
          "%s</h1>\n<p>mlaref %s; %d cells; tolerance rtol %g, atol %g; truth: certified, from the "
          "dequantized KV. Failures: %d",
          r->quick ? " (quick)" : "", r->version, r->ncells, r->rtol, r->atol, r->nfailures);
  if (kfailed + kerrors) bprintf(b, " (%d in the kernels' cells)", kfailed + kerrors);
  bprintf(b, "; %d skipped.</p>\n", r->nskipped);
  bprintf(b, "<h2>Regressions against the baseline</h2>\n");
  if (!r->baseline[0])
    bprintf(b, "<p>No baseline given.</p>\n");
  else if (!r->nregressions)
    bprintf(b, "<p>None (baseline %s).</p>\n", r->baseline);
  else {
    bprintf(b, "<ul>\n");
    for (int k = 0; k < r->nregressions; k++) {
      bprintf(b, "<li class=\"reg\">");
      bhtml(b, r->regressions[k]);
      bprintf(b, "</li>\n");
    }
    bprintf(b, "</ul>\n");
  }
  if (r->nmissing) {
    bprintf(b, "<h2>Missing cells: %d (shards not given; the run is incomplete)</h2>\n<ul>\n",
            r->nmissing);
    for (int k = 0; k < r->nmissing; k++) {
      bprintf(b, "<li class=\"reg\">");
      bhtml(b, r->missing[k]);
      bprintf(b, "</li>\n");
    }
    bprintf(b, "</ul>\n");
  }
}

/* the static Q scale's section: its plot and its table */
static mlr_status html_sweep(const mlr_report *r, const char *gp, buf *b, mlr_error *err) {
  bprintf(b, "<h2>The static Q scale</h2>\n<p>");
  bhtml(b, r->studies.sweep_recipe);
  bprintf(b, " on ");
  bhtml(b, r->studies.sweep_shape);
  bprintf(b, ", each Q distribution; the seeds' absmax %g marked.</p>\n", r->studies.seeds_absmax);
  const mlr_status st = sweep_plot(r, gp, b, err);
  bprintf(b, "<table><tr><th>distribution</th><th>absmax</th><th>clipped %%</th><th>util "
             "max</th><th>util p99.9</th><th>rel L2 %%</th></tr>\n");
  for (int d = 0; d < r->studies.nsweep_dists; d++)
    for (int i = 0; i < r->studies.nsweep_points; i++) {
      const mlr_report_sweep_point *p = &r->studies.sweep[d][i];
      bprintf(b,
              "<tr><td>%s</td><td>%.4g</td><td>%.4g</td><td>%.4g</td><td>%.4g</td><td>%.4g</td></"
              "tr>\n",
              r->studies.sweep_dist[d], p->absmax, 100 * p->clipped_frac, p->util_max, p->util_p999,
              100 * p->rel_l2);
    }
  bprintf(b, "</table>\n");
  return st;
}

/* the cells' table: the failures first */
static void html_cells(const mlr_report *r, buf *b) {
  bprintf(b, "<table><tr><th>shape</th><th>recipe</th><th>golden</th><th>util "
             "max</th><th>p99.9</th><th>rel L2 %%</th><th>bound</th><th>histogram</th>"
             "<th>GPU kernel</th><th>verdict</th></tr>\n");
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < r->ncells; k++) {
      const mlr_report_cell *c = &r->cells[k];
      if (c->pass != pass || c->kernel[0]) continue;
      bprintf(b, "<tr%s><td>", c->pass ? "" : " class=\"fail\"");
      bhtml(b, c->shape);
      bprintf(b, "</td><td>");
      char lab[128];
      bhtml(b, col_label(c, lab, sizeof lab));
      if (!c->applicable) {
        bprintf(b, "</td><td colspan=\"8\" style=\"text-align:left\">n/a: ");
        bhtml(b, c->reason);
        bprintf(b, "</td></tr>\n");
        continue;
      }
      char was[48] = "";
      if (c->has_base) snprintf(was, sizeof was, " (baseline %.4g)", c->base_util_max);
      bprintf(b, "</td><td>%s</td><td>%.4g%s</td><td>%.4g</td><td>%.3g</td><td>%s %.3g</td><td>",
              c->golden, c->util.max, was, c->util.p999, 100 * c->rel_l2,
              !c->bound_computed ? "not computed"
              : c->bound_holds   ? "holds"
                                 : "VIOLATED",
              c->bound_max_ratio);
      for (int h = 0; h < MLR_UTIL_BINS; h++)
        bprintf(b, "%s%lld", h ? " " : "", (long long)c->util.hist[h]);
      bprintf(b, "</td><td>");
      gpu_text(c, b, 1);
      bprintf(b, "</td><td>%s</td></tr>\n", c->pass ? "pass" : "FAIL");
    }
  bprintf(b, "</table>\n");
}

/* the kernels' table: the failures and errors first */
static void html_kernels(const mlr_report *r, buf *b) {
  int n, failed, errors, skipped;
  kernel_counts(r, &n, &failed, &errors, &skipped);
  if (!n) return;
  bprintf(b,
          "<h2>Kernels</h2>\n<p>%d cells, %d failed, %d errors, %d skipped (the kernel declined "
          "the cell: neither passed nor failed): each kernel's output checked "
          "against the model of the recipe it claims and the certified truth.</p>\n<table><tr>"
          "<th>shape</th><th>kernel</th><th>recipe @ policy</th><th>verdict</th><th>rules "
          "(measured / limit)</th><th>util max</th><th>o digest</th><th>reason</th></tr>\n",
          n, failed, errors, skipped);
  for (int rank = 0; rank < 3; rank++)
    for (int k = 0; k < r->ncells; k++) {
      const mlr_report_cell *c = &r->cells[k];
      if (!c->kernel[0] || kernel_rank(c) != rank) continue;
      char rules[640], util[32];
      kernel_row_texts(c, rules, util);
      bprintf(b, "<tr%s><td>", rank ? "" : " class=\"fail\"");
      const char *cols[] = {c->shape, c->kernel, c->recipe};
      for (int i = 0; i < 3; i++) {
        bhtml(b, cols[i]);
        bprintf(b, "%s", i < 2 ? "</td><td>" : " @ ");
      }
      bhtml(b, c->policy);
      bprintf(b, "</td><td>%s</td><td>", kernel_verdict_text(c));
      bhtml(b, rules);
      bprintf(b, "</td><td>%s</td><td>%.16s</td><td style=\"text-align:left\">", util, c->o_sha);
      bhtml(b, c->applicable ? c->kernel_reason : c->reason);
      bprintf(b, "</td></tr>\n");
    }
  bprintf(b, "</table>\n");
}

static mlr_status html(const mlr_report *r, const char *gp, buf *b, mlr_error *err) {
  html_head(r, b);
  int nbase = 0;
  for (int k = 0; k < r->ncells; k++)
    nbase += r->cells[k].has_base && r->cells[k].base_util_max > 0 && r->cells[k].util.max > 0;
  mlr_status st = MLR_OK;
  if (nbase) {
    bprintf(b, "<h2>Trend against the baseline</h2>\n");
    st = trend_plot(r, gp, b, err);
  }
  bprintf(b, "<h2>Budget utilisation, shapes x recipes (x Q policies)</h2>\n<p>A column named "
             "<i>recipe @ policy</i> is the recipe with its Q "
             "scale policy replaced (the policy axis:");
  for (int k = 0; k < r->npolicies; k++) bprintf(b, " %s", r->policies[k]);
  bprintf(b, ").%s</p>\n",
          r->nkernels ? " A column named <i>kernel NAME</i> is a user kernel's output (blank: it "
                        "wrote none that could be checked)."
                      : "");
  if (st == MLR_OK) st = heatmap(r, gp, b, err);
  if (st == MLR_OK && r->studies.nsweep_dists) st = html_sweep(r, gp, b, err);
  if (st == MLR_OK) st = extras_html(r, gp, b, err);
  bprintf(b, "<h2>Cells</h2>\n<p>Utilisation histogram: elements per bin of |o - truth| / "
             "tolerance, edges");
  for (int k = 0; k <= MLR_UTIL_BINS; k++) bprintf(b, " %g", mlr_util_edges[k]);
  bprintf(b, ".</p>\n");
  if (st == MLR_OK) st = hist_plot(r, gp, b, err);
  html_cells(r, b);
  html_kernels(r, b);
  bprintf(b, "</body></html>\n");
  return st == MLR_OK && b->oom ? mlr_error_set(err, MLR_ENOMEM, "out of memory for the page") : st;
}

mlr_status mlr_report_write(const mlr_report *r, const char *dir, const char *gnuplot_cmd,
                            mlr_error *err) {
  buf md = {0}, page = {0};
  char *js = summary_json(r);
  mlr_status st = js ? MLR_OK : mlr_error_set(err, MLR_ENOMEM, "out of memory for summary.json");
  if (st == MLR_OK)
    st = html(r, gnuplot_cmd, &page, err); /* the plots first: a missing tool writes nothing */
  if (st == MLR_OK) markdown(r, &md);
  if (st == MLR_OK && md.oom) st = mlr_error_set(err, MLR_ENOMEM, "out of memory for summary.md");
  if (st == MLR_OK) st = write_file(dir, "summary.json", js, strlen(js), err);
  if (st == MLR_OK) st = write_file(dir, "summary.md", md.s, md.n, err);
  if (st == MLR_OK) st = write_file(dir, "index.html", page.s, page.n, err);
  free(js);
  free(md.s);
  free(page.s);
  return st;
}

mlr_status mlr_report_finish(mlr_report *rep, const mlr_report *base, const char *path,
                             const char *dir, const char *gnuplot_cmd, mlr_error *err) {
  const mlr_status st = base ? mlr_report_compare(rep, base, path, err) : MLR_OK;
  return st == MLR_OK ? mlr_report_write(rep, dir, gnuplot_cmd, err) : st;
}

int mlr_report_exit_code(const mlr_report *rep) {
  return rep->nfailures || rep->nregressions || rep->nmissing ? 1 : 0;
}
