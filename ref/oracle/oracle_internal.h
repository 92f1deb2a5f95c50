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

/* column i of Q row `row` (= t * H + h) before Q's scale: the bf16 value, or the fp8 code's value
 * (q8); exact in binary32 */
static inline float mlr__q_value(const mlr_inputs *in, int64_t row, int i) {
  if (in->q8) return mlr_decode((mlr_format)in->q_format, in->q8[row * 576 + i]);
  return mlr_bits_f32((uint32_t)in->q[row * 576 + i] << 16);
}

/* The scales the truth multiplies the values above by: K = value x k on columns 0..511 and
 * x kpe on the 64 rope columns, V = value x v, Q = value x q, logits = sm (Q . K).
 *   From the dequantized KV: the inputs' k_scale, kpe_scale and v_scale (with the defaults of
 *   mlr_inputs_view.h). From kv_bf16: 1 for all three: kv_bf16 holds the values of K and V
 *   themselves (the unquantized tensor that the codes times their scales approximate).
 *   q: q_scale for fp8 Q (q8; the descale), 1 for bf16 Q.
 *   sm: a given sm_scale is the exact real number its binary64 value is; absent (sm24 = 1), the
 *   real 1/sqrt(576) = 1/24 exactly, applied as a division by 24 (not 1.0 / 24.0, its binary64
 *   rounding).
 * Each scale is a binary32 (sm a binary64), so a value times its scale is exact in binary64: at
 * most 24 + 11 significant bits (bf16 or fp8 value times a binary32). */
typedef struct mlr__truth_scales {
  double k, kpe, v, q, sm;
  int sm24;
} mlr__truth_scales;

static inline mlr__truth_scales mlr__scales(const mlr_inputs *in, mlr_truth_from from) {
  mlr__truth_scales s;
  const int raw = from == MLR_TRUTH_BF16;
  s.k = raw ? 1.0 : (double)mlr_inputs_k_scale(in);
  s.kpe = raw ? 1.0 : (double)mlr_inputs_kpe_scale(in);
  s.v = raw ? 1.0 : (double)mlr_inputs_v_scale(in);
  s.q = in->q8 ? (double)in->q_scale : 1.0;
  s.sm24 = !(in->sm_scale > 0.0);
  s.sm = s.sm24 ? 1.0 / 24.0 : in->sm_scale;
  return s;
}

/* x times sm in binary64 (one rounding): x / 24 when sm is the default */
static inline double mlr__sm_mul(const mlr__truth_scales *s, double x) {
  return s->sm24 ? x / 24.0 : x * s->sm;
}

#endif
