/* fast_common.cuh: what every translation unit of the fast kernel (mlr_gpu_fast.h says what it
 * computes) and its benchmark probes (gpu/bench) share: the tile and shared-memory geometry, the
 * token table, the kernels' argument block fparams, programmatic dependent launch, the KV row
 * lookup and the merge's output helpers. Both vendors: NVIDIA sm_90a, and in a HIP build the AMD
 * (MFMA) variant.
 *
 * The fast kernel, a translation unit a job (kernels of one file are launched from another through
 * the small host functions fast_host.cuh declares):
 *   qprep.cu    k_amax (the dynamic Q scale: max |q|, an atomic max of the bit patterns) and, on
 *               NVIDIA, k_qprep (Q's fp16 operand codes once per element, for the dynamic scale
 *               and e4m3fnuz Q; bf16 Q and static e4m3 Q are made operands inside the attention
 *               kernel by hardware conversions, fast_cvt.h: one kernel less)
 *   attn.cu     k_attn (NVIDIA): a block per (query token, split), 8 warps doing logits and PV
 *   attn_ws.cu  k_attn_ws (NVIDIA): the same operations in the same order, warp-specialised (logit
 *               warps and PV warps on different tiles at once), for long splits
 *   attn_rows.cu  k_attn_rows (NVIDIA): the wgmma recipes with a batch's 64 rows a block, the rows
 *               as wgmma's M (fast-wgmma-a8w8 at 64 and 128 heads, fast-wgmma-fp8 always)
 *   merge.cu    k_merge: the splits' merge, a block per (query token, head); cluster_merge
 *               (fast_cluster.cuh) is the same merge inside the attention kernel
 *   mfma.cu     the AMD variant (HIP builds only): its k_qprep and k_attn_mfma
 *   host.cu     the plan (mlr_gpu_fast_prepare), the launch, the results
 *   timer.cu    the device-event timing and the L2 flush of a timed launch
 *   opts.c      the variant options (mlr_gpu_fast_opts), pure C
 *   fast_recipe.c  the recipes and the fit, pure C
 * Headers: fast_sm90.cuh (NVIDIA primitives: the KV ring, copies, ldmatrix, mma.sync, fp8
 * conversions), fast_wgmma.cuh (the wgmma logits), fast_cluster.cuh (the cluster merge),
 * fast_attn.cuh (the pieces k_attn and k_attn_ws share), fast_host.cuh (the host side's), and
 * fast_cvt.h, fast_div.h (conversions and the division, checked by gpu/probes/cvt_probe.cu). */
#ifndef MLR_FAST_COMMON_CUH
#define MLR_FAST_COMMON_CUH

#include "../hip_compat.h"
/* after the runtime headers: mlr_base.h's memcpy must be the device-callable one */
#include "../gpu_try.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_emu_ops.h"
#include "mlr_gpu.h"
#include "fast_div.h"
#include "mlr_gpu_fast.h"

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#define MLR_FAST_AMD 1 /* the MFMA variant (mfma.cu); else NVIDIA sm_90 */
#else
#define MLR_FAST_AMD 0
#include "fast_cvt.h"
#endif

namespace mlr_fast {

enum {
  QK = MLR_EMU_QK_DIM,
  DV = MLR_EMU_V_DIM,
  NKB = QK / 16,
  TILE = 128,
  NWARP = 8,
  NTHR = 32 * NWARP
};
enum { NTHR_WSWG = 32 * 12 }; /* k_attn_ws with the wgmma logits: 4 logit warps, 8 PV warps */
enum { NTHR_ROWS = 128 * 3 }; /* k_attn_rows: two computing warpgroups, a copying one */
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
/* the most splits a token's thread-block cluster merges (fast_cluster.cuh): 8, the portable
 * cluster size */
enum { CL_MAX = 8 };
/* the split length, in tiles, from which k_attn_ws runs instead of k_attn: below it the
 * warp-specialised kernel's longer straight-line code (each warp fetches its own) costs more than
 * it gains. Chosen by timing `mlaref bench gpu --variant ws=0` against `--variant ws=1` on an H200
 * at 16, 32 and 64 tiles a split (level at 32). */
enum { WS_MIN_TILES = 32 };
/* unpaged KV: the split lengths, in tiles, at which k_attn_ws copies the rows as contiguous chunks:
 * the wgmma kernel by copy_lin (LIN = 1) at LIN_LO to LIN_HI tiles, every k_attn_ws by lin_copy
 * (LIN = 2) above LIN_HI (copy_lin's address arithmetic delays the PV on long splits, lin_copy's
 * set-up costs more than it saves on short ones). Chosen by timing `mlaref bench gpu` with
 * `--variant lin=0`, `lin=1` and `ws=1,lin=2` on an H200 at 1 to 64 tiles a split. */
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
/* k_attn_rows (attn_rows.cu): two KV tile buffers, Q's e4m3 codes for 64 rows (the logits' A), P
 * (fp16, 64 rows x 128 tokens: the PV's B; k_attn_rows<1>'s e4m3 P its first half), the two
 * warpgroups' row maxima [2][64], the groups' row sums [64][8], alpha [64], the final m and l
 * [64][2], the two tile buffers' mbarriers */
enum {
  RR = 64,   /* the rows a block */
  RPART = 2, /* a tile buffer is handed back and copied into in RPART parts of TILE / RPART rows
                (halves: quarters only add barriers, the copies landing in time already) */
  R_Q8 = 2 * TILE * QK,
  R_P = R_Q8 + RR * QK,
  R_MAX = R_P + RR * TILE * 2,
  R_SUM = R_MAX + 2 * RR * 4,
  R_ALPHA = R_SUM + RR * 8 * 4,
  R_ML = R_ALPHA + RR * 4,
  R_MBAR = R_ML + RR * 2 * 4,
  SMEM_ROWS = R_MBAR + 2 * 8
};
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
  ti.L = L > 0 ? L : 0;
  ti.base = (int32_t)(u.base + b * stride);
  return ti;
}

struct fparams {
  int H, qfp8, qfmt, qstatic, fnuz, kvw; /* kvw: bytes a KV value (1 fp8, 2 bf16) */
  int G;   /* a token's groups of 16 heads, ceil(H / 16): grid x = T G (blk_token, blk_group) */
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
  int pshift;   /* log2(page) when page is a power of two (kv_ref shifts), else -1 */
  int lin;      /* NVIDIA, unpaged KV: k_attn_ws<.., LIN> (and the plan floor) copy the rows as
                   contiguous chunks: 1 copy_lin, 2 lin_copy */
  int rows, rc; /* NVIDIA, the wgmma recipes over batches of one q_len: k_attn_rows, a block a
                   batch's 64 rows (rc blocks a batch: grid x = batch x rc + block) */
  int rq;       /* every batch's q_len where they are all the same (k_attn_rows' batches), else 0 */
  int p8;       /* NVIDIA, recipe fast-wgmma-fp8: k_attn_rows<1>, the PV on wgmma's fp8 unit */
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
  int tma; /* NVIDIA, k_attn_rows: a tile's parts of contiguous rows copied by the tensor memory
              accelerator through tmap (attn_rows.cu's rows_part), else by cp.async */
  alignas(64) uint64_t tmap[16]; /* the KV pool's CUtensorMap (host.cu's plan_tma) */
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
#endif

/* the page of a split's token pos >= 0 (paged KV): for a power-of-two page the shift is the
 * quotient; a 64-bit division is a call of tens of instructions */
__device__ __forceinline__ int64_t kv_page(const fparams &p, int64_t pos) {
  return p.pshift >= 0 ? pos >> p.pshift : pos / p.page;
}
/* A KV row in two steps, so that a copy's issue waits for the page table and nothing before it
 * does: kv_ref starts the page's entry's load and keeps the row's offset in its page (unpaged: the
 * row itself, page id 0; past the split's end: offset -1, no load), kv_ref_row puts them together
 * when the copy is issued. The loaders read a tile's entries a tile ahead; were the row worked out
 * at once, the multiply would wait for the load right there, a round trip a tile in every loading
 * warp. */
struct kvref {
  int64_t off;
  int32_t pid;
};
__device__ __forceinline__ kvref kv_ref(const fparams &p, int32_t base, int64_t pos, bool valid) {
  if (!valid) return {-1, 0};
  if (!p.kv_indices) return {base + pos, 0};
  const int64_t pg = kv_page(p, pos);
  return {pos - pg * p.page, p.kv_indices[base + pg]};
}
/* the row, or -1 (offset -1, page id 0) */
__device__ __forceinline__ int64_t kv_ref_row(const fparams &p, const kvref &r) {
  return (int64_t)r.pid * p.page + r.off;
}
/* A block's query token and group of heads: grid x = t G + g, so that a token's groups are
 * dispatched side by side and read the split's KV from L2 after the first; group g holds heads
 * 16 g .. 16 g + 15, those below p.H (every token's head count and the rows' stride); 1..16 heads
 * are one group. A row's numerics do not depend on the other rows of its block, so the groups
 * change no bit. */
__device__ __forceinline__ int blk_token(const fparams &p) { return (int)blockIdx.x / p.G; }
__device__ __forceinline__ int blk_group(const fparams &p) { return (int)blockIdx.x % p.G; }
__device__ __forceinline__ int grp_heads(const fparams &p) {
  return min(16, p.H - 16 * blk_group(p));
}
/* query token t's head h of the block's group: its row of o and lse */
__device__ __forceinline__ int64_t head_row(const fparams &p, int64_t t, int h) {
  return t * p.H + 16 * (int64_t)blk_group(p) + h;
}
/* query token t's entry */
__device__ __forceinline__ tokinfo tok_of(const fparams &p, int64_t t) {
  return p.unq ? tok_uniform(p.tu, p.unq, p.ustride, t) : p.tok[t];
}
/* k_attn_rows' block (p.rows; batches of p.rq tokens, p.rc blocks a batch): rows r0 ..
 * r0 + nr - 1 of batch blockIdx.x / p.rc, whose first token is t0 (row r: token t0 + r / H, head
 * r % H, output row t0 H + r); tlast the block's last token, whose KV reaches farthest. One
 * definition for the kernel and its plan floor */
struct rows_blk {
  int r0, nr;
  int64_t t0, tlast;
};
__device__ __forceinline__ rows_blk rows_of_block(const fparams &p) {
  rows_blk k;
  k.r0 = RR * ((int)blockIdx.x % p.rc);
  k.nr = min(RR, p.rq * p.H - k.r0);
  k.t0 = (int64_t)((int)blockIdx.x / p.rc) * p.rq;
  k.tlast = k.t0 + (k.r0 + k.nr - 1) / p.H;
  return k;
}
/* the KV length of the token of the block's row i */
__device__ __forceinline__ int64_t rows_row_len(const fparams &p, const rows_blk &k, int i) {
  return tok_of(p, k.t0 + (k.r0 + i) / p.H).L;
}
/* a group of 32 lanes' count of Q values the clamp changed, added once (mine: this block counts;
 * every lane of the group calls) */
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
/* a split's lse (m + log2 lc) * ln 2: the output's (direct) or its partial's */
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
 * Taken by a lone split's store (16 values a row a thread); the merges divide their four values a
 * row a thread one by one, where the reciprocal saves nothing. */
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

/* the Q scale: 1 for bf16 Q, the static scale, or the task's from k_amax's max |q| */
__device__ __forceinline__ float q_scale(const fparams &p) {
  if (!p.qfp8) return 1.0f;
  return p.qstatic ? p.static_scale
                   : mlr_task_scale(mlr_bits_f32(*p.amax), mlr_format_max((mlr_format)p.qfmt));
}

} // namespace mlr_fast

#endif
