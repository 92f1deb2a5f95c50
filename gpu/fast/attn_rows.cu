/* attn_rows.cu: k_attn_rows, the wgmma recipes' kernel for blocks of 64 rows (NVIDIA sm_90a):
 * a batch's rows (query token, head), token-major, 64 a block, so that a split's KV is staged once
 * for all of them (fast-wgmma-a8w8's plan at 64 and 128 heads, any batches of one q_len when
 * forced; fast-wgmma-fp8's always). The rows are wgmma's M: the logits
 * S = Q K^T (M = 64 rows, N = a warpgroup's 64 tokens of the tile, K = 576 in 18 steps of 32 in
 * order from +0: the recipe's mma:sm90-e4m3 dot) and the PV as O^T = V^T P^T (M = 64 of V's
 * columns, N = the 64 rows, K = the tile's 128 tokens in 8 steps of 16 in order, from acc * alpha:
 * mma:sm90-f16, which wgmma's fp16 unit computes as mma.sync's does, gpu/probes/wgmma_probe.cu;
 * k_attn_rows<1>, fast-wgmma-fp8: 4 steps of 32 on the fp8 unit, e4m3 P, mma:sm90-e4m3).
 * Every row's arithmetic is k_attn_ws's, step for step (fast_wgmma.cuh): the masked logits s c,
 * the maximum, alpha = 2^(m - m'), p = 2^(s c - m') rounded to fp16 (or e4m3) for the PV, the row
 * sums in the warp16 order (here a lane quad's: lane j holds tokens 2j, 2j+1, 2j+8, 2j+9 of each
 * group of 16), l alpha + sum, and the same stores; so the recipe is unchanged, bit for bit.
 *
 * Two computing warpgroups and a copying one: computing warpgroup v takes the logits and the
 * softmax of the tile's tokens 64 v .. 64 v + 63 for all 64 rows (the row maxima and group sums
 * meet in shared memory), and the PV of V's columns 256 v .. 256 v + 255 for all 64 rows and all
 * 128 tokens. V's fp8 codes become fp16 A fragments in registers (ldmatrix.trans,
 * cvt.rn.f16x2.e4m3x2, exact), or e4m3 ones picked by prmt (P8); P is wgmma's B from shared memory.
 * The KV streams through two tile buffers (the next tile copies while this one computes), copied by
 * the copying warpgroup (half tiles of contiguous rows by the tensor memory accelerator, the rest
 * by cp.async: rows_part) and tracked by mbarriers: the proxy fence that lets wgmma read what
 * generic stores wrote (P, the copies) waits for the fencing thread's own copies in flight, so the
 * threads that fence have none in flight (their only copies, Q's, land before the loop). A buffer
 * is handed back in two halves: its first 64 tokens once both warpgroups' PV has read them (half
 * way through it), the rest at its end, so that half the tile after next starts copying half a PV
 * earlier, and its copies land before the computing threads reach it. The buffers are in wgmma's
 * K-major layout with the 64-byte swizzle: 9 slabs of 64 bytes of every token (8 KiB each), token
 * r's 16-byte chunk c at kv_at(r, c) = 8192 (c / 4) + 64 r + 16 ((c % 4) ^ (r / 2 % 4)), the
 * address's bits 4-5 xor its bits 7-8, which is what the tensor memory accelerator writes with
 * CU_TENSOR_MAP_SWIZZLE_64B and what the logits' descriptors read (kv_desc); an ldmatrix of 8
 * tokens x 16 bytes at one chunk then meets 8 distinct groups of 4 banks (no conflict). */
#include "fast_attn.cuh"
#include "fast_host.cuh"

namespace mlr_fast {
namespace {

extern __shared__ __align__(1024) uint8_t rsm[];

enum {
  RC = 256,       /* the computing threads: two warpgroups */
  RT = NTHR_ROWS, /* and the copying warpgroup */
  REG_C = 232,    /* setmaxnreg: the computing warpgroups' registers, */
  REG_K = 40,     /* the copying one's (2 x 232 + 40 = 3 x 168, launch_bounds' share) */
  BAR_C = 1,      /* the named barrier of the computing threads */
  BAR_E = 2,      /* +buffer: the computing threads done with a tile buffer */
  BAR_H = 4,      /* +(RPART - 1) buffer + part: the computing threads done with a part */
  RSTEP = TILE / 16 / RPART, /* the PV's steps of 16 tokens a part */
  RTB = TILE * QK,           /* a tile buffer's bytes (73,728) */
  RSLAB = TILE * 64,         /* a slab: 64 bytes of each of a tile's tokens */
  RCM = 128,                 /* a core matrix's bytes */
  RQ_LBO = RR / 8 * RCM /* Q and P: the next 16 bytes of K, after the 8 core matrices of 64 rows */
};
static_assert(RT == RC + 128 && REG_C == 232 && REG_K == 40 && 2 * REG_C + REG_K == 3 * 168,
              "setmaxnreg's operands below; the block's registers unchanged");
static_assert(RQ_LBO == 1024 && R_Q8 == 2 * RTB && SMEM_ROWS <= 232448, "the rows kernel's layout");
static_assert(
    RTB % 512 == 0 && RSLAB % 512 == 0 && QK % 64 == 0,
    "the swizzle's 512-byte period from every slab's start (the buffers' 1024 alignment)");
static_assert(RSTEP * 16 * RPART == TILE && TILE / 32 % RPART == 0 && BAR_H + 2 * (RPART - 1) <= 16,
              "parts of whole PV steps and copier calls (32 rows), within the 16 named barriers");

/* the parts of the shared memory (fast_common.cuh's offsets) */
__device__ __forceinline__ float *r_max() { return (float *)(rsm + R_MAX); }     /* [2][64] */
__device__ __forceinline__ float *r_sum() { return (float *)(rsm + R_SUM); }     /* [64][8] */
__device__ __forceinline__ float *r_alpha() { return (float *)(rsm + R_ALPHA); } /* [64] */
__device__ __forceinline__ float *r_ml() { return (float *)(rsm + R_ML); }       /* [64][2] */
/* buffer b's copies landed (phase: the tile's use of it, tile / 2) */
__device__ __forceinline__ uint32_t r_full(int b) { return smem_addr(rsm + R_MBAR + 8 * b); }

#define RD8(d, i)                                                                                  \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),      \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define RD32(d) RD8(d, 0), RD8(d, 8), RD8(d, 16), RD8(d, 24)
#define RREGS                                                                                      \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,"    \
  "%25,%26,%27,%28,%29,%30,%31}"
/* D (64 rows x 64 tokens) += Q K^T over 32 columns: A and B e4m3 codes from shared memory */
__device__ __forceinline__ void wg_logits(float (&d)[32], uint64_t da, uint64_t db) {
  (void)d, (void)da, (void)db; /* the trapping build uses none */
  WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
         "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " RREGS ", %32, %33, p, 1, 1;\n}\n"
         : RD32(d)
         : "l"(da), "l"(db));
}
/* D (64 of V's columns x 64 rows) += V^T P^T over 16 tokens: A fp16 from registers, B (P, K-major)
 * from shared memory */
__device__ __forceinline__ void wg_pv(float (&d)[32], const uint32_t (&a)[4], uint64_t db) {
  (void)d, (void)a, (void)db;
  WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
         "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " RREGS
         ", {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
         : RD32(d)
         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
/* the same over 32 tokens on the fp8 unit: A (V^T's e4m3 codes) from registers, B (P's e4m3
 * codes, K-major) from shared memory */
__device__ __forceinline__ void wg_pv8(float (&d)[32], const uint32_t (&a)[4], uint64_t db) {
  (void)d, (void)a, (void)db;
  WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
         "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " RREGS
         ", {%32,%33,%34,%35}, %36, p, 1, 1;\n}\n"
         : RD32(d)
         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
/* token r's 16-byte chunk c in a tile buffer (the 64-byte swizzle) */
__device__ __forceinline__ uint32_t kv_at(int r, int c) {
  return (uint32_t)(RSLAB * (c >> 2) + 64 * r + 16 * ((c & 3) ^ ((r >> 1) & 3)));
}
/* wgmma's descriptor of K from addr: layout type 2 (the 64-byte swizzle, bits 62-63), groups of 8
 * tokens 512 bytes apart, the leading offset unused (K-major, a step's 32 bytes within the 64) */
__device__ __forceinline__ uint64_t kv_desc(uint32_t addr) {
  return wg_desc_at(addr, 16, 8 * 64) | (uint64_t)2 << 62;
}
__device__ __forceinline__ void async_fence() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* the block (rows_of_block) and its split s: [start, send) the split's KV, end the last token's end
 * in it, the farthest any of its rows reads */
struct rblk : rows_blk {
  int s, ntiles;
  int64_t start, send, end;
  tokinfo ti; /* the block's last token's */
};
__device__ __forceinline__ rblk rows_block(const fparams &p) {
  rblk k;
  static_cast<rows_blk &>(k) = rows_of_block(p);
  k.s = (int)blockIdx.y;
  k.ti = tok_of(p, k.tlast);
  k.start = (int64_t)k.s * k.ti.slen;
  k.send = k.start + k.ti.slen;
  k.end = k.send < k.ti.L ? k.send : k.ti.L;
  k.ntiles = k.end > k.start ? (int)((k.end - k.start + TILE - 1) / TILE) : 0;
  return k;
}

/* a tile's copies into buffer b (rows pos0 .. pos0 + 127 of the split; rows at or past the end
 * zero-filled, so that their V adds 0 * 0) by cp.async, by the copying warpgroup, rows 32 u0 ..
 * 32 u1 - 1 of it a call: four threads a row, thread 4 r + k copying chunks k, k + 4, .. of rows
 * r, r + 32, .., so that a copy instruction reads 8 rows x 64 contiguous bytes and writes 8 x 64
 * bytes of one slab; rows_issue_done puts the tile's completion on the buffer's mbarrier */
__device__ __forceinline__ void rows_issue(const fparams &p, const rblk &k, int b, int64_t pos0,
                                           int u0, int u1) {
  const int i = (int)threadIdx.x - RC, lk = i & 3;
  const uint32_t dst = smem_addr(rsm) + (uint32_t)(b * RTB);
#pragma unroll
  for (int u = u0; u < u1; u++) {
    const int r = 32 * u + (i >> 2);
    const int64_t pos = pos0 + r;
    const int64_t row = kv_ref_row(p, kv_ref(p, k.ti.base, pos, pos < k.end));
    const uint8_t *src = row >= 0 ? p.kv + row * QK + 16 * lk : p.kv;
    const int bytes = row >= 0 ? 16 : 0;
    const uint32_t d = dst + kv_at(r, lk);
#pragma unroll
    for (int c = 0; c < QK / 64; c++) /* chunk lk + 4 c: slab c, the same place in it */
      cp_async16(d + RSLAB * c, src + (bytes ? 64 * c : 0), bytes);
  }
}
__device__ __forceinline__ void rows_issue_done(int b) {
  cp_commit();
  cp_mbar_arrive(r_full(b));
}
/* part q of the tile at pos0 into buffer b: by the tensor memory accelerator where its rows are
 * contiguous in the pool (unpaged, or within one page) and all before the split's end, a box of
 * p.tmap (host.cu's plan_tma: 64 bytes x the part's rows, swizzled as kv_at) a slab, issued by
 * one thread, its bytes counted on the buffer's mbarrier as they land (the copying threads'
 * arrivals stay rows_issue_done's); else by rows_issue, zero-filling the rows past the end */
__device__ __forceinline__ void rows_part(const fparams &p, const rblk &k, int b, int64_t pos0,
                                          int q) {
  constexpr int HR = TILE / RPART, U = HR / 32; /* rows_issue's calls of 32 rows */
  const int64_t pos = pos0 + q * HR;
  if (!p.tma || pos + HR > k.end ||
      (p.kv_indices && pos - kv_page(p, pos) * p.page + HR > p.page)) {
    rows_issue(p, k, b, pos0, U * q, U * (q + 1));
    return;
  }
  if (threadIdx.x != RC) return;
  const uint32_t dst = smem_addr(rsm) + (uint32_t)b * RTB + kv_at(q * HR, 0), bar = r_full(b);
  const int32_t row = (int32_t)kv_ref_row(p, kv_ref(p, k.ti.base, pos, true));
  mbar_expect_tx(bar, RTB / RPART);
#pragma unroll
  for (int j = 0; j < QK / 64; j++) tma_load_2d(dst + RSLAB * j, p.tmap, 64 * j, row, bar);
}

/* Q's rows (the staged codes: k_qprep's fp16 codes or, p.qin, the bf16 codes) as e4m3 codes in the
 * logits' A layout: row i's chunk kc at 128 (8 kc + i / 8) + 16 (i % 8); rows past nr are zero
 * codes (staged as zeros). As wg_q8: the static policy's codes (the clamp counted by split 0's
 * blocks: each row is in one block a split) or k_qprep's fp16 codes narrowed (exact). */
__device__ __forceinline__ void rows_q8(const fparams &p, const uint16_t *q_st, uint8_t *q8,
                                        int s) {
  int clipped = 0;
  for (int c = threadIdx.x; c < RR * (QK / 8); c += RC) { /* row i's codes 8 k8 .. 8 k8 + 7 */
    const int i = c / (QK / 8), k8 = c % (QK / 8);
    *(uint2 *)(q8 + RCM * (8 * (k8 >> 1) + (i >> 3)) + 16 * (i & 7) + 8 * (k8 & 1)) =
        wg_q8_codes(p, *(const uint4 *)(q_st + i * QK + 8 * k8), &clipped);
  }
  if (p.qin) add_clipped(p, clipped, s == 0);
}

/* the softmax state of a thread's two rows in the logits' layout (rows 16 w + g + 8 rr) */
struct rrows {
  float m[2], l[2];
  int64_t rend[2]; /* each row's end in the split (its token's KV length); start: no row */
};

/* one tile's logits, maxima, P (P8: e4m3 codes, else fp16) and row sums for warpgroup v's 64
 * tokens; alpha of the two rows returned through al (and written for the PV by warpgroup 0). kvb:
 * the tile's buffer. */
template <int P8>
__device__ __forceinline__ void rows_softmax(const fparams &p, float c, uint32_t kvb, int64_t t0pos,
                                             rrows &st, float (&al)[2]) {
  const int v = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31,
            g = lane >> 2, j = lane & 3;
  float sv[32];
#pragma unroll
  for (int i = 0; i < 32; i++) sv[i] = 0.0f;
  wg_fence_regs<32>(sv);
  wg_fence_all();
  const uint32_t q8 = smem_addr(rsm + R_Q8), kb = kvb + kv_at(64 * v, 0);
#pragma unroll
  for (int ks = 0; ks < QK / 32; ks++) /* column chunks 2 ks, 2 ks + 1: slab ks / 2's half */
    wg_logits(sv, wg_desc_at(q8 + 2 * RQ_LBO * ks, RQ_LBO, RCM),
              kv_desc(kb + RSLAB * (ks >> 1) + 32 * (ks & 1)));
  wg_commit();
  wg_wait_n<0>();
  wg_fence_regs<32>(sv);
  /* sv[4 i + 2 rr + e]: row 16 w + g + 8 rr, token 64 v + 8 i + 2 j + e */
  int n[2];
  float mx[2] = {-INFINITY, -INFINITY}, lo[2] = {INFINITY, INFINITY}; /* lo: at most any live s c */
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const int64_t left = st.rend[rr] - t0pos;
    n[rr] = left <= 0 ? 0 : left >= TILE ? TILE : (int)left;
  }
  if (n[0] == TILE && n[1] == TILE) /* no token masked (every tile but a split's last) */
#pragma unroll
    for (int i = 0; i < 32; i++) {
      const int rr = (i >> 1) & 1;
      sv[i] = sv[i] * c;
      mx[rr] = fmaxf(mx[rr], sv[i]);
      lo[rr] = fminf(lo[rr], sv[i]);
    }
  else
#pragma unroll
    for (int i = 0; i < 32; i++) {
      const int rr = (i >> 1) & 1, tok = 64 * v + 8 * (i >> 2) + 2 * j + (i & 1);
      const float s = sv[i] * c;
      lo[rr] = fminf(lo[rr], s);
      sv[i] = tok < n[rr] ? s : -INFINITY;
      mx[rr] = fmaxf(mx[rr], sv[i]);
    }
#pragma unroll
  for (int rr = 0; rr < 2; rr++) { /* the max is exact in any order */
    mx[rr] = fmaxf(mx[rr], MLR_SHFL_XOR(mx[rr], 1));
    mx[rr] = fmaxf(mx[rr], MLR_SHFL_XOR(mx[rr], 2));
    if (j == 0) r_max()[64 * v + 16 * w + g + 8 * rr] = mx[rr];
  }
  bar_sync(BAR_C, RC); /* (m) both halves' maxima */
  float mn[2];
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const int row = 16 * w + g + 8 * rr;
    const float bm = fmaxf(r_max()[row], r_max()[64 + row]);
    /* a row whose tokens ended before this tile: m, l kept, alpha 1, p 0 (its state unchanged, as
     * if the tile were skipped) */
    mn[rr] = n[rr] > 0 ? fmaxf(st.m[rr], bm) : st.m[rr];
    al[rr] = n[rr] > 0 ? ex2(st.m[rr] - mn[rr]) : 1.0f;
  }
  uint8_t *pb = rsm + R_P;
  /* s c - m' >= lo - m' for every live token (the subtraction rounds monotonically), masked ones
   * are -inf: where lo - m' >= -126 in every row of the warp, ex2's test below -126 never holds,
   * so the unit's result is taken without it (a row with no token: m' = +inf, p = 2^-inf = 0) */
  bool normal = true;
  float mt[2];
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    normal &= n[rr] == 0 || lo[rr] - mn[rr] >= -126.0f;
    mt[rr] = n[rr] > 0 ? mn[rr] : INFINITY;
  }
  if (__all_sync(0xFFFFFFFFu, normal))
#pragma unroll
    for (int i = 0; i < 32; i++) sv[i] = ex2_normal(sv[i] - mt[(i >> 1) & 1]);
  else
#pragma unroll
    for (int i = 0; i < 32; i++) {
      const int rr = (i >> 1) & 1;
      sv[i] = n[rr] > 0 ? ex2(sv[i] - mn[rr]) : 0.0f;
    }
  if (P8) /* P's e4m3 codes in Q's layout: row r's k at 128 (8 (k / 16) + r / 8) + 16 (r % 8) + k
           * % 16, group q's tokens 2j, 2j+1, 2j+8, 2j+9 (the lane's) at k = 16 q + 4 j .. + 3, the
           * order of rows_pv8's A fragments (a warp's store: one core matrix) */
#pragma unroll
    for (int i2 = 0; i2 < 4; i2++)
#pragma unroll
      for (int rr = 0; rr < 2; rr++) {
        const int row = 16 * w + g + 8 * rr, q = 4 * v + i2, a = 8 * i2 + 2 * rr;
        *(uint32_t *)(pb + RCM * (8 * q + (row >> 3)) + 16 * (row & 7) + 4 * j) =
            e4m3x4(sv[a], sv[a + 1], sv[a + 4], sv[a + 5]);
      }
  else /* fp16 P: row r's tokens t, t + 1 at 128 (8 (t / 8) + r / 8) + 16 (r % 8) + 2 (t % 8)
        * (wgmma's B, K-major: a warp's store is 8 rows x 16 bytes, one core matrix) */
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
      for (int rr = 0; rr < 2; rr++) {
        const int row = 16 * w + g + 8 * rr, tc = 8 * v + i;
        *(uint32_t *)(pb + RCM * (8 * tc + (row >> 3)) + 16 * (row & 7) + 4 * j) =
            mlr__f16x2(sv[4 * i + 2 * rr], sv[4 * i + 2 * rr + 1]);
      }
  /* group q (tokens 16 q ..): lane j's (p[2j] + p[2j+1]) + (p[2j+8] + p[2j+9]), then the quad's
   * (l0 + l1) + (l2 + l3): the recipe's warp16 sum, term for term. The quad's eight sums (4 groups
   * x 2 rows) are halved twice between lanes (lane j keeps half of them and adds its partner's
   * share of that half: 6 shuffles, not 16); an fp32 sum is the same in either operand order, so
   * lane j ends with (l0 + l1) + (l2 + l3) of group 2 (j & 1) + j / 2 for both rows */
  float x[8]; /* x[2 q + rr] */
#pragma unroll
  for (int q = 0; q < 4; q++)
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
      const int a = 4 * (2 * q) + 2 * rr, b = 4 * (2 * q + 1) + 2 * rr;
      x[2 * q + rr] = (sv[a] + sv[a + 1]) + (sv[b] + sv[b + 1]);
    }
  float y[4], z[2];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float send = j & 1 ? x[i] : x[i + 4], keep = j & 1 ? x[i + 4] : x[i];
    y[i] = keep + MLR_SHFL_XOR(send, 1);
  }
#pragma unroll
  for (int i = 0; i < 2; i++) {
    const float send = j & 2 ? y[i] : y[i + 2], keep = j & 2 ? y[i + 2] : y[i];
    z[i] = keep + MLR_SHFL_XOR(send, 2);
  }
#pragma unroll
  for (int rr = 0; rr < 2; rr++)
    r_sum()[8 * (16 * w + g + 8 * rr) + 4 * v + 2 * (j & 1) + (j >> 1)] = z[rr];
  if (v == 0 && j == 0) {
    r_alpha()[16 * w + g] = al[0];
    r_alpha()[16 * w + g + 8] = al[1];
  }
  async_fence();       /* P's generic stores, read by wgmma */
  bar_sync(BAR_C, RC); /* (p) P, the group sums and alpha */
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const float *gs = r_sum() + 8 * (16 * w + g + 8 * rr);
    float sum = 0.0f;
#pragma unroll
    for (int q = 0; q < 8; q++) sum += gs[q]; /* the groups in order */
    st.l[rr] = st.l[rr] * al[rr] + sum;
    st.m[rr] = mn[rr];
  }
}

/* acc[a][4 i + 2 x + e] is V's column 256 v + 32 (4 (a / 2) + w) + 16 (a % 2) + 2 g + x of row
 * 8 i + 2 j + e: acc * alpha, before a tile's PV (no row's alpha moved: no bit changes, so
 * skipped) */
__device__ __forceinline__ void rows_rescale(float (&acc)[4][32]) {
  const int j = threadIdx.x & 3;
  float a16[16];
  bool one = true;
#pragma unroll
  for (int i = 0; i < 16; i++) {
    a16[i] = r_alpha()[8 * (i >> 1) + 2 * j + (i & 1)];
    one &= a16[i] == 1.0f;
  }
  if (!__all_sync(0xFFFFFFFFu, one))
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
      for (int i = 0; i < 32; i++) acc[a][i] = acc[a][i] * a16[2 * (i >> 2) + (i & 1)];
}

/* one tile's PV for warpgroup v (fp16 P): acc * alpha, then 8 steps of 16 tokens, each step's A
 * fragments converted while the step before runs, from matrices loaded a step ahead. hbar (>= 0):
 * the named barrier to arrive at once the buffer's first part is read (hbar + 1 the second, ..),
 * the last part's left to the caller. */
__device__ __forceinline__ void rows_pv(uint32_t kvb, float (&acc)[4][32], int hbar) {
  const int v = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  rows_rescale(acc);
  /* ldmatrix.trans of tokens 16 kb + (lane & 7) + 8 ((lane >> 3) & 1), chunk 16 v + 8 a2 + 2 w +
   * (lane >> 4): matrices m0, m1 (tokens 0-7, 8-15) of V's columns c0 .. c0 + 15, m2, m3 of c0 +
   * 16 ..; lane (g, j) gets tokens 2j, 2j+1 (m0, m2) and 2j+8, 2j+9 (m1, m3) of byte columns 2g,
   * 2g + 1, which are rows g and g + 8 of the A fragment of columns c0 + 16 h .. (pv_products) */
  /* kv_at's xor depends on the token's (r / 2) % 4, which steps of 16 tokens and slabs keep: the
   * lane's address, plus kv_at(16 kb, 8 a2) */
  const uint32_t vl = kvb + kv_at((lane & 7) + 8 * ((lane >> 3) & 1), 16 * v + 2 * w + (lane >> 4));
  const uint32_t pd = smem_addr(rsm + R_P);
  uint32_t r[2][4]; /* step kb's matrices, loaded during step kb - 1 */
#pragma unroll
  for (int a2 = 0; a2 < 2; a2++)
    ldsm4t(vl + kv_at(0, 8 * a2), r[a2][0], r[a2][1], r[a2][2], r[a2][3]);
#pragma unroll
  for (int kb = 0; kb < TILE / 16; kb++) {
    uint32_t fa[4][4];
#pragma unroll
    for (int a2 = 0; a2 < 2; a2++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        uint32_t e0, o0, e1, o1;
        fp8x4<0>(prmt(r[a2][2 * h], 0x3120), e0, o0);
        fp8x4<0>(prmt(r[a2][2 * h + 1], 0x3120), e1, o1);
        fa[2 * a2 + h][0] = e0; /* row g (column 2g), tokens 2j, 2j+1 */
        fa[2 * a2 + h][1] = o0; /* row g + 8 (column 2g + 1) */
        fa[2 * a2 + h][2] = e1; /* tokens 2j + 8, 2j + 9 */
        fa[2 * a2 + h][3] = o1;
      }
    /* a part's tokens read: their ldmatrix results are all converted (the next step's are loaded
     * below) */
    if (kb % RSTEP == RSTEP - 1 && kb + 1 < TILE / 16 && hbar >= 0)
      bar_arrive(hbar + kb / RSTEP, RT);
    if (kb + 1 < TILE / 16)
#pragma unroll
      for (int a2 = 0; a2 < 2; a2++)
        ldsm4t(vl + kv_at(16 * (kb + 1), 8 * a2), r[a2][0], r[a2][1], r[a2][2], r[a2][3]);
    wg_fence_all();
#pragma unroll
    for (int a = 0; a < 4; a++) wg_pv(acc[a], fa[a], wg_desc_at(pd + 2 * RQ_LBO * kb, RQ_LBO, RCM));
    wg_commit();
    wg_wait_n<1>();
  }
  wg_wait_n<0>();
#pragma unroll
  for (int a = 0; a < 4; a++) wg_fence_regs<32>(acc[a]);
}

/* the same on the fp8 unit (P8: e4m3 P): 4 steps of 32 tokens, V's codes as they are. A step's
 * A fragment for columns c0 + 16 h: rows g and g + 8 (columns 2g and 2g + 1, as in rows_pv), k
 * 4j .. 4j + 3 the tokens 2j, 2j+1, 2j+8, 2j+9 of the step's first 16 tokens and k 16 + 4j .. the
 * same of its second 16: bytes of the ldmatrix.trans results picked by prmt (tokens 2j, 2j+1 of
 * byte columns 2g, 2g + 1 from m0 and m2, 2j+8, 2j+9 from m1 and m3), P's k order in
 * rows_softmax. The order of k within a step is not seen: the unit sums a step's 32 products as
 * one block, aligned to the largest and cut alike (mma:sm90-e4m3), whatever their order. */
__device__ __forceinline__ void rows_pv8(uint32_t kvb, float (&acc)[4][32], int hbar) {
  constexpr int NS = TILE / 32, PS = NS / RPART; /* steps, and steps a part */
  const int v = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  rows_rescale(acc);
  const uint32_t vl = kvb + kv_at((lane & 7) + 8 * ((lane >> 3) & 1), 16 * v + 2 * w + (lane >> 4));
  const uint32_t pd = smem_addr(rsm + R_P);
  uint32_t r[2][2][4]; /* step ks's matrices [its 16-token half][a2][m0..m3], loaded a step ahead */
#pragma unroll
  for (int h2 = 0; h2 < 2; h2++)
#pragma unroll
    for (int a2 = 0; a2 < 2; a2++)
      ldsm4t(vl + kv_at(16 * h2, 8 * a2), r[h2][a2][0], r[h2][a2][1], r[h2][a2][2], r[h2][a2][3]);
#pragma unroll
  for (int ks = 0; ks < NS; ks++) {
    uint32_t fa[4][4];
#pragma unroll
    for (int a2 = 0; a2 < 2; a2++)
#pragma unroll
      for (int h = 0; h < 2; h++)
#pragma unroll
        for (int h2 = 0; h2 < 2; h2++) {
          const uint32_t lo = r[h2][a2][2 * h], hi = r[h2][a2][2 * h + 1];
          fa[2 * a2 + h][2 * h2] = prmt2(lo, hi, 0x6420);     /* row g: column 2g */
          fa[2 * a2 + h][2 * h2 + 1] = prmt2(lo, hi, 0x7531); /* row g + 8: column 2g + 1 */
        }
    if (ks % PS == PS - 1 && ks + 1 < NS && hbar >= 0) bar_arrive(hbar + ks / PS, RT);
    if (ks + 1 < NS)
#pragma unroll
      for (int h2 = 0; h2 < 2; h2++)
#pragma unroll
        for (int a2 = 0; a2 < 2; a2++)
          ldsm4t(vl + kv_at(32 * (ks + 1) + 16 * h2, 8 * a2), r[h2][a2][0], r[h2][a2][1],
                 r[h2][a2][2], r[h2][a2][3]);
    wg_fence_all();
#pragma unroll
    for (int a = 0; a < 4; a++)
      wg_pv8(acc[a], fa[a], wg_desc_at(pd + 2 * RQ_LBO * ks, RQ_LBO, RCM));
    wg_commit();
    wg_wait_n<1>();
  }
  wg_wait_n<0>();
#pragma unroll
  for (int a = 0; a < 4; a++) wg_fence_regs<32>(acc[a]);
}

/* the split's result: raw partials (acc kv_scale, m, l) for k_merge, or a lone split's output and
 * lse, as store_result computes them. The accumulators go through shared memory (the tile buffers,
 * free once both warpgroups' PV is done), a row RST floats apart (so that each half-warp's float2
 * stores meet every bank once), and each row leaves whole: 8 columns a thread, one short loop, so
 * that the code stays small and a row's stores contiguous. */
enum { RST = DV + 4 };
static_assert(RR * RST * 4 <= 2 * RTB, "the rows' accumulators fit the tile buffers");
__device__ __forceinline__ void rows_store(const fparams &p, const rblk &k, const rrows &st,
                                           const float (&acc)[4][32]) {
  const int v = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31,
            g = lane >> 2, j = lane & 3;
  const bool direct = k.ti.nsplit == 1;
  const int64_t orow0 = k.t0 * p.H + k.r0;
  if (v == 0 && j == 0)
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
      const int row = 16 * w + g + 8 * rr;
      r_ml()[2 * row] = st.m[rr];
      r_ml()[2 * row + 1] = st.l[rr];
      if (row >= k.nr) continue;
      if (direct) {
        bool live;
        float wv;
        const float sc = direct_sc(p, st.m[rr], st.l[rr], live, wv);
        store_lone_lse(p, orow0 + row, st.m[rr], sc, live);
      } else {
        p.part_x[(orow0 + row) * p.S + k.s] = st.m[rr];
        p.part_sum[(orow0 + row) * p.S + k.s] = st.l[rr];
      }
    }
  float *stage = (float *)rsm;
  bar_sync(BAR_C, RC); /* (e) every PV done: the tile buffers free */
#pragma unroll
  for (int i = 0; i < 8; i++)
#pragma unroll
    for (int e = 0; e < 2; e++)
#pragma unroll
      for (int a = 0; a < 4; a++) {
        const int row = 8 * i + 2 * j + e,
                  col = 256 * v + 32 * (4 * (a >> 1) + w) + 16 * (a & 1) + 2 * g;
        *(float2 *)(stage + row * RST + col) =
            make_float2(acc[a][4 * i + e], acc[a][4 * i + 2 + e]);
      }
  bar_sync(BAR_C, RC); /* (s) every row's accumulators, m and l */
#pragma unroll 1
  for (int c = threadIdx.x; c < k.nr * (DV / 8); c += RC) {
    const int row = c / (DV / 8), col = 8 * (c % (DV / 8));
    const int64_t orow = orow0 + row;
    const float4 lo = *(const float4 *)(stage + row * RST + col),
                 hi = *(const float4 *)(stage + row * RST + col + 4);
    const float a8[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    if (direct) {
      bool live;
      float wv, nv[8], q[8];
      const float sc = direct_sc(p, r_ml()[2 * row], r_ml()[2 * row + 1], live, wv);
#pragma unroll
      for (int x = 0; x < 8; x++) nv[x] = live ? 0.0f + a8[x] * p.kvs * wv : 0.0f;
      div_row<8>(nv, sc, q);
      *(uint4 *)(p.o + orow * DV + col) =
          make_uint4(mlr__out_bf16x2(q[0], q[1]), mlr__out_bf16x2(q[2], q[3]),
                     mlr__out_bf16x2(q[4], q[5]), mlr__out_bf16x2(q[6], q[7]));
    } else {
      float *po = p.part_o + (orow * p.S + k.s) * DV + col;
      *(float4 *)po = make_float4(a8[0] * p.kvs, a8[1] * p.kvs, a8[2] * p.kvs, a8[3] * p.kvs);
      *(float4 *)(po + 4) = make_float4(a8[4] * p.kvs, a8[5] * p.kvs, a8[6] * p.kvs, a8[7] * p.kvs);
    }
  }
}

/* the copying warpgroup: tiles 1, 2, .. as the computing threads free the buffers (tile t into
 * buffer t % 2: each part once tile t - 2's PV has passed it, the last once that PV is done); tile
 * 0 went before Q's barriers */
__device__ __forceinline__ void rows_copier(const fparams &p, const rblk &k) {
  if (p.tma) async_fence(); /* Q's generic copies into buffer 1 before the async proxy's */
  for (int tile = 1; tile < k.ntiles; tile++) {
    const int b = tile & 1;
    const int64_t pos0 = k.start + (int64_t)tile * TILE;
#pragma unroll
    for (int q = 0; q < RPART; q++) {
      if (tile >= 2) bar_sync(q + 1 < RPART ? BAR_H + (RPART - 1) * b + q : BAR_E + b, RT);
      rows_part(p, k, b, pos0, q);
    }
    rows_issue_done(b);
  }
}

/* the computing warpgroups: each tile's softmax and PV, then the split's result */
template <int P8>
__device__ __forceinline__ void rows_compute(const fparams &p, const rblk &k, rrows &st) {
  float c = p.c0; /* the logit scale, left to right as ws_qk's */
  c = c * q_scale(p);
  c = c * p.kvs;
  float acc[4][32];
#pragma unroll
  for (int a = 0; a < 4; a++)
#pragma unroll
    for (int i = 0; i < 32; i++) acc[a][i] = 0.0f;
  for (int tile = 0; tile < k.ntiles; tile++) {
    const int b = tile & 1;
    mbar_wait(r_full(b), (uint32_t)(tile >> 1) & 1u);
    async_fence(); /* the copies (and Q's codes), read by wgmma */
    const uint32_t kvb = smem_addr(rsm) + (uint32_t)(b * RTB);
    float al[2];
    const bool again = tile + 2 < k.ntiles; /* buffer b copied into for tile + 2 */
    rows_softmax<P8>(p, c, kvb, k.start + (int64_t)tile * TILE, st, al);
    if (P8)
      rows_pv8(kvb, acc, again ? BAR_H + (RPART - 1) * b : -1);
    else
      rows_pv(kvb, acc, again ? BAR_H + (RPART - 1) * b : -1);
    if (again) bar_arrive(BAR_E + b, RT); /* the last part */
  }
  griddep_launch_dependents(); /* k_merge may start (it waits for this grid to end) */
  rows_store(p, k, st, acc);
}

/* p in the kernel's parameter space (__grid_constant__), where rows_part's tensor map must be;
 * P8: the PV on the fp8 unit (e4m3 P) */
template <int P8>
__global__ void __launch_bounds__(RT, 1) k_attn_rows(const __grid_constant__ fparams p) {
  const rblk k = rows_block(p);
  if (k.s >= k.ti.nsplit) return;
  const bool copier = threadIdx.x >= RC;
  const int w = (threadIdx.x >> 5) & 3, g = (threadIdx.x & 31) >> 2;
  rrows st;
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const int row = 16 * w + g + 8 * rr;
    st.m[rr] = -INFINITY;
    st.l[rr] = 0.0f;
    const int64_t L = rows_row_len(p, k, row);
    st.rend[rr] = row >= k.nr ? k.start : k.send < L ? k.send : L;
  }
  if (threadIdx.x == 0) {
    for (int b = 0; b < 2; b++) mbar_init(r_full(b), RT - RC); /* the copying threads' arrivals */
    mbar_init_fence(); /* for the tensor memory accelerator's completions */
  }
  griddep_wait(); /* k_qprep's codes; the previous run's outputs */
  /* Q's codes staged in tile buffer 1 (free until tile 1 copies, after Q's barriers) */
  uint16_t *q_st = (uint16_t *)(rsm + RTB);
  const uint16_t *qsrc = (p.qin ? p.q : p.qop) + (k.t0 * p.H + k.r0) * QK;
  for (int c = threadIdx.x; c < RR * (QK / 8); c += RT) {
    const bool ok = c / (QK / 8) < k.nr;
    cp_async16(smem_addr(q_st) + 16 * c, ok ? qsrc + 8 * c : p.q, ok ? 16 : 0);
  }
  cp_commit();
  __syncthreads(); /* the mbarriers initialized */
  if (copier && k.ntiles > 0) {
    for (int q = 0; q < RPART; q++) rows_part(p, k, 0, k.start, q);
    rows_issue_done(0);
    asm volatile("cp.async.wait_group 1;\n" ::: "memory"); /* Q's group, not tile 0's */
  } else
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  __syncthreads(); /* Q staged */
  if (!copier) rows_q8(p, q_st, rsm + R_Q8, k.s);
  __syncthreads(); /* Q's codes written; tile buffer 1 free */
  if (copier) {
    WG_ASM("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory"); /* REG_K */
    rows_copier(p, k);
    griddep_launch_dependents();
  } else {
    WG_ASM("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory"); /* REG_C */
    rows_compute<P8>(p, k, st);
  }
}

} // namespace

akernel attn_kernel_rows(const fparams &p) {
  return p.p8 ? akernel{k_attn_rows<1>, "k_attn_rows<p8>"} : akernel{k_attn_rows<0>, "k_attn_rows"};
}

} // namespace mlr_fast
