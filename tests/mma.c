/* ref/mma: the matrix-unit models against hardware measurements (tests/data/mma: 5000 inner
 * products per operand format measured on an H200, converted by scripts/mma_vectors.py), and the
 * model's steps on hand-worked blocks. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include <limits.h>

#include "ref/emulate/emu_mma.h"
#include "mlr_formats.h"
#include "mlr_mma.h"

/* every line of FILE through the model; returns the count of D that differ; *lines the count read.
 * with_c = 0 runs the block with C = 0 (the e4m3 measurements are A.B alone) */
static int run_file(const char *name, const mlr_mma_model *m, mlr_format f, int k, int with_c,
                    int *lines) {
  char path[512];
  snprintf(path, sizeof path, "%s/tests/data/mma/%s", MLAREF_SOURCE_DIR, name);
  FILE *fp = fopen(path, "r");
  cr_assert_not_null(fp, "cannot open %s", path);
  static char line[4096];
  int bad = 0, n = 0;
  while (fgets(line, sizeof line, fp)) {
    if (line[0] == '#') continue;
    char *p = line, *end;
    const uint32_t cb = (uint32_t)strtoul(p, &end, 16), db = (uint32_t)strtoul(end, &end, 16);
    float a[32], b[32];
    for (int i = 0; i < 2 * k; i++) {
      const uint32_t code = (uint32_t)strtoul(end, &end, 16);
      (i < k ? a : b)[i % k] = mlr_decode(f, code);
    }
    /* k past the unit's block (cdna3-bf16: 8) runs as the unit runs it, block after block */
    const float d = mlr_mma_dot(m, a, b, k, with_c ? mlr_bits_f32(cb) : 0.0f);
    const int both_nan = isnan(d) && isnan(mlr_bits_f32(db)); /* the payload is not modelled */
    if (mlr_f32_bits(d) != db && !both_nan) {
      if (bad < 3 && !(f == MLR_FMT_E4M3 && with_c))
        fprintf(stderr, "%s line %d: model %08x, hardware %08x\n", name, n + 1, mlr_f32_bits(d),
                db);
      bad++;
    }
    n++;
  }
  fclose(fp);
  *lines = n;
  return bad;
}

Test(mma, h200_e4m3_bit_identical) {
  int n;
  cr_assert_eq(run_file("h200_e4m3.txt", mlr_mma_get(MLR_MMA_SM90_E4M3), MLR_FMT_E4M3, 32, 0, &n),
               0);
  cr_assert_eq(n, 5000);
  /* the listed C is not part of these D: with it, almost none would match */
  const int bad =
      run_file("h200_e4m3.txt", mlr_mma_get(MLR_MMA_SM90_E4M3), MLR_FMT_E4M3, 32, 1, &n);
  cr_assert_gt(bad, 4900, "%d of 5000 D differ once C is added", bad);
}

Test(mma, h200_bf16_bit_identical) {
  int n;
  cr_assert_eq(run_file("h200_bf16.txt", mlr_mma_get(MLR_MMA_SM90_BF16), MLR_FMT_BF16, 16, 1, &n),
               0);
  cr_assert_eq(n, 5000);
}

Test(mma, h200_fp16_bit_identical) {
  int n;
  cr_assert_eq(run_file("h200_fp16.txt", mlr_mma_get(MLR_MMA_SM90_F16), MLR_FMT_FP16, 16, 1, &n),
               0);
  cr_assert_eq(n, 5000);
}

/* the own probe (gpu/probes/mma_probe.cu, mma.sync on an H200, D = A.B + C): 256 inner products
 * kept from each class (layout, random, normal, cancellation, exponent spread, subnormal inputs,
 * signed zeros, C far above or below, NaN and Inf, overflow). It settled two steps the published
 * vectors left open: a sum past binary32's range is +-Inf even when truncating, and a subnormal
 * fp16 input takes the exponent -14 (its exponent field's), not its true one. */
Test(mma, h200_probe_bf16_fp16_bit_identical) {
  int n;
  cr_assert_eq(
      run_file("h200_probe_bf16.txt", mlr_mma_get(MLR_MMA_SM90_BF16), MLR_FMT_BF16, 16, 1, &n), 0);
  cr_assert_eq(n, 2560);
  cr_assert_eq(
      run_file("h200_probe_fp16.txt", mlr_mma_get(MLR_MMA_SM90_F16), MLR_FMT_FP16, 16, 1, &n), 0);
  cr_assert_eq(n, 2560);
}

/* mma.sync m16n8k32 with e4m3 operands on sm_90 is no fp8 unit: ptxas lowers it to F2FP unpacks and
 * two fp16 HMMA.16816.F32 (the probe's own SASS, read with cuobjdump on the H200): the first over
 * the low byte pair of each operand register (k & 3 < 2) from a zero accumulator, the second over
 * the rest from the first's D, then FADD C. sm90-e4m3-sync is that, and every kept probe vector
 * (2304, D = A.B + C measured with C) comes out bit-identical; the one-block fp8 model (the
 * published vectors' unit, most likely wgmma's) misses hundreds of them. */
Test(mma, h200_probe_e4m3_mma_sync_bit_identical) {
  int n;
  cr_assert_eq(
      run_file("h200_probe_e4m3.txt", mlr_mma_get(MLR_MMA_SM90_E4M3_SYNC), MLR_FMT_E4M3, 32, 1, &n),
      0);
  cr_assert_eq(n, 2304);
  const int bad =
      run_file("h200_probe_e4m3.txt", mlr_mma_get(MLR_MMA_SM90_E4M3), MLR_FMT_E4M3, 32, 1, &n);
  cr_assert_gt(bad, 100, "the one-block model on mma.sync's vectors: %d differ", bad);
  /* C joins after the two blocks, rounded to nearest: 2^20 + 0.375 * 0.25 is 2^20 + 2^-3 (0.09375
   * is 3/4 of binary32's unit there), where a block with C in its alignment cuts the product away
   */
  float a[32] = {0}, b[32] = {0};
  a[0] = 0.375f;
  b[0] = 0.25f;
  cr_assert_eq(mlr_mma_block(mlr_mma_get(MLR_MMA_SM90_E4M3_SYNC), a, b, 32, 0x1p20f),
               0x1p20f + 0.125f);
  cr_assert_eq(mlr_mma_block(mlr_mma_get(MLR_MMA_SM90_E4M3), a, b, 32, 0x1p20f), 0x1p20f);
  cr_assert_eq(mlr_mma_find("sm90-e4m3-sync"), mlr_mma_get(MLR_MMA_SM90_E4M3_SYNC));
  /* e5m2 operands go the same way (F2FP.F16.E5M2 is exact; an e5m2 subnormal is an fp16 one, at
   * exponent -14 in the unit): the probe's kept e5m2 vectors, bit-identical too */
  cr_assert_eq(
      run_file("h200_probe_e5m2.txt", mlr_mma_get(MLR_MMA_SM90_E4M3_SYNC), MLR_FMT_E5M2, 32, 1, &n),
      0);
  cr_assert_eq(n, 2304);
}

/* wgmma with fp8 operands (QGMMA, Hopper's fp8 unit; gpu/probes/wgmma_probe.cu): the kept vectors
 * of 2^20 a class (random, normal, cancellation, spread, subnormal, zeros, C dominant, NaN and
 * Inf), D = A.B + C measured with C: sm90-e4m3 (the published vectors' 13-bit block) with C a term
 * of the alignment and a subnormal input at e4m3's least normal exponent, -6, and sm90-e5m2 (-14):
 * every one bit-identical. The subnormal rule is what C != 0 shows: with true exponents, 20 of the
 * 256 kept subnormal e4m3 vectors differ. */
Test(mma, h200_wgmma_fp8_bit_identical) {
  int n;
  cr_assert_eq(
      run_file("h200_wgmma_e4m3.txt", mlr_mma_get(MLR_MMA_SM90_E4M3), MLR_FMT_E4M3, 32, 1, &n), 0);
  cr_assert_eq(n, 2048);
  cr_assert_eq(
      run_file("h200_wgmma_e5m2.txt", mlr_mma_get(MLR_MMA_SM90_E5M2), MLR_FMT_E5M2, 32, 1, &n), 0);
  cr_assert_eq(n, 2048);
  mlr_mma_model true_exp = *mlr_mma_get(MLR_MMA_SM90_E4M3);
  true_exp.sub_emin = 0;
  cr_assert_gt(run_file("h200_wgmma_e4m3.txt", &true_exp, MLR_FMT_E4M3, 32, 1, &n), 10,
               "true exponents for subnormal inputs should miss");
  /* and mma.sync's lowering is another unit: it misses most of them */
  cr_assert_gt(
      run_file("h200_wgmma_e4m3.txt", mlr_mma_get(MLR_MMA_SM90_E4M3_SYNC), MLR_FMT_E4M3, 32, 1, &n),
      1000);
  cr_assert_eq(mlr_mma_find("sm90-e5m2"), mlr_mma_get(MLR_MMA_SM90_E5M2));
}

/* wgmma with fp16 operands (HGMMA, m64n8k16, A from registers): the kept vectors of 2^18 a class,
 * measured on an H100 with C: sm90-f16, the model fitted to mma.sync m16n8k16, holds for every one
 * (and on all 2^21 the probe ran), so a kernel may take the PV's fp16 products from either
 * instruction with the same bits */
Test(mma, h100_wgmma_fp16_bit_identical) {
  int n;
  cr_assert_eq(
      run_file("h100_wgmma_fp16.txt", mlr_mma_get(MLR_MMA_SM90_F16), MLR_FMT_FP16, 16, 1, &n), 0);
  cr_assert_eq(n, 2048);
  /* the vectors tell the rules apart: true exponents for subnormal inputs (26 differ) or 24
   * fraction bits (579) miss some */
  mlr_mma_model alt = *mlr_mma_get(MLR_MMA_SM90_F16);
  alt.sub_emin = 0;
  const int bad_sub = run_file("h100_wgmma_fp16.txt", &alt, MLR_FMT_FP16, 16, 1, &n);
  alt = *mlr_mma_get(MLR_MMA_SM90_F16);
  alt.frac_bits = 24;
  const int bad_frac = run_file("h100_wgmma_fp16.txt", &alt, MLR_FMT_FP16, 16, 1, &n);
  cr_assert_gt(bad_sub, 10, "true exponents for subnormal inputs should miss: %d", bad_sub);
  cr_assert_gt(bad_frac, 100, "24 fraction bits (the model has 25) should miss: %d", bad_frac);
}

/* the binary64 form (mlr_mma_in_exp, mlr_mma_c_exp, mlr_mma_finish) a block at a time (a lowered
 * unit: its two fp16 blocks so, then C added in binary32, as ref/emulate/emu_mma.c runs it) */
static float block_f64(const mlr_mma_model *m, const float *a, const float *b, int n, float c) {
  if (m->lowered) {
    float lo[2][32], hi[2][32];
    int nl, nh;
    mlr_mma_lowered_split(a, b, n, lo, hi, &nl, &nh);
    const mlr_mma_model *f = mlr_mma_get(MLR_MMA_SM90_F16);
    return c + block_f64(f, hi[0], hi[1], nh, block_f64(f, lo[0], lo[1], nl, 0.0f));
  }
  int E = mlr_mma_c_exp(c);
  for (int i = 0; i < n; i++) {
    const int e = mlr_mma_in_exp(m, a[i]) + mlr_mma_in_exp(m, b[i]);
    if (e > E) E = e; /* a zero operand's MLR_MMA_EZERO keeps its product out */
  }
  if (E <= MLR_MMA_EZERO / 2) return 0.0f;
  if (E >= MLR_MMA_ENONFIN / 2) { /* the model's rule for NaN and Inf: the IEEE sum in order */
    double s = c;
    for (int i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
    return (float)s;
  }
  const double sc = ldexp(1.0, m->frac_bits - E);
  double S = trunc((double)c * sc);
  for (int i = 0; i < n; i++) S += trunc((double)a[i] * sc * (double)b[i]);
  return mlr_mma_finish(m, S, E);
}

/* CDNA3's two-stage units (MMA-Sim's models, unseen on hardware) have no binary64 form in the
 * header: their reference here is MMA-Sim's description (mlr_mma.h) transcribed step by step in
 * binary64, significands and exponents as it keeps them (a zero's exponent -999, a subnormal's at
 * the format's least); every step is exact in binary64 (sums of at most 16 multiples of 2^-24 below
 * 4, shifts by powers of two), and the last conversion rounds to nearest even. Their binary64 form
 * is the emulator's lanes (ref/emulate/emu_mma.c), run here on one lane. */
static void sig_exp(double x, int emin, double *s, int *e) {
  if (x == 0.0) {
    *s = 0.0;
    *e = -999;
    return;
  }
  int ex;
  double m = 2.0 * frexp(x, &ex);
  ex -= 1;
  if (ex < emin) {
    m = ldexp(m, ex - emin);
    ex = emin;
  }
  *s = m;
  *e = ex;
}

static void fused(const double *s, const int *e, int n, int step, int F, double *out, int *E) {
  int mx = INT_MIN;
  for (int i = 0; i < n; i += step) mx = e[i] > mx ? e[i] : mx;
  double acc = 0.0;
  for (int i = 0; i < n; i += step) acc += trunc(ldexp(s[i], F + e[i] - mx)) * ldexp(1.0, -F);
  *out = acc;
  *E = mx;
}

static float cdna3_ref(const mlr_mma_model *m, const float *a, const float *b, int n, float c) {
  double fsum = c;
  int pinf = 0, ninf = 0;
  for (int i = 0; i < n; i++) {
    const double p = (double)a[i] * (double)b[i];
    fsum += p;
    pinf |= p >= 0x1p128;
    ninf |= p <= -0x1p128;
  }
  if (isnan(fsum) || isinf(fsum)) return (float)fsum;
  if (pinf || ninf) return pinf && ninf ? NAN : pinf ? INFINITY : -INFINITY;
  double sg[64], sc, s;
  int eg[64], ec, e;
  for (int i = 0; i < n; i++) {
    double sa, sb;
    int ea, eb;
    sig_exp(a[i], m->sub_emin, &sa, &ea);
    sig_exp(b[i], m->sub_emin, &sb, &eb);
    sg[i] = sa * sb;
    eg[i] = ea + eb;
  }
  sig_exp(c, -126, &sc, &ec);
  const int F = m->frac_bits;
  if (m->two_stage == 2) {
    double s0, s1;
    int e0, e1;
    fused(sg, eg, n, 2, F, &s0, &e0);
    fused(sg + 1, eg + 1, n - 1, 2, F, &s1, &e1);
    const int mx = e0 > e1 ? e0 : e1;
    s = floor(ldexp(s0, F + e0 - mx)) * ldexp(1.0, -F) +
        floor(ldexp(s1, F + e1 - mx)) * ldexp(1.0, -F);
    e = mx;
  } else
    fused(sg, eg, n, 1, F, &s, &e);
  const int M = e > ec ? e : ec;
  s = floor(ldexp(s, 31 + e - M)) * 0x1p-31;
  sc = m->two_stage == 2 && ec < M - 25 ? 0.0 : floor(ldexp(sc, 24 + ec - M)) * 0x1p-24;
  return (float)ldexp(s + sc, M);
}

static float lane_f64(const mlr_mma_model *m, const float *a, const float *b, int n, float c) {
  int ea[64], eb[64], E[1];
  double sc[1], S[1];
  for (int i = 0; i < n; i++) {
    ea[i] = mlr_mma_in_exp(m, a[i]);
    eb[i] = mlr_mma_in_exp(m, b[i]);
  }
  mlr__emu_mma_lanes(m, 1, n, a, ea, 1, b, eb, &c, sc, S, E);
  return c;
}

/* a unit's second form: the header's binary64 form, or (CDNA3) the emulator's lane, which must
 * also agree with the transcription of MMA-Sim */
static float other_form(const mlr_mma_model *m, const float *a, const float *b, int n, float c) {
  if (!m->two_stage) return block_f64(m, a, b, n, c);
  const float want = mlr_mma_block(m, a, b, n, c), ref = cdna3_ref(m, a, b, n, c);
  cr_assert(mlr_f32_bits(ref) == mlr_f32_bits(want) || (isnan(ref) && isnan(want)),
            "%s: the block %a, MMA-Sim's steps %a", m->name, (double)want, (double)ref);
  return lane_f64(m, a, b, n, c);
}

/* ... is mlr_mma_block, bit for bit (NaN for NaN): every measured vector of every unit, and
 * random blocks of every unit over the full finite range of its input format */
Test(mma, binary64_form_is_the_block) {
  const struct {
    const char *file;
    mlr_mma_unit u;
    mlr_format f;
    int k;
  } files[] = {{"h200_e4m3.txt", MLR_MMA_SM90_E4M3, MLR_FMT_E4M3, 32},
               {"h200_bf16.txt", MLR_MMA_SM90_BF16, MLR_FMT_BF16, 16},
               {"h200_fp16.txt", MLR_MMA_SM90_F16, MLR_FMT_FP16, 16},
               {"h200_probe_bf16.txt", MLR_MMA_SM90_BF16, MLR_FMT_BF16, 16},
               {"h200_probe_fp16.txt", MLR_MMA_SM90_F16, MLR_FMT_FP16, 16},
               {"h200_probe_e4m3.txt", MLR_MMA_SM90_E4M3, MLR_FMT_E4M3, 32},
               {"h200_probe_e4m3.txt", MLR_MMA_SM90_E4M3_SYNC, MLR_FMT_E4M3, 32},
               {"h200_probe_e5m2.txt", MLR_MMA_SM90_E4M3_SYNC, MLR_FMT_E5M2, 32},
               {"h200_wgmma_e4m3.txt", MLR_MMA_SM90_E4M3, MLR_FMT_E4M3, 32},
               {"h200_wgmma_e5m2.txt", MLR_MMA_SM90_E5M2, MLR_FMT_E5M2, 32},
               {"h100_wgmma_fp16.txt", MLR_MMA_SM90_F16, MLR_FMT_FP16, 16}};
  int checked = 0, nonfin = 0;
  for (size_t fi = 0; fi < sizeof files / sizeof files[0]; fi++)
    for (int u = 0; u < 3;
         u++) { /* the file's unit, and AMD's fp8 and bf16 units on the same values */
      const mlr_mma_model *m = mlr_mma_get(u == 2 ? MLR_MMA_CDNA3_BF16
                                           : u    ? MLR_MMA_CDNA3_FP8
                                                  : files[fi].u);
      char path[512];
      snprintf(path, sizeof path, "%s/tests/data/mma/%s", MLAREF_SOURCE_DIR, files[fi].file);
      FILE *fp = fopen(path, "r");
      cr_assert_not_null(fp);
      static char line[4096];
      while (fgets(line, sizeof line, fp)) {
        if (line[0] == '#') continue;
        char *end;
        const float c = mlr_bits_f32((uint32_t)strtoul(line, &end, 16));
        (void)strtoul(end, &end, 16);
        float a[32], b[32];
        int fin = isfinite(c);
        for (int i = 0; i < 2 * files[fi].k; i++) {
          const float v = mlr_decode(files[fi].f, (uint32_t)strtoul(end, &end, 16));
          (i < files[fi].k ? a : b)[i % files[fi].k] = v;
          fin &= isfinite(v) != 0;
        }
        nonfin += !fin;
        const int n = files[fi].k < m->block ? files[fi].k : m->block;
        const float want = mlr_mma_block(m, a, b, n, c), got = other_form(m, a, b, n, c);
        cr_assert(mlr_f32_bits(got) == mlr_f32_bits(want) || (isnan(got) && isnan(want)),
                  "%s (%s): %a vs the block %a", files[fi].file, m->name, (double)got,
                  (double)want);
        checked++;
      }
      fclose(fp);
    }
  cr_assert_gt(checked, 40000, "%d blocks", checked);
  cr_assert_gt(nonfin, 500, "%d blocks with NaN or Inf", nonfin);
  /* random codes of each format through each unit, C random or 0 */
  uint64_t st = 0x9E3779B97F4A7C15ull;
  for (int u = 0; u < MLR_MMA_UNITS; u++) {
    const mlr_mma_model *m = mlr_mma_get((mlr_mma_unit)u);
    const mlr_format f = u == MLR_MMA_SM90_BF16 || u == MLR_MMA_CDNA3_BF16 ? MLR_FMT_BF16
                         : u == MLR_MMA_SM90_F16                           ? MLR_FMT_FP16
                         : u == MLR_MMA_CDNA3_FP8                          ? MLR_FMT_E4M3FNUZ
                         : u == MLR_MMA_SM90_E5M2                          ? MLR_FMT_E5M2
                                                                           : MLR_FMT_E4M3;
    for (int t = 0; t < 20000; t++) {
      float a[32], b[32];
      for (int i = 0; i < m->block; i++) {
        float x, y;
        do {
          st = st * 6364136223846793005ull + 1442695040888963407ull;
          x = mlr_decode(f, (uint32_t)(st >> 33) &
                                (f == MLR_FMT_BF16 || f == MLR_FMT_FP16 ? 0xFFFFu : 0xFFu));
          y = mlr_decode(f, (uint32_t)(st >> 17) &
                                (f == MLR_FMT_BF16 || f == MLR_FMT_FP16 ? 0xFFFFu : 0xFFu));
        } while (!isfinite(x) || !isfinite(y));
        a[i] = (t % 5 == 0 && i % 3) ? 0.0f : x;
        b[i] = y;
      }
      st = st * 6364136223846793005ull + 1442695040888963407ull;
      const float c = (t % 4) ? ldexpf((float)(int32_t)(st >> 40), (int)(st % 80) - 60) : 0.0f;
      const float want = mlr_mma_block(m, a, b, m->block, c),
                  got = other_form(m, a, b, m->block, c);
      cr_assert(mlr_f32_bits(got) == mlr_f32_bits(want) || (isnan(got) && isnan(want)),
                "%s block %d: %a vs %a", m->name, t, (double)got, (double)want);
    }
  }
}

/* the steps, on blocks worked out by hand */
Test(mma, steps_by_hand) {
  const mlr_mma_model *e4 = mlr_mma_get(MLR_MMA_SM90_E4M3), *bf = mlr_mma_get(MLR_MMA_SM90_BF16),
                      *amd = mlr_mma_get(MLR_MMA_CDNA3_FP8);
  float a[32] = {0}, b[32] = {0};
  /* 1 + 2^-14: E = 0, units of 2^-13: 2^-14 is cut to 0 (and -2^-14 too: toward zero) */
  a[0] = 1.0f;
  b[0] = 1.0f;
  a[1] = 0x1p-7f;
  b[1] = 0x1p-7f;
  cr_assert_eq(mlr_mma_block(e4, a, b, 32, 0.0f), 1.0f);
  b[1] = -0x1p-7f;
  cr_assert_eq(mlr_mma_block(e4, a, b, 32, 0.0f), 1.0f,
               "-2^-14 truncates toward zero, not to -2^-13");
  /* 1 + 2^-13 is kept exactly */
  a[1] = 0x1p-6f;
  b[1] = 0x1p-7f;
  cr_assert_eq(mlr_mma_block(e4, a, b, 32, 0.0f), 1.0f + 0x1p-13f);
  /* the unnormalised exponent: 1.5 * 1.5 = 2.25 has e = 0 + 0, so its units are 2^-13, and a 2^-13
   * term survives; the result 2.25 + 2^-13 needs 15 significant bits: cut to 14, it is 2.25 */
  a[0] = 1.5f;
  b[0] = 1.5f;
  cr_assert_eq(mlr_mma_block(e4, a, b, 32, 0.0f), 2.25f);
  /* bf16: 25 fraction bits: 1 + 2^-25 survives the cut, then binary32 truncates it to 1 */
  memset(a, 0, sizeof a);
  memset(b, 0, sizeof b);
  a[0] = 1.0f;
  b[0] = 1.0f;
  a[1] = 0x1p-12f;
  b[1] = 0x1p-13f;
  cr_assert_eq(mlr_mma_block(bf, a, b, 16, 0.0f), 1.0f);
  cr_assert_eq(mlr_mma_block(bf, a, b, 16, 0x1.8p-24f), 1.0f + 0x1p-23f,
               "2^-25 + 3 * 2^-25 = 2^-23, exact");
  cr_assert_eq(mlr_mma_block(bf, a, b, 16, -0x1p-25f), 1.0f,
               "C joins the alignment: 1 + 2^-25 - 2^-25");
  /* CDNA3 fp8 (agrees with MMA-Sim on 1,101,312 inner products): 24 fraction bits, then nearest
   * even: 1 + 2^-24 is a tie -> 1 */
  memset(a, 0, sizeof a);
  memset(b, 0, sizeof b);
  a[0] = 1.0f;
  b[0] = 1.0f;
  a[1] = 0x1p-12f;
  b[1] = 0x1p-12f;
  cr_assert_eq(mlr_mma_block(amd, a, b, 16, 0.0f), 1.0f);
  a[2] = 0x1p-12f;
  b[2] = 0x1p-12f; /* 1 + 2^-23: exact */
  cr_assert_eq(mlr_mma_block(amd, a, b, 16, 0.0f), 1.0f + 0x1p-23f);
  a[2] = 0x1p-13f;
  b[2] = 0x1p-12f; /* + 2^-25: cut to 0 (below the unit 2^-24) before rounding */
  cr_assert_eq(mlr_mma_block(amd, a, b, 16, 0.0f), 1.0f, "the tie again, not above it");
  /* the even/odd split: 2^-25 at index 1 (odd) is its own group's E, kept there, then rounded
   * down to units of 2^-24 against the even group's E = 0: 2^-25 -> 0, and -2^-25 -> -2^-24 */
  memset(a, 0, sizeof a);
  memset(b, 0, sizeof b);
  a[0] = 1.0f;
  b[0] = 1.0f;
  a[1] = 0x1p-13f;
  b[1] = 0x1p-12f;
  cr_assert_eq(mlr_mma_block(amd, a, b, 16, 0.0f), 1.0f);
  b[1] = -0x1p-12f;
  cr_assert_eq(mlr_mma_block(amd, a, b, 16, 0.0f), 1.0f - 0x1p-24f,
               "rounded down, not toward zero");
  /* C far below the block is dropped (fp8): 25 exponents below M and more */
  b[1] = 0.0f;
  cr_assert_eq(mlr_mma_block(amd, a, b, 16, -0x1p-26f), 1.0f, "e(C) = -26 < 0 - 25: dropped");
  cr_assert_eq(mlr_mma_block(amd, a, b, 16, -0x1p-25f), 1.0f - 0x1p-24f,
               "e(C) = -25: kept, rounded down to -2^-24");
  /* CDNA3 bf16 (agrees with MMA-Sim on 1,101,312 inner products): blocks of 8, products at 24
   * fraction bits; C never dropped but rounded down to units of 2^(M - 24): a tiny negative C takes
   * a whole unit off (MMA-Sim's asymmetric rounding), a tiny positive one nothing */
  const mlr_mma_model *abf = mlr_mma_get(MLR_MMA_CDNA3_BF16);
  cr_assert_eq(abf->block, 8);
  cr_assert_eq(mlr_mma_block(abf, a, b, 8, 0x1p-60f), 1.0f);
  cr_assert_eq(mlr_mma_block(abf, a, b, 8, -0x1p-60f), 1.0f - 0x1p-24f);
  /* the products' sum is rounded down to units of 2^(M - 31): with C = 2^10 dominant, M = 10 and
   * the products' 1 + 2^-24 lands on a whole unit (2^-21) cut: 1024 + 1 exactly */
  a[1] = 0x1p-12f;
  b[1] = 0x1p-12f;
  cr_assert_eq(mlr_mma_block(abf, a, b, 8, 1024.0f), 1025.0f);
  cr_assert_eq(mlr_mma_block(abf, a, b, 8, 0.0f), 1.0f,
               "1 + 2^-24 then nearest even: the tie -> 1");
  cr_assert_eq(mlr_mma_find("cdna3-bf16"), abf);
  /* a K = 64 dot is two e4m3 blocks, the first's D the second's C */
  float x[64], y[64];
  for (int i = 0; i < 64; i++) {
    x[i] = (float)((i % 7) - 3) * 0.25f;
    y[i] = (float)((i % 5) + 1) * 0.125f;
  }
  const float d1 = mlr_mma_block(e4, x, y, 32, 0.5f);
  cr_assert_eq(mlr_f32_bits(mlr_mma_dot(e4, x, y, 64, 0.5f)),
               mlr_f32_bits(mlr_mma_block(e4, x + 32, y + 32, 32, d1)));
  cr_assert_eq(mlr_mma_find("sm90-bf16"), bf);
  cr_assert_null(mlr_mma_find("sm80-tf32"));
  cr_assert_null(mlr_mma_get(MLR_MMA_UNITS));
}

/* MMA-Sim's inner products (scripts/mmasim_vectors.py: random and targeted operands, C included):
 * the CDNA3 bf16 and fp8 models written from MMA-Sim's description, and the Hopper fp16, bf16 and
 * wgmma e4m3/e5m2 ones fitted to the H200, bit-identical to what MMA-Sim computes */
Test(mma, mmasim_vectors_bit_identical) {
  static const struct {
    const char *file;
    mlr_mma_unit unit;
    mlr_format f;
    int n;
    int k;
  } sets[] = {{"mmasim_cdna3-mfma-bf16.txt", MLR_MMA_CDNA3_BF16, MLR_FMT_BF16, 1792, 16},
              {"mmasim_sm90-mma-bf16.txt", MLR_MMA_SM90_BF16, MLR_FMT_BF16, 1152, 16},
              {"mmasim_sm90-mma-f16.txt", MLR_MMA_SM90_F16, MLR_FMT_FP16, 1152, 16},
              {"mmasim_sm90-wgmma-e4m3.txt", MLR_MMA_SM90_E4M3, MLR_FMT_E4M3, 1024, 32},
              {"mmasim_sm90-wgmma-e5m2.txt", MLR_MMA_SM90_E5M2, MLR_FMT_E5M2, 1024, 32},
              {"mmasim_cdna3-mfma-fp8.txt", MLR_MMA_CDNA3_FP8, MLR_FMT_E4M3FNUZ, 1024, 32}};
  for (size_t k = 0; k < sizeof sets / sizeof *sets; k++) {
    int n;
    cr_expect_eq(run_file(sets[k].file, mlr_mma_get(sets[k].unit), sets[k].f, sets[k].k, 1, &n), 0,
                 "%s", sets[k].file);
    cr_expect_eq(n, sets[k].n, "%s", sets[k].file);
  }
}
