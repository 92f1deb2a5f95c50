/* gpu_try.h: the host runners' check of a runtime call (gpu/exact, gpu/fast): on failure, set
 * mlr_status st and mlr_error *err (MLR_ENOMEM for an allocation, else MLR_EDEVICE, naming the call
 * and the place) and jump to the function's cleanup label out. */
#ifndef MLR_GPU_TRY_H
#define MLR_GPU_TRY_H

#include "hip_compat.h" /* first: the runtime headers declare the device-callable memcpy mlr_base.h uses */
#include "mlr_base.h"

#define GPU_TRY(call)                                                                              \
  do {                                                                                             \
    const hipError_t e_ = (call);                                                                  \
    if (e_ != hipSuccess) {                                                                        \
      st =                                                                                         \
          mlr_error_set(err, e_ == hipErrorMemoryAllocation ? MLR_ENOMEM : MLR_EDEVICE,            \
                        "GPU: %s at %s:%d: %s", #call, __FILE__, __LINE__, hipGetErrorString(e_)); \
      goto out;                                                                                    \
    }                                                                                              \
  } while (0)

#endif
