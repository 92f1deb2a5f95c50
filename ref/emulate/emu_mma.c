/* emu_mma.c: the emulator's matrix-unit dots (emu_mma.h). Built with -fno-trapping-math (see
 * CMakeLists.txt): GCC vectorises trunc() only when FP exceptions are not observed; no value
 * changes (the value-changing options stay off). */
#include "emu_mma.h"

#include <math.h>

/* one block [i0, i1) of the unit m from C = c[l] to D (in c), over the terms with phase (i - i0) & 3
 * < 2 (phase 0), >= 2 (phase 1) or all (phase -1: the loop over i skips nothing) */
static inline __attribute__((always_inline)) void block(const mlr_mma_model *m, int64_t nl, int i0, int i1, int phase, const float *xa,
                                                        const int *ea, int64_t sa, const float *xb, const int *eb, float *c,
                                                        double *restrict sc, double *restrict S, int *restrict E) {
#define MLR__IN_PHASE(i) (phase < 0 || ((((i) - i0) & 3) < 2) == (phase == 0))
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
    if (E[l] <= MLR_MMA_EZERO / 2) c[l] = 0.0f;
    else if (E[l] >= MLR_MMA_ENONFIN / 2) { /* the model's IEEE sum */
      double s = c[l];
      for (int i = i0; i < i1; i++)
        if (MLR__IN_PHASE(i)) s += (double)xa[i * sa + l] * (double)xb[i];
      c[l] = (float)s;
    }
  }
#undef MLR__IN_PHASE
}

/* the lanes' loop; always inlined, so lanes16's fixed count unrolls it. A lowered unit (mlr_mma.h:
 * mma.sync e4m3 on sm_90) runs each block as two fp16 blocks from 0, then C + their result in binary32,
 * lanes in groups of 64 (the saved C's scratch) */
static inline __attribute__((always_inline)) void lanes(const mlr_mma_model *m, int64_t nl, int n, const float *xa, const int *ea,
                                                        int64_t sa, const float *xb, const int *eb, float *c, double *restrict sc,
                                                        double *restrict S, int *restrict E) {
  const mlr_mma_model *f = m->lowered ? mlr_mma_get(MLR_MMA_SM90_F16) : m;
  for (int i0 = 0; i0 < n; i0 += m->block) {
    const int i1 = i0 + m->block < n ? i0 + m->block : n;
    if (!m->lowered) {
      block(m, nl, i0, i1, -1, xa, ea, sa, xb, eb, c, sc, S, E);
      continue;
    }
    for (int64_t l0 = 0; l0 < nl; l0 += 64) {
      const int64_t w = nl - l0 < 64 ? nl - l0 : 64;
      float cin[64];
      for (int64_t l = 0; l < w; l++) cin[l] = c[l0 + l], c[l0 + l] = 0.0f;
      for (int ph = 0; ph < 2; ph++) block(f, w, i0, i1, ph, xa + l0, ea + l0, sa, xb, eb, c + l0, sc, S, E);
      for (int64_t l = 0; l < w; l++) c[l0 + l] = cin[l] + c[l0 + l]; /* FADD: nearest even */
    }
  }
}

/* the QK form (16 heads: the loops over lanes unrolled, the lane state in registers) and any other */
MLR_FMA_CLONES static void lanes16(const mlr_mma_model *m, int n, const float *xa, const int *ea, int64_t sa, const float *xb,
                                   const int *eb, float *c) {
  double sc[16], S[16];
  int E[16];
  lanes(m, 16, n, xa, ea, sa, xb, eb, c, sc, S, E);
}

MLR_FMA_CLONES void mlr__emu_mma_lanes(const mlr_mma_model *m, int64_t nl, int n, const float *xa, const int *ea, int64_t sa,
                                       const float *xb, const int *eb, float *c, double *sc, double *S, int *E) {
  if (nl == 16) lanes16(m, n, xa, ea, sa, xb, eb, c);
  else lanes(m, nl, n, xa, ea, sa, xb, eb, c, sc, S, E);
}

