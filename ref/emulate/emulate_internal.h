/* Internal interfaces of ref/emulate (not installed). */
#ifndef MLR_EMULATE_INTERNAL_H
#define MLR_EMULATE_INTERNAL_H

#include "mlr_emulate.h"

/* Q scale policy: qval [T*H*576] gets the Q values (bf16, or decoded fp8), qs [T*H] the scale of
 * each (token, head) (1 for bf16 Q); *scales (malloc'd, *nscales of them) the distinct scales. */
mlr_status mlr__emu_quantize_q(const mlr_recipe *r, const mlr_inputs *in, float *qval, float *qs, float **scales,
                               int64_t *nscales, int64_t *clipped);

#endif
