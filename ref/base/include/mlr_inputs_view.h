/* mlr_inputs_view.h: the input contract as plain views into memory (docs/design.md, data flow).
 * Every module that computes on inputs (ref/emulate, ref/oracle, gpu/) reads this struct; fixtures/
 * inputs fills it from a checked tensor file (mlr_inputs_check), so the model never sees a file.
 *
 *   q [T, H, 576] bf16 codes; kv [N, 576] fp8 codes or bf16 codes (kv_format says which);
 *   qo_indptr [B+1]; kv_indptr [B+1] in tokens, or in pages with a page table kv_indices and
 *   kv_last_page_len [B]. Batch b's query tokens are qo_indptr[b] .. qo_indptr[b+1]-1. */
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
  const int32_t *qo_indptr, *kv_indptr;
  const int32_t *kv_indices, *kv_last_page_len; /* the page table, NULL if absent */
  const uint16_t *kv_bf16;                      /* NULL if absent */
} mlr_inputs;

/** KV length (tokens) of batch b. */
static inline int64_t mlr_inputs_kv_len(const mlr_inputs *in, int64_t b) {
  const int64_t d = in->kv_indptr[b + 1] - in->kv_indptr[b];
  if (!in->kv_indices) return d;
  return d == 0 ? 0 : (d - 1) * in->page + in->kv_last_page_len[b];
}

/** KV row of token pos of batch b (through the page table when there is one). */
static inline int64_t mlr_inputs_kv_row(const mlr_inputs *in, int64_t b, int64_t pos) {
  if (!in->kv_indices) return in->kv_indptr[b] + pos;
  return (int64_t)in->kv_indices[in->kv_indptr[b] + pos / in->page] * in->page + pos % in->page;
}

#endif
