/* The benchmark probes in a build without GPU support (MLAREF_GPU=OFF, or no toolkit found): they
 * answer MLR_EDEVICE, naming how to get a build that has them. */
#include "mlr_gpu_bench.h"

#define NO_GPU                                                                                     \
  "this mlaref was built without GPU support (configure with -DMLAREF_GPU=CUDA or "                \
  "-DMLAREF_GPU=HIP)"

mlr_status mlr_gpu_fast_read_floor(mlr_gpu_fast *f, int reps, double *us, int *blocks_per_sm,
                                   int *unroll, mlr_error *err) {
  (void)f;
  (void)reps;
  (void)us;
  (void)blocks_per_sm;
  (void)unroll;
  return mlr_error_set(err, MLR_EDEVICE, NO_GPU);
}
mlr_status mlr_gpu_fast_plan_floor(mlr_gpu_fast *f, int reps, double *us, mlr_error *err) {
  (void)f;
  (void)reps;
  (void)us;
  return mlr_error_set(err, MLR_EDEVICE, NO_GPU);
}
int mlr_gpu_fast_has_plan_floor(void) { return 0; }
mlr_status mlr_gpu_read_bandwidth(int reps, double *bytes_per_s, mlr_error *err) {
  (void)reps;
  (void)bytes_per_s;
  return mlr_error_set(err, MLR_EDEVICE, NO_GPU);
}
mlr_status mlr_gpu_launch_floor(int reps, double *one_us, double *chain_us, mlr_error *err) {
  (void)reps;
  (void)one_us;
  (void)chain_us;
  return mlr_error_set(err, MLR_EDEVICE, NO_GPU);
}
