/* The binary64 truth (mlr_oracle.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../formats/mlr_formats.h"
#include "../pmath/mlr_pmath.h"
#include "mlr_oracle.h"

#define QK 576
#define DV 512

/* the KV row's values in binary64 */
static void kv_row(const mlr_inputs *in, mlr_truth_from from, int64_t row, double *out) {
  if (from == MLR_TRUTH_BF16) {
    for (int i = 0; i < QK; i++) out[i] = (double)mlr_bits_f32((uint32_t)in->kv_bf16[row * QK + i] << 16);
  } else if (in->kv_format == MLR_FMT_BF16) {
    for (int i = 0; i < QK; i++) out[i] = (double)mlr_bits_f32((uint32_t)((const uint16_t *)in->kv)[row * QK + i] << 16) * in->kv_scale;
  } else {
    for (int i = 0; i < QK; i++) out[i] = (double)mlr_decode((mlr_format)in->kv_format, ((const uint8_t *)in->kv)[row * QK + i]) * in->kv_scale;
  }
}

mlr_status mlr_truth_f64(const mlr_inputs *in, mlr_truth_from from, double *o, double *lse, mlr_error *err) {
  if (from == MLR_TRUTH_BF16 && !in->kv_bf16)
    return mlr_error_set(err, MLR_EINVAL, "the truth from bf16 KV needs the tensor kv_bf16 in the inputs (mlaref gen ... bf16kv=1)");
  const int64_t H = in->H;
  if (H > 1024) return mlr_error_set(err, MLR_EINVAL, "the truth handles at most 1024 heads (%lld given)", (long long)H);
  int64_t Lmax = 0;
  for (int64_t b = 0; b < in->B; b++) Lmax = mlr_inputs_kv_len(in, b) > Lmax ? mlr_inputs_kv_len(in, b) : Lmax;
  int failed = 0;
#pragma omp parallel
  {
    double *s = malloc((size_t)(H * (Lmax > 0 ? Lmax : 1)) * sizeof(double)), *row = malloc(QK * sizeof(double));
    double *q = malloc((size_t)(H * QK) * sizeof(double)), *acc = malloc((size_t)(H * DV) * sizeof(double));
    if (!s || !row || !q || !acc) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < in->B; b++) {
      if (!s || !row || !q || !acc) continue;
      const int64_t t0 = in->qo_indptr[b], n = in->qo_indptr[b + 1] - t0, L = mlr_inputs_kv_len(in, b);
      for (int64_t i = 0; i < n; i++) {
        const int64_t t = t0 + i, Lt = L - (n - 1 - i);
        /* Q transposed to [column][head], so the heads' sums run side by side (each in column order) */
        for (int64_t h = 0; h < H; h++)
          for (int c = 0; c < QK; c++) q[c * H + h] = (double)mlr_bits_f32((uint32_t)in->q[(t * H + h) * QK + c] << 16);
        double *m = acc; /* reuse: the max of each head before acc is needed */
        for (int64_t h = 0; h < H; h++) m[h] = -INFINITY;
        for (int64_t j = 0; j < Lt; j++) {
          kv_row(in, from, mlr_inputs_kv_row(in, b, j), row);
          double *d = m + H; /* H more doubles of acc */
          for (int64_t h = 0; h < H; h++) d[h] = 0;
          for (int c = 0; c < QK; c++)
            for (int64_t h = 0; h < H; h++) d[h] += q[c * H + h] * row[c];
          for (int64_t h = 0; h < H; h++) {
            s[h * Lt + j] = d[h] / 24.0;
            if (s[h * Lt + j] > m[h]) m[h] = s[h * Lt + j];
          }
        }
        double mx[1024], sum[1024]; /* H <= 1024 is checked below */
        for (int64_t h = 0; h < H; h++) {
          mx[h] = m[h], sum[h] = 0;
          for (int64_t j = 0; j < Lt; j++) {
            s[h * Lt + j] = mlr_exp(s[h * Lt + j] - mx[h]);
            sum[h] += s[h * Lt + j];
          }
        }
        memset(acc, 0, (size_t)(H * DV) * sizeof(double));
        for (int64_t j = 0; j < Lt; j++) {
          kv_row(in, from, mlr_inputs_kv_row(in, b, j), row);
          for (int64_t h = 0; h < H; h++) {
            const double p = s[h * Lt + j];
            for (int d = 0; d < DV; d++) acc[h * DV + d] += p * row[d];
          }
        }
        for (int64_t h = 0; h < H; h++) {
          for (int d = 0; d < DV; d++) o[(t * H + h) * DV + d] = Lt ? acc[h * DV + d] / sum[h] : 0.0;
          lse[t * H + h] = Lt ? mx[h] + mlr_log(sum[h]) : -INFINITY;
        }
      }
    }
    free(s), free(row), free(q), free(acc);
  }
  if (failed) return mlr_error_set(err, MLR_ENOMEM, "out of memory for the truth's buffers");
  return MLR_OK;
}
