/* Internal interfaces of ref/budget (not installed): the set-up shared by the switchable model
 * (shadow.c) and the bound (bound.c). */
#ifndef MLR_BUDGET_INTERNAL_H
#define MLR_BUDGET_INTERNAL_H

#include "mlr_formats.h"
#include "mlr_budget.h"

/* x rounded to a format, straight from binary64 (one rounding, no detour through binary32) */
static inline double mlr__round_fmt(double x, mlr_format f, mlr_overflow ovf) {
  return (double)mlr_decode(f, mlr_encode_f64(x, f, MLR_RND_NEAREST_EVEN, ovf, 0));
}

/* x converted to an operand format (mlr_operand) when on; fp8 operands are the inputs' own */
static inline double mlr__to_operand(int on, double x, int op) {
  if (!on) return x;
  if (op == MLR_OP_FP16) return mlr__round_fmt(x, MLR_FMT_FP16, MLR_OVF_NONSAT);
  if (op == MLR_OP_BF16) return mlr__round_fmt(x, MLR_FMT_BF16, MLR_OVF_NONSAT);
  if (op == MLR_OP_FP32) return (double)(float)x;
  return x;
}

/* P's format (mlr_pfmt) as a number format; MLR_FMT_COUNT for fp32 (P stays binary32) */
static inline mlr_format mlr__pfmt_format(int pf) {
  if (pf == MLR_P_FP16) return MLR_FMT_FP16;
  if (pf == MLR_P_BF16) return MLR_FMT_BF16;
  if (pf == MLR_P_E4M3) return MLR_FMT_E4M3;
  if (pf == MLR_P_E4M3FNUZ) return MLR_FMT_E4M3FNUZ;
  return MLR_FMT_COUNT;
}

typedef struct mlr__shadow {
  const mlr_recipe *r;
  const mlr_inputs *in;
  unsigned on;       /* sources rounded */
  int64_t H, S, cap; /* heads, most splits of a batch, most tokens of a block */
  int use_bf16;      /* KV values from kv_bf16 (kv_quant off) */
  int folded;        /* kv.scale_at = folded: k_scale joins the logit scale */
  int vs_operand;    /* v_scale in the V operands (kv.scale_at = operand, v.scale_at = as_kv) */
  int vs_split;      /* v_scale on each split's result (kv.scale_at = folded, v.scale_at = as_kv) */
  int vs_merged;     /* v_scale once on the output, after the merge (v.scale_at = merged) */
  int cq;            /* the logit scale takes a Q scale: fp8 Q (the policy's, or the inputs' q8) */
  int exp_sm, exp_lse; /* exp bases of the softmax and of the merge of normalized partials */
  const uint32_t *ex2; /* the softmax's exp2 unit (softmax.exp_unit), or NULL: correctly rounded */
  double ks, kpes, vs; /* k_scale, kpe_scale, v_scale (with mlr_inputs_view.h's defaults) */
  double clamp;        /* the clamp as binary32 */
  double *q;           /* [T*H][576] Q operand values */
  double *qreal;       /* [T*H][576] Q values times their scale (what the kernel's Q stands for) */
  double *c;           /* [T*H] the logit scale */
  double *qs;          /* [T*H] the Q scale (1 for bf16 Q or q_quant off; q_scale for q8) */
  double *klut, *kplut, *vlut; /* K (latent, rope) and V operand value of each code (256 fp8
                                  codes, or 65536 bf16 codes) */
  int kv_range_ok; /* every finite table value is binary32: klsb.. below are their ranges */
  int klsb, ktop, vlsb, vtop;  /* mlr_f32_range of the finite K (both tables) and V values */
  int64_t *nsplit, *slen, *tb; /* [B] splits and split length, [T] batch of each query token */
  int64_t q_clipped;
} mlr__shadow;

mlr_status mlr__shadow_init(mlr__shadow *sh, const mlr_recipe *r, const mlr_inputs *in,
                            unsigned rounded, mlr_error *err);
void mlr__shadow_free(mlr__shadow *sh);

#endif
