/* The probe generator (mlr_gen.h, probes): each needle takes the share of every head's softmax the
 * generator aims at, a different one per head and batch; V's first 16 columns spell each token's
 * position; the scales, fp8 Q and spare pages are as the spec says; the spec prints back to
 * itself; every probe cell conforms to the contract. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_formats.h"
#include "mlr_gen.h"
#include "mlr_inputs.h"
#include "mlr_suites.h"
#include "test_gen.h"

#define DK 576

/* element d of Q row (t, h) and of K row r, as the contract defines their values */
static double q_at(const mlr_inputs *in, int64_t t, int64_t h, int d) {
  const int64_t i = (t * in->H + h) * DK + d;
  if (in->q8) return mlr_decode((mlr_format)in->q_format, in->q8[i]) * (double)in->q_scale;
  return mlr_bits_f32((uint32_t)in->q[i] << 16);
}

static double kv_at(const mlr_inputs *in, int64_t row, int d) {
  const int64_t i = row * DK + d;
  if (in->kv_format == MLR_FMT_BF16)
    return mlr_bits_f32((uint32_t)((const uint16_t *)in->kv)[i] << 16);
  return mlr_decode((mlr_format)in->kv_format, ((const uint8_t *)in->kv)[i]);
}

/* the softmax weight of token n for query token t and head h over the batch's first Lt tokens */
static double weight(const mlr_inputs *in, int64_t b, int64_t t, int64_t h, int64_t n, int64_t Lt) {
  double *s = malloc((size_t)Lt * sizeof *s), m = -INFINITY, sum = 0;
  for (int64_t j = 0; j < Lt; j++) {
    const int64_t r = mlr_inputs_kv_row(in, b, j);
    double acc = 0;
    for (int d = 0; d < DK; d++)
      acc += q_at(in, t, h, d) * kv_at(in, r, d) *
             (d < 512 ? mlr_inputs_k_scale(in) : mlr_inputs_kpe_scale(in));
    s[j] = acc * mlr_inputs_sm_scale(in);
    m = fmax(m, s[j]);
  }
  for (int64_t j = 0; j < Lt; j++) sum += exp(s[j] - m);
  const double w = exp(s[n] - m) / sum;
  free(s);
  return w;
}

/* the generator's aim (probe.c): 0.15 + 0.8 frac(0.618.. (h + 1) + 0.414.. b) */
static double aim(int64_t b, int64_t h) {
  const double x = 0.6180339887498949 * (double)(h + 1) + 0.4142135623730951 * (double)b;
  return 0.15 + 0.8 * (x - floor(x));
}

/* every query, the ones the causal rule keeps from their needle too, gives the needle its aimed
 * share of the softmax over the batch's whole length, within bf16's rounding of Q */
Test(probe, needles_take_their_share_head_by_head) {
  gen g;
  gen_make(&g, "lens=300:300:40,q=2,heads=20,needle=299:0:17,seed=5");
  const int64_t needle[3] = {299, 0, 17};
  for (int64_t b = 0; b < 3; b++)
    for (int64_t t = g.in.qo_indptr[b]; t < g.in.qo_indptr[b + 1]; t++) {
      double lo = 1, hi = 0;
      for (int64_t h = 0; h < g.in.H; h++) {
        const double w = weight(&g.in, b, t, h, needle[b], mlr_inputs_kv_len(&g.in, b));
        lo = fmin(lo, w);
        hi = fmax(hi, w);
        cr_expect(fabs(w - aim(b, h)) < 0.02, "batch %lld token %lld head %lld: weight %g, aim %g",
                  (long long)b, (long long)t, (long long)h, w, aim(b, h));
      }
      cr_expect(hi - lo > 0.5, "the heads' weights spread only %g..%g", lo, hi);
    }
  mlr_tf_free(&g.tf);
}

Test(probe, v_spells_the_position) {
  gen g;
  gen_make(&g, "lens=70:1000,page=16,needle=3:999,seed=8");
  for (int64_t b = 0; b < 2; b++)
    for (int64_t p = 0; p < mlr_inputs_kv_len(&g.in, b); p += 7) {
      const int64_t r = mlr_inputs_kv_row(&g.in, b, p);
      for (int d = 0; d < 16; d++) {
        const double v = kv_at(&g.in, r, d) * g.in.kv_scale;
        cr_expect(fabs(fabs(v) - 2) < 0.2 && (v > 0) == (int)((p >> d) & 1),
                  "batch %lld position %lld column %d holds %g", (long long)b, (long long)p, d, v);
      }
    }
  mlr_tf_free(&g.tf);
}

Test(probe, scales_fp8_q_and_spare_pages) {
  gen g;
  gen_make(&g, "lens=40:9,page=8,spare=5,kscale=2,vscale=0.25,qscale=0.03125,sm=0.1,"
               "needle=last:none,seed=3");
  const mlr_inputs *in = &g.in;
  cr_expect_eq(in->k_scale, (float)(2.0 * in->kv_scale));
  cr_expect_eq(in->v_scale, (float)(0.25 * in->kv_scale));
  cr_expect_eq(in->sm_scale, 0.1);
  cr_assert(in->q8 != NULL && in->q_format == MLR_FMT_E4M3);
  cr_expect_eq(in->q_scale, 0.03125f);
  /* 5 + 2 pages in the table, 5 spare: the rows of pages no entry names are NaN */
  cr_assert_eq(in->N, (7 + 5) * 8);
  int used[12] = {0};
  for (int64_t k = 0; k < in->kv_indptr[2]; k++) used[in->kv_indices[k]] = 1;
  int spare = 0;
  for (int pg = 0; pg < 12; pg++) {
    spare += !used[pg];
    for (int s = 0; !used[pg] && s < 8; s++)
      cr_expect(isnan(kv_at(in, pg * 8 + s, 100)), "spare page %d slot %d is not NaN", pg, s);
  }
  cr_expect_eq(spare, 5);
  mlr_tf_free(&g.tf);
}

/* a spec's canonical text parses back to the same fields */
Test(probe, specs_print_back_to_themselves) {
  static const char *const specs[] = {
      "lens=10:20,needle=last:0,kscale=2,vscale=0.5,qscale=0.03125,sm=0.1,spare=3,seed=1",
      "bs=3,kv=50,needle=first,page=16,fmt=e4m3fnuz,qscale=0.25",
      "lens=0:5,needle=none:4,heads=128", "bs=300,kv=1024,needle=last"};
  for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
    mlr_gen_spec a, b;
    mlr_error err = {""};
    char ta[512];
    cr_assert_eq(mlr_gen_spec_parse(specs[k], &a, &err), MLR_OK, "%s", err.msg);
    mlr_gen_spec_format(&a, ta, sizeof ta);
    cr_assert_eq(mlr_gen_spec_parse(ta, &b, &err), MLR_OK, "%s: %s", ta, err.msg);
    cr_assert_eq(a.bs, b.bs, "%s", ta);
    for (int64_t i = 0; i < a.bs; i++)
      cr_expect(a.lens[i] == b.lens[i] && a.needle[i] == b.needle[i], "%s: batch %lld", ta,
                (long long)i);
    cr_expect(a.kscale == b.kscale && a.vscale == b.vscale && a.qscale == b.qscale &&
                  a.sm == b.sm && a.spare == b.spare && a.heads == b.heads && a.page == b.page &&
                  a.kv_format == b.kv_format && a.seed == b.seed,
              "%s", ta);
    mlr_gen_spec_free(&a);
    mlr_gen_spec_free(&b);
  }
}

Test(probe, every_probe_cell_conforms) {
  const mlr_suite *s = mlr_suite_find("probe");
  cr_assert(s != NULL && s->n >= 12);
  for (size_t c = 0; c < s->n; c++) {
    gen g;
    gen_make(&g, s->cells[c].spec);
    mlr_tf_free(&g.tf);
  }
}
