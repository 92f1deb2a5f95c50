/* The static per-thread split used by the bulk kernels (mlr_base.h). */
#include "mlr_base.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* [*i0, *i1): part t of nt contiguous, nearly equal parts of [0, n) */
static void split_range(size_t n, size_t nt, size_t t, size_t *i0, size_t *i1) {
  const size_t per = (n + nt - 1) / nt;
  *i0 = t * per < n ? t * per : n;
  *i1 = *i0 + per < n ? *i0 + per : n;
}

void mlr_parallel_ranges(size_t n, size_t serial_below, void (*fn)(void *ctx, size_t i0, size_t i1),
                         void *ctx) {
  if (n < serial_below) {
    fn(ctx, 0, n);
    return;
  }
#pragma omp parallel
  {
    size_t nt = 1, t = 0, i0, i1;
#ifdef _OPENMP
    nt = (size_t)omp_get_num_threads();
    t = (size_t)omp_get_thread_num();
#endif
    split_range(n, nt, t, &i0, &i1);
    if (i0 < i1) fn(ctx, i0, i1);
  }
}

int mlr_threads(int requested) {
  if (requested > 0) return requested;
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}
