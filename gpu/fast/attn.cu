/* attn.cu: k_attn, the fast kernel's attention kernel (NVIDIA sm_90): a block per (query token,
 * split), 8 warps. The block's KV rows stream through shared memory in tiles of 128 tokens
 * (cp.async into a ring of 6 slots of 64 rows = 3 tiles; bf16 KV: tiles of 64 tokens, slots of
 * 32 rows, logits by warps 0..3). Warp w: the logits of tokens 16w..16w+15 of a tile for the 16
 * heads (two mma chains over the 36 column blocks, Q's fragments in registers), and output columns
 * 64w..64w+63 of the 16 heads (8 accumulator tiles), P from shared memory (two buffers);
 * software-pipelined: tile i+1's logits with the first half of tile i's PV, tile i+1's softmax
 * with its second half, while tile i+2 loads. Launched with programmatic dependent launch: its
 * first KV loads overlap k_qprep, and k_merge's launch overlaps its tail. */
#include "fast_attn.cuh"
#include "fast_host.cuh"

namespace mlr_fast {
namespace {

extern __shared__ __align__(16) uint8_t sm[]; /* the dynamic shared memory (SMEM, SMEM_WG) */

/* W: bytes a KV value (1: fp8 codes, 2: bf16 codes). With bf16 KV a tile is 64 tokens (the
 * recipes' softmax.block = 64: the same 73,728 bytes as 128 fp8 rows, so the ring is unchanged),
 * its logits computed by warps 0..3 (16 tokens each, the order warp16 describes) and its PV by all
 * 8; K and V are ldmatrix'd in their natural k order and rounded to fp16 operands in registers. */
/* WG = 1 (recipe fast-wgmma-a8w8; fp8 Q, OCP e4m3 KV): the logits on wgmma's fp8 unit (wg_frags,
 * wg_mma, wg_wait), in the transposed layout (a warp's 16 tokens as rows, the heads as columns: the
 * softmax reduces across lanes instead of within them, in the same order), P in each tile's rope
 * columns (wg_p_chunk). */
/* One block of k_attn: its state and its phases, each inlined into the kernel (a struct rather than
 * one long function; the operations and their order are the kernel's). */
template <int FNUZ, int W, int WG>
struct attn_blk {
  static_assert(!WG || (W == 1 && !FNUZ), "the wgmma logits multiply OCP e4m3 codes");
  static constexpr int TT = TILE / W; /* a tile's tokens */
  static constexpr int SR = SLOT / W; /* a slot's rows */
  static constexpr int RB = QK * W;   /* a row's bytes */
  static constexpr int NQW = TT / 16; /* the warps computing logits */
  static constexpr int TPR = 4 * W;   /* threads a row when a slot loads */
  static constexpr int PS = TT + 8;   /* P's row in halves (4 banks apart) */
  static_assert(TPR * SR == NTHR && (RB / 16) % TPR == 0,
                "a slot's rows split evenly over the threads");
  static constexpr int RED = WG ? SM_KV + SM_Q8 : SM_KV + SM_P;
  /* a tile's logit steps: 4 (fp8) or 2 (bf16) column blocks each */
  static constexpr int NQ4 = NKB / (4 / W);
  static constexpr int NKV = TT / 16; /* a tile's PV steps (16 tokens each) */

  /* the shared memory's parts */
  /* [NSLOT][SR][RB] KV codes, chunks swizzled (ring) */
  static __device__ __forceinline__ uint8_t *kvs_sm() { return sm; }
  /* !WG: [2][16][PS] fp16 P, buffer tile & 1 (SM_P1 bytes apart) */
  static __device__ __forceinline__ uint16_t *p_sm() { return (uint16_t *)(sm + SM_KV); }
  /* WG: [36][2][8][16] Q's e4m3 codes, wgmma's B (wg_q8) */
  static __device__ __forceinline__ uint8_t *q8_sm() { return sm + SM_KV; }
  /* [16][NWARP] each */
  static __device__ __forceinline__ float *red_max() { return (float *)(sm + RED); }
  static __device__ __forceinline__ float *red_sum() { return red_max() + NWARP * 16; }
  /* [2]: FNUZ, tile t (t & 1) holds a special code */
  static __device__ __forceinline__ int *fix_sm() { return (int *)(sm + RED + SM_RED); }
  /* Q's staging, in slot 4's space */
  static __device__ __forceinline__ uint16_t *q_sm() {
    return (uint16_t *)(kvs_sm() + 4 * SLOT * QK);
  }

  int t, s;   /* the query token and the split */
  tokinfo ti; /* the token's entry */
  int warp, lane, g, j;
  bool qkw; /* this warp computes logits (a constant with fp8 KV) */
  int64_t L, start, end;
  int ntiles, nslots;
  int lr, lk; /* this thread's row of a slot and its first chunk (load_slot) */
  int32_t base_b;
  kvref row_e, row_o; /* the next even and odd slot's row of this thread (load_slot) */
  uint32_t kv_base;   /* the ring's shared address */
  int qk_half;
  float c;                  /* the logit scale */
  uint64_t qdesc;           /* WG: Q's descriptor */
  uint32_t p_lane, wp_lane; /* P's ldmatrix address, !WG from p_sm, WG in the rope columns */
  /* The arrays are the kernel's own locals, held by reference: each must stay an object of its own,
   * since an array indexed by a loop counter (until the loop is unrolled) would keep a struct
   * holding it in memory as a whole, and the kernel would be compiled otherwise. */
  uint32_t (&qk_lane)[2], (&pv_lane)[2 * W]; /* the ldmatrix addresses' lane parts (setup) */
  uint32_t (&qa)[NKB][4];                    /* !WG: Q's A fragments */
  float (&m)[2], (&l)[2];                    /* rows g and g+8 */
  float (&alpha)[2];                         /* the last softmax step's, for its PV */
  /* the PV accumulators, 8 n-tiles of 8 columns: fp8 [32-column group][16-column half][even/odd],
   * bf16 n-tile 4a + 2 h2 + e = columns 64w + 8 (4a + 2 h2 + e) .. (the stores after the loop) */
  float (&acc)[2][2][2][4];
  float (&sacc)[2][4];        /* a tile's logits */
  uint32_t (&wk_lane)[2];     /* WG: the A fragments' lane addresses */
  uint32_t (&ka)[NKB / 2][4]; /* WG: a tile's A fragments */
  float (&sv)[2][4];          /* a tile's masked logits */
  float (&mn)[2];             /* the rows' new max */

  __device__ __forceinline__ attn_blk(uint32_t (&qk_lane_)[2], uint32_t (&pv_lane_)[2 * W],
                                      uint32_t (&qa_)[NKB][4], float (&m_)[2], float (&l_)[2],
                                      float (&alpha_)[2], float (&acc_)[2][2][2][4],
                                      float (&sacc_)[2][4], uint32_t (&wk_lane_)[2],
                                      uint32_t (&ka_)[NKB / 2][4], float (&sv_)[2][4],
                                      float (&mn_)[2])
      : qk_lane(qk_lane_), pv_lane(pv_lane_), qa(qa_), m(m_), l(l_), alpha(alpha_), acc(acc_),
        sacc(sacc_), wk_lane(wk_lane_), ka(ka_), sv(sv_), mn(mn_) {}
  __device__ __forceinline__ bool begin(const fparams &p);
  __device__ __forceinline__ void setup(const fparams &p);
  __device__ __forceinline__ kvref row_of(const fparams &p, int slot);
  __device__ __forceinline__ void load_slot(const fparams &p, int slot);
  __device__ __forceinline__ void prologue(const fparams &p);
  __device__ __forceinline__ void qk_zero();
  template <int FIX>
  __device__ __forceinline__ void qk_step(uint32_t qb, int q4, uint32_t &sp);
  template <int FIX>
  __device__ __forceinline__ uint32_t qk(int tile);
  __device__ __forceinline__ void wg_load(int tile);
  __device__ __forceinline__ void qk_tile(int tile);
  __device__ __forceinline__ void pv_scale();
  template <int FIX>
  __device__ __forceinline__ void pv_step(int tile, int kb);
  template <int FIX>
  __device__ __forceinline__ void pv_steps(int tile, int kb0);
  __device__ __forceinline__ void red_row(const float *red, int row, float (&v)[NQW]);
  __device__ __forceinline__ void softmax1(int tile);
  __device__ __forceinline__ void softmax2a(int tile);
  __device__ __forceinline__ void softmax2b();
  template <int FIX>
  __device__ __forceinline__ void step1(int tile);
  __device__ __forceinline__ void run(const fparams &p);
};

/* Q (16 x 576 codes, rows past H zero-filled) is staged in slot 4's space (free until tile 2
 * loads, after Q's fragments are in registers), rows QSTR halves apart. Q made operands here
 * (p.qin: bf16 codes, static e4m3) depends on no kernel and its address on no table, so it loads
 * first, before the token's entry (a round trip); k_qprep's codes may still be being written
 * (programmatic dependent launch), so then tile 0's rows go first. false: this batch has fewer
 * splits (uniform over the block), and the block only takes part in its cluster's merge
 */
template <int FNUZ, int W, int WG>
__device__ __forceinline__ bool attn_blk<FNUZ, W, WG>::begin(const fparams &p) {
  t = blk_token(p);
  s = blockIdx.y;
  if (p.qin) q_load(p, q_sm(), t);
  ti = tok_of(p, t);
  if (s >= ti.nsplit) {
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    if (p.cl) cluster_merge(p, (float *)sm, t, ti.nsplit);
    return false;
  }
  return true;
}

/* The split's tiles and the addresses of its copies and ldmatrix loads. The KV rows stream through
 * a ring of 6 slots = 3 tiles: tile i is slots 2i, 2i+1 (mod 6). While the logits of tile i+1 and
 * the PV of tile i are computed, tile i+2 loads (issued when tile i-1's PV ended: 74 KB in flight).
 * One cp.async group per slot, an empty group past the split's end, so the counts stay uniform.
 * Rows past the end are zero-filled (their logits are masked and their zero V adds 0 * p = 0). */
template <int FNUZ, int W, int WG>
__device__ __forceinline__ void attn_blk<FNUZ, W, WG>::setup(const fparams &p) {
  warp = threadIdx.x >> 5;
  lane = threadIdx.x & 31;
  g = lane >> 2;
  j = lane & 3;
  qkw = NQW == NWARP || warp < NQW;
  L = ti.L;
  start = (int64_t)s * ti.slen;
  end = start + ti.slen < L ? start + ti.slen : L;
  ntiles = end > start ? (int)((end - start + TT - 1) / TT) : 0;
  nslots = 2 * ntiles;
  /* TPR threads a row: thread TPR r + k copies the row's 16-byte chunks k, k+TPR, .., so a row's
   * address (its page looked up) is worked out once a slot */
  lr = threadIdx.x / TPR;
  lk = threadIdx.x % TPR;
  base_b = ti.base;
  row_e = row_of(p, 0);
  row_o = row_of(p, 1);
  /* The ldmatrix addresses: tile i's half h (rows SR h ..) is slot (2i + h) % NSLOT; within a
   * slot, an address is a lane constant plus a compile-time offset, because the swizzle xors a
   * row's low 3 bits (which are the lane's: every ldmatrix row is 8 r + (lane & 7)) into the low
   * 2 (fp8) or 3 (bf16) bits of the chunk index, whose higher bits are the loop's (worked out once
   * a tile, the addresses would take a quarter of the loop's instructions). ring<W> is the
   * definition. */
  kv_base = smem_addr(kvs_sm());
  /* logits (warp < NQW): row 16 warp + 8 nt + (lane & 7) (half (16 warp) / SR), chunk 4 q4 + (lane
   * >> 3): ring::chunk = qk_lane[q4 % 2] + 8 nt RB + 64 (q4 - q4 % 2) */
  qk_half = 16 * warp / SR;
  for (int e = 0; e < 2; e++)
    qk_lane[e] = ring<W>::chunk(16 * warp + (lane & 7), 4 * e + (lane >> 3));
  /* PV: row 16 kb + (lane & 7) + 8 ((lane >> 3) & 1) (half 16 kb / SR), chunk (4 W) warp + 2 a +
   * (lane >> 4) (a < 2 W): ring::chunk = pv_lane[a] + 16 (kb % (SR / 16)) RB */
  for (int a = 0; a < 2 * W; a++)
    pv_lane[a] =
        ring<W>::chunk((lane & 7) + 8 * ((lane >> 3) & 1), 4 * W * warp + 2 * a + (lane >> 4));
}

/* the KV row of this thread's row of a slot (kv_ref), -1 past the split's end. The page table is
 * read two slots ahead (row_e, row_o: the next even and odd slot's rows), so its load latency
 * hides behind a slot's copies instead of stalling the copy's issue; the two are not passed along
 * (row_a = row_b), since copying a register waits for its load as using it does */
template <int FNUZ, int W, int WG>
__device__ __forceinline__ kvref attn_blk<FNUZ, W, WG>::row_of(const fparams &p, int slot) {
  const int64_t pos = ring<W>::pos(start, slot, lr);
  return kv_ref(p, base_b, pos, slot < nslots && pos < end);
}

/* slots are loaded in order 0, 1, 2, .. (each call's parity a constant once inlined) */
template <int FNUZ, int W, int WG>
__device__ __forceinline__ void attn_blk<FNUZ, W, WG>::load_slot(const fparams &p, int slot) {
  kvref &rs = slot & 1 ? row_o : row_e;
  if (slot < nslots) {
    const int64_t row = kv_ref_row(p, rs);
    rs = row_of(p, slot + 2);
    const uint8_t *src = p.kv;
    int bytes = 0;
    if (row >= 0) {
      src = p.kv + row * RB + lk * 16;
      bytes = 16;
    }
    /* chunk lk + TPR k at dst + 16 TPR k */
    const uint32_t dst = ring<W>::at(kvs_sm(), slot, lr, lk);
#pragma unroll
    for (int k = 0; k < RB / 16 / TPR; k++)
      cp_async16(dst + 16 * TPR * k, src + (bytes ? 16 * TPR * k : 0), bytes);
  }
  cp_commit();
}

/* Q's operands and tile 0, then the state of the softmax and the PV. Tile 1 is issued when tile 0
 * has landed, tile 2 after tile 0's softmax: issued before Q's fragments, their copies would hold
 * the threads (the memory pipeline full) while Q waits in shared memory; issued with tile 0, they
 * would share the memory's bandwidth with it, and tile 0 land only with most of the burst. Groups,
 * in order: Q, slots 0, 1 (p.qin) or slots 0, 1, Q; then slots 2..5. */
template <int FNUZ, int W, int WG>
__device__ __forceinline__ void attn_blk<FNUZ, W, WG>::prologue(const fparams &p) {
  if (p.qin) {
    load_slot(p, 0);
    load_slot(p, 1);
    griddep_wait(); /* nothing read before it comes from the kernel before */
    asm volatile("cp.async.wait_group 2;\n" ::: "memory"); /* Q */
  } else {
    load_slot(p, 0);
    load_slot(p, 1);
    griddep_wait(); /* fp8 Q: k_qprep's codes (and k_amax's scale) are written */
    q_load(p, q_sm(), t);
    asm volatile("cp.async.wait_group 0;\n" ::: "memory"); /* slots 0, 1 and Q */
  }
  if (FNUZ && threadIdx.x == 0) fix_sm()[0] = fix_sm()[1] = 0;
  __syncthreads();
  const float qs = q_scale(p);
  if constexpr (WG)
    wg_q8(p, q_sm(), q8_sm(), s); /* read by wgmma after the barrier below */
  else {
    q_operands<W, W == 1>(p, q_sm(), s);
    __syncthreads();
    q_frags(q_sm(), lane, qa);
  }
  asm volatile("cp.async.wait_group 0;\n" ::: "memory"); /* Q and tile 0 (slots 0, 1) */
  __syncthreads(); /* tile 0 landed; Q's staging read by every warp: slots 4 and 5 are free */
  load_slot(p, 2);
  load_slot(p, 3);
  /* logit scale: fp32(log2 e / 24) [* q_scale] * kv_scale, left to right (the emulator's c) */
  c = p.c0;
  if (p.qfp8) c = c * qs;
  c = c * p.kvs;
  m[0] = -INFINITY;
  m[1] = -INFINITY;
  l[0] = 0.0f;
  l[1] = 0.0f;
  alpha[0] = 1.0f;
  alpha[1] = 1.0f;
#pragma unroll
  for (int i = 0; i < 32; i++) (&acc[0][0][0][0])[i] = 0.0f;
  /* WG: warp w's A fragments (its tokens 16 w ..), row 16 w + (lane & 7) + 8 ((lane >> 3) & 1),
   * chunk 2 ks + (lane >> 4) for step ks: ring::chunk = wk_lane[ks % 2] + 64 (ks - ks % 2) / 2.
   * wg_load puts a tile's into ka, where they stay until the wait; wg_mma starts the warpgroup's
   * chain of 18 steps (the D in sacc: sacc[n][k] is token 16 w + g + 8 (k >> 1), head 8 n + 2 j +
   * (k & 1)); wg_wait ends it. */
  wg_k_lanes(warp, lane, wk_lane);
  qdesc = wg_desc(smem_addr(q8_sm()));
  p_lane = smem_addr(p_sm() + ((lane & 7) + 8 * ((lane >> 3) & 1)) * PS + 8 * (lane >> 4));
  wp_lane = wg_p_lane(lane); /* WG: P in the tile's rope columns, written by softmax2a */
}

/* ---- logits of a tile: tokens 16w + 8nt + g (B's n), two chains over the column blocks in
 * order ---- */
template <int FNUZ, int W, int WG>
__device__ __forceinline__ void attn_blk<FNUZ, W, WG>::qk_zero() {
#pragma unroll
  for (int nt = 0; nt < 2; nt++)
#pragma unroll
    for (int k = 0; k < 4; k++) sacc[nt][k] = 0.0f;
}
template <int FNUZ, int W, int WG>
template <int FIX>
__device__ __forceinline__ void attn_blk<FNUZ, W, WG>::qk_step(uint32_t qb, int q4, uint32_t &sp) {
  logit_step<FNUZ, FIX, W, 2>(qb, q4, qk_lane, qa, sacc, sp);
}
template <int FNUZ, int W, int WG>
template <int FIX>
__device__ __forceinline__ uint32_t attn_blk<FNUZ, W, WG>::qk(int tile) {
  uint32_t sp = 0;
  const uint32_t qb = ring<W>::half(kv_base, tile, qk_half);
  qk_zero();
#pragma unroll
  for (int q4 = 0; q4 < NQ4; q4++) qk_step<FIX>(qb, q4, sp);
  return sp;
}
template <int FNUZ, int W, int WG>
__device__ __forceinline__ void attn_blk<FNUZ, W, WG>::wg_load(int tile) {
  wg_frags(ring<W>::half(kv_base, tile, qk_half), wk_lane, ka);
}
/* FNUZ: a tile whose rows hold a special code has its logits computed again with the codes
 * replaced (a warp's own 16 rows: its branch is uniform), and is flagged for its PV (every warp
 * reads every row there: the flag is in shared memory, read after a barrier) */
template <int FNUZ, int W, int WG>
__device__ __forceinline__ void attn_blk<FNUZ, W, WG>::qk_tile(int tile) {
  if constexpr (WG) {
    wg_load(tile);
    wg_mma(sacc, ka, qdesc);
    wg_wait(sacc);
    return;
  }
  const uint32_t sp = qk<0>(tile);
  if (FNUZ && __any_sync(0xFFFFFFFFu, sp != 0)) {
    qk<1>(tile);
    if (lane == 0) fix_sm()[tile & 1] = 1;
  }
}

/* ---- PV of a tile: output columns 64w .. 64w+63 from acc*alpha, token blocks of 16 in order ----
 */
template <int FNUZ, int W, int WG>
__device__ __forceinline__ void attn_blk<FNUZ, W, WG>::pv_scale() {
  /* acc * alpha; alpha = 1 for all 16 rows (no row's max moved: most tiles) changes no bit */
  if (!__all_sync(0xFFFFFFFFu, alpha[0] == 1.0f && alpha[1] == 1.0f)) {
#pragma unroll
    for (int i = 0; i < 32; i++) { /* c0, c1 are row g's, c2, c3 row g+8's */
      float &v = (&acc[0][0][0][0])[i];
      v = v * alpha[(i >> 1) & 1];
    }
  }
}
/* step kb of tile's PV: P from buffer tile & 1 (P is double-buffered: tile i+1's softmax writes its
 * P while tile i's PV runs) */
template <int FNUZ, int W, int WG>
template <int FIX>
__device__ __forceinline__ void attn_blk<FNUZ, W, WG>::pv_step(int tile, int kb) {
  uint32_t pa[4]; /* P rows 0..15, tokens 16kb.. : the natural k order */
  const uint32_t vrow = ring<W>::half(kv_base, tile, 16 * kb / SR) +
                        16 * (kb % (SR / 16)) * RB; /* rows 16 kb .. of the tile */
  if constexpr (WG)
    ldsm4(vrow + wp_lane, pa[0], pa[1], pa[2], pa[3]);
  else
    ldsm4(p_lane + (tile & 1) * SM_P1 + 32 * kb, pa[0], pa[1], pa[2], pa[3]);
  pv_products<FIX, W, 2>(vrow, pa, pv_lane, acc);
}
template <int FNUZ, int W, int WG>
template <int FIX>
__device__ __forceinline__ void attn_blk<FNUZ, W, WG>::pv_steps(int tile, int kb0) {
#pragma unroll
  for (int kb = kb0; kb < NKV; kb++) pv_step<FIX>(tile, kb);
}

/* ---- softmax of a tile, from its logits in sacc (warps < NQW): (1) masked logits and the block's
 * row maxima into red_max; then, after a barrier, (2) alpha, P into p_sm, the row sums, l and m
 * ---- */
/* the NQW warps' values of row `row` (red_max() and red_sum() are [16][NWARP]: a row's in two
 * 16-byte loads, not NQW 4-byte ones) */
template <int FNUZ, int W, int WG>
__device__ __forceinline__ void attn_blk<FNUZ, W, WG>::red_row(const float *red, int row,
                                                               float (&v)[NQW]) {
#pragma unroll
  for (int w = 0; w < NQW; w += 4) {
    const float4 x = *(const float4 *)(red + row * NWARP + w);
    v[w] = x.x;
    v[w + 1] = x.y;
    v[w + 2] = x.z;
    v[w + 3] = x.w;
  }
}
template <int FNUZ, int W, int WG>
__device__ __forceinline__ void attn_blk<FNUZ, W, WG>::softmax1(int tile) {
  const int64_t left = end - (start + (int64_t)tile * TT);
  const int n = left < TT ? (int)left : TT; /* the tile's tokens before the split's end */
  if constexpr (WG) { /* head 8 nh + 2 j + e: this lane's tokens g, g + 8, then across the lanes of
                         its j */
#pragma unroll
    for (int nh = 0; nh < 2; nh++)
#pragma unroll
      for (int k = 0; k < 4; k++)
        sv[nh][k] = 16 * warp + g + 8 * (k >> 1) < n ? sacc[nh][k] * c : -INFINITY;
    float mh[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}};
    wg_fold_max(sv, mh);
    wg_allmax(mh);
    wg_put_heads(red_max(), NWARP, warp, mh, g == 0);
    return;
  }
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nt = 0; nt < 2; nt++)
#pragma unroll
    for (int k = 0; k < 4; k++) {
      sv[nt][k] = 16 * warp + 8 * nt + 2 * j + (k & 1) < n ? sacc[nt][k] * c : -INFINITY;
      mx[k >> 1] = fmaxf(mx[k >> 1], sv[nt][k]);
    }
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    mx[rr] = fmaxf(mx[rr], MLR_SHFL_XOR(mx[rr], 1));
    mx[rr] = fmaxf(mx[rr], MLR_SHFL_XOR(mx[rr], 2));
    if (j == 0) red_max()[(g + 8 * rr) * NWARP + warp] = mx[rr];
  }
}
template <int FNUZ, int W, int WG>
__device__ __forceinline__ void attn_blk<FNUZ, W, WG>::softmax2a(int tile) {
  uint16_t *pt = p_sm() + (tile & 1) * (SM_P1 / 2);
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    float v = m[rr], x[NQW];
    red_row(red_max(), g + 8 * rr, x);
#pragma unroll
    for (int w = 0; w < NQW; w++) v = fmaxf(v, x[w]);
    mn[rr] = v;
    alpha[rr] = ex2(m[rr] - v);
  }
  if constexpr (WG) { /* P into the tile's rope columns (wg_p_chunk), the row sums of the warp's 16
                         tokens */
    float mh[2][2], ts[2][2];
    wg_heads(mn, mh);
    wg_p_sums(sv, mh, kvs_sm() + ring<W>::half(0, tile, qk_half), 2 * warp, ts);
    wg_put_heads(red_sum(), NWARP, warp, ts, g == 0);
    return;
  }
  if (qkw) {
    float ps[2] = {0.0f, 0.0f};
#pragma unroll
    for (int nt = 0; nt < 2; nt++) {
      float e[4];
#pragma unroll
      for (int k = 0; k < 4; k++) e[k] = ex2(sv[nt][k] - mn[k >> 1]);
      ps[0] += e[0] + e[1];
      ps[1] += e[2] + e[3];
      const int col = 16 * warp + 8 * nt + 2 * j;
      *(uint32_t *)(pt + g * PS + col) = mlr__f16x2(e[0], e[1]);
      *(uint32_t *)(pt + (g + 8) * PS + col) = mlr__f16x2(e[2], e[3]);
    }
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
      ps[rr] += MLR_SHFL_XOR(ps[rr], 1);
      ps[rr] += MLR_SHFL_XOR(ps[rr], 2);
      if (j == 0) red_sum()[(g + 8 * rr) * NWARP + warp] = ps[rr];
    }
  }
}
/* after a barrier: red_sum() written */
template <int FNUZ, int W, int WG>
__device__ __forceinline__ void attn_blk<FNUZ, W, WG>::softmax2b() {
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    float sum = 0.0f, x[NQW];
    red_row(red_sum(), g + 8 * rr, x);
#pragma unroll
    for (int w = 0; w < NQW; w++) sum += x[w]; /* warp order: the recipe's warp16 */
    l[rr] = l[rr] * alpha[rr] + sum;
    m[rr] = mn[rr];
  }
}

/* Software pipeline: tile 0's logits and softmax first; then step i: (1) tile i+1's logits
 * interleaved in the source with the first half of tile i's PV (independent mma streams and
 * conversions), tile i+1's row maxima; barrier (b); (2) tile i+1's softmax (its P into the other P
 * buffer) with the second half of tile i's PV, which hides the softmax's chain of shuffles,
 * shared-memory round trips and exp2 (alone, every warp would wait on it); barrier (c); the row
 * sums, and tile i+3's copies into tile i's slots. The same operations as one tile at a time, in
 * the same order for each accumulator: the results are bit for bit those of the unpipelined loop.
 * Barriers: (a) tile i+1 landed and P(i) written; (b) the row maxima written; (c) every warp's
 * PV(i) done (tile i's slots free) and the row sums written. step1: (1), tile + 1 < ntiles. */
template <int FNUZ, int W, int WG>
template <int FIX>
__device__ __forceinline__ void attn_blk<FNUZ, W, WG>::step1(int tile) {
  pv_scale();
  if constexpr (WG) { /* tile + 1's logits run on the unit while the first half of tile's PV issues
                       * (its first step while the fragments load: the chain's start waits for all
                       * of them) */
    wg_load(tile + 1);
    pv_step<FIX>(tile, 0);
    wg_mma(sacc, ka, qdesc);
#pragma unroll
    for (int kb = 1; kb < NKV / 2; kb++) pv_step<FIX>(tile, kb);
    wg_wait(sacc);
    return;
  }
  uint32_t sp = 0;
  const uint32_t qb = ring<W>::half(kv_base, tile + 1, qk_half);
  if (qkw) qk_zero();
#pragma unroll
  for (int u = 0; u < NQ4; u++) {
    if (qkw) qk_step<0>(qb, u, sp);
#pragma unroll
    for (int kb = 0; kb < NKV / 2; kb++)
      if ((kb + 1) * NQ4 / (NKV / 2) - 1 == u) pv_step<FIX>(tile, kb);
  }
  if (FNUZ && qkw && __any_sync(0xFFFFFFFFu, sp != 0)) { /* qk_tile's second pass */
    qk<1>(tile + 1);
    if (lane == 0) fix_sm()[(tile + 1) & 1] = 1;
  }
}

/* the pipeline over the split's tiles (step1's comment) */
template <int FNUZ, int W, int WG>
__device__ __forceinline__ void attn_blk<FNUZ, W, WG>::run(const fparams &p) {
  if (ntiles > 0) {
    if (qkw) {
      qk_tile(0);
      softmax1(0);
    }
    __syncthreads();
    softmax2a(0);
    __syncthreads();
    softmax2b();
  }
  load_slot(p, 4);
  load_slot(p, 5);
  for (int tile = 0; tile < ntiles; tile++) {
    /* tile + 1's slots; tile + 2's may be in flight */
    asm volatile("cp.async.wait_group 2;\n" ::: "memory");
    __syncthreads();                              /* (a) */
    const bool fixv = FNUZ && fix_sm()[tile & 1]; /* set by tile's qk_tile before (a) */
    if (tile + 1 < ntiles) {
      if (fixv)
        step1<1>(tile);
      else
        step1<0>(tile);
      if (qkw) softmax1(tile + 1);
      __syncthreads(); /* (b) */
      softmax2a(tile + 1);
      if (fixv)
        pv_steps<1>(tile, NKV / 2);
      else
        pv_steps<0>(tile, NKV / 2);
      __syncthreads(); /* (c) */
      softmax2b();
    } else {
      pv_scale();
      if (fixv)
        pv_steps<1>(tile, 0);
      else
        pv_steps<0>(tile, 0);
      __syncthreads(); /* (c): tile's slots free */
    }
    /* read after (a) above; tile + 2's logits set it after the next (a) */
    if (FNUZ && threadIdx.x == 0) fix_sm()[tile & 1] = 0;
    load_slot(p, 2 * tile + 6);
    load_slot(p, 2 * tile + 7);
  }
}

template <int FNUZ, int W, int WG = 0>
__global__ void __launch_bounds__(NTHR, 1) k_attn(fparams p) {
  uint32_t qk_lane[2], pv_lane[2 * W], qa[NKB][4], wk_lane[2], ka[NKB / 2][4];
  float m[2], l[2], alpha[2], acc[2][2][2][4], sacc[2][4], sv[2][4], mn[2];
  attn_blk<FNUZ, W, WG> b(qk_lane, pv_lane, qa, m, l, alpha, acc, sacc, wk_lane, ka, sv, mn);
  if (!b.begin(p)) return;
  b.setup(p);
  b.prologue(p);
  b.run(p);
  griddep_launch_dependents(); /* k_merge may start (it waits for this grid to end before reading)
                                */
  /* the split's result (every warp holds the same l and m) */
  finish_split<W, 2>(p, sm, b.acc, b.m, b.l, b.t, b.s, b.ti, 64 * b.warp, b.warp == 0 && b.j == 0);
}

} // namespace

akernel attn_kernel_plain(const fparams &p) {
  if (p.wg) return {k_attn<0, 1, 1>, "k_attn_wg"};
  return {p.kvw == 2 ? k_attn<0, 2> : p.fnuz ? k_attn<1, 1> : k_attn<0, 1>, "k_attn"};
}

} // namespace mlr_fast
