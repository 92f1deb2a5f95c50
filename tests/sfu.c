/* ref/sfu: the H200's exp2 and reciprocal units. The tables decode to what was measured, the models
 * (ex2, rcp, div.full) reproduce the hardware's results on the probes' samples (tests/data/sfu),
 * ex2's error stays within the constant the bound uses, and the fast kernel's row-sum order
 * (mlr__emu_rowsum) on hand-worked sums. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_emu_ops.h"
#include "mlr_sfu.h"

static const uint32_t *table(void) {
  const uint32_t *g = NULL;
  mlr_error err = {""};
  cr_assert_eq(mlr_sfu_ex2_table(&g, &err), MLR_OK, "%s", err.msg);
  cr_assert_not_null(g);
  return g;
}

/* a monotonic table's steps |g(r) - g(r - 1)| counted by size (at most max ulp; dir -1: decreasing,
 * 1: increasing), the first entry counted as a step of 0 (README.md's first difference, 0, is g(0)
 * itself) */
static void count_steps(const uint32_t *g, int dir, uint32_t max, long *steps) {
  memset(steps, 0, (max + 1) * sizeof *steps);
  steps[0] = 1;
  for (int r = 1; r < MLR_SFU_TABLE_N; r++) {
    const uint32_t d = dir < 0 ? g[r - 1] - g[r] : g[r] - g[r - 1];
    cr_assert_leq(d, max, "g(%d) - g(%d) = %u ulp", r - 1, r, d);
    steps[d]++;
  }
}

/* README.md's description of the tables (x <= 0, then x > 0): their ends, their steps and how many
 * of each */
Test(sfu, table_is_the_measured_one) {
  const uint32_t *g = table(), *gp = g + MLR_SFU_EX2_N;
  cr_assert_eq(g[0], 0x3F800000u);
  cr_assert_eq(g[MLR_SFU_EX2_N - 1], 0x3F000000u);
  long steps[4];
  count_steps(g, -1, 3, steps);
  cr_expect_eq(steps[0], 723107);
  cr_expect_eq(steps[1], 6942395);
  cr_expect_eq(steps[2], 723105);
  cr_expect_eq(steps[3], 1);
  cr_assert_eq(gp[0], 0x3F800000u);
  cr_assert_eq(gp[MLR_SFU_EX2_N - 1], 0x3FFFFFFFu);
  count_steps(gp, 1, 3, steps);
  cr_expect_eq(steps[0], 723107);
  cr_expect_eq(steps[1], 6942396);
  cr_expect_eq(steps[2], 723104);
  cr_expect_eq(steps[3], 1);
  const uint32_t *again = table(); /* decoded once */
  cr_assert_eq(again, g);
}

/* every sample the probe measured on the H200, through the model: the same bits (NaN: a NaN) */
Test(sfu, model_reproduces_the_h200_samples) {
  const uint32_t *g = table();
  char path[512], line[128];
  snprintf(path, sizeof path, "%s/tests/data/sfu/h200_ex2_samples.txt", MLAREF_SOURCE_DIR);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "cannot open %s", path);
  int n = 0, bad = 0, sub = 0, squared = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    unsigned xb, yb;
    cr_assert_eq(sscanf(line, "%x %x", &xb, &yb), 2, "%s", line);
    const float x = mlr_bits_f32(xb), y = mlr_sfu_ex2(g, x);
    const int same = x != x ? y != y : mlr_f32_bits(y) == yb;
    if (!same && bad++ < 5)
      cr_log_error("x %08x (%a): hardware %08x, model %08x", xb, (double)x, yb, mlr_f32_bits(y));
    n++;
    sub += yb != 0 && yb < 0x00800000u;
    squared += x < -126.0f;
  }
  fclose(f);
  cr_assert_eq(n, 4096);
  cr_assert_eq(bad, 0, "%d of %d samples differ", bad, n);
  /* the squaring path is exercised */
  cr_assert_gt(sub, 100, "the samples reach the subnormal results (%d)", sub);
  cr_assert_gt(squared, 1000);
}

/* the unit's relative error, cut included: for x in (-(r+1) 2^-23, -r 2^-23] the unit gives g(r),
 * for x in [r 2^-23, (r+1) 2^-23) g(2^23 + r); against binary64 2^x (pmath, error about 2^-52, far
 * under the constant's margin) at both ends */
Test(sfu, error_within_the_bound_constant) {
  const uint32_t *g = table();
  double worst = 0;
  for (int r = 0; r < 2 * MLR_SFU_EX2_N; r++) {
    const double v = (double)mlr_bits_f32(g[r]), sgn = r < MLR_SFU_EX2_N ? -1 : 1;
    const int rr = r % MLR_SFU_EX2_N;
    const double a = mlr_exp2(sgn * rr * 0x1p-23), b = mlr_exp2(sgn * (rr + 1) * 0x1p-23);
    const double e = fmax(fabs(v / a - 1), fabs(v / b - 1));
    if (e > worst) worst = e;
  }
  cr_assert_leq(worst, MLR_SFU_EX2_REL, "worst %g = %.4f x 2^-24", worst, worst / 0x1p-24);
  cr_assert_geq(worst, 2.4 * 0x1p-24, "worst %.4f x 2^-24: the constant is not loose",
                worst / 0x1p-24);
}

/* the model's structure on hand-picked x: the cut toward zero, the exact halving per unit of x,
 * the flush and the squaring below -126 */
Test(sfu, model_structure) {
  const uint32_t *g = table();
  cr_assert_eq(mlr_f32_bits(mlr_sfu_ex2(g, 0.0f)), 0x3F800000u);
  cr_assert_eq(mlr_f32_bits(mlr_sfu_ex2(g, -0.0f)), 0x3F800000u);
  cr_assert_eq(mlr_sfu_ex2(g, -1.0f), 0.5f);
  cr_assert_eq(mlr_sfu_ex2(g, -126.0f), 0x1p-126f);
  cr_assert_eq(mlr_sfu_ex2(g, -INFINITY), 0.0f);
  cr_assert(isnan(mlr_sfu_ex2(g, NAN)));
  /* x between grid points reads as the point toward zero */
  cr_assert_eq(mlr_f32_bits(mlr_sfu_ex2(g, -0x1.8p-24f)), mlr_f32_bits(mlr_sfu_ex2(g, -0x1p-24f)));
  cr_assert_eq(mlr_f32_bits(mlr_sfu_ex2(g, -0x1.fffffep-24f)), g[0]);
  cr_assert_eq(mlr_f32_bits(mlr_sfu_ex2(g, -0x1p-23f)), g[1]);
  /* ex2(x - k) = ex2(x) 2^-k, with x - k exact (x a multiple of 2^-17, the ulp just below -64) */
  const float x = -77777.0f * 0x1p-17f;
  for (int k = 1; k < 126; k++)
    cr_assert_eq(mlr_sfu_ex2(g, x - (float)k), ldexpf(mlr_sfu_ex2(g, x), -k), "k = %d", k);
  /* below -126: MUFU(x / 2) squared; -252 > x: the half flushes to 0 */
  const float h = mlr_sfu_ex2(g, -70.3f);
  cr_assert_eq(mlr_f32_bits(mlr_sfu_ex2(g, -140.6f)), mlr_f32_bits(h * h));
  cr_assert_eq(mlr_sfu_ex2(g, -252.0001f), 0.0f);
  /* x > 0: the positive table, the same cut toward zero, ex2(x + k) = ex2(x) 2^k, +Inf at 128 */
  const uint32_t *gp = g + MLR_SFU_EX2_N;
  cr_assert_eq(mlr_f32_bits(mlr_sfu_ex2(g, 0x1.fffffep-24f)), 0x3F800000u);
  cr_assert_eq(mlr_f32_bits(mlr_sfu_ex2(g, 0x1p-23f)), gp[1]);
  cr_assert_eq(mlr_f32_bits(mlr_sfu_ex2(g, 0x1.8p-23f)), gp[1]);
  cr_assert_eq(mlr_sfu_ex2(g, 1.0f), 2.0f);
  const float y = 77777.0f * 0x1p-17f;
  for (int k = 1; k < 126; k++)
    cr_assert_eq(mlr_sfu_ex2(g, y + (float)k), ldexpf(mlr_sfu_ex2(g, y), k), "k = %d", k);
  cr_assert_eq(mlr_f32_bits(mlr_sfu_ex2(g, 0x1.fffffep+6f)), gp[MLR_SFU_EX2_N - 64] + (127u << 23));
  cr_assert_eq(mlr_sfu_ex2(g, 128.0f), INFINITY);
  cr_assert_eq(mlr_sfu_ex2(g, INFINITY), INFINITY);
}

/* the fast kernel's row-sum tree against the token order, on sums where they part */
Test(sfu, rowsum_warp16) {
  float p[40] = {0};
  /* lane 0 holds tokens 0, 1, 8, 9: (1 + 0) + (2^-24 + 2^-24) = 1 + 2^-23; in token order each
   * 2^-24 is lost to the tie-to-even */
  p[0] = 1.0f;
  p[8] = 0x1p-24f;
  p[9] = 0x1p-24f;
  cr_assert_eq(mlr__emu_rowsum(MLR_SUM_WARP16, p, 16), 1.0f + 0x1p-23f);
  cr_assert_eq(mlr__emu_rowsum(MLR_SUM_SEQ, p, 16), 1.0f);
  /* lanes pair (0, 1) and (2, 3) before the four meet: lane 2 (tokens 4, 5) and lane 3 (6, 7) */
  memset(p, 0, sizeof p);
  p[0] = 1.0f;
  p[4] = 0x1p-24f;
  p[6] = 0x1p-24f;
  cr_assert_eq(mlr__emu_rowsum(MLR_SUM_WARP16, p, 16), 1.0f + 0x1p-23f);
  p[6] = 0;
  p[2] = 0x1p-24f; /* lanes 1 and 2: (1 + 2^-24) + 2^-24 = 1 */
  cr_assert_eq(mlr__emu_rowsum(MLR_SUM_WARP16, p, 16), 1.0f);
  /* groups of 16 in order, and a short last group (n = 35: its tokens past n are zeros) */
  memset(p, 0, sizeof p);
  p[0] = 1.0f;
  p[16] = 0x1p-24f;
  p[32] = 0x1p-24f;
  p[34] = 0x1p-24f;
  /* (2^-24 + 2^-24) within group 2 */
  cr_assert_eq(mlr__emu_rowsum(MLR_SUM_WARP16, p, 35), 1.0f + 0x1p-23f);
  cr_assert_eq(mlr__emu_rowsum(MLR_SUM_WARP16, p, 34), 1.0f); /* p[34] past n */
  cr_assert_eq(mlr__emu_rowsum(MLR_SUM_SEQ, p, 35), 1.0f);
}

/* the reciprocal table: its ends and steps (ref/sfu/README.md) */
Test(sfu, rcp_table_is_the_measured_one) {
  const uint32_t *g = NULL;
  mlr_error err = {""};
  cr_assert_eq(mlr_sfu_rcp_table(&g, &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(g[0], 0x3F800000u);
  cr_assert_eq(g[MLR_SFU_TABLE_N - 1], 0x3F000001u);
  long steps[3];
  count_steps(g, -1, 2, steps);
  cr_expect_eq(steps[0], 1439438);
  cr_expect_eq(steps[1], 5509733);
  cr_expect_eq(steps[2], 1439437);
}

/* rcp.approx.f32 on x whose reciprocal is normal, div.full.f32 and div.approx.ftz.f32 on any pair
 * (NaN by class):
 * the hardware's results in tests/data/sfu/h200_rcp_div_samples.txt, through the models */
Test(sfu, rcp_and_divisions_reproduce_the_h200_samples) {
  const uint32_t *g = NULL;
  mlr_error err = {""};
  cr_assert_eq(mlr_sfu_rcp_table(&g, &err), MLR_OK, "%s", err.msg);
  FILE *f = fopen(MLAREF_SOURCE_DIR "/tests/data/sfu/h200_rcp_div_samples.txt", "r");
  cr_assert_not_null(f);
  char line[128], kind;
  unsigned a, b, c;
  int nr = 0, nd = 0, na = 0;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "r %x %x", &a, &b) == 2) {
      const unsigned e = (a >> 23) & 0xFFu;
      if (e == 0 || e >= 253) continue; /* a subnormal x or reciprocal: not modelled */
      cr_assert_eq(mlr_f32_bits(mlr__sfu_rcp(g, mlr_bits_f32(a))), b, "rcp(%08x)", a);
      nr++;
    } else if (sscanf(line, "%c %x %x %x", &kind, &a, &b, &c) == 4 &&
               (kind == 'd' || kind == 'a')) { /* div.full, div.approx.ftz */
      const float x = mlr_bits_f32(a), y = mlr_bits_f32(b);
      const float z = kind == 'd' ? mlr_sfu_div_full(g, x, y) : mlr__sfu_div_approx(g, x, y);
      if (z != z)
        cr_assert((c & 0x7F800000u) == 0x7F800000u && (c & 0x7FFFFFu), "%c(%08x, %08x) NaN", kind,
                  a, b);
      else
        cr_assert_eq(mlr_f32_bits(z), c, "%c(%08x, %08x)", kind, a, b);
      *(kind == 'd' ? &nd : &na) += 1;
    }
  }
  fclose(f);
  cr_assert(nr > 1900 && nd == 2048 && na == 2048, "%d reciprocals, %d + %d divisions", nr, nd, na);
}

/* the log2 table: lg2(1) = 0, lg2(1.5) as the probe printed it, and every step past the head
 * positive (log2 increases) */
Test(sfu, lg2_table_is_the_measured_one) {
  const uint32_t *g = NULL;
  mlr_error err = {""};
  cr_assert_eq(mlr_sfu_lg2_table(&g, &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(g[0], 0u);
  cr_assert_eq(g[1u << 22], 0x3F15C01Bu);
  for (uint32_t r = 1; r < MLR_SFU_TABLE_N; r++) cr_assert_gt(g[r], g[r - 1], "step at %u", r);
}

/* lg2.approx.f32 on the H200's samples (tests/data/sfu/h200_lg2_samples.txt): bit-identical for
 * x >= 1, within 1 ulp below 0.5, not modelled between (mlr_sfu.h says why); subnormal x is where
 * the .ftz form the model takes differs from the sampled one */
Test(sfu, lg2_reproduces_the_h200_samples) {
  const uint32_t *g = NULL;
  mlr_error err = {""};
  cr_assert_eq(mlr_sfu_lg2_table(&g, &err), MLR_OK, "%s", err.msg);
  FILE *f = fopen(MLAREF_SOURCE_DIR "/tests/data/sfu/h200_lg2_samples.txt", "r");
  cr_assert_not_null(f);
  char line[128];
  unsigned a, b;
  int ge1 = 0, lt1 = 0, lt1_exact = 0;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "%x %x", &a, &b) != 2 || (a & 0x7F800000u) == 0) continue;
    if (a >= 0x3F000000u && a < 0x3F800000u) continue; /* [0.5, 1) */
    const uint32_t m = mlr_f32_bits(mlr__sfu_lg2(g, mlr_bits_f32(a)));
    if (a >= 0x3F800000u) {
      cr_assert_eq(m, b, "lg2(%08x): %08x, the H200 %08x", a, m, b);
      ge1++;
    } else {
      cr_assert(m - b <= 1u, "lg2(%08x): %08x, the H200 %08x", a, m, b);
      lt1_exact += m == b;
      lt1++;
    }
  }
  fclose(f);
  cr_assert(ge1 > 1000 && lt1 > 900, "%d samples >= 1, %d below 0.5", ge1, lt1);
  cr_assert_gt(lt1_exact, lt1 * 8 / 10, "below 1: %d of %d exact", lt1_exact, lt1);
  cr_assert_eq(mlr__sfu_lg2(g, 0.0f), -INFINITY);
  cr_assert_eq(mlr__sfu_lg2(g, 0x1p-130f), -INFINITY);  /* flushed */
  cr_assert_eq(mlr__sfu_lg2(g, -0x1p-130f), -INFINITY); /* flushed to -0 before the sign */
  cr_assert_eq(mlr__sfu_lg2(g, INFINITY), INFINITY);
  cr_assert_eq(mlr_f32_bits(mlr__sfu_lg2(g, -1.0f)), 0x7FFFFFFFu);
  cr_assert_eq(mlr_f32_bits(mlr__sfu_lg2(g, 2.0f)), 0x3F800000u);
  cr_assert_eq(mlr_f32_bits(mlr__sfu_lg2(g, 0.5f)), 0xBF800000u);
}

/* ex2.approx.f32 on positive x (FlashAttention-2's max token: the rounding error of m c), the
 * probe's samples on an H100 (tests/data/sfu/h100_ex2_pos_samples.txt), taken in another run than
 * the table: bit for bit, near 0 and above */
Test(sfu, ex2_positive_x) {
  const uint32_t *g = table();
  FILE *f = fopen(MLAREF_SOURCE_DIR "/tests/data/sfu/h100_ex2_pos_samples.txt", "r");
  cr_assert_not_null(f);
  char line[512];
  unsigned a, b;
  int tiny = 0, above = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || sscanf(line, "%x %x", &a, &b) != 2) continue;
    const float x = mlr_bits_f32(a);
    const uint32_t m = mlr_f32_bits(mlr__sfu_ex2(g, x));
    cr_assert_eq(m, b, "ex2(%08x): %08x, the H100 %08x", a, m, b);
    tiny += x < 0x1p-23f;
    above += x >= 0x1p-23f;
  }
  fclose(f);
  cr_assert(tiny > 500 && above > 500, "%d samples below 2^-23, %d above", tiny, above);
}
