/* The fast kernel's entry points in a build without GPU support (MLAREF_GPU=OFF, or no toolkit
 * found): they answer MLR_EDEVICE, naming how to get a build that has it. The recipes, the fit and
 * the options (fast_recipe.c, opts.c) are pure C, in every build. */
#include <string.h>

#include "mlr_gpu_fast.h"
#include "../nogpu.h"

mlr_status mlr_gpu_fast_prepare(const mlr_recipe *r, const mlr_inputs *in,
                                const mlr_gpu_fast_opts *opts, mlr_gpu_fast **f, mlr_error *err) {
  *f = NULL;
  return mlr_error_set(err, MLR_EDEVICE, MLR__NO_GPU);
}
mlr_status mlr_gpu_fast_launch(mlr_gpu_fast *f, int flush_l2, double *us, mlr_error *err) {
  (void)flush_l2;
  return mlr_error_set(err, MLR_EDEVICE, MLR__NO_GPU);
}
mlr_status mlr_gpu_fast_result(mlr_gpu_fast *f, mlr_emu_result *res, mlr_error *err) {
  memset(res, 0, sizeof *res);
  return mlr_error_set(err, MLR_EDEVICE, MLR__NO_GPU);
}
long long mlr_gpu_fast_splits(const mlr_gpu_fast *f) { return 0; }
const char *mlr_gpu_fast_kernels(const mlr_gpu_fast *f) { return "-"; }
mlr_status mlr_gpu_fast_clean_flush(mlr_gpu_fast *f, mlr_error *err) {
  return mlr_error_set(err, MLR_EDEVICE, MLR__NO_GPU);
}
void mlr_gpu_fast_free(mlr_gpu_fast *f) { (void)f; }
