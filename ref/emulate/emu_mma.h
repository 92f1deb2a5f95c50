/* emu_mma.h: the emulator's matrix-unit dots, many side by side (internal to ref/emulate). */
#ifndef MLR_EMU_MMA_H
#define MLR_EMU_MMA_H

#include <stdint.h>

#include "mlr_mma.h"

/* Lane l < nl runs the unit m over the n terms xa[i * sa + l] * xb[i], from C = c[l] (in) to D
 * (out, in c), in blocks of the unit's size along i, with the unit exponents ea (laid out like xa)
 * and eb (like xb) from mlr_mma_in_exp. QK's lanes are the heads (Q varies, the K row is shared),
 * PV's the columns (V varies, the head's P is shared). mlr_mma.h's binary64 form, bit for bit the
 * model's block (tests/mma.c; tests/budget.c checks the emulator against the switchable model,
 * which calls mlr_mma_dot); a lane whose block holds a NaN or Inf takes the model's IEEE sum for
 * that block. sc, S, E: nl doubles, doubles and ints of scratch. */
void mlr__emu_mma_lanes(const mlr_mma_model *m, int64_t nl, int n, const float *xa, const int *ea,
                        int64_t sa, const float *xb, const int *eb, float *c, double *sc, double *S,
                        int *E);

#endif
