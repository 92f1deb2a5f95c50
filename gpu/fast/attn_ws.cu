/* attn_ws.cu: k_attn_ws, the fast kernel's warp-specialised attention kernel (NVIDIA sm_90), for
 * splits of WS_MIN_TILES tiles or more (and every split of the wgmma recipe): the same operations
 * in the same order as k_attn (attn.cu), so the same recipe, bit for bit; the work is divided
 * otherwise (below): on long splits the logit and PV warps overlap, on short ones each warp's
 * longer straight-line code (fetched by every warp) costs more than the overlap gains. */
#include "fast_attn.cuh"
#include "fast_host.cuh"

namespace mlr_fast {
namespace {

extern __shared__ __align__(16) uint8_t sm[]; /* the dynamic shared memory (SMEM, SMEM_WG) */

/* the named barriers between the logit and the PV warps (bar_sync, bar_arrive: fast_sm90.cuh); a
 * tile's copies are tracked by mbarriers */
enum {
  BAR_QK = 1,
  BAR_PV = 2,
  BAR_FULL = 3 /* +buf: P(i) written */,
  BAR_EMPTY = 5 /* +buf: PV(i) done */
};
/* W: bytes a KV value (1: fp8 codes, 2: bf16 codes). With bf16 KV a tile is 64 tokens (the
 * recipes' softmax.block = 64: the same 73,728 bytes as 128 fp8 rows, so the ring is unchanged).
 * Warps 0..3 compute logits and the softmax (tokens TT/4 w .. of each tile: 32 fp8, 16 bf16),
 * warps 4..7 the PV (output columns 128 (w - 4) ..) and the KV copies: the two kinds run on
 * different tiles at once (logits of tile i+1 with the PV of tile i), so each SM sub-partition
 * holds one warp of each and the hardware interleaves a logit warp's dependent mma chains with a
 * PV warp's independent ones (with 8 warps doing both, ptxas puts the logits' chains first and the
 * warps stall on them). K and V are ldmatrix'd, fp8 rounded to fp16 operands in registers (exact);
 * bf16 likewise in their natural k order. */
/* WG = 1 (recipe fast-wgmma-a8w8; fp8 Q, OCP e4m3 KV): the logit warps run the logits on wgmma's
 * fp8 unit (fast_wgmma.cuh: a tile is two chains of 64 tokens, each logit warp holding 16 tokens of
 * each), which leaves them little to do, so 8 PV warps (64 output columns each, k_attn's share; 12
 * warps a block) share the PV; P goes into each tile's rope columns (wg_p_chunk). */
/* LIN (the launch's choice for unpaged KV, LIN_LO and LIN_HI): the tiles' rows copied as
 * contiguous chunks instead of four threads a row, by copy_lin (LIN = 1: the wgmma kernel, splits
 * of LIN_LO to LIN_HI tiles) or lin_copy (LIN = 2: longer splits). */
/* ws_blk: one block of k_attn_ws, the state both kinds of warps share and the KV copies; ws_qk the
 * logit warps' part, pv_warps the PV warps'. Each is inlined into the kernel: the operations and
 * their order are the kernel's. The arrays are the kernel's own locals, held by reference: each
 * must stay an object of its own, since an array indexed by a loop counter (until the loop is
 * unrolled) would keep a struct holding it in memory as a whole, and the kernel would be compiled
 * otherwise. */
template <int FNUZ, int W, int WG, int LIN>
struct ws_blk {
  static_assert(!WG || (W == 1 && !FNUZ), "the wgmma logits multiply OCP e4m3 codes");
  static constexpr int NPV = WG ? 8 : 4;     /* PV warps */
  static constexpr int NTH = 32 * (4 + NPV); /* the block's threads */
  static constexpr int PVC = DV / NPV;       /* a PV warp's output columns */
  static constexpr int NA =
      PVC / 32; /* its accumulators' groups of 32 columns (bf16: pairs of 16) */
  static constexpr int TT = TILE / W; /* a tile's tokens */
  static constexpr int SR = SLOT / W; /* a slot's rows */
  static constexpr int RB = QK * W;   /* a row's bytes */
  static constexpr int NT = TT / 32;  /* a logit warp's n-tiles of 8 tokens: 4 (fp8) or 2 (bf16) */
  static constexpr int NG = TT / 16; /* a tile's groups of 16 tokens (the row sums' warp16 order) */
  static constexpr int TPR = 4 * W;  /* threads a row when a slot loads */
  static constexpr int RPP = 128 / TPR; /* rows a pass of the 128 loading threads */
  static constexpr int PS = TT + 8;     /* P's row in halves (4 banks apart) */
  static constexpr int NKV = TT / 16;   /* a tile's PV steps (16 tokens each) */
  /* a lone split's lse by the logit warps (with lin_copy, splits of more than LIN_HI tiles, ptxas
   * would spend many more registers on that kernel for it) */
  static constexpr bool LSE_QK = WG && LIN != 2;
  static_assert(2 * RPP == SR && (RB / 16) % TPR == 0 && SM_FLAG >= 320,
                "a slot's rows split evenly over two passes of the loading threads");
  static constexpr int RED = WG ? SM_KV + SM_Q8 : SM_KV + SM_P;
  struct no_copy {};
  /* LIN = 2: a loading thread's share of lin_copy's chunks */
  using copier = std::conditional_t<LIN == 2, lin_copy<W, TT, 128>, no_copy>;

  /* the shared memory's parts */
  /* [NSLOT][SR][RB] KV codes, chunks swizzled (ring) */
  static __device__ __forceinline__ uint8_t *kvs_sm() { return sm; }
  /* !WG: [2][16][PS] fp16 P, buffer tile & 1 (SM_P1 bytes apart) */
  static __device__ __forceinline__ uint16_t *p_sm() { return (uint16_t *)(sm + SM_KV); }
  /* WG: Q's e4m3 codes, wgmma's B (wg_q8) */
  static __device__ __forceinline__ uint8_t *q8_sm() { return sm + SM_KV; }
  /* [16][4] the logit warps' row maxima, [16][NG] the groups' row sums */
  static __device__ __forceinline__ float *red_max() { return (float *)(sm + RED); }
  static __device__ __forceinline__ float *red_sum() { return red_max() + 16 * 4; }
  static __device__ __forceinline__ uint8_t *fl() { return sm + RED + SM_RED; }
  /* [3] tile i's copies landed (ring position i % 3, phase i / 3) */
  static __device__ __forceinline__ uint64_t *mbar() { return (uint64_t *)fl(); }
  /* [2][16] the softmax's alpha for tile i's PV (buffer i & 1) */
  static __device__ __forceinline__ float *alpha_sm() { return (float *)(fl() + 32); }
  /* [2][4] FNUZ: logit warp w's rows of tile i had a special code */
  static __device__ __forceinline__ int *fix_sm() { return (int *)(fl() + 160); }
  /* [16][2] the final m and l (the logit warps' to the PV warps) */
  static __device__ __forceinline__ float *ml_sm() { return (float *)(fl() + 192); }
  /* Q's staging, in slot 4's space */
  static __device__ __forceinline__ uint16_t *q_sm() {
    return (uint16_t *)(kvs_sm() + 4 * SLOT * QK);
  }

  int t, s; /* the query token and the split */
  int warp, lane, g, j;
  bool qkw;   /* a logit warp; else a PV warp */
  tokinfo ti; /* the token's entry */
  int64_t L, start, end;
  int ntiles;
  int pt, lr, lk;   /* a PV thread's index, its row of a pass and its first chunk (issue_tile) */
  bool loader;      /* the first 4 PV warps copy */
  int32_t base_b;   /* kv_indptr of the token's batch */
  uint32_t kv_base; /* the ring's shared address */
  /* the next tile's rows (kv_ref: put together at the copy's issue; kept where they load, not
   * copied, since a copy waits for the load as a use does): slot half h, pass q at 2h + q */
  kvref (&nrow)[4];
  copier &lc;

  __device__ __forceinline__ ws_blk(kvref (&nrow_)[4], copier &lc_) : nrow(nrow_), lc(lc_) {}
  __device__ __forceinline__ bool begin(const fparams &p);
  __device__ __forceinline__ void rows_of(const fparams &p, int tile, kvref (&r)[4]);
  __device__ __forceinline__ void issue_tile(const fparams &p, int tile);
  __device__ __forceinline__ void wait_tile(int tile);
  __device__ __forceinline__ void start_copies(const fparams &p);
  __device__ __forceinline__ void stage_q(const fparams &p);
};

/* Q (16 x 576 codes, rows past H zero-filled) is staged in slot 4's space (free until tile 2 loads,
 * after Q's fragments are in registers), rows QSTR halves apart. Q made operands here (p.qin: bf16
 * codes, static e4m3) depends on no kernel and its address on no table, so it loads first, before
 * the token's entry (a round trip); k_qprep's codes may still be being written (programmatic
 * dependent launch), so then tile 0's rows go first. false: this batch has fewer splits (uniform
 * over the block), and the block only takes part in its cluster's merge. */
template <int FNUZ, int W, int WG, int LIN>
__device__ __forceinline__ bool ws_blk<FNUZ, W, WG, LIN>::begin(const fparams &p) {
  t = blk_token(p);
  s = blockIdx.y;
  warp = threadIdx.x >> 5;
  lane = threadIdx.x & 31;
  g = lane >> 2;
  j = lane & 3;
  qkw = warp < 4;
  if (p.qin) q_load(p, q_sm(), t);
  if (threadIdx.x == 0)
    for (int k = 0; k < 3; k++)
      mbar_init(smem_addr(mbar() + k), 128); /* the 128 loading threads' arrivals */
  ti = tok_of(p, t);
  if (s >= ti.nsplit) {
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    if (p.cl) cluster_merge(p, (float *)sm, t, ti.nsplit);
    return false;
  }
  L = ti.L;
  start = (int64_t)s * ti.slen;
  end = start + ti.slen < L ? start + ti.slen : L;
  ntiles = end > start ? (int)((end - start + TT - 1) / TT) : 0;
  __syncthreads(); /* the mbarriers initialized */
  return true;
}

/* ---- the KV copies, by the PV warps (thread pt = threadIdx.x - 128): a ring of 6 slots = 3 tiles,
 * tile i in slots 2i, 2i+1 (mod 6), its copies tracked by mbar[i % 3]. Tile i+3 is issued when
 * every PV warp has finished tile i's PV. TPR threads a row, two passes of RPP rows a slot: thread
 * TPR r + k copies chunks k, k+TPR, .. of rows r and r + RPP (the swizzle keeps chunks within
 * their group of TPR). Rows past the split's end are zero-filled (their logits are masked and their
 * zero V adds 0 * p = 0). A tile's page table entries are loaded a tile ahead and used only at its
 * copies' issue (kv_ref), so that load's latency hides. ---- */
template <int FNUZ, int W, int WG, int LIN>
__device__ __forceinline__ void ws_blk<FNUZ, W, WG, LIN>::rows_of(const fparams &p, int tile,
                                                                  kvref (&r)[4]) {
#pragma unroll
  for (int u = 0; u < 4; u++) {
    const int64_t pos =
        ring<W>::pos(start, 2 * tile + (u >> 1), lr) + RPP * (u & 1); /* row lr + RPP (u & 1) */
    r[u] = kv_ref(p, base_b, pos, tile < ntiles && pos < end);
  }
}
/* tiles in order 0, 1, 2, ..: nrow holds this one's rows */
template <int FNUZ, int W, int WG, int LIN>
__device__ __forceinline__ void ws_blk<FNUZ, W, WG, LIN>::issue_tile(const fparams &p, int tile) {
  if (tile >= ntiles || !loader) return;
  if constexpr (LIN != 0) /* the launch's choice (LIN_LO): unpaged rows as contiguous chunks, the
                             tile's two slots (adjacent in the ring) at once */
    if (!p.kv_indices) {
      const int64_t pos0 = start + (int64_t)tile * TT;
      const uint8_t *src0 = p.kv + (base_b + pos0) * RB;
      const uint32_t dst0 = ring<W>::slot(smem_addr(kvs_sm()), 2 * tile);
      if constexpr (LIN == 1)
        copy_lin<W, TT, 128>(src0, p.kv, dst0, end - pos0, pt);
      else
        lc(src0, p.kv, dst0, end - pos0, pt);
      cp_mbar_arrive(smem_addr(mbar() + tile % 3));
      return;
    }
#pragma unroll
  for (int u = 0; u < 4; u++) {
    const int r = lr + RPP * (u & 1);
    const uint8_t *src = p.kv;
    int bytes = 0;
    const int64_t row = kv_ref_row(p, nrow[u]);
    if (row >= 0) {
      src = p.kv + row * RB + lk * 16;
      bytes = 16;
    }
    const uint32_t dst = ring<W>::at(kvs_sm(), 2 * tile + (u >> 1), r, lk);
#pragma unroll
    for (int k = 0; k < RB / 16 / TPR; k++)
      cp_async16(dst + 16 * TPR * k, src + (bytes ? 16 * TPR * k : 0), bytes);
  }
  cp_mbar_arrive(smem_addr(mbar() + tile % 3));
  rows_of(p, tile + 1, nrow);
}
template <int FNUZ, int W, int WG, int LIN>
__device__ __forceinline__ void ws_blk<FNUZ, W, WG, LIN>::wait_tile(int tile) {
  mbar_wait(smem_addr(mbar() + tile % 3), (uint32_t)(tile / 3) & 1u);
}
/* the loaders' state, tile 0's copies */
template <int FNUZ, int W, int WG, int LIN>
__device__ __forceinline__ void ws_blk<FNUZ, W, WG, LIN>::start_copies(const fparams &p) {
  pt = threadIdx.x - 128;
  lr = (pt & 127) / TPR;
  lk = (pt & 127) % TPR;
  loader = !qkw && pt < 128;
  base_b = ti.base;
  if constexpr (LIN == 2)
    if (loader) lc.init(pt); /* the loaders' table only: the logit warps' start path skips it */
  if (loader) {
    rows_of(p, 0, nrow);
    issue_tile(p, 0);
  }
  /* The ldmatrix addresses: tile i's half h (rows SR h ..) is slot (2i + h) % NSLOT; within a
   * slot, an address is a lane constant plus a compile-time offset, because the swizzle xors a
   * row's low 3 bits (which are the lane's: every ldmatrix row is 8 r + (lane & 7)) into the low
   * 2 (fp8) or 3 (bf16) bits of the chunk index, whose higher bits are the loop's (worked out once
   * a tile, the addresses would take a quarter of the loop's instructions). ring<W> is the
   * definition. */
  kv_base = smem_addr(kvs_sm());
}
/* Q staged: p.qin, Q's group; else (k_qprep's codes) after the grid dependency; then Q's operands
 * (read after the barrier (q) of each kind of warp) */
template <int FNUZ, int W, int WG, int LIN>
__device__ __forceinline__ void ws_blk<FNUZ, W, WG, LIN>::stage_q(const fparams &p) {
  griddep_wait(); /* nothing read before it comes from the kernel before */
  if (!p.qin) q_load(p, q_sm(), t);
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  if constexpr (WG)
    wg_q8(p, q_sm(), q8_sm(), s); /* read by wgmma after (q) below */
  else {
    q_operands<W, W == 1>(p, q_sm(), s);
    __syncthreads();
  }
}

/* ================= logit warps: tokens TT/4 w + 8 nt + g of each tile ================= */
template <int FNUZ, int W, int WG, int LIN>
struct ws_qk {
  using B = ws_blk<FNUZ, W, WG, LIN>;
  static constexpr int TT = B::TT, SR = B::SR, NT = B::NT, NG = B::NG;
  B &b;
  float c;                    /* the logit scale */
  int qk_half;                /* the slot half of this warp's rows */
  uint64_t qdesc;             /* WG: Q's descriptor */
  uint32_t (&qa)[NKB][4];     /* !WG: Q's A fragments */
  uint32_t (&qk_lane)[2];     /* the K rows' ldmatrix addresses, the lane's part */
  float (&sacc)[NT][4];       /* a tile's logits */
  float (&sv)[NT][4];         /* masked */
  uint32_t (&wk_lane)[2];     /* WG: k_attn's wk_lane, rows 16 w .. of each slot half */
  uint32_t (&ka)[NKB / 2][4]; /* WG: a chain's A fragments */
  float (&wacc)[2][2][4];     /* WG: the two chains' D */
  float (&wsv)[2][2][4];      /* WG: masked */
  float (&m)[2], (&l)[2];     /* rows g and g+8 */

  __device__ __forceinline__ ws_qk(B &b_, uint32_t (&qa_)[NKB][4], uint32_t (&qk_lane_)[2],
                                   float (&sacc_)[NT][4], float (&sv_)[NT][4],
                                   uint32_t (&wk_lane_)[2], uint32_t (&ka_)[NKB / 2][4],
                                   float (&wacc_)[2][2][4], float (&wsv_)[2][2][4], float (&m_)[2],
                                   float (&l_)[2])
      : b(b_), qa(qa_), qk_lane(qk_lane_), sacc(sacc_), sv(sv_), wk_lane(wk_lane_), ka(ka_),
        wacc(wacc_), wsv(wsv_), m(m_), l(l_) {}
  __device__ __forceinline__ void init(const fparams &p);
  template <int FIX>
  __device__ __forceinline__ uint32_t qk(int tile);
  /* the NG groups' values of row `row` (red_sum is [16][NG], red_max [16][4]) */
  static __device__ __forceinline__ float4 red_row4(const float *red, int stride, int row, int w0) {
    return *(const float4 *)(red + row * stride + w0);
  }
  __device__ __forceinline__ int logits(int tile, int n);
  __device__ __forceinline__ void maxima(int n);
  __device__ __forceinline__ void softmax(int tile, float (&mn)[2], float (&alpha)[2]);
  __device__ __forceinline__ void sums(const float (&mn)[2], const float (&alpha)[2]);
  __device__ __forceinline__ void tile(int tile);
  __device__ __forceinline__ void finish(const fparams &p);
};

/* Q's fragments and the logit scale, the lane parts of the K rows' addresses */
template <int FNUZ, int W, int WG, int LIN>
__device__ __forceinline__ void ws_qk<FNUZ, W, WG, LIN>::init(const fparams &p) {
  const float qs = q_scale(p);
  if constexpr (!WG) q_frags(B::q_sm(), b.lane, qa);
  __syncthreads(); /* (q) Q's staging read: slots 4 and 5 are free (the PV warps load tiles 1, 2) */
  /* logit scale: fp32(log2 e / 24) [* q_scale] * kv_scale, left to right (the emulator's c) */
  c = p.c0;
  if (p.qfp8) c = c * qs;
  c = c * p.kvs;
  /* row TT/4 w + 8 nt + (lane & 7) (half (TT/4 w) / SR), chunk 4 q4 + (lane >> 3):
   * ring::chunk = qk_lane[q4 % 2] + 8 nt RB + 64 (q4 - q4 % 2) */
  qk_half = TT / 4 * b.warp / SR;
  for (int e = 0; e < 2; e++)
    qk_lane[e] = ring<W>::chunk(TT / 4 * b.warp + (b.lane & 7), 4 * e + (b.lane >> 3));
  wg_k_lanes(b.warp, b.lane, wk_lane);
  qdesc = wg_desc(smem_addr(B::q8_sm()));
}
/* a tile's logits: NT independent chains over the 36 column blocks in order */
template <int FNUZ, int W, int WG, int LIN>
template <int FIX>
__device__ __forceinline__ uint32_t ws_qk<FNUZ, W, WG, LIN>::qk(int tile) {
  constexpr int NQ4 = NKB / (4 / W); /* a tile's logit steps: 4 (fp8) or 2 (bf16) blocks each */
  uint32_t sp = 0;
  const uint32_t qb = ring<W>::half(b.kv_base, tile, qk_half);
#pragma unroll
  for (int nt = 0; nt < NT; nt++)
#pragma unroll
    for (int k = 0; k < 4; k++) sacc[nt][k] = 0.0f;
#pragma unroll
  for (int q4 = 0; q4 < NQ4; q4++) logit_step<FNUZ, FIX, W, NT>(qb, q4, qk_lane, qa, sacc, sp);
  return sp;
}
/* a tile's logits (n: its tokens before the split's end); WG: also its masked logits and the
 * maxima. FNUZ: a tile whose rows hold a special code has its logits computed again with the codes
 * replaced (a warp's own rows: its branch is uniform), and is flagged for its PV: 1 returned */
template <int FNUZ, int W, int WG, int LIN>
__device__ __forceinline__ int ws_qk<FNUZ, W, WG, LIN>::logits(int tile, int n) {
  int fix = 0;
  if constexpr (WG) {
    /* chain ch: tokens 64 ch + 16 w + g (+ 8) of the transposed D; (1) masked logits, the maxima
     * of the lane's heads over the warp's 32 tokens */
#pragma unroll
    for (int ch = 0; ch < 2; ch++) {
      wg_frags(ring<W>::half(b.kv_base, tile, ch), wk_lane, ka);
      wg_mma(wacc[ch], ka, qdesc);
      wg_wait(wacc[ch]);
    }
    float mh[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}};
#pragma unroll
    for (int ch = 0; ch < 2; ch++) {
#pragma unroll
      for (int nh = 0; nh < 2; nh++)
#pragma unroll
        for (int k = 0; k < 4; k++)
          wsv[ch][nh][k] =
              64 * ch + 16 * b.warp + b.g + 8 * (k >> 1) < n ? wacc[ch][nh][k] * c : -INFINITY;
      wg_fold_max(wsv[ch], mh);
    }
    wg_allmax(mh);
    wg_put_heads(B::red_max(), 4, b.warp, mh, b.g == 0);
  } else {
    const uint32_t sp = qk<0>(tile);
    if (FNUZ && __any_sync(0xFFFFFFFFu, sp != 0)) {
      qk<1>(tile);
      fix = 1;
    }
  }
  return fix;
}
/* !WG: (1) masked logits, this warp's row maxima */
template <int FNUZ, int W, int WG, int LIN>
__device__ __forceinline__ void ws_qk<FNUZ, W, WG, LIN>::maxima(int n) {
  float mx[2] = {-INFINITY, -INFINITY};
  if constexpr (!WG) {
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int k = 0; k < 4; k++) {
        sv[nt][k] = TT / 4 * b.warp + 8 * nt + 2 * b.j + (k & 1) < n ? sacc[nt][k] * c : -INFINITY;
        mx[k >> 1] = fmaxf(mx[k >> 1], sv[nt][k]);
      }
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
      mx[rr] = fmaxf(mx[rr], MLR_SHFL_XOR(mx[rr], 1));
      mx[rr] = fmaxf(mx[rr], MLR_SHFL_XOR(mx[rr], 2));
      if (b.j == 0) B::red_max()[(b.g + 8 * rr) * 4 + b.warp] = mx[rr];
    }
  }
}
/* (2) alpha, P, the row sums of each group of 16 tokens in the recipe's warp16 order */
template <int FNUZ, int W, int WG, int LIN>
__device__ __forceinline__ void ws_qk<FNUZ, W, WG, LIN>::softmax(int tile, float (&mn)[2],
                                                                 float (&alpha)[2]) {
  const int buf = tile & 1;
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const float4 x = red_row4(B::red_max(), 4, b.g + 8 * rr, 0);
    const float v = fmaxf(fmaxf(fmaxf(fmaxf(m[rr], x.x), x.y), x.z), x.w);
    mn[rr] = v;
    alpha[rr] = ex2(m[rr] - v);
  }
  uint16_t *pt16 = B::p_sm() + buf * (SM_P1 / 2);
  if constexpr (WG) { /* P into the tile's rope columns; group 4 ch + w's sums (its 16 tokens) */
    float mh[2][2], ts[2][2];
    wg_heads(mn, mh);
#pragma unroll
    for (int ch = 0; ch < 2; ch++) {
      wg_p_sums(wsv[ch], mh, B::kvs_sm() + ring<W>::half(0, tile, ch), 2 * b.warp, ts);
      wg_put_heads(B::red_sum(), NG, 4 * ch + b.warp, ts, b.g == 0);
    }
  } else
#pragma unroll
    for (int gi = 0; gi < NT / 2; gi++) { /* this warp's groups: 2 w + gi (fp8) or w (bf16) */
      float ps[2] = {0.0f, 0.0f};
#pragma unroll
      for (int h2 = 0; h2 < 2; h2++) {
        const int nt = 2 * gi + h2;
        float e[4];
#pragma unroll
        for (int k = 0; k < 4; k++) e[k] = ex2(sv[nt][k] - mn[k >> 1]);
        ps[0] += e[0] + e[1];
        ps[1] += e[2] + e[3];
        const int col = TT / 4 * b.warp + 8 * nt + 2 * b.j;
        *(uint32_t *)(pt16 + b.g * B::PS + col) = mlr__f16x2(e[0], e[1]);
        *(uint32_t *)(pt16 + (b.g + 8) * B::PS + col) = mlr__f16x2(e[2], e[3]);
      }
#pragma unroll
      for (int rr = 0; rr < 2; rr++) {
        ps[rr] += MLR_SHFL_XOR(ps[rr], 1);
        ps[rr] += MLR_SHFL_XOR(ps[rr], 2);
        if (b.j == 0) B::red_sum()[(b.g + 8 * rr) * NG + NT / 2 * b.warp + gi] = ps[rr];
      }
    }
}
/* after the barrier: the row sums in group order, l and m */
template <int FNUZ, int W, int WG, int LIN>
__device__ __forceinline__ void ws_qk<FNUZ, W, WG, LIN>::sums(const float (&mn)[2],
                                                              const float (&alpha)[2]) {
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < NG; w += 4) {
      const float4 x = red_row4(B::red_sum(), NG, b.g + 8 * rr, w);
      /* group order: the recipe's warp16 */
      sum += x.x;
      sum += x.y;
      sum += x.z;
      sum += x.w;
    }
    l[rr] = l[rr] * alpha[rr] + sum;
    m[rr] = mn[rr];
  }
}
/* one tile: its logits, the softmax, and P, alpha and the flag handed to the PV warps */
template <int FNUZ, int W, int WG, int LIN>
__device__ __forceinline__ void ws_qk<FNUZ, W, WG, LIN>::tile(int tile) {
  const int buf = tile & 1;
  b.wait_tile(tile);
  const int64_t left = b.end - (b.start + (int64_t)tile * TT);
  const int n = left < TT ? (int)left : TT; /* the tile's tokens before the split's end */
  const int fix = logits(tile, n);
  maxima(n);
  bar_sync(BAR_QK, 128);
  if (tile >= 2)
    bar_sync(BAR_EMPTY + buf, B::NTH); /* PV(tile - 2) done: P, alpha and flag buffer free */
  float mn[2], alpha[2];
  softmax(tile, mn, alpha);
  if (b.warp == 0 && b.j == 0) {
    B::alpha_sm()[buf * 16 + b.g] = alpha[0];
    B::alpha_sm()[buf * 16 + b.g + 8] = alpha[1];
  }
  if (FNUZ && b.lane == 0) B::fix_sm()[buf * 4 + b.warp] = fix;
  bar_sync(BAR_QK, 128);
  sums(mn, alpha);
  bar_arrive(BAR_FULL + buf, B::NTH); /* P(tile), alpha, flag written */
}
/* the final m and l to the PV warps; a lone split's lse; the cluster's merge */
template <int FNUZ, int W, int WG, int LIN>
__device__ __forceinline__ void ws_qk<FNUZ, W, WG, LIN>::finish(const fparams &p) {
  if (b.warp == 0 && b.j == 0) {
    B::ml_sm()[2 * b.g] = m[0];
    B::ml_sm()[2 * b.g + 1] = l[0];
    B::ml_sm()[2 * (b.g + 8)] = m[1];
    B::ml_sm()[2 * (b.g + 8) + 1] = l[1];
  }
  __syncthreads(); /* (e) the final m and l for the PV warps */
  /* a lone split's lse, here while the PV warps store its outputs (its binary64 log would come at
   * the end of their path) */
  if constexpr (B::LSE_QK)
    if (b.ti.nsplit == 1 && b.warp == 0 && b.j == 0)
#pragma unroll
      for (int rr = 0; rr < 2; rr++)
        if (b.g + 8 * rr < grp_heads(p)) {
          bool live;
          float wv;
          const float sc = direct_sc(p, m[rr], l[rr], live, wv);
          store_lone_lse(p, head_row(p, b.t, b.g + 8 * rr), m[rr], sc, live);
        }
  if (p.cl) cluster_merge(p, (float *)sm, b.t, b.ti.nsplit);
}
template <int FNUZ, int W, int WG, int LIN>
__device__ __forceinline__ void logit_warps(const fparams &p, ws_blk<FNUZ, W, WG, LIN> &b) {
  using B = ws_blk<FNUZ, W, WG, LIN>;
  uint32_t qa[NKB][4], qk_lane[2], wk_lane[2], ka[NKB / 2][4];
  float sacc[B::NT][4], sv[B::NT][4], wacc[2][2][4], wsv[2][2][4];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  ws_qk<FNUZ, W, WG, LIN> q(b, qa, qk_lane, sacc, sv, wk_lane, ka, wacc, wsv, m, l);
  q.init(p);
  for (int tile = 0; tile < b.ntiles; tile++) q.tile(tile);
  q.finish(p);
}

/* ================= PV warps: output columns PVC pw .. PVC pw + PVC - 1 ================= */
template <int FNUZ, int W, int WG, int LIN>
__device__ __forceinline__ void pv_warps(const fparams &p, ws_blk<FNUZ, W, WG, LIN> &b) {
  using B = ws_blk<FNUZ, W, WG, LIN>;
  constexpr int NA = B::NA, PVC = B::PVC, SR = B::SR, RB = B::RB, NKV = B::NKV, NTH = B::NTH,
                NPV = B::NPV;
  const int pw = b.warp - 4, lane = b.lane, g = b.g, j = b.j;
  __syncthreads(); /* (q) */
  /* tile 1 issued when tile 0 has landed: issued with it, they would share the bandwidth and tile 0
   * land late */
  if (b.ntiles > 0) b.wait_tile(0);
#pragma unroll 1
  for (int i = 1; i <= 2; i++)
    b.issue_tile(p, i); /* one copy of issue_tile's code, not two (a block's start fetches it) */
  /* the accumulators, 4 NA n-tiles of 8 columns: fp8 [32-column group a][16-column half][even/odd],
   * bf16 n-tile 4a + 2 h2 + e = columns PVC pw + 8 (4a + 2 h2 + e) .. (the stores after the loop)
   */
  float acc[NA][2][2][4] = {};
  /* row 16 kb + (lane & 7) + 8 ((lane >> 3) & 1) (half 16 kb / SR), chunk (PVC / 16 W) pw + 2 a +
   * (lane >> 4) (a < NA W): ring::chunk = pv_lane[a] + 16 (kb % (SR / 16)) RB */
  uint32_t pv_lane[NA * W];
  for (int a = 0; a < NA * W; a++)
    pv_lane[a] =
        ring<W>::chunk((lane & 7) + 8 * ((lane >> 3) & 1), PVC / 16 * W * pw + 2 * a + (lane >> 4));
  const uint32_t p_lane =
      smem_addr(B::p_sm() + ((lane & 7) + 8 * ((lane >> 3) & 1)) * B::PS + 8 * (lane >> 4));
  const uint32_t wp_lane = wg_p_lane(lane); /* WG: P in the tile's rope columns */
  auto pv = [&](int tile, auto fixc) {
    constexpr int FIX = decltype(fixc)::value;
#pragma unroll
    for (int kb = 0; kb < NKV; kb++) {
      uint32_t pa[4]; /* P rows 0..15, tokens 16kb.. : the natural k order */
      const uint32_t vrow = ring<W>::half(b.kv_base, tile, 16 * kb / SR) +
                            16 * (kb % (SR / 16)) * RB; /* rows 16 kb .. of the tile */
      if constexpr (WG)
        ldsm4(vrow + wp_lane, pa[0], pa[1], pa[2], pa[3]);
      else
        ldsm4(p_lane + (tile & 1) * SM_P1 + 32 * kb, pa[0], pa[1], pa[2], pa[3]);
      pv_products<FIX, W, NA>(vrow, pa, pv_lane, acc);
    }
  };
  for (int tile = 0; tile < b.ntiles; tile++) {
    const int buf = tile & 1;
    bar_sync(BAR_FULL + buf, NTH); /* P(tile), alpha, flag */
    /* complete (the logit warps waited for it): the copies' visibility to this thread */
    b.wait_tile(tile);
    const float al[2] = {B::alpha_sm()[buf * 16 + g], B::alpha_sm()[buf * 16 + g + 8]};
    /* acc * alpha; alpha = 1 for all 16 rows (no row's max moved: most tiles) changes no bit */
    if (!__all_sync(0xFFFFFFFFu, al[0] == 1.0f && al[1] == 1.0f)) {
#pragma unroll
      for (int i = 0; i < 16 * NA; i++) { /* c0, c1 are row g's, c2, c3 row g+8's */
        float &v = (&acc[0][0][0][0])[i];
        v = v * al[(i >> 1) & 1];
      }
    }
    if (FNUZ && (B::fix_sm()[buf * 4] | B::fix_sm()[buf * 4 + 1] | B::fix_sm()[buf * 4 + 2] |
                 B::fix_sm()[buf * 4 + 3]))
      pv(tile, std::integral_constant<int, 1>());
    else
      pv(tile, std::integral_constant<int, 0>());
    if (tile + 2 < b.ntiles) bar_arrive(BAR_EMPTY + buf, NTH); /* P buffer free for tile + 2 */
    bar_sync(BAR_PV, 32 * NPV); /* every PV warp done with tile's slots */
    b.issue_tile(p, tile + 3);
  }
  griddep_launch_dependents(); /* k_merge may start (it waits for this grid to end before reading)
                                */
  __syncthreads();             /* (e) */
  const float mm[2] = {B::ml_sm()[2 * g], B::ml_sm()[2 * (g + 8)]},
              ll[2] = {B::ml_sm()[2 * g + 1], B::ml_sm()[2 * (g + 8) + 1]};
  finish_split<W, NA>(p, sm, acc, mm, ll, b.t, b.s, b.ti, PVC * pw, pw == 0 && j == 0, !B::LSE_QK);
}

template <int FNUZ, int W, int WG = 0, int LIN = 0>
__global__ void __launch_bounds__(WG ? NTHR_WSWG : NTHR, 1) k_attn_ws(fparams p) {
  using B = ws_blk<FNUZ, W, WG, LIN>;
  kvref nrow[4];
  typename B::copier lc;
  B b(nrow, lc);
  if (!b.begin(p)) return;
  b.start_copies(p);
  b.stage_q(p);
  if (b.qkw)
    logit_warps(p, b);
  else
    pv_warps(p, b);
}

} // namespace

akernel attn_kernel_ws(const fparams &p) {
  if (p.wg)
    return p.lin == 1   ? akernel{k_attn_ws<0, 1, 1, 1>, "k_attn_ws_wg(copy_lin)"}
           : p.lin == 2 ? akernel{k_attn_ws<0, 1, 1, 2>, "k_attn_ws_wg(lin_copy)"}
                        : akernel{k_attn_ws<0, 1, 1>, "k_attn_ws_wg"};
  if (p.lin == 2)
    return {p.kvw == 2 ? k_attn_ws<0, 2, 0, 2>
            : p.fnuz   ? k_attn_ws<1, 1, 0, 2>
                       : k_attn_ws<0, 1, 0, 2>,
            "k_attn_ws(lin_copy)"};
  return {p.kvw == 2 ? k_attn_ws<0, 2> : p.fnuz ? k_attn_ws<1, 1> : k_attn_ws<0, 1>, "k_attn_ws"};
}

} // namespace mlr_fast
