/* fast_sm90.cuh: the NVIDIA sm_90 primitives of the fast kernel's attention kernels and the plan
 * floor (gpu/bench): the KV ring's geometry and copies (cp.async), ldmatrix, mma.sync m16n8k16 with
 * fp16 operands, the hardware exp2, the fp8 conversions (cvt.rn.f16x2.e4m3x2) and Q's operand
 * codes. CUDA only.
 *
 * Fragment layouts (PTX ISA, mma.m16n8k16 .f16): lane = 4g + j. A (16x16, row): a0a1 = (g,
 * 2j..2j+1), a2a3 = (g+8, 2j..), a4a5 = (g, 2j+8..), a6a7 = (g+8, 2j+8..). B (16x8, col): b0b1 = (k
 * 2j..2j+1, n g), b2b3 = (k 2j+8.., n g). C: c0c1 = (g, n 2j..2j+1), c2c3 = (g+8, ..). Within one
 * unit operation the k order is free (the unit sums its 16 products at once), so the kernels pick
 * whichever k order their loads give (noted at each load); the blocks of 16 are the recipe's, in
 * order. */
#ifndef MLR_FAST_SM90_CUH
#define MLR_FAST_SM90_CUH

#include "fast_common.cuh"

namespace mlr_fast {

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

/* A KV row in shared memory is its 576 bytes, unpadded (the ring needs the room); its 16-byte chunk
 * c sits at chunk c ^ ((r >> 1) & 3) (within its group of 4), r the row. Rows are 144 words = 16
 * banks apart, so the 8 rows of one ldmatrix (same c, r = 8k..8k+7) land on chunks c, c, c^1, c^1,
 * c^2, .. at bank offsets 0, 16, 0, 16, ..: 8 distinct groups of 4 banks, no conflict. */
/* bf16 KV (W = 2): rows are 1152 bytes = 288 words, all at bank 0, so the 8 rows of an ldmatrix
 * take chunks c ^ (r & 7) within their group of 8: 8 distinct groups of 4 banks. */
template <int W>
__host__ __device__ constexpr int kv_swz(int r, int c) {
  return W == 1 ? c ^ ((r >> 1) & 3) : c ^ (r & 7);
}

/* The KV ring's geometry, defined once for k_attn and k_attn_ws: NSLOT slots of SR rows of RB
 * bytes from base; a split's rows in order, slot sl holding its rows SR sl .. SR sl + SR - 1
 * (mod NSLOT: the ring turns), so tile i's half h (its rows SR h ..) is slot 2i + h; chunk c of a
 * slot's row r sits at chunk(r, c) from the slot's start (kv_swz: the swizzle keeps a chunk within
 * its group of 4 W, so a copying thread's chunks c, c + 4 W, .. stay 64 W bytes apart). */
template <int W>
struct ring {
  static constexpr int SR = SLOT / W, RB = QK * W;
  __device__ static uint32_t slot(uint32_t base, int sl) {
    return base + (uint32_t)((sl % NSLOT) * SR * RB);
  }
  __device__ static uint32_t half(uint32_t base, int tile, int h) {
    return slot(base, 2 * tile + h);
  }
  __device__ static uint32_t chunk(int r, int c) {
    return (uint32_t)((r % SR) * RB + 16 * kv_swz<W>(r, c));
  }
  /* chunk c of row r < SR of slot sl, from the ring's start in shared memory (the copies' address)
   */
  __device__ static uint32_t at(const uint8_t *ring_sm, int sl, int r, int c) {
    return slot(smem_addr(ring_sm), sl) + chunk(r, c);
  }
  __device__ static int64_t pos(int64_t start, int sl, int r) {
    return start + (int64_t)sl * SR + r;
  } /* row r of slot sl */
};

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void cp_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* named barriers (bar.sync waits for n threads' arrivals, bar.arrive counts one without waiting)
 * and the mbarriers that track copies (cp.async.mbarrier.arrive.noinc: the barrier's phase
 * completes when every arriving thread's earlier copies have landed, whoever waits) */
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
/* the barriers' initialization made visible to the async proxy (the tensor memory accelerator's
 * completions), before any copy names them */
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/* the tensor memory accelerator: bytes more to land in the barrier's current phase (its phase
 * completes when they have, as well as its arrivals), and a box of the tensor map at map (in
 * parameter space: a __grid_constant__ kernel parameter) at coordinates (x, y) copied to dst,
 * counting its bytes on the barrier */
__device__ __forceinline__ void mbar_expect_tx(uint32_t a, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(a), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void *map, int x, int y,
                                            uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
               "l"(map), "r"(x), "r"(y), "r"(bar)
               : "memory");
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

/* Unpaged KV: a slot's rows (or a tile's, whose two slots are adjacent in shared memory) are
 * contiguous in global memory, and in the ring but for the swizzle, which moves a 16-byte chunk
 * only within its group of 4 W. So chunk c of the run (row r = c / (36 W), column cc) sits at
 * 16 lin_chunk(c) from the slot's start: a row's 36 W chunks are a multiple of 4 W, so c and cc
 * agree in their low bits and kv_swz's xor of them is an xor of c, by (r >> 1) & 3 (W = 1) or
 * r & 7 (W = 2), both (c / 72) & (4 W - 1) (the static_assert checks every chunk of a tile). */
template <int W>
__host__ __device__ constexpr int lin_chunk(int c) {
  return c ^ ((c / 72) & (4 * W - 1));
}
template <int W>
constexpr bool lin_chunk_ok() {
  for (int c = 0; c < TILE * QK / 16; c++) /* a tile's chunks: TILE / W rows of 36 W */
    if (lin_chunk<W>(c) !=
            c / (QK * W / 16) * (QK * W / 16) + kv_swz<W>(c / (QK * W / 16), c % (QK * W / 16)) ||
        lin_chunk<W>(lin_chunk<W>(c)) != c)
      return false;
  return true;
}
static_assert(lin_chunk_ok<1>() && lin_chunk_ok<2>(),
              "lin_chunk is ring<W>::chunk for every chunk of a tile, and its own inverse");
/* Rows [0, ROWS) of an unpaged run, from src0 (its first row), into the ring at dst0 (a slot's
 * start): NT threads, thread i copying chunks i, i + NT, .., so a warp's copy instruction reads
 * 512 contiguous bytes (with four threads a row, 8 rows of 64 bytes). Chunks of rows at or past
 * nvalid are zero-filled, as the row-wise copies do. Where (LIN_LO, LIN_HI): k_attn_ws with the
 * wgmma logits, on splits of LIN_LO to LIN_HI tiles. A chunk's shared address takes a few integer
 * instructions here, none in the row-wise copies (a compile-time offset from the row's), and in
 * k_attn_ws the loaders are PV warps, so on long splits lin_copy (below) is the faster form. A
 * template parameter of the kernel, not a runtime branch: the branch's code alone slows the block's
 * start. */
template <int W, int ROWS, int NT>
__device__ __forceinline__ void copy_lin(const uint8_t *src0, const uint8_t *zero, uint32_t dst0,
                                         int64_t nvalid, int i) {
  constexpr int N = ROWS * QK * W / 16;
  static_assert(N % NT == 0, "the chunks split evenly over the threads");
  const int lim = nvalid <= 0 ? 0 : nvalid >= ROWS ? N : (int)nvalid * (QK * W / 16);
#pragma unroll 3
  for (int k = 0; k < N / NT; k++) {
    const int c = i + NT * k;
    const bool ok = c < lim;
    cp_async16(dst0 + 16u * (uint32_t)lin_chunk<W>(c), ok ? src0 + 16 * c : zero, ok ? 16 : 0);
  }
}
/* the same copies with the swizzle on the source side: thread i fills the ring's chunks d = i + NT
 * k (addresses dst0 + 16 i plus a compile-time offset) from the run's chunks lin_chunk(d)
 * (lin_chunk is its own inverse: the xor stays within an aligned group of 4 W, inside one 72-chunk
 * block), which is the source's chunk d with bits 4.. of its address xored by 16 s, s = (d / 72) &
 * (4 W - 1): rows are 64 W bytes aligned, so that xor of the thread's base address is the chunk's
 * (no carry), and NT k is a multiple of 8, so it commutes with the offset 16 NT k. A thread's s for
 * each k is worked out once (m: 7 a word, at bits 4 j + 4 ..), so a chunk costs a shift and a logic
 * operation; whole runs (all but a split's last tile) copy without the zero-fill's predicates.
 * Every k_attn_ws above LIN_HI tiles a split. */
template <int W, int ROWS, int NT>
struct lin_copy {
  static constexpr int CPR = QK * W / 16, N = ROWS * CPR, K = N / NT, NM = (K + 6) / 7;
  static_assert(N % NT == 0 && NT % 8 == 0,
                "the chunks split evenly over the threads; NT k a multiple of 8");
  uint32_t m[NM];
  __device__ void init(int i) { /* thread i's s for each k */
#pragma unroll
    for (int w = 0; w < NM; w++) m[w] = 0;
#pragma unroll
    for (int k = 0; k < K; k++)
      m[k / 7] |= (uint32_t)(((i + NT * k) / 72) & (4 * W - 1)) << (4 * (k % 7) + 4);
  }
  __device__ __forceinline__ void operator()(const uint8_t *src0, const uint8_t *zero,
                                             uint32_t dst0, int64_t nvalid, int i) const {
    const uintptr_t si = (uintptr_t)(src0 + 16 * i);
    const uint32_t di = dst0 + 16u * (uint32_t)i;
    if (nvalid >= ROWS) {
#pragma unroll
      for (int k = 0; k < K; k++)
        cp_async16(di + 16u * NT * k,
                   (const uint8_t *)(si ^ ((m[k / 7] >> (4 * (k % 7))) & (64u * W - 16u))) +
                       16 * NT * k,
                   16);
    } else {
      const int lim = nvalid <= 0 ? 0 : (int)nvalid * CPR;
#pragma unroll
      for (int k = 0; k < K; k++) {
        const bool ok = i + NT * k < lim;
        const uint8_t *src =
            (const uint8_t *)(si ^ ((m[k / 7] >> (4 * (k % 7))) & (64u * W - 16u))) + 16 * NT * k;
        cp_async16(di + 16u * NT * k, ok ? src : zero, ok ? 16 : 0);
      }
    }
  }
};

__device__ __forceinline__ void ldsm4(uint32_t a, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                      uint32_t &r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(a));
}
__device__ __forceinline__ void ldsm4t(uint32_t a, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                       uint32_t &r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(a));
}

/* D = A B + D on the fp16 unit, fp32 accumulation */
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
/* ex2.approx.f32 for x >= -126 or x = -inf: the unit's result, which ex2 (above) returns there too
 * (its expansion scales x by 1/2 and squares the result below -126 only, for results under 2^-126;
 * gpu/probes/ex2_table.cu checks the two equal on every such float), without that test: callers
 * show that x is in this range */
__device__ __forceinline__ float ex2_normal(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %1, %2;\n" : "=r"(d) : "r"(a), "r"(sel));
  return d;
}
/* the bytes of {b, a} (a's bytes 0-3, b's 4-7) that sel's nibbles name, low byte first */
__device__ __forceinline__ uint32_t prmt2(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}
/* four floats as e4m3 codes, x0's in the low byte: cvt.rn.satfinite (the recipe's nearest-even
 * encoding with saturation, mlr__emu_p_round) */
__device__ __forceinline__ uint32_t e4m3x4(float x0, float x1, float x2, float x3) {
  uint16_t lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(x1), "f"(x0));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(x3), "f"(x2));
  return (uint32_t)lo | (uint32_t)hi << 16;
}

/* e4m3fnuz codes 0x7F/0xFF (+-240) and 0x80 (NaN) read differently as OCP e4m3 (NaN, -0); every
 * other code reads as twice its FNUZ value in OCP (bias 7 against 8), which the scales' 1/2 undoes.
 * These three codes get twice their FNUZ value as fp16: +-480 = 0x5F80 / 0xDF80, and NaN as the
 * generic encoders give it (mlr_decode's NaN for 0x80 is negative: 0xFE00). They are rare (a
 * tensor's absmax), so the K and V loops convert without looking and only flag them
 * (fnuz_special: a few integer operations a word and no branch, where a test and branch a word
 * would cost the FNUZ kernel several times the OCP one's time); a tile that had one is converted
 * again with fp8x4<1> (k_attn). */
__device__ __forceinline__ uint32_t fnuz_half(uint32_t b) {
  return b == 0x80u ? 0xFE00u : 0x5F80u | (b & 0x80u) << 8;
}

/* bit 7 of each byte of x that is 0x7F, 0xFF or 0x80: with t = x & 0x7F7F7F7F, t + 1 carries into
 * bit 7 only from 0x7F, and t + 0x7F leaves bit 7 clear only for 0; no byte carries into the next
 */
__device__ __forceinline__ uint32_t fnuz_special(uint32_t x) {
  const uint32_t t = x & 0x7F7F7F7Fu;
  return ((t + 0x01010101u) | (x & ~(t + 0x7F7F7F7Fu))) & 0x80808080u;
}

/* four fp8 codes (bytes 0..3) as fp16 operands: lo = bytes 0, 1; hi = bytes 2, 3 (exact); FIX: the
 * FNUZ special codes replaced as above */
template <int FIX>
__device__ __forceinline__ void fp8x4(uint32_t x, uint32_t &lo, uint32_t &hi) {
  asm("{.reg .b16 a, b;\n mov.b32 {a, b}, %2;\n cvt.rn.f16x2.e4m3x2 %0, a;\n cvt.rn.f16x2.e4m3x2 "
      "%1, b;}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(x));
  if (FIX) {
    const uint32_t sp = fnuz_special(x);
    if (sp) {
      const uint32_t h0 = sp & 0x80u ? fnuz_half(x & 0xFFu) : lo & 0xFFFFu,
                     h1 = sp & 0x8000u ? fnuz_half(x >> 8 & 0xFFu) : lo >> 16;
      const uint32_t h2 = sp & 0x800000u ? fnuz_half(x >> 16 & 0xFFu) : hi & 0xFFFFu,
                     h3 = sp >> 31 ? fnuz_half(x >> 24) : hi >> 16;
      lo = h0 | h1 << 16;
      hi = h2 | h3 << 16;
    }
  }
}

/* one Q code as an fp16 operand code (the recipe's Q policy, then fp16 rounding). The hardware
 * conversions are the emulator's: cvt.rn.f16.f32 rounds to nearest even with subnormals and
 * overflows to Inf, as mlr__encode_f32_rne(.., FP16, NONSAT) (a NaN stays a NaN, its payload aside:
 * the unit's result is its canonical NaN either way); an e4m3 code's fp16 value is exact. The
 * format is a constant here: the generic encoders with a run-time format are far slower. */
/* the fp8 policies, out of line (8 copies a loop step otherwise): the code in bits 0..15, bit 16
 * set when the clamp changed the value (returned, not stored through a pointer: a local-memory
 * round trip a call) */
__device__ __noinline__ inline uint32_t q_operand_fp8(const fparams &p, uint16_t code, float qs) {
  int c;
  uint32_t h;
  if (p.qfmt == MLR_FMT_E4M3) {
    const uint32_t q8 =
        mlr__emu_q_code(code, qs, MLR_FMT_E4M3, !p.qstatic, &c); /* the format a constant */
    asm("{.reg .b16 a;\n cvt.u16.u32 a, %1;\n cvt.rn.f16x2.e4m3x2 %0, a;}\n" : "=r"(h) : "r"(q8));
    h &= 0xFFFFu;
  } else {
    const float v = mlr__emu_q_quant(code, qs, MLR_FMT_E4M3FNUZ, !p.qstatic, &c);
    uint16_t h16;
    asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(h16) : "f"(v));
    h = h16;
  }
  return h | (uint32_t)c << 16;
}
__device__ __forceinline__ uint32_t q_operand(const fparams &p, uint16_t code, float qs,
                                              int *clipped) {
  if (p.qfp8) {
    const uint32_t r = q_operand_fp8(p, code, qs);
    *clipped += (int)(r >> 16);
    return r & 0xFFFFu;
  }
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(h) : "f"(mlr_bits_f32((uint32_t)code << 16)));
  return h;
}

} // namespace mlr_fast

#endif
