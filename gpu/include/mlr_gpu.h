/* mlr_gpu.h: the GPU exact kernel (gpu/exact): the model of mlr_emulate.h run on a GPU, with the
 * same order of operations per output element, so its o and lse are bit-identical to mlr_emulate's.
 * Written in HIP (gpu/hip_compat.h maps it onto CUDA on NVIDIA); callable from C.
 *
 * What it runs: every recipe mlr_emulate runs except the deliberate faults, for 1..16 heads. The
 * dot models: seq and nope_rope as fp32 fma chains in column (token) order, one thread per chain;
 * exact as the exact sum rounded once (a binary64 chain where every partial sum is exact, else a
 * 128-bit fixed point or the long accumulator of mlr_exact.h), and, where an operand is NaN or
 * Inf, the binary64 chain in order that the emulator falls back to. Q policies: none and static
 * need no reduction; dynamic, per_head and per_token take max |q| on the GPU (a max, so the order
 * does not matter). Limits of the launch grid: at most 65535 query tokens and 65535 splits.
 *
 * In a build without GPU support (MLAREF_GPU=OFF) the functions exist and return MLR_EDEVICE
 * saying so. */
#ifndef MLR_GPU_H
#define MLR_GPU_H

#include <stddef.h>

#include "mlr_base.h"
#include "mlr_inputs_view.h"
#include "mlr_emulate.h"
#include "mlr_recipe.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MLR_GPU_MAX_HEADS = 16 };

typedef struct mlr_gpu_timing {
  double kernel_ms; /* device events around the kernels (Q preparation to the merge), the sum of: */
  double q_ms, qk_ms, split_ms,
      merge_ms; /* Q (max |q|, quantization), logits, the splits, the merge */
  double
      total_ms; /* host clock: allocation, copies both ways, kernels, the unwritten-element scan */
} mlr_gpu_timing;

/** "CUDA" or "HIP": the runtime this build's GPU code targets; NULL in a build without GPU support.
 */
const char *mlr_gpu_backend(void);

/** The first GPU's name (e.g. "NVIDIA H200") into name: MLR_OK, or MLR_EDEVICE (no GPU support in
 *  this build, no device, or the runtime failed) with the reason in err. */
mlr_status mlr_gpu_device(char *name, size_t n, mlr_error *err);

/** Run the exact kernel on GPU 0. Result as mlr_emulate's (o, lse, split_count, split_len,
 *  q_scales, q_clipped; no partials). MLR_EINVAL (mlr_emu_check_fit's reasons, or more than 16
 *  heads), MLR_ERANGE (grid limits, size overflow), MLR_ENOMEM (host or device memory),
 *  MLR_EDEVICE (a runtime call or launch failed, or an output element was left unwritten: the
 *  outputs are pre-filled with an all-ones NaN pattern that no step of the model writes). timing
 *  may be NULL. */
mlr_status mlr_gpu_exact(const mlr_recipe *r, const mlr_inputs *in, mlr_emu_result *res,
                         mlr_gpu_timing *timing, mlr_error *err);

#ifdef __cplusplus
}
#endif
#endif
