/* fast.cu: the fast kernel (mlr_gpu_fast.h says what it computes). NVIDIA sm_90: mma.sync
 * m16n8k16 with fp16 operands, ldmatrix, cp.async, cvt.rn.f16x2.e4m3x2. In a HIP build the AMD
 * (MFMA) variant instead (fast_mfma.h: its own kernels and recipes, written for CDNA3, not run
 * here); k_amax, k_merge, k_read and the host code are shared.
 *
 *   k_amax  (dynamic Q scale only) max |q| over the tensor, an atomic max of the bit patterns
 *   k_qprep Q's fp16 operand codes (the recipe's Q policy, then fp16), once per element, for the
 *           dynamic scale and e4m3fnuz Q (converting them in every split's block with the generic
 *           encoders made a8w8 5 us slower than a16w8 at every shape); bf16 Q and static e4m3 Q
 *           are made operands in k_attn by hardware conversions (fast_cvt.h): one kernel less
 *   k_attn  a block per (query token, split), 8 warps. The block's KV rows stream through shared
 *           memory in tiles of 128 tokens (cp.async into a ring of 6 slots of 64 rows = 3 tiles;
 *           bf16 KV: tiles of 64 tokens, slots of 32 rows, logits by warps 0..3).
 *           Warp w: the logits of tokens 16w..16w+15 of a tile for the 16 heads (two mma chains
 *           over the 36 column blocks, Q's fragments in registers), and output columns
 *           64w..64w+63 of the 16 heads (8 accumulator tiles), P from shared memory (two
 *           buffers); software-pipelined: tile i+1's logits with the first half of tile i's PV,
 *           tile i+1's softmax with its second half, while tile i+2 loads.
 *   k_attn_ws (fast_ws.h) the same operations in the same order for splits of WS_MIN_TILES tiles
 *           or more: warps 0..3 the logits and softmax, warps 4..7 the PV and the copies, on
 *           different tiles at once (mbarriers and named barriers between them)
 *   k_merge a block per (query token, head), four columns a thread: the emulator's global-max merge
 *           (raw partials for the NVIDIA recipes, normalized for the AMD ones)
 *   cluster_merge (NVIDIA) the same merge inside k_attn / k_attn_ws when a token's 2..CL_MAX splits
 *           are one thread-block cluster and the T clusters fit the GPU at once: the partials stay
 *           in shared memory, read across the cluster; no k_merge launch, no wait for the grid
 * k_attn and k_merge are launched with programmatic dependent launch (sm_90): each may start while
 * the kernel before it runs and waits (griddepcontrol.wait) only where it reads that kernel's
 * output, so k_attn's first KV loads overlap k_qprep and k_merge's launch overlaps k_attn's tail.
 *
 * Fragment layouts (PTX ISA, mma.m16n8k16 .f16): lane = 4g + j. A (16x16, row): a0a1 = (g,
 * 2j..2j+1), a2a3 = (g+8, 2j..), a4a5 = (g, 2j+8..), a6a7 = (g+8, 2j+8..). B (16x8, col): b0b1 = (k
 * 2j..2j+1, n g), b2b3 = (k 2j+8.., n g). C: c0c1 = (g, n 2j..2j+1), c2c3 = (g+8, ..). Within one
 * unit operation the k order is free (the unit sums its 16 products at once), so the kernel picks
 * whichever k order its loads give (noted at each load); the blocks of 16 are the recipe's, in
 * order. */
#include "../hip_compat.h"
/* after the runtime headers: mlr_base.h's memcpy must be the device-callable one */
#include "../gpu_try.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "mlr_emu_ops.h"
#include "mlr_gpu.h"
#include "fast_div.h"
#include "mlr_gpu_fast.h"

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#define MLR_FAST_AMD 1 /* the MFMA variant (fast_mfma.h); else NVIDIA sm_90 */
#else
#define MLR_FAST_AMD 0
#include "fast_cvt.h"
#endif

namespace {

enum {
  QK = MLR_EMU_QK_DIM,
  DV = MLR_EMU_V_DIM,
  NKB = QK / 16,
  TILE = 128,
  NWARP = 8,
  NTHR = 32 * NWARP
};
enum { NTHR_WSWG = 32 * 12 }; /* k_attn_ws with the wgmma logits: 4 logit warps, 8 PV warps */
enum { PSTR = TILE + 8 /* P's row in halves: 272 bytes, 4 banks apart (bf16 KV: 72, 144 bytes) */ };
enum {
  SLOT = 64,
  NSLOT = 6
}; /* the KV ring: 6 slots of 64 fp8 rows (36,864 bytes; 32 bf16 rows), 3 tiles */
/* Q's staged rows, in halves: 1168 bytes = 292 words, 4 banks apart, so the 8 rows of an ldmatrix
 * (16 bytes each) hit 8 distinct groups of 4 banks (576 halves, 1152 bytes, put all 8 on the same
 * banks: 8-way conflicts) */
enum { QSTR = QK + 8 };
static_assert(16 * QSTR * 2 <= SLOT * QK, "Q's staging fits slot 4's space");
enum { MAX_SPLITS = 65535 }; /* the grid's second dimension */
/* the split length, in tiles, from which k_attn_ws runs instead of k_attn (H200, BENCHMARKS.md,
 * session 8: at 16 tiles k_attn was 4 us faster, at 32 they were level, at 64 k_attn_ws 25 us) */
enum { WS_MIN_TILES = 32 };
/* unpaged KV, the split lengths in tiles whose rows k_attn_ws copies as contiguous chunks (H200,
 * BENCHMARKS.md session 21): the wgmma kernel by copy_lin (LIN = 1) at LIN_LO to LIN_HI tiles, 1 to
 * 3.6 us faster at the bench shapes of 2 to 16 tiles a split (0.2 us slower at one tile; from 32
 * tiles 2 to 22 us slower, the loaders' address arithmetic delaying the PV); every k_attn_ws by
 * lin_copy (LIN = 2) above LIN_HI, 4 to 8% faster at 32 and 64 tiles (0.2 to 1.6 us slower than
 * copy_lin at 2 to 16: its table's set-up and code at each block's start) */
enum { LIN_LO = 2, LIN_HI = 16 };
enum {
  SM_KV = NSLOT * SLOT * QK,
  SM_P1 = 16 * PSTR * 2,
  SM_P = 2 * SM_P1,
  SM_RED = 2 * NWARP * 16 * 4,
  SM_FLAG = 320 /* k_attn: 2 flags; k_attn_ws: its mbarriers, alpha, flags, m and l */,
  SMEM = SM_KV + SM_P + SM_RED + SM_FLAG
};
/* k_attn with the logits on wgmma (WG = 1): Q's e4m3 codes, wgmma's B operand, in place of the P
 * buffers (P is written into each tile's own rope columns, dead once its logits are done:
 * wg_p_chunk) */
enum { SM_Q8 = 16 * QK, SMEM_WG = SM_KV + SM_Q8 + SM_RED + SM_FLAG };
static_assert(SMEM_WG <= 232448 && SMEM <= 232448,
              "within sm_90's 227 KiB of shared memory a block");
enum {
  MERGE_THREADS = DV / 4,
  AMAX_BLOCKS = 264,
  AMAX_THREADS = 512,
  BW_THREADS = 256,
  QPREP_THREADS = 256,
  CLEAN_BLOCKS = 1024
};

/* what a query token's blocks need, in one place: one round of global loads at the start instead
 * of a chain (token -> batch -> its splits, its rows) */
struct tokinfo {
  int64_t L; /* the KV tokens it sees (ragged q_len: fewer for earlier tokens) */
  int32_t nsplit, slen, base, pad; /* its batch's splits and split length, and kv_indptr[batch] */
};
/* token t's entry when every batch has the same q_len nq, KV length, splits, and kv_indptr steps
 * by `stride` (u: token 0's entry with its batch's full length): worked out, not loaded, so a
 * block's first copies wait for no global round trip (the plan uses it only when it gives every
 * token's table entry, field for field: tok_uniform_fit) */
__host__ __device__ __forceinline__ tokinfo tok_uniform(const tokinfo &u, int nq, int32_t stride,
                                                        int64_t t) {
  const int64_t b = nq == 1 ? t : t / nq, i = t - b * nq, L = u.L - (nq - 1 - i);
  tokinfo ti = u;
  ti.L = L > 0 ? L : 0, ti.base = (int32_t)(u.base + b * stride);
  return ti;
}

struct fparams {
  int H, qfp8, qfmt, qstatic, fnuz, kvw; /* kvw: bytes a KV value (1 fp8, 2 bf16) */
  int qin; /* Q's operands made in k_attn (bf16 Q; e4m3 Q with a static scale), not by k_qprep */
  int raw; /* the recipe's partial.normalized = no: partials acc * kv_scale, m, l */
  int cl;  /* NVIDIA, 2 <= S <= CL_MAX: a token's splits are one cluster and merge there
              (cluster_merge), no k_merge */
  int wg;  /* NVIDIA, recipe fast-wgmma-a8w8: k_attn<0, 1, 1>, the logits on wgmma */
  float c0, kvs, clamp,
      static_scale; /* kvs: kv_scale, halved for e4m3fnuz (K and V are read at twice their value) */
  float qrecip;     /* NVIDIA, p.qin with fp8 Q: fp32(1 / static_scale), for which mlr__q_recip_fits
                       holds */
  int64_t page, S;
  int pshift; /* log2(page) when page is a power of two (kv_ref shifts), else -1 */
  int lin;    /* NVIDIA, unpaged KV: k_attn_ws<.., LIN> (and the plan floor) copy the rows as
                 contiguous chunks: 1 copy_lin, 2 lin_copy */
  const uint16_t *q;
  uint16_t *qop; /* [T][H][576] Q's fp16 operand codes (k_qprep) */
  const uint8_t *kv;
  const int32_t *kv_indices;
  const struct tokinfo *tok;
  struct tokinfo tu; /* unq > 0: tok_uniform's u (p.tok is then not read) */
  int unq, ustride;  /* unq: the batches' q_len when tok_uniform gives the table, else 0 */
  unsigned int *amax;
  unsigned long long *clipped;
  float *part_o, *part_x, *part_sum,
      *lse; /* part_x: a split's lse (normalized partials) or m (raw: p.raw, with part_sum its l) */
  uint16_t *o;
};

/* Programmatic dependent launch (sm_90): a kernel launched with it may start while the previous
 * one in the stream runs; griddep_wait() returns when that one has finished and its writes are
 * visible, so what comes before it must not read the previous kernel's output. launch_dependents
 * lets the next kernel start before this one ends (it waits in its own griddep_wait). The AMD
 * variant launches in stream order: griddep_wait is a no-op there (k_merge is shared). */
#if MLR_FAST_AMD
__device__ __forceinline__ void griddep_wait() {}
#else
__device__ __forceinline__ void griddep_wait() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}
__device__ __forceinline__ void griddep_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

/* ---- NVIDIA sm_90: the helpers, k_qprep and k_attn ---- */
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
 * wgmma logits, on splits of 2 to 16 tiles. A chunk's shared address takes a few integer
 * instructions here, none in the row-wise copies (a compile-time offset from the row's), and in
 * k_attn_ws the loaders are PV warps: from 32 tiles this way was slower (bs=256, kv=8192 by 7%;
 * with session 20's costlier address, a division and a remainder a chunk, 1.6 times), where
 * lin_copy (below) is faster; in k_attn it was no faster overall, and a runtime branch's code alone
 * cost k_attn and k_attn_ws 0.7 us at bs=4, kv=1024, hence a template parameter (BENCHMARKS.md,
 * sessions 20 and 21). */
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
 * Every k_attn_ws above LIN_HI tiles a split: bs=256, kv=8192 311 -> 289 us (wgmma), 323 -> 297
 * (fast-a8w8), bs=64, kv=8192 4 to 5% (BENCHMARKS.md, session 21). */
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

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %1, %2;\n" : "=r"(d) : "r"(a), "r"(sel));
  return d;
}

/* e4m3fnuz codes 0x7F/0xFF (+-240) and 0x80 (NaN) read differently as OCP e4m3 (NaN, -0); every
 * other code reads as twice its FNUZ value in OCP (bias 7 against 8), which the scales' 1/2 undoes.
 * These three codes get twice their FNUZ value as fp16: +-480 = 0x5F80 / 0xDF80, and NaN as the
 * generic encoders give it (mlr_decode's NaN for 0x80 is negative: 0xFE00). They are rare (a
 * tensor's absmax), so the K and V loops convert without looking and only flag them
 * (fnuz_special: a few integer operations a word, no branch: a test and branch a word made the
 * FNUZ kernel 3.3 to 4 times slower than the OCP one); a tile that had one is converted again with
 * fp8x4<1> (k_attn). */
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
      lo = h0 | h1 << 16, hi = h2 | h3 << 16;
    }
  }
}

/* one Q code as an fp16 operand code (the recipe's Q policy, then fp16 rounding). The hardware
 * conversions are the emulator's: cvt.rn.f16.f32 rounds to nearest even with subnormals and
 * overflows to Inf, as mlr__encode_f32_rne(.., FP16, NONSAT) (a NaN stays a NaN, its payload aside:
 * the unit's result is its canonical NaN either way); an e4m3 code's fp16 value is exact. The
 * generic encoders with a run-time format cost about 20 us a launch at bs=4 (measured). */
/* the fp8 policies, out of line (8 copies a loop step otherwise): the code in bits 0..15, bit 16
 * set when the clamp changed the value (returned, not stored through a pointer: a local-memory
 * round trip a call) */
__device__ __noinline__ uint32_t q_operand_fp8(const fparams &p, uint16_t code, float qs) {
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

#endif

/* shared by both variants: KV row of batch position pos (base = kv_indptr[batch]; paged: through
 * the page table), a group of 32 lanes' count of Q values the clamp changed added once (mine: this
 * block counts; every lane of the group calls), and a split's lse (m + log2 lc) * ln 2 */
/* A KV row in two steps, so that a copy's issue waits for the page table and nothing before it
 * does: kv_ref starts the page's entry's load and keeps the row's offset in its page (unpaged: the
 * row itself, page id 0; past the split's end: offset -1, no load), kv_ref_row puts them together
 * when the copy is issued. The loaders read a tile's entries a tile ahead, but when the row was
 * worked out at once the multiply waited for the load right there, a round trip a tile in every
 * loading warp: paged shapes took up to 10 us more than unpaged ones, and as long once the use
 * moved to the issue (BENCHMARKS.md, session 15). */
struct kvref {
  int64_t off;
  int32_t pid;
};
__device__ __forceinline__ kvref kv_ref(const fparams &p, int32_t base, int64_t pos, bool valid) {
  if (!valid) return {-1, 0};
  if (!p.kv_indices) return {base + pos, 0};
  /* pos >= 0, so for a power-of-two page the shift is the quotient; a 64-bit division is a call of
   * tens of instructions (4 a tile in each loading thread: BENCHMARKS.md, session 13's SASS) */
  const int64_t pg = p.pshift >= 0 ? pos >> p.pshift : pos / p.page;
  return {pos - pg * p.page, p.kv_indices[base + pg]};
}
/* the row, or -1 (offset -1, page id 0) */
__device__ __forceinline__ int64_t kv_ref_row(const fparams &p, const kvref &r) {
  return (int64_t)r.pid * p.page + r.off;
}
/* query token t's entry */
__device__ __forceinline__ tokinfo tok_of(const fparams &p, int64_t t) {
  return p.unq ? tok_uniform(p.tu, p.unq, p.ustride, t) : p.tok[t];
}
__device__ __forceinline__ void add_clipped(const fparams &p, int clipped, bool mine) {
  for (int m = 16; m; m >>= 1) clipped += MLR_SHFL_XOR(clipped, m);
  if (mine && clipped && (threadIdx.x & 31) == 0) atomicAdd(p.clipped, (unsigned long long)clipped);
}
/* a merged row's lse from its max M and divisor sc: raw partials (base-2 units) (M + log2 sc) ln 2,
 * normalized ones (ln units) M + ln sc. k_merge's and cluster_merge_'s */
__device__ __forceinline__ float merged_lse(bool raw, float M, float sc) {
  return raw ? mlr__emu_lse_convert(M + mlr__emu_log(MLR_EXP_2, sc), MLR_EXP_2, MLR_EXP_E)
             : M + mlr__emu_log(MLR_EXP_E, sc);
}
__device__ __forceinline__ void store_lse(const fparams &p, int64_t row, int s, float m, float lc,
                                          int direct) {
  const float lse = merged_lse(true, m, lc); /* the split's softmax in base-2 units */
  if (direct)
    p.lse[row] = lse;
  else
    p.part_x[row * p.S + s] = lse;
}

/* q = n / d for a row's N outputs, each rounded to nearest even (the recipe's binary32 division):
 * fast_div.h's division by r = 1 / d (one IEEE division a row, no branch a value) when d and every
 * n are in its range, else the IEEE division of each (NaN, Inf, tiny values; d < 1: no row's sum).
 * Taken by a lone split's store (16 values a row a thread): bs=256, kv=1024 0.6 to 1.3 us faster
 * (two waves of blocks, each ending in it); the merges' four values a row a thread divide as
 * before, where it was no faster (BENCHMARKS.md, session 22) */
template <int N>
__device__ __forceinline__ void div_row(const float (&n)[N], float d, float (&q)[N]) {
  const float r = 1.0f / d;
  int ok = mlr__div_d_ok(d);
#pragma unroll
  for (int k = 0; k < N; k++) ok &= mlr__div_n_ok(n[k]);
  if (ok) {
#pragma unroll
    for (int k = 0; k < N; k++) q[k] = mlr__div_by(n[k], d, r);
  } else {
#pragma unroll
    for (int k = 0; k < N; k++) q[k] = n[k] / d;
  }
}
/* a merge's four outputs of one row, acc / sc (the IEEE division), as the bf16 codes of four
 * adjacent columns (lo first): NVIDIA by cvt.rn.bf16x2 (fast_cvt.h, checked on all 2^32 inputs) */
__device__ __forceinline__ uint2 merge_out4(const float (&acc)[4], float sc) {
  float q[4];
#pragma unroll
  for (int k = 0; k < 4; k++) q[k] = acc[k] / sc;
#if MLR_FAST_AMD
  return make_uint2(mlr__emu_out_code(q[0], MLR_OUT_BF16) |
                        (uint32_t)mlr__emu_out_code(q[1], MLR_OUT_BF16) << 16,
                    mlr__emu_out_code(q[2], MLR_OUT_BF16) |
                        (uint32_t)mlr__emu_out_code(q[3], MLR_OUT_BF16) << 16);
#else
  return make_uint2(mlr__out_bf16x2(q[0], q[1]), mlr__out_bf16x2(q[2], q[3]));
#endif
}

__device__ __forceinline__ float q_scale(const fparams &p) {
  if (!p.qfp8) return 1.0f;
  return p.qstatic ? p.static_scale
                   : mlr_task_scale(mlr_bits_f32(*p.amax), mlr_format_max((mlr_format)p.qfmt));
}

__global__ void __launch_bounds__(AMAX_THREADS) k_amax(fparams p, int64_t n) {
  float amax = 0.0f; /* NaN is skipped by the comparison, as in the emulator */
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float a = fabsf(mlr_bits_f32((uint32_t)p.q[i] << 16));
    if (a > amax) amax = a;
  }
  for (int m = 16; m; m >>= 1) amax = fmaxf(amax, MLR_SHFL_XOR(amax, m));
  if ((threadIdx.x & 31) == 0)
    atomicMax(p.amax, mlr_f32_bits(amax)); /* non-negative floats order as their bits */
}

#if MLR_FAST_AMD
#include "fast_mfma.h"
#else
/* Q's fp16 operand codes, once per element (every split's block used to convert its token's Q):
 * 8 elements a thread; the clamp's count added once a warp */
__global__ void __launch_bounds__(QPREP_THREADS) k_qprep(fparams p, int64_t n8) {
  griddep_wait(); /* the dynamic scale's amax (k_amax) */
  const float qs = q_scale(p);
  int clipped = 0;
  const int64_t i = blockIdx.x * (int64_t)QPREP_THREADS + threadIdx.x;
  if (i < n8) {
    const uint4 r = *(const uint4 *)(p.q + 8 * i);
    uint4 w;
    w.x = q_operand(p, r.x & 0xFFFFu, qs, &clipped) | q_operand(p, r.x >> 16, qs, &clipped) << 16;
    w.y = q_operand(p, r.y & 0xFFFFu, qs, &clipped) | q_operand(p, r.y >> 16, qs, &clipped) << 16;
    w.z = q_operand(p, r.z & 0xFFFFu, qs, &clipped) | q_operand(p, r.z >> 16, qs, &clipped) << 16;
    w.w = q_operand(p, r.w & 0xFFFFu, qs, &clipped) | q_operand(p, r.w >> 16, qs, &clipped) << 16;
    *(uint4 *)(p.qop + 8 * i) = w;
  }
  add_clipped(p, clipped, true);
}

/* ---- the pieces k_attn and k_attn_ws (fast_ws.h) share ---- */
/* Q's 16 x 576 codes into q_sm (rows past H zero-filled), rows QSTR halves apart (1168 bytes: the
 * 8 rows of an ldmatrix hit 8 distinct groups of 4 banks), one cp.async group: p.qin, the bf16 or
 * e4m3 codes (made operands by q_operands), else k_qprep's fp16 codes */
__device__ __forceinline__ void q_load(const fparams &p, uint16_t *q_sm, int t) {
  const uint16_t *qsrc = p.qin ? p.q : p.qop;
  for (int c = threadIdx.x; c < 16 * (QK / 8); c += blockDim.x) { /* 16 bytes a copy: 8 codes */
    const int h = c / (QK / 8), k8 = c % (QK / 8);
    cp_async16(smem_addr(q_sm + h * QSTR + 8 * k8),
               h < p.H ? qsrc + ((int64_t)t * p.H + h) * QK + 8 * k8 : qsrc, h < p.H ? 16 : 0);
  }
  cp_commit();
}

/* Q's operands in place, by the block, a 16-column block (8 words) a thread, in small loops
 * (made by each warp in unrolled code, with a test a pair, they cost 3 us a block): p.qin, the
 * recipe's Q policy (bf16 codes -> fp16 operands, q_operand's rounding; e4m3 with the static
 * scale, the clamp's count by split 0's block, once a token); fp8 KV, each block's columns put in
 * the k order of the K rows' ldmatrix (logit_step), so that an ldmatrix gives each lane its A
 * fragment: column pair P (columns 2P, 2P+1) to word 4 (P & 1) + (P >> 1). One loop per policy:
 * in one loop, the static policy's divisions were computed for every policy (1.2 us a block). */
template <int W, int PERM = (W == 1)>
__device__ __forceinline__ void q_operands(const fparams &p, uint16_t *q_sm, int s) {
  auto each_block = [&](auto op) {
    for (int c = threadIdx.x; c < p.H * NKB; c += blockDim.x) {
      uint4 *b4 = (uint4 *)(q_sm + (c / NKB) * QSTR + 16 * (c % NKB));
      const uint4 x0 = b4[0], x1 = b4[1];
      const uint32_t w[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      uint32_t o[8];
#pragma unroll
      for (int k = 0; k < 8; k++) o[PERM ? 4 * (k & 1) + (k >> 1) : k] = op(w[k]);
      b4[0] = make_uint4(o[0], o[1], o[2], o[3]), b4[1] = make_uint4(o[4], o[5], o[6], o[7]);
    }
  };
  int clipped = 0;
  if (!p.qin)
    each_block([](uint32_t x) { return x; }); /* k_qprep's fp16 codes */
  else if (!p.qfp8)
    each_block([](uint32_t x) { return mlr__bf16x2_f16x2(x); });
  else {
    each_block(
        [&](uint32_t x) { return mlr__q_static_e4m3x2(x, p.static_scale, p.qrecip, &clipped); });
    add_clipped(p, clipped, s == 0);
  }
}

/* each lane's A fragments for the 36 column blocks by ldmatrix: matrices rows 0-7 and 8-15 of
 * block positions 0-7, then of 8-15 (lane l: row (l & 7) + 8 ((l >> 3) & 1), position 8 (l >> 4)).
 * fp8: k = 2j, 2j+1 <-> columns 4j, 4j+1 and k = 2j+8, 2j+9 <-> columns 4j+2, 4j+3 (q_operands'
 * order); bf16: the natural order (k = column) */
__device__ __forceinline__ void q_frags(const uint16_t *q_sm, int lane, uint32_t (&qa)[NKB][4]) {
  const uint32_t qaddr =
      smem_addr(q_sm + ((lane & 7) + 8 * ((lane >> 3) & 1)) * QSTR + 8 * (lane >> 4));
#pragma unroll
  for (int kb = 0; kb < NKB; kb++)
    ldsm4(qaddr + 32 * kb, qa[kb][0], qa[kb][1], qa[kb][2], qa[kb][3]);
}

/* step q4 of a tile's logits, NT n-tiles of 8 tokens (n-tile nt: the rows at qb + qk_lane + 8 nt
 * RB), each an mma chain over the column blocks in order. 4 matrices of 8 tokens x 16 bytes,
 * chunks 4*q4 .. 4*q4+3. fp8: column blocks 4*q4 .. 4*q4+3, lane (g, j) gets token g's columns
 * 4j..4j+3 of each; bf16: column blocks 2*q4, 2*q4+1, lane (g, j) gets token g's columns 2j, 2j+1
 * of each 8. FNUZ (FIX = 0): sp collects the special codes' flags */
template <int FNUZ, int FIX, int W, int NT>
__device__ __forceinline__ void logit_step(uint32_t qb, int q4, const uint32_t (&qk_lane)[2],
                                           const uint32_t (&qa)[NKB][4], float (&sacc)[NT][4],
                                           uint32_t &sp) {
  constexpr int RB = QK * W;
#pragma unroll
  for (int nt = 0; nt < NT; nt++) {
    uint32_t r[4];
    ldsm4(qb + qk_lane[q4 % 2] + 8 * nt * RB + 64 * (q4 - q4 % 2), r[0], r[1], r[2], r[3]);
    if (W == 1) {
#pragma unroll
      for (int i = 0; i < 4; i++) {
        uint32_t lo, hi;
        if (FNUZ && !FIX) sp |= fnuz_special(r[i]);
        fp8x4<FIX>(r[i], lo, hi);
        mma(sacc[nt], qa[4 * q4 + i], lo, hi);
      }
    } else {
      mma(sacc[nt], qa[2 * q4], mlr__bf16x2_f16x2(r[0]), mlr__bf16x2_f16x2(r[1]));
      mma(sacc[nt], qa[2 * q4 + 1], mlr__bf16x2_f16x2(r[2]), mlr__bf16x2_f16x2(r[3]));
    }
  }
}

/* one PV step's products: P's fragment pa (tokens 16 kb .., the natural k order), V's rows at
 * vrow, NA groups of 32 output columns (fp8; bf16: 2 NA groups of 16) from the lane's pv_lane:
 * acc[a][h2][e] is n-tile 4a + 2 h2 + e */
template <int FIX, int W, int NA>
__device__ __forceinline__ void pv_products(uint32_t vrow, const uint32_t (&pa)[4],
                                            const uint32_t (&pv_lane)[NA * W],
                                            float (&acc)[NA][2][2][4]) {
  if (W == 1) {
#pragma unroll
    for (int a = 0; a < NA; a++) {
      /* transposed 8x8 matrices of 16-bit pairs: lane (g, j) gets tokens 2j, 2j+1 of byte columns
       * 2g, 2g+1: m0 tokens 0-7 and m1 tokens 8-15 of columns c0..c0+15, m2 and m3 of c0+16.. */
      uint32_t r[4];
      ldsm4t(vrow + pv_lane[a], r[0], r[1], r[2], r[3]);
#pragma unroll
      for (int h2 = 0; h2 < 2; h2++) {
        /* bytes (t 2j col 2g, t 2j col 2g+1, t 2j+1 col 2g, t 2j+1 col 2g+1) -> column 2g's two
         * tokens in the low half, column 2g+1's in the high half */
        uint32_t e0, o0, e1, o1;
        fp8x4<FIX>(prmt(r[2 * h2], 0x3120), e0, o0);
        fp8x4<FIX>(prmt(r[2 * h2 + 1], 0x3120), e1, o1);
        mma(acc[a][h2][0], pa, e0, e1); /* n = g <-> column c + 32a + 16 h2 + 2g */
        mma(acc[a][h2][1], pa, o0, o1); /* n = g <-> column c + 32a + 16 h2 + 2g + 1 */
      }
    }
  } else {
#pragma unroll
    for (int a2 = 0; a2 < 2 * NA; a2++) {
      /* transposed: m0 (tokens 0-7) and m1 (tokens 8-15) of columns 8c..8c+7, m2 and m3 of
       * 8c+8..: lane (g, j) gets tokens 2j, 2j+1 of column 8c + g */
      uint32_t r[4];
      ldsm4t(vrow + pv_lane[a2], r[0], r[1], r[2], r[3]);
      mma(acc[a2 >> 1][a2 & 1][0], pa, mlr__bf16x2_f16x2(r[0]),
          mlr__bf16x2_f16x2(r[1])); /* columns c + 16 a2 + g */
      mma(acc[a2 >> 1][a2 & 1][1], pa, mlr__bf16x2_f16x2(r[2]),
          mlr__bf16x2_f16x2(r[3])); /* columns c + 16 a2 + 8 + g */
    }
  }
}

/* ---- k_attn's logits on wgmma's fp8 unit (WG = 1, recipe fast-wgmma-a8w8): S^T = K Q^T with M = a
 * warpgroup's 64 tokens (warp w's 16: the tokens k_attn's warp w computes), N = the 16 heads, and
 * the 576 columns in 18 steps of 32 in order, each step's D the next one's C from +0: the recipe's
 * mma:sm90-e4m3 dot. A, K's codes as they are, from registers: an ldmatrix of 8 rows x 16 bytes
 * gives lane (g, j) row g's bytes 4j..4j+3, the fp8 A fragment (wgmma_probe.cu's layout). B, Q's
 * e4m3 codes, from shared memory, K-major without swizzle: the core matrix of column chunk kc (16
 * bytes) and heads 8 hg..8 hg+7 at 256 kc + 128 hg, its rows 16 bytes apart; the descriptor's
 * leading byte offset (the K direction) 256, stride byte offset (N) 128. ---- */
/* wgmma exists on sm_90a only: another target's build traps here (and mlr_gpu_fast_prepare refuses
 * the recipe: MLR_FAST_WGMMA, set by gpu/CMakeLists.txt for 90a) */
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_ASM(...) __trap()
#else
#define WG_ASM(...) asm volatile(__VA_ARGS__)
#endif
__device__ __forceinline__ void wgmma_e4m3(float (&d)[2][4], const uint32_t (&a)[4],
                                           uint64_t desc) {
  (void)d, (void)a, (void)desc; /* the trapping build uses none */
  WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
         "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0,%1,%2,%3,%4,%5,%6,%7}, "
         "{%8,%9,%10,%11}, %12, p, 1, 1;\n}\n"
         : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
           "+f"(d[1][2]), "+f"(d[1][3])
         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
/* the accumulators tied to the asm statements around them, so no use of them moves across the
 * wgmma's issue or its wait (they are written asynchronously) */
__device__ __forceinline__ void wg_fence(float (&d)[2][4]) {
#pragma unroll
  for (int i = 0; i < 8; i++) asm volatile("" : "+f"((&d[0][0])[i])::"memory");
}
enum { WG_LBO = 256, WG_SBO = 128 };
__device__ __forceinline__ uint64_t wg_desc(uint32_t addr) {
  return (uint64_t)((addr >> 4) & 0x3FFF) | (uint64_t)(WG_LBO >> 4) << 16 |
         (uint64_t)(WG_SBO >> 4) << 32; /* no swizzle: bits 62-63 = 0 */
}
/* wgmma's B operand, Q's e4m3 codes, straight from q_load's staging (q_operands is not run): p.qin,
 * the static policy's quantization of the bf16 codes (mlr__q_static_e4m3x2_codes: the codes that
 * q_operands would widen to fp16), the clamp's count by split 0's block; else k_qprep's fp16
 * codes of e4m3 values, narrowed (exact). Rows past H are zero codes either way. Eight codes (half
 * a 16-column chunk) a step, so the 384 threads of k_attn_ws_wg take 3 steps each (whole chunks:
 * half the threads took 2 and the rest 1, 32 divisions on the longest path instead of 24). Then
 * the fence that makes the generic stores visible to wgmma. */
__device__ __forceinline__ void wg_q8(const fparams &p, const uint16_t *q_sm, uint8_t *q8_sm,
                                      int s) {
  int clipped = 0;
  for (int c = threadIdx.x; c < 16 * (QK / 8);
       c += blockDim.x) { /* head h's codes 8 k8 .. 8 k8 + 7 */
    const int h = c / (QK / 8), k8 = c % (QK / 8);
    const uint4 x = *(const uint4 *)(q_sm + h * QSTR + 8 * k8);
    uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int k = 0; k < 4; k++)
      w[k] = p.qin ? mlr__q_static_e4m3x2_codes(w[k], p.static_scale, p.qrecip, &clipped)
                   : mlr__f16x2_e4m3x2(w[k]);
    /* the core matrix of column chunk k8 / 2 and heads 8 (h >> 3) .. (wg_desc's strides), row h & 7
     */
    *(uint2 *)(q8_sm + WG_LBO * (k8 >> 1) + WG_SBO * (h >> 3) + 16 * (h & 7) + 8 * (k8 & 1)) =
        make_uint2(w[0] | w[1] << 16, w[2] | w[3] << 16);
  }
  if (p.qin) add_clipped(p, clipped, s == 0);
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* P in the rope columns (the WG kernels): the 16-byte chunk of head h and tokens 8 tc .. 8 tc + 7
 * (tc counted from a slot half's start) is the rope chunk 32 + (h >> 3) of row 8 tc + (h & 7).
 * wg_p_lane: the PV's ldmatrix of P from a step's first row (vrow), matrices heads (lane & 7) + 8
 * ((lane >> 3) & 1), tokens 8 (lane >> 4) ..: the 8 rows of a matrix fall on 8 distinct groups of
 * 4 banks (rows 4 banks apart mod 8, the swizzle's xor). */
__device__ __forceinline__ uint32_t wg_p_chunk(int tc, int h) {
  return ring<1>::chunk(8 * tc + (h & 7), 32 + (h >> 3));
}
__device__ __forceinline__ uint32_t wg_p_lane(int lane) {
  return wg_p_chunk(lane >> 4, (lane & 7) + 8 * ((lane >> 3) & 1));
}
/* a warp's A fragments' lane addresses: its 16 tokens from 16 w, row 16 w + (lane & 7) + 8 ((lane
 * >> 3) & 1), chunk 2 e + (lane >> 4) */
__device__ __forceinline__ void wg_k_lanes(int warp, int lane, uint32_t (&wk_lane)[2]) {
  for (int e = 0; e < 2; e++)
    wk_lane[e] =
        ring<1>::chunk(16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1), 2 * e + (lane >> 4));
}
/* a warp's A fragments of its 16 tokens for the 18 steps (qb: the slot half's start; wk_lane: the
 * lane's row and chunk 2 (ks % 2) + (lane >> 4), so step ks is wk_lane[ks % 2] + 64 (ks >> 1)),
 * which stay in ka until wg_wait; wg_mma starts the warpgroup's chain into d from +0 */
__device__ __forceinline__ void wg_frags(uint32_t qb, const uint32_t (&wk_lane)[2],
                                         uint32_t (&ka)[NKB / 2][4]) {
#pragma unroll
  for (int ks = 0; ks < NKB / 2; ks++)
    ldsm4(qb + wk_lane[ks & 1] + 64 * (ks >> 1), ka[ks][0], ka[ks][1], ka[ks][2], ka[ks][3]);
}
__device__ __forceinline__ void wg_mma(float (&d)[2][4], const uint32_t (&ka)[NKB / 2][4],
                                       uint64_t qdesc) {
#pragma unroll
  for (int i = 0; i < 8; i++) (&d[0][0])[i] = 0.0f;
  wg_fence(d);
  WG_ASM("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
  for (int ks = 0; ks < NKB / 2; ks++)
    wgmma_e4m3(d, ka[ks],
               qdesc + (uint64_t)(2 * WG_LBO * ks / 16)); /* column chunks 2 ks, 2 ks + 1 */
  WG_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_wait(float (&d)[2][4]) {
  WG_ASM("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  wg_fence(d);
}

/* The softmax on a warp's wgmma D (16 tokens as rows): lane (g, j) holds tokens g, g + 8 of heads
 * 8 nh + 2 j + e. wg_fold_max folds its two tokens' masked logits sv into mx[nh][e]; wg_allmax
 * takes the max across the warp's lanes of the same j (xor 4, 8, 16): the max is exact in any
 * order. */
__device__ __forceinline__ void wg_fold_max(const float (&sv)[2][4], float (&mx)[2][2]) {
#pragma unroll
  for (int nh = 0; nh < 2; nh++)
#pragma unroll
    for (int e = 0; e < 2; e++) mx[nh][e] = fmaxf(fmaxf(mx[nh][e], sv[nh][e]), sv[nh][2 + e]);
}
__device__ __forceinline__ void wg_allmax(float (&mx)[2][2]) {
#pragma unroll
  for (int nh = 0; nh < 2; nh++)
#pragma unroll
    for (int e = 0; e < 2; e++)
#pragma unroll
      for (int o = 4; o <= 16; o *= 2) mx[nh][e] = fmaxf(mx[nh][e], MLR_SHFL_XOR(mx[nh][e], o));
}
/* v[nh][e], the lane's heads' values (the same in every lane of its j), into red[head * stride +
 * col] by the lanes g = 0 (lead) */
__device__ __forceinline__ void wg_put_heads(float *red, int stride, int col,
                                             const float (&v)[2][2], bool lead) {
  const int j = threadIdx.x & 3;
  if (lead)
#pragma unroll
    for (int nh = 0; nh < 2; nh++)
#pragma unroll
      for (int e = 0; e < 2; e++) red[(8 * nh + 2 * j + e) * stride + col] = v[nh][e];
}
/* a row value v[rr] of rows g + 8 rr (the PV layout: m, l, the new max) for the lane's heads
 * 8 nh + 2 j + e: lane 4 (2 j + e) holds head 8 nh + 2 j + e's as its v[nh] */
__device__ __forceinline__ void wg_heads(const float (&v)[2], float (&vh)[2][2]) {
  const int j = threadIdx.x & 3;
#pragma unroll
  for (int nh = 0; nh < 2; nh++)
#pragma unroll
    for (int e = 0; e < 2; e++) vh[nh][e] = MLR_SHFL(v[nh], 4 * (2 * j + e));
}
/* p = 2^(s - m') of a warp's 16 tokens (sv; m' of the lane's heads in mh) as fp16 P into their
 * tile's rope columns (wg_p_chunk from the slot half's start pb, a generic pointer; the tokens'
 * first chunk tc0 = 2 w), and their sum in the recipe's warp16 tree into t[nh][e] (every lane):
 * ((t0 + t1) + (t2 + t3)), t_i = (p[2i] + p[2i+1]) + (p[2i+8] + p[2i+9]), the tokens of lanes g =
 * 2i, 2i + 1 (xor 4), then i ^ 1 (xor 8) and i ^ 2 (xor 16): k_attn's sums term for term. */
__device__ __forceinline__ void wg_p_sums(const float (&sv)[2][4], const float (&mh)[2][2],
                                          uint8_t *pb, int tc0, float (&t)[2][2]) {
  const int g = (threadIdx.x & 31) >> 2, j = threadIdx.x & 3;
#pragma unroll
  for (int nh = 0; nh < 2; nh++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const float a = ex2(sv[nh][e] - mh[nh][e]),
                  b = ex2(sv[nh][2 + e] - mh[nh][e]); /* tokens g, g + 8 */
      const uint32_t h2 = mlr__f16x2(a, b);
      const int h = 8 * nh + 2 * j + e;
      *(uint16_t *)(pb + wg_p_chunk(tc0, h) + 2 * g) = (uint16_t)h2;
      *(uint16_t *)(pb + wg_p_chunk(tc0 + 1, h) + 2 * g) = (uint16_t)(h2 >> 16);
      float v = (a + MLR_SHFL_XOR(a, 4)) + (b + MLR_SHFL_XOR(b, 4));
      v += MLR_SHFL_XOR(v, 8);
      v += MLR_SHFL_XOR(v, 16);
      t[nh][e] = v;
    }
}

/* ---- the split-K merge within a cluster (p.cl): the S blocks of a token (S <= CL_MAX) are one
 * cluster; each leaves its raw partial in its own shared memory (the ring's start: every tile's
 * reads are done) and, after a cluster barrier, merges a 1/S share of the token's 16 x 512 outputs
 * from all S partials through distributed shared memory: no partials in global memory, no second
 * kernel and no wait for the whole grid (k_merge's launch and wait cost about 2 us a shape). The
 * arithmetic is k_merge's (the emulator's merge_one with the global-max rule), term for term: the
 * max over the merged splits, each split's weight once a row, the mass and column terms added in
 * split order. Layout (floats from the ring's start): [16][DV] the partial, then the rows' m and
 * l, then the merge's tables (a row's weights and masses by split, sc, M and the merged splits). */
enum {
  CL_MAX = 8,
  CL_X = 16 * DV,
  CL_SUM = CL_X + 16,
  CL_W = CL_SUM + 16,
  CL_MS = CL_W + 16 * CL_MAX,
  CL_SC = CL_MS + 16 * CL_MAX,
  CL_M = CL_SC + 16,
  CL_IN = CL_M + 16,
  CL_END = CL_IN + 16
};
static_assert(CL_END * 4 <= 2 * SLOT * QK, "the cluster's partial fits in the ring's first tile");
__device__ __forceinline__ void cluster_barrier() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
/* the merge's last barrier only keeps each block's shared memory alive until the others have read
 * it: every value read from another block's memory has been used (stored as an output) before the
 * arrive, and a load's value is back before an instruction using it issues (in-order issue), so the
 * arrive needs no release (its MEMBAR.ALL.GPU, a GPU-scope fence that waits for the output stores).
 * The SASS keeps the arrive after the merge's last store (gpu/results/h200-2026-12-01-v17-sass-
 * relaxed-arrive.txt). The wait keeps its default .acquire, the only one PTX has. */
__device__ __forceinline__ void cluster_barrier_exit() {
  asm volatile("barrier.cluster.arrive.relaxed;\nbarrier.cluster.wait;\n" ::: "memory");
}
__device__ __forceinline__ uint32_t
dsmem(uint32_t a, uint32_t rank) { /* shared address a in the cluster's block rank */
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
  return r;
}
__device__ __forceinline__ float ld_dsmem(uint32_t a) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(a) : "memory");
  return v;
}
__device__ __forceinline__ float4 ld_dsmem4(uint32_t a) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(a)
               : "memory");
  return v;
}
struct clmerge { /* what cluster_merge reads of fparams (a reference to the kernel's parameters
                    would copy them to the stack) */
  uint16_t *o;
  float *lse, clamp;
  int H, raw;
};
/* every thread of every block of the cluster calls it once, after its block's partial is stored
 * (ns: the token's splits; blocks s >= ns hold none and only share the work) */
__device__ __noinline__ void cluster_merge_(clmerge p, float *cl, int t, int ns) {
  cluster_barrier(); /* every split's partial in its block's shared memory */
  if (ns >= 2) {
    const int d = threadIdx.x, eb = p.raw ? MLR_EXP_2 : MLR_EXP_E;
    const uint32_t base = smem_addr(cl);
    if (d < 16 * CL_MAX) { /* row h's split k, all loads at once: M (exact in any order: the 8 lanes
                              of a row), the weight */
      const int h = d / CL_MAX, k = d % CL_MAX;
      const float x = k < ns ? ld_dsmem(dsmem(base + 4 * (CL_X + h), k)) : -INFINITY;
      const float ms = k < ns && p.raw ? ld_dsmem(dsmem(base + 4 * (CL_SUM + h), k)) : 1.0f;
      const bool merged = k < ns && x > MLR_EMU_SKIP_BELOW;
      float M = merged ? x : -INFINITY;
      for (int o = CL_MAX / 2; o; o >>= 1) M = fmaxf(M, MLR_SHFL_XOR(M, o));
      const float w = merged ? mlr__emu_exp(eb, x - M) : 0.0f; /* NaN for x = M = +Inf, as there */
      cl[CL_W + 16 * k + h] = w;
      cl[CL_MS + 16 * k + h] = ms;
      const int lane0 = d & 31 & ~(CL_MAX - 1); /* the row's first lane in the warp */
      const unsigned in = __ballot_sync(0xFFFFFFFFu, merged) >> lane0 & ((1u << CL_MAX) - 1);
      /* row h's mass sum in split order, by its lane k = 0 from the row's 8 lanes (merge_term's
       * unfused sum + ms * w: each lane's product, then the sums in order; no barrier, no reads
       * back) */
      float sum = 0.0f, unused = 0.0f;
#pragma unroll
      for (int kk = 0; kk < CL_MAX; kk++) {
        const float wk = __shfl_sync(0xFFFFFFFFu, w, lane0 + kk),
                    mk = __shfl_sync(0xFFFFFFFFu, ms, lane0 + kk);
        if (in >> kk & 1) mlr__emu_merge_term(0.0f, mk, wk, 0, &unused, &sum);
      }
      if (k == 0)
        cl[CL_M + h] = M, ((int *)cl)[CL_IN + h] = (int)in, cl[CL_SC + h] = fmaxf(sum, p.clamp);
    }
    __syncthreads();
    uint32_t rank, nb;
    asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    asm("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(nb));
    const int n4 = 16 * DV / 4, per = (n4 + (int)nb - 1) / (int)nb,
              end = min(((int)rank + 1) * per, n4);
#pragma unroll 1
    for (int i = (int)rank * per + d; i < end; i += blockDim.x) { /* four columns of one row */
      const int h = i / (DV / 4), c4 = i % (DV / 4), in = ((const int *)cl)[CL_IN + h];
      if (h >= p.H) break;
      float4 v[CL_MAX]; /* every split's four values in flight at once */
#pragma unroll
      for (int k = 0; k < CL_MAX; k++)
        if (in >> k & 1) v[k] = ld_dsmem4(dsmem(base + 4 * (h * DV + 4 * c4), k));
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, unused = 0.0f;
#pragma unroll
      for (int k = 0; k < CL_MAX; k++)
        if (in >> k & 1) {
          const float w = cl[CL_W + 16 * k + h], ms = cl[CL_MS + 16 * k + h];
          mlr__emu_merge_term(v[k].x, ms, w, 0, &acc[0], &unused);
          mlr__emu_merge_term(v[k].y, ms, w, 0, &acc[1], &unused);
          mlr__emu_merge_term(v[k].z, ms, w, 0, &acc[2], &unused);
          mlr__emu_merge_term(v[k].w, ms, w, 0, &acc[3], &unused);
        }
      *(uint2 *)(p.o + ((int64_t)t * p.H + h) * DV + 4 * c4) = merge_out4(acc, cl[CL_SC + h]);
    }
    /* the lse (a binary64 log) by the block's last 16 threads, which have the fewest merge steps
     * (none at 8 splits): by threads 0 .. 15 it came after their full share */
    const int lh = d - ((int)blockDim.x - 16);
    if (rank == 0 && lh >= 0 && lh < p.H) {
      const float M = cl[CL_M + lh], sc = cl[CL_SC + lh];
      p.lse[(int64_t)t * p.H + lh] = merged_lse(p.raw, M, sc);
    }
  }
  cluster_barrier_exit(); /* no block leaves while another reads its shared memory */
}
__device__ __forceinline__ void cluster_merge(const fparams &p, float *cl, int t, int ns) {
  cluster_merge_({p.o, p.lse, p.clamp, p.H, p.raw}, cl, t, ns);
}

/* a lone split's row: its divisor sc = max(0 + l exp2(m - m), clamp) (merge_one for one split; the
 * software exp2 only for m = +Inf) and whether it is merged at all (m > MLR_EMU_SKIP_BELOW); its
 * lse is store_lse(live ? m : -Inf, sc) (store_lone_lse). One definition for store_result and
 * k_attn_ws's logit warps */
__device__ __forceinline__ float direct_sc(const fparams &p, float m, float l, bool &live,
                                           float &wv) {
  live = m > MLR_EMU_SKIP_BELOW;
  const float z = m - m;
  wv = live ? (z == 0.0f ? 1.0f : mlr__emu_exp(MLR_EXP_2, z)) : 0.0f;
  return fmaxf(live ? 0.0f + l * wv : 0.0f, p.clamp);
}
/* that lse from direct_sc's sc and live */
__device__ __forceinline__ void store_lone_lse(const fparams &p, int64_t row, float m, float sc,
                                               bool live) {
  store_lse(p, row, 0, live ? m : -INFINITY, sc, 1);
}

/* the split's result from a lane's accumulators (output columns c0 .. of rows g, g+8) and the
 * rows' m and l: raw partials (the recipes' partial.normalized = no: no division a partial
 * element), the split's acc * kv_scale, its m and l, merged by k_merge; a token with one split,
 * that merge here (mlr_emulate.h's merge_one for one split: the split skipped unless m >
 * MLR_EMU_SKIP_BELOW, weight exp2(m - m), o = (0 + part * weight) / max(0 + l * weight, clamp),
 * lse = (M + log2 of that) * ln 2) as the bf16 output. lead: this lane writes the rows' m, l or lse
 */
template <int W, int NA>
__device__ __forceinline__ void store_result(const fparams &p, const float (&acc)[NA][2][2][4],
                                             const float (&m)[2], const float (&l)[2], int t, int s,
                                             bool direct, int c0, bool lead, float *cl,
                                             bool lse = true) {
  const int g = (threadIdx.x & 31) >> 2, j = threadIdx.x & 3;
#pragma unroll
  for (int rr = 0; rr < 2; rr++) {
    const int h = g + 8 * rr;
    if (h >= p.H) continue; /* rows past H: zero Q, no output */
    const int64_t row = (int64_t)t * p.H + h;
    bool live = false;
    float wv = 0.0f, sc = 0.0f; /* direct only: whether merged, exp2(m - m) (1 but for m = +Inf: the
                                   software exp2 only then), the divisor */
    if (direct) sc = direct_sc(p, m[rr], l[rr], live, wv);
    /* direct: the row's outputs (0 + a kv_scale w) / sc, by div_row, index ((2 a + h2) 2 + x) 2 + y
     * for acc[a][h2][x][2 rr + y] */
    float q[8 * NA];
    if (direct) {
      float nv[8 * NA];
#pragma unroll
      for (int i = 0; i < 8 * NA; i++)
        nv[i] = live ? 0.0f + acc[i / 8][i / 4 % 2][i / 2 % 2][2 * rr + i % 2] * p.kvs * wv : 0.0f;
      div_row<8 * NA>(nv, sc, q);
    }
    float *po = cl ? cl + h * DV + c0
                   : p.part_o + (row * p.S + s) * DV +
                         c0; /* cl: this block's shared memory (cluster_merge) */
    uint16_t *oo = p.o + row * DV + c0;
#pragma unroll
    for (int a = 0; a < NA; a++)
#pragma unroll
      for (int h2 = 0; h2 < 2; h2++) {
        const int i0 = 8 * a + 4 * h2; /* q's index of acc[a][h2][0][2 rr] */
        if (W == 1) { /* c0 (n = 2j), c1 (n = 2j+1) of the even and odd tiles: columns 4j, 4j+2 and
                         4j+1, 4j+3 */
          const int col = 32 * a + 16 * h2 + 4 * j;
          const float v[4] = {acc[a][h2][0][2 * rr], acc[a][h2][1][2 * rr],
                              acc[a][h2][0][2 * rr + 1], acc[a][h2][1][2 * rr + 1]};
          if (direct)
            *(uint2 *)(oo + col) = make_uint2(mlr__out_bf16x2(q[i0], q[i0 + 2]),
                                              mlr__out_bf16x2(q[i0 + 1], q[i0 + 3]));
          else
            *(float4 *)(po + col) =
                make_float4(v[0] * p.kvs, v[1] * p.kvs, v[2] * p.kvs, v[3] * p.kvs);
        } else /* n-tile 4a + 2 h2 + e: columns 8 (4a + 2 h2 + e) + 2j, + 1 */
#pragma unroll
          for (int e = 0; e < 2; e++) {
            const int col = 8 * (4 * a + 2 * h2 + e) + 2 * j;
            const float v0 = acc[a][h2][e][2 * rr], v1 = acc[a][h2][e][2 * rr + 1];
            if (direct)
              *(uint32_t *)(oo + col) = mlr__out_bf16x2(q[i0 + 2 * e], q[i0 + 2 * e + 1]);
            else
              *(float2 *)(po + col) = make_float2(v0 * p.kvs, v1 * p.kvs);
          }
      }
    if (lead) {
      if (direct) {
        if (lse) store_lone_lse(p, row, m[rr], sc, live);
      } else if (cl)
        cl[CL_X + h] = m[rr], cl[CL_SUM + h] = l[rr];
      else
        p.part_x[row * p.S + s] = m[rr], p.part_sum[row * p.S + s] = l[rr];
    }
  }
}

/* the end of a split's block, k_attn's and k_attn_ws's alike: its result stored (in its own shared
 * memory when its token's splits merge in their cluster), then that merge */
template <int W, int NA>
__device__ __forceinline__ void finish_split(const fparams &p, uint8_t *sm,
                                             const float (&acc)[NA][2][2][4], const float (&m)[2],
                                             const float (&l)[2], int t, int s, const tokinfo &ti,
                                             int c0, bool lead, bool lse = true) {
  store_result<W, NA>(p, acc, m, l, t, s, ti.nsplit == 1, c0, lead,
                      p.cl && ti.nsplit > 1 ? (float *)sm : nullptr, lse);
  if (p.cl) cluster_merge(p, (float *)sm, t, ti.nsplit);
}

/* W: bytes a KV value (1: fp8 codes, 2: bf16 codes). With bf16 KV a tile is 64 tokens (the
 * recipes' softmax.block = 64: the same 73,728 bytes as 128 fp8 rows, so the ring is unchanged),
 * its logits computed by warps 0..3 (16 tokens each, the order warp16 describes) and its PV by all
 * 8; K and V are ldmatrix'd in their natural k order and rounded to fp16 operands in registers. */
/* WG = 1 (recipe fast-wgmma-a8w8; fp8 Q, OCP e4m3 KV): the logits on wgmma's fp8 unit (wg_frags,
 * wg_mma, wg_wait), in the transposed layout (a warp's 16 tokens as rows, the heads as columns: the
 * softmax reduces across lanes instead of within them, in the same order), P in each tile's rope
 * columns (wg_p_chunk). */
template <int FNUZ, int W, int WG = 0>
__global__ void __launch_bounds__(NTHR, 1) k_attn(fparams p) {
  static_assert(!WG || (W == 1 && !FNUZ), "the wgmma logits multiply OCP e4m3 codes");
  constexpr int TT = TILE / W; /* a tile's tokens */
  constexpr int SR = SLOT / W; /* a slot's rows */
  constexpr int RB = QK * W;   /* a row's bytes */
  constexpr int NQW = TT / 16; /* the warps computing logits */
  constexpr int TPR = 4 * W;   /* threads a row when a slot loads */
  constexpr int PS = TT + 8;   /* P's row in halves (4 banks apart) */
  static_assert(TPR * SR == NTHR && (RB / 16) % TPR == 0,
                "a slot's rows split evenly over the threads");
  extern __shared__ __align__(16) uint8_t sm[];
  uint8_t *kvs_sm = sm; /* [NSLOT][SR][RB] KV codes, chunks swizzled (ring) */
  uint16_t *p_sm =
      (uint16_t *)(sm + SM_KV); /* !WG: [2][16][PS] fp16 P, buffer tile & 1 (SM_P1 bytes apart) */
  uint8_t *q8_sm = sm + SM_KV;  /* WG: [36][2][8][16] Q's e4m3 codes, wgmma's B (wg_q8) */
  constexpr int RED = WG ? SM_KV + SM_Q8 : SM_KV + SM_P;
  float *red_max = (float *)(sm + RED), *red_sum = red_max + NWARP * 16; /* [16][NWARP] */
  int *fix_sm = (int *)(sm + RED + SM_RED); /* [2]: FNUZ, tile t (t & 1) holds a special code */
  const int t = blockIdx.x, s = blockIdx.y;
  /* Q (16 x 576 codes, rows past H zero-filled) is staged in slot 4's space (free until tile 2
   * loads, after Q's fragments are in registers), rows QSTR halves apart. Q made operands here
   * (p.qin: bf16 codes, static e4m3) depends on no kernel and its address on no table, so it
   * loads first, before the token's entry (a round trip); k_qprep's codes may still be being
   * written (programmatic dependent launch), so then tile 0's rows go first. */
  uint16_t *q_sm = (uint16_t *)(kvs_sm + 4 * SLOT * QK);
  if (p.qin) q_load(p, q_sm, t);
  const tokinfo ti = tok_of(p, t);
  if (s >= ti.nsplit) { /* this batch has fewer splits (uniform over the block) */
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    if (p.cl) cluster_merge(p, (float *)sm, t, ti.nsplit);
    return;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, j = lane & 3;
  const bool qkw =
      NQW == NWARP || warp < NQW; /* this warp computes logits (a constant with fp8 KV) */
  const int64_t L = ti.L, start = (int64_t)s * ti.slen;
  const int64_t end = start + ti.slen < L ? start + ti.slen : L;
  const int ntiles = end > start ? (int)((end - start + TT - 1) / TT) : 0;

  /* The KV rows stream through a ring of 6 slots = 3 tiles: tile i is slots 2i, 2i+1 (mod 6).
   * While the logits of tile i+1 and the PV of tile i are computed, tile i+2 loads (issued when
   * tile i-1's PV ended: 74 KB in flight). One cp.async group per slot, an empty group past the
   * split's end, so the counts stay uniform. Rows past the end are zero-filled (their logits are
   * masked and their zero V adds 0 * p = 0). */
  const int nslots = 2 * ntiles;
  /* TPR threads a row: thread TPR r + k copies the row's 16-byte chunks k, k+TPR, .., so a row's
   * address (its page looked up) is worked out once a slot */
  const int lr = threadIdx.x / TPR, lk = threadIdx.x % TPR;
  const int32_t base_b = ti.base;
  /* the KV row of this thread's row of a slot (kv_ref), -1 past the split's end. The page table is
   * read two slots ahead (row_e, row_o: the next even and odd slot's rows), so its load latency
   * hides behind a slot's copies instead of stalling the copy's issue; the two are not passed along
   * (row_a = row_b), since copying a register waits for its load as using it does */
  auto row_of = [&](int slot) -> kvref {
    const int64_t pos = ring<W>::pos(start, slot, lr);
    return kv_ref(p, base_b, pos, slot < nslots && pos < end);
  };
  kvref row_e = row_of(0), row_o = row_of(1);
  auto load_slot =
      [&](int slot) { /* slots are loaded in order 0, 1, 2, .. (each call's parity a constant once
                         inlined) */
                      kvref &rs = slot & 1 ? row_o : row_e;
                      if (slot < nslots) {
                        const int64_t row = kv_ref_row(p, rs);
                        rs = row_of(slot + 2);
                        const uint8_t *src = p.kv;
                        int bytes = 0;
                        if (row >= 0) src = p.kv + row * RB + lk * 16, bytes = 16;
                        const uint32_t dst = ring<W>::at(
                            kvs_sm, slot, lr, lk); /* chunk lk + TPR k at dst + 16 TPR k */
#pragma unroll
                        for (int k = 0; k < RB / 16 / TPR; k++)
                          cp_async16(dst + 16 * TPR * k, src + (bytes ? 16 * TPR * k : 0), bytes);
                      }
                      cp_commit();
      };
  /* The ldmatrix addresses: tile i's half h (rows SR h ..) is slot (2i + h) % NSLOT; within a
   * slot, an address is a lane constant plus a compile-time offset, because the swizzle xors a
   * row's low 3 bits (which are the lane's: every ldmatrix row is 8 r + (lane & 7)) into the low
   * 2 (fp8) or 3 (bf16) bits of the chunk index, whose higher bits are the loop's (worked out once
   * a tile, the addresses took a quarter of the loop's instructions). ring<W> is the definition. */
  const uint32_t kv_base = smem_addr(kvs_sm);
  /* logits (warp < NQW): row 16 warp + 8 nt + (lane & 7) (half (16 warp) / SR), chunk 4 q4 + (lane
   * >> 3): ring::chunk = qk_lane[q4 % 2] + 8 nt RB + 64 (q4 - q4 % 2) */
  const int qk_half = 16 * warp / SR;
  uint32_t qk_lane[2];
  for (int e = 0; e < 2; e++)
    qk_lane[e] = ring<W>::chunk(16 * warp + (lane & 7), 4 * e + (lane >> 3));
  /* PV: row 16 kb + (lane & 7) + 8 ((lane >> 3) & 1) (half 16 kb / SR), chunk (4 W) warp + 2 a +
   * (lane >> 4) (a < 2 W): ring::chunk = pv_lane[a] + 16 (kb % (SR / 16)) RB */
  uint32_t pv_lane[2 * W];
  for (int a = 0; a < 2 * W; a++)
    pv_lane[a] =
        ring<W>::chunk((lane & 7) + 8 * ((lane >> 3) & 1), 4 * W * warp + 2 * a + (lane >> 4));
  /* Tile 1 is issued when tile 0 has landed, tile 2 after tile 0's softmax: issued before Q's
   * fragments, their copies held the threads (the memory pipeline full) while Q waited in shared
   * memory, 2 to 4 us at bs >= 32; issued with tile 0, they shared the memory's bandwidth with it
   * and tile 0 landed only with most of the burst (128 blocks of 4 tiles: 6.7 us after its issue,
   * the memory then idle while the blocks computed tiles 0 to 2). Groups, in order: Q, slots 0, 1
   * (p.qin) or slots 0, 1, Q; then slots 2..5. */
  if (p.qin) {
    load_slot(0);
    load_slot(1);
    griddep_wait(); /* nothing read before it comes from the kernel before */
    asm volatile("cp.async.wait_group 2;\n" ::: "memory"); /* Q */
  } else {
    load_slot(0);
    load_slot(1);
    griddep_wait(); /* fp8 Q: k_qprep's codes (and k_amax's scale) are written */
    q_load(p, q_sm, t);
    asm volatile("cp.async.wait_group 0;\n" ::: "memory"); /* slots 0, 1 and Q */
  }
  if (FNUZ && threadIdx.x == 0) fix_sm[0] = fix_sm[1] = 0;
  __syncthreads();
  const float qs = q_scale(p);
  uint32_t qa[NKB][4]; /* !WG: Q's A fragments */
  if constexpr (WG)
    wg_q8(p, q_sm, q8_sm, s); /* read by wgmma after the barrier below */
  else {
    q_operands<W, W == 1>(p, q_sm, s);
    __syncthreads();
    q_frags(q_sm, lane, qa);
  }
  asm volatile("cp.async.wait_group 0;\n" ::: "memory"); /* Q and tile 0 (slots 0, 1) */
  __syncthreads(); /* tile 0 landed; Q's staging read by every warp: slots 4 and 5 are free */
  load_slot(2);
  load_slot(3);
  /* logit scale: fp32(log2 e / 24) [* q_scale] * kv_scale, left to right (the emulator's c) */
  float c = p.c0;
  if (p.qfp8) c = c * qs;
  c = c * p.kvs;

  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}; /* rows g and g+8 */
  float alpha[2] = {1.0f, 1.0f}; /* the last softmax step's, for its PV */
  /* the PV accumulators, 8 n-tiles of 8 columns: fp8 [32-column group][16-column half][even/odd],
   * bf16 n-tile 4a + 2 h2 + e = columns 64w + 8 (4a + 2 h2 + e) .. (the stores after the loop) */
  float acc[2][2][2][4] = {};
  float sacc[2][4];

  /* ---- logits of a tile: tokens 16w + 8nt + g (B's n), two chains over the column blocks in order
   * ---- */
  constexpr int NQ4 =
      NKB / (4 / W); /* a tile's logit steps: 4 (fp8) or 2 (bf16) column blocks each */
  auto qk_zero = [&]() {
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
      for (int k = 0; k < 4; k++) sacc[nt][k] = 0.0f;
  };
  auto qk_step = [&](uint32_t qb, int q4, auto fixc, uint32_t &sp) {
    logit_step<FNUZ, decltype(fixc)::value, W, 2>(qb, q4, qk_lane, qa, sacc, sp);
  };
  auto qk = [&](int tile, auto fixc) -> uint32_t {
    uint32_t sp = 0;
    const uint32_t qb = ring<W>::half(kv_base, tile, qk_half);
    qk_zero();
#pragma unroll
    for (int q4 = 0; q4 < NQ4; q4++) qk_step(qb, q4, fixc, sp);
    return sp;
  };
  /* FNUZ: a tile whose rows hold a special code has its logits computed again with the codes
   * replaced (a warp's own 16 rows: its branch is uniform), and is flagged for its PV (every
   * warp reads every row there: the flag is in shared memory, read after a barrier) */
  /* WG: warp w's A fragments (its tokens 16 w ..), row 16 w + (lane & 7) + 8 ((lane >> 3) & 1),
   * chunk 2 ks + (lane >> 4) for step ks: ring::chunk = wk_lane[ks % 2] + 64 (ks - ks % 2) / 2.
   * wg_load puts a tile's into ka, where they stay until the wait; wg_mma starts the warpgroup's
   * chain of 18 steps (the D in sacc: sacc[n][k] is token 16 w + g + 8 (k >> 1), head 8 n + 2 j +
   * (k & 1)); wg_wait ends it. */
  uint32_t wk_lane[2];
  wg_k_lanes(warp, lane, wk_lane);
  const uint64_t qdesc = wg_desc(smem_addr(q8_sm));
  uint32_t ka[NKB / 2][4];
  auto wg_load = [&](int tile) { wg_frags(ring<W>::half(kv_base, tile, qk_half), wk_lane, ka); };
  auto qk_tile = [&](int tile) {
    if constexpr (WG) {
      wg_load(tile);
      wg_mma(sacc, ka, qdesc);
      wg_wait(sacc);
      return;
    }
    const uint32_t sp = qk(tile, std::integral_constant<int, 0>());
    if (FNUZ && __any_sync(0xFFFFFFFFu, sp != 0)) {
      qk(tile, std::integral_constant<int, 1>());
      if (lane == 0) fix_sm[tile & 1] = 1;
    }
  };

  /* ---- PV of a tile: output columns 64w .. 64w+63 from acc*alpha, token blocks of 16 in order
   * ---- */
  const uint32_t p_lane =
      smem_addr(p_sm + ((lane & 7) + 8 * ((lane >> 3) & 1)) * PS + 8 * (lane >> 4));
  const uint32_t wp_lane =
      wg_p_lane(lane);         /* WG: P in the tile's rope columns, written by softmax2a */
  constexpr int NKV = TT / 16; /* a tile's PV steps (16 tokens each) */
  auto pv_scale = [&]() {
    /* acc * alpha; alpha = 1 for all 16 rows (no row's max moved: most tiles) changes no bit */
    if (!__all_sync(0xFFFFFFFFu, alpha[0] == 1.0f && alpha[1] == 1.0f)) {
#pragma unroll
      for (int i = 0; i < 32; i++) { /* c0, c1 are row g's, c2, c3 row g+8's */
        float &v = (&acc[0][0][0][0])[i];
        v = v * alpha[(i >> 1) & 1];
      }
    }
  };
  /* step kb of tile's PV: P from buffer tile & 1 (P is double-buffered: tile i+1's softmax writes
   * its P while tile i's PV runs) */
  auto pv_step = [&](int tile, int kb, auto fixc) {
    uint32_t pa[4]; /* P rows 0..15, tokens 16kb.. : the natural k order */
    const uint32_t vrow = ring<W>::half(kv_base, tile, 16 * kb / SR) +
                          16 * (kb % (SR / 16)) * RB; /* rows 16 kb .. of the tile */
    if constexpr (WG)
      ldsm4(vrow + wp_lane, pa[0], pa[1], pa[2], pa[3]);
    else
      ldsm4(p_lane + (tile & 1) * SM_P1 + 32 * kb, pa[0], pa[1], pa[2], pa[3]);
    pv_products<decltype(fixc)::value, W, 2>(vrow, pa, pv_lane, acc);
  };

  /* ---- softmax of a tile, from its logits in sacc (warps < NQW): (1) masked logits and the
   * block's row maxima into red_max; then, after a barrier, (2) alpha, P into p_sm, the row sums,
   * l and m ---- */
  float sv[2][4];
  /* the NQW warps' values of row `row` (red_max and red_sum are [16][NWARP]: a row's in two
   * 16-byte loads, not NQW 4-byte ones) */
  auto red_row = [&](const float *red, int row, float(&v)[NQW]) {
#pragma unroll
    for (int w = 0; w < NQW; w += 4) {
      const float4 x = *(const float4 *)(red + row * NWARP + w);
      v[w] = x.x, v[w + 1] = x.y, v[w + 2] = x.z, v[w + 3] = x.w;
    }
  };
  auto softmax1 = [&](int tile) {
    const int64_t left = end - (start + (int64_t)tile * TT);
    const int n = left < TT ? (int)left : TT; /* the tile's tokens before the split's end */
    if constexpr (WG) { /* head 8 nh + 2 j + e: this lane's tokens g, g + 8, then across the lanes
                           of its j */
#pragma unroll
      for (int nh = 0; nh < 2; nh++)
#pragma unroll
        for (int k = 0; k < 4; k++)
          sv[nh][k] = 16 * warp + g + 8 * (k >> 1) < n ? sacc[nh][k] * c : -INFINITY;
      float mh[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}};
      wg_fold_max(sv, mh);
      wg_allmax(mh);
      wg_put_heads(red_max, NWARP, warp, mh, g == 0);
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
      if (j == 0) red_max[(g + 8 * rr) * NWARP + warp] = mx[rr];
    }
  };
  float mn[2];
  auto softmax2a = [&](int tile) {
    uint16_t *pt = p_sm + (tile & 1) * (SM_P1 / 2);
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
      float v = m[rr], x[NQW];
      red_row(red_max, g + 8 * rr, x);
#pragma unroll
      for (int w = 0; w < NQW; w++) v = fmaxf(v, x[w]);
      mn[rr] = v, alpha[rr] = ex2(m[rr] - v);
    }
    if constexpr (WG) { /* P into the tile's rope columns (wg_p_chunk), the row sums of the warp's
                           16 tokens */
      float mh[2][2], ts[2][2];
      wg_heads(mn, mh);
      wg_p_sums(sv, mh, kvs_sm + ring<W>::half(0, tile, qk_half), 2 * warp, ts);
      wg_put_heads(red_sum, NWARP, warp, ts, g == 0);
      return;
    }
    if (qkw) {
      float ps[2] = {0.0f, 0.0f};
#pragma unroll
      for (int nt = 0; nt < 2; nt++) {
        float e[4];
#pragma unroll
        for (int k = 0; k < 4; k++) e[k] = ex2(sv[nt][k] - mn[k >> 1]);
        ps[0] += e[0] + e[1], ps[1] += e[2] + e[3];
        const int col = 16 * warp + 8 * nt + 2 * j;
        *(uint32_t *)(pt + g * PS + col) = mlr__f16x2(e[0], e[1]);
        *(uint32_t *)(pt + (g + 8) * PS + col) = mlr__f16x2(e[2], e[3]);
      }
#pragma unroll
      for (int rr = 0; rr < 2; rr++) {
        ps[rr] += MLR_SHFL_XOR(ps[rr], 1);
        ps[rr] += MLR_SHFL_XOR(ps[rr], 2);
        if (j == 0) red_sum[(g + 8 * rr) * NWARP + warp] = ps[rr];
      }
    }
  };
  auto softmax2b = [&]() { /* after a barrier: red_sum written */
#pragma unroll
                           for (int rr = 0; rr < 2; rr++) {
                             float sum = 0.0f, x[NQW];
                             red_row(red_sum, g + 8 * rr, x);
#pragma unroll
                             for (int w = 0; w < NQW; w++)
                               sum += x[w]; /* warp order: the recipe's warp16 */
                             l[rr] = l[rr] * alpha[rr] + sum, m[rr] = mn[rr];
                           }
  };

  /* Software pipeline: tile 0's logits and softmax first; then step i: (1) tile i+1's logits
   * interleaved in the source with the first half of tile i's PV (independent mma streams and
   * conversions), tile i+1's row maxima; barrier (b); (2) tile i+1's softmax (its P into the other
   * P buffer) with the second half of tile i's PV, which hides the softmax's chain of shuffles,
   * shared-memory round trips and exp2 (it ran alone, every warp waiting on it); barrier (c); the
   * row sums, and tile i+3's copies into tile i's slots. The same operations as one tile at a time,
   * in the same order for each accumulator: the results are bit for bit those of the unpipelined
   * loop. Barriers: (a) tile i+1 landed and P(i) written; (b) the row maxima written; (c) every
   * warp's PV(i) done (tile i's slots free) and the row sums written. */
  auto step1 = [&](int tile,
                   auto fixc) { /* tile + 1 < ntiles */
                                pv_scale();
                                if constexpr (WG) { /* tile + 1's logits run on the unit while the
                                                     * first half of tile's PV issues (its first
                                                     * step while the fragments load: the chain's
                                                     * start waits for all of them) */
                                  wg_load(tile + 1);
                                  pv_step(tile, 0, fixc);
                                  wg_mma(sacc, ka, qdesc);
#pragma unroll
                                  for (int kb = 1; kb < NKV / 2; kb++) pv_step(tile, kb, fixc);
                                  wg_wait(sacc);
                                  return;
                                }
                                uint32_t sp = 0;
                                const uint32_t qb = ring<W>::half(kv_base, tile + 1, qk_half);
                                if (qkw) qk_zero();
#pragma unroll
                                for (int u = 0; u < NQ4; u++) {
                                  if (qkw) qk_step(qb, u, std::integral_constant<int, 0>(), sp);
#pragma unroll
                                  for (int kb = 0; kb < NKV / 2; kb++)
                                    if ((kb + 1) * NQ4 / (NKV / 2) - 1 == u)
                                      pv_step(tile, kb, fixc);
                                }
                                if (FNUZ && qkw &&
                                    __any_sync(0xFFFFFFFFu, sp != 0)) { /* qk_tile's second pass */
                                  qk(tile + 1, std::integral_constant<int, 1>());
                                  if (lane == 0) fix_sm[(tile + 1) & 1] = 1;
                                }
  };
  auto pv_steps = [&](int tile, int kb0, auto fixc) {
#pragma unroll
    for (int kb = kb0; kb < NKV; kb++) pv_step(tile, kb, fixc);
  };
  if (ntiles > 0) {
    if (qkw) qk_tile(0), softmax1(0);
    __syncthreads();
    softmax2a(0);
    __syncthreads();
    softmax2b();
  }
  load_slot(4);
  load_slot(5);
  for (int tile = 0; tile < ntiles; tile++) {
    asm volatile("cp.async.wait_group 2;\n" ::
                     : "memory");               /* tile + 1's slots; tile + 2's may be in flight */
    __syncthreads();                            /* (a) */
    const bool fixv = FNUZ && fix_sm[tile & 1]; /* set by tile's qk_tile before (a) */
    if (tile + 1 < ntiles) {
      if (fixv)
        step1(tile, std::integral_constant<int, 1>());
      else
        step1(tile, std::integral_constant<int, 0>());
      if (qkw) softmax1(tile + 1);
      __syncthreads(); /* (b) */
      softmax2a(tile + 1);
      if (fixv)
        pv_steps(tile, NKV / 2, std::integral_constant<int, 1>());
      else
        pv_steps(tile, NKV / 2, std::integral_constant<int, 0>());
      __syncthreads(); /* (c) */
      softmax2b();
    } else {
      pv_scale();
      if (fixv)
        pv_steps(tile, 0, std::integral_constant<int, 1>());
      else
        pv_steps(tile, 0, std::integral_constant<int, 0>());
      __syncthreads(); /* (c): tile's slots free */
    }
    if (FNUZ && threadIdx.x == 0)
      fix_sm[tile & 1] = 0; /* read after (a) above; tile + 2's logits set it after the next (a) */
    load_slot(2 * tile + 6);
    load_slot(2 * tile + 7);
  }
  griddep_launch_dependents(); /* k_merge may start (it waits for this grid to end before reading)
                                */
  /* the split's result (every warp holds the same l and m) */
  finish_split<W, 2>(p, sm, acc, m, l, t, s, ti, 64 * warp, warp == 0 && j == 0);
}
#include "fast_ws.h"
#include "fast_floor.h"
#endif

/* ---- both: the merge and the bandwidth probe ---- */
/* the emulator's merge_one with the global-max rule (mlr__emu_merge_column's, bit for bit):
 * normalized partials (x = lse in ln units, mass 1, weights exp) or raw ones (p.raw: x = m in the
 * softmax's base-2 units, mass l, weights exp2, lse = (M + log2 sc) * ln 2). A block per (query
 * token, head), four columns a thread (128 threads: the T x H blocks fit the GPU in one wave; with
 * a column a thread and 512, they took three waves of latency-bound blocks, 5 to 11 us at bs = 32
 * and 64). The max (exact in any order), each split's weight and mass * weight's operands are
 * worked out once a block, MERGE_THREADS splits at a time, not once a column: the columns then
 * sum their terms in split order. */
__global__ void __launch_bounds__(MERGE_THREADS) k_merge(fparams p) {
  __shared__ float w_sm[MERGE_THREADS], ms_sm[MERGE_THREADS], red[MERGE_THREADS / 32];
  __shared__ bool in_sm[MERGE_THREADS]; /* the split is merged (its x > MLR_EMU_SKIP_BELOW) */
  const int64_t row = blockIdx.x, t = row / p.H;
  const int64_t ns = tok_of(p, t).nsplit;
  if (ns < 2) return; /* written by k_attn */
  griddep_wait();     /* k_attn's partials */
  const int d = threadIdx.x, eb = p.raw ? MLR_EXP_2 : MLR_EXP_E;
  const float *x = p.part_x + row * p.S;
  const float4 *part = (const float4 *)(p.part_o + row * p.S * DV) +
                       d; /* split k's columns 4d.. at part[k * DV / 4] */
  /* the partials MB splits at a time into registers, all loads in flight at once (one at a time
   * behind a test of the split's weight, they were a chain of L2 round trips: 32 splits, about
   * 2 us); the first MB before the max and the weights, which they do not need. Every split below
   * ns has its partial written (an empty one 0), so the loads need no test. */
  enum { MB = 16 };
  float4 pv[MB];
  auto load_chunk = [&](int64_t k0) {
#pragma unroll
    for (int u = 0; u < MB; u++)
      pv[u] = k0 + u < ns ? part[(k0 + u) * (DV / 4)] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  };
  /* this thread's split among the first MERGE_THREADS: its x and mass loaded beside the partials
   * (the mass, loaded after the max and its barrier, was an L2 round trip of its own on every
   * block's path) */
  const float x0 = d < ns ? x[d] : -INFINITY,
              ms0 = d < ns && p.raw ? p.part_sum[row * p.S + d] : 1.0f;
  load_chunk(0);
  /* splits with x <= MLR_EMU_SKIP_BELOW (empty ones; NaN) are skipped, as there; the thread's own
   * split first (x0, already loaded), then every MERGE_THREADS-th after it (a max: any order) */
  float M = x0 > MLR_EMU_SKIP_BELOW ? x0 : -INFINITY;
  for (int64_t s = d + MERGE_THREADS; s < ns; s += MERGE_THREADS) {
    const float xs = x[s];
    if (xs > MLR_EMU_SKIP_BELOW) M = fmaxf(M, xs);
  }
  for (int k = 16; k; k >>= 1) M = fmaxf(M, MLR_SHFL_XOR(M, k));
  if ((d & 31) == 0) red[d >> 5] = M;
  __syncthreads();
  for (int w = 0; w < MERGE_THREADS / 32; w++) M = fmaxf(M, red[w]);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sum = 0.0f, sum_unused = 0.0f;
  for (int64_t c0 = 0; c0 < ns; c0 += MERGE_THREADS) {
    __syncthreads(); /* the previous chunk's weights are read */
    if (c0 + d < ns) {
      const float xs = c0 == 0 ? x0 : x[c0 + d];
      in_sm[d] = xs > MLR_EMU_SKIP_BELOW;
      w_sm[d] = in_sm[d] ? mlr__emu_exp(eb, xs - M) : 0.0f; /* NaN for x = M = +Inf, as there */
      ms_sm[d] = c0 == 0 ? ms0 : p.raw ? p.part_sum[row * p.S + c0 + d] : 1.0f;
    }
    __syncthreads();
    const int n = ns - c0 < MERGE_THREADS ? (int)(ns - c0) : MERGE_THREADS;
    for (int k0 = 0; k0 < n;
         k0 += MB) { /* MERGE_THREADS is a multiple of MB: chunks stay within c0's */
      if (c0 + k0 > 0) load_chunk(c0 + k0);
#pragma unroll
      for (int u = 0; u < MB;
           u++) /* the terms in split order, as mlr__emu_merge_column; the sum once */
        if (k0 + u < n && in_sm[k0 + u]) {
          const float w = w_sm[k0 + u], ms = ms_sm[k0 + u];
          mlr__emu_merge_term(pv[u].x, ms, w, 0, &acc[0], &sum);
          mlr__emu_merge_term(pv[u].y, ms, w, 0, &acc[1], &sum_unused);
          mlr__emu_merge_term(pv[u].z, ms, w, 0, &acc[2], &sum_unused);
          mlr__emu_merge_term(pv[u].w, ms, w, 0, &acc[3], &sum_unused);
        }
    }
  }
  const float sc = fmaxf(sum, p.clamp);
  *(uint2 *)(p.o + row * DV + 4 * d) = merge_out4(acc, sc);
  if (d == 0) p.lse[row] = merged_lse(p.raw, M, sc);
}

/* the read-bandwidth probe and the read floor's readers: every 16-byte word of n read once, U
 * independent loads a thread in flight (the grid strides U times before using them). Timed
 * (CHECK = 0): an xor of the words, written only on a value it almost never has, so that the loads
 * stay and nothing else costs. CHECK = 1 (untimed, mlr_gpu_fast_read_floor's proof that the reader
 * reads each word once): the 32-bit lanes summed mod 2^64 into sink. */
template <int U, int CHECK = 0>
__global__ void __launch_bounds__(BW_THREADS)
    k_read(const uint4 *x, int64_t n, unsigned long long *sink) {
  uint32_t v = 0;
  unsigned long long sum = 0;
  const int64_t step = (int64_t)gridDim.x * BW_THREADS;
  int64_t i = blockIdx.x * (int64_t)BW_THREADS + threadIdx.x;
  for (; i + (U - 1) * step < n; i += U * step) {
    uint4 w[U];
#pragma unroll
    for (int u = 0; u < U; u++) w[u] = x[i + u * step];
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (CHECK)
        sum += (unsigned long long)w[u].x + w[u].y + w[u].z + w[u].w;
      else
        v ^= w[u].x ^ w[u].y ^ w[u].z ^ w[u].w;
    }
  }
  for (; i < n; i += step) { /* the last words, fewer than U strides of them */
    const uint4 w = x[i];
    if (CHECK)
      sum += (unsigned long long)w.x + w.y + w.z + w.w;
    else
      v ^= w.x ^ w.y ^ w.z ^ w.w;
  }
  if (CHECK)
    atomicAdd(sink, sum);
  else if (v == 0x9E3779B9u)
    sink[0] = v; /* almost never taken; the compiler cannot know */
}

/* the launch floor's kernels (mlr_gpu_launch_floor): an attention kernel that does nothing, and a
 * merge that does nothing after waiting for it (as k_merge waits for k_attn) */
__global__ void k_nop(fparams p) { (void)p; }
__global__ void k_nop_dep(fparams p) {
  (void)p;
  griddep_wait();
}

} // namespace

enum {
  MAXBUF = 24,
  FLUSH_BYTES = (MLR_FAST_AMD ? 512 : 256)
                << 20 /* above the H200's 50 MiB of L2, MI300X's 256 MiB Infinity Cache */
};

/* what a timed run needs besides its kernels (time_kernels): two events, the flush buffer, for
 * the clean flush a second buffer read after the flush's write, and the readers' sink. One a plan
 * (mlr_gpu_fast), one a probe (launch floor, read bandwidth), made once, not once a run. */
struct timer {
  hipEvent_t ev[2];
  void *flush, *clean;
  unsigned long long *sink;
};
static void timer_free(timer &tm) {
  for (int k = 0; k < 2; k++)
    if (tm.ev[k]) (void)hipEventDestroy(tm.ev[k]);
  (void)hipFree(tm.flush), (void)hipFree(tm.clean), (void)hipFree(tm.sink);
  tm = timer{};
}
/* what tm lacks of the events, the flush buffer and (clean) the clean flush's buffer and sink */
static mlr_status timer_init(timer &tm, int clean, mlr_error *err) {
  mlr_status st = MLR_OK;
  if (!tm.flush) GPU_TRY(hipMalloc(&tm.flush, FLUSH_BYTES));
  for (int k = 0; k < 2; k++)
    if (!tm.ev[k]) GPU_TRY(hipEventCreate(&tm.ev[k]));
  if (clean && !tm.clean) {
    GPU_TRY(hipMalloc(&tm.clean, FLUSH_BYTES));
    GPU_TRY(hipMemset(tm.clean, 0x5A, FLUSH_BYTES));
  }
  if (!tm.sink)
    GPU_TRY(hipMalloc((void **)&tm.sink,
                      8)); /* the readers' (k_read: the clean flush, the read floor) */
out:
  return st;
}

struct mlr_gpu_fast {
  fparams p;
  void *bufs[MAXBUF];
  int nbufs, dyn;
  int64_t T, H, B, S, nq;
  timer tm; /* mlr_gpu_fast_clean_flush adds the clean flush's buffer */
  int32_t *split_count, *split_len;
  float qscale_static;
  int ws;          /* k_attn_ws, not k_attn: the longest split has WS_MIN_TILES tiles or more */
  int64_t kv_read; /* bytes of KV the batches' tokens span (their rows, at most the pool's): the
                      read floor's */
  char kname[40];  /* NVIDIA: mlr_gpu_fast_kernels' answer, made once the plan is made */
};

static mlr_status dalloc(mlr_gpu_fast *f, void **ptr, size_t n, const void *src, mlr_error *err) {
  mlr_status st = MLR_OK;
  void *d = NULL;
  GPU_TRY(hipMalloc(&d, n > 0 ? n : 1));
  f->bufs[f->nbufs++] = d;
  if (src) GPU_TRY(hipMemcpy(d, src, n, hipMemcpyHostToDevice));
  *ptr = d;
out:
  return st;
}

extern "C" long long mlr_gpu_fast_splits(const mlr_gpu_fast *f) { return f ? (long long)f->S : 0; }
extern "C" const char *mlr_gpu_fast_kernels(const mlr_gpu_fast *f) {
  if (!f || f->T == 0) return "-";
#if MLR_FAST_AMD
  return f->S > 1 ? "k_attn_mfma+k_merge" : "k_attn_mfma";
#else
  return f->kname;
#endif
}

extern "C" void mlr_gpu_fast_free(mlr_gpu_fast *f) {
  if (!f) return;
  for (int k = 0; k < f->nbufs; k++) (void)hipFree(f->bufs[k]);
  timer_free(f->tm);
  free(f->split_count), free(f->split_len);
  free(f);
}

#if !MLR_FAST_AMD
/* a kernel launch's configuration, one definition for the launch (launch_pdl) and the occupancy
 * query of the cluster merge (mlr_gpu_fast_prepare): pdl, programmatic dependent launch;
 * cluster_y > 0, clusters of cluster_y blocks of grid.y. cfg points into at: not copied. */
struct launch_cfg {
  cudaLaunchConfig_t cfg;
  cudaLaunchAttribute at[2];
  launch_cfg(dim3 grid, unsigned threads, size_t smem, int pdl, unsigned cluster_y) : cfg(), at() {
    unsigned n = 0;
    if (pdl)
      at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization,
      at[n++].val.programmaticStreamSerializationAllowed = 1;
    if (cluster_y) {
      at[n].id = cudaLaunchAttributeClusterDimension;
      at[n].val.clusterDim.x = 1, at[n].val.clusterDim.y = cluster_y, at[n++].val.clusterDim.z = 1;
    }
    cfg.gridDim = grid, cfg.blockDim = dim3(threads), cfg.dynamicSmemBytes = smem, cfg.stream = 0;
    cfg.attrs = at, cfg.numAttrs = n;
  }
  launch_cfg(const launch_cfg &) = delete;
  launch_cfg &operator=(const launch_cfg &) = delete;
};

/* the attention kernel for the KV format, k_attn_ws for long splits (f->ws), the wgmma recipe's
 * variants (p.wg), its copies (p.lin), and its name as mlr_gpu_fast_kernels gives it (one choice,
 * so the name cannot drift from the kernel); their threads and dynamic shared memory below */
struct akernel {
  void (*fn)(fparams);
  const char *name;
};
static akernel attn_kernel(const fparams &p, int ws) {
  if (p.wg && ws)
    return p.lin == 1   ? akernel{k_attn_ws<0, 1, 1, 1>, "k_attn_ws_wg(copy_lin)"}
           : p.lin == 2 ? akernel{k_attn_ws<0, 1, 1, 2>, "k_attn_ws_wg(lin_copy)"}
                        : akernel{k_attn_ws<0, 1, 1>, "k_attn_ws_wg"};
  if (p.wg) return {k_attn<0, 1, 1>, "k_attn_wg"};
  if (ws && p.lin == 2)
    return {p.kvw == 2 ? k_attn_ws<0, 2, 0, 2>
            : p.fnuz   ? k_attn_ws<1, 1, 0, 2>
                       : k_attn_ws<0, 1, 0, 2>,
            "k_attn_ws(lin_copy)"};
  if (ws)
    return {p.kvw == 2 ? k_attn_ws<0, 2> : p.fnuz ? k_attn_ws<1, 1> : k_attn_ws<0, 1>, "k_attn_ws"};
  return {p.kvw == 2 ? k_attn<0, 2> : p.fnuz ? k_attn<1, 1> : k_attn<0, 1>, "k_attn"};
}
static size_t attn_smem(const fparams &p) { return p.wg ? (size_t)SMEM_WG : (size_t)SMEM; }
static unsigned attn_threads(const fparams &p, int ws) {
  return p.wg && ws ? (unsigned)NTHR_WSWG : (unsigned)NTHR;
}
#endif

/* log2(page) for a power-of-two page (kv_ref's shift), else -1 (kv_ref divides) */
static int page_shift(int64_t page) {
  if (page < 1 || (page & (page - 1)) != 0) return -1;
  int k = 0;
  while ((int64_t)1 << k < page) k++;
  return k;
}

/* tok_uniform's parameters in p (p.unq > 0) when they give each of the T tokens' entries, field for
 * field; else p.unq = 0 (ragged batches: the kernels read p.tok) */
static void tok_uniform_fit(const tokinfo *tok, int64_t T, const mlr_inputs *in, fparams &p) {
  p.unq = 0;
  const int64_t nq = in->B > 0 ? in->qo_indptr[1] - in->qo_indptr[0] : 0;
  if (T < 1 || nq < 1 || nq > T) return;
  const int64_t stride = in->B > 1 ? (int64_t)in->kv_indptr[1] - in->kv_indptr[0] : 0;
  if (stride < INT32_MIN || stride > INT32_MAX) return;
  const tokinfo u = tok[nq - 1]; /* batch 0's last token sees its full length */
  for (int64_t t = 0; t < T; t++) {
    const tokinfo v = tok_uniform(u, (int)nq, (int32_t)stride, t);
    if (v.L != tok[t].L || v.nsplit != tok[t].nsplit || v.slen != tok[t].slen ||
        v.base != tok[t].base)
      return;
  }
  p.tu = u, p.unq = (int)nq, p.ustride = (int32_t)stride;
}

/* a test override (MLAREF_FAST_WS, MLAREF_FAST_CLUSTER, MLAREF_FAST_TOKTABLE, MLAREF_FAST_QDIV: 0
 * or 1; MLAREF_FAST_LIN: 0, 1 or 2): one digit 0 .. max sets *v, anything else leaves it */
static void env_force(const char *name, int *v, int max = 1) {
  const char *e = getenv(name);
  if (e && e[0] >= '0' && e[0] <= '0' + max && e[1] == 0) *v = e[0] - '0';
}

#define DALLOC(ptr, n, src)                                                                        \
  do {                                                                                             \
    void *d_ = NULL;                                                                               \
    if ((st = dalloc(f, &d_, (size_t)(n), (src), err)) != MLR_OK) goto out;                        \
    *(void **)&(ptr) = d_;                                                                         \
  } while (0)

extern "C" mlr_status mlr_gpu_fast_prepare(const mlr_recipe *r, const mlr_inputs *in,
                                           mlr_gpu_fast **fp, mlr_error *err) {
  *fp = NULL;
  mlr_status st = mlr_gpu_fast_fit(r, in, err);
  if (st != MLR_OK) return st;
  char name[256];
  if ((st = mlr_gpu_device(name, sizeof name, err)) != MLR_OK) return st;
  mlr_gpu_fast *f = (mlr_gpu_fast *)calloc(1, sizeof *f);
  if (!f) return mlr_error_set(err, MLR_ENOMEM, "out of host memory for the fast kernel's plan");
  const int64_t T = in->T, H = in->H, B = in->B;
  tokinfo *tok = (tokinfo *)calloc((size_t)(T > 0 ? T : 1), sizeof(tokinfo));
  f->split_count = (int32_t *)calloc((size_t)B, 4), f->split_len = (int32_t *)calloc((size_t)B, 4);
  f->T = T, f->H = H, f->B = B, f->S = 1, f->nq = T * H * QK;
  fparams &p = f->p;
  if (!tok || !f->split_count || !f->split_len) {
    st = mlr_error_set(err, MLR_ENOMEM, "out of host memory for the fast kernel's tables");
    goto out;
  }
  for (int64_t b = 0; b < B; b++) {
    const int64_t L = mlr_inputs_kv_len(in, b), t0 = in->qo_indptr[b],
                  nq = in->qo_indptr[b + 1] - t0;
    int64_t ns, len;
    mlr_recipe_splits(r, B, T, L, &ns, &len);
    if (ns > MAX_SPLITS || len > INT32_MAX) {
      st = mlr_error_set(err, MLR_ERANGE,
                         "batch %lld: %lld splits of %lld tokens: the fast kernel's grid takes at "
                         "most %d splits of int32 lengths",
                         (long long)b, (long long)ns, (long long)len, (int)MAX_SPLITS);
      goto out;
    }
    if (ns > f->S) f->S = ns;
    if (len >= (int64_t)WS_MIN_TILES * (TILE / (in->kv_format == MLR_FMT_BF16 ? 2 : 1))) f->ws = 1;
    f->split_count[b] = (int32_t)ns, f->split_len[b] = (int32_t)len;
    f->kv_read += L;
    for (int64_t i = 0; i < nq; i++) {
      const int64_t Lt = L - (nq - 1 - i);
      tokinfo &ti = tok[t0 + i];
      ti.L = Lt > 0 ? Lt : 0, ti.nsplit = (int32_t)ns, ti.slen = (int32_t)len,
      ti.base = in->kv_indptr[b];
    }
  }
#if !MLR_FAST_AMD
  p.wg = r->qk_dot ==
         MLR_DOT_MMA_SM90_E4M3; /* the fit: fast-wgmma-a8w8 (k_attn<0, 1, 1>, k_attn_ws<0, 1, 1>) */
  /* the wgmma recipe: k_attn_ws at every split length (on the H200 it was as fast or faster than
   * k_attn<0, 1, 1> at each of the 8 bench shapes, BENCHMARKS.md session 12) */
  if (p.wg) f->ws = 1;
#ifndef MLR_FAST_WGMMA
  if (p.wg) {
    st = mlr_error_set(err, MLR_EDEVICE,
                       "recipe '%s' runs wgmma, which this build's GPU code lacks: build with "
                       "MLAREF_GPU_ARCHS=90a (the default)",
                       r->name);
    goto out;
  }
#endif
#endif
  env_force(
      "MLAREF_FAST_WS",
      &f->ws); /* k_attn or k_attn_ws (both exact to the recipe: tests run both on every input) */
#if !MLR_FAST_AMD
  /* k_attn_ws copies unpaged rows as contiguous chunks (the same bytes in the same places, so the
   * same results): the wgmma kernel by copy_lin (LIN = 1) when each batch's split is LIN_LO to
   * LIN_HI tiles, every k_attn_ws by lin_copy (LIN = 2) when each is longer (batches without KV
   * aside); MLAREF_FAST_LIN=0, 1 or 2 forces the row-wise copies, copy_lin (the wgmma kernel; else
   * row-wise) or lin_copy at any split length (tests run each) */
  if (f->ws && !in->kv_indices) {
    const int64_t tt = TILE / (in->kv_format == MLR_FMT_BF16 ? 2 : 1); /* a tile's tokens */
    int lo = 1, hi = 1;
    for (int64_t b = 0; b < B; b++) {
      const int64_t tiles = (f->split_len[b] + tt - 1) / tt;
      if (mlr_inputs_kv_len(in, b) > 0)
        lo &= tiles >= LIN_LO && tiles <= LIN_HI, hi &= tiles > LIN_HI;
    }
    p.lin = p.wg && lo ? 1 : hi ? 2 : 0;
    env_force("MLAREF_FAST_LIN", &p.lin, 2);
    if (p.lin == 1 && !p.wg) p.lin = 0;
  }
#endif
  if (T > INT32_MAX) {
    st = mlr_error_set(err, MLR_ERANGE,
                       "the fast kernel's grid takes at most %d query tokens (T=%lld)", INT32_MAX,
                       (long long)T);
    goto out;
  }
  if ((double)T * H * f->S * DV * 4 > 1e12) {
    st = mlr_error_set(err, MLR_ERANGE,
                       "the fast kernel's partials would exceed 1 TB (T=%lld, H=%lld, splits=%lld)",
                       (long long)T, (long long)H, (long long)f->S);
    goto out;
  }
  p.H = (int)H, p.S = f->S, p.page = in->page, p.pshift = page_shift(in->page),
  p.fnuz = in->kv_format == MLR_FMT_E4M3FNUZ, p.kvw = in->kv_format == MLR_FMT_BF16 ? 2 : 1;
  p.qfp8 = r->q_format != MLR_Q_BF16,
  p.qfmt = r->q_format == MLR_Q_E4M3FNUZ ? MLR_FMT_E4M3FNUZ : MLR_FMT_E4M3;
  p.qstatic = r->q_scale == MLR_QS_STATIC, f->dyn = p.qfp8 && !p.qstatic;
  p.raw = !r->partial_normalized; /* the fit: the NVIDIA recipes' raw partials, the AMD ones'
                                     normalized */
  p.qin = !p.qfp8; /* fp8 Q by k_qprep; on NVIDIA static e4m3 Q may be made in k_attn (below) */
  p.c0 = (float)(MLR_EMU_SM_SCALE *
                 MLR_EMU_LOG2E_D); /* softmax.exp = 2: log2 e folded into the scale */
  p.kvs = p.fnuz && !MLR_FAST_AMD
              ? in->kv_scale * 0.5f
              : in->kv_scale; /* exact: a power of two (NVIDIA reads FNUZ codes as OCP) */
  p.clamp = (float)r->softmax_clamp;
  f->qscale_static = p.static_scale =
      p.qfp8 ? (float)(r->q_absmax / (double)mlr_format_max((mlr_format)p.qfmt)) : 1.0f;
#if !MLR_FAST_AMD
  /* static e4m3 Q is quantized in k_attn by the reciprocal (fast_cvt.h) where that gives the
   * division's codes and clamps on every bf16 code (checked here: 2^16 codes); else k_qprep divides
   * (as for e4m3fnuz Q). MLAREF_FAST_QDIV=1 takes k_qprep anyway (tests run both). The attention
   * kernels carry no division: the build with both paths in them had 9% more code in the wgmma
   * kernel than the one without and was 2.5 us slower at bs=4, kv=8192 (BENCHMARKS.md, session 15).
   */
  if (p.qfp8 && p.qstatic && p.qfmt == MLR_FMT_E4M3) {
    int qdiv = 0;
    env_force("MLAREF_FAST_QDIV", &qdiv);
    p.qin = !qdiv && mlr__q_recip_fits(p.static_scale, &p.qrecip);
  }
#endif
  DALLOC(p.q, (size_t)f->nq * 2, in->q);
  DALLOC(p.qop, (size_t)f->nq * 2, NULL);
  DALLOC(p.kv, (size_t)in->N * QK * p.kvw, in->kv);
  f->kv_read = (f->kv_read < in->N ? f->kv_read : in->N) * QK *
               p.kvw; /* a page table may name a page twice */
  if (in->kv_indices) DALLOC(p.kv_indices, (size_t)in->kv_indptr[B] * 4, in->kv_indices);
  DALLOC(p.tok, (size_t)T * sizeof(tokinfo), tok);
  tok_uniform_fit(tok, T, in, p);
  {
    int table = 0; /* MLAREF_FAST_TOKTABLE=1: the kernels read the table even where tok_uniform fits
                      (tests run both) */
    env_force("MLAREF_FAST_TOKTABLE", &table);
    if (table) p.unq = 0;
  }
  DALLOC(p.amax, 4, NULL);
  DALLOC(p.clipped, 8, NULL);
  if (f->S > 1) {
    DALLOC(p.part_o, (size_t)(T * H * f->S * DV) * 4, NULL);
    DALLOC(p.part_x, (size_t)(T * H * f->S) * 4, NULL);
    if (p.raw) DALLOC(p.part_sum, (size_t)(T * H * f->S) * 4, NULL);
  }

  DALLOC(p.o, (size_t)(T * H * DV) * 2, NULL);
  DALLOC(p.lse, (size_t)(T * H) * 4, NULL);
  GPU_TRY(hipMemset(p.o, 0xFF,
                    (size_t)(T * H * DV) *
                        2)); /* the NaN pattern no step writes (checked by the result) */
  GPU_TRY(hipMemset(p.lse, 0xFF, (size_t)(T * H) * 4));
  if ((st = timer_init(f->tm, 0, err)) != MLR_OK) goto out;
#if !MLR_FAST_AMD
  /* every attention kernel may use its shared memory beyond the 48 KiB default (set before the
   * cluster query below, which needs the launched one's). Set on each of attn_kernel's choices, not
   * only the launched one: the call loads the kernel's code (CUDA's lazy loading), and with only
   * the launched kernel loaded, the shapes that launch k_merge ran up to 2.3 us slower (H200, bs=4
   * kv=8192 20.4 -> 22.7 us; geomean 42.0 -> 43.1; CUDA_MODULE_LOADING=EAGER gave the old times
   * back: BENCHMARKS.md, session 23). The choices are enumerated through attn_kernel itself, so no
   * list of instantiations can drift from it. */
  for (int c = 0; c < 48; c++) {
    fparams q = p;
    const int ws = c & 1;
    q.wg = c >> 1 & 1, q.kvw = 1 + (c >> 2 & 1), q.fnuz = c >> 3 & 1,
    q.lin = c >> 4; /* lin 0, 1, 2 */
    GPU_TRY(hipFuncSetAttribute((const void *)attn_kernel(q, ws).fn,
                                hipFuncAttributeMaxDynamicSharedMemorySize, (int)attn_smem(q)));
  }
  if (f->S >= 2 && f->S <= CL_MAX) {
    /* the merge in the cluster (cluster_merge) when the T clusters of S blocks run in one wave
     * (one block an SM, a cluster within a GPC: fewer clusters of 4 fit than 132 / 4, and bs=32
     * with 4 splits ran in two waves, twice the time); MLAREF_FAST_CLUSTER=0 or 1 forces k_merge
     * or the cluster (both exact to the recipe: tests run both) */
    const launch_cfg lc(dim3((unsigned)T, (unsigned)f->S), attn_threads(p, f->ws), attn_smem(p), 0,
                        (unsigned)f->S);
    int ncl = 0;
    GPU_TRY(cudaOccupancyMaxActiveClusters(&ncl, attn_kernel(p, f->ws).fn, &lc.cfg));
    p.cl = (int64_t)ncl >= T;
    env_force("MLAREF_FAST_CLUSTER", &p.cl);
  }
  /* the kernels as mlr_gpu_fast_launch launches them: attn_kernel's, then the merge */
  snprintf(f->kname, sizeof f->kname, "%s%s", attn_kernel(p, f->ws).name,
           f->S <= 1 ? ""
           : p.cl    ? "+cluster"
                     : "+k_merge");
#endif
  st = MLR_OK;
out:
  free(tok);
  if (st != MLR_OK)
    mlr_gpu_fast_free(f);
  else
    *fp = f;
  return st;
}

extern "C" mlr_status mlr_gpu_fast_clean_flush(mlr_gpu_fast *f, mlr_error *err) {
  return timer_init(f->tm, 1, err);
}

#if !MLR_FAST_AMD
/* a launch that may begin before the previous kernel in the stream ends (griddep_wait) */
static cudaError_t launch_pdl(void (*k)(fparams), dim3 grid, unsigned threads, size_t smem,
                              const fparams &p, unsigned cluster_y = 0) {
  const launch_cfg lc(grid, threads, smem, 1, cluster_y); /* cluster_y blocks of grid.y a cluster */
  return cudaLaunchKernelEx(&lc.cfg, k, p);
}
#endif

/* The device-event time, in microseconds, of the kernels enqueue() puts on the stream (it
 * returns an mlr_status, its failing call named in err), the L2 first evicted by writing flush_val
 * over tm.flush (not timed; flush_val < 0: no flush), then, when tm has the clean flush, by reading
 * tm.clean (FLUSH_BYTES, not timed either): the write alone leaves the L2 full of the flush's dirty
 * lines, which the timed kernels write back as they evict them (what the seeds' do_bench, zeroing a
 * 256 MiB buffer, does too); after the read the L2 holds clean lines. One definition for the fast
 * kernel's launch, the launch floor and the read bandwidth, so all three are timed alike. */
template <class F>
static mlr_status time_kernels(const timer &tm, int flush_val, F enqueue, double *us,
                               mlr_error *err) {
  mlr_status st = MLR_OK;
  float ms = 0.0f;
  if (flush_val >= 0) GPU_TRY(hipMemset(tm.flush, flush_val & 0xFF, FLUSH_BYTES));
  if (flush_val >= 0 && tm.clean) {
    k_read<1><<<CLEAN_BLOCKS, BW_THREADS>>>((const uint4 *)tm.clean, FLUSH_BYTES / 16, tm.sink);
    GPU_TRY(hipGetLastError());
  }
  GPU_TRY(hipEventRecord(tm.ev[0], 0));
  if ((st = enqueue()) != MLR_OK) goto out;
  GPU_TRY(hipEventRecord(tm.ev[1], 0));
  GPU_TRY(hipEventSynchronize(tm.ev[1]));
  GPU_TRY(hipEventElapsedTime(&ms, tm.ev[0], tm.ev[1]));
  *us = (double)ms * 1e3;
out:
  return st;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* the median over reps runs of time_kernels (run i flushes with the value i & 0xFF) */
template <class F>
static mlr_status median_kernels(int reps, const timer &tm, F enqueue, double *median_us,
                                 mlr_error *err) {
  mlr_status st = MLR_OK;
  double *t = (double *)calloc((size_t)(reps > 0 ? reps : 1), sizeof(double));
  if (!t) return mlr_error_set(err, MLR_ENOMEM, "out of host memory");
  for (int i = 0; i < reps; i++)
    if ((st = time_kernels(tm, i, enqueue, &t[i], err)) != MLR_OK) break;
  if (st == MLR_OK) {
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    *median_us = t[reps / 2];
  }
  free(t);
  return st;
}

extern "C" mlr_status mlr_gpu_fast_launch(mlr_gpu_fast *f, int flush_l2, double *us,
                                          mlr_error *err) {
  mlr_status st = MLR_OK;
  const fparams &p = f->p;
  double t = 0;
  GPU_TRY(hipMemset(p.clipped, 0, 8));
  GPU_TRY(hipMemset(p.amax, 0, 4));
  st = time_kernels(
      f->tm, flush_l2 ? flush_l2 & 0xFF : -1,
      [&]() { /* GPU_TRY sets the caller's st and err */
              if (f->dyn && f->nq > 0) {
                k_amax<<<AMAX_BLOCKS, AMAX_THREADS>>>(p, f->nq);
                GPU_TRY(hipGetLastError());
              }
              if (f->T > 0) {
                if (!p.qin) { /* bf16 Q and static e4m3 Q are made operands in k_attn: one kernel
                                 less on the path */
                  const int64_t n8 = f->nq / 8; /* H * 576 is a multiple of 8 */
                  k_qprep<<<(unsigned)((n8 + QPREP_THREADS - 1) / QPREP_THREADS), QPREP_THREADS>>>(
                      p, n8);
                  GPU_TRY(hipGetLastError());
                }
                /* k_attn and k_merge start early (programmatic dependent launch): k_attn's first KV
                 * loads and k_merge's launch overlap the kernel before; each waits for it where it
                 * reads its output */
                const dim3 grid((unsigned)f->T, (unsigned)f->S);
#if MLR_FAST_AMD
                k_attn_mfma<<<grid, MF_THR>>>(p);
                GPU_TRY(hipGetLastError());
                if (f->S > 1) {
                  k_merge<<<(unsigned)(f->T * f->H), MERGE_THREADS>>>(p);
                  GPU_TRY(hipGetLastError());
                }
#else
                GPU_TRY(launch_pdl(attn_kernel(p, f->ws).fn, grid, attn_threads(p, f->ws),
                                   attn_smem(p), p, p.cl ? (unsigned)f->S : 0));
                if (f->S > 1 && !p.cl)
                  GPU_TRY(launch_pdl(k_merge, dim3((unsigned)(f->T * f->H)), MERGE_THREADS, 0, p));
#endif
              }
            out:
              return st;
      },
      &t, err);
  if (st == MLR_OK && us) *us = t;
out:
  return st;
}

extern "C" mlr_status mlr_gpu_fast_result(mlr_gpu_fast *f, mlr_emu_result *res, mlr_error *err) {
  memset(res, 0, sizeof *res);
  mlr_status st = MLR_OK;
  const int64_t T = f->T, H = f->H, B = f->B, no = T * H * DV;
  res->T = T, res->H = H, res->B = B, res->S = f->S, res->out_format = MLR_OUT_BF16;
  res->o = malloc((size_t)(no > 0 ? no : 1) * 2);
  res->lse = (float *)malloc((size_t)(T * H > 0 ? T * H : 1) * 4);
  res->split_count = (int32_t *)malloc((size_t)B * 4),
  res->split_len = (int32_t *)malloc((size_t)B * 4);
  if (!res->o || !res->lse || !res->split_count || !res->split_len) {
    st = mlr_error_set(err, MLR_ENOMEM, "out of host memory for the outputs");
    goto out;
  }
  memcpy(res->split_count, f->split_count, (size_t)B * 4),
      memcpy(res->split_len, f->split_len, (size_t)B * 4);
  GPU_TRY(hipMemcpy(res->o, f->p.o, (size_t)no * 2, hipMemcpyDeviceToHost));
  GPU_TRY(hipMemcpy(res->lse, f->p.lse, (size_t)(T * H) * 4, hipMemcpyDeviceToHost));
  if (f->p.qfp8) {
    unsigned long long clipped = 0;
    unsigned int amax = 0;
    res->n_q_scales = 1;
    res->q_scales = (float *)malloc(sizeof(float));
    if (!res->q_scales) {
      st = mlr_error_set(err, MLR_ENOMEM, "out of host memory for the Q scale");
      goto out;
    }
    GPU_TRY(hipMemcpy(&amax, f->p.amax, 4, hipMemcpyDeviceToHost));
    GPU_TRY(hipMemcpy(&clipped, f->p.clipped, 8, hipMemcpyDeviceToHost));
    res->q_scales[0] =
        f->dyn ? mlr_task_scale(mlr_bits_f32(amax), mlr_format_max((mlr_format)f->p.qfmt))
               : f->qscale_static;
    res->q_clipped = (int64_t)clipped;
  }
  for (int64_t k = 0; k < no; k++) /* the all-ones pattern: a NaN no step writes */
    if (((const uint16_t *)res->o)[k] == 0xFFFFu) {
      st = mlr_error_set(err, MLR_EDEVICE, "the fast kernel left o[%lld][%lld][%lld] unwritten",
                         (long long)(k / DV / H), (long long)(k / DV % H), (long long)(k % DV));
      goto out;
    }
  for (int64_t k = 0; k < T * H; k++)
    if (mlr_f32_bits(res->lse[k]) == 0xFFFFFFFFu) {
      st = mlr_error_set(err, MLR_EDEVICE, "the fast kernel left lse[%lld][%lld] unwritten",
                         (long long)(k / H), (long long)(k % H));
      goto out;
    }
out:
  if (st != MLR_OK) mlr_emu_result_free(res);
  return st;
}

/* The readers of the read floor and the read bandwidth: k_read with 1, 4 or 8 loads a thread in
 * flight on 1 to 32 blocks of BW_THREADS an SM. The fewest blocks suit the small reads (one load a
 * thread, all issued at once: the launch, one round trip, the transfer), the most and the deeper
 * unrolls the large ones (more bytes in flight; on the H200 32 blocks and 8 loads read 2 GiB faster
 * than the 8 blocks and 1 load this probe used until session 18). */
static const int RF_BLOCKS[] = {1, 2, 4, 8, 16, 32}, RF_UNROLL[] = {1, 4, 8};

template <int CHECK>
static void read_words(int u, unsigned grid, const uint4 *x, int64_t n, unsigned long long *sink) {
  if (u == 1)
    k_read<1, CHECK><<<grid, BW_THREADS>>>(x, n, sink);
  else if (u == 4)
    k_read<4, CHECK><<<grid, BW_THREADS>>>(x, n, sink);
  else
    k_read<8, CHECK><<<grid, BW_THREADS>>>(x, n, sink);
}

/* The least, over the readers, of each one's median_kernels time reading x[0..n) (timed with tm's
 * flush), and the reader (*blocks_per_sm, *unroll). Each reader is first run untimed with CHECK =
 * 1: its sum of the words' 32-bit lanes must be want (mod 2^64), else MLR_EDEVICE (what names the
 * buffer): a reader that skipped or repeated a word does not time anything. */
static mlr_status best_reader(const timer &tm, const uint4 *x, int64_t n, unsigned long long want,
                              const char *what, int reps, double *us, int *blocks_per_sm,
                              int *unroll, mlr_error *err) {
  mlr_status st = MLR_OK;
  hipDeviceProp_t prop;
  double best = 0;
  unsigned long long got = 0;
  GPU_TRY(hipGetDeviceProperties(&prop, 0));
  for (int ui = 0; ui < (int)(sizeof RF_UNROLL / sizeof *RF_UNROLL) && st == MLR_OK; ui++)
    for (int b = 0; b < (int)(sizeof RF_BLOCKS / sizeof *RF_BLOCKS) && st == MLR_OK; b++) {
      const unsigned grid = (unsigned)(prop.multiProcessorCount * RF_BLOCKS[b]);
      const int u = RF_UNROLL[ui];
      double t = 0;
      GPU_TRY(hipMemset(tm.sink, 0, 8));
      read_words<1>(u, grid, x, n,
                    tm.sink); /* n = 0 (no KV) launches anyway: the floor is then a launch's */
      GPU_TRY(hipGetLastError());
      GPU_TRY(hipMemcpy(&got, tm.sink, 8, hipMemcpyDeviceToHost));
      if (got != want) {
        st = mlr_error_set(err, MLR_EDEVICE,
                           "the reader of %d blocks an SM and %d loads a thread summed %s's words "
                           "to %llu, not %llu: "
                           "it did not read each word once",
                           RF_BLOCKS[b], u, what, got, want);
        break;
      }
      st = median_kernels(
          reps, tm,
          [&]() {
            read_words<0>(u, grid, x, n, tm.sink);
            GPU_TRY(hipGetLastError());
          out:
            return st;
          },
          &t, err);
      if (st == MLR_OK && ((ui == 0 && b == 0) || t < best))
        best = t, *blocks_per_sm = RF_BLOCKS[b], *unroll = u;
    }
  if (st == MLR_OK) *us = best;
out:
  return st;
}

extern "C" mlr_status mlr_gpu_fast_read_floor(mlr_gpu_fast *f, int reps, double *us,
                                              int *blocks_per_sm, int *unroll, mlr_error *err) {
  mlr_status st = MLR_OK;
  const int64_t n = f->kv_read / 16; /* QK * kvw bytes a row: 36 or 72 words of 16 bytes */
  unsigned long long want = 0;
  uint32_t *host = (uint32_t *)malloc((size_t)(n > 0 ? n : 1) * 16);
  if (!host)
    return mlr_error_set(err, MLR_ENOMEM,
                         "out of host memory for the read floor's check (%lld bytes)",
                         (long long)n * 16);
  GPU_TRY(hipMemcpy(host, f->p.kv, (size_t)n * 16, hipMemcpyDeviceToHost));
  for (int64_t k = 0; k < 4 * n; k++) want += host[k]; /* mod 2^64, as the readers sum */
  st = best_reader(f->tm, (const uint4 *)f->p.kv, n, want, "the KV", reps, us, blocks_per_sm,
                   unroll, err); /* f->tm has its sink */
out:
  free(host);
  return st;
}

/* The plan floor (mlr_gpu_fast.h): k_skel (fast_floor.h) with the plan's grid, clusters and
 * merge, writing outputs of its own (the plan's o and lse are the last launch's result), first
 * run untimed and checked, then timed as mlr_gpu_fast_launch times the fast kernel. */
extern "C" int mlr_gpu_fast_has_plan_floor(void) { return !MLR_FAST_AMD; }
extern "C" mlr_status mlr_gpu_fast_plan_floor(mlr_gpu_fast *f, int reps, double *us,
                                              mlr_error *err) {
#if MLR_FAST_AMD
  (void)f, (void)reps, (void)us;
  return mlr_error_set(err, MLR_EDEVICE,
                       "the plan floor is built for NVIDIA only (cp.async, thread-block clusters), "
                       "not for the AMD variant");
#else
  mlr_status st = MLR_OK;
  const int64_t T = f->T, H = f->H, n = T * H;
  fparams q = f->p;
  tokinfo *tok = (tokinfo *)malloc((size_t)(T > 0 ? T : 1) * sizeof(tokinfo));
  float *lse = (float *)malloc((size_t)(n > 0 ? n : 1) * 4);
  uint16_t *o = (uint16_t *)malloc((size_t)(n > 0 ? n : 1) * DV * 2);
  void (*const k)(fparams) = q.kvw == 2 ? k_skel<2> : k_skel<1>;
  auto enqueue =
      [&]() { /* GPU_TRY sets st and err */
              if (T > 0) {
                GPU_TRY(launch_pdl(k, dim3((unsigned)T, (unsigned)f->S), NTHR, SMEM, q,
                                   q.cl ? (unsigned)f->S : 0));
                if (f->S > 1 && !q.cl)
                  GPU_TRY(launch_pdl(k_skel_merge, dim3((unsigned)n), MERGE_THREADS, 0, q));
              }
            out:
              return st;
      };
  q.o = NULL, q.lse = NULL;
  if (!tok || !lse || !o) {
    st = mlr_error_set(err, MLR_ENOMEM, "out of host memory for the plan floor's check");
    goto out;
  }
  GPU_TRY(hipMalloc((void **)&q.o, (size_t)(n > 0 ? n : 1) * DV * 2));
  GPU_TRY(hipMalloc((void **)&q.lse, (size_t)(n > 0 ? n : 1) * 4));
  GPU_TRY(
      hipMemset(q.o, 0xFF,
                (size_t)n * DV *
                    2)); /* the all-ones pattern, which no output is (a count, or sums of bytes) */
  GPU_TRY(hipMemset(q.lse, 0xFF, (size_t)n * 4));
  GPU_TRY(hipFuncSetAttribute((const void *)k, hipFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  /* untimed first: every output written, every row's lse its token's length */
  if ((st = enqueue()) != MLR_OK) goto out;
  GPU_TRY(hipDeviceSynchronize());
  GPU_TRY(hipMemcpy(o, q.o, (size_t)n * DV * 2, hipMemcpyDeviceToHost));
  GPU_TRY(hipMemcpy(lse, q.lse, (size_t)n * 4, hipMemcpyDeviceToHost));
  if (T > 0 && !q.unq)
    GPU_TRY(hipMemcpy(tok, q.tok, (size_t)T * sizeof(tokinfo),
                      hipMemcpyDeviceToHost)); /* else worked out below */
  for (int64_t r = 0; r < n; r++) {
    const tokinfo ti = q.unq ? tok_uniform(q.tu, q.unq, q.ustride, r / H) : tok[r / H];
    if (lse[r] != (float)ti.L) {
      st = mlr_error_set(err, MLR_EDEVICE,
                         "the plan floor's kernels counted %.0f KV rows for query token %lld, head "
                         "%lld, not its %lld",
                         (double)lse[r], (long long)(r / H), (long long)(r % H), (long long)ti.L);
      goto out;
    }
    for (int c = 0; c < DV; c++)
      if (o[r * DV + c] == 0xFFFFu) {
        st = mlr_error_set(err, MLR_EDEVICE,
                           "the plan floor's kernels left o[%lld][%lld][%d] unwritten",
                           (long long)(r / H), (long long)(r % H), c);
        goto out;
      }
  }
  st = median_kernels(reps, f->tm, enqueue, us, err);
out:
  (void)hipFree(q.o), (void)hipFree(q.lse);
  free(tok), free(lse), free(o);
  return st;
#endif
}

extern "C" mlr_status mlr_gpu_launch_floor(int reps, double *one_us, double *chain_us,
                                           mlr_error *err) {
  mlr_status st = MLR_OK;
  hipDeviceProp_t prop;
  fparams p = {}; /* the kernels' argument block, as large as the fast kernel's */
  timer tm = {};  /* the flush as the fast kernel's default (a write: nothing here reads memory) */
  GPU_TRY(hipGetDeviceProperties(&prop, 0));
  if ((st = timer_init(tm, 0, err)) != MLR_OK) goto out;
  for (int chain = 0; chain < 2 && st == MLR_OK; chain++) {
    /* one block of NTHR threads an SM (a full wave, as the larger shapes' attention), launched as
     * mlr_gpu_fast_launch launches its kernels */
    const dim3 grid((unsigned)prop.multiProcessorCount);
    st = median_kernels(
        reps, tm,
        [&]() {
#if MLR_FAST_AMD
          k_nop<<<grid, NTHR>>>(p);
          GPU_TRY(hipGetLastError());
          if (chain) {
            k_nop_dep<<<grid, MERGE_THREADS>>>(p);
            GPU_TRY(hipGetLastError());
          }
#else
          GPU_TRY(launch_pdl(k_nop, grid, NTHR, 0, p));
          if (chain) GPU_TRY(launch_pdl(k_nop_dep, grid, MERGE_THREADS, 0, p));
#endif
        out:
          return st;
        },
        chain ? chain_us : one_us, err);
  }
out:
  timer_free(tm);
  return st;
}

extern "C" mlr_status mlr_gpu_read_bandwidth(int reps, double *bytes_per_s, mlr_error *err) {
  mlr_status st = MLR_OK;
  const int64_t n = (int64_t)2 << 30;
  void *x = NULL;
  double us = 0;
  int blocks = 0, unroll = 0;
  /* the clean flush: after the flush's write alone the read would also write back up to the L2's
   * size (50 MiB on the H200) of the flush's dirty lines, and count it as reading time */
  timer tm = {};
  if ((st = timer_init(tm, 1, err)) != MLR_OK) goto out;
  GPU_TRY(hipMalloc(&x, (size_t)n));
  GPU_TRY(hipMemset(x, 0x5A, (size_t)n));
  /* every 32-bit lane is 0x5A5A5A5A: n / 4 of them */
  st = best_reader(tm, (const uint4 *)x, n / 16, (unsigned long long)(n / 4) * 0x5A5A5A5Aull,
                   "the 2 GiB buffer", reps, &us, &blocks, &unroll, err);
  if (st == MLR_OK) *bytes_per_s = (double)n / (us * 1e-6);
out:
  timer_free(tm);
  (void)hipFree(x);
  return st;
}
