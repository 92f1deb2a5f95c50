/* Metrics between two outputs (mlr_compare.h). Sums are taken in binary64 in index order, so
 * the figures do not depend on threads or platform. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_formats.h"
#include "mlr_compare.h"

static int type_rank(mlr_ctype t) { return t == MLR_CT_F64 ? 3 : t == MLR_CT_F32 ? 2 : 1; }

/* code of a binary64 value in type t (nearest even; binary32 through one rounding) */
static uint32_t encode_as(mlr_ctype t, double v) {
  if (t == MLR_CT_F32) return mlr_f32_bits((float)v);
  return mlr_encode_f64(v, t == MLR_CT_BF16 ? MLR_FMT_BF16 : MLR_FMT_FP16, MLR_RND_NEAREST_EVEN,
                        MLR_OVF_NONSAT, 0);
}

double mlr_compare_rel_l2(const mlr_cmp_tensor *a, const mlr_cmp_tensor *t) {
  double se = 0, st = 0;
  for (int64_t i = 0; i < a->n && i < t->n; i++) {
    const double x = mlr_cmp_value(a, i), y = mlr_cmp_value(t, i);
    if (isfinite(x) && isfinite(y)) {
      se += (x - y) * (x - y);
      st += y * y;
    }
  }
  return st > 0 ? sqrt(se / st) : 0;
}

/* the encoding as an ordered integer: -0 and +0 map to 0 */
static int64_t ordered(mlr_ctype t, uint32_t c) {
  const uint32_t sign = t == MLR_CT_F32 ? 0x80000000u : 0x8000u;
  return (c & sign) ? -(int64_t)(c & (sign - 1)) : (int64_t)c;
}

static int vclass(double v) { return v != v ? 0 : (isinf(v) ? (v > 0 ? 1 : 2) : 3); }

static int cmp_i64(const void *x, const void *y) {
  const int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

/* The 1-based order statistics k[0..nk) (ascending) of n non-negative ulp distances, in place.
 * Distances below ULP_HIST (nearly all of them between two roundings of one computation) are
 * counted, the rest sorted: the same values a sort of all n gives, without sorting millions of
 * small integers (the sort was a fifth of the discrimination test's time). */
enum { ULP_HIST = 4096 };
static void ulp_ranks(int64_t *u, int64_t n, const int64_t *k, int nk, int64_t *out) {
  int64_t *cnt = calloc(ULP_HIST, sizeof *cnt), nbig = 0;
  if (!cnt) { /* no memory for the counts: sort them all */
    qsort(u, (size_t)n, sizeof *u, cmp_i64);
    for (int r = 0; r < nk; r++) out[r] = u[k[r] - 1];
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    if (u[i] < ULP_HIST)
      cnt[u[i]]++;
    else
      u[nbig++] = u[i]; /* nbig <= i: the large ones gather at the front */
  }
  qsort(u, (size_t)nbig, sizeof *u, cmp_i64);
  const int64_t nsmall = n - nbig;
  int64_t below = 0, v = 0; /* below: how many distances are < v */
  for (int r = 0; r < nk; r++) {
    if (k[r] > nsmall) {
      out[r] = u[k[r] - nsmall - 1];
      continue;
    }
    while (below + cnt[v] < k[r]) below += cnt[v++];
    out[r] = v;
  }
  free(cnt);
}

/* rank of an element for the worst list: unwritten, class mismatch, then ulp distance */
static double severity(const mlr_cmp_elem *e, int unwritten, int mismatch) {
  if (unwritten) return 4e18;
  if (mismatch) return 3e18;
  return (double)e->ulp;
}

static void keep_worst(mlr_metrics *m, double *sev, const mlr_cmp_elem *e, double s) {
  if (m->nworst == MLR_CMP_WORST && s <= sev[MLR_CMP_WORST - 1]) return;
  int at = m->nworst < MLR_CMP_WORST ? m->nworst++ : MLR_CMP_WORST - 1;
  while (at > 0 && sev[at - 1] < s) { /* ties keep the earlier index first */
    m->worst[at] = m->worst[at - 1];
    sev[at] = sev[at - 1];
    at--;
  }
  m->worst[at] = *e;
  sev[at] = s;
}

mlr_status mlr_compare_metrics(const mlr_cmp_tensor *a, const mlr_cmp_tensor *b, mlr_metrics *m,
                               mlr_error *err) {
  memset(m, 0, sizeof *m);
  if (a->n != b->n || type_rank(b->type) < type_rank(a->type) ||
      (a->type != b->type && type_rank(b->type) == type_rank(a->type)) || a->type == MLR_CT_F64)
    return mlr_error_set(err, MLR_EINVAL,
                         "cannot compare: %lld and %lld elements; the reference must be of the "
                         "candidate's type or wider (bf16/fp16 < f32 < f64)",
                         (long long)a->n, (long long)b->n);
  int64_t *ulps = malloc((size_t)(a->n > 0 ? a->n : 1) * sizeof *ulps);
  if (!ulps)
    return mlr_error_set(err, MLR_ENOMEM, "out of memory for %lld ulp distances", (long long)a->n);
  const uint32_t unw = mlr_cmp_unwritten(a->type);
  double se = 0, sb = 0, sab = 0, saa = 0, sev[MLR_CMP_WORST];
  int64_t nu = 0;
  m->n = a->n;
  for (int64_t i = 0; i < a->n; i++) {
    const uint32_t ca = mlr_cmp_code(a, i);
    const double va = mlr_cmp_code_value(a->type, ca), vb = mlr_cmp_value(b, i);
    /* B in A's format */
    const uint32_t cb = a->type == b->type ? mlr_cmp_code(b, i) : encode_as(a->type, vb);
    mlr_cmp_elem e = {i, ca, cb, va, vb, -1};
    const int unwritten = ca == unw, ka = vclass(va), kb = vclass(vb);
    if ((ca == cb && (a->type == b->type || va == vb)) || (ka == 0 && kb == 0)) m->identical++;
    if (unwritten) {
      m->unwritten++;
      keep_worst(m, sev, &e, severity(&e, 1, 0));
      continue;
    }
    if (ka != kb) {
      m->class_mismatch++;
      keep_worst(m, sev, &e, severity(&e, 0, 1));
      continue;
    }
    if (ka != 3) continue; /* same NaN/Inf class */
    m->finite++;
    e.ulp = llabs(ordered(a->type, ca) - ordered(a->type, cb)); /* cb is in A's format */
    ulps[nu++] = e.ulp;
    const double d = fabs(va - vb);
    if (d > m->max_abs) m->max_abs = d;
    if (vb != 0 && d / fabs(vb) > m->max_rel) m->max_rel = d / fabs(vb);
    se += d * d;
    sb += vb * vb;
    sab += va * vb;
    saa += va * va;
    if (e.ulp > 0) keep_worst(m, sev, &e, severity(&e, 0, 0));
  }
  if (nu) {
    /* nearest-rank percentiles */
    const int64_t k[4] = {(int64_t)ceil(0.5 * (double)nu), (int64_t)ceil(0.99 * (double)nu),
                          (int64_t)ceil(0.999 * (double)nu), nu};
    int64_t v[4];
    ulp_ranks(ulps, nu, k, 4, v);
    m->ulp_p50 = (double)v[0];
    m->ulp_p99 = (double)v[1];
    m->ulp_p999 = (double)v[2];
    m->ulp_max = v[3];
    m->rmse = sqrt(se / (double)nu);
  }
  m->rel_l2 = sb > 0 ? sqrt(se) / sqrt(sb) : (se > 0 ? INFINITY : 0.0);
  m->nmse = sb > 0 ? se / sb : (se > 0 ? INFINITY : 0.0);
  m->cos_diff = (saa + sb) > 0 ? 1.0 - 2.0 * sab / (saa + sb) : 0.0;
  free(ulps);
  return MLR_OK;
}

double mlr_compare_mismatch(const mlr_cmp_tensor *a, const mlr_cmp_tensor *b, double rtol,
                            double atol) {
  if (a->n <= 0) return 0.0;
  int64_t miss = 0;
  for (int64_t i = 0; i < a->n; i++) {
    const double va = mlr_cmp_value(a, i), vb = mlr_cmp_value(b, i);
    const int ka = vclass(va), kb = vclass(vb);
    if (mlr_cmp_code(a, i) == mlr_cmp_unwritten(a->type) || ka != kb)
      miss++;
    else if (ka == 3 && !(fabs(va - vb) <= atol + rtol * fabs(vb)))
      miss++;
  }
  return (double)miss / (double)a->n;
}

mlr_status mlr_compare_bound(const mlr_cmp_tensor *a, const mlr_cmp_tensor *t, const double *bound,
                             double factor, mlr_bound_use *bu, mlr_error *err) {
  memset(bu, 0, sizeof *bu);
  bu->worst = -1;
  if (a->n != t->n)
    return mlr_error_set(err, MLR_EINVAL, "bound: %lld elements against %lld", (long long)a->n,
                         (long long)t->n);
  double *tight = malloc((size_t)(a->n > 0 ? a->n : 1) * sizeof *tight);
  if (!tight) return mlr_error_set(err, MLR_ENOMEM, "out of memory for the bound's tightness");
  int64_t nt = 0;
  for (int64_t i = 0; i < a->n; i++) {
    const double va = mlr_cmp_value(a, i), vt = mlr_cmp_value(t, i);
    if (!isfinite(va) || !isfinite(vt)) continue;
    bu->n++;
    const double e = fabs(va - vt), b = bound[i];
    const double ratio = e == 0 ? 0 : b > 0 ? e / b : INFINITY;
    if (!(e <= factor * b)) bu->over++;
    if (bu->worst < 0 || ratio > bu->max_ratio) {
      bu->max_ratio = ratio;
      bu->worst = i;
    }
    if (e > 0) tight[nt++] = b / e;
  }
  mlr_sort_values(tight, nt);
  bu->tight_p50 = mlr_sorted_quantile(tight, nt, 0.5);
  free(tight);
  return MLR_OK;
}
