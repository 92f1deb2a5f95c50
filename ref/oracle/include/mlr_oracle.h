/* mlr_oracle.h: the truth a kernel's output is measured against.
 *
 * mlr_truth_f64: attention evaluated in binary64 from the inputs' values, no rounding to any
 * kernel format: s_j = sm_scale (q . k_j) (sum in column order), p_j = e^(s_j - max s) (pmath's
 * exp), o = sum_j p_j v_j / sum_j p_j (sums in token order), lse = max s + ln(sum p), over the KV
 * tokens each query token sees (mlr_inputs_visible: causal, or all of them).
 *   from = MLR_TRUTH_DEQUANTIZED: K is the kv codes' values (fp8 or bf16) times k_scale on the
 *          512 latent columns and times kpe_scale on the 64 rope columns, V the codes' values
 *          times v_scale (each exact in binary64; the defaults of mlr_inputs_view.h: kv_scale for
 *          all three): the best any fp8 kernel can do.
 *   from = MLR_TRUTH_BF16: K and V are kv_bf16's values, the unquantized KV (what a user wants);
 *          no scale applies to them (the scales say how the fp8 codes map to these values).
 * Q is the bf16 input (a kernel's Q quantization is part of its error), or for fp8 Q (q8) its
 * codes' values times q_scale. sm_scale is the inputs' (its binary64 value, exactly), or when
 * absent 1/sqrt(576) = 1/24 exactly (not its binary64 rounding). Relative error about 1e-15 (up
 * to 1e-10 where the sums cancel), far below bf16's 2^-9, but not certified.
 * mlr_oracle gives the same quantities within 1 ulp, certified, at about 4x the cost.
 * ref/oracle -> formats, pmath (and the exact sums of pmath/mlr_exact.h), MPFR. */
#ifndef MLR_ORACLE_H
#define MLR_ORACLE_H

#include "mlr_base.h"
#include "mlr_inputs_view.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MLR_TRUTH_DEQUANTIZED = 0, MLR_TRUTH_BF16 = 1 } mlr_truth_from;

typedef struct mlr_oracle_stats {
  int64_t uncertified; /* elements (o and lse) for which the 1-ulp bound could not be shown */
} mlr_oracle_stats;

/** The certified oracle (ref/oracle/oracle.c says how): o [T, H, 512] and lse [T, H], each a
 *  binary64 within 1 ulp of the exact real value, computed from the same values as
 *  mlr_truth_f64. MLR_EINVAL, MLR_ENOMEM as mlr_truth_f64. */
mlr_status mlr_oracle(const mlr_inputs *in, mlr_truth_from from, double *o, double *lse,
                      mlr_oracle_stats *stats, mlr_error *err);

/** The certified o alone, in a new array *o of T x H x 512 binary64 (the caller frees it; NULL on
 *  failure): for the callers that compare against the truth and never read its lse. mlr_oracle's
 *  status codes, MLR_ENOMEM naming the size. */
mlr_status mlr_oracle_o(const mlr_inputs *in, mlr_truth_from from, double **o, mlr_error *err);

/** e^t for n arguments t = th + tl given as double-doubles, into h + l: the oracle's exp (relative
 *  error below 2^-94; for tests). */
void mlr_oracle_exp_dd(const double *th, const double *tl, size_t n, double *h, double *l);

/** The plain reference: every operation in MPFR at 256 bits (ref/oracle/plain256.c), rounded to
 *  binary64 at the end. Slow; for checking mlr_oracle and timing it. */
mlr_status mlr_oracle_plain256(const mlr_inputs *in, mlr_truth_from from, double *o, double *lse,
                               mlr_error *err);

/** o [T, H, 512] and lse [T, H] in binary64 (caller's buffers). MLR_EINVAL when from = bf16 and
 *  the inputs have no kv_bf16; MLR_ENOMEM. OpenMP over query tokens; the result does not depend
 *  on the thread count. */
mlr_status mlr_truth_f64(const mlr_inputs *in, mlr_truth_from from, double *o, double *lse,
                         mlr_error *err);

#ifdef __cplusplus
}
#endif
#endif
