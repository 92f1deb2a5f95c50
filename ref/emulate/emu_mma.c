/* emu_mma.c: the emulator's matrix-unit dots (emu_mma.h). Built with -fno-trapping-math (see
 * CMakeLists.txt): GCC vectorises trunc() only when FP exceptions are not observed; no value
 * changes (the value-changing options stay off). */
#include "emu_mma.h"

#include <math.h>

/* one block [i0, i1) of the unit m from C = c[l] to D (in c), over the terms with phase (i - i0) &
 * 3 < 2 (phase 0), >= 2 (phase 1) or all (phase -1: the loop over i skips nothing) */
static inline __attribute__((always_inline)) void
block(const mlr_mma_model *m, int64_t nl, int i0, int i1, int phase, const float *xa, const int *ea,
      int64_t sa, const float *xb, const int *eb, float *c, double *restrict sc, double *restrict S,
      int *restrict E) {
#define MLR__IN_PHASE(i) (phase < 0 || ((((i)-i0) & 3) < 2) == (phase == 0))
#pragma omp simd
  for (int64_t l = 0; l < nl; l++) E[l] = mlr_mma_c_exp(c[l]);
  for (int i = i0; i < i1; i++) {
    if (!MLR__IN_PHASE(i)) continue;
    const int *restrict ei = ea + i * sa, eq = eb[i];
#pragma omp simd
    for (int64_t l = 0; l < nl; l++) E[l] = ei[l] + eq > E[l] ? ei[l] + eq : E[l];
  }
#pragma omp simd
  for (int64_t l = 0; l < nl; l++) {
    const int ok = E[l] > MLR_MMA_EZERO / 2 && E[l] < MLR_MMA_ENONFIN / 2;
    sc[l] = ok ? mlr__mma_pow2(m->frac_bits - E[l]) : 0.0; /* in range: -283 <= E <= 260 */
    S[l] = ok ? trunc((double)c[l] * sc[l]) : 0.0;
  }
  for (int i = i0; i < i1; i++) {
    if (!MLR__IN_PHASE(i)) continue;
    const float *restrict ai = xa + i * sa;
    const double bi = (double)xb[i];
#pragma omp simd
    for (int64_t l = 0; l < nl; l++) S[l] += trunc((double)ai[l] * sc[l] * bi);
  }
  int special = 0; /* a lane of zeros (D = +0; its S is 0 already) or with a NaN or Inf */
#pragma omp simd reduction(| : special)
  for (int64_t l = 0; l < nl; l++) {
    const int ok = E[l] > MLR_MMA_EZERO / 2 && E[l] < MLR_MMA_ENONFIN / 2;
    special |= !ok;
    const float d = mlr_mma_finish(m, S[l], ok ? E[l] : 0);
    c[l] = ok ? d : c[l];
  }
  for (int64_t l = 0; l < nl && special; l++) {
    if (E[l] <= MLR_MMA_EZERO / 2)
      c[l] = 0.0f;
    else if (E[l] >= MLR_MMA_ENONFIN / 2) { /* the model's IEEE sum */
      double s = c[l];
      for (int i = i0; i < i1; i++)
        if (MLR__IN_PHASE(i)) s += (double)xa[i * sa + l] * (double)xb[i];
      c[l] = (float)s;
    }
  }
#undef MLR__IN_PHASE
}

/* CDNA3's two stages (mlr_mma.h, stages a-c) for one block [i0, i1) of w <= 64 lanes, in binary64:
 * each product a b is exact (48 bits at most) and times 2^(F - E_g) a power of two in range, so
 * trunc() is stage a's cut and the cut products (below 2^(F + 2) units each, 16 at most) sum
 * exactly; stage b's roundings down are floor() of exact scalings; S + 128 C is an integer below
 * 2^40, exact, and its conversion to binary32 rounds once, to nearest even. Lanes with a NaN or
 * Inf, or a product that may reach 2^128 (its unit exponent >= 126), take the scalar block. */
static inline __attribute__((always_inline)) void block2(const mlr_mma_model *m, const int pair,
                                                         int64_t w, int i0, int i1, const float *xa,
                                                         const int *ea, int64_t sa, const float *xb,
                                                         const int *eb, float *c) {
  const int F = m->frac_bits;
  double S[2][64], sc[2][64];
  int Eg[2][64], sp[64], special = 0;
  for (int g = 0; g < 1 + pair; g++)
    for (int64_t l = 0; l < w; l++) Eg[g][l] = 2 * MLR_MMA_EZERO;
  for (int i = i0; i < i1; i++) {
    const int g = pair ? (i - i0) & 1 : 0, *restrict ei = ea + i * sa, eq = eb[i];
    int *restrict E = Eg[g];
#pragma omp simd
    for (int64_t l = 0; l < w; l++) E[l] = ei[l] + eq > E[l] ? ei[l] + eq : E[l];
  }
  for (int g = 0; g < 1 + pair; g++)
#pragma omp simd
    for (int64_t l = 0; l < w; l++) {
      const int ok = Eg[g][l] > MLR_MMA_EZERO / 2 && Eg[g][l] < 126;
      sc[g][l] = ok ? mlr__mma_pow2(F - Eg[g][l]) : 0.0;
      S[g][l] = 0.0;
    }
  for (int i = i0; i < i1; i++) {
    const int g = pair ? (i - i0) & 1 : 0;
    const float *restrict ai = xa + i * sa;
    const double bi = (double)xb[i];
    double *restrict Sg = S[g];
    const double *restrict sg = sc[g];
#pragma omp simd
    for (int64_t l = 0; l < w; l++) Sg[l] += trunc((double)ai[l] * sg[l] * bi);
  }
#pragma omp simd reduction(| : special)
  for (int64_t l = 0; l < w; l++) {
    const int e0 = Eg[0][l], e1 = pair ? Eg[1][l] : 2 * MLR_MMA_EZERO;
    /* C's exponent from its exponent field: a subnormal C counts at -126 (stage b), so no count of
     * leading zeros is needed; field 255 (NaN, Inf) goes to the scalar block */
    const uint32_t cb = mlr_f32_bits(c[l]) & 0x7FFFFFFFu, cf = cb >> 23;
    const int ok0 = e0 > MLR_MMA_EZERO / 2, ok1 = e1 > MLR_MMA_EZERO / 2, okc = cb != 0;
    sp[l] = e0 >= 126 || e1 >= 126 || cf == 255;
    special |= sp[l];
    const int Ep = e0 > e1 ? e0 : e1, anyp = ok0 || ok1;
    const int ce = !okc ? MLR_MMA_EZERO : cf == 0 ? -126 : (int)cf - 127;
    const int Eps = anyp && Ep < 126 ? Ep : 0, M0 = anyp && Ep > ce ? Ep : ce,
              M = M0 > -300 && M0 < 300 ? M0 : 0;
    double s = S[0][l];
    if (pair)
      s = (ok0 ? floor(S[0][l] * mlr__mma_pow2(ok0 ? e0 - Eps : 0)) : 0.0) +
          (ok1 ? floor(S[1][l] * mlr__mma_pow2(ok1 ? e1 - Eps : 0)) : 0.0);
    const double S31 = anyp ? floor(s * mlr__mma_pow2(Eps - F - M + MLR_MMA_CDNA3_SUM_BITS)) : 0.0;
    const int keepc = okc && !(pair && ce < M - MLR_MMA_CDNA3_C_DROP);
    const double C24 = keepc ? floor((double)c[l] * mlr__mma_pow2(MLR_MMA_CDNA3_C_BITS - M)) : 0.0;
    const double T = S31 + C24 * (double)(1 << (MLR_MMA_CDNA3_SUM_BITS - MLR_MMA_CDNA3_C_BITS));
    /* the conversion to binary32 rounds to nearest even */
    const float d = anyp || okc ? (float)(T * mlr__mma_pow2(M - MLR_MMA_CDNA3_SUM_BITS)) : 0.0f;
    c[l] = sp[l] ? c[l] : d; /* a special lane keeps its C for the scalar block below */
  }
  for (int64_t l = 0; l < w && special; l++)
    if (sp[l]) {
      float a[64], b[64];
      for (int i = i0; i < i1; i++) {
        a[i - i0] = xa[i * sa + l];
        b[i - i0] = xb[i];
      }
      c[l] = mlr_mma_block(m, a, b, i1 - i0, c[l]);
    }
}

/* the lanes' loop; always inlined, so lanes16's fixed count unrolls it. A two-stage unit (CDNA3)
 * runs block2 in groups of 64 lanes. A lowered unit (mlr_mma.h:
 * mma.sync e4m3 on sm_90) runs each block as two fp16 blocks from 0, then C + their result in
 * binary32, lanes in groups of 64 (the saved C's scratch) */
static inline __attribute__((always_inline)) void lanes(const mlr_mma_model *m, int64_t nl, int n,
                                                        const float *xa, const int *ea, int64_t sa,
                                                        const float *xb, const int *eb, float *c,
                                                        double *restrict sc, double *restrict S,
                                                        int *restrict E) {
  const mlr_mma_model *f = m->lowered ? mlr_mma_get(MLR_MMA_SM90_F16) : m;
  for (int i0 = 0; i0 < n; i0 += m->block) {
    const int i1 = i0 + m->block < n ? i0 + m->block : n;
    if (m->two_stage) {
      for (int64_t l0 = 0; l0 < nl; l0 += 64) { /* the split a constant in each copy */
        const int64_t w = nl - l0 < 64 ? nl - l0 : 64;
        if (m->two_stage == 2)
          block2(m, 1, w, i0, i1, xa + l0, ea + l0, sa, xb, eb, c + l0);
        else
          block2(m, 0, w, i0, i1, xa + l0, ea + l0, sa, xb, eb, c + l0);
      }
      continue;
    }
    if (!m->lowered) {
      block(m, nl, i0, i1, -1, xa, ea, sa, xb, eb, c, sc, S, E);
      continue;
    }
    for (int64_t l0 = 0; l0 < nl; l0 += 64) {
      const int64_t w = nl - l0 < 64 ? nl - l0 : 64;
      float cin[64];
      for (int64_t l = 0; l < w; l++) {
        cin[l] = c[l0 + l];
        c[l0 + l] = 0.0f;
      }
      for (int ph = 0; ph < 2; ph++)
        block(f, w, i0, i1, ph, xa + l0, ea + l0, sa, xb, eb, c + l0, sc, S, E);
      for (int64_t l = 0; l < w; l++) c[l0 + l] = cin[l] + c[l0 + l]; /* FADD: nearest even */
    }
  }
}

/* the QK form (16 heads: the loops over lanes unrolled, the lane state in registers) and any
 * other */
MLR_FMA_CLONES static void lanes16(const mlr_mma_model *m, int n, const float *xa, const int *ea,
                                   int64_t sa, const float *xb, const int *eb, float *c) {
  double sc[16], S[16];
  int E[16];
  lanes(m, 16, n, xa, ea, sa, xb, eb, c, sc, S, E);
}

MLR_FMA_CLONES void mlr__emu_mma_lanes(const mlr_mma_model *m, int64_t nl, int n, const float *xa,
                                       const int *ea, int64_t sa, const float *xb, const int *eb,
                                       float *c, double *sc, double *S, int *E) {
  if (nl == 16)
    lanes16(m, n, xa, ea, sa, xb, eb, c);
  else
    lanes(m, nl, n, xa, ea, sa, xb, eb, c, sc, S, E);
}
