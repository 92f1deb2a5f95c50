/* Fuzz target: .npy files (mlr_npy_read) for every dtype a caller may ask for. Any file must come
 * back as MLR_OK or an error with a message, never a crash, a hang or a leak; a file that reads
 * must write back (mlr_npy_write) and read back to the same shape and bytes. Built as
 * fuzz_recipe.c. */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "mlr_tensor.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 20 || size < 1) return 0;
  /* the first byte picks the dtype asked for; the rest is the file */
  static const mlr_dtype want[] = {MLR_DT_BF16, MLR_DT_F16, MLR_DT_F32, MLR_DT_F64,
                                   MLR_DT_I32,  MLR_DT_I64, MLR_DT_U8,  MLR_DT_F8_E4M3};
  const mlr_dtype d = want[data[0] % (sizeof want / sizeof want[0])];
  const char *path = fuzz_file(data + 1, size - 1);
  if (!path) return 0;
  mlr_tensor_file tf, back;
  mlr_tf_init(&tf);
  mlr_tf_init(&back); /* mlr_npy_read adds its tensor to a set the caller made */
  mlr_error err = {""};
  const mlr_status st = mlr_npy_read(path, d, "x", &tf, &err);
  if (st != MLR_OK && !err.msg[0]) abort();
  if (st == MLR_OK) {
    const mlr_tensor *t = mlr_tf_find(&tf, "x");
    char out[80];
    snprintf(out, sizeof out, "%s.npy", path);
    if (!t || mlr_npy_write(out, t, &err) != MLR_OK) abort();
    if (mlr_npy_read(out, d, "x", &back, &err) != MLR_OK) abort();
    const mlr_tensor *u = mlr_tf_find(&back, "x");
    if (!u || u->ndim != t->ndim || u->nbytes != t->nbytes ||
        memcmp(u->shape, t->shape, (size_t)t->ndim * sizeof t->shape[0]) ||
        (t->nbytes && memcmp(u->data, t->data, t->nbytes)))
      abort();
    mlr_tf_free(&back);
    remove(out);
  }
  mlr_tf_free(&tf);
  return 0;
}
