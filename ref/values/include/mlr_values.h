/* mlr_values.h: a flat output tensor of any of the output formats read as exact binary64
 * values and as codes, and the order statistics over such values that both the budget and the
 * comparisons take (sorting, nearest-rank quantiles, the utilisation of a tolerance). */
#ifndef MLR_VALUES_H
#define MLR_VALUES_H

#include <stdint.h>

#include "mlr_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mlr_ctype {
  MLR_CT_BF16 = 0,
  MLR_CT_F16 = 1,
  MLR_CT_F32 = 2,
  MLR_CT_F64 = 3
} mlr_ctype;

typedef struct mlr_cmp_tensor {
  mlr_ctype type;
  const void *data; /* n codes (uint16_t), binary32 or binary64 values */
  int64_t n;
} mlr_cmp_tensor;

/** The unwritten-element pattern of a type (all ones; binary64 has none: 0). */
uint32_t mlr_cmp_unwritten(mlr_ctype t);
/** Element i as binary64 (exact) and as its code. */
double mlr_cmp_value(const mlr_cmp_tensor *t, int64_t i);
uint32_t mlr_cmp_code(const mlr_cmp_tensor *t, int64_t i);
/** The value of code c of type t (not binary64), exactly. */
double mlr_cmp_code_value(mlr_ctype t, uint32_t c);

/** Sort n values ascending (for mlr_sorted_quantile). */
void mlr_sort_values(double *v, int64_t n);
/** The q-th quantile (0..1, nearest rank) of n sorted values; 0 when n = 0. */
double mlr_sorted_quantile(const double *v, int64_t n, double q);

/** Budget utilisation |a - t| / (atol + rtol |t|) per element (finite pairs): its max, quantiles
 *  and a histogram; over = elements above 1 (outside the tolerance). */
enum { MLR_UTIL_BINS = 8 };
typedef struct mlr_util {
  int64_t n, over;
  double max, p50, p99, p999;
  int64_t hist[MLR_UTIL_BINS]; /* [0,1/64) [1/64,1/16) [1/16,1/4) [1/4,1/2) [1/2,1) [1,2) [2,4)
                                  [4,inf) */
} mlr_util;
/** The histogram's bin edges (MLR_UTIL_BINS + 1 of them, the last +Inf). */
extern const double mlr_util_edges[MLR_UTIL_BINS + 1];
mlr_status mlr_compare_utilisation(const mlr_cmp_tensor *a, const mlr_cmp_tensor *t, double rtol,
                                   double atol, mlr_util *u, mlr_error *err);

#ifdef __cplusplus
}
#endif
#endif
