/* Tolerance rules and verdicts (mlr_compare.h). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_compare.h"

const char *mlr_rule_forms(void) {
  return "exact|ulp:N|allclose:RTOL,ATOL[,MISS]|fa3[:K[,ATOL]]|nmse:X|cos:X|budget[:F]|"
         "structure[:K[,ATOL]]";
}

/* up to 3 comma-separated non-negative finite numbers after the colon; returns the count or -1 */
static int numbers(const char *s, double *v) {
  int n = 0;
  if (!s || !*s) return 0;
  char buf[64];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    char *end;
    const double x = strtod(t, &end);
    if (*end || end == t || !isfinite(x) || x < 0 || n == 3) return -1;
    v[n++] = x;
  }
  return n;
}

int mlr_rule_defaults(mlr_rule r[2]) {
  return (mlr_rule_parse("fa3", &r[0], NULL) == MLR_OK) +
         (mlr_rule_parse("structure", &r[1], NULL) == MLR_OK);
}

mlr_status mlr_rule_parse(const char *s, mlr_rule *r, mlr_error *err) {
  memset(r, 0, sizeof *r);
  snprintf(r->text, sizeof r->text, "%s", s);
  const char *colon = strchr(s, ':');
  const size_t kl = colon ? (size_t)(colon - s) : strlen(s);
  double v[3] = {0, 0, 0};
  const int n = numbers(colon ? colon + 1 : NULL, v);
  if (n < 0 || (colon && n == 0)) goto bad;
#define IS(name) (kl == strlen(name) && strncmp(s, name, kl) == 0)
  if (IS("exact") && n == 0)
    r->kind = MLR_RULE_EXACT;
  else if (IS("ulp") && n == 1 && v[0] == floor(v[0])) {
    r->kind = MLR_RULE_ULP;
    r->x = v[0];
  } else if (IS("allclose") && (n == 2 || n == 3) && v[2] <= 1) {
    r->kind = MLR_RULE_ALLCLOSE;
    r->x = v[0];
    r->y = v[1];
    r->z = v[2];
  } else if ((IS("fa3") || IS("structure")) && n <= 2) {
    r->kind = IS("fa3") ? MLR_RULE_FA3 : MLR_RULE_STRUCTURE;
    r->x = n >= 1 ? v[0] : 2.0;
    r->y = n == 2 ? v[1] : 1e-5;
  } else if (IS("nmse") && n == 1) {
    r->kind = MLR_RULE_NMSE;
    r->x = v[0];
  } else if (IS("cos") && n == 1) {
    r->kind = MLR_RULE_COS;
    r->x = v[0];
  } else if (IS("budget") && n <= 1 && (n == 0 || v[0] > 0)) {
    r->kind = MLR_RULE_BUDGET;
    r->x = n ? v[0] : 1.0;
  } else
    goto bad;
#undef IS
  return MLR_OK;
bad:
  return mlr_error_set(err, MLR_EPARSE,
                       "rule '%s' is not one of %s (numbers >= 0; MISS <= 1; F > 0)", s,
                       mlr_rule_forms());
}

static mlr_verdict verdict(int pass, double measured, double limit, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static mlr_verdict verdict(int pass, double measured, double limit, const char *fmt, ...) {
  mlr_verdict v = {pass ? MLR_VERDICT_PASS : MLR_VERDICT_FAIL, measured, limit, ""};
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v.detail, sizeof v.detail, fmt, ap);
  va_end(ap);
  return v;
}

mlr_verdict mlr_rule_apply(const mlr_rule *r, const mlr_metrics *m, const mlr_cmp_tensor *a,
                           const mlr_cmp_tensor *b, const mlr_metrics *mt, const mlr_metrics *mr) {
  if (r->kind == MLR_RULE_BUDGET) {
    mlr_verdict v = {
        MLR_VERDICT_NA, 0, 0,
        "budget needs the recipe's a priori bound and the truth (mlaref check computes both)"};
    return v;
  }
  if (r->kind == MLR_RULE_STRUCTURE) {
    mlr_verdict v = {MLR_VERDICT_NA, 0, 0,
                     "structure needs the batches, the model and the truth (mlaref check has "
                     "them)"};
    return v;
  }
  if (m->unwritten || m->class_mismatch)
    return verdict(0, (double)(m->unwritten + m->class_mismatch), 0,
                   "%lld elements unwritten, %lld with another NaN/Inf class",
                   (long long)m->unwritten, (long long)m->class_mismatch);
  switch (r->kind) {
  case MLR_RULE_EXACT:
    return verdict(m->identical == m->n, (double)(m->n - m->identical), 0,
                   "%lld of %lld elements differ", (long long)(m->n - m->identical),
                   (long long)m->n);
  case MLR_RULE_ULP:
    return verdict((double)m->ulp_max <= r->x, (double)m->ulp_max, r->x,
                   "max ulp distance %lld (limit %.0f)", (long long)m->ulp_max, r->x);
  case MLR_RULE_ALLCLOSE: {
    const double f = mlr_compare_mismatch(a, b, r->x, r->y);
    return verdict(f <= r->z, f, r->z, "%.4g%% of elements beyond %g + %g|b| (allowed %.4g%%)",
                   100 * f, r->y, r->x, 100 * r->z);
  }
  case MLR_RULE_FA3: {
    if (!mt || !mr) {
      mlr_verdict v = {MLR_VERDICT_NA, 0, 0, "fa3 needs the truth (--truth FILE)"};
      return v;
    }
    /* NaN/Inf classes: the truth's; where the recipe's own model differs from the truth in class
     * (non-finite inputs through a clamp or a max that drops NaN), the model's */
    if (mt->unwritten || (mr->class_mismatch ? m->class_mismatch : mt->class_mismatch))
      return verdict(0, 0, 0, "NaN/Inf classes differ from the %s",
                     mr->class_mismatch ? "model's" : "truth");
    const double lim = r->x * mr->max_abs + r->y;
    return verdict(mt->max_abs <= lim, mt->max_abs, lim,
                   "max|out - truth| = %.4g, limit %g x max|ref - truth| (%.4g) + %g = %.4g",
                   mt->max_abs, r->x, mr->max_abs, r->y, lim);
  }
  case MLR_RULE_NMSE:
    return verdict(m->nmse <= r->x, m->nmse, r->x, "NMSE %.4g (limit %g)", m->nmse, r->x);
  case MLR_RULE_COS:
    return verdict(m->cos_diff <= r->x, m->cos_diff, r->x, "cosine difference %.4g (limit %g)",
                   m->cos_diff, r->x);
  default:
    break;
  }
  mlr_verdict v = {MLR_VERDICT_NA, 0, 0, "unknown rule"};
  return v;
}

mlr_verdict mlr_rule_apply_budget(const mlr_rule *r, const mlr_metrics *mt, const mlr_cmp_tensor *a,
                                  const mlr_cmp_tensor *t, const double *bound) {
  if (mt->unwritten || mt->class_mismatch)
    return verdict(0, (double)(mt->unwritten + mt->class_mismatch), 0,
                   "%lld elements unwritten, %lld with another NaN/Inf class than the truth",
                   (long long)mt->unwritten, (long long)mt->class_mismatch);
  mlr_bound_use bu;
  if (mlr_compare_bound(a, t, bound, r->x, &bu, NULL) != MLR_OK) {
    mlr_verdict v = {MLR_VERDICT_NA, 0, 0, "budget: out of memory"};
    return v;
  }
  if (bu.over == 0)
    return verdict(1, bu.max_ratio, r->x,
                   "every element within %g x its bound (largest |out - truth| / bound %.4g; "
                   "median tightness %.3g)",
                   r->x, bu.max_ratio, bu.tight_p50);
  return verdict(0, bu.max_ratio, r->x,
                 "%lld elements beyond %g x their bound; worst element %lld: |out - truth| = %.4g "
                 "x bound (%a vs truth %a, bound %a)",
                 (long long)bu.over, r->x, (long long)bu.worst, bu.max_ratio,
                 mlr_cmp_value(a, bu.worst), mlr_cmp_value(t, bu.worst), bound[bu.worst]);
}

/* |x - t| for the structure rule: an element whose NaN/Inf class is neither the truth's nor the
 * model's is infinitely wrong; one of the truth's class, or of the model's, has no error */
static double elem_err(double x, double m, double t) {
  if (isfinite(t) && isfinite(x)) return fabs(x - t);
  const int same_t = isnan(x) ? isnan(t) : x == t, same_m = isnan(x) ? isnan(m) : x == m;
  return same_t || same_m ? 0.0 : INFINITY;
}

typedef struct group_err {
  double a, r; /* max |a - t|, max |r - t| */
} group_err;

/* the worst group of n: the largest max|a - t| / limit; *over counts the groups beyond it */
static int64_t worst_group(const mlr_rule *r, const group_err *g, int64_t n, double *ratio,
                           int64_t *over) {
  int64_t w = -1;
  *ratio = 0.0;
  for (int64_t k = 0; k < n; k++) {
    const double lim = r->x * g[k].r + r->y;
    const double q = lim > 0 ? g[k].a / lim : g[k].a > 0 ? INFINITY : 0.0; /* structure:0,0 */
    *over += g[k].a > lim;
    if (w < 0 || q > *ratio) {
      w = k;
      *ratio = q;
    }
  }
  return w;
}

mlr_verdict mlr_rule_apply_structure(const mlr_rule *r, const mlr_cmp_tensor *a,
                                     const mlr_cmp_tensor *b, const mlr_cmp_tensor *t,
                                     const mlr_groups *g) {
  group_err *e = calloc((size_t)(g->B + g->H > 0 ? g->B + g->H : 1), sizeof *e);
  if (!e) {
    mlr_verdict v = {MLR_VERDICT_NA, 0, 0, "structure: out of memory"};
    return v;
  }
  group_err *eb = e, *eh = e + g->B;
  for (int64_t bt = 0; bt < g->B; bt++)
    for (int64_t tok = g->qo_indptr[bt]; tok < g->qo_indptr[bt + 1]; tok++)
      for (int64_t h = 0; h < g->H; h++)
        for (int64_t c = 0; c < g->C; c++) {
          const int64_t i = (tok * g->H + h) * g->C + c;
          const double vt = mlr_cmp_value(t, i), vm = mlr_cmp_value(b, i);
          const double ea = elem_err(mlr_cmp_value(a, i), vm, vt), er = elem_err(vm, vm, vt);
          eb[bt].a = fmax(eb[bt].a, ea);
          eb[bt].r = fmax(eb[bt].r, er);
          eh[h].a = fmax(eh[h].a, ea);
          eh[h].r = fmax(eh[h].r, er);
        }
  double qb, qh;
  int64_t over = 0;
  const int64_t wb = worst_group(r, eb, g->B, &qb, &over),
                wh = worst_group(r, eh, g->H, &qh, &over);
  const int batch = wb >= 0 && (wh < 0 || qb >= qh);
  const group_err w = batch ? eb[wb] : eh[wh];
  const double ratio = batch ? qb : qh;
  const mlr_verdict v =
      over == 0
          ? verdict(1, ratio, 1.0,
                    "every batch and head within %g x the model's error there + %g (closest: %s "
                    "%lld at %.3g of its limit)",
                    r->x, r->y, batch ? "batch" : "head", (long long)(batch ? wb : wh), ratio)
          : verdict(0, ratio, 1.0,
                    "%lld of %lld batches and heads out of line; worst %s %lld: max|out - truth| "
                    "= %.4g, limit %g x %.4g (the model's there) + %g = %.4g",
                    (long long)over, (long long)(g->B + g->H), batch ? "batch" : "head",
                    (long long)(batch ? wb : wh), w.a, r->x, w.r, r->y, r->x * w.r + r->y);
  free(e);
  return v;
}
