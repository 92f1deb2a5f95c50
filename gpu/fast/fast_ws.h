/* fast_ws.h: the fast kernel's warp-specialized variant (NVIDIA sm_90), for splits of many tiles
 * (included by fast.cu, inside its anonymous namespace; mlr_gpu_fast_launch picks it). The same
 * operations in the same order as k_attn, so the same recipe, bit for bit; the work is divided
 * otherwise (below). Measured on the H200 (BENCHMARKS.md, session 8): bs=256, kv=8192 (64 tiles a
 * block) 344 -> 319 us; at 16 tiles a block and fewer it is slower (bs=4, kv=1024: 12.9 -> 19.4
 * us), each warp running twice the straight-line code once, so fetching twice the instructions
 * (the L2 flushed: no_instruction stalls, 6.9 a issued instruction against 4.7). */
#ifndef MLR_FAST_WS_H
#define MLR_FAST_WS_H

/* named barriers (producer/consumer between the logit and the PV warps) and the mbarriers that
 * track a tile's copies (cp.async.mbarrier.arrive.noinc: the barrier's phase completes when every
 * loading thread's copies have landed, whoever waits) */
enum {
  BAR_QK = 1,
  BAR_PV = 2,
  BAR_FULL = 3 /* +buf: P(i) written */,
  BAR_EMPTY = 5 /* +buf: PV(i) done */
};
__device__ __forceinline__ void bar_sync(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int n) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void mbar_init(uint32_t a, int n) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(a), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_mbar_arrive(uint32_t a) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(a) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t a, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile("{\n .reg .pred P;\n mbarrier.try_wait.parity.shared.b64 P, [%1], %2;\n selp.u32 "
                 "%0, 1, 0, P;\n}\n"
                 : "=r"(done)
                 : "r"(a), "r"(parity)
                 : "memory");
  } while (!done);
}

/* W: bytes a KV value (1: fp8 codes, 2: bf16 codes). With bf16 KV a tile is 64 tokens (the
 * recipes' softmax.block = 64: the same 73,728 bytes as 128 fp8 rows, so the ring is unchanged).
 * Warps 0..3 compute logits and the softmax (tokens TT/4 w .. of each tile: 32 fp8, 16 bf16),
 * warps 4..7 the PV (output columns 128 (w - 4) ..) and the KV copies: the two kinds run on
 * different tiles at once (logits of tile i+1 with the PV of tile i), so each SM sub-partition
 * holds one warp of each and the hardware interleaves a logit warp's dependent mma chains with a
 * PV warp's independent ones (with 8 warps doing both, ptxas put the logits' chains first and the
 * warps stalled on them: a tile took 2.7 us against 2.26 us of memory). K and V are ldmatrix'd,
 * fp8 rounded to fp16 operands in registers (exact); bf16 likewise in their natural k order. */
/* WG = 1 (recipe fast-wgmma-a8w8; fp8 Q, OCP e4m3 KV): the logit warps run the logits on wgmma's
 * fp8 unit (fast.cu's wg_*: a tile is two chains of 64 tokens, each logit warp holding 16 tokens of
 * each), which leaves them little to do, so 8 PV warps (64 output columns each, k_attn's share; 12
 * warps a block) share the PV; P goes into each tile's rope columns (wg_p_chunk). */
/* LIN (the launch's choice for unpaged KV, fast.cu's LIN_LO): the tiles' rows copied as contiguous
 * chunks instead of four threads a row, by copy_lin (LIN = 1: the wgmma kernel, splits of 2 to 16
 * tiles) or lin_copy (LIN = 2: longer splits). */
template <int FNUZ, int W, int WG = 0, int LIN = 0>
__global__ void __launch_bounds__(WG ? NTHR_WSWG : NTHR, 1) k_attn_ws(fparams p) {
  static_assert(!WG || (W == 1 && !FNUZ), "the wgmma logits multiply OCP e4m3 codes");
  constexpr int NPV = WG ? 8 : 4;     /* PV warps */
  constexpr int NTH = 32 * (4 + NPV); /* the block's threads */
  constexpr int PVC = DV / NPV;       /* a PV warp's output columns */
  constexpr int NA =
      PVC / 32; /* its accumulators' groups of 32 columns (fp8; bf16: NA pairs of 16) */
  constexpr int TT = TILE / W;   /* a tile's tokens */
  constexpr int SR = SLOT / W;   /* a slot's rows */
  constexpr int RB = QK * W;     /* a row's bytes */
  constexpr int NT = TT / 32;    /* a logit warp's n-tiles of 8 tokens: 4 (fp8) or 2 (bf16) */
  constexpr int NG = TT / 16;    /* a tile's groups of 16 tokens (the row sums' warp16 order) */
  constexpr int TPR = 4 * W;     /* threads a row when a slot loads */
  constexpr int RPP = 128 / TPR; /* rows a pass of the 128 loading threads */
  constexpr int PS = TT + 8;     /* P's row in halves (4 banks apart) */
  constexpr int NQ4 =
      NKB / (4 / W);           /* a tile's logit steps: 4 (fp8) or 2 (bf16) column blocks each */
  constexpr int NKV = TT / 16; /* a tile's PV steps (16 tokens each) */
  constexpr bool LSE_QK =
      WG && LIN != 2; /* a lone split's lse by the logit warps (with lin_copy, splits of 17 tiles
                         or more, ptxas took that kernel from 134 registers to 162 for it) */
  static_assert(2 * RPP == SR && (RB / 16) % TPR == 0 && SM_FLAG >= 320,
                "a slot's rows split evenly over two passes of the loading threads");
  extern __shared__ __align__(16) uint8_t sm[];
  uint8_t *kvs_sm = sm; /* [NSLOT][SR][RB] KV codes, chunks swizzled (ring) */
  uint16_t *p_sm =
      (uint16_t *)(sm + SM_KV); /* !WG: [2][16][PS] fp16 P, buffer tile & 1 (SM_P1 bytes apart) */
  uint8_t *q8_sm = sm + SM_KV;  /* WG: Q's e4m3 codes, wgmma's B (wg_q8) */
  constexpr int RED = WG ? SM_KV + SM_Q8 : SM_KV + SM_P;
  float *red_max = (float *)(sm + RED), *red_sum = red_max + 16 * 4; /* [16][4], [16][NG] */
  uint8_t *fl = sm + RED + SM_RED;
  uint64_t *mbar =
      (uint64_t *)fl; /* [3] tile i's copies landed (ring position i % 3, phase i / 3) */
  float *alpha_sm =
      (float *)(fl + 32); /* [2][16] the softmax's alpha for tile i's PV (buffer i & 1) */
  int *fix_sm =
      (int *)(fl + 160); /* [2][4] FNUZ: logit warp w's rows of tile i had a special code */
  float *ml_sm =
      (float *)(fl + 192); /* [16][2] the final m and l (the logit warps' to the PV warps) */
  const int t = blockIdx.x, s = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, j = lane & 3;
  const bool qkw = warp < 4; /* a logit warp; else a PV warp */
  /* Q (16 x 576 codes, rows past H zero-filled) is staged in slot 4's space (free until tile 2
   * loads, after Q's fragments are in registers), rows QSTR halves apart. Q made operands here
   * (p.qin: bf16 codes, static e4m3) depends on no kernel and its address on no table, so it
   * loads first, before the token's entry (a round trip); k_qprep's codes may still be being
   * written (programmatic dependent launch), so then tile 0's rows go first. */
  uint16_t *q_sm = (uint16_t *)(kvs_sm + 4 * SLOT * QK);
  if (p.qin) q_load(p, q_sm, t);
  if (threadIdx.x == 0)
    for (int k = 0; k < 3; k++)
      mbar_init(smem_addr(mbar + k), 128); /* the 128 loading threads' arrivals */
  const tokinfo ti = tok_of(p, t);
  if (s >= ti.nsplit) { /* this batch has fewer splits (uniform over the block) */
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    if (p.cl) cluster_merge(p, (float *)sm, t, ti.nsplit);
    return;
  }
  const int64_t L = ti.L, start = (int64_t)s * ti.slen;
  const int64_t end = start + ti.slen < L ? start + ti.slen : L;
  const int ntiles = end > start ? (int)((end - start + TT - 1) / TT) : 0;
  __syncthreads(); /* the mbarriers initialized */

  /* ---- the KV copies, by the PV warps (thread pt = threadIdx.x - 128): a ring of 6 slots = 3
   * tiles, tile i in slots 2i, 2i+1 (mod 6), its copies tracked by mbar[i % 3]. Tile i+3 is
   * issued when every PV warp has finished tile i's PV. TPR threads a row, two passes of RPP rows
   * a slot: thread TPR r + k copies chunks k, k+TPR, .. of rows r and r + RPP (the swizzle keeps
   * chunks within their group of TPR). Rows past the split's end are zero-filled (their logits are
   * masked and their zero V adds 0 * p = 0). A tile's page table entries are loaded a tile
   * ahead and used only at its copies' issue (kv_ref), so that load's latency hides. ---- */
  const int pt = threadIdx.x - 128, lr = (pt & 127) / TPR, lk = (pt & 127) % TPR;
  const bool loader = !qkw && pt < 128; /* the first 4 PV warps copy */
  const int32_t base_b = ti.base;
  /* the next tile's rows (kv_ref: put together at the copy's issue; kept where they load, not
   * copied, since a copy waits for the load as a use does: with a second tile's rows copied
   * forward, paged shapes lost half the gain, BENCHMARKS.md session 15): slot half h, pass q at 2h
   * + q */
  kvref nrow[4];
  auto rows_of = [&](int tile, kvref(&r)[4]) {
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int64_t pos =
          ring<W>::pos(start, 2 * tile + (u >> 1), lr) + RPP * (u & 1); /* row lr + RPP (u & 1) */
      r[u] = kv_ref(p, base_b, pos, tile < ntiles && pos < end);
    }
  };
  struct no_copy {};
  std::conditional_t<LIN == 2, lin_copy<W, TT, 128>, no_copy>
      lc; /* LIN = 2: this thread's share of lin_copy's chunks */
  if constexpr (LIN == 2)
    if (loader) lc.init(pt); /* the loaders' table only: the logit warps' start path skips it */
  auto issue_tile =
      [&](int tile) { /* tiles in order 0, 1, 2, ..: nrow holds this one's rows */
                      if (tile >= ntiles || !loader) return;
                      if constexpr (LIN != 0) /* the launch's choice (LIN_LO): unpaged rows as
                                                 contiguous chunks, the tile's two slots (adjacent
                                                 in the ring) at once */
                        if (!p.kv_indices) {
                          const int64_t pos0 = start + (int64_t)tile * TT;
                          const uint8_t *src0 = p.kv + (base_b + pos0) * RB;
                          const uint32_t dst0 = ring<W>::slot(smem_addr(kvs_sm), 2 * tile);
                          if constexpr (LIN == 1)
                            copy_lin<W, TT, 128>(src0, p.kv, dst0, end - pos0, pt);
                          else
                            lc(src0, p.kv, dst0, end - pos0, pt);
                          cp_mbar_arrive(smem_addr(mbar + tile % 3));
                          return;
                        }
#pragma unroll
                      for (int u = 0; u < 4; u++) {
                        const int r = lr + RPP * (u & 1);
                        const uint8_t *src = p.kv;
                        int bytes = 0;
                        const int64_t row = kv_ref_row(p, nrow[u]);
                        if (row >= 0) src = p.kv + row * RB + lk * 16, bytes = 16;
                        const uint32_t dst = ring<W>::at(kvs_sm, 2 * tile + (u >> 1), r, lk);
#pragma unroll
                        for (int k = 0; k < RB / 16 / TPR; k++)
                          cp_async16(dst + 16 * TPR * k, src + (bytes ? 16 * TPR * k : 0), bytes);
                      }
                      cp_mbar_arrive(smem_addr(mbar + tile % 3));
                      rows_of(tile + 1, nrow);
      };
  auto wait_tile = [&](int tile) {
    mbar_wait(smem_addr(mbar + tile % 3), (uint32_t)(tile / 3) & 1u);
  };
  if (loader) rows_of(0, nrow), issue_tile(0);

  /* The ldmatrix addresses: tile i's half h (rows SR h ..) is slot (2i + h) % NSLOT; within a
   * slot, an address is a lane constant plus a compile-time offset, because the swizzle xors a
   * row's low 3 bits (which are the lane's: every ldmatrix row is 8 r + (lane & 7)) into the low
   * 2 (fp8) or 3 (bf16) bits of the chunk index, whose higher bits are the loop's (worked out once
   * a tile, the addresses took a quarter of the loop's instructions). ring<W> is the definition. */
  const uint32_t kv_base = smem_addr(kvs_sm);

  /* Q staged: p.qin, Q's group; else (k_qprep's codes) after the grid dependency */
  griddep_wait(); /* nothing read before it comes from the kernel before */
  if (!p.qin) q_load(p, q_sm, t);
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  if constexpr (WG)
    wg_q8(p, q_sm, q8_sm, s); /* read by wgmma after (q) below */
  else {
    q_operands<W, W == 1>(p, q_sm, s);
    __syncthreads();
  }
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}; /* rows g and g+8 (the logit warps') */

  if (qkw) {
    /* ================= logit warps: tokens TT/4 w + 8 nt + g of each tile ================= */
    const float qs = q_scale(p);
    uint32_t qa[NKB][4]; /* !WG */
    if constexpr (!WG) q_frags(q_sm, lane, qa);
    __syncthreads(); /* (q) Q's staging read: slots 4 and 5 are free (the PV warps load tiles 1, 2)
                      */
    /* logit scale: fp32(log2 e / 24) [* q_scale] * kv_scale, left to right (the emulator's c) */
    float c = p.c0;
    if (p.qfp8) c = c * qs;
    c = c * p.kvs;
    /* row TT/4 w + 8 nt + (lane & 7) (half (TT/4 w) / SR), chunk 4 q4 + (lane >> 3):
     * ring::chunk = qk_lane[q4 % 2] + 8 nt RB + 64 (q4 - q4 % 2) */
    const int qk_half = TT / 4 * warp / SR;
    uint32_t qk_lane[2];
    for (int e = 0; e < 2; e++)
      qk_lane[e] = ring<W>::chunk(TT / 4 * warp + (lane & 7), 4 * e + (lane >> 3));
    float sacc[NT][4], sv[NT][4];
    /* WG: the A fragments' lane addresses (k_attn's wk_lane, rows 16 w .. of each slot half), Q's
     * descriptor, the two chains' D and masked logits */
    uint32_t wk_lane[2], ka[NKB / 2][4];
    wg_k_lanes(warp, lane, wk_lane);
    const uint64_t qdesc = wg_desc(smem_addr(q8_sm));
    float wacc[2][2][4], wsv[2][2][4];
    /* a tile's logits: NT independent chains over the 36 column blocks in order */
    auto qk = [&](int tile, auto fixc) -> uint32_t {
      constexpr int FIX = decltype(fixc)::value;
      uint32_t sp = 0;
      const uint32_t qb = ring<W>::half(kv_base, tile, qk_half);
#pragma unroll
      for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int k = 0; k < 4; k++) sacc[nt][k] = 0.0f;
#pragma unroll
      for (int q4 = 0; q4 < NQ4; q4++) logit_step<FNUZ, FIX, W, NT>(qb, q4, qk_lane, qa, sacc, sp);
      return sp;
    };
    /* the NG groups' values of row `row` (red_sum is [16][NG], red_max [16][4]) */
    auto red_row4 = [&](const float *red, int stride, int row, int w0) {
      return *(const float4 *)(red + row * stride + w0);
    };
    for (int tile = 0; tile < ntiles; tile++) {
      const int buf = tile & 1;
      wait_tile(tile);
      /* FNUZ: a tile whose rows hold a special code has its logits computed again with the codes
       * replaced (a warp's own rows: its branch is uniform), and is flagged for its PV */
      int fix = 0;
      const int64_t left = end - (start + (int64_t)tile * TT);
      const int n = left < TT ? (int)left : TT; /* the tile's tokens before the split's end */
      if constexpr (WG) {
        /* chain ch: tokens 64 ch + 16 w + g (+ 8) of the transposed D; (1) masked logits, the
         * maxima of the lane's heads over the warp's 32 tokens */
#pragma unroll
        for (int ch = 0; ch < 2; ch++) {
          wg_frags(ring<W>::half(kv_base, tile, ch), wk_lane, ka);
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
                  64 * ch + 16 * warp + g + 8 * (k >> 1) < n ? wacc[ch][nh][k] * c : -INFINITY;
          wg_fold_max(wsv[ch], mh);
        }
        wg_allmax(mh);
        wg_put_heads(red_max, 4, warp, mh, g == 0);
      } else {
        const uint32_t sp = qk(tile, std::integral_constant<int, 0>());
        if (FNUZ && __any_sync(0xFFFFFFFFu, sp != 0))
          qk(tile, std::integral_constant<int, 1>()), fix = 1;
      }
      /* (1) masked logits, this warp's row maxima */
      float mx[2] = {-INFINITY, -INFINITY};
      if constexpr (!WG) {
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
          for (int k = 0; k < 4; k++) {
            sv[nt][k] = TT / 4 * warp + 8 * nt + 2 * j + (k & 1) < n ? sacc[nt][k] * c : -INFINITY;
            mx[k >> 1] = fmaxf(mx[k >> 1], sv[nt][k]);
          }
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
          mx[rr] = fmaxf(mx[rr], MLR_SHFL_XOR(mx[rr], 1));
          mx[rr] = fmaxf(mx[rr], MLR_SHFL_XOR(mx[rr], 2));
          if (j == 0) red_max[(g + 8 * rr) * 4 + warp] = mx[rr];
        }
      }
      bar_sync(BAR_QK, 128);
      if (tile >= 2)
        bar_sync(BAR_EMPTY + buf, NTH); /* PV(tile - 2) done: P, alpha and flag buffer free */
      /* (2) alpha, P, the row sums of each group of 16 tokens in the recipe's warp16 order */
      float mn[2], alpha[2];
#pragma unroll
      for (int rr = 0; rr < 2; rr++) {
        const float4 x = red_row4(red_max, 4, g + 8 * rr, 0);
        const float v = fmaxf(fmaxf(fmaxf(fmaxf(m[rr], x.x), x.y), x.z), x.w);
        mn[rr] = v, alpha[rr] = ex2(m[rr] - v);
      }
      uint16_t *pt16 = p_sm + buf * (SM_P1 / 2);
      if constexpr (WG) { /* P into the tile's rope columns; group 4 ch + w's sums (its 16 tokens)
                           */
        float mh[2][2], ts[2][2];
        wg_heads(mn, mh);
#pragma unroll
        for (int ch = 0; ch < 2; ch++) {
          wg_p_sums(wsv[ch], mh, kvs_sm + ring<W>::half(0, tile, ch), 2 * warp, ts);
          wg_put_heads(red_sum, NG, 4 * ch + warp, ts, g == 0);
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
            ps[0] += e[0] + e[1], ps[1] += e[2] + e[3];
            const int col = TT / 4 * warp + 8 * nt + 2 * j;
            *(uint32_t *)(pt16 + g * PS + col) = mlr__f16x2(e[0], e[1]);
            *(uint32_t *)(pt16 + (g + 8) * PS + col) = mlr__f16x2(e[2], e[3]);
          }
#pragma unroll
          for (int rr = 0; rr < 2; rr++) {
            ps[rr] += MLR_SHFL_XOR(ps[rr], 1);
            ps[rr] += MLR_SHFL_XOR(ps[rr], 2);
            if (j == 0) red_sum[(g + 8 * rr) * NG + NT / 2 * warp + gi] = ps[rr];
          }
        }
      if (warp == 0 && j == 0)
        alpha_sm[buf * 16 + g] = alpha[0], alpha_sm[buf * 16 + g + 8] = alpha[1];
      if (FNUZ && lane == 0) fix_sm[buf * 4 + warp] = fix;
      bar_sync(BAR_QK, 128);
#pragma unroll
      for (int rr = 0; rr < 2; rr++) {
        float sum = 0.0f;
#pragma unroll
        for (int w = 0; w < NG; w += 4) {
          const float4 x = red_row4(red_sum, NG, g + 8 * rr, w);
          sum += x.x, sum += x.y, sum += x.z, sum += x.w; /* group order: the recipe's warp16 */
        }
        l[rr] = l[rr] * alpha[rr] + sum, m[rr] = mn[rr];
      }
      bar_arrive(BAR_FULL + buf, NTH); /* P(tile), alpha, flag written */
    }
    if (warp == 0 && j == 0)
      ml_sm[2 * g] = m[0], ml_sm[2 * g + 1] = l[0], ml_sm[2 * (g + 8)] = m[1],
                ml_sm[2 * (g + 8) + 1] = l[1];
    __syncthreads();      /* (e) the final m and l for the PV warps */
    if constexpr (LSE_QK) /* a lone split's lse, here while the PV warps store its outputs (its
                             binary64 log was at the end of their path) */
      if (ti.nsplit == 1 && warp == 0 && j == 0)
#pragma unroll
        for (int rr = 0; rr < 2; rr++)
          if (g + 8 * rr < p.H) {
            bool live;
            float wv;
            const float sc = direct_sc(p, m[rr], l[rr], live, wv);
            store_lone_lse(p, (int64_t)t * p.H + g + 8 * rr, m[rr], sc, live);
          }
    if (p.cl) cluster_merge(p, (float *)sm, t, ti.nsplit);
    return;
  }

  /* ================= PV warps: output columns PVC pw .. PVC pw + PVC - 1 ================= */
  const int pw = warp - 4;
  __syncthreads(); /* (q) */
  if (ntiles > 0)
    wait_tile(0); /* tile 1 issued when tile 0 has landed: issued with it, they shared the bandwidth
                     and tile 0 landed late */
#pragma unroll 1
  for (int i = 1; i <= 2; i++)
    issue_tile(i); /* one copy of issue_tile's code, not two (a block's start fetches it) */
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
      smem_addr(p_sm + ((lane & 7) + 8 * ((lane >> 3) & 1)) * PS + 8 * (lane >> 4));
  const uint32_t wp_lane = wg_p_lane(lane); /* WG: P in the tile's rope columns */
  auto pv = [&](int tile, auto fixc) {
    constexpr int FIX = decltype(fixc)::value;
#pragma unroll
    for (int kb = 0; kb < NKV; kb++) {
      uint32_t pa[4]; /* P rows 0..15, tokens 16kb.. : the natural k order */
      const uint32_t vrow = ring<W>::half(kv_base, tile, 16 * kb / SR) +
                            16 * (kb % (SR / 16)) * RB; /* rows 16 kb .. of the tile */
      if constexpr (WG)
        ldsm4(vrow + wp_lane, pa[0], pa[1], pa[2], pa[3]);
      else
        ldsm4(p_lane + (tile & 1) * SM_P1 + 32 * kb, pa[0], pa[1], pa[2], pa[3]);
      pv_products<FIX, W, NA>(vrow, pa, pv_lane, acc);
    }
  };
  for (int tile = 0; tile < ntiles; tile++) {
    const int buf = tile & 1;
    bar_sync(BAR_FULL + buf, NTH); /* P(tile), alpha, flag */
    wait_tile(
        tile); /* complete (the logit warps waited for it): the copies' visibility to this thread */
    const float al[2] = {alpha_sm[buf * 16 + g], alpha_sm[buf * 16 + g + 8]};
    /* acc * alpha; alpha = 1 for all 16 rows (no row's max moved: most tiles) changes no bit */
    if (!__all_sync(0xFFFFFFFFu, al[0] == 1.0f && al[1] == 1.0f)) {
#pragma unroll
      for (int i = 0; i < 16 * NA; i++) { /* c0, c1 are row g's, c2, c3 row g+8's */
        float &v = (&acc[0][0][0][0])[i];
        v = v * al[(i >> 1) & 1];
      }
    }
    if (FNUZ && (fix_sm[buf * 4] | fix_sm[buf * 4 + 1] | fix_sm[buf * 4 + 2] | fix_sm[buf * 4 + 3]))
      pv(tile, std::integral_constant<int, 1>());
    else
      pv(tile, std::integral_constant<int, 0>());
    if (tile + 2 < ntiles) bar_arrive(BAR_EMPTY + buf, NTH); /* P buffer free for tile + 2 */
    bar_sync(BAR_PV, 32 * NPV); /* every PV warp done with tile's slots */
    issue_tile(tile + 3);
  }
  griddep_launch_dependents(); /* k_merge may start (it waits for this grid to end before reading)
                                */
  __syncthreads();             /* (e) */
  const float mm[2] = {ml_sm[2 * g], ml_sm[2 * (g + 8)]},
              ll[2] = {ml_sm[2 * g + 1], ml_sm[2 * (g + 8) + 1]};
  finish_split<W, NA>(p, sm, acc, mm, ll, t, s, ti, PVC * pw, pw == 0 && j == 0, !LSE_QK);
}

#endif
