/* The block FMA model of mlr_mma.h. Exactness: a term is sig_a * sig_b * 2^(lsb_a + lsb_b) with
 * |sig| < 2^24; cut to units of 2^(E - F) it is below 2^(F + 2) (a product's value is below
 * 2^(E + 2), C's below 2^(E + 1)), so for F <= 25 and at most 64 terms the block sums exactly in a
 * 64-bit integer; rounding that integer (times a power of two) to binary32 is done on the integer.
 */
#include "mlr_mma.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <string.h>

static const mlr_mma_model MODELS[MLR_MMA_UNITS] = {
    /* name        block frac result_bits out_round   verified sub_emin lowered two_stage */
    {"sm90-e4m3", 32, 13, 14, MLR_MMA_RZ, 1, -6, 0,
     0}, /* 13 fraction bits, truncated; a 14-bit result */
    {"sm90-bf16", 16, 25, 0, MLR_MMA_RZ, 1, -126, 0,
     0}, /* 25 fraction bits (2 beyond binary32), truncated */
    {"sm90-f16", 16, 25, 0, MLR_MMA_RZ, 1, -14, 0,
     0}, /* subnormal inputs: exponent -14 (mma_probe) */
    /* MMA-Sim (mlr_mma.h, stages a-c): 16 products, even and odd apart, 24 fraction bits */
    {"cdna3-fp8", 16, 24, 0, MLR_MMA_RNE, 0, -7, 0, 2},
    /* two sm90-f16 blocks (frac, rounding, sub_emin are theirs: an e5m2 subnormal is an fp16
     * one) */
    {"sm90-e4m3-sync", 32, 25, 0, MLR_MMA_RZ, 1, -14, 1, 0},
    /* MMA-Sim: 8 products, 24 fraction bits */
    {"cdna3-bf16", 8, 24, 0, MLR_MMA_RNE, 0, -126, 0, 1},
    /* wgmma's fp8 unit with e5m2 operands: sm90-e4m3's block; a subnormal input at e5m2's -14 */
    {"sm90-e5m2", 32, 13, 14, MLR_MMA_RZ, 1, -14, 0, 0},
};

const mlr_mma_model *mlr_mma_get(mlr_mma_unit u) {
  return (unsigned)u < MLR_MMA_UNITS ? &MODELS[u] : NULL;
}

const mlr_mma_model *mlr_mma_find(const char *name) {
  for (int u = 0; name && u < MLR_MMA_UNITS; u++)
    if (strcmp(MODELS[u].name, name) == 0) return &MODELS[u];
  return NULL;
}

/* x = *sig * 2^*lsb exactly, *e = floor(log2 |x|); x finite and nonzero */
static void split(float x, int64_t *sig, int *lsb, int *e) {
  uint32_t m;
  *lsb = mlr_f32_sig(x, &m);
  *sig = (mlr_f32_bits(x) >> 31) ? -(int64_t)m : (int64_t)m;
  *e = *lsb + 63 - MLR__CLZ64((uint64_t)m);
}

/* |v| * 2^sh toward zero, the sign kept (sh may be negative: a right shift drops bits) */
static int64_t shift_rz(int64_t v, int sh) {
  const uint64_t a = v < 0 ? -(uint64_t)v : (uint64_t)v;
  const uint64_t r = sh >= 0 ? a << sh : (-sh >= 64 ? 0 : a >> -sh);
  return v < 0 ? -(int64_t)r : (int64_t)r;
}

/* S * 2^g (exact) rounded to `bits` significant bits and to binary32's grid, by mode */
static float to_f32(int64_t S, int g, int bits, int mode) {
  if (S == 0) return 0.0f;
  const int neg = S < 0;
  uint64_t M = neg ? -(uint64_t)S : (uint64_t)S;
  const int L = 64 - MLR__CLZ64(M);
  int sh = L - bits;
  if (-149 - g > sh) sh = -149 - g; /* binary32's least unit is 2^-149 */
  if (sh > 0) {
    const uint64_t q = sh >= 64 ? 0 : M >> sh, rem = sh >= 64 ? M : M & ((1ull << sh) - 1);
    const uint64_t half = sh >= 65 ? 0 : 1ull << (sh - 1);
    uint64_t r = q;
    if (mode == MLR_MMA_RNE && sh <= 64 && (rem > half || (rem == half && (q & 1)))) r++;
    if (mode == MLR_MMA_RD && neg && rem) r++; /* down: a negative value's magnitude goes up */
    M = r;
    g += sh;
  }
  double v = ldexp((double)M, g);        /* exact: M <= 2^24 */
  if (v > FLT_MAX) v = (double)INFINITY; /* measured (mma_probe): an H200 gives +-Inf, RZ or not */
  return neg ? -(float)v : (float)v;
}

/* the exact product a b = *sig * 2^*lsb of two nonzero finite inputs; returns its unit exponent
 * e(a) + e(b) (step 1: unnormalised, a subnormal input at sub_emin when the unit has one) */
static int product(const mlr_mma_model *m, float a, float b, int64_t *sig, int *lsb) {
  int64_t sa, sb;
  int la, lb, ea, eb;
  split(a, &sa, &la, &ea);
  split(b, &sb, &lb, &eb);
  if (m->sub_emin && ea < m->sub_emin) ea = m->sub_emin; /* a subnormal input's exponent field */
  if (m->sub_emin && eb < m->sub_emin) eb = m->sub_emin;
  *sig = sa * sb;
  *lsb = la + lb;
  return ea + eb;
}

/* v * 2^sh rounded down (toward -Inf): sh < 0 an arithmetic right shift (floor), sh >= 0 exact */
static int64_t shift_rd(int64_t v, int sh) {
  if (sh >= 0) return v * ((int64_t)1 << sh); /* |v| 2^sh < 2^62 where used */
  if (-sh >= 63) return v < 0 ? -1 : 0;
  return v >= 0 ? v >> -sh : -(int64_t)((-(uint64_t)v + ((1ull << -sh) - 1)) >> -sh);
}

/* CDNA3's stages a-c (mlr_mma.h); the operands finite. A product is sig * 2^lsb exactly; cut in
 * stage a it is below 2^(F + 2) units, so n <= 16 of them and stage b's shifts (at most 7 to the
 * left) stay far inside int64. */
static float block_two_stage(const mlr_mma_model *m, const float *a, const float *b, int n,
                             float c) {
  int pinf = 0, ninf = 0;
  for (int i = 0; i < n; i++) { /* stage c: |a b| >= 2^128 (exact in binary64: 48 bits at most) */
    const double p = (double)a[i] * (double)b[i];
    pinf |= p >= 0x1p128;
    ninf |= p <= -0x1p128;
  }
  if (pinf || ninf) return pinf && ninf ? NAN : pinf ? INFINITY : -INFINITY;
  const int F = m->frac_bits, pair = m->two_stage == 2;
  int64_t sig[64], G[2] = {0, 0};
  int lsb[64], Eg[2] = {INT32_MIN, INT32_MIN};
  for (int i = 0; i < n; i++) {
    sig[i] = 0;
    if (a[i] == 0.0f || b[i] == 0.0f) continue; /* a zero product never sets E (MMA-Sim's -999) */
    const int e = product(m, a[i], b[i], &sig[i], &lsb[i]), g = pair ? i & 1 : 0;
    if (e > Eg[g]) Eg[g] = e;
  }
  for (int i = 0; i < n; i++) /* stage a: each group's products cut toward zero and summed */
    if (sig[i]) G[pair ? i & 1 : 0] += shift_rz(sig[i], lsb[i] - (Eg[pair ? i & 1 : 0] - F));
  int64_t s = G[0]; /* in units of 2^(Ep - F) */
  int Ep = Eg[0];
  if (pair) { /* each half rounded down to units of 2^(max(E0, E1) - F), then added */
    Ep = Eg[0] > Eg[1] ? Eg[0] : Eg[1];
    s = (G[0] ? shift_rd(G[0], Eg[0] - Ep) : 0) + (G[1] ? shift_rd(G[1], Eg[1] - Ep) : 0);
  }
  int64_t cs = 0;
  int cl = 0, ce = INT32_MIN;
  if (c != 0.0f) {
    split(c, &cs, &cl, &ce);
    if (ce < -126) ce = -126; /* a subnormal C's exponent field */
  }
  const int anyp = Ep != INT32_MIN; /* a nonzero product (its sum may still be 0) */
  if (!anyp && !cs) return 0.0f;
  const int M = anyp && Ep > ce ? Ep : ce; /* stage b */
  /* units of 2^(M - 31) */
  const int64_t S = s ? shift_rd(s, (Ep - F) - (M - MLR_MMA_CDNA3_SUM_BITS)) : 0;
  int64_t C = 0;
  if (cs && !(pair && ce < M - MLR_MMA_CDNA3_C_DROP))
    C = shift_rd(cs, cl - (M - MLR_MMA_CDNA3_C_BITS)); /* units of 2^(M - 24) */
  return to_f32(S + C * ((int64_t)1 << (MLR_MMA_CDNA3_SUM_BITS - MLR_MMA_CDNA3_C_BITS)),
                M - MLR_MMA_CDNA3_SUM_BITS, 24, MLR_MMA_RNE);
}

void mlr_mma_lowered_split(const float *a, const float *b, int n, float lo[2][32], float hi[2][32],
                           int *nl, int *nh) {
  assert(n >= 0 && n <= 64);
  *nl = *nh = 0;
  for (int i = 0; i < n; i++)
    if ((i & 3) < 2) {
      lo[0][*nl] = a[i];
      lo[1][(*nl)++] = b[i];
    } else {
      hi[0][*nh] = a[i];
      hi[1][(*nh)++] = b[i];
    }
}

float mlr_mma_block(const mlr_mma_model *m, const float *a, const float *b, int n, float c) {
  assert(n >= 0 && n <= m->block && m->block <= 64); /* the exactness argument above */
  if (m->lowered) { /* the two fp16 blocks, then C in binary32 (FADD: nearest even) */
    float lo[2][32], hi[2][32];
    int nl, nh;
    mlr_mma_lowered_split(a, b, n, lo, hi, &nl, &nh);
    const mlr_mma_model *f = &MODELS[MLR_MMA_SM90_F16];
    const float h = mlr_mma_block(f, hi[0], hi[1], nh, mlr_mma_block(f, lo[0], lo[1], nl, 0.0f));
    return c + h;
  }
  int nonfinite = !isfinite(c);
  for (int i = 0; i < n; i++) nonfinite |= !isfinite(a[i]) || !isfinite(b[i]);
  if (nonfinite) { /* not measured: the IEEE sum */
    double s = c;
    for (int i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
    return (float)s;
  }
  if (m->two_stage) return block_two_stage(m, a, b, n, c);
  int64_t sig[64];
  int lsb[64], ex[64], k = 0, E = INT32_MIN;
  for (int i = 0; i < n; i++) {
    if (a[i] == 0.0f || b[i] == 0.0f) continue;
    ex[k] = product(m, a[i], b[i], &sig[k], &lsb[k]);
    if (ex[k] > E) E = ex[k];
    k++;
  }
  int64_t cs = 0;
  int cl = 0, ce = INT32_MIN;
  if (c != 0.0f) split(c, &cs, &cl, &ce);
  if (cs && ce > E) E = ce;
  if (k == 0 && !cs) return 0.0f;
  const int g = E - m->frac_bits; /* the unit every term is cut to */
  int64_t S = 0;
  for (int i = 0; i < k; i++) S += shift_rz(sig[i], lsb[i] - g);
  if (cs) S += shift_rz(cs, cl - g);
  int gs = g;
  if (m->result_bits > 0 && S != 0) { /* the block's result, truncated to result_bits */
    const uint64_t M = S < 0 ? -(uint64_t)S : (uint64_t)S;
    const int drop = 64 - MLR__CLZ64(M) - m->result_bits;
    if (drop > 0) {
      S = shift_rz(S, -drop);
      gs += drop;
    }
  }
  return to_f32(S, gs, 24, m->out_round);
}

float mlr_mma_dot(const mlr_mma_model *m, const float *a, const float *b, int64_t k, float c) {
  for (int64_t i = 0; i < k; i += m->block)
    c = mlr_mma_block(m, a + i, b + i, (int)(k - i < m->block ? k - i : m->block), c);
  return c;
}
