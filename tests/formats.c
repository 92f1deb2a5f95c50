/* ref/formats: decoding against MPFR, the documented special cases, rounding modes, bulk
 * against scalar, validation and status codes. (Every binary32 input: formats_exhaustive.c.) */
#include <criterion/criterion.h>
#include <mpfr.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_rng.h"
#include "formats_spec.h"
#include "mlr_formats.h"

/* Every code of every format decodes to the value MPFR computes from the spec's formula,
 * exactly (compared as binary32 encodings); NaN codes decode to NaN, Inf codes to Inf. */
Test(formats, decode_every_code_matches_mpfr) {
  mpfr_t v;
  mpfr_init2(v, 64);
  for (int fi = 0; fi < MLR_FMT_COUNT; fi++) {
    const spec *s = &SPECS[fi];
    const uint32_t ncodes = 1u << s->bits, sign = spec_sign(s), maxc = spec_max_code(s);
    for (uint32_t c = 0; c < ncodes; c++) {
      const float got = mlr_decode((mlr_format)fi, c);
      const uint32_t mag = c & (sign - 1u);
      if (spec_is_nan(s, c)) {
        cr_assert(got != got, "%s 0x%X should decode to NaN", s->name, c);
        cr_assert(mlr_is_nan((mlr_format)fi, c));
        continue;
      }
      cr_assert(!mlr_is_nan((mlr_format)fi, c), "%s 0x%X is not a NaN", s->name, c);
      if (spec_has_inf(s) && mag == spec_inf_code(s)) {
        cr_assert(mlr_f32_bits(got) == ((c & sign) ? 0xFF800000u : 0x7F800000u), "%s 0x%X is Inf",
                  s->name, c);
        continue;
      }
      cr_assert(mag <= maxc);
      const uint32_t e = mag >> s->mbits, m = mag & ((1u << s->mbits) - 1u);
      if (e == 0) {
        mpfr_set_ui(v, m, MPFR_RNDN);
        mpfr_mul_2si(v, v, 1 - s->bias - s->mbits, MPFR_RNDN);
      } else {
        mpfr_set_ui(v, (1u << s->mbits) + m, MPFR_RNDN);
        mpfr_mul_2si(v, v, (long)e - s->bias - s->mbits, MPFR_RNDN);
      }
      if (c & sign) mpfr_neg(v, v, MPFR_RNDN);
      const float want = mpfr_get_flt(v, MPFR_RNDN);
      cr_assert(mpfr_cmp_d(v, (double)want) == 0, "%s 0x%X: value not representable in binary32",
                s->name, c);
      cr_assert_eq(mlr_f32_bits(got), mlr_f32_bits(want), "%s 0x%X: got %a want %a", s->name, c,
                   (double)got, (double)want);
    }
  }
  mpfr_clear(v);
}

Test(formats, contract_table) {
  /* The figures of the contract in mlr_formats.h. */
  cr_assert_eq(mlr_format_max(MLR_FMT_E4M3), 448.0f);
  cr_assert_eq(mlr_format_max(MLR_FMT_E4M3FNUZ), 240.0f);
  cr_assert_eq(mlr_format_max(MLR_FMT_E5M2), 57344.0f);
  cr_assert_eq(mlr_format_max(MLR_FMT_E5M2FNUZ), 57344.0f);
  cr_assert_eq(mlr_format_max(MLR_FMT_FP16), 65504.0f);
  cr_assert_eq(mlr_f32_bits(mlr_format_max(MLR_FMT_BF16)), 0x7F7F0000u);
  cr_assert_eq(mlr_decode(MLR_FMT_E4M3, 0x08), 0x1p-6f); /* min normal */
  cr_assert_eq(mlr_decode(MLR_FMT_E4M3, 0x01), 0x1p-9f); /* min subnormal */
  cr_assert_eq(mlr_decode(MLR_FMT_E4M3FNUZ, 0x08), 0x1p-7f);
  cr_assert_eq(mlr_decode(MLR_FMT_E4M3FNUZ, 0x01), 0x1p-10f);
  cr_assert_eq(mlr_decode(MLR_FMT_E5M2, 0x01), 0x1p-16f);
  cr_assert_eq(mlr_decode(MLR_FMT_E5M2FNUZ, 0x01), 0x1p-17f);
  cr_assert_eq(mlr_decode(MLR_FMT_FP16, 0x0001), 0x1p-24f);
  cr_assert_eq(mlr_decode(MLR_FMT_BF16, 0x0001), 0x1p-133f);
  /* the same code means half the value in FNUZ (bias one larger) */
  for (uint32_t c = 1; c < 0x7F; c++)
    cr_assert_eq(mlr_decode(MLR_FMT_E4M3FNUZ, c) * 2.0f, mlr_decode(MLR_FMT_E4M3, c));
  cr_assert(mlr_is_nan(MLR_FMT_E4M3, 0x7F) && mlr_is_nan(MLR_FMT_E4M3, 0xFF));
  cr_assert(mlr_is_nan(MLR_FMT_E4M3FNUZ, 0x80) && !mlr_is_nan(MLR_FMT_E4M3FNUZ, 0xFF));
  cr_assert(mlr_is_nan(MLR_FMT_E5M2, 0x7D) && !mlr_is_nan(MLR_FMT_E5M2, 0x7C));
}

static uint32_t enc(double x, mlr_format f, mlr_rounding r, mlr_overflow o) {
  return mlr_encode_f64(x, f, r, o, 0);
}
static uint32_t enc32(float x, mlr_format f, mlr_rounding r, mlr_overflow o) {
  return mlr_encode_f32(x, f, r, o, 0);
}

/* The overflow behaviour of the known converters (mlr_formats.h). */
Test(formats, overflow_rules_e4m3) {
  /* NVIDIA cvt.rn.satfinite: |x| > max (Inf included) gives +-448, NaN stays NaN */
  cr_assert_eq(enc32(1e6f, MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE), 0x7E);
  cr_assert_eq(enc32(-INFINITY, MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE), 0xFE);
  cr_assert(
      mlr_is_nan(MLR_FMT_E4M3, enc32(NAN, MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE)));
  /* PyTorch .to(float8_e4m3fn), non-saturating: 464 rounds to 448, anything above is NaN */
  cr_assert_eq(enc32(464.0f, MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT), 0x7E);
  cr_assert_eq(enc32(nextafterf(464.0f, 1e9f), MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT),
               0x7F);
  cr_assert_eq(enc32(-500.0f, MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT), 0xFF);
  cr_assert(mlr_is_nan(MLR_FMT_E4M3,
                       enc32(INFINITY, MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT)));
  /* the old amd_hip_fp8.h tested overflow before rounding: (448, 464] became NaN */
  cr_assert_eq(enc32(448.0f, MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, MLR_OVF_LEGACY), 0x7E);
  cr_assert_eq(enc32(nextafterf(448.0f, 1e9f), MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, MLR_OVF_LEGACY),
               0x7F);
  cr_assert_eq(enc32(464.0f, MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, MLR_OVF_LEGACY), 0x7F);
}

Test(formats, overflow_rules_other_formats) {
  /* IEEE-like: overflow to Inf after rounding; the tie at max + ulp/2 rounds to even = up */
  cr_assert_eq(enc(61440.0, MLR_FMT_E5M2, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT), 0x7C);
  cr_assert_eq(enc(nextafter(61440.0, 0), MLR_FMT_E5M2, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT),
               0x7B);
  cr_assert_eq(enc(61440.0, MLR_FMT_E5M2, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE), 0x7B);
  cr_assert_eq(enc(65520.0, MLR_FMT_FP16, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT), 0x7C00);
  cr_assert_eq(enc(-65519.99, MLR_FMT_FP16, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT), 0xFBFF);
  cr_assert_eq(enc32(3.4e38f, MLR_FMT_BF16, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT), 0x7F80);
  /* FNUZ: no Inf, so non-saturating overflow is the single NaN 0x80, whatever the sign */
  cr_assert_eq(enc(-1e9, MLR_FMT_E4M3FNUZ, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT), 0x80);
  /* tie -> 256 */
  cr_assert_eq(enc(248.0, MLR_FMT_E4M3FNUZ, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT), 0x80);
  cr_assert_eq(enc(247.9, MLR_FMT_E4M3FNUZ, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT), 0x7F);
  cr_assert_eq(enc(-INFINITY, MLR_FMT_E5M2FNUZ, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE), 0xFF);
}

Test(formats, zeros_and_nans) {
  for (int f = 0; f < MLR_FMT_COUNT; f++) {
    const mlr_format_params p = mlr_format_get((mlr_format)f);
    cr_assert_eq(enc(0.0, (mlr_format)f, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE), 0u);
    /* -0 and negative values that round to zero: signed zero, except FNUZ (0x80 is NaN) */
    const uint32_t negzero = p.fnuz ? 0u : p.sign_bit;
    cr_assert_eq(enc(-0.0, (mlr_format)f, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE), negzero,
                 "format %d", f);
    cr_assert_eq(enc(-1e-300, (mlr_format)f, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE), negzero);
    cr_assert_eq(enc32(-1e-45f, (mlr_format)f, MLR_RND_NEAREST_EVEN, MLR_OVF_NONSAT), negzero);
    cr_assert_eq(enc32(-1e-45f, (mlr_format)f, MLR_RND_TOWARD_ZERO, MLR_OVF_NONSAT), negzero);
    /* NaN in gives the canonical NaN in every mode (sign kept where the format has two) */
    for (int o = 0; o < 3; o++) {
      const uint32_t c = enc32(-NAN, (mlr_format)f, MLR_RND_NEAREST_EVEN, (mlr_overflow)o);
      cr_assert(mlr_is_nan((mlr_format)f, c));
      cr_assert_eq(c, p.fnuz ? 0x80u : (p.nan_code | p.sign_bit));
      cr_assert_eq(enc(NAN, (mlr_format)f, MLR_RND_TOWARD_ZERO, (mlr_overflow)o), p.nan_code);
    }
  }
  cr_assert_eq(enc(NAN, MLR_FMT_BF16, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE), 0x7FC0);
  cr_assert_eq(enc(NAN, MLR_FMT_FP16, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE), 0x7E00);
}

/* Encoding from binary64 rounds once. x lies just above the midpoint of e4m3's 1 and 1.125:
 * through binary32 it would first become the midpoint 1.0625 and then round to even (1.0). */
Test(formats, binary64_has_no_double_rounding) {
  const double x = 1.0625 + 0x1p-30;
  cr_assert_eq(enc(x, MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE), 0x39); /* 1.125 */
  /* 1.0 */
  cr_assert_eq(enc32((float)x, MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE), 0x38);
  /* the same for bf16: 1 + 2^-8 is the midpoint of 1 and 1 + 2^-7 */
  const double y = 1.0 + 0x1p-8 + 0x1p-40;
  cr_assert_eq(enc(y, MLR_FMT_BF16, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE), 0x3F81);
  cr_assert_eq(enc32((float)y, MLR_FMT_BF16, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE), 0x3F80);
  /* binary64 subnormals and values far below every format's range */
  cr_assert_eq(enc(0x1p-1074, MLR_FMT_FP16, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE), 0);
  /* above half of 2^-24 */
  cr_assert_eq(enc(0x1.8p-25, MLR_FMT_FP16, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE), 1);
  /* the tie goes to 0 */
  cr_assert_eq(enc(0x1p-25, MLR_FMT_FP16, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE), 0);
}

Test(formats, toward_zero) {
  cr_assert_eq(enc(1.124, MLR_FMT_E4M3, MLR_RND_TOWARD_ZERO, MLR_OVF_SATURATE), 0x38);
  cr_assert_eq(enc(-1.124, MLR_FMT_E4M3, MLR_RND_TOWARD_ZERO, MLR_OVF_SATURATE), 0xB8);
  cr_assert_eq(enc(0x1.fffffp-10, MLR_FMT_E4M3, MLR_RND_TOWARD_ZERO, MLR_OVF_SATURATE), 0x00);
  /* IEEE 754 7.4: toward zero, a finite overflow gives the largest finite, in every mode */
  cr_assert_eq(enc(1e30, MLR_FMT_E4M3, MLR_RND_TOWARD_ZERO, MLR_OVF_NONSAT), 0x7E);
  cr_assert_eq(enc(1e30, MLR_FMT_FP16, MLR_RND_TOWARD_ZERO, MLR_OVF_NONSAT), 0x7BFF);
  /* ...but Inf stays Inf where the format has it, and legacy tests |x| > max first */
  cr_assert_eq(enc(INFINITY, MLR_FMT_FP16, MLR_RND_TOWARD_ZERO, MLR_OVF_NONSAT), 0x7C00);
  cr_assert_eq(enc(449.0, MLR_FMT_E4M3, MLR_RND_TOWARD_ZERO, MLR_OVF_LEGACY), 0x7F);
}

/* Stochastic rounding: with r = k * 2^24 for k = 0..255 (evenly spaced), a value a quarter of
 * the way from 1 to 1.125 rounds up for exactly 64 of them; r = 0 is truncation; the largest
 * r rounds up every inexact value. */
Test(formats, stochastic_rounding) {
  const double x = 1.0 + 0.25 * 0.125;
  int ups = 0;
  for (uint32_t k = 0; k < 256; k++)
    ups += mlr_encode_f64(x, MLR_FMT_E4M3, MLR_RND_STOCHASTIC, MLR_OVF_SATURATE, k << 24) == 0x39;
  cr_assert_eq(ups, 64);
  ups = 0;
  for (uint32_t k = 0; k < 256; k++)
    ups += mlr_encode_f64(-x, MLR_FMT_E4M3, MLR_RND_STOCHASTIC, MLR_OVF_SATURATE, k << 24) == 0xB9;
  cr_assert_eq(ups, 64, "rounds away from zero for negatives too");
  /* the whole code range of fp16 and e5m2: r = 0 is RTZ, r = max rounds every inexact value up */
  for (uint32_t pat = 0; pat < 0x7F800000u; pat += 4093) {
    const float xf = mlr_bits_f32(pat);
    for (int f = 0; f < MLR_FMT_COUNT; f++) {
      const uint32_t z =
          mlr_encode_f32(xf, (mlr_format)f, MLR_RND_TOWARD_ZERO, MLR_OVF_SATURATE, 0);
      cr_assert_eq(mlr_encode_f32(xf, (mlr_format)f, MLR_RND_STOCHASTIC, MLR_OVF_SATURATE, 0), z);
      const uint32_t u =
          mlr_encode_f32(xf, (mlr_format)f, MLR_RND_STOCHASTIC, MLR_OVF_SATURATE, 0xFFFFFFFFu);
      const int exact = mlr_decode((mlr_format)f, z) == xf;
      if (exact || z == mlr_format_get((mlr_format)f).max_code)
        cr_assert_eq(u, z, "format %d x=%a", f, (double)xf);
      else
        cr_assert(u == z + 1 || (((xf - mlr_decode((mlr_format)f, z)) /
                                  (mlr_decode((mlr_format)f, z + 1) -
                                   mlr_decode((mlr_format)f, z))) < 0x1p-32f &&
                                 u == z),
                  "format %d x=%a z=0x%X u=0x%X", f, (double)xf, z, u);
    }
  }
  /* an overflow by stochastic rounding follows the overflow rule */
  cr_assert_eq(mlr_encode_f64(450.0, MLR_FMT_E4M3, MLR_RND_STOCHASTIC, MLR_OVF_NONSAT, 0xFFFFFFFFu),
               0x7F);
  cr_assert_eq(
      mlr_encode_f64(450.0, MLR_FMT_E4M3, MLR_RND_STOCHASTIC, MLR_OVF_SATURATE, 0xFFFFFFFFu), 0x7E);
  cr_assert_eq(mlr_encode_f64(450.0, MLR_FMT_E4M3, MLR_RND_STOCHASTIC, MLR_OVF_NONSAT, 0), 0x7E);
}

/* Bulk functions give the scalar results element by element, whatever the thread count. */
Test(formats, bulk_matches_scalar) {
  enum { N = 300007 };
  double *x64 = malloc(N * sizeof *x64);
  float *x32 = malloc(N * sizeof *x32), *dec = malloc(N * sizeof *dec);
  uint32_t *rb = malloc(N * sizeof *rb);
  uint16_t *c1 = malloc(N * 2), *c2 = malloc(N * 2);
  uint64_t *bits = malloc(N * sizeof *bits);
  mlr_rng_bits_array(bits, N, 99, 1, 0, 0);
  for (size_t i = 0; i < N; i++) { /* random bit patterns: every class of input */
    x64[i] = mlr_bits_f64(bits[i]);
    x32[i] = mlr_bits_f32((uint32_t)(bits[i] >> 32));
    if (i % 3 == 0) x64[i] = (double)x32[i] * 0x1p-20; /* and values inside the formats' ranges */
    if (i % 3 == 1) x32[i] = (float)(x64[i] = ldexp((double)(bits[i] >> 40), -20) - 8.0);
    rb[i] = (uint32_t)bits[i];
  }
  for (int f = 0; f < MLR_FMT_COUNT; f++)
    for (int r = 0; r < 3; r++)
      for (int o = 0; o < 3; o++) {
        const mlr_cvt_opts opt = {(mlr_format)f, (mlr_rounding)r, (mlr_overflow)o};
        const int wide = mlr_format_get((mlr_format)f).bits == 16;
        for (int threads = 1; threads <= 2; threads++) {
          omp_set_num_threads(threads);
          cr_assert_eq(mlr_encode_f32_array(c1, x32, N, &opt, rb), MLR_OK);
          cr_assert_eq(mlr_encode_f64_array(c2, x64, N, &opt, rb), MLR_OK);
          for (size_t i = 0; i < N; i++) {
            const uint32_t g1 = wide ? c1[i] : ((uint8_t *)c1)[i],
                           g2 = wide ? c2[i] : ((uint8_t *)c2)[i];
            cr_assert_eq(
                g1, mlr_encode_f32(x32[i], (mlr_format)f, (mlr_rounding)r, (mlr_overflow)o, rb[i]),
                "f32 fmt %d rnd %d ovf %d i %zu", f, r, o, i);
            cr_assert_eq(
                g2, mlr_encode_f64(x64[i], (mlr_format)f, (mlr_rounding)r, (mlr_overflow)o, rb[i]),
                "f64 fmt %d rnd %d ovf %d i %zu", f, r, o, i);
          }
        }
        if (r == 0 && o == 0) {
          cr_assert_eq(mlr_decode_array(dec, c1, N, (mlr_format)f), MLR_OK);
          for (size_t i = 0; i < N; i++) {
            const uint32_t c = wide ? c1[i] : ((uint8_t *)c1)[i];
            cr_assert_eq(mlr_f32_bits(dec[i]), mlr_f32_bits(mlr_decode((mlr_format)f, c)));
          }
        }
      }
  /* decode of every 16-bit code through the bulk path, NaN payloads included */
  for (uint32_t c = 0; c < 65536; c++) c1[c] = (uint16_t)c;
  for (int f = MLR_FMT_BF16; f <= MLR_FMT_FP16; f++) {
    cr_assert_eq(mlr_decode_array(dec, c1, 65536, (mlr_format)f), MLR_OK);
    for (uint32_t c = 0; c < 65536; c++)
      cr_assert_eq(mlr_f32_bits(dec[c]), mlr_f32_bits(mlr_decode((mlr_format)f, c)),
                   "fmt %d code 0x%X", f, c);
  }
  free(x64);
  free(x32);
  free(dec);
  free(rb);
  free(c1);
  free(c2);
  free(bits);
}

Test(formats, validation_and_status_codes) {
  mlr_cvt_opts o = {MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE};
  cr_assert_eq(mlr_cvt_opts_check(&o), MLR_OK);
  cr_assert_eq(mlr_cvt_opts_check(NULL), MLR_EINVAL);
  o.format = (mlr_format)6;
  cr_assert_eq(mlr_cvt_opts_check(&o), MLR_EFORMAT);
  o.format = (mlr_format)-1;
  cr_assert_eq(mlr_cvt_opts_check(&o), MLR_EFORMAT);
  o.format = MLR_FMT_BF16;
  o.rounding = (mlr_rounding)3;
  cr_assert_eq(mlr_cvt_opts_check(&o), MLR_EROUNDING);
  o.rounding = MLR_RND_STOCHASTIC;
  o.overflow = (mlr_overflow)3;
  cr_assert_eq(mlr_cvt_opts_check(&o), MLR_EOVERFLOW_MODE);
  o.overflow = MLR_OVF_SATURATE;
  float x = 1.0f;
  uint8_t c;
  cr_assert_eq(mlr_encode_f32_array(&c, &x, 1, &o, NULL), MLR_EINVAL,
               "stochastic rounding needs random bits");
  cr_assert_eq(mlr_encode_f32_array(NULL, &x, 1, &o, NULL), MLR_EINVAL);
  cr_assert_eq(mlr_encode_f32_array(NULL, NULL, 0, &o, NULL), MLR_OK, "nothing to do is fine");
  cr_assert_eq(mlr_decode_array(&x, &c, 1, (mlr_format)9), MLR_EFORMAT);
  uint32_t *P, *C;
  size_t n;
  cr_assert_eq(
      mlr_encode_boundaries(MLR_FMT_E4M3, MLR_RND_STOCHASTIC, MLR_OVF_SATURATE, &P, &C, &n),
      MLR_EROUNDING);
  /* names: every canonical name parses back; unknown names give the documented codes */
  for (int f = 0; f < MLR_FMT_COUNT; f++) {
    mlr_format g;
    cr_assert_eq(mlr_format_parse(mlr_format_name((mlr_format)f), &g), MLR_OK);
    cr_assert_eq((int)g, f);
    cr_assert(strstr(mlr_format_names(), mlr_format_name((mlr_format)f)));
  }
  mlr_format g;
  mlr_rounding r;
  mlr_overflow ov;
  cr_assert_eq(mlr_format_parse("e4m3fn", &g), MLR_OK);
  cr_assert_eq(g, MLR_FMT_E4M3);
  cr_assert_eq(mlr_format_parse("E4M3", &g), MLR_EFORMAT);
  cr_assert_eq(mlr_format_parse(NULL, &g), MLR_EFORMAT);
  cr_assert_eq(mlr_rounding_parse("sr", &r), MLR_OK);
  cr_assert_eq(r, MLR_RND_STOCHASTIC);
  cr_assert_eq(mlr_rounding_parse("nearest", &r), MLR_EROUNDING);
  cr_assert_eq(mlr_overflow_parse("legacy", &ov), MLR_OK);
  cr_assert_eq(ov, MLR_OVF_LEGACY);
  cr_assert_eq(mlr_overflow_parse("saturate", &ov), MLR_EOVERFLOW_MODE);
  cr_assert_null(mlr_format_name((mlr_format)6));
  /* every status has its own description */
  for (int a = 0; a <= MLR_ECONTRACT; a++)
    for (int b = a + 1; b <= MLR_ECONTRACT; b++)
      cr_assert_str_neq(mlr_status_str((mlr_status)a), mlr_status_str((mlr_status)b));
}

/* The first lines of 'formats boundaries --format e4m3 --overflow sat', derived by hand:
 * 2^-10 is half the least subnormal and a tie with 0 (even), so codes change just above it;
 * 3 * 2^-11 is the midpoint of 2^-9 and 2^-8, a tie that goes to the even 2^-8. */
Test(formats, boundaries_known_lines) {
  uint32_t *P, *C;
  size_t n;
  cr_assert_eq(
      mlr_encode_boundaries(MLR_FMT_E4M3, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE, &P, &C, &n),
      MLR_OK);
  cr_assert_eq(P[0], 0x00000000u);
  cr_assert_eq(C[0], 0x00u);
  cr_assert_eq(P[1], mlr_f32_bits(0x1p-10f) + 1);
  cr_assert_eq(C[1], 0x01u);
  cr_assert_eq(P[2], mlr_f32_bits(0x1.8p-9f));
  cr_assert_eq(C[2], 0x02u);
  /* positive side: 127 codes up to 0x7E, then the NaN patterns; sign change; negative side */
  cr_assert_eq(n, 256);
  cr_assert_eq(P[127], 0x7F800001u);
  cr_assert_eq(C[127], 0x7Fu);
  cr_assert_eq(P[128], 0x80000000u);
  cr_assert_eq(C[128], 0x80u);
  free(P);
  free(C);
  /* toward zero: the first change is at the least subnormal itself */
  cr_assert_eq(
      mlr_encode_boundaries(MLR_FMT_E4M3, MLR_RND_TOWARD_ZERO, MLR_OVF_SATURATE, &P, &C, &n),
      MLR_OK);
  cr_assert_eq(P[1], mlr_f32_bits(0x1p-9f));
  free(P);
  free(C);
}

/* The binary64 -> bf16 fast path equals the generic encoder, on random binary64 patterns and
 * on values next to bf16 midpoints with sticky bits below binary32's reach. */
Test(formats, bf16_fast_path_matches_generic) {
  for (uint64_t i = 0; i < 4000000; i++) {
    const uint64_t w = mlr_rng_bits(31, 5, 0, i);
    double x = mlr_bits_f64(w);
    if (i % 2) { /* a bf16 midpoint in the normal range, nudged by a few binary64 ulps */
      const uint64_t mid = ((w >> 20) & 0x7FFFull) << 45 | (1ull << 44);
      x = mlr_bits_f64((mid + (uint64_t)(1023 - 127) * (1ull << 52)) ^ (w & (1ull << 63)));
      x = (i % 4 == 1) ? nextafter(x, 0.0) : (i % 8 == 3) ? nextafter(x, INFINITY) : x;
    }
    for (int o = 0; o < 3; o++)
      cr_assert_eq(
          mlr_encode_f64(x, MLR_FMT_BF16, MLR_RND_NEAREST_EVEN, (mlr_overflow)o, 0),
          mlr__encode_f64_generic(x, MLR_FMT_BF16, MLR_RND_NEAREST_EVEN, (mlr_overflow)o, 0),
          "x=%a ovf %d", x, o);
  }
}
