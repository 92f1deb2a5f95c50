/* AITER's per-head Triton decode stage, bit for bit (lanes8.h). The chains were read from the
 * stage's PTX for sm_90 (Triton 3.6), of its fp8-KV and its bf16-KV build, and checked against its
 * outputs (docs/numerics.md). */
#include "lanes8.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "mlr_emu_ops.h"

enum { NOPE = 512, ROPE = 64, LANES = 8 };

/* hi + lo (|lo| <= ulp(hi) / 2, the exact sum's binary64 rounding and its error) to bf16, to
 * nearest even, rounded once: bf16 keeps 7 of binary64's 52 fraction bits, so the 45 dropped bits
 * decide, and lo only a tie of them. The result has 8 significant bits: its conversion to binary32
 * is exact (or overflows to Inf, as the rounding does). Subnormal bf16 results (below 2^-126) take
 * binary32's rounding of hi first; no logit of the stage comes near them. */
static float bf16_of(double hi, double lo) {
  if (!(fabs(hi) >= 0x1p-126) || isinf(hi)) return mlr__emu_round_to((float)hi, MLR_FMT_BF16);
  uint64_t u;
  memcpy(&u, &hi, 8);
  const uint64_t drop = (UINT64_C(1) << 45) - 1, half = UINT64_C(1) << 44, rem = u & drop;
  const double tail = hi < 0 ? -lo : lo; /* toward a larger magnitude when positive */
  u &= ~drop;
  if (rem > half || (rem == half && (tail > 0 || (tail == 0 && (u >> 45 & 1)))))
    u += UINT64_C(1) << 45; /* a carry into the exponent is the next binade, exactly */
  double r;
  memcpy(&r, &u, 8);
  return (float)r;
}

/* bf16(a b + c), one rounding: a b of two bf16 values is exact in binary64, its sum with c exact
 * as hi + lo (two-sum) */
static float fma_bf16(float a, float b, float c) {
  const double p = (double)a * (double)b, s = p + (double)c, z = s - p;
  return bf16_of(s, (p - (s - z)) + ((double)c - z));
}

static float add_bf16(float a, float b) { return fma_bf16(a, 1.0f, b); }

/* one lane's chain over its n <= 64 products q[col(i)] k[col(i)]: the second product rounded, the
 * first fused into it, then each next one fused (fma.rn.bf16), or rounded and added where bit i of
 * apart is set (a mul.bf16 and an add.bf16 the compiler did not contract) */
static float lane_chain(const float *q, int64_t qs, const float *k, const int *col, int n,
                        uint64_t apart) {
  float acc = fma_bf16(q[col[1] * qs], k[col[1]], 0.0f);
  acc = fma_bf16(q[col[0] * qs], k[col[0]], acc);
  for (int i = 2; i < n; i++)
    acc = apart >> i & 1 ? add_bf16(acc, fma_bf16(q[col[i] * qs], k[col[i]], 0.0f))
                         : fma_bf16(q[col[i] * qs], k[col[i]], acc);
  return acc;
}

/* n lanes' sums (n a power of two) by bf16 butterflies at n / 2, .., 2, 1: lane 0's (each level's
 * a + b is b + a, so every lane ends with the same sum) */
static float butterflies(float *v, int n) {
  for (int o = n / 2; o >= 1; o /= 2) {
    float nx[32];
    for (int j = 0; j < n; j++) nx[j] = add_bf16(v[j], v[j ^ o]);
    for (int j = 0; j < n; j++) v[j] = nx[j];
  }
  return v[0];
}

float mlr__emu_lanes8_dot(const float *q, int64_t qs, const float *k) {
  float nope[LANES], rope[LANES];
  for (int j = 0; j < LANES; j++) {
    int cn[NOPE / LANES], cr[ROPE / LANES];
    for (int i = 0; i < NOPE / LANES; i++) cn[i] = (i / 8) * 64 + j * 8 + i % 8;
    for (int i = 0; i < ROPE / LANES; i++) cr[i] = NOPE + j * 8 + i;
    /* the last two products of each chain rounded apart */
    nope[j] = lane_chain(q, qs, k, cn, NOPE / LANES, UINT64_C(3) << (NOPE / LANES - 2));
    rope[j] = lane_chain(q, qs, k, cr, ROPE / LANES, UINT64_C(3) << (ROPE / LANES - 2));
  }
  return add_bf16(butterflies(nope, LANES), butterflies(rope, LANES));
}

/* The bf16-KV build: lane L's nope chain over columns 8 L + i (i < 8) and 256 + 8 L + i - 8, which
 * LLVM packs into fma.rn.bf16x2 keeping the low halves, so the odd columns from the fourth on are
 * rounded products added (mul.bf16x2, add.bf16x2: bits 3, 5, .., 15); lane j's rope chain over
 * columns 512 + 8 j + i, every product after the second fused */
float mlr__emu_lanes8_dot_bf16kv(const float *q, int64_t qs, const float *k) {
  float nope[32], rope[LANES];
  for (int L = 0; L < 32; L++) {
    int cn[16];
    for (int i = 0; i < 16; i++) cn[i] = (i < 8 ? 0 : 256 - 8) + 8 * L + i;
    nope[L] = lane_chain(q, qs, k, cn, 16, 0xAAA8u);
  }
  for (int j = 0; j < LANES; j++) {
    int cr[ROPE / LANES];
    for (int i = 0; i < ROPE / LANES; i++) cr[i] = NOPE + 8 * j + i;
    rope[j] = lane_chain(q, qs, k, cr, ROPE / LANES, 0);
  }
  return add_bf16(butterflies(nope, 32), butterflies(rope, LANES));
}

void mlr__emu_lanes8_pv(const float *p, const float *v, int n, float *out) {
  float pt[4];
  for (int t = 0; t < 4; t++) pt[t] = t < n ? p[t] : 0.0f;
  for (int d = 0; d < 512; d++) {
    float vt[4];
    for (int t = 0; t < 4; t++) vt[t] = t < n ? v[t * 512 + d] : 0.0f;
    const int a = d & 1, b = a ^ 1; /* even columns start with token 0, odd ones with 1 */
    float s = pt[a] * vt[a];
    s = fmaf(pt[b], vt[b], s);
    s = fmaf(pt[2], vt[2], s);
    out[d] = fmaf(pt[3], vt[3], s);
  }
}
