/* The GPU entry points of a build without GPU support (MLAREF_GPU=OFF, or no toolkit found):
 * they answer MLR_EDEVICE, naming how to get a build that has it. */
#include "mlr_gpu.h"
#include "mlr_gpu_fast.h"

#define NO_GPU                                                                                     \
  "this mlaref was built without GPU support (configure with -DMLAREF_GPU=CUDA or "                \
  "-DMLAREF_GPU=HIP)"

const char *mlr_gpu_backend(void) { return NULL; }

mlr_status mlr_gpu_device(char *name, size_t n, mlr_error *err) {
  if (n) name[0] = 0;
  return mlr_error_set(err, MLR_EDEVICE, NO_GPU);
}

mlr_status mlr_gpu_exact(const mlr_recipe *r, const mlr_inputs *in, mlr_emu_result *res,
                         mlr_gpu_timing *timing, mlr_error *err) {
  (void)r, (void)in, (void)timing;
  memset(res, 0, sizeof *res);
  return mlr_error_set(err, MLR_EDEVICE, NO_GPU);
}

mlr_status mlr_gpu_fast_prepare(const mlr_recipe *r, const mlr_inputs *in, mlr_gpu_fast **f,
                                mlr_error *err) {
  (void)r, (void)in;
  *f = NULL;
  return mlr_error_set(err, MLR_EDEVICE, NO_GPU);
}
mlr_status mlr_gpu_fast_launch(mlr_gpu_fast *f, int flush_l2, double *us, mlr_error *err) {
  (void)f, (void)flush_l2, (void)us;
  return mlr_error_set(err, MLR_EDEVICE, NO_GPU);
}
mlr_status mlr_gpu_fast_result(mlr_gpu_fast *f, mlr_emu_result *res, mlr_error *err) {
  (void)f;
  memset(res, 0, sizeof *res);
  return mlr_error_set(err, MLR_EDEVICE, NO_GPU);
}
long long mlr_gpu_fast_splits(const mlr_gpu_fast *f) {
  (void)f;
  return 0;
}
const char *mlr_gpu_fast_kernels(const mlr_gpu_fast *f) {
  (void)f;
  return "-";
}
mlr_status mlr_gpu_fast_clean_flush(mlr_gpu_fast *f, mlr_error *err) {
  (void)f;
  return mlr_error_set(err, MLR_EDEVICE, NO_GPU);
}
mlr_status mlr_gpu_fast_read_floor(mlr_gpu_fast *f, int reps, double *us, int *blocks_per_sm,
                                   int *unroll, mlr_error *err) {
  (void)f, (void)reps, (void)us, (void)blocks_per_sm, (void)unroll;
  return mlr_error_set(err, MLR_EDEVICE, NO_GPU);
}
mlr_status mlr_gpu_fast_plan_floor(mlr_gpu_fast *f, int reps, double *us, mlr_error *err) {
  (void)f, (void)reps, (void)us;
  return mlr_error_set(err, MLR_EDEVICE, NO_GPU);
}
int mlr_gpu_fast_has_plan_floor(void) { return 0; }
void mlr_gpu_fast_free(mlr_gpu_fast *f) { (void)f; }
mlr_status mlr_gpu_read_bandwidth(int reps, double *bytes_per_s, mlr_error *err) {
  (void)reps, (void)bytes_per_s;
  return mlr_error_set(err, MLR_EDEVICE, NO_GPU);
}
mlr_status mlr_gpu_launch_floor(int reps, double *one_us, double *chain_us, mlr_error *err) {
  (void)reps, (void)one_us, (void)chain_us;
  return mlr_error_set(err, MLR_EDEVICE, NO_GPU);
}
