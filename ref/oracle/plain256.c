/* The plain MPFR reference (mlr_oracle.h): every operation in MPFR at 256 bits, the way one
 * writes attention in arbitrary precision without thinking about exactness. It checks the
 * certified oracle (tests/oracle.c) and is the baseline of its speed (mlaref bench oracle). */
#include <stdint.h>
#include <mpfr.h>
#include <math.h>
#include <stdlib.h>

#include "mlr_formats.h"
#include "mlr_oracle.h"
#include "oracle_internal.h"

#define QK 576
#define DV 512
enum { P = 256 };

mlr_status mlr_oracle_plain256(const mlr_inputs *in, mlr_truth_from from, double *o, double *lse,
                               mlr_error *err) {
  int64_t Lmax;
  const mlr_status st = mlr__truth_begin(in, from, &Lmax, err);
  if (st != MLR_OK) return st;
  const int64_t H = in->H;
  int failed = 0;
#pragma omp parallel
  {
    mpfr_t *s = malloc((size_t)(Lmax > 0 ? Lmax : 1) * sizeof(mpfr_t));
    mpfr_t acc, x, m, S, N, c;
    mpfr_inits2(P, acc, x, m, S, N, c, (mpfr_ptr)0);
    if (!s) {
#pragma omp atomic write
      failed = 1;
    } else
      for (int64_t j = 0; j < Lmax; j++) mpfr_init2(s[j], P);
    mpfr_set_d(c, mlr__kv_scale(in, from), MPFR_RNDN);
    mpfr_div_ui(c, c, 24, MPFR_RNDN);
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < in->B; b++) {
      if (!s) continue;
      const int64_t t0 = in->qo_indptr[b], n = in->qo_indptr[b + 1] - t0,
                    L = mlr_inputs_kv_len(in, b);
      for (int64_t i = 0; i < n; i++)
        for (int64_t h = 0; h < H; h++) {
          const int64_t t = t0 + i, Lt = L - (n - 1 - i);
          const uint16_t *q = in->q + (t * H + h) * QK;
          double *oo = o + (t * H + h) * DV;
          if (Lt == 0) {
            for (int d = 0; d < DV; d++) oo[d] = 0.0;
            lse[t * H + h] = -INFINITY;
            continue;
          }
          for (int64_t j = 0; j < Lt; j++) {
            const int64_t row = mlr_inputs_kv_row(in, b, j);
            mpfr_set_zero(acc, 1);
            for (int k = 0; k < QK; k++) {
              mpfr_set_d(x, (double)mlr_bits_f32((uint32_t)q[k] << 16), MPFR_RNDN);
              mpfr_mul_d(x, x, (double)mlr__kv_value(in, from, row, k), MPFR_RNDN);
              mpfr_add(acc, acc, x, MPFR_RNDN);
            }
            mpfr_mul(s[j], acc, c, MPFR_RNDN);
            if (j == 0 || mpfr_cmp(s[j], m) > 0) mpfr_set(m, s[j], MPFR_RNDN);
          }
          mpfr_set_zero(S, 1);
          for (int64_t j = 0; j < Lt; j++) {
            mpfr_sub(s[j], s[j], m, MPFR_RNDN);
            mpfr_exp(s[j], s[j], MPFR_RNDN);
            mpfr_add(S, S, s[j], MPFR_RNDN);
          }
          for (int d = 0; d < DV; d++) {
            mpfr_set_zero(N, 1);
            for (int64_t j = 0; j < Lt; j++) {
              const double v = (double)mlr__kv_value(in, from, mlr_inputs_kv_row(in, b, j), d) *
                               mlr__kv_scale(in, from);
              mpfr_mul_d(x, s[j], v, MPFR_RNDN);
              mpfr_add(N, N, x, MPFR_RNDN);
            }
            mpfr_div(N, N, S, MPFR_RNDN);
            oo[d] = mpfr_get_d(N, MPFR_RNDN);
          }
          mpfr_log(S, S, MPFR_RNDN);
          mpfr_add(S, S, m, MPFR_RNDN);
          lse[t * H + h] = mpfr_get_d(S, MPFR_RNDN);
        }
    }
    if (s) {
      for (int64_t j = 0; j < Lmax; j++) mpfr_clear(s[j]);
      free(s);
    }
    mpfr_clears(acc, x, m, S, N, c, (mpfr_ptr)0);
  }
  if (failed)
    return mlr_error_set(err, MLR_ENOMEM, "out of memory for the plain reference's buffers");
  return MLR_OK;
}
