/* The benchmark probes in a build without GPU support (MLAREF_GPU=OFF, or no toolkit found): they
 * answer MLR_EDEVICE, naming how to get a build that has them. */
#include "mlr_gpu_bench.h"
#include "../nogpu.h"

mlr_status mlr_gpu_fast_read_floor(mlr_gpu_fast *f, int reps, double *us, int *blocks_per_sm,
                                   int *unroll, mlr_error *err) {
  return mlr_error_set(err, MLR_EDEVICE, MLR__NO_GPU);
}
mlr_status mlr_gpu_fast_plan_floor(mlr_gpu_fast *f, int reps, double *us, mlr_error *err) {
  return mlr_error_set(err, MLR_EDEVICE, MLR__NO_GPU);
}
int mlr_gpu_fast_has_plan_floor(void) { return 0; }
mlr_status mlr_gpu_read_bandwidth(int reps, double *bytes_per_s, mlr_error *err) {
  return mlr_error_set(err, MLR_EDEVICE, MLR__NO_GPU);
}
mlr_status mlr_gpu_launch_floor(int reps, double *one_us, double *chain_us, mlr_error *err) {
  return mlr_error_set(err, MLR_EDEVICE, MLR__NO_GPU);
}
