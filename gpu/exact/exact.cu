/* exact.cu: the GPU exact kernel (mlr_gpu.h says what it runs). Every output element is computed
 * with the operations of ref/emulate in the same order; the scalar steps are the same source
 * (ref/emulate/mlr_emu_ops.h, ref/formats, ref/pmath, ref/pmath/mlr_exact.h, all MLR_HD). Where the
 * GPU works in parallel, it is over elements that the model computes independently, or over an
 * operation whose result does not depend on the order (a max, an exact sum):
 *
 *   k_amax   max |q| per group (dynamic, per head, per token), then the task's scale (one block
 *            each)
 *   k_qprep  Q values, the QK operand, the logit scale c and each Q row's range (one block per
 *            row)
 *   k_qk     logits: a thread per (2 KV tokens, head), the chain over 576 columns in order; a
 *            block holds 32 tokens of one query token and its 16 heads' Q (k_qk_x8: exact dots
 *            over fp8 KV, the block's K rows decoded once into binary64, 32 columns at a time)
 *   k_split  a block per (query token, split), 16 warps: warp h does head h's softmax per softmax
 *            block (the max, fmaxf, order-free; the p's, a token per lane; their sum in token
 *            order), and lane l of warp w runs output column 32w + l of every head, each head's PV
 *            chain in token order, V read and decoded once per block (exact dots: one binary64
 *            chain, two with P split, or the 128-bit / long accumulator, as the ranges allow); the
 *            split's result (output, or a partial)
 *   k_merge  one block per (query token, head): thread d merges column d over the splits
 *
 * Written against HIP names; gpu/hip_compat.h maps them onto CUDA. Build flags keep the arithmetic
 * IEEE: no contraction (-fmad=false / -ffp-contract=off), no flush to zero, IEEE division. */
#include "../hip_compat.h"
/* after the runtime headers: mlr_base.h's memcpy must be the device-callable one */
#include "../gpu_try.h"

#include <stdlib.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "mlr_emu_ops.h"
#include "mlr_exact.h"
#include "mlr_gpu.h"

/* nvcc unrolls the token loops by 4 (their loads then overlap); clang for AMD declines loops with
 * an early exit and warns (an error under -Werror), so there the hint is left out */
#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#define MLR_UNROLL4
#else
#define MLR_UNROLL4 _Pragma("unroll 4")
#endif

namespace {

enum { QK = MLR_EMU_QK_DIM, DV = MLR_EMU_V_DIM, NOPE = MLR_EMU_NOPE, MAXH = MLR_GPU_MAX_HEADS };
enum {
  SPLIT_THREADS = 32 * MLR_GPU_MAX_HEADS,
  QK_THREADS = 256,
  QK_ROWS = 2 * QK_THREADS / MLR_GPU_MAX_HEADS,
  AMAX_THREADS = 1024,
  MERGE_THREADS = 512,
  QKX_THREADS = 128,
  QKX_ROWS = 4 * QKX_THREADS / (MLR_GPU_MAX_HEADS / 2)
};
enum {
  PV_CHAIN = 0,
  PV_I128 = 1,
  PV_LONG = 2,
  PV_SPLIT = 3
}; /* how a head sums one block's PV (k_split) */

/* everything the kernels read: the recipe's switches, sizes and device pointers */
struct gp {
  int H, kv8, kvfmt, folded, fused, qk_op, pv_op, qk_dot, pv_exact, qk_bf16, logit_bf16, exp_sm,
      exp_lse;
  int p_fmt, into, normalized, softmax_exp, lse_base, merge_rule, out_fmt, qfmt, qscale, qtask;
  float kvs, clamp, c0;
  int klsb, ktop, vlsb, vtop; /* fp8 KV: the range of every finite K and V operand (exact dots) */
  int64_t T, S, page, blk;
  const uint16_t *q;
  const void *kv;
  const int32_t *kv_indptr, *kv_indices;
  const int32_t *tok_b;         /* [T] batch of each query token */
  const int64_t *tok_L, *soff;  /* [T] KV tokens it sees, offset of its logits in lg */
  const int64_t *nsplit, *slen; /* [B] */
  float *scales, *qT, *c;       /* [groups], [T][576][H], [T*H] */
  int *qlsb, *qtop;             /* [T*H] (exact QK) */
  unsigned long long *clipped;
  float *lg; /* logits, then P operands, [soff[t] + h*L + j] */
  float *part_o, *part_lse, *part_max, *part_sum;
  void *o;
  float *lse;
};

__device__ int64_t kv_row(const gp &p, int64_t b, int64_t pos) {
  if (!p.kv_indices) return p.kv_indptr[b] + pos;
  return (int64_t)p.kv_indices[p.kv_indptr[b] + pos / p.page] * p.page + pos % p.page;
}

__device__ uint32_t kv_code(const gp &p, int64_t row, int i) {
  return p.kv8 ? ((const uint8_t *)p.kv)[row * QK + i] : ((const uint16_t *)p.kv)[row * QK + i];
}

/* a KV code as an operand: the emulator's code tables (klut, vlut) element by element */
__device__ float kv_operand(const gp &p, uint32_t code, int op) {
  float v = mlr_decode((mlr_format)p.kvfmt, code);
  if (!p.folded) v = v * p.kvs;
  return mlr__emu_to_operand(v, op);
}

/* ---- Q ---- */

__global__ void k_amax(gp p) {
  const int64_t g = blockIdx.x;
  int64_t t0 = 0, t1 = p.T, h0 = 0, h1 = p.H;
  if (p.qscale == MLR_QS_PER_HEAD) {
    h0 = g;
    h1 = g + 1;
  } else if (p.qscale == MLR_QS_PER_TOKEN) {
    t0 = g;
    t1 = g + 1;
  }
  const int64_t nh = h1 - h0, nrows = (t1 - t0) * nh;
  float amax = 0.0f; /* NaN is skipped by the comparison, as in the emulator's group_amax */
  for (int64_t rr = threadIdx.x >> 5; rr < nrows; rr += blockDim.x >> 5) { /* a row per 32 lanes */
    const uint16_t *q = p.q + ((t0 + rr / nh) * p.H + h0 + rr % nh) * QK;
    for (int i = threadIdx.x & 31; i < QK; i += 32) {
      const float a = fabsf(mlr_bits_f32((uint32_t)q[i] << 16));
      if (a > amax) amax = a;
    }
  }
  __shared__ unsigned int mx; /* non-negative binary32 values order as their bit patterns */
  if (threadIdx.x == 0) mx = 0;
  __syncthreads();
  atomicMax(&mx, mlr_f32_bits(amax));
  __syncthreads();
  if (threadIdx.x == 0)
    p.scales[g] = mlr_task_scale(mlr_bits_f32(mx), mlr_format_max((mlr_format)p.qfmt));
}

__global__ void k_qprep(gp p) {
  const int64_t row = blockIdx.x, t = row / p.H, h = row % p.H;
  const int i = threadIdx.x;
  const uint16_t code = p.q[row * QK + i];
  float qv, qs = 1.0f;
  if (p.qfmt < 0)
    qv = mlr_bits_f32((uint32_t)code << 16);
  else {
    qs = p.scales[p.qscale == MLR_QS_PER_HEAD ? h : p.qscale == MLR_QS_PER_TOKEN ? t : 0];
    int clip;
    qv = mlr__emu_q_quant(code, qs, (mlr_format)p.qfmt, p.qtask, &clip);
    if (clip) atomicAdd(p.clipped, 1ull);
  }
  const float op = mlr__emu_to_operand(qv, p.qk_op);
  p.qT[(t * QK + i) * p.H + h] = op;
  if (i == 0) {
    float c = p.c0; /* fp32(sm_scale [* log2 e]) [* q_scale] [* kv_scale], left to right */
    if (p.qfmt >= 0) c = c * qs;
    if (p.folded) c = c * p.kvs;
    p.c[row] = c;
  }
  if (p.qk_dot != MLR_DOT_EXACT) return;
  __shared__ int lo, hi, nonfinite;
  if (i == 0) {
    lo = 1000;
    hi = -1000;
    nonfinite = 0;
  }
  __syncthreads();
  int l = 1000, top = -1000;
  if (!isfinite(op))
    atomicOr(&nonfinite, 1);
  else
    mlr_f32_range_add(op, &l, &top);
  atomicMin(&lo, l);
  atomicMax(&hi, top);
  __syncthreads();
  if (i == 0) {
    p.qlsb[row] = lo;
    p.qtop[row] = nonfinite ? INT_MAX : hi;
  }
}

/* ---- logits ---- */

/* the exact dot of n products q[i*qs] * k(i), rounded once, given both vectors' ranges (top =
 * INT_MAX: a NaN or Inf among them): the emulator's exact_dot and its binary64 paths (the chain in
 * order when an operand is not finite; otherwise the exact sum, which every method below gives) */
template <typename KF>
__device__ float exact_dot(const float *q, int qs, KF k, int n, int qlsb, int qtop, int klsb,
                           int ktop) {
  const int nonfinite = qtop == INT_MAX || ktop == INT_MAX;
  if (!nonfinite && (qlsb > qtop || klsb > ktop)) return 0.0f; /* an all-zero vector */
  if (nonfinite || mlr_f64_fits(qlsb, qtop, klsb, ktop, n)) {
    double a = 0.0; /* products are exact in binary64; so is every partial sum when it fits */
    for (int i = 0; i < n; i++) a = fma((double)q[i * qs], (double)k(i), a);
    return (float)a;
  }
  if (mlr_i128_fits(qlsb, qtop, klsb, ktop, n)) {
    mlr_i128 acc = 0;
    const int g = qlsb + klsb;
    for (int i = 0; i < n; i++) mlr_i128_fma(&acc, q[i * qs], k(i), g);
    return mlr_i128_round_f32(acc, g);
  }
  mlr_xacc x;
  mlr_xacc_clear(&x);
  for (int i = 0; i < n; i++) mlr_xacc_add(&x, (double)q[i * qs] * (double)k(i));
  return mlr_xacc_round_f32(&x);
}

/* the operands (op: mlr_operand; fp8 KV through the code table lut) of one KV row's columns
 * c0 .. c0+15: one or two 16-byte loads (rows are 576 codes, so a group of 16 columns starting at a
 * multiple of 16 is 16-byte aligned) */
template <int KV8>
__device__ void load_ops16(const gp &p, const float *lut, int op, int64_t row, int c0, float *out) {
  if (KV8) {
    const uint4 w = *(const uint4 *)((const uint8_t *)p.kv + row * QK + c0);
    const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int c = 0; c < 16; c++) out[c] = lut[(ws[c >> 2] >> (8 * (c & 3))) & 0xFF];
  } else {
    const uint4 *src = (const uint4 *)((const uint16_t *)p.kv + row * QK + c0);
    const uint4 w0 = src[0], w1 = src[1];
    const uint32_t ws[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
    for (int c = 0; c < 16; c++)
      out[c] = kv_operand(p, (ws[c >> 1] >> (16 * (c & 1))) & 0xFFFF, op);
  }
}

/* a logit from its dot: the recipe's roundings and scale, in the emulator's order */
__device__ void store_logit(const gp &p, int64_t t, int64_t h, int64_t L, int64_t j, float s) {
  if (p.qk_bf16) s = mlr__emu_round_to(s, MLR_FMT_BF16);
  s = s * p.c[t * p.H + h];
  if (p.logit_bf16) s = mlr__emu_round_to(s, MLR_FMT_BF16);
  p.lg[p.soff[t] + h * L + j] = s;
}

/* Logits: thread (rows r and r + 16, head h) of a block of 32 KV tokens x 16 heads of one query
 * token (two rows a thread: each Q operand read from shared memory serves two chains); the token's
 * Q operands in shared memory, each K row read 16 columns at a time. seq and nope_rope are binary32
 * fma chains in column order. exact with bf16 KV (fp8 KV: k_qk_x8): the binary64 chain, which is
 * the emulator's exact result wherever every partial sum is exact in binary64 and its naive chain
 * where an operand is not finite, else the exact sum through exact_dot; the row's range, gathered
 * in the chain's pass, decides. */
template <int KV8>
__global__ void __launch_bounds__(QK_THREADS) k_qk(gp p) {
  __shared__ float qs[QK * MAXH]; /* [576][16] */
  __shared__ float klut[256];
  const int H = p.H, tid = threadIdx.x;
  const int64_t t = blockIdx.y, L = p.tok_L[t], j0 = (int64_t)blockIdx.x * QK_ROWS;
  if (j0 >= L) return;
  const int64_t b = p.tok_b[t];
  for (int k = tid; k < QK * H; k += QK_THREADS) qs[(k / H) * MAXH + k % H] = p.qT[t * QK * H + k];
  if (KV8)
    for (int k = tid; k < 256; k += QK_THREADS) klut[k] = kv_operand(p, (uint32_t)k, p.qk_op);
  __syncthreads();
  const int r = tid / MAXH, h = tid % MAXH;
  const int64_t ja = j0 + r, jb = ja + QK_ROWS / 2;
  if (ja >= L || h >= H) return;
  const int two =
      jb <
      L; /* the second row exists (its chain is computed on row ja's data otherwise, and dropped) */
  const int64_t kra = kv_row(p, b, ja), krb = two ? kv_row(p, b, jb) : kra;
  const float *q = qs + h;
  float s[2];
  if (!KV8 && p.qk_dot == MLR_DOT_EXACT) {
    double a[2] = {0.0, 0.0};
    int nonfinite[2] = {0, 0}, klo[2] = {1000, 1000}, khi[2] = {-1000, -1000};
    for (int i0 = 0; i0 < QK; i0 += 16) {
      float k[2][16];
      load_ops16<KV8>(p, klut, p.qk_op, kra, i0, k[0]);
      load_ops16<KV8>(p, klut, p.qk_op, krb, i0, k[1]);
#pragma unroll
      for (int c = 0; c < 16; c++) {
        const double qv = q[(i0 + c) * MAXH];
#pragma unroll
        for (int w = 0; w < 2; w++) {
          if (!isfinite(k[w][c]))
            nonfinite[w] = 1;
          else
            mlr_f32_range_add(k[w][c], &klo[w], &khi[w]);
          a[w] = fma(qv, (double)k[w][c], a[w]);
        }
      }
    }
    const int ql = p.qlsb[t * H + h], qt = p.qtop[t * H + h];
    for (int w = 0; w < 2; w++) {
      if (qt == INT_MAX || nonfinite[w] || ql > qt || klo[w] > khi[w] ||
          mlr_f64_fits(ql, qt, klo[w], khi[w], QK))
        s[w] = (float)a[w];
      else {
        const int64_t krow = w ? krb : kra;
        auto kv = [&](int i) -> float {
          return kv_operand(p, ((const uint16_t *)p.kv)[krow * QK + i], p.qk_op);
        };
        s[w] = exact_dot(q, MAXH, kv, QK, ql, qt, klo[w], khi[w]);
      }
    }
  } else {
    float a[2] = {0.0f, 0.0f}, ar[2] = {0.0f, 0.0f}; /* nope_rope: the rope columns' own chains */
    const int split = p.qk_dot == MLR_DOT_NOPE_ROPE ? NOPE : QK;
    for (int i0 = 0; i0 < QK; i0 += 16) {
      float k[2][16];
      load_ops16<KV8>(p, klut, p.qk_op, kra, i0, k[0]);
      load_ops16<KV8>(p, klut, p.qk_op, krb, i0, k[1]);
      if (i0 < split) {
#pragma unroll
        for (int c = 0; c < 16; c++) {
          const float qv = q[(i0 + c) * MAXH];
          a[0] = fmaf(qv, k[0][c], a[0]);
          a[1] = fmaf(qv, k[1][c], a[1]);
        }
      } else {
#pragma unroll
        for (int c = 0; c < 16; c++) {
          const float qv = q[(i0 + c) * MAXH];
          ar[0] = fmaf(qv, k[0][c], ar[0]);
          ar[1] = fmaf(qv, k[1][c], ar[1]);
        }
      }
    }
    for (int w = 0; w < 2; w++) s[w] = split < QK ? a[w] + ar[w] : a[w];
  }
  for (int w = 0; w < 1 + two; w++) store_logit(p, t, h, L, w ? jb : ja, s[w]);
}

/* k_qk_x8's rare cases for head h and K row krow, by exact_dot: kind 1, a NaN or Inf in K (a K top
 * of INT_MAX: its naive binary64 chain in column order, the emulator's rule); kind 2, the exact
 * sum. Out of line, so the main path keeps its registers. */
__device__ __noinline__ float qk_x8_fallback(const gp &p, const float *klut, int64_t t, int h,
                                             int64_t krow, int kind, int qlo, int qhi) {
  const float *q = p.qT + t * QK * p.H + h; /* Q operands, stride H */
  auto kv = [&](int i) -> float { return klut[((const uint8_t *)p.kv)[krow * QK + i]]; };
  return exact_dot(q, p.H, kv, QK, qlo, qhi, p.klsb, kind == 1 ? INT_MAX : p.ktop);
}

/* Logits for exact dots over fp8 KV: a block per 64 KV tokens of one query token; thread (g, hp)
 * computes rows 4g .. 4g+3 for heads 2hp and 2hp+1 (8 chains: each operand read from shared memory
 * serves 2 or 4 of them, so the fma units, not the loads, set the pace). The K rows are decoded
 * once per block, 32 columns at a time, into binary64 in shared memory (column-major: a thread's 4
 * rows are 2 vector loads), beside the chunk's Q operands in binary64. The ranges are Q's row and
 * every finite K code (a bound of any row's): one binary64 chain where that fits (mlr_f64_fits);
 * else two, with Q split at 2^s (mlr_f64x2_fits), for every head of the block when one head needs
 * it (each head's own s; s = its lsb, no split, where one chain holds it), so its warps do not
 * diverge; else exact_dot. A NaN or Inf in K makes the chains' sums NaN or Inf (a non-finite
 * product never leaves a sum), and only then is the row's naive chain run (the emulator's rule); a
 * Q row with NaN or Inf is never split, so its chain is that naive chain already. */
__global__ void __launch_bounds__(QKX_THREADS) k_qk_x8(gp p) {
  enum { CH = 32 };
  __shared__ double2 kd[CH][QKX_ROWS / 2], qh[CH][MAXH / 2], ql[CH][MAXH / 2];
  __shared__ double kc[MAXH];
  __shared__ float klut[256];
  __shared__ double klutd[256];
  const int H = p.H, tid = threadIdx.x, g = tid / (MAXH / 2), hp = tid % (MAXH / 2);
  const int64_t t = blockIdx.y, L = p.tok_L[t], j0 = (int64_t)blockIdx.x * QKX_ROWS;
  if (j0 >= L) return;
  const int64_t b = p.tok_b[t];
  for (int k = tid; k < 256; k += QKX_THREADS) {
    klut[k] = kv_operand(p, (uint32_t)k, p.qk_op);
    klutd[k] = klut[k];
  }
  int qlo[2], qhi[2], fits1[2], fits2[2] = {0, 0};
  int plain[2], need = 0; /* plain: one chain, never split */
#pragma unroll
  for (int e = 0; e < 2; e++) {
    const int h = 2 * hp + e;
    qlo[e] = h < H ? p.qlsb[t * H + h] : 1000;
    qhi[e] = h < H ? p.qtop[t * H + h] : -1000;
    plain[e] = qhi[e] == INT_MAX || qlo[e] > qhi[e];
    fits1[e] = plain[e] || mlr_f64_fits(qlo[e], qhi[e], p.klsb, p.ktop, QK);
    int sh = 0;
    if (!plain[e])
      fits2[e] = mlr_f64x2_fits(qlo[e], qhi[e], p.klsb, p.ktop, QK, &sh); /* s = qlo where fits1 */
    if (!fits1[e] && !fits2[e])
      plain[e] = 1; /* exact_dot after; the chains' sums serve only the NaN/Inf test */
    if (g == 0) kc[h] = plain[e] ? 0.0 : mlr_f64_split_const(sh);
    need |= !fits1[e];
  }
  const int split_blk = __syncthreads_or(need);
  /* this thread's share of a chunk's K codes: row kr (of the block), codes 16 kh .. 16 kh + 15 */
  const int kr = tid / 2, kh = tid % 2;
  const int64_t krow = j0 + kr < L ? kv_row(p, b, j0 + kr) : -1;
  double a[4][2], al[4][2];
#pragma unroll
  for (int r = 0; r < 4; r++) a[r][0] = a[r][1] = al[r][0] = al[r][1] = 0.0;
  for (int i0 = 0; i0 < QK; i0 += CH) {
    {
      uint4 w = make_uint4(0u, 0u, 0u, 0u);
      if (krow >= 0) w = *(const uint4 *)((const uint8_t *)p.kv + krow * QK + i0 + 16 * kh);
      const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
      double *col = (double *)kd; /* kd as [CH][QKX_ROWS] doubles */
#pragma unroll
      for (int c = 0; c < 16; c++)
        col[(16 * kh + c) * QKX_ROWS + kr] = klutd[(ws[c >> 2] >> (8 * (c & 3))) & 0xFF];
    }
    for (int k = tid; k < CH * MAXH;
         k += QKX_THREADS) { /* the chunk's Q operands, split where asked */
      const int c = k / MAXH, hh = k % MAXH;
      double x = 0.0, xh = 0.0, xl = 0.0;
      if (hh < H) x = p.qT[(t * QK + i0 + c) * H + hh];
      if (kc[hh] != 0.0)
        mlr_f64_split(x, kc[hh], &xh, &xl);
      else
        xh = x;
      ((double *)qh)[c * MAXH + hh] = xh;
      ((double *)ql)[c * MAXH + hh] = xl;
    }
    __syncthreads();
    if (!split_blk) {
#pragma unroll 4
      for (int c = 0; c < CH; c++) {
        const double2 q = qh[c][hp], k01 = kd[c][2 * g], k23 = kd[c][2 * g + 1];
        const double k[4] = {k01.x, k01.y, k23.x, k23.y};
#pragma unroll
        for (int r = 0; r < 4; r++) {
          a[r][0] = fma(q.x, k[r], a[r][0]);
          a[r][1] = fma(q.y, k[r], a[r][1]);
        }
      }
    } else {
#pragma unroll 4
      for (int c = 0; c < CH; c++) {
        const double2 q = qh[c][hp], qw = ql[c][hp], k01 = kd[c][2 * g], k23 = kd[c][2 * g + 1];
        const double k[4] = {k01.x, k01.y, k23.x, k23.y};
#pragma unroll
        for (int r = 0; r < 4; r++) {
          a[r][0] = fma(q.x, k[r], a[r][0]);
          a[r][1] = fma(q.y, k[r], a[r][1]);
          al[r][0] = fma(qw.x, k[r], al[r][0]);
          al[r][1] = fma(qw.y, k[r], al[r][1]);
        }
      }
    }
    __syncthreads();
  }
  float v[4][2];
  int fb[4][2]; /* 0: v is the logit's dot; 1: the naive chain (NaN or Inf in K); 2: exact_dot */
#pragma unroll
  for (int e = 0; e < 2; e++)
#pragma unroll
    for (int r = 0; r < 4; r++) {
      fb[r][e] = !isfinite(a[r][e]) || !isfinite(al[r][e]) ? (kc[2 * hp + e] == 0.0 ? 0 : 1)
                                                           : (fits1[e] || fits2[e] ? 0 : 2);
      v[r][e] = mlr_f64x2_round_f32(
          a[r][e], al[r][e]); /* al = 0 where not split: (float) a, the naive chain if not finite */
    }
#pragma unroll
  for (int e = 0; e < 2; e++)
#pragma unroll
    for (int r = 0; r < 4; r++) {
      const int h = 2 * hp + e;
      const int64_t j = j0 + 4 * g + r;
      if (h >= H || j >= L) continue;
      if (fb[r][e])
        v[r][e] = qk_x8_fallback(p, klut, t, h, kv_row(p, b, j), fb[r][e], qlo[e], qhi[e]);
      store_logit(p, t, h, L, j, v[r][e]);
    }
}

/* ---- one (query token, split): 16 warps, a head's softmax each, a column of every head a lane
 * ---- */

__device__ float warp_max(float v) {
  for (int o = 16; o; o >>= 1) v = fmaxf(v, MLR_SHFL_XOR(v, o));
  return v;
}
__device__ void warp_range(int *lo, int *hi, int *nf) {
  for (int o = 16; o; o >>= 1) {
    *lo = min(*lo, MLR_SHFL_XOR(*lo, o));
    *hi = max(*hi, MLR_SHFL_XOR(*hi, o));
    *nf = max(*nf, MLR_SHFL_XOR(*nf, o));
  }
}

__device__ void store_o(const gp &p, int64_t at, float v) {
  if (p.out_fmt == MLR_OUT_FP32)
    ((float *)p.o)[at] = v;
  else
    ((uint16_t *)p.o)[at] = mlr__emu_out_code(v, p.out_fmt);
}

/* a V code as its PV operand (fp8: the table) */
__device__ __forceinline__ float kv_operand_v(const gp &p, const float *vlut, uint32_t code) {
  return p.kv8 ? vlut[code] : kv_operand(p, code, p.pv_op);
}

/* the exact PV sum of one head's column over tokens [j0, j1) (P operands in prow), initial value
 * init joining it: the 128-bit fixed point in units of 2^g (PV_I128) or the long accumulator */
__device__ float exact_column(const gp &p, const float *vlut, const float *prow, int64_t b,
                              int64_t j0, int64_t j1, int col, int mode, int g, float init) {
  if (mode == PV_I128) {
    mlr_i128 a = 0;
    for (int64_t j = j0; j < j1; j++)
      mlr_i128_fma(&a, prow[j], kv_operand_v(p, vlut, kv_code(p, kv_row(p, b, j), col)), g);
    return mlr_i128_round_f32(a, g);
  }
  mlr_xacc x;
  mlr_xacc_clear(&x);
  mlr_xacc_add(&x, (double)init);
  for (int64_t j = j0; j < j1; j++)
    mlr_xacc_add(&x,
                 (double)prow[j] * (double)kv_operand_v(p, vlut, kv_code(p, kv_row(p, b, j), col)));
  return mlr_xacc_round_f32(&x);
}

/* One block per (query token, split), 16 warps. Warp w does head w's softmax (the block max, the
 * p's and P operands with a token per lane, their sum in token order by shuffles) and computes
 * output column 32w + lane of every head: for each token in order, the lane's V operand serves the
 * 16 heads' PV chains, whose P operands the head warps leave in shared memory, 32 tokens at a time.
 * Each element's chain is the emulator's, in its order; V is read and decoded once per block.
 * EXACT (pv.dot = exact): first each head's P operands (in lg, in place of the logits) and range;
 * with V's (every finite fp8 code's, or the block's own from a pass over it) it chooses how the
 * head's exact sums are made (any method that gives the exact sum will do): one binary64 chain
 * (mlr_f64_fits), two with P split at 2^s (mlr_f64x2_fits; the head's warp stores both parts),
 * or the 128-bit / long accumulator, each lane its own column. A NaN or Inf in P or V gives the
 * emulator's naive chain: the one chain itself; the split chains' sums turn NaN or Inf with it
 * (a non-finite product never leaves a sum), and the block's tokens are then run again with that
 * head on one chain. The tables hold binary64 operands: a binary32-to-binary64 conversion runs
 * at a quarter of the fma's rate. */
/* k_split's shared memory, the kernel's own __shared__ arrays (a struct of references to them, so
 * that each stays an object of its own) */
struct split_sm {
  float (&vlut)[256];
  double (&vlutd)[256];
  double2 (&pd)[32][MAXH]; /* EXACT: a chunk's P parts (hi, lo) per token and head */
  float (&pf)[32][MAXH];   /* not EXACT: a chunk's P operands */
  int64_t (&krs)[32];      /* the chunk's KV rows */
  float (&al_s)[MAXH], (&l_s)[MAXH];
  int (&mode_s)[MAXH], (&g_s)[MAXH], &vlo_s, &vhi_s, &vnf_s;
};

/* one softmax block of a split: tokens [j0, j1), n of them; this warp's head's new max mn, alpha
 * al, row sum ls; EXACT: how it sums its PV (mode), the split point of P (sh) and P's range */
struct split_step {
  int64_t j0, j1, n;
  float mn, al, ls;
  int mode, sh, plo, phi, pnf;
};

/* one block of k_split: its state and phases, each inlined into the kernel; the per-head arrays
 * are the kernel's locals (indexed by loop counters until the loops are unrolled) */
template <int EXACT>
struct split_blk {
  const gp &p;
  split_sm sm;
  int w, lane, col, H, own; /* own: this warp does head w's softmax */
  int64_t t, s, b, ns, len, Lt, lo, hi, blk;
  float *row; /* head w's logits, then P operands (own only) */
  float m, l;
  float (&acc)[MAXH];

  __device__ __forceinline__ split_blk(const gp &p_, const split_sm &sm_, float (&acc_)[MAXH])
      : p(p_), sm(sm_), acc(acc_) {}
  __device__ __forceinline__ bool begin();
  __device__ __forceinline__ void setup();
  __device__ __forceinline__ void softmax(split_step &k);
  __device__ __forceinline__ void p_operands(split_step &k);
  __device__ __forceinline__ void v_range(split_step &k);
  __device__ __forceinline__ void pv_chunk(const split_step &k, int64_t jc, double (&xh)[MAXH],
                                           double (&xl)[MAXH], float (&pva)[MAXH], float &ls,
                                           double kc);
  __device__ __forceinline__ void pv(split_step &k, double (&xh)[MAXH], double (&xl)[MAXH],
                                     float (&pva)[MAXH]);
  __device__ __forceinline__ void exact_sums(const split_step &k, double (&xh)[MAXH],
                                             double (&xl)[MAXH], float (&pva)[MAXH]);
  __device__ __forceinline__ void step(int64_t j0);
  __device__ __forceinline__ void store();
};

/* false: the token's batch has fewer splits */
template <int EXACT>
__device__ __forceinline__ bool split_blk<EXACT>::begin() {
  w = threadIdx.x >> 5;
  lane = threadIdx.x & 31;
  col = 32 * w + lane;
  t = blockIdx.x;
  s = blockIdx.y;
  b = p.tok_b[t];
  ns = p.nsplit[b];
  return s < ns;
}

/* the V table, the split's tokens [lo, hi), the accumulators */
template <int EXACT>
__device__ __forceinline__ void split_blk<EXACT>::setup() {
  if (p.kv8)
    for (int k = threadIdx.x; k < 256; k += SPLIT_THREADS) {
      sm.vlut[k] = kv_operand(p, (uint32_t)k, p.pv_op);
      sm.vlutd[k] = sm.vlut[k];
    }
  __syncthreads();
  H = p.H;
  own = w < H;
  len = p.slen[b];
  Lt = p.tok_L[t];
  lo = s * len;
  hi = (s + 1) * len < Lt ? (s + 1) * len : Lt;
  if (hi < lo) hi = lo;
  row = p.lg + p.soff[t] + (int64_t)w * Lt;
  m = -INFINITY;
  l = 0.0f;
#pragma unroll
  for (int h = 0; h < MAXH; h++) acc[h] = 0.0f;
  blk = p.blk > 0 ? p.blk : (hi > lo ? hi - lo : 1);
}

/* head w's softmax of the block (own): its max and alpha */
template <int EXACT>
__device__ __forceinline__ void split_blk<EXACT>::softmax(split_step &k) {
  float bm = -INFINITY;
  for (int64_t j = k.j0 + lane; j < k.j1; j += 32) bm = fmaxf(bm, row[j]);
  bm = warp_max(bm);
  k.mn = fmaxf(m, bm);
  k.al = mlr__emu_exp(p.exp_sm, m - k.mn);
  if (lane == 0) sm.al_s[w] = k.al;
}

/* EXACT, own: head w's P operands into lg, their sum in token order and their range, and, for fp8
 * V where every finite code's range decides, the mode */
template <int EXACT>
__device__ __forceinline__ void split_blk<EXACT>::p_operands(split_step &k) {
  for (int64_t jb = k.j0; jb < k.j1; jb += 32) { /* P operands into lg; l's sum; P's range */
    const int64_t j = jb + lane;
    float pj = 0.0f;
    if (j < k.j1) {
      pj = mlr__emu_exp(p.exp_sm, row[j] - k.mn);
      const float pp = mlr__emu_to_operand(mlr__emu_p_round(pj, p.p_fmt), p.pv_op);
      row[j] = pp;
      if (!isfinite(pp))
        k.pnf = 1;
      else
        mlr_f32_range_add(pp, &k.plo, &k.phi);
    }
    const int nv = (int)(k.j1 - jb < 32 ? k.j1 - jb : 32);
    for (int u = 0; u < nv; u++) k.ls = k.ls + MLR_SHFL(pj, u);
  }
  warp_range(&k.plo, &k.phi, &k.pnf);
  k.mode = -1;
  if (k.pnf)
    k.mode = PV_CHAIN;         /* NaN or Inf: the binary64 chain in token order */
  else if (p.kv8 && !p.into) { /* fp8 V: every finite code's range, where it decides */
    if (k.plo > k.phi || mlr_f64_fits(k.plo, k.phi, p.vlsb, p.vtop, k.n))
      k.mode = PV_CHAIN;
    else if (mlr_f64x2_fits(k.plo, k.phi, p.vlsb, p.vtop, k.n, &k.sh))
      k.mode = PV_SPLIT;
  }
}

/* EXACT: V's range over the block's 512 columns where a head's mode needs it, then its mode */
template <int EXACT>
__device__ __forceinline__ void split_blk<EXACT>::v_range(split_step &k) {
  if (threadIdx.x == 0) {
    sm.vlo_s = 1000;
    sm.vhi_s = -1000;
    sm.vnf_s = 0;
  }
  if (__syncthreads_or(own && k.mode < 0)) {
    int vlo = 1000, vhi = -1000, vnf = 0;
    for (int64_t j = k.j0; j < k.j1; j++) {
      const float v = kv_operand_v(p, sm.vlut, kv_code(p, kv_row(p, b, j), col));
      if (!isfinite(v))
        vnf = 1;
      else
        mlr_f32_range_add(v, &vlo, &vhi);
    }
    atomicMin(&sm.vlo_s, vlo);
    atomicMax(&sm.vhi_s, vhi);
    atomicMax(&sm.vnf_s, vnf);
    __syncthreads();
    if (own && k.mode < 0) {
      const int vl = sm.vlo_s, vh = sm.vhi_s;
      if (sm.vnf_s)
        k.mode = PV_CHAIN;
      else if (p.into)
        k.mode = PV_LONG; /* the initial acc*alpha joins the exact sum */
      else if (k.plo > k.phi || vl > vh || mlr_f64_fits(k.plo, k.phi, vl, vh, k.n))
        k.mode = PV_CHAIN; /* exact in binary64 */
      else if (mlr_f64x2_fits(k.plo, k.phi, vl, vh, k.n, &k.sh))
        k.mode = PV_SPLIT;
      else
        k.mode = mlr_i128_fits(k.plo, k.phi, vl, vh, k.n) ? PV_I128 : PV_LONG;
      if (lane == 0) sm.g_s[w] = k.plo + vl;
    }
  }
  if (own && lane == 0) sm.mode_s[w] = k.mode;
}

/* the tokens jc .. jc + 31 of the block: the head warps' P operands (EXACT: their parts) into
 * shared memory, the chunk's KV rows, then every head's chain over them, the lane's column */
template <int EXACT>
__device__ __forceinline__ void
split_blk<EXACT>::pv_chunk(const split_step &k, int64_t jc, double (&xh)[MAXH], double (&xl)[MAXH],
                           float (&pva)[MAXH], float &ls, double kc) {
  const int nv = (int)(k.j1 - jc < 32 ? k.j1 - jc : 32);
  if (own) {
    const int64_t j = jc + lane;
    if (EXACT) {
      double ph = 0.0, pl = 0.0; /* 128-bit and long heads: none, they sum on their own */
      if (lane < nv && k.mode == PV_CHAIN)
        ph = row[j];
      else if (lane < nv && k.mode == PV_SPLIT)
        mlr_f64_split((double)row[j], kc, &ph, &pl);
      sm.pd[lane][w] = make_double2(ph, pl);
    } else {
      float pj = 0.0f, pp = 0.0f;
      if (lane < nv) {
        pj = mlr__emu_exp(p.exp_sm, row[j] - k.mn);
        pp = mlr__emu_to_operand(mlr__emu_p_round(pj, p.p_fmt), p.pv_op);
      }
      sm.pf[lane][w] = pp;
      for (int u = 0; u < nv; u++) ls = ls + MLR_SHFL(pj, u);
    }
  }
  /* the last warp owns no head unless H = 16 */
  if (w == MAXH - 1) sm.krs[lane] = lane < nv ? kv_row(p, b, jc + lane) : 0;
  __syncthreads();
  MLR_UNROLL4
  for (int u = 0; u < 32; u++) {
    if (u >= nv) break;
    const uint32_t code = kv_code(p, sm.krs[u], col);
    if (EXACT) {
      const double v = p.kv8 ? sm.vlutd[code] : (double)kv_operand(p, code, p.pv_op);
#pragma unroll
      for (int h = 0; h < MAXH; h++)
        if (h < H) {
          const double2 q = sm.pd[u][h];
          xh[h] = fma(q.x, v, xh[h]);
          xl[h] = fma(q.y, v, xl[h]);
        }
    } else {
      const float v = kv_operand_v(p, sm.vlut, code);
#pragma unroll
      for (int h = 0; h < MAXH; h++)
        if (h < H) pva[h] = fmaf(sm.pf[u][h], v, pva[h]);
    }
  }
  __syncthreads();
}

/* the block's tokens; again (EXACT) when a split head met a NaN or Inf */
template <int EXACT>
__device__ __forceinline__ void split_blk<EXACT>::pv(split_step &k, double (&xh)[MAXH],
                                                     double (&xl)[MAXH], float (&pva)[MAXH]) {
  const double kc = mlr_f64_split_const(k.sh);
  for (;;) {
#pragma unroll
    for (int h = 0; h < MAXH; h++) {
      const float init = p.into && h < H ? acc[h] * sm.al_s[h] : 0.0f;
      xh[h] = init;
      xl[h] = 0.0;
      pva[h] = init;
    }
    for (int64_t jc = k.j0; jc < k.j1; jc += 32) pv_chunk(k, jc, xh, xl, pva, k.ls, kc);
    if (!EXACT) break;
    int bad = 0;
#pragma unroll
    for (int h = 0; h < MAXH; h++)
      bad |= h < H && sm.mode_s[h] == PV_SPLIT && (!isfinite(xh[h]) || !isfinite(xl[h]));
    if (!__syncthreads_or(bad)) break;
    if (own && k.mode == PV_SPLIT) k.mode = PV_CHAIN; /* a NaN or Inf in V: the naive chain */
    if (own && lane == 0) sm.mode_s[w] = k.mode;
    __syncthreads();
  }
}

/* EXACT: the chains' results first, so their registers are free for the accumulators */
template <int EXACT>
__device__ __forceinline__ void split_blk<EXACT>::exact_sums(const split_step &k,
                                                             double (&xh)[MAXH], double (&xl)[MAXH],
                                                             float (&pva)[MAXH]) {
#pragma unroll
  for (int h = 0; h < MAXH; h++)
    pva[h] = sm.mode_s[h] == PV_SPLIT ? mlr_f64x2_round_f32(xh[h], xl[h]) : (float)xh[h];
#pragma unroll
  for (int h = 0; h < MAXH; h++)
    if (h < H && (sm.mode_s[h] == PV_I128 || sm.mode_s[h] == PV_LONG))
      pva[h] = exact_column(p, sm.vlut, p.lg + p.soff[t] + (int64_t)h * Lt, b, k.j0, k.j1, col,
                            sm.mode_s[h], sm.g_s[h], p.into ? acc[h] * sm.al_s[h] : 0.0f);
}

/* one softmax block, tokens j0 .. */
template <int EXACT>
__device__ __forceinline__ void split_blk<EXACT>::step(int64_t j0) {
  split_step k;
  k.j0 = j0;
  k.j1 = j0 + blk < hi ? j0 + blk : hi;
  k.n = k.j1 - j0;
  k.mn = 0.0f;
  k.al = 0.0f;
  k.ls = 0.0f;
  k.mode = PV_CHAIN;
  k.sh = 0;
  k.plo = 1000;
  k.phi = -1000;
  k.pnf = 0;
  if (own) {
    softmax(k);
    if (EXACT) p_operands(k);
  }
  if (EXACT) v_range(k);
  __syncthreads();
  double xh[MAXH], xl[MAXH];
  float pva[MAXH];
  pv(k, xh, xl, pva);
  if (EXACT) exact_sums(k, xh, xl, pva);
#pragma unroll
  for (int h = 0; h < MAXH; h++)
    if (h < H) acc[h] = p.into ? pva[h] : mlr__emu_upd(acc[h], sm.al_s[h], pva[h], p.fused);
  if (own) {
    l = mlr__emu_upd(l, k.al, k.ls, p.fused);
    m = k.mn;
  }
  __syncthreads(); /* al_s, mode_s and g_s are the next block's */
}

/* the split's result: the output (a lone split of normalized partials) or the partial */
template <int EXACT>
__device__ __forceinline__ void split_blk<EXACT>::store() {
  if (own && lane == 0) sm.l_s[w] = l;
  __syncthreads();
  const int direct = ns == 1 && p.normalized;
#pragma unroll
  for (int h = 0; h < MAXH; h++) {
    if (h >= H) continue;
    const float lc = fmaxf(sm.l_s[h], p.clamp);
    float v = p.normalized ? acc[h] / lc : acc[h];
    if (p.folded) v = v * p.kvs;
    if (direct)
      store_o(p, ((int64_t)t * H + h) * DV + col, v);
    else
      p.part_o[(((int64_t)t * H + h) * p.S + s) * DV + col] = v;
  }
  if (own && lane == 0) {
    const float lc = fmaxf(l, p.clamp);
    const int lbase = p.softmax_exp == MLR_EXP_2 ? MLR_EXP_2 : MLR_EXP_E;
    const float lse = mlr__emu_lse_convert(m + mlr__emu_log(lbase, lc), p.softmax_exp, p.lse_base);
    if (direct)
      p.lse[t * H + w] = lse;
    else {
      const int64_t slot = (t * H + w) * p.S + s;
      p.part_lse[slot] = lse;
      p.part_max[slot] = m;
      p.part_sum[slot] = l;
    }
  }
}

template <int EXACT>
__global__ void __launch_bounds__(SPLIT_THREADS) k_split(gp p) {
  __shared__ float vlut[256];
  __shared__ double vlutd[256];
  __shared__ double2 pd[32][MAXH];
  __shared__ float pf[32][MAXH];
  __shared__ int64_t krs[32];
  __shared__ float al_s[MAXH], l_s[MAXH];
  __shared__ int mode_s[MAXH], g_s[MAXH], vlo_s, vhi_s, vnf_s;
  float acc[MAXH];
  split_blk<EXACT> k(p, {vlut, vlutd, pd, pf, krs, al_s, l_s, mode_s, g_s, vlo_s, vhi_s, vnf_s},
                     acc);
  if (!k.begin()) return;
  k.setup();
  for (int64_t j0 = k.lo; j0 < k.hi; j0 += k.blk) k.step(j0);
  k.store();
}

/* ---- the merge of a query token's splits (the emulator's merge_one, column d per thread) ---- */

__global__ void __launch_bounds__(MERGE_THREADS) k_merge(gp p) {
  const int64_t t = blockIdx.x / p.H, h = blockIdx.x % p.H, ns = p.nsplit[p.tok_b[t]];
  if (ns < 2 && p.normalized) return; /* written by k_split */
  const int d = threadIdx.x, norm = p.normalized;
  const int64_t base = (t * p.H + h) * p.S;
  float M, sc;
  const float o =
      mlr__emu_merge_column(norm ? p.part_lse + base : p.part_max + base,
                            norm ? NULL : p.part_sum + base, p.part_o + base * DV + d, DV, ns,
                            p.merge_rule, norm ? p.exp_lse : p.exp_sm, p.fused, p.clamp, &M, &sc);
  store_o(p, (t * p.H + h) * DV + d, o);
  if (d == 0) {
    const int ub =
        norm ? p.lse_base : (p.softmax_exp == MLR_EXP_2 ? MLR_EXP_2 : MLR_EXP_E); /* units of M */
    float lse = M + mlr__emu_log(ub, sc);
    if (!norm)
      lse = mlr__emu_lse_convert(lse, p.softmax_exp, p.lse_base); /* M in the softmax's units */
    p.lse[t * p.H + h] = lse;
  }
}

double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* device buffers, freed together */
struct dbufs {
  void *p[24];
  int n;
};

/* one run of the exact kernel, on the host: the kernels' parameters, the host tables they are made
 * from, the device buffers and the events */
struct run {
  gp p;
  dbufs bufs;
  hipEvent_t ev[5]; /* start, after Q, after QK, after the splits, end */
  int64_t *nsplit, *slen, *tok_L, *soff;
  int32_t *tok_b;
  int64_t T, H, B, S, lg_n, Lmax, ngroups;
  size_t ob, kvb; /* bytes of o and of the KV codes */
  int qfp8;
};

/* a device buffer of n bytes (n > 0), recorded in x.bufs; optionally filled from host src */
#define DALLOC(ptr, nbytes, src)                                                                   \
  do {                                                                                             \
    void *d_ = NULL;                                                                               \
    const size_t nb_ = (size_t)(nbytes) > 0 ? (size_t)(nbytes) : 1;                                \
    GPU_TRY(hipMalloc(&d_, nb_));                                                                  \
    x.bufs.p[x.bufs.n++] = d_;                                                                     \
    if (src) GPU_TRY(hipMemcpy(d_, (src), (nbytes), hipMemcpyHostToDevice));                       \
    *(void **)&(ptr) = d_;                                                                         \
  } while (0)

/* what the exact kernel runs: mlr_emu_check_fit's recipes and inputs, up to 16 heads, no
 * matrix-unit dots or hardware exp2 */
mlr_status check_fit(const mlr_recipe *r, const mlr_inputs *in, mlr_error *err) {
  mlr_status st = mlr_emu_check_fit(r, in, err);
  if (st != MLR_OK) return st;
  if (in->H > MAXH)
    return mlr_error_set(err, MLR_EINVAL,
                         "the GPU exact kernel runs 1..%d heads; the inputs have %lld", MAXH,
                         (long long)in->H);
  if (const char *what = mlr_inputs_gpu_unsupported(in))
    return mlr_error_set(err, MLR_EINVAL,
                         "the GPU exact kernel does not run inputs with %s; `mlaref run` does",
                         what);
  if (r->v_scale_at != MLR_VS_AS_KV || r->logit_scale_prec != MLR_SP_FP32)
    return mlr_error_set(err, MLR_EINVAL,
                         "recipe '%s': the GPU exact kernel runs v.scale_at = as_kv and "
                         "logit.scale_precision = fp32 only; `mlaref run` runs every value",
                         r->name);
  if (MLR_DOT_IS_MMA(r->qk_dot) || MLR_DOT_IS_MMA(r->pv_dot) ||
      r->qk_dot == MLR_DOT_AITER_LANES8 || r->pv_dot == MLR_DOT_AITER_LANES8)
    return mlr_error_set(err, MLR_EINVAL,
                         "recipe '%s': the GPU exact kernel does not run matrix-unit dots (mma:*) "
                         "or aiter-lanes8; `mlaref run` does",
                         r->name);
  if (r->softmax_exp_unit != MLR_EXPU_EXACT || r->softmax_sum != MLR_SUM_SEQ ||
      r->div_unit != MLR_DIV_IEEE || r->lse_log != MLR_LOG_EXACT ||
      r->merge_exp_unit != MLR_EXPU_EXACT)
    return mlr_error_set(err, MLR_EINVAL,
                         "recipe '%s': the GPU exact kernel runs softmax.exp_unit = exact, "
                         "softmax.sum = seq, div.unit = ieee, lse.log = exact and merge.exp_unit "
                         "= exact only; `mlaref run` runs every value",
                         r->name);
  if (r->softmax_form != MLR_SMF_SCALED || r->softmax_order != MLR_ORDER_FORWARD ||
      r->normalize != MLR_NORM_DIVIDE || r->softmax_schedule != MLR_SCHED_SINGLE ||
      r->split_rule == MLR_SPLIT_FLASHMLA ||
      r->merge_rule == MLR_MERGE_FLASHMLA)
    return mlr_error_set(err, MLR_EINVAL,
                         "recipe '%s': the GPU exact kernel runs softmax.form = scaled, "
                         "softmax.order = forward, softmax.schedule = single, normalize = "
                         "divide and no flashmla split or merge rule; `mlaref run` runs every "
                         "value",
                         r->name);
  return MLR_OK;
}

/* the host tables (each batch's splits; each query token's batch, KV length and logits' offset),
 * the grid's limits, the output's size; res's tables and outputs allocated */
mlr_status plan(run &x, const mlr_recipe *r, const mlr_inputs *in, mlr_emu_result *res,
                mlr_error *err) {
  const int64_t T = x.T, H = x.H, B = x.B;
  x.nsplit = (int64_t *)calloc((size_t)B, sizeof(int64_t));
  x.slen = (int64_t *)calloc((size_t)B, sizeof(int64_t));
  x.tok_b = (int32_t *)malloc((size_t)T * sizeof(int32_t));
  x.tok_L = (int64_t *)malloc((size_t)T * sizeof(int64_t));
  x.soff = (int64_t *)malloc((size_t)T * sizeof(int64_t));
  res->split_count = (int32_t *)calloc((size_t)B, sizeof(int32_t));
  res->split_len = (int32_t *)calloc((size_t)B, sizeof(int32_t));
  if (!x.nsplit || !x.slen || !x.tok_b || !x.tok_L || !x.soff || !res->split_count ||
      !res->split_len)
    return mlr_error_set(err, MLR_ENOMEM, "out of host memory for the GPU kernel's tables");
  for (int64_t b = 0; b < B; b++) {
    const int64_t L = mlr_inputs_kv_len(in, b), t0 = in->qo_indptr[b],
                  nq = in->qo_indptr[b + 1] - t0;
    mlr_recipe_splits(r, B, in->T, in->H, L, &x.nsplit[b], &x.slen[b]);
    if (x.nsplit[b] > x.S) x.S = x.nsplit[b];
    if (x.nsplit[b] > INT32_MAX || x.slen[b] > INT32_MAX)
      return mlr_error_set(err, MLR_ERANGE,
                           "batch %lld: %lld splits of %lld tokens do not fit int32", (long long)b,
                           (long long)x.nsplit[b], (long long)x.slen[b]);
    res->split_count[b] = (int32_t)x.nsplit[b];
    res->split_len[b] = (int32_t)x.slen[b];
    for (int64_t i = 0; i < nq; i++) {
      const int64_t t = t0 + i, Lt = L - (nq - 1 - i);
      x.tok_b[t] = (int32_t)b;
      x.tok_L[t] = Lt > 0 ? Lt : 0;
      x.soff[t] = x.lg_n;
      x.lg_n += H * x.tok_L[t];
      if (x.tok_L[t] > x.Lmax) x.Lmax = x.tok_L[t];
    }
  }
  if (T > 65535 || x.S > 65535)
    return mlr_error_set(err, MLR_ERANGE,
                         "the GPU exact kernel's grid takes at most 65535 query tokens and 65535 "
                         "splits (T=%lld, splits=%lld)",
                         (long long)T, (long long)x.S);
  if ((double)x.lg_n * 4 > 1e12 || (double)T * H * x.S * DV * 4 > 1e12)
    return mlr_error_set(err, MLR_ERANGE,
                         "GPU buffers would exceed 1 TB (T=%lld, H=%lld, splits=%lld)",
                         (long long)T, (long long)H, (long long)x.S);
  x.ob = (size_t)(T * H * DV) * (r->out_format == MLR_OUT_FP32 ? 4 : 2);
  x.kvb = (size_t)in->N * QK * (in->kv_format == MLR_FMT_BF16 ? 2 : 1);
  res->T = T;
  res->H = H;
  res->B = B;
  res->S = x.S;
  res->out_format = r->out_format;
  res->o = malloc(x.ob);
  res->lse = (float *)malloc((size_t)(T * H) * sizeof(float));
  if (!res->o || !res->lse)
    return mlr_error_set(err, MLR_ENOMEM, "out of host memory for the outputs");
  return MLR_OK;
}

/* the recipe's switches into x.p, and fp8 KV's operand ranges */
void switches(run &x, const mlr_recipe *r, const mlr_inputs *in) {
  gp &p = x.p;
  p.H = (int)x.H;
  p.T = x.T;
  p.S = x.S;
  p.page = in->page;
  p.blk = r->softmax_block;
  p.kv8 = in->kv_format != MLR_FMT_BF16;
  p.kvfmt = in->kv_format;
  p.folded = r->kv_scale_at == MLR_KVS_FOLDED;
  p.fused = r->update_fma;
  p.qk_op = r->qk_operand;
  p.pv_op = r->pv_operand;
  p.qk_dot = r->qk_dot;
  p.pv_exact = r->pv_dot == MLR_DOT_EXACT;
  p.qk_bf16 = r->qk_result == MLR_R_BF16;
  p.logit_bf16 = r->logit_format == MLR_R_BF16;
  p.exp_sm = r->softmax_exp;
  p.exp_lse = r->lse_base == MLR_EXP_2
                  ? MLR_EXP_2
                  : (r->softmax_exp == MLR_EXP_E_VIA_2 ? MLR_EXP_E_VIA_2 : MLR_EXP_E);
  p.p_fmt = r->p_format;
  p.into = r->pv_accumulate == MLR_PV_INTO_ACC;
  p.normalized = r->partial_normalized;
  p.softmax_exp = r->softmax_exp;
  p.lse_base = r->lse_base;
  p.merge_rule = r->merge_rule;
  p.out_fmt = r->out_format;
  p.qfmt = !x.qfp8 ? -1 : r->q_format == MLR_Q_E4M3 ? MLR_FMT_E4M3 : MLR_FMT_E4M3FNUZ;
  p.qscale = r->q_scale;
  p.qtask = r->q_scale != MLR_QS_STATIC;
  p.kvs = in->kv_scale;
  p.clamp = (float)r->softmax_clamp;
  p.c0 =
      (float)(r->softmax_exp == MLR_EXP_2 ? MLR_EMU_SM_SCALE * MLR_EMU_LOG2E_D : MLR_EMU_SM_SCALE);
  x.ngroups = r->q_scale == MLR_QS_PER_HEAD ? x.H : r->q_scale == MLR_QS_PER_TOKEN ? x.T : 1;
  /* as the emulator's vlsb, vtop: every finite operand of a code */
  p.klsb = p.vlsb = 1000;
  p.ktop = p.vtop = -1000;
  for (uint32_t code = 0; p.kv8 && code < 256; code++) {
    float v = mlr_decode((mlr_format)p.kvfmt, code);
    if (!p.folded) v = v * p.kvs;
    const float kop = mlr__emu_to_operand(v, p.qk_op), vop = mlr__emu_to_operand(v, p.pv_op);
    if (isfinite(kop)) mlr_f32_range_add(kop, &p.klsb, &p.ktop);
    if (isfinite(vop)) mlr_f32_range_add(vop, &p.vlsb, &p.vtop);
  }
}

/* the device buffers: the inputs and tables uploaded, the outputs pre-filled with the NaN pattern
 * no step writes (checked by read_back) */
mlr_status upload(run &x, const mlr_recipe *r, const mlr_inputs *in, mlr_error *err) {
  mlr_status st = MLR_OK;
  gp &p = x.p;
  const int64_t T = x.T, H = x.H, B = x.B, S = x.S;
  /* Python float -> float32 */
  const float static_scale =
      x.qfp8 ? (float)(r->q_absmax / (double)mlr_format_max((mlr_format)p.qfmt)) : 1.0f;
  const int64_t npages = in->kv_indices ? in->kv_indptr[B] : 0;
  DALLOC(p.q, (size_t)(T * H * QK) * 2, in->q);
  DALLOC(p.kv, x.kvb, in->kv);
  DALLOC(p.kv_indptr, (size_t)(B + 1) * 4, in->kv_indptr);
  if (in->kv_indices) DALLOC(p.kv_indices, (size_t)npages * 4, in->kv_indices);
  DALLOC(p.tok_b, (size_t)T * 4, x.tok_b);
  DALLOC(p.tok_L, (size_t)T * 8, x.tok_L);
  DALLOC(p.soff, (size_t)T * 8, x.soff);
  DALLOC(p.nsplit, (size_t)B * 8, x.nsplit);
  DALLOC(p.slen, (size_t)B * 8, x.slen);
  DALLOC(p.scales, (size_t)x.ngroups * 4, NULL);
  if (x.qfp8 && r->q_scale == MLR_QS_STATIC)
    GPU_TRY(hipMemcpy(p.scales, &static_scale, 4, hipMemcpyHostToDevice));
  DALLOC(p.qT, (size_t)(T * H * QK) * 4, NULL);
  DALLOC(p.c, (size_t)(T * H) * 4, NULL);
  DALLOC(p.qlsb, (size_t)(T * H) * 4, NULL);
  DALLOC(p.qtop, (size_t)(T * H) * 4, NULL);
  DALLOC(p.clipped, 8, NULL);
  GPU_TRY(hipMemset(p.clipped, 0, 8));
  DALLOC(p.lg, (size_t)x.lg_n * 4, NULL);
  if (S > 1 || !p.normalized) {
    DALLOC(p.part_o, (size_t)(T * H * S * DV) * 4, NULL);
    DALLOC(p.part_lse, (size_t)(T * H * S) * 4, NULL);
    DALLOC(p.part_max, (size_t)(T * H * S) * 4, NULL);
    DALLOC(p.part_sum, (size_t)(T * H * S) * 4, NULL);
  }
  DALLOC(p.o, x.ob, NULL);
  DALLOC(p.lse, (size_t)(T * H) * 4, NULL);
  GPU_TRY(hipMemset(p.o, 0xFF, x.ob)); /* the NaN pattern no step writes (checked below) */
  GPU_TRY(hipMemset(p.lse, 0xFF, (size_t)(T * H) * 4));
out:
  return st;
}

/* The kernels, between events (timing: their times). The error paths' test hook
 * (tests/bad_input.sh, on a GPU): MLAREF_GPU_FAULT=launch launches the Q kernel with 2048 threads
 * a block, a configuration every runtime refuses; =unwritten skips the kernels that write o, so
 * the unwritten-element check must fire. */
mlr_status launch(run &x, const mlr_recipe *r, mlr_gpu_timing *timing, mlr_error *err) {
  mlr_status st = MLR_OK;
  const gp &p = x.p;
  const int64_t T = x.T, H = x.H, S = x.S;
  const char *fault = getenv("MLAREF_GPU_FAULT");
  const int fault_launch = fault && !strcmp(fault, "launch");
  const int fault_unwritten = fault && !strcmp(fault, "unwritten");
  for (int k = 0; k < 5; k++) GPU_TRY(hipEventCreate(&x.ev[k]));
  GPU_TRY(hipEventRecord(x.ev[0], 0));
  if (x.qfp8 && r->q_scale != MLR_QS_STATIC) {
    k_amax<<<(unsigned)x.ngroups, AMAX_THREADS>>>(p);
    GPU_TRY(hipGetLastError());
  }
  k_qprep<<<(unsigned)(T * H), fault_launch ? 2048 : QK>>>(p);
  GPU_TRY(hipGetLastError());
  GPU_TRY(hipEventRecord(x.ev[1], 0));
  if (x.Lmax > 0) {
    const dim3 grid((unsigned)((x.Lmax + QK_ROWS - 1) / QK_ROWS), (unsigned)T);
    if (p.kv8 && p.qk_dot == MLR_DOT_EXACT)
      k_qk_x8<<<dim3((unsigned)((x.Lmax + QKX_ROWS - 1) / QKX_ROWS), (unsigned)T), QKX_THREADS>>>(
          p);
    else if (p.kv8)
      k_qk<1><<<grid, QK_THREADS>>>(p);
    else
      k_qk<0><<<grid, QK_THREADS>>>(p);
    GPU_TRY(hipGetLastError());
  }
  GPU_TRY(hipEventRecord(x.ev[2], 0));
  if (!fault_unwritten) {
    if (p.pv_exact)
      k_split<1><<<dim3((unsigned)T, (unsigned)S), SPLIT_THREADS>>>(p);
    else
      k_split<0><<<dim3((unsigned)T, (unsigned)S), SPLIT_THREADS>>>(p);
  }
  GPU_TRY(hipGetLastError());
  GPU_TRY(hipEventRecord(x.ev[3], 0));
  if ((S > 1 || !p.normalized) && !fault_unwritten) {
    k_merge<<<(unsigned)(T * H), MERGE_THREADS>>>(p);
    GPU_TRY(hipGetLastError());
  }
  GPU_TRY(hipEventRecord(x.ev[4], 0));
  GPU_TRY(hipEventSynchronize(x.ev[4]));
  if (timing) {
    float ms[5] = {0, 0, 0, 0, 0};
    for (int k = 1; k < 5; k++) GPU_TRY(hipEventElapsedTime(&ms[k], x.ev[k - 1], x.ev[k]));
    timing->q_ms = ms[1];
    timing->qk_ms = ms[2];
    timing->split_ms = ms[3];
    timing->merge_ms = ms[4];
    timing->kernel_ms = (double)ms[1] + ms[2] + ms[3] + ms[4];
  }
out:
  return st;
}

/* the outputs, the Q scales and the clamp's count into res, and every element checked written:
 * the all-ones pattern is a NaN no encoder and no GPU operation makes */
mlr_status read_back(run &x, const mlr_recipe *r, mlr_emu_result *res, mlr_error *err) {
  mlr_status st = MLR_OK;
  const gp &p = x.p;
  const int64_t T = x.T, H = x.H;
  GPU_TRY(hipMemcpy(res->o, p.o, x.ob, hipMemcpyDeviceToHost));
  GPU_TRY(hipMemcpy(res->lse, p.lse, (size_t)(T * H) * 4, hipMemcpyDeviceToHost));
  if (x.qfp8) {
    unsigned long long clipped = 0;
    res->n_q_scales = x.ngroups;
    res->q_scales = (float *)malloc((size_t)x.ngroups * sizeof(float));
    if (!res->q_scales)
      return mlr_error_set(err, MLR_ENOMEM, "out of host memory for the Q scales");
    GPU_TRY(hipMemcpy(res->q_scales, p.scales, (size_t)x.ngroups * 4, hipMemcpyDeviceToHost));
    GPU_TRY(hipMemcpy(&clipped, p.clipped, 8, hipMemcpyDeviceToHost));
    res->q_clipped = (int64_t)clipped;
  }
  {
    const size_t esz = r->out_format == MLR_OUT_FP32 ? 4 : 2, n = x.ob / esz;
    for (size_t k = 0; k < n; k++) {
      const uint32_t v = esz == 4 ? ((const uint32_t *)res->o)[k] : ((const uint16_t *)res->o)[k];
      if (v == (esz == 4 ? 0xFFFFFFFFu : 0xFFFFu))
        return mlr_error_set(err, MLR_EDEVICE, "GPU exact kernel left o[%zu][%zu][%zu] unwritten",
                             k / DV / (size_t)H, k / DV % (size_t)H, k % DV);
    }
    for (int64_t k = 0; k < T * H; k++)
      if (mlr_f32_bits(res->lse[k]) == 0xFFFFFFFFu)
        return mlr_error_set(err, MLR_EDEVICE, "GPU exact kernel left lse[%lld][%lld] unwritten",
                             (long long)(k / H), (long long)(k % H));
  }
out:
  return st;
}

void run_free(run &x) {
  for (int k = 0; k < 5; k++)
    if (x.ev[k]) (void)hipEventDestroy(x.ev[k]);
  for (int k = 0; k < x.bufs.n; k++) (void)hipFree(x.bufs.p[k]);
  free(x.nsplit);
  free(x.slen);
  free(x.tok_b);
  free(x.tok_L);
  free(x.soff);
}

} // namespace

extern "C" const char *mlr_gpu_backend(void) {
#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
  return "HIP";
#else
  return "CUDA";
#endif
}

extern "C" mlr_status mlr_gpu_device(char *name, size_t n, mlr_error *err) {
  int count = 0;
  hipDeviceProp_t prop;
  if (n) name[0] = 0;
  hipError_t e = hipGetDeviceCount(&count);
  if (e != hipSuccess)
    return mlr_error_set(err, MLR_EDEVICE, "no usable GPU: the %s runtime says: %s",
                         mlr_gpu_backend(), hipGetErrorString(e));
  if (count < 1)
    return mlr_error_set(err, MLR_EDEVICE, "no usable GPU: the %s runtime finds no device",
                         mlr_gpu_backend());
  if ((e = hipGetDeviceProperties(&prop, 0)) != hipSuccess)
    return mlr_error_set(err, MLR_EDEVICE, "no usable GPU: the %s runtime says: %s",
                         mlr_gpu_backend(), hipGetErrorString(e));
  if (n) snprintf(name, n, "%s", prop.name);
  return MLR_OK;
}

extern "C" mlr_status mlr_gpu_exact(const mlr_recipe *r, const mlr_inputs *in, mlr_emu_result *res,
                                    mlr_gpu_timing *timing, mlr_error *err) {
  memset(res, 0, sizeof *res);
  const double t_start = now_ms();
  mlr_status st = check_fit(r, in, err);
  if (st != MLR_OK) return st;
  run x;
  memset(&x, 0, sizeof x);
  x.T = in->T;
  x.H = in->H;
  x.B = in->B;
  x.S = 1;
  x.qfp8 = r->q_format != MLR_Q_BF16;
  if ((st = plan(x, r, in, res, err)) == MLR_OK) {
    switches(x, r, in);
    st = upload(x, r, in, err);
  }
  if (st == MLR_OK) st = launch(x, r, timing, err);
  if (st == MLR_OK) st = read_back(x, r, res, err);
  run_free(x);
  if (st != MLR_OK)
    mlr_emu_result_free(res);
  else if (timing)
    timing->total_ms = now_ms() - t_start;
  return st;
}
