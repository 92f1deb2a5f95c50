/* mlaref selfcheck: checks on this machine and build that the formats,
 * pmath and rng modules behave as their contracts say, and prints a summary:
 *   - every non-NaN code of every format encodes back to itself (binary32 and binary64 paths,
 *     every overflow mode, nearest-even and toward-zero);
 *   - the midpoint of every pair of neighbouring codes rounds to the even one, and the
 *     binary64 neighbours of the midpoint round down and up;
 *   - the overflow thresholds of each mode (docs/numerics.md, number formats);
 *   - pmath on values with known correctly rounded results;
 *   - Philox4x32-10 on Random123's known-answer vectors.
 * The exhaustive proofs live in the test suite; this is a fast check of the build in hand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "cli.h"
#include "mlr_rng.h"
#include "mlr_formats.h"
#include "mlr_pmath.h"

void mlr_cli_print_format_table(FILE *out);

typedef struct tally {
  long checks, failed;
} tally;

static void expect(tally *t, int ok, const char *what, const char *fmt_name, double x, uint32_t got,
                   uint32_t want) {
  t->checks++;
  if (ok) return;
  if (t->failed++ < 20)
    fprintf(stderr, "selfcheck FAIL %s format=%s x=%a got=0x%X want=0x%X\n", what, fmt_name, x, got,
            want);
}

static int same_code(mlr_format f, uint32_t a, uint32_t b) {
  return (mlr_is_nan(f, a) && mlr_is_nan(f, b)) || a == b;
}

static void check_roundtrip(tally *t, mlr_format f) {
  const mlr_format_params p = mlr_format_get(f);
  const uint32_t ncodes = 1u << p.bits;
  for (uint32_t c = 0; c < ncodes; c++) {
    if (mlr_is_nan(f, c)) continue;
    const float v = mlr_decode(f, c);
    const int is_inf = p.inf_code && (c & (p.sign_bit - 1u)) == p.inf_code;
    for (int o = 0; o < 3; o++) {
      for (int r = 0; r < 2; r++) {
        const uint32_t want =
            (is_inf && o == MLR_OVF_SATURATE) ? (p.max_code | (c & p.sign_bit)) : c;
        const uint32_t g32 = mlr_encode_f32(v, f, (mlr_rounding)r, (mlr_overflow)o, 0);
        const uint32_t g64 = mlr_encode_f64((double)v, f, (mlr_rounding)r, (mlr_overflow)o, 0);
        expect(t, g32 == want, "roundtrip-f32", mlr_format_name(f), (double)v, g32, want);
        expect(t, g64 == want, "roundtrip-f64", mlr_format_name(f), (double)v, g64, want);
      }
    }
  }
}

static void check_midpoints(tally *t, mlr_format f) {
  const mlr_format_params p = mlr_format_get(f);
  for (uint32_t c = 0; c < p.max_code; c++) {
    const double lo = (double)mlr_decode(f, c), hi = (double)mlr_decode(f, c + 1);
    const double mid = 0.5 * (lo + hi); /* exact: both have at most 11 significant bits */
    const uint32_t even = (c & 1u) ? c + 1 : c;
    for (int s = 0; s < 2; s++) {
      const double sg = s ? -1.0 : 1.0;
      const uint32_t sb = s ? p.sign_bit : 0u;
      const uint32_t want_mid = (p.fnuz && even == 0) ? 0u : (even | sb);
      const uint32_t want_lo = (p.fnuz && c == 0) ? 0u : (c | sb);
      const uint32_t g = mlr_encode_f64(sg * mid, f, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE, 0);
      const uint32_t g32 =
          mlr_encode_f32((float)(sg * mid), f, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE, 0);
      const uint32_t gd =
          mlr_encode_f64(sg * nextafter(mid, 0.0), f, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE, 0);
      const uint32_t gu =
          mlr_encode_f64(sg * nextafter(mid, 1e300), f, MLR_RND_NEAREST_EVEN, MLR_OVF_SATURATE, 0);
      expect(t, g == want_mid, "midpoint-ties-even-f64", mlr_format_name(f), sg * mid, g, want_mid);
      expect(t, g32 == want_mid, "midpoint-ties-even-f32", mlr_format_name(f), sg * mid, g32,
             want_mid);
      expect(t, gd == want_lo, "below-midpoint", mlr_format_name(f), sg * mid, gd, want_lo);
      expect(t, gu == ((c + 1) | sb), "above-midpoint", mlr_format_name(f), sg * mid, gu,
             (c + 1) | sb);
    }
  }
}

/* Overflow rules around max + ulp/2 (docs/numerics.md, number formats): for e4m3, 464 rounds to 448
 * in nonsat mode (PyTorch), is NaN in legacy mode (old amd_hip_fp8.h), and anything above 464
 * overflows. */
static void check_overflow(tally *t, mlr_format f) {
  const mlr_format_params p = mlr_format_get(f);
  const double max = (double)mlr_format_max(f);
  const double half_ulp = 0.5 * (max - (double)mlr_decode(f, p.max_code - 1));
  const double tie = max + half_ulp;
  const uint32_t ovf_nonsat = p.inf_code ? p.inf_code : p.nan_code;
  /* A tie rounds to even: up, into overflow, when max has an odd fraction (every format but
   * e4m3, whose max 1.110b * 2^8 is even, so 464 stays 448). */
  const int tie_up = (p.max_code & 1u) != 0;
  struct {
    double x;
    mlr_overflow o;
    uint32_t want;
  } cases[] = {
      {tie, MLR_OVF_SATURATE, p.max_code},
      {tie, MLR_OVF_NONSAT, tie_up ? ovf_nonsat : p.max_code},
      {tie, MLR_OVF_LEGACY, ovf_nonsat},
      {nextafter(tie, 0.0), MLR_OVF_NONSAT, p.max_code},
      {nextafter(tie, 0.0), MLR_OVF_LEGACY, ovf_nonsat},
      {max, MLR_OVF_LEGACY, p.max_code},
      {nextafter(tie, 1e300), MLR_OVF_NONSAT, ovf_nonsat},
      {nextafter(tie, 1e300), MLR_OVF_SATURATE, p.max_code},
      {1e300 * 1e300, MLR_OVF_SATURATE, p.max_code},
      {1e300 * 1e300, MLR_OVF_NONSAT, ovf_nonsat},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const uint32_t g = mlr_encode_f64(cases[i].x, f, MLR_RND_NEAREST_EVEN, cases[i].o, 0);
    expect(t, same_code(f, g, cases[i].want), mlr_overflow_name(cases[i].o), mlr_format_name(f),
           cases[i].x, g, cases[i].want);
  }
}

/* The contract is an error below 1 ulp: the result must be one of the two binary64 values
 * around the true one (both the same when it is exact). Brackets from MPFR at 200 bits,
 * rounded down and up. fdlibm's exp(1) is the upper one, 0.675 ulp away, as in Java's
 * StrictMath. */
static void check_pmath(tally *t) {
  struct {
    const char *name;
    double got, lo, hi;
  } c[] = {
      {"exp(1)", mlr_exp(1.0), 0x1.5bf0a8b145769p+1, 0x1.5bf0a8b14576ap+1},
      {"exp(-1)", mlr_exp(-1.0), 0x1.78b56362cef37p-2, 0x1.78b56362cef38p-2},
      {"exp(-700.5)", mlr_exp(-700.5), 0x1.4ff475c68ca01p-1011, 0x1.4ff475c68ca02p-1011},
      {"exp2(0.3)", mlr_exp2(0.3), 0x1.3b2c47bff8328p+0, 0x1.3b2c47bff8329p+0},
      {"exp2(10)", mlr_exp2(10.0), 1024.0, 1024.0},
      {"exp2(-1074)", mlr_exp2(-1074.0), 0x1p-1074, 0x1p-1074},
      {"log(2)", mlr_log(2.0), 0x1.62e42fefa39efp-1, 0x1.62e42fefa39fp-1},
      {"log(10)", mlr_log(10.0), 0x1.26bb1bbb55515p+1, 0x1.26bb1bbb55516p+1},
      {"log(0x1p-1070)", mlr_log(0x1p-1070), -0x1.72d57016e778ap+9, -0x1.72d57016e7789p+9},
      {"log2(3)", mlr_log2(3.0), 0x1.95c01a39fbd68p+0, 0x1.95c01a39fbd69p+0},
      {"log2(1024)", mlr_log2(1024.0), 10.0, 10.0},
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    t->checks++;
    const uint64_t g = mlr_f64_bits(c[i].got);
    if (g != mlr_f64_bits(c[i].lo) && g != mlr_f64_bits(c[i].hi) && t->failed++ < 20)
      fprintf(stderr, "selfcheck FAIL pmath %s got=%a want %a or %a\n", c[i].name, c[i].got,
              c[i].lo, c[i].hi);
  }
}

static void check_philox(tally *t) {
  /* Random123 tests/kat_vectors, the three "philox4x32 10" lines: counter, key, result. */
  static const uint32_t kat[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
       0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
       0x94fdcceb, 0x5001e420, 0x24126ea1},
  };
  for (int i = 0; i < 3; i++) {
    uint32_t out[4];
    mlr_philox4x32_10(kat[i], kat[i] + 4, out);
    t->checks++;
    if (memcmp(out, kat[i] + 6, sizeof out) != 0 && t->failed++ < 20)
      fprintf(stderr, "selfcheck FAIL philox4x32-10 known-answer vector %d\n", i);
  }
}

int mlr_cmd_selfcheck(int argc, char **argv) {
  if (argc > 0)
    return mlr_cli_usage_error("selfcheck", "unexpected argument '%s' (selfcheck takes none)",
                               argv[0]);
  printf("mlaref %s selfcheck\n\nNumber formats (computed from the library):\n", MLAREF_VERSION);
  mlr_cli_print_format_table(stdout);
  tally t = {0, 0};
  printf("\n%-9s %10s %10s %10s   boundaries (rne): sat nonsat legacy\n", "format", "roundtrip",
         "midpoints", "overflow");
  for (int i = 0; i < MLR_FMT_COUNT; i++) {
    const mlr_format f = (mlr_format)i;
    long c0 = t.checks;
    check_roundtrip(&t, f);
    long c1 = t.checks;
    check_midpoints(&t, f);
    long c2 = t.checks;
    check_overflow(&t, f);
    long c3 = t.checks;
    size_t nb[3] = {0, 0, 0};
    if (mlr_format_get(f).bits == 8)
      for (int o = 0; o < 3; o++) {
        uint32_t *pp, *cc;
        if (mlr_encode_boundaries(f, MLR_RND_NEAREST_EVEN, (mlr_overflow)o, &pp, &cc, &nb[o]) ==
            MLR_OK) {
          free(pp);
          free(cc);
        }
      }
    printf("%-9s %10ld %10ld %10ld   ", mlr_format_name(f), c1 - c0, c2 - c1, c3 - c2);
    if (nb[0])
      printf("%zu %zu %zu lines\n", nb[0], nb[1], nb[2]);
    else
      printf("(mlaref formats boundaries --format %s)\n", mlr_format_name(f));
  }
  check_pmath(&t);
  check_philox(&t);
  printf("\npmath: exp exp2 log log2 within 1 ulp (MPFR brackets); rng: Philox4x32-10 known "
         "answers\n");
  printf("selfcheck: %ld checks, %ld passed, %ld failed\n", t.checks, t.checks - t.failed,
         t.failed);
  return t.failed ? MLR_EXIT_FAIL : MLR_EXIT_OK;
}
