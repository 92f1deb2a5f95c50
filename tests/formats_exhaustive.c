/* Every binary32 input, every format: encodings compared with an independent oracle.
 *
 * Oracle: the non-negative finite values of the format (from tests/formats_spec.h), plus the
 * next value an unbounded exponent would give, sorted. Each magnitude |x| is placed between
 * two neighbours, the nearer is taken (ties to the even code), then the overflow rule: a
 * result beyond max is +-max (sat) or Inf/NaN (nonsat); legacy overflows when |x| > max.
 * Encodings are compared as codes; NaNs as a class; signed zeros are told apart.
 *
 * Per format, for all 2^31 magnitudes and both signs: mlr_encode_f32_array (the vectorised
 * nearest-even path) in sat, nonsat and legacy modes, and mlr_encode_boundaries' list. For all
 * 2^31 non-negative inputs: mlr_encode_f64 (the generic path, binary64 in) and mlr_encode_f32
 * toward zero, in sat mode; both signs and the other modes on every 61st pattern. */
#include <criterion/criterion.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats_spec.h"
#include "mlr_formats.h"

enum { BLOCK = 1 << 16 };
enum { M_SAT, M_NONSAT, M_LEGACY };

typedef struct oracle {
  const spec *s;
  uint32_t max_code, sign, ovf_code; /* ovf_code: the nonsat/legacy overflow result */
  double maxval;
  double *val; /* val[c] for c = 0..max_code+1 (the last one past max) */
} oracle;

static void oracle_init(oracle *o, const spec *s) {
  o->s = s;
  o->max_code = spec_max_code(s);
  o->sign = spec_sign(s);
  o->ovf_code =
      spec_has_inf(s) ? spec_inf_code(s) : (s->kind == SPEC_FNUZ ? o->sign : o->sign - 1u);
  o->val = malloc((o->max_code + 2) * sizeof(double));
  for (uint32_t c = 0; c <= o->max_code + 1; c++) o->val[c] = spec_value(s, c);
  o->maxval = o->val[o->max_code];
}

/* index of the last value <= x (0 <= x) */
static uint32_t oracle_seek(const oracle *o, double x) {
  uint32_t lo = 0, hi = o->max_code + 1;
  if (x >= o->val[hi]) return hi;
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (o->val[mid] <= x)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/* Magnitude result of nearest-even with an unbounded exponent given idx = seek(x):
 * max_code + 1 means overflow. */
static uint32_t oracle_rne(const oracle *o, double x, uint32_t idx) {
  if (idx > o->max_code) return o->max_code + 1;
  const double dlo = x - o->val[idx], dhi = o->val[idx + 1] - x; /* exact: neighbours within 2x */
  if (dlo < dhi) return idx;
  if (dhi < dlo) return idx + 1;
  return (idx & 1u) ? idx + 1 : idx;
}

typedef struct fail_log {
  long count;
  char first[256];
} fail_log;

static void record(fail_log *fl, const char *what, const spec *s, uint32_t pat, uint32_t got,
                   uint32_t want) {
#pragma omp atomic
  fl->count++;
  if (fl->count <= 1) {
#pragma omp critical
    if (!fl->first[0])
      snprintf(fl->first, sizeof fl->first, "FAIL %s format=%s x=%a (0x%08X) got=0x%X want=0x%X",
               what, s->name, (double)mlr_bits_f32(pat), pat, got, want);
  }
}

/* boundaries: index of the last entry <= p */
static size_t bseek(const uint32_t *P, size_t n, uint32_t p) {
  size_t lo = 0, hi = n;
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    if (P[mid] <= p)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

typedef struct ctx {
  const spec *s;
  oracle o;
  int wide;
  uint32_t *BP[3], *BC[3];
  size_t BN[3];
  fail_log fl;
} ctx;

static uint32_t with_sign(const ctx *c, uint32_t mag, int neg) {
  if (c->s->kind == SPEC_FNUZ && (mag == 0 || mag == c->o.sign)) return mag; /* no -0; NaN 0x80 */
  return neg ? (mag | c->o.sign) : mag;
}

/* One block of BLOCK magnitudes starting at p0. F is a compile-time constant at each call
 * site (always_inline), so the library's inline encoders fold the format's parameters. */
static inline __attribute__((always_inline)) void
check_block(ctx *c, const mlr_format F, uint32_t p0, float *xs, uint16_t *codes) {
  const oracle *o = &c->o;
  const spec *s = c->s;
  for (uint32_t k = 0; k < BLOCK; k++) {
    xs[k] = mlr_bits_f32(p0 + k);
    xs[BLOCK + k] = mlr_bits_f32((p0 + k) | 0x80000000u);
  }
  for (int m = 0; m < 3; m++) { /* library: bulk nearest-even, both signs at once */
    const mlr_cvt_opts opt = {F, MLR_RND_NEAREST_EVEN, (mlr_overflow)m};
    mlr_encode_f32_array(c->wide ? (void *)(codes + 2 * m * BLOCK)
                                 : (void *)((uint8_t *)codes + 2 * m * BLOCK),
                         xs, 2 * BLOCK, &opt, NULL);
  }
  size_t bj[3][2];
  for (int m = 0; m < 3; m++) {
    bj[m][0] = bseek(c->BP[m], c->BN[m], p0);
    bj[m][1] = bseek(c->BP[m], c->BN[m], p0 | 0x80000000u);
  }
  const uint32_t nan_any =
      s->kind == SPEC_FNUZ ? o->sign : (s->kind == SPEC_IEEE ? o->ovf_code | 1u : o->sign - 1u);
  uint32_t idx = p0 < 0x7F800000u ? oracle_seek(o, (double)xs[0]) : 0;
  for (uint32_t k = 0; k < BLOCK; k++) {
    const uint32_t p = p0 + k;
    const double x = (double)xs[k];
    /* expected magnitudes of the three overflow modes, and toward zero (sat) */
    uint32_t want[3], want_rtz;
    if (p > 0x7F800000u) {
      want[0] = want[1] = want[2] = want_rtz = nan_any;
    } else if (p == 0x7F800000u) {
      want[0] = want_rtz = o->max_code;
      want[1] = want[2] = o->ovf_code;
    } else {
      while (idx <= o->max_code && o->val[idx + 1] <= x) idx++;
      const uint32_t r = oracle_rne(o, x, idx);
      want[0] = r > o->max_code ? o->max_code : r;
      want[1] = r > o->max_code ? o->ovf_code : r;
      want[2] = x > o->maxval ? o->ovf_code : r;
      want_rtz = idx > o->max_code ? o->max_code : idx;
    }
    for (int neg = 0; neg < 2; neg++) {
      const uint32_t pat = neg ? (p | 0x80000000u) : p;
      for (int m = 0; m < 3; m++) {
        const uint32_t w = with_sign(c, want[m], neg);
        const size_t at = (size_t)(2 * m + neg) * BLOCK + k;
        const uint32_t got = c->wide ? codes[at] : ((uint8_t *)codes)[at];
        if (got != w && !(spec_is_nan(s, w) && spec_is_nan(s, got)))
          record(&c->fl,
                 m == 0   ? "rne/sat f32"
                 : m == 1 ? "rne/nonsat f32"
                          : "rne/legacy f32",
                 s, pat, got, w);
        size_t *j = &bj[m][neg]; /* the code of the last listed boundary */
        while (*j + 1 < c->BN[m] && c->BP[m][*j + 1] <= pat) (*j)++;
        if (c->BC[m][*j] != got) record(&c->fl, "boundaries list", s, pat, c->BC[m][*j], got);
      }
    }
    /* the generic paths: non-negative inputs in sat mode; every 61st pattern in all modes
     * and both signs (toward zero: legacy overflows when |x| > max, else like sat) */
    const int all = p % 61 == 0;
    for (int neg = 0; neg < (all ? 2 : 1); neg++) {
      const uint32_t pat = neg ? (p | 0x80000000u) : p;
      const float xf = mlr_bits_f32(pat);
      for (int m = 0; m < (all ? 3 : 1); m++) {
        const uint32_t w = with_sign(c, want[m], neg);
        const uint32_t g = mlr_encode_f64((double)xf, F, MLR_RND_NEAREST_EVEN, (mlr_overflow)m, 0);
        if (g != w && !(spec_is_nan(s, w) && spec_is_nan(s, g)))
          record(&c->fl, "rne f64 (generic)", s, pat, g, w);
        uint32_t wz = want_rtz;
        if (m == M_NONSAT && p == 0x7F800000u) wz = o->ovf_code;
        if (m == M_LEGACY && p >= 0x7F800000u) wz = p == 0x7F800000u ? o->ovf_code : nan_any;
        if (m == M_LEGACY && p < 0x7F800000u && x > o->maxval) wz = o->ovf_code;
        wz = with_sign(c, wz, neg);
        const uint32_t gz = mlr_encode_f32(xf, F, MLR_RND_TOWARD_ZERO, (mlr_overflow)m, 0);
        if (gz != wz && !(spec_is_nan(s, wz) && spec_is_nan(s, gz)))
          record(&c->fl, "rtz f32 (generic)", s, pat, gz, wz);
      }
    }
  }
}

static void run_format(mlr_format f) {
  ctx *c = calloc(1, sizeof *c);
  c->s = &SPECS[f];
  oracle_init(&c->o, c->s);
  c->wide = c->s->bits == 16;
  for (int m = 0; m < 3; m++) {
    cr_assert_eq(mlr_encode_boundaries(f, MLR_RND_NEAREST_EVEN, (mlr_overflow)m, &c->BP[m],
                                       &c->BC[m], &c->BN[m]),
                 MLR_OK);
    for (size_t i = 1; i < c->BN[m]; i++)
      cr_assert_neq(c->BC[m][i], c->BC[m][i - 1], "boundary %zu repeats a code", i);
  }
  const long nblocks = (long)((1ull << 31) / BLOCK);
  omp_set_num_threads(omp_get_num_procs());
#pragma omp parallel
  {
    float *xs = malloc(2 * BLOCK * sizeof(float));
    uint16_t *codes = malloc(6 * BLOCK * sizeof(uint16_t));
#pragma omp for schedule(dynamic, 16)
    for (long b = 0; b < nblocks; b++) {
      const uint32_t p0 = (uint32_t)b * BLOCK;
      switch (f) {
      case MLR_FMT_E4M3:
        check_block(c, MLR_FMT_E4M3, p0, xs, codes);
        break;
      case MLR_FMT_E4M3FNUZ:
        check_block(c, MLR_FMT_E4M3FNUZ, p0, xs, codes);
        break;
      case MLR_FMT_E5M2:
        check_block(c, MLR_FMT_E5M2, p0, xs, codes);
        break;
      case MLR_FMT_E5M2FNUZ:
        check_block(c, MLR_FMT_E5M2FNUZ, p0, xs, codes);
        break;
      case MLR_FMT_BF16:
        check_block(c, MLR_FMT_BF16, p0, xs, codes);
        break;
      default:
        check_block(c, MLR_FMT_FP16, p0, xs, codes);
        break;
      }
    }
    free(xs);
    free(codes);
  }
  for (int m = 0; m < 3; m++) {
    free(c->BP[m]);
    free(c->BC[m]);
  }
  free(c->o.val);
  const long failures = c->fl.count;
  char first[256];
  memcpy(first, c->fl.first, sizeof first);
  free(c);
  cr_assert_eq(failures, 0, "%ld mismatches in %s; first: %s", failures, SPECS[f].name, first);
}

Test(formats_exhaustive, e4m3) { run_format(MLR_FMT_E4M3); }
Test(formats_exhaustive, e4m3fnuz) { run_format(MLR_FMT_E4M3FNUZ); }
Test(formats_exhaustive, e5m2) { run_format(MLR_FMT_E5M2); }
Test(formats_exhaustive, e5m2fnuz) { run_format(MLR_FMT_E5M2FNUZ); }
Test(formats_exhaustive, bf16) { run_format(MLR_FMT_BF16); }
Test(formats_exhaustive, fp16) { run_format(MLR_FMT_FP16); }
