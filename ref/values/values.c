/* Output values, codes and order statistics (mlr_values.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_formats.h"
#include "mlr_values.h"

uint32_t mlr_cmp_unwritten(mlr_ctype t) {
  return t == MLR_CT_F64 ? 0u : t == MLR_CT_F32 ? 0xFFFFFFFFu : 0xFFFFu;
}

uint32_t mlr_cmp_code(const mlr_cmp_tensor *t, int64_t i) {
  if (t->type == MLR_CT_F64) { /* no 32-bit code: the top half, for messages only */
    uint64_t u;
    memcpy(&u, (const char *)t->data + 8 * i, 8);
    return (uint32_t)(u >> 32);
  }
  if (t->type == MLR_CT_F32) {
    uint32_t u;
    memcpy(&u, (const char *)t->data + 4 * i, 4);
    return u;
  }
  return ((const uint16_t *)t->data)[i];
}

double mlr_cmp_code_value(mlr_ctype t, uint32_t c) {
  if (t == MLR_CT_F32) return (double)mlr_bits_f32(c);
  return (double)mlr_decode(t == MLR_CT_BF16 ? MLR_FMT_BF16 : MLR_FMT_FP16, c);
}

double mlr_cmp_value(const mlr_cmp_tensor *t, int64_t i) {
  if (t->type == MLR_CT_F64) {
    double v;
    memcpy(&v, (const char *)t->data + 8 * i, 8);
    return v;
  }
  return mlr_cmp_code_value(t->type, mlr_cmp_code(t, i));
}

const double mlr_util_edges[MLR_UTIL_BINS + 1] = {0, 1.0 / 64, 1.0 / 16, 0.25,    0.5,
                                                  1, 2,        4,        INFINITY};

static int cmp_dbl(const void *x, const void *y) {
  const double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

void mlr_sort_values(double *v, int64_t n) { qsort(v, (size_t)n, sizeof *v, cmp_dbl); }

double mlr_sorted_quantile(const double *v, int64_t n, double q) {
  if (n == 0) return 0;
  int64_t k = (int64_t)ceil(q * (double)n) - 1;
  return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

mlr_status mlr_compare_utilisation(const mlr_cmp_tensor *a, const mlr_cmp_tensor *t, double rtol,
                                   double atol, mlr_util *u, mlr_error *err) {
  memset(u, 0, sizeof *u);
  if (a->n != t->n)
    return mlr_error_set(err, MLR_EINVAL, "utilisation: %lld elements against %lld",
                         (long long)a->n, (long long)t->n);
  double *v = malloc((size_t)(a->n > 0 ? a->n : 1) * sizeof *v);
  if (!v) return mlr_error_set(err, MLR_ENOMEM, "out of memory for the utilisation");
  for (int64_t i = 0; i < a->n; i++) {
    const double va = mlr_cmp_value(a, i), vt = mlr_cmp_value(t, i);
    if (!isfinite(va) || !isfinite(vt)) continue;
    const double x = fabs(va - vt) / (atol + rtol * fabs(vt));
    v[u->n++] = x;
    if (x > 1) u->over++;
    if (x > u->max) u->max = x;
    int k = 0;
    while (k + 1 < MLR_UTIL_BINS && x >= mlr_util_edges[k + 1]) k++;
    u->hist[k]++;
  }
  mlr_sort_values(v, u->n);
  u->p50 = mlr_sorted_quantile(v, u->n, 0.5);
  u->p99 = mlr_sorted_quantile(v, u->n, 0.99);
  u->p999 = mlr_sorted_quantile(v, u->n, 0.999);
  free(v);
  return MLR_OK;
}
