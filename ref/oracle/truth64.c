/* The binary64 truth (mlr_oracle.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_formats.h"
#include "mlr_pmath.h"
#include "mlr_oracle.h"
#include "oracle_internal.h"

#define QK 576
#define DV 512

/* the KV row's K values (576) or V values (512) in binary64 (times their scales: exact) */
static void kv_row(const mlr_inputs *in, mlr_truth_from from, const mlr__truth_scales *sc,
                   int64_t row, int is_v, double *out) {
  for (int i = 0; i < (is_v ? DV : QK); i++)
    out[i] = (double)mlr__kv_value(in, from, row, i) * (is_v ? sc->v : i < DV ? sc->k : sc->kpe);
}

mlr_status mlr_truth_f64(const mlr_inputs *in, mlr_truth_from from, double *o, double *lse,
                         mlr_error *err) {
  int64_t Lmax;
  const mlr_status st = mlr__truth_begin(in, from, &Lmax, err);
  if (st != MLR_OK) return st;
  const int64_t H = in->H;
  const mlr__truth_scales sc = mlr__scales(in, from);
  if (H > 1024)
    return mlr_error_set(err, MLR_EINVAL, "the truth handles at most 1024 heads (%lld given)",
                         (long long)H);
  int failed = 0;
#pragma omp parallel
  {
    double *s = malloc((size_t)(H * (Lmax > 0 ? Lmax : 1)) * sizeof(double)),
           *row = malloc(QK * sizeof(double));
    double *q = malloc((size_t)(H * QK) * sizeof(double)),
           *acc = malloc((size_t)(H * DV) * sizeof(double));
    if (!s || !row || !q || !acc) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < in->B; b++) {
      if (!s || !row || !q || !acc) continue;
      const int64_t t0 = in->qo_indptr[b], n = in->qo_indptr[b + 1] - t0,
                    L = mlr_inputs_kv_len(in, b);
      for (int64_t i = 0; i < n; i++) {
        const int64_t t = t0 + i, Lt = mlr_inputs_visible(in, L, n, i);
        /* Q transposed to [column][head], so the heads' sums run side by side (each in column
         * order) */
        for (int64_t h = 0; h < H; h++)
          for (int c = 0; c < QK; c++)
            q[c * H + h] = (double)mlr__q_value(in, t * H + h, c) * sc.q; /* exact */
        double *m = acc; /* reuse: the max of each head before acc is needed */
        for (int64_t h = 0; h < H; h++) m[h] = -INFINITY;
        for (int64_t j = 0; j < Lt; j++) {
          kv_row(in, from, &sc, mlr_inputs_kv_row(in, b, j), 0, row);
          double *d = m + H; /* H more doubles of acc */
          for (int64_t h = 0; h < H; h++) d[h] = 0;
          for (int c = 0; c < QK; c++)
            for (int64_t h = 0; h < H; h++) d[h] += q[c * H + h] * row[c];
          for (int64_t h = 0; h < H; h++) {
            s[h * Lt + j] = mlr__sm_mul(&sc, d[h]);
            if (s[h * Lt + j] > m[h]) m[h] = s[h * Lt + j];
          }
        }
        double mx[1024], sum[1024]; /* H <= 1024 is checked above */
        for (int64_t h = 0; h < H; h++) {
          mx[h] = m[h];
          sum[h] = 0;
          for (int64_t j = 0; j < Lt; j++) {
            s[h * Lt + j] = mlr_exp(s[h * Lt + j] - mx[h]);
            sum[h] += s[h * Lt + j];
          }
        }
        memset(acc, 0, (size_t)(H * DV) * sizeof(double));
        for (int64_t j = 0; j < Lt; j++) {
          kv_row(in, from, &sc, mlr_inputs_kv_row(in, b, j), 1, row);
          for (int64_t h = 0; h < H; h++) {
            const double p = s[h * Lt + j];
            for (int d = 0; d < DV; d++) acc[h * DV + d] += p * row[d];
          }
        }
        for (int64_t h = 0; h < H; h++) {
          for (int d = 0; d < DV; d++)
            o[(t * H + h) * DV + d] = Lt > 0 ? acc[h * DV + d] / sum[h] : 0.0;
          lse[t * H + h] = Lt > 0 ? mx[h] + mlr_log(sum[h]) : -INFINITY;
        }
      }
    }
    free(s);
    free(row);
    free(q);
    free(acc);
  }
  if (failed) return mlr_error_set(err, MLR_ENOMEM, "out of memory for the truth's buffers");
  return MLR_OK;
}
