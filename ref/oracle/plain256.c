/* The plain MPFR reference (mlr_oracle.h): every operation in MPFR at 256 bits, the way one
 * writes attention in arbitrary precision without thinking about exactness: each logit is the
 * codes' dot over the latent columns times k_scale x q_scale x sm_scale plus the rope columns'
 * times kpe_scale x q_scale x sm_scale (one dot when the two scales agree). It checks the
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

/* the logit scales of the nope and rope parts at P bits: part scale x q scale x sm (one rounding
 * at most: a division by 24 or a product of binary64 numbers) */
static void part_scales(const mlr__truth_scales *sc, mpfr_t cn, mpfr_t cr) {
  mpfr_set_d(cn, sc->k * sc->q, MPFR_RNDN); /* exact: 24-bit times 24-bit */
  mpfr_set_d(cr, sc->kpe * sc->q, MPFR_RNDN);
  if (sc->sm24) {
    mpfr_div_ui(cn, cn, 24, MPFR_RNDN);
    mpfr_div_ui(cr, cr, 24, MPFR_RNDN);
  } else {
    mpfr_mul_d(cn, cn, sc->sm, MPFR_RNDN);
    mpfr_mul_d(cr, cr, sc->sm, MPFR_RNDN);
  }
}

/* the logit of Q row q (values before Q's scale) and KV row `row`: the dot of the codes' values
 * over the nope and rope columns, each part times its scale (one sum when the scales agree) */
static void logit(const mlr_inputs *in, mlr_truth_from from, int64_t qrow, int64_t row,
                  const mpfr_t cn, const mpfr_t cr, mpfr_t s, mpfr_t acc, mpfr_t acc2, mpfr_t x) {
  const int one = mpfr_equal_p(cn, cr);
  mpfr_set_zero(acc, 1);
  mpfr_set_zero(acc2, 1);
  for (int k = 0; k < QK; k++) {
    mpfr_set_d(x, (double)mlr__q_value(in, qrow, k), MPFR_RNDN);
    mpfr_mul_d(x, x, (double)mlr__kv_value(in, from, row, k), MPFR_RNDN);
    mpfr_add(k < DV || one ? acc : acc2, k < DV || one ? acc : acc2, x, MPFR_RNDN);
  }
  mpfr_mul(s, acc, cn, MPFR_RNDN);
  if (!one) {
    mpfr_mul(acc2, acc2, cr, MPFR_RNDN);
    mpfr_add(s, s, acc2, MPFR_RNDN);
  }
}

mlr_status mlr_oracle_plain256(const mlr_inputs *in, mlr_truth_from from, double *o, double *lse,
                               mlr_error *err) {
  int64_t Lmax;
  const mlr_status st = mlr__truth_begin(in, from, &Lmax, err);
  if (st != MLR_OK) return st;
  const int64_t H = in->H;
  const mlr__truth_scales sc = mlr__scales(in, from);
  int failed = 0;
#pragma omp parallel
  {
    mpfr_t *s = malloc((size_t)(Lmax > 0 ? Lmax : 1) * sizeof(mpfr_t));
    mpfr_t acc, acc2, x, m, S, N, cn, cr;
    mpfr_inits2(P, acc, acc2, x, m, S, N, cn, cr, (mpfr_ptr)0);
    if (!s) {
#pragma omp atomic write
      failed = 1;
    } else
      for (int64_t j = 0; j < Lmax; j++) mpfr_init2(s[j], P);
    part_scales(&sc, cn, cr);
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < in->B; b++) {
      if (!s) continue;
      const int64_t t0 = in->qo_indptr[b], n = in->qo_indptr[b + 1] - t0,
                    L = mlr_inputs_kv_len(in, b);
      for (int64_t i = 0; i < n; i++)
        for (int64_t h = 0; h < H; h++) {
          const int64_t t = t0 + i, Lt = mlr_inputs_visible(in, L, n, i);
          double *oo = o + (t * H + h) * DV;
          if (Lt <= 0) {
            for (int d = 0; d < DV; d++) oo[d] = 0.0;
            lse[t * H + h] = -INFINITY;
            continue;
          }
          for (int64_t j = 0; j < Lt; j++) {
            logit(in, from, t * H + h, mlr_inputs_kv_row(in, b, j), cn, cr, s[j], acc, acc2, x);
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
                               sc.v; /* exact */
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
    mpfr_clears(acc, acc2, x, m, S, N, cn, cr, (mpfr_ptr)0);
  }
  if (failed)
    return mlr_error_set(err, MLR_ENOMEM, "out of memory for the plain reference's buffers");
  return MLR_OK;
}
