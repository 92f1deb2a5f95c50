/* host.cu: the fast kernel's host side (mlr_gpu_fast.h): the plan (mlr_gpu_fast_prepare: the
 * splits, the kernels and their variants, the device buffers), the launch of its kernels and the
 * results. The kernels are the other files' (fast_common.cuh lists them); this one launches them
 * through the functions fast_host.cuh declares. */
#include "fast_host.cuh"

#if !MLR_FAST_AMD
#include <cudaTypedefs.h> /* the driver's tensor map encoder, reached through the runtime */
#endif

using namespace mlr_fast;

namespace {

mlr_status dalloc(mlr_gpu_fast *f, void **ptr, size_t n, const void *src, mlr_error *err) {
  mlr_status st = MLR_OK;
  void *d = NULL;
  GPU_TRY(hipMalloc(&d, n > 0 ? n : 1));
  f->bufs[f->nbufs++] = d;
  if (src) GPU_TRY(hipMemcpy(d, src, n, hipMemcpyHostToDevice));
  *ptr = d;
out:
  return st;
}

#define DALLOC(ptr, n, src)                                                                        \
  do {                                                                                             \
    void *d_ = NULL;                                                                               \
    if ((st = dalloc(f, &d_, (size_t)(n), (src), err)) != MLR_OK) goto out;                        \
    *(void **)&(ptr) = d_;                                                                         \
  } while (0)

#if !MLR_FAST_AMD
/* a kernel launch's configuration, one definition for the launch (launch_pdl) and the occupancy
 * query of the cluster merge (plan_launch): pdl, programmatic dependent launch; cluster_y > 0,
 * clusters of cluster_y blocks of grid.y. cfg points into at: not copied. */
struct launch_cfg {
  cudaLaunchConfig_t cfg;
  cudaLaunchAttribute at[2];
  launch_cfg(dim3 grid, unsigned threads, size_t smem, int pdl, unsigned cluster_y) : cfg(), at() {
    unsigned n = 0;
    if (pdl) {
      at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster_y) {
      at[n].id = cudaLaunchAttributeClusterDimension;
      at[n].val.clusterDim.x = 1;
      at[n].val.clusterDim.y = cluster_y;
      at[n++].val.clusterDim.z = 1;
    }
    cfg.gridDim = grid;
    cfg.blockDim = dim3(threads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = 0;
    cfg.attrs = at;
    cfg.numAttrs = n;
  }
  launch_cfg(const launch_cfg &) = delete;
  launch_cfg &operator=(const launch_cfg &) = delete;
};

/* the attention kernel for the KV format, k_attn_ws for long splits (f->ws), the wgmma recipe's
 * variants (p.wg), its copies (p.lin), with its name; its threads and dynamic shared memory */
akernel attn_kernel(const fparams &p, int ws) {
  return p.rows ? attn_kernel_rows(p) : ws ? attn_kernel_ws(p) : attn_kernel_plain(p);
}
size_t attn_smem(const fparams &p) {
  return p.rows ? (size_t)SMEM_ROWS : p.wg ? (size_t)SMEM_WG : (size_t)SMEM;
}
unsigned attn_threads(const fparams &p, int ws) {
  return p.rows ? (unsigned)NTHR_ROWS : p.wg && ws ? (unsigned)NTHR_WSWG : (unsigned)NTHR;
}
#endif

/* log2(page) for a power-of-two page (kv_ref's shift), else -1 (kv_ref divides) */
int page_shift(int64_t page) {
  if (page < 1 || (page & (page - 1)) != 0) return -1;
  int k = 0;
  while ((int64_t)1 << k < page) k++;
  return k;
}

/* tok_uniform's parameters in p (p.unq > 0) when they give each of the T tokens' entries, field for
 * field; else p.unq = 0 (ragged batches: the kernels read p.tok) */
void tok_uniform_fit(const tokinfo *tok, int64_t T, const mlr_inputs *in, fparams &p) {
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
  p.tu = u;
  p.unq = (int)nq;
  p.ustride = (int32_t)stride;
}

/* each batch's splits (the recipe's rule) into f and each query token's entry into tok; f->ws when
 * the longest split has WS_MIN_TILES tiles or more; f->kv_read the KV rows the batches span */
mlr_status plan_splits(mlr_gpu_fast *f, const mlr_recipe *r, const mlr_inputs *in, tokinfo *tok,
                       mlr_error *err) {
  const int64_t T = in->T, B = in->B;
  for (int64_t b = 0; b < B; b++) {
    const int64_t L = mlr_inputs_kv_len(in, b), t0 = in->qo_indptr[b],
                  nq = in->qo_indptr[b + 1] - t0;
    int64_t ns, len;
    mlr_recipe_splits(r, B, T, in->H, L, &ns, &len);
    if (ns > MAX_SPLITS || len > INT32_MAX)
      return mlr_error_set(err, MLR_ERANGE,
                           "batch %lld: %lld splits of %lld tokens: the fast kernel's grid takes "
                           "at most %d splits of int32 lengths",
                           (long long)b, (long long)ns, (long long)len, (int)MAX_SPLITS);
    if (ns > f->S) f->S = ns;
    if (len >= (int64_t)WS_MIN_TILES * (TILE / (in->kv_format == MLR_FMT_BF16 ? 2 : 1))) f->ws = 1;
    f->split_count[b] = (int32_t)ns;
    f->split_len[b] = (int32_t)len;
    f->kv_read += L;
    for (int64_t i = 0; i < nq; i++) {
      const int64_t Lt = L - (nq - 1 - i);
      tokinfo &ti = tok[t0 + i];
      ti.L = Lt > 0 ? Lt : 0;
      ti.nsplit = (int32_t)ns;
      ti.slen = (int32_t)len;
      ti.base = in->kv_indptr[b];
    }
  }
  return MLR_OK;
}

/* the attention kernel: the wgmma recipe (p.wg), k_attn or k_attn_ws (f->ws) and, for k_attn_ws
 * over unpaged KV, its copies (p.lin); each the plan's choice unless o forces it */
mlr_status plan_kernel(mlr_gpu_fast *f, const mlr_recipe *r, const mlr_inputs *in,
                       const mlr_gpu_fast_opts *o, mlr_error *err) {
  (void)err; /* unused in the AMD build */
#if !MLR_FAST_AMD
  fparams &p = f->p;
  /* the fit: fast-wgmma-a8w8 (k_attn<0, 1, 1>, k_attn_ws<0, 1, 1>); k_attn_ws at every split
   * length, as fast or faster than k_attn<0, 1, 1> at each bench shape (`mlaref bench gpu` with
   * --variant ws=0 and ws=1) */
  p.wg = r->qk_dot == MLR_DOT_MMA_SM90_E4M3;
  p.p8 = p.wg && r->pv_dot == MLR_DOT_MMA_SM90_E4M3; /* fast-wgmma-fp8: k_attn_rows<1> only */
  /* a variant forcing another kernel on it: refused before any upload */
  if (p.p8 && (o->rows == 0 || o->ws >= 0 || o->lin >= 0))
    return mlr_error_set(err, MLR_EINVAL,
                         "recipe fast-wgmma-fp8 runs on k_attn_rows only, over batches of one "
                         "q_len: --variant rows=0, ws and lin name other kernels");
  if (p.wg) f->ws = 1;
#ifndef MLR_FAST_WGMMA
  if (p.wg)
    return mlr_error_set(err, MLR_EDEVICE,
                         "recipe '%s' runs wgmma, which this build's GPU code lacks: build with "
                         "MLAREF_GPU_ARCHS=90a (the default)",
                         r->name);
#endif
#else
  (void)r;
#endif
  if (o->ws >= 0) f->ws = o->ws; /* both exact to the recipe */
#if !MLR_FAST_AMD
  /* k_attn_ws copies unpaged rows as contiguous chunks (the same bytes in the same places, so the
   * same results): the wgmma kernel by copy_lin (LIN = 1) when each batch's split is LIN_LO to
   * LIN_HI tiles, every k_attn_ws by lin_copy (LIN = 2) when each is longer (batches without KV
   * aside); o->lin forces the row-wise copies, copy_lin (the wgmma kernel; else row-wise) or
   * lin_copy at any split length */
  if (f->ws && !in->kv_indices) {
    const int64_t tt = TILE / (in->kv_format == MLR_FMT_BF16 ? 2 : 1); /* a tile's tokens */
    int lo = 1, hi = 1;
    for (int64_t b = 0; b < f->B; b++) {
      const int64_t tiles = (f->split_len[b] + tt - 1) / tt;
      if (mlr_inputs_kv_len(in, b) > 0) {
        lo &= tiles >= LIN_LO && tiles <= LIN_HI;
        hi &= tiles > LIN_HI;
      }
    }
    p.lin = p.wg && lo ? 1 : hi ? 2 : 0;
    if (o->lin >= 0) p.lin = o->lin;
    if (p.lin == 1 && !p.wg) p.lin = 0;
  }
#else
  (void)in;
#endif
  return MLR_OK;
}

/* the kernels' parameters from the recipe and the inputs; on NVIDIA whether Q is made operands in
 * the attention kernel (p.qin) or by k_qprep */
void plan_params(mlr_gpu_fast *f, const mlr_recipe *r, const mlr_inputs *in,
                 const mlr_gpu_fast_opts *o) {
  fparams &p = f->p;
  p.H = (int)f->H;
  p.G = (int)head_groups(f->H);
  p.S = f->S;
  p.page = in->page;
  p.pshift = page_shift(in->page);
  p.fnuz = in->kv_format == MLR_FMT_E4M3FNUZ;
  p.kvw = in->kv_format == MLR_FMT_BF16 ? 2 : 1;
  p.qfp8 = r->q_format != MLR_Q_BF16;
  p.qfmt = r->q_format == MLR_Q_E4M3FNUZ ? MLR_FMT_E4M3FNUZ : MLR_FMT_E4M3;
  p.qstatic = r->q_scale == MLR_QS_STATIC;
  f->dyn = p.qfp8 && !p.qstatic;
  /* the fit: the NVIDIA recipes' raw partials, the AMD ones' normalized */
  p.raw = !r->partial_normalized;
  p.qin = !p.qfp8; /* fp8 Q by k_qprep; on NVIDIA static e4m3 Q may be made in k_attn (below) */
  p.c0 = (float)(MLR_EMU_SM_SCALE * MLR_EMU_LOG2E_D); /* softmax.exp = 2: log2 e in the scale */
  /* exact: a power of two (NVIDIA reads FNUZ codes as OCP, at twice their value) */
  p.kvs = p.fnuz && !MLR_FAST_AMD ? in->kv_scale * 0.5f : in->kv_scale;
  p.clamp = (float)r->softmax_clamp;
  p.static_scale =
      p.qfp8 ? (float)(r->q_absmax / (double)mlr_format_max((mlr_format)p.qfmt)) : 1.0f;
  f->qscale_static = p.static_scale;
#if !MLR_FAST_AMD
  /* static e4m3 Q is quantized in k_attn by the reciprocal (fast_cvt.h) where that gives the
   * division's codes and clamps on every bf16 code (checked here: 2^16 codes); else k_qprep divides
   * (as for e4m3fnuz Q), and o->qdiv = 1 takes k_qprep anyway. The attention kernels carry no
   * division: both paths in them would make the kernels larger and slower. */
  if (p.qfp8 && p.qstatic && p.qfmt == MLR_FMT_E4M3) {
    const int qdiv = o->qdiv == 1;
    p.qin = !qdiv && mlr__q_recip_fits(p.static_scale, &p.qrecip);
  }
#else
  (void)o;
#endif
}

/* the device buffers: the inputs uploaded, the token table (or tok_uniform's parameters), the
 * partials, the outputs pre-filled with the NaN pattern no step writes, the timer */
mlr_status plan_buffers(mlr_gpu_fast *f, const mlr_inputs *in, const tokinfo *tok,
                        const mlr_gpu_fast_opts *o, mlr_error *err) {
  mlr_status st = MLR_OK;
  fparams &p = f->p;
  const int64_t T = f->T, H = f->H, B = f->B;
  DALLOC(p.q, (size_t)f->nq * 2, in->q);
  DALLOC(p.qop, (size_t)f->nq * 2, NULL);
  DALLOC(p.kv, (size_t)in->N * QK * p.kvw, in->kv);
  f->nkv = in->N;
  /* a page table may name a page twice */
  f->kv_read = (f->kv_read < in->N ? f->kv_read : in->N) * QK * p.kvw;
  if (in->kv_indices) DALLOC(p.kv_indices, (size_t)in->kv_indptr[B] * 4, in->kv_indices);
  DALLOC(p.tok, (size_t)T * sizeof(tokinfo), tok);
  tok_uniform_fit(tok, T, in, p);
  if (o->toktable == 1) p.unq = 0; /* the table read even where tok_uniform fits */
  /* k_attn_rows' q_len, 0 where the batches' differ (mlr_inputs_one_q_len's -1) */
  p.rq = (int)mlr_inputs_one_q_len(in, NULL);
  if (p.rq < 0) p.rq = 0;
  DALLOC(p.amax, 4, NULL);
  DALLOC(p.clipped, 8, NULL);
  if (f->S > 1) {
    DALLOC(p.part_o, (size_t)(T * H * f->S * DV) * 4, NULL);
    DALLOC(p.part_x, (size_t)(T * H * f->S) * 4, NULL);
    if (p.raw) DALLOC(p.part_sum, (size_t)(T * H * f->S) * 4, NULL);
  }
  DALLOC(p.o, (size_t)(T * H * DV) * 2, NULL);
  DALLOC(p.lse, (size_t)(T * H) * 4, NULL);
  /* the NaN pattern no step writes (checked by the result) */
  GPU_TRY(hipMemset(p.o, 0xFF, (size_t)(T * H * DV) * 2));
  GPU_TRY(hipMemset(p.lse, 0xFF, (size_t)(T * H) * 4));
  st = timer_init(f->tm, 0, err);
out:
  return st;
}

#if !MLR_FAST_AMD
/* k_attn_rows' tensor map of the KV pool (p.tmap, p.tma): the pool as 576-byte rows, a box of 64
 * bytes x a half tile's rows (TILE / RPART) written with the 64-byte swizzle, which is the tile
 * buffers' layout (attn_rows.cu's kv_at), byte for byte the cp.async copies'. The driver's encoder
 * comes through the runtime: no link to libcuda. o->tma = 0 leaves every copy to cp.async. */
mlr_status plan_tma(mlr_gpu_fast *f, const mlr_gpu_fast_opts *o, mlr_error *err) {
  mlr_status st = MLR_OK;
  fparams &p = f->p;
  constexpr int HR = TILE / RPART; /* a half tile's rows */
  p.tma = p.rows && p.kvw == 1 && f->nkv >= HR && o->tma != 0;
  if (p.tma) {
    PFN_cuTensorMapEncodeTiled_v12000 enc = NULL;
    cudaDriverEntryPointQueryResult found;
    GPU_TRY(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void **)&enc, 12000,
                                             cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !enc)
      return mlr_error_set(err, MLR_EDEVICE, "GPU: the driver has no cuTensorMapEncodeTiled");
    const cuuint64_t dim[2] = {QK, (cuuint64_t)f->nkv}, stride[1] = {QK}; /* bytes */
    const cuuint32_t box[2] = {64, HR}, step[2] = {1, 1};
    /* encoded in its own aligned object (the plan is calloc'd: p.tmap is not certain to be) and
     * copied into the parameters, which the launch places at their 64-byte alignment */
    static_assert(sizeof(CUtensorMap) == sizeof p.tmap, "fparams' room for the tensor map");
    CUtensorMap m;
    const CUresult e = enc(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)p.kv, dim, stride, box,
                           step, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_64B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (e != CUDA_SUCCESS)
      return mlr_error_set(err, MLR_EDEVICE, "GPU: cuTensorMapEncodeTiled of the KV pool: error %d",
                           (int)e);
    memcpy(p.tmap, &m, sizeof m);
  }
out:
  return st;
}

/* the launch's last choices: the attention kernels' shared memory, the merge in the cluster or by
 * k_merge (p.cl), and the kernels' name */
mlr_status plan_launch(mlr_gpu_fast *f, const mlr_gpu_fast_opts *o, mlr_error *err) {
  mlr_status st = MLR_OK;
  fparams &p = f->p;
  /* k_attn_rows (its grid is batches x blocks of 64 rows: every batch the same q_len, p.rq): for
   * fast-wgmma-fp8 always (the one kernel with its PV); for fast-wgmma-a8w8 where the batches are
   * also uniform (tok_uniform: one KV length), with 64 or 128 heads and splits of 2 tiles or more:
   * faster there than a block a token and group of 16 heads, slower with fewer heads or one-tile
   * splits (`mlaref bench gpu` with --variant rows=0 and rows=1 at 16 and 128 heads, q_len 1 to 4,
   * H100). With a multiple of 64 heads no block holds two tokens' rows; where one does (causal
   * q_len > 1), V's rows past the earlier token's end meet its p = 0, which the unit skips unless V
   * holds a NaN code, so such a run is exact on inputs without NaN KV codes. o->rows forces either
   * where the batches have one q_len (both exact to the recipe); o->ws or o->lin, forcing the
   * other kernels, turn it off unless o->rows = 1 */
  p.rc = (int)((p.rq * f->H + RR - 1) / RR);
  /* (fast-wgmma-fp8's inputs have one q_len, its fit says; its variants were checked in
   * plan_kernel) */
  p.rows = p.wg && p.rq > 0 &&
           (p.p8 || o->rows == 1 ||
            (p.unq > 0 && o->rows < 0 && o->ws < 0 && o->lin < 0 && f->H % RR == 0 &&
             f->split_len[0] >= 2 * TILE));
  /* every attention kernel may use its shared memory beyond the 48 KiB default (set before the
   * cluster query below, which needs the launched one's). Set on each of attn_kernel's choices, not
   * only the launched one: the call loads the kernel's code (CUDA's lazy loading), and with only
   * the launched kernel loaded, the shapes that launch k_merge run slower (as CUDA_MODULE_LOADING=
   * EAGER shows). The choices are enumerated through attn_kernel itself, so no list of
   * instantiations can drift from it. */
  if ((st = plan_tma(f, o, err)) != MLR_OK) goto out;
  for (int c = 0; c < 50; c++) {
    fparams q = p;
    q.rows = c >= 48; /* the last two: k_attn_rows<0>, <1> */
    q.p8 = c == 49;
    const int ws = c & 1;
    q.wg = c >> 1 & 1;
    q.kvw = 1 + (c >> 2 & 1);
    q.fnuz = c >> 3 & 1;
    q.lin = (c >> 4) % 3; /* lin 0, 1, 2 */
    GPU_TRY(hipFuncSetAttribute((const void *)attn_kernel(q, ws).fn,
                                hipFuncAttributeMaxDynamicSharedMemorySize, (int)attn_smem(q)));
  }
  if (f->S >= 2 && f->S <= CL_MAX && !p.rows) {
    /* the merge in the cluster (cluster_merge) when the T clusters of S blocks run in one wave
     * (one block an SM, a cluster within a GPC: fewer clusters of 4 fit than 132 / 4, and clusters
     * in two waves take twice the time); o->cluster = 0 or 1 forces k_merge or the cluster (both
     * exact to the recipe) */
    const launch_cfg lc(attn_grid(f), attn_threads(p, f->ws), attn_smem(p), 0, (unsigned)f->S);
    int ncl = 0;
    GPU_TRY(cudaOccupancyMaxActiveClusters(&ncl, attn_kernel(p, f->ws).fn, &lc.cfg));
    p.cl = (int64_t)ncl >= f->T * head_groups(f->H);
    if (o->cluster >= 0) p.cl = o->cluster;
  }
  /* the kernels as mlr_gpu_fast_launch launches them: attn_kernel's, then the merge */
  snprintf(f->kname, sizeof f->kname, "%s%s", attn_kernel(p, f->ws).name,
           f->S <= 1 ? ""
           : p.cl    ? "+cluster"
                     : "+k_merge");
out:
  return st;
}
#endif

/* the kernels of one run, in stream order (time_kernels' enqueue) */
mlr_status enqueue_run(const mlr_gpu_fast *f, mlr_error *err) {
  mlr_status st = MLR_OK;
  const fparams &p = f->p;
  if (f->dyn && f->nq > 0) GPU_TRY(launch_amax(p, f->nq));
  if (f->T > 0) {
    /* bf16 Q and static e4m3 Q are made operands in k_attn: one kernel less on the path */
    if (!p.qin) GPU_TRY(launch_qprep(p, f->nq / 8)); /* H * 576 is a multiple of 8 */
    /* k_attn and k_merge start early (programmatic dependent launch): k_attn's first KV loads and
     * k_merge's launch overlap the kernel before; each waits for it where it reads its output */
    const dim3 grid = attn_grid(f);
#if MLR_FAST_AMD
    GPU_TRY(launch_attn_mfma(p, grid));
    if (f->S > 1) GPU_TRY(launch_merge(p, (unsigned)(f->T * f->H)));
#else
    GPU_TRY(launch_pdl(attn_kernel(p, f->ws).fn, grid, attn_threads(p, f->ws), attn_smem(p), p,
                       p.cl ? (unsigned)f->S : 0));
    if (f->S > 1 && !p.cl) GPU_TRY(launch_merge(p, (unsigned)(f->T * f->H)));
#endif
  }
out:
  return st;
}

/* the result's checks: every output element written (the all-ones pattern is a NaN no step
 * writes) */
mlr_status check_written(const mlr_emu_result *res, mlr_error *err) {
  const int64_t T = res->T, H = res->H, no = T * H * DV;
  for (int64_t k = 0; k < no; k++)
    if (((const uint16_t *)res->o)[k] == 0xFFFFu)
      return mlr_error_set(err, MLR_EDEVICE, "the fast kernel left o[%lld][%lld][%lld] unwritten",
                           (long long)(k / DV / H), (long long)(k / DV % H), (long long)(k % DV));
  for (int64_t k = 0; k < T * H; k++)
    if (mlr_f32_bits(res->lse[k]) == 0xFFFFFFFFu)
      return mlr_error_set(err, MLR_EDEVICE, "the fast kernel left lse[%lld][%lld] unwritten",
                           (long long)(k / H), (long long)(k % H));
  return MLR_OK;
}

} // namespace

#if !MLR_FAST_AMD
cudaError_t mlr_fast::launch_pdl(kernel_fn k, dim3 grid, unsigned threads, size_t smem,
                                 const fparams &p, unsigned cluster_y) {
  const launch_cfg lc(grid, threads, smem, 1, cluster_y); /* cluster_y blocks of grid.y a cluster */
  return cudaLaunchKernelEx(&lc.cfg, k, p);
}
#endif

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
  free(f->split_count);
  free(f->split_len);
  free(f);
}

#ifdef MLR_FAST_FAULTS
/* Planted faults, for the discrimination study only (builds with -DMLAREF_GPU_FAULTS=ON; the
 * product never has them): the variant fault=N makes the kernel wrong the way real kernels go
 * wrong: 1 drop-last (a query that sees its batch's every token reads one fewer), 2 causal-late
 * (a query short of them reads one more), 3 no-kv-scale (the KV scale never applied), 4
 * page-off-by-one (a batch's last page read through its previous page-table entry). fin: the
 * inputs as uploaded (idx: their page table where it changed, to free). */
static mlr_status plant_fault(mlr_gpu_fast *f, const mlr_inputs *in, tokinfo *tok, int fault,
                              mlr_inputs *fin, int32_t **idx, mlr_error *err) {
  *fin = *in;
  *idx = NULL;
  for (int64_t b = 0; (fault == 1 || fault == 2) && b < in->B; b++) {
    const int64_t L = mlr_inputs_kv_len(in, b);
    for (int64_t t = in->qo_indptr[b]; t < in->qo_indptr[b + 1]; t++) {
      if (fault == 1 && tok[t].L == L && L > 0) tok[t].L--;
      if (fault == 2 && tok[t].L < L) tok[t].L++;
    }
  }
  /* the scale left out: 1, or 0.5 where NVIDIA reads FNUZ codes as OCP at twice their value */
  if (fault == 3) f->p.kvs = f->p.fnuz && !MLR_FAST_AMD ? 0.5f : 1.0f;
  if (fault == 4 && in->kv_indices) {
    const int64_t np = in->kv_indptr[in->B];
    if (!(*idx = (int32_t *)malloc((size_t)(np > 0 ? np : 1) * 4)))
      return mlr_error_set(err, MLR_ENOMEM, "out of host memory for the planted fault");
    memcpy(*idx, in->kv_indices, (size_t)np * 4);
    for (int64_t b = 0; b < in->B; b++)
      if (in->kv_indptr[b + 1] - in->kv_indptr[b] >= 2)
        (*idx)[in->kv_indptr[b + 1] - 1] = (*idx)[in->kv_indptr[b + 1] - 2];
    fin->kv_indices = *idx;
  }
  return MLR_OK;
}
#endif

extern "C" mlr_status mlr_gpu_fast_prepare(const mlr_recipe *r, const mlr_inputs *in,
                                           const mlr_gpu_fast_opts *opts, mlr_gpu_fast **fp,
                                           mlr_error *err) {
  *fp = NULL;
  mlr_gpu_fast_opts o;
  mlr_gpu_fast_opts_init(&o);
  if (opts) o = *opts;
  mlr_status st = mlr_gpu_fast_opts_check(&o, err);
  if (st == MLR_OK) st = mlr_gpu_fast_fit(r, in, err);
  if (st != MLR_OK) return st;
  char name[256];
  if ((st = mlr_gpu_device(name, sizeof name, err)) != MLR_OK) return st;
  mlr_gpu_fast *f = (mlr_gpu_fast *)calloc(1, sizeof *f);
  if (!f) return mlr_error_set(err, MLR_ENOMEM, "out of host memory for the fast kernel's plan");
  const int64_t T = in->T, H = in->H, B = in->B;
  tokinfo *tok = (tokinfo *)calloc((size_t)(T > 0 ? T : 1), sizeof(tokinfo));
  f->split_count = (int32_t *)calloc((size_t)B, 4);
  f->split_len = (int32_t *)calloc((size_t)B, 4);
  f->T = T;
  f->H = H;
  f->B = B;
  f->S = 1;
  f->nq = T * H * QK;
  if (!tok || !f->split_count || !f->split_len) {
    st = mlr_error_set(err, MLR_ENOMEM, "out of host memory for the fast kernel's tables");
    goto out;
  }
  if ((st = plan_splits(f, r, in, tok, err)) != MLR_OK) goto out;
  if ((st = plan_kernel(f, r, in, &o, err)) != MLR_OK) goto out;
  if (T * head_groups(H) > INT32_MAX) {
    st = mlr_error_set(err, MLR_ERANGE,
                       "the fast kernel's grid takes at most %d query tokens x groups of 16 heads "
                       "(T=%lld, H=%lld)",
                       INT32_MAX, (long long)T, (long long)H);
    goto out;
  }
  if ((double)T * H * f->S * DV * 4 > 1e12) {
    st = mlr_error_set(err, MLR_ERANGE,
                       "the fast kernel's partials would exceed 1 TB (T=%lld, H=%lld, splits=%lld)",
                       (long long)T, (long long)H, (long long)f->S);
    goto out;
  }
  plan_params(f, r, in, &o);
#ifdef MLR_FAST_FAULTS
  {
    mlr_inputs fin;
    int32_t *idx;
    if ((st = plant_fault(f, in, tok, o.fault, &fin, &idx, err)) == MLR_OK)
      st = plan_buffers(f, &fin, tok, &o, err);
    free(idx);
    if (st != MLR_OK) goto out;
  }
#else
  if ((st = plan_buffers(f, in, tok, &o, err)) != MLR_OK) goto out;
#endif
#if !MLR_FAST_AMD
  st = plan_launch(f, &o, err);
#endif
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

extern "C" mlr_status mlr_gpu_fast_launch(mlr_gpu_fast *f, int flush_l2, double *us,
                                          mlr_error *err) {
  mlr_status st = MLR_OK;
  const fparams &p = f->p;
  double t = 0;
  GPU_TRY(hipMemset(p.clipped, 0, 8));
  GPU_TRY(hipMemset(p.amax, 0, 4));
  st = time_kernels(
      f->tm, flush_l2 ? flush_l2 & 0xFF : -1, [&]() { return enqueue_run(f, err); }, &t, err);
  if (st == MLR_OK && us) *us = t;
out:
  return st;
}

extern "C" mlr_status mlr_gpu_fast_result(mlr_gpu_fast *f, mlr_emu_result *res, mlr_error *err) {
  memset(res, 0, sizeof *res);
  mlr_status st = MLR_OK;
  const int64_t T = f->T, H = f->H, B = f->B, no = T * H * DV;
  res->T = T;
  res->H = H;
  res->B = B;
  res->S = f->S;
  res->out_format = MLR_OUT_BF16;
  res->o = malloc((size_t)(no > 0 ? no : 1) * 2);
  res->lse = (float *)malloc((size_t)(T * H > 0 ? T * H : 1) * 4);
  res->split_count = (int32_t *)malloc((size_t)B * 4);
  res->split_len = (int32_t *)malloc((size_t)B * 4);
  if (!res->o || !res->lse || !res->split_count || !res->split_len) {
    st = mlr_error_set(err, MLR_ENOMEM, "out of host memory for the outputs");
    goto out;
  }
  memcpy(res->split_count, f->split_count, (size_t)B * 4);
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
  st = check_written(res, err);
out:
  if (st != MLR_OK) mlr_emu_result_free(res);
  return st;
}
