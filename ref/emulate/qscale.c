/* Q scale policies (mlr_recipe.h q.format / q.scale): q bf16 [T, H, 576] -> the Q values the
 * kernel multiplies (bf16 values, or decoded fp8 codes) and a scale per (token, head). */
#include <math.h>
#include <stdlib.h>

#include "mlr_formats.h"
#include "mlr_emulate.h"
#include "mlr_emu_ops.h"

static float bf16_val(uint16_t c) { return mlr_bits_f32((uint32_t)c << 16); }

/* max |q| over a group of elements (exact in bf16; NaN skipped, as torch's amax would not:
 * inputs with NaN are refused before the model unless --allow-nonfinite) */
static float group_amax(const uint16_t *q, int64_t H, int64_t t0, int64_t t1, int64_t h0,
                        int64_t h1) {
  float amax = 0.0f;
  for (int64_t t = t0; t < t1; t++)
    for (int64_t h = h0; h < h1; h++) {
      const uint16_t *row = q + (t * H + h) * MLR_EMU_QK_DIM;
      for (int i = 0; i < MLR_EMU_QK_DIM; i++) {
        const float a = fabsf(bf16_val(row[i]));
        if (a > amax) amax = a;
      }
    }
  return amax;
}

/* quantize one (token, head) row with scale s (mlr__emu_q_quant); returns the clipped elements */
static int64_t quant_row(const uint16_t *src, float *dst, float s, mlr_format f8, int task_arith) {
  int64_t clipped = 0;
  for (int i = 0; i < MLR_EMU_QK_DIM; i++) {
    int c;
    dst[i] = mlr__emu_q_quant(src[i], s, f8, task_arith, &c);
    clipped += c;
  }
  return clipped;
}

mlr_status mlr_emu_q_values(const mlr_recipe *r, const mlr_inputs *in, float *qval, float *qs,
                            float **scales, int64_t *nscales, int64_t *clipped) {
  const int64_t T = in->T, H = in->H, n = T * H;
  *scales = NULL;
  *nscales = 0;
  *clipped = 0;
  if (in->q8) { /* pre-quantized: the codes' values and their descale, no policy to apply */
    if (!(*scales = malloc(sizeof **scales))) return MLR_ENOMEM;
    **scales = in->q_scale;
    *nscales = 1;
    for (int64_t k = 0; k < n * MLR_EMU_QK_DIM; k++)
      qval[k] = mlr_decode((mlr_format)in->q_format, in->q8[k]);
    for (int64_t k = 0; k < n; k++) qs[k] = in->q_scale;
    return MLR_OK;
  }
  if (r->q_format == MLR_Q_BF16) {
    for (int64_t k = 0; k < n * MLR_EMU_QK_DIM; k++) qval[k] = bf16_val(in->q[k]);
    for (int64_t k = 0; k < n; k++) qs[k] = 1.0f;
    return MLR_OK;
  }
  const mlr_format f8 = r->q_format == MLR_Q_E4M3 ? MLR_FMT_E4M3 : MLR_FMT_E4M3FNUZ;
  const float fmax = mlr_format_max(f8);
  const int64_t ns = r->q_scale == MLR_QS_PER_HEAD ? H : r->q_scale == MLR_QS_PER_TOKEN ? T : 1;
  float *sc = malloc((size_t)(ns > 0 ? ns : 1) * sizeof *sc);
  if (!sc) return MLR_ENOMEM;
  for (int64_t g = 0; g < ns; g++) {
    if (r->q_scale == MLR_QS_STATIC)
      sc[g] = (float)(r->q_absmax / (double)fmax); /* Python float -> float32 tensor */
    else if (r->q_scale == MLR_QS_DYNAMIC)
      sc[g] = mlr_task_scale(group_amax(in->q, H, 0, T, 0, H), fmax);
    else if (r->q_scale == MLR_QS_PER_HEAD)
      sc[g] = mlr_task_scale(group_amax(in->q, H, 0, T, g, g + 1), fmax);
    else
      sc[g] = mlr_task_scale(group_amax(in->q, H, g, g + 1, 0, H), fmax);
  }
  int64_t clip = 0;
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < H; h++) {
      const int64_t g = r->q_scale == MLR_QS_PER_HEAD ? h : r->q_scale == MLR_QS_PER_TOKEN ? t : 0;
      const int64_t k = t * H + h;
      qs[k] = sc[g];
      clip += quant_row(in->q + k * MLR_EMU_QK_DIM, qval + k * MLR_EMU_QK_DIM, sc[g], f8,
                        r->q_scale != MLR_QS_STATIC);
    }
  *scales = sc;
  *nscales = ns;
  *clipped = clip;
  return MLR_OK;
}
