/* The report's baseline comparison and its release (mlr_report.h): apart from the matrix, so the
 * baseline reader (a file from someone else's CI) builds alone for its fuzz target. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_report.h"

static mlr_status add_regression(mlr_report *rep, mlr_error *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
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

mlr_status mlr_report_baseline(mlr_report *rep, const char *path, mlr_error *err) {
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je);
  if (!root) return mlr_error_set(err, MLR_EIO, "baseline %s: not readable JSON: line %d: %s", path, je.line, je.text);
  const char *schema = json_string_value(json_object_get(root, "schema"));
  json_t *cells = json_object_get(root, "cells");
  if (!schema || strcmp(schema, MLR_REPORT_SCHEMA) || !json_is_array(cells)) {
    json_decref(root);
    return mlr_error_set(err, MLR_EPARSE, "baseline %s: not a summary.json of schema %s (a cells array)", path, MLR_REPORT_SCHEMA);
  }
  snprintf(rep->baseline, sizeof rep->baseline, "%s", path);
  mlr_status st = MLR_OK;
  for (int k = 0; st == MLR_OK && k < rep->ncells; k++) {
    const mlr_report_cell *c = &rep->cells[k];
    size_t i;
    json_t *b, *old = NULL;
    json_array_foreach(cells, i, b) {
      const char *sh = json_string_value(json_object_get(b, "shape")), *re = json_string_value(json_object_get(b, "recipe"));
      if (sh && re && !strcmp(sh, c->shape) && !strcmp(re, c->recipe)) old = b;
    }
    if (!old || !json_is_true(json_object_get(old, "applicable")) || !c->applicable) continue;
    const int was_pass = json_is_true(json_object_get(old, "pass"));
    const char *osha = json_string_value(json_object_get(old, "o_sha256"));
    const double umax = json_number_value(json_object_get(json_object_get(old, "utilisation"), "max"));
    if (was_pass && !c->pass) st = add_regression(rep, err, "%s / %s: passed in the baseline, fails now (golden %s, bound %s)", c->shape, c->recipe, c->golden,
                                                  !c->bound_computed ? "not computed" : c->bound_holds ? "holds" : "VIOLATED");
    if (st == MLR_OK && osha && strcmp(osha, c->o_sha))
      st = add_regression(rep, err, "%s / %s: output digest changed: %.16s in the baseline, %.16s now", c->shape, c->recipe, osha, c->o_sha);
    if (st == MLR_OK && umax > 0 && c->util.max > (1 + rep->margin) * umax)
      st = add_regression(rep, err, "%s / %s: utilisation max up from %.4g to %.4g (more than %g%%)", c->shape, c->recipe, umax, c->util.max, 100 * rep->margin);
  }
  json_decref(root);
  return st;
}

void mlr_report_free(mlr_report *rep) {
  for (int k = 0; k < rep->nregressions; k++) free(rep->regressions[k]);
  free(rep->regressions);
  free(rep->cells);
  memset(rep, 0, sizeof *rep);
}
