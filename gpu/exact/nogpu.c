/* The GPU entry points of a build without GPU support (MLAREF_GPU=OFF, or no toolkit found): they
 * answer MLR_EDEVICE, naming how to get a build that has it. The fast kernel's are
 * gpu/fast/nogpu.c, the benchmark probes' gpu/bench/nogpu.c. */
#include <string.h>

#include "mlr_gpu.h"
#include "../nogpu.h"

const char *mlr_gpu_backend(void) { return NULL; }

mlr_status mlr_gpu_device(char *name, size_t n, mlr_error *err) {
  if (n) name[0] = 0;
  return mlr_error_set(err, MLR_EDEVICE, MLR__NO_GPU);
}

mlr_status mlr_gpu_exact(const mlr_recipe *r, const mlr_inputs *in, mlr_emu_result *res,
                         mlr_gpu_timing *timing, mlr_error *err) {
  memset(res, 0, sizeof *res);
  return mlr_error_set(err, MLR_EDEVICE, MLR__NO_GPU);
}
