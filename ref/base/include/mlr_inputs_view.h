/* mlr_inputs_view.h: the input contract as plain views into memory (docs/design.md, data flow).
 * Every module that computes on inputs (ref/emulate, ref/oracle, gpu/) reads this struct; fixtures/
 * inputs fills it from a checked tensor file (mlr_inputs_check), so the model never sees a file.
 *
 *   q [T, H, 576] bf16 codes, or fp8 codes q8 (q_format says which; fp8 Q's values are
 *   decode(code) x q_scale, the descale); kv [N, 576] fp8 codes or bf16 codes (kv_format says
 *   which); qo_indptr [B+1]; kv_indptr [B+1] in tokens, or in pages with a page table kv_indices
 *   and kv_last_page_len [B]. Batch b's query tokens are qo_indptr[b] .. qo_indptr[b+1]-1.
 *   Values: K = code x k_scale on columns 0..511 and x kpe_scale on the 64 rope columns,
 *   V = code x v_scale; logits = sm_scale x Q.K. causal (the default): token i of a batch's n sees
 * its first L - (n - 1 - i) KV tokens; not causal: all L. */
#ifndef MLR_INPUTS_VIEW_H
#define MLR_INPUTS_VIEW_H

#include <stdint.h>

typedef struct mlr_inputs {
  int64_t T, H, N, B, page, P; /* query tokens, heads, KV rows, batches, page size, pages */
  const uint16_t *q;
  const void *kv;
  int kv_format; /* an mlr_format: MLR_FMT_E4M3, MLR_FMT_E4M3FNUZ or MLR_FMT_BF16 */
  float kv_scale, q_scale;
  int has_q_scale;
  /* Zero in the fields below means "not given" (a zeroed struct is today's contract): read them
   * through the accessors, which supply the defaults. */
  float k_scale, v_scale, kpe_scale; /* default kv_scale, kv_scale, k_scale */
  double sm_scale;                   /* default 1/sqrt(576) = 1/24 */
  const uint8_t *q8;                 /* fp8 Q codes [T, H, 576] (then q is NULL), or NULL */
  int q_format;                      /* with q8: an mlr_format, MLR_FMT_E4M3 or E4M3FNUZ */
  int noncausal;                     /* 0: the causal rule above for q_len > 1; 1: all L */
  const int32_t *qo_indptr, *kv_indptr;
  const int32_t *kv_indices, *kv_last_page_len; /* the page table, NULL if absent */
  const uint16_t *kv_bf16;                      /* NULL if absent */
} mlr_inputs;

/** Batch 0's q_len where every batch has it (0 without batches); else -1, with *differ (may be
 *  NULL) the first batch whose q_len is another. */
static inline int64_t mlr_inputs_one_q_len(const mlr_inputs *in, int64_t *differ) {
  const int64_t q0 = in->B > 0 ? in->qo_indptr[1] - in->qo_indptr[0] : 0;
  for (int64_t b = 1; b < in->B; b++)
    if (in->qo_indptr[b + 1] - in->qo_indptr[b] != q0) {
      if (differ) *differ = b;
      return -1;
    }
  return q0;
}

/** KV length (tokens) of batch b. */
static inline int64_t mlr_inputs_kv_len(const mlr_inputs *in, int64_t b) {
  const int64_t d = in->kv_indptr[b + 1] - in->kv_indptr[b];
  if (!in->kv_indices) return d;
  return d == 0 ? 0 : (d - 1) * in->page + in->kv_last_page_len[b];
}

/* the scales, with their defaults */
static inline float mlr_inputs_k_scale(const mlr_inputs *in) {
  return in->k_scale != 0.0f ? in->k_scale : in->kv_scale;
}
static inline float mlr_inputs_v_scale(const mlr_inputs *in) {
  return in->v_scale != 0.0f ? in->v_scale : in->kv_scale;
}
static inline float mlr_inputs_kpe_scale(const mlr_inputs *in) {
  return in->kpe_scale != 0.0f ? in->kpe_scale : mlr_inputs_k_scale(in);
}
/* 1/sqrt(576) = 1/24 exactly in real numbers; 1.0 / 24.0 is its binary64 rounding, what Python's
 * 1 / math.sqrt(576) gives */
static inline double mlr_inputs_sm_scale(const mlr_inputs *in) {
  return in->sm_scale > 0.0 ? in->sm_scale : 1.0 / 24.0;
}

/** KV tokens query token i of n (of batch b, L tokens) sees. */
static inline int64_t mlr_inputs_visible(const mlr_inputs *in, int64_t L, int64_t n, int64_t i) {
  return in->noncausal ? L : L - (n - 1 - i);
}

/** KV row of token pos of batch b (through the page table when there is one). */
static inline int64_t mlr_inputs_kv_row(const mlr_inputs *in, int64_t b, int64_t pos) {
  if (!in->kv_indices) return in->kv_indptr[b] + pos;
  return (int64_t)in->kv_indices[in->kv_indptr[b] + pos / in->page] * in->page + pos % in->page;
}

/** What the inputs use of the contract beyond what mlaref's GPU kernels run (fp8 Q, an sm_scale,
 *  k/v/kpe scales apart from kv_scale, non-causal batches, more than 4 query tokens a batch), as
 *  words for a message; NULL if nothing. */
static inline const char *mlr_inputs_gpu_unsupported(const mlr_inputs *in) {
  if (in->q8) return "fp8 Q";
  if (mlr_inputs_sm_scale(in) != 1.0 / 24.0) return "an sm_scale other than 1/sqrt(576)";
  if (mlr_inputs_k_scale(in) != in->kv_scale || mlr_inputs_v_scale(in) != in->kv_scale ||
      mlr_inputs_kpe_scale(in) != in->kv_scale)
    return "k_scale, v_scale or kpe_scale apart from kv_scale";
  for (int64_t b = 0; b < in->B; b++) {
    const int64_t n = in->qo_indptr[b + 1] - in->qo_indptr[b];
    if (n > 4) return "more than 4 query tokens a batch";
    if (n > 1 && in->noncausal) return "non-causal batches";
  }
  return NULL;
}

#endif
