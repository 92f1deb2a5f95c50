/* The report's files (mlr_report.h): summary.json, summary.md and index.html, the plots drawn by
 * gnuplot's SVG terminal and inlined, so the page needs nothing but itself. Each file is written
 * atomically (fixtures/io: temporary file, fsync, rename). */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixtures/io/mlr_tensor.h"
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
    if (k < 0) { b->oom = 1; return; }
    if (b->s && b->n + (size_t)k < b->cap) { b->n += (size_t)k; return; }
    const size_t cap = (b->cap + (size_t)k + 1) * 2;
    char *ns = realloc(b->s, cap);
    if (!ns) { b->oom = 1; return; }
    b->s = ns, b->cap = cap;
  }
}

/* text escaped for HTML */
static void bhtml(buf *b, const char *s) {
  for (; *s; s++) {
    if (*s == '<') bprintf(b, "&lt;");
    else if (*s == '>') bprintf(b, "&gt;");
    else if (*s == '&') bprintf(b, "&amp;");
    else if (*s == '"') bprintf(b, "&quot;");
    else bprintf(b, "%c", *s);
  }
}

static mlr_status write_file(const char *dir, const char *name, const char *text, size_t n, mlr_error *err) {
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
static json_t *cell_json(const mlr_report_cell *c) {
  json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:b,s:b}", "shape", c->shape, "spec", c->spec, "recipe", c->recipe, "recipe_sha256", c->recipe_sha, "applicable",
                        c->applicable, "pass", c->pass);
  if (!c->applicable) {
    json_object_set_new(o, "reason", json_string(c->reason));
    return o;
  }
  json_t *hist = json_array();
  for (int k = 0; k < MLR_UTIL_BINS; k++) json_array_append_new(hist, json_integer(c->util.hist[k]));
  json_object_set_new(o, "o_sha256", json_string(c->o_sha));
  json_object_set_new(o, "golden", json_string(c->golden));
  json_object_set_new(o, "utilisation", json_pack("{s:f,s:f,s:f,s:f,s:I,s:I,s:o}", "max", c->util.max, "p999", c->util.p999, "p99", c->util.p99, "p50",
                                                  c->util.p50, "n", (json_int_t)c->util.n, "over", (json_int_t)c->util.over, "hist", hist));
  json_object_set_new(o, "rel_l2", json_real(c->rel_l2));
  json_object_set_new(o, "bound", c->bound_computed ? json_pack("{s:b,s:b,s:f}", "computed", 1, "holds", c->bound_holds, "max_ratio", c->bound_max_ratio)
                                                    : json_pack("{s:b}", "computed", 0));
  return o;
}

static char *summary_json(const mlr_report *r) {
  json_t *cells = json_array(), *edges = json_array(), *regs = json_array(), *sweep = json_array();
  for (int k = 0; k < r->ncells; k++) json_array_append_new(cells, cell_json(&r->cells[k]));
  for (int k = 0; k <= MLR_UTIL_BINS; k++) json_array_append_new(edges, isinf(mlr_util_edges[k]) ? json_null() : json_real(mlr_util_edges[k]));
  for (int k = 0; k < r->nregressions; k++) json_array_append_new(regs, json_string(r->regressions[k]));
  for (int d = 0; d < r->nsweep_dists; d++) {
    json_t *pts = json_array();
    for (int i = 0; i < r->nsweep_points; i++) {
      const mlr_report_sweep_point *p = &r->sweep[d][i];
      json_array_append_new(pts, json_pack("{s:f,s:f,s:f,s:f,s:f}", "absmax", p->absmax, "clipped_fraction", p->clipped_frac, "util_max", p->util_max,
                                           "util_p999", p->util_p999, "rel_l2", p->rel_l2));
    }
    json_array_append_new(sweep, json_pack("{s:s,s:o}", "distribution", r->sweep_dist[d], "points", pts));
  }
  json_t *root = json_pack("{s:s,s:s,s:s,s:b,s:{s:f,s:f},s:f,s:o,s:o,s:{s:s,s:s,s:f,s:o},s:o,s:i,s:s}", "schema", MLR_REPORT_SCHEMA,
                           "mlaref_version", r->version, "suite", r->suite, "quick", r->quick, "tolerance", "rtol", r->rtol, "atol", r->atol,
                           "margin", r->margin, "hist_edges", edges, "cells", cells, "sweep", "recipe", r->sweep_recipe, "shape", r->sweep_shape,
                           "seeds_absmax", r->seeds_absmax, "distributions", sweep, "regressions", regs, "failures", r->nfailures, "baseline",
                           r->baseline);
  char *s = root ? json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) : NULL;
  json_decref(root);
  return s;
}

/* ---- plots: gnuplot's SVG terminal, read back to be inlined ---- */
static mlr_status plot(const char *gnuplot_cmd, const char *script, buf *out, mlr_error *err) {
  char svg[64], cmd[4200];
  snprintf(svg, sizeof svg, "/tmp/mlr_report_%ld.svg", (long)getpid());
  snprintf(cmd, sizeof cmd, "%s 2>/dev/null", gnuplot_cmd);
  FILE *g = popen(cmd, "w");
  if (!g) return mlr_error_set(err, MLR_EIO, "cannot run the plotting tool '%s'", gnuplot_cmd);
  fprintf(g, "set terminal svg size 720,420 dynamic noenhanced font 'sans,11' background '#ffffff'\nset output '%s'\n%s\nunset output\n", svg, script);
  if (pclose(g) != 0) {
    remove(svg);
    return mlr_error_set(err, MLR_EIO, "the plotting tool '%s' failed (is gnuplot installed? scripts/setup.sh installs gnuplot-nox)", gnuplot_cmd);
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

/* the heatmap of utilisation max, shapes x recipes (n/a cells blank) */
static mlr_status heatmap(const mlr_report *r, const char *gp, buf *out, mlr_error *err) {
  char shapes[256][64], recipes[32][64];
  int ns = 0, nr = 0;
  for (int k = 0; k < r->ncells; k++) {
    int i;
    for (i = 0; i < ns && strcmp(shapes[i], r->cells[k].shape); i++) {}
    if (i == ns && ns < 256) snprintf(shapes[ns++], 64, "%s", r->cells[k].shape);
    for (i = 0; i < nr && strcmp(recipes[i], r->cells[k].recipe); i++) {}
    if (i == nr && nr < 32) snprintf(recipes[nr++], 64, "%s", r->cells[k].recipe);
  }
  buf s = {0};
  bprintf(&s, "$d << EOD\n");
  for (int k = 0; k < r->ncells; k++) {
    const mlr_report_cell *c = &r->cells[k];
    int x = 0, y = 0;
    while (strcmp(recipes[x], c->recipe)) x++;
    while (strcmp(shapes[y], c->shape)) y++;
    if (c->applicable) bprintf(&s, "%d %d %.6g\n", x, y, c->util.max);
  }
  bprintf(&s, "EOD\nset title 'budget utilisation max |o - truth| / (%g + %g |truth|)'\nset xrange [-0.5:%d.5]\nset yrange [-0.5:%d.5] reverse\n", r->atol, r->rtol,
          nr - 1, ns - 1);
  bprintf(&s, "set xtics rotate by 30 right (");
  for (int i = 0; i < nr; i++) bprintf(&s, "%s'%s' %d", i ? ", " : "", recipes[i], i);
  bprintf(&s, ")\nset ytics (");
  for (int i = 0; i < ns; i++) bprintf(&s, "%s'%s' %d", i ? ", " : "", shapes[i], i);
  bprintf(&s, ")\nset logscale cb\nset cbrange [0.01:100]\nset palette defined (0 '#1a9850', 0.5 '#ffffbf', 1 '#d73027')\nunset key\n"
              "plot $d using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 noborder fc palette notitle, "
              "$d using 1:2:(sprintf('%%.2g',$3)) with labels font 'sans,8' notitle\n");
  mlr_status st = s.oom ? mlr_error_set(err, MLR_ENOMEM, "out of memory") : plot(gp, s.s, out, err);
  free(s.s);
  return st;
}

/* the static-scale sweep: utilisation max against absmax per distribution, clipped % on y2 */
static mlr_status sweep_plot(const mlr_report *r, const char *gp, buf *out, mlr_error *err) {
  buf s = {0};
  for (int d = 0; d < r->nsweep_dists; d++) {
    bprintf(&s, "$s%d << EOD\n", d);
    for (int i = 0; i < r->nsweep_points; i++)
      bprintf(&s, "%.9g %.6g %.6g\n", r->sweep[d][i].absmax, r->sweep[d][i].util_max, 100 * r->sweep[d][i].clipped_frac);
    bprintf(&s, "EOD\n");
  }
  bprintf(&s, "set title \"%s, static Q scale: utilisation max (solid) and Q clipped %% (dashed)\"\nset logscale x\nset logscale y\nset xlabel 'absmax'\n"
              "set ylabel 'utilisation max'\nset y2label 'clipped %%'\nset y2tics\nset ytics nomirror\nset y2range [0:*]\nset key outside bottom center horizontal\n"
              "set arrow from %g, graph 0 to %g, graph 1 nohead dt 2 lc rgb '#555555'\nset label \"seeds' %g\" at %g, graph 0.95 offset 0.5,0\nplot ",
          r->sweep_recipe, r->seeds_absmax, r->seeds_absmax, r->seeds_absmax, r->seeds_absmax);
  for (int d = 0; d < r->nsweep_dists; d++)
    bprintf(&s, "%s$s%d using 1:2 with linespoints lw 2 lc %d title '%s', $s%d using 1:3 axes x1y2 with lines dt 3 lc %d notitle", d ? ", " : "", d, d + 1,
            r->sweep_dist[d], d, d + 1);
  bprintf(&s, "\n");
  mlr_status st = s.oom ? mlr_error_set(err, MLR_ENOMEM, "out of memory") : plot(gp, s.s, out, err);
  free(s.s);
  return st;
}

/* ---- summary.md ---- */
static void markdown(const mlr_report *r, buf *b) {
  bprintf(b, "# mlaref report: suite %s%s\n\nmlaref %s; %d cells; tolerance rtol %g, atol %g; truth: certified, dequantized KV\n\n", r->suite,
          r->quick ? " (quick)" : "", r->version, r->ncells, r->rtol, r->atol);
  bprintf(b, "## Regressions against the baseline%s%s\n\n", r->baseline[0] ? " " : "", r->baseline);
  if (!r->baseline[0]) bprintf(b, "No baseline given.\n\n");
  else if (!r->nregressions) bprintf(b, "None.\n\n");
  for (int k = 0; k < r->nregressions; k++) bprintf(b, "- %s\n", r->regressions[k]);
  if (r->nregressions) bprintf(b, "\n");
  bprintf(b, "## Failures: %d\n\n| shape | recipe | golden | util max | util p99.9 | rel L2 | bound (max ratio) | verdict |\n| --- | --- | --- | ---: | ---: | ---: | --- | --- |\n",
          r->nfailures);
  for (int pass = 0; pass < 2; pass++) /* failures first */
    for (int k = 0; k < r->ncells; k++) {
      const mlr_report_cell *c = &r->cells[k];
      if (c->pass != pass) continue;
      if (!c->applicable) bprintf(b, "| %s | %s | n/a | | | | | n/a |\n", c->shape, c->recipe);
      else
        bprintf(b, "| %s | %s | %s | %.4g | %.4g | %.3g%% | %s (%.3g) | %s |\n", c->shape, c->recipe, c->golden, c->util.max, c->util.p999, 100 * c->rel_l2,
                !c->bound_computed ? "not computed" : c->bound_holds ? "holds" : "VIOLATED", c->bound_max_ratio, c->pass ? "pass" : "FAIL");
    }
}

/* ---- index.html ---- */
static mlr_status html(const mlr_report *r, const char *gp, buf *b, mlr_error *err) {
  bprintf(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mlaref report: ");
  bhtml(b, r->suite);
  bprintf(b, "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;font-size:12px}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child,td:nth-child(2){text-align:left}"
             ".fail{background:#f8d7da}.reg{color:#a00;font-weight:bold}svg{max-width:100%%;height:auto}</style></head><body>\n");
  bprintf(b, "<h1>mlaref report: suite ");
  bhtml(b, r->suite);
  bprintf(b, "%s</h1>\n<p>mlaref %s; %d cells; tolerance rtol %g, atol %g; truth: certified, from the dequantized KV. Failures: %d.</p>\n",
          r->quick ? " (quick)" : "", r->version, r->ncells, r->rtol, r->atol, r->nfailures);
  bprintf(b, "<h2>Regressions against the baseline</h2>\n");
  if (!r->baseline[0]) bprintf(b, "<p>No baseline given.</p>\n");
  else if (!r->nregressions) bprintf(b, "<p>None (baseline %s).</p>\n", r->baseline);
  else {
    bprintf(b, "<ul>\n");
    for (int k = 0; k < r->nregressions; k++) {
      bprintf(b, "<li class=\"reg\">");
      bhtml(b, r->regressions[k]);
      bprintf(b, "</li>\n");
    }
    bprintf(b, "</ul>\n");
  }
  bprintf(b, "<h2>Budget utilisation, shapes x recipes</h2>\n");
  mlr_status st = heatmap(r, gp, b, err);
  if (st == MLR_OK && r->nsweep_dists) {
    bprintf(b, "<h2>The static Q scale</h2>\n<p>");
    bhtml(b, r->sweep_recipe);
    bprintf(b, " on ");
    bhtml(b, r->sweep_shape);
    bprintf(b, ", each Q distribution; the seeds' absmax %g marked.</p>\n", r->seeds_absmax);
    st = sweep_plot(r, gp, b, err);
    bprintf(b, "<table><tr><th>distribution</th><th>absmax</th><th>clipped %%</th><th>util max</th><th>util p99.9</th><th>rel L2 %%</th></tr>\n");
    for (int d = 0; d < r->nsweep_dists; d++)
      for (int i = 0; i < r->nsweep_points; i++) {
        const mlr_report_sweep_point *p = &r->sweep[d][i];
        bprintf(b, "<tr><td>%s</td><td>%.4g</td><td>%.4g</td><td>%.4g</td><td>%.4g</td><td>%.4g</td></tr>\n", r->sweep_dist[d], p->absmax,
                100 * p->clipped_frac, p->util_max, p->util_p999, 100 * p->rel_l2);
      }
    bprintf(b, "</table>\n");
  }
  bprintf(b, "<h2>Cells</h2>\n<p>Utilisation histogram: elements per bin of |o - truth| / tolerance, edges");
  for (int k = 0; k <= MLR_UTIL_BINS; k++) bprintf(b, " %g", mlr_util_edges[k]);
  bprintf(b, ".</p>\n<table><tr><th>shape</th><th>recipe</th><th>golden</th><th>util max</th><th>p99.9</th><th>rel L2 %%</th><th>bound</th><th>histogram</th><th>verdict</th></tr>\n");
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < r->ncells; k++) {
      const mlr_report_cell *c = &r->cells[k];
      if (c->pass != pass) continue;
      bprintf(b, "<tr%s><td>", c->pass ? "" : " class=\"fail\"");
      bhtml(b, c->shape);
      bprintf(b, "</td><td>");
      bhtml(b, c->recipe);
      if (!c->applicable) {
        bprintf(b, "</td><td colspan=\"7\" style=\"text-align:left\">n/a: ");
        bhtml(b, c->reason);
        bprintf(b, "</td></tr>\n");
        continue;
      }
      bprintf(b, "</td><td>%s</td><td>%.4g</td><td>%.4g</td><td>%.3g</td><td>%s %.3g</td><td>", c->golden, c->util.max, c->util.p999, 100 * c->rel_l2,
              !c->bound_computed ? "not computed" : c->bound_holds ? "holds" : "VIOLATED", c->bound_max_ratio);
      for (int h = 0; h < MLR_UTIL_BINS; h++) bprintf(b, "%s%lld", h ? " " : "", (long long)c->util.hist[h]);
      bprintf(b, "</td><td>%s</td></tr>\n", c->pass ? "pass" : "FAIL");
    }
  bprintf(b, "</table>\n</body></html>\n");
  return st == MLR_OK && b->oom ? mlr_error_set(err, MLR_ENOMEM, "out of memory for the page") : st;
}

mlr_status mlr_report_write(const mlr_report *r, const char *dir, const char *gnuplot_cmd, mlr_error *err) {
  buf md = {0}, page = {0};
  char *js = summary_json(r);
  mlr_status st = js ? MLR_OK : mlr_error_set(err, MLR_ENOMEM, "out of memory for summary.json");
  if (st == MLR_OK) st = html(r, gnuplot_cmd, &page, err); /* the plots first: a missing tool writes nothing */
  if (st == MLR_OK) markdown(r, &md);
  if (st == MLR_OK && md.oom) st = mlr_error_set(err, MLR_ENOMEM, "out of memory for summary.md");
  if (st == MLR_OK) st = write_file(dir, "summary.json", js, strlen(js), err);
  if (st == MLR_OK) st = write_file(dir, "summary.md", md.s, md.n, err);
  if (st == MLR_OK) st = write_file(dir, "index.html", page.s, page.n, err);
  free(js), free(md.s), free(page.s);
  return st;
}
