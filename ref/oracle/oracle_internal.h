/* What the three truths of ref/oracle share: the input check and the values they compute from. */
#ifndef MLR_ORACLE_INTERNAL_H
#define MLR_ORACLE_INTERNAL_H

#include "mlr_formats.h"
#include "mlr_oracle.h"

/* the bf16-KV truth needs kv_bf16; *Lmax gets the longest batch */
static inline mlr_status mlr__truth_begin(const mlr_inputs *in, mlr_truth_from from, int64_t *Lmax,
                                          mlr_error *err) {
  if (from == MLR_TRUTH_BF16 && !in->kv_bf16)
    return mlr_error_set(
        err, MLR_EINVAL,
        "the truth from bf16 KV needs the tensor kv_bf16 in the inputs (mlaref gen ... bf16kv=1)");
  *Lmax = 0;
  for (int64_t b = 0; b < in->B; b++)
    *Lmax = mlr_inputs_kv_len(in, b) > *Lmax ? mlr_inputs_kv_len(in, b) : *Lmax;
  return MLR_OK;
}

/* column i of KV row `row` before the KV scale: a bf16 value of kv_bf16 (from = bf16), else the
 * kv tensor's code value (fp8 or bf16); exact in binary32 */
static inline float mlr__kv_value(const mlr_inputs *in, mlr_truth_from from, int64_t row, int i) {
  if (from == MLR_TRUTH_BF16) return mlr_bits_f32((uint32_t)in->kv_bf16[row * 576 + i] << 16);
  if (in->kv_format == MLR_FMT_BF16)
    return mlr_bits_f32((uint32_t)((const uint16_t *)in->kv)[row * 576 + i] << 16);
  return mlr_decode((mlr_format)in->kv_format, ((const uint8_t *)in->kv)[row * 576 + i]);
}

/* the scale the values above carry: kv_scale, or 1 for the bf16 originals */
static inline double mlr__kv_scale(const mlr_inputs *in, mlr_truth_from from) {
  return from == MLR_TRUTH_BF16 ? 1.0 : (double)in->kv_scale;
}

#endif
