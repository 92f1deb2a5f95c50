/* Fuzz target: .safetensors files (mlr_safetensors_read), then the input contract
 * (mlr_inputs_check) on whatever parsed. Any file must come back as MLR_OK or an error with a
 * message, never a crash, a hang or a leak; a file that parses must write back and read back with
 * the same tensors (names, dtypes, shapes, bytes) and metadata. Built with libFuzzer
 * (scripts/fuzz.sh) and with tests/fuzz/replay.c for CTest, as fuzz_recipe.c. */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "mlr_inputs.h"
#include "mlr_tensor.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same(const mlr_tensor_file *a, const mlr_tensor_file *b) {
  if (a->n != b->n || a->nmeta != b->nmeta) return 0;
  for (size_t k = 0; k < a->n; k++) {
    const mlr_tensor *x = &a->t[k], *y = mlr_tf_find(b, x->name);
    if (!y || x->dtype != y->dtype || x->ndim != y->ndim || x->nbytes != y->nbytes) return 0;
    if (memcmp(x->shape, y->shape, (size_t)x->ndim * sizeof x->shape[0]) ||
        (x->nbytes && memcmp(x->data, y->data, x->nbytes)))
      return 0;
  }
  for (size_t k = 0; k < a->nmeta; k++) {
    const char *v = mlr_tf_get_meta(b, a->meta[k].key);
    if (!v || strcmp(v, a->meta[k].value)) return 0;
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 20) return 0; /* headers are at most a few KB; the tensor bytes are only copied */
  const char *path = fuzz_file(data, size);
  if (!path) return 0;
  mlr_tensor_file tf, back;
  mlr_error err = {""};
  const mlr_status st = mlr_safetensors_read(path, &tf, &err);
  if (st != MLR_OK && !err.msg[0]) abort(); /* an error without a message */
  if (st == MLR_OK) {
    mlr_inputs in;
    err.msg[0] = 0;
    if (mlr_inputs_check(&tf, path, 0, &in, &err) != MLR_OK && !err.msg[0]) abort();
    char out[80];
    snprintf(out, sizeof out, "%s.out", path);
    if (mlr_safetensors_write(out, &tf, &err) != MLR_OK) abort(); /* what was read can be written */
    if (mlr_safetensors_read(out, &back, &err) != MLR_OK || !same(&tf, &back)) abort();
    mlr_tf_free(&back);
    remove(out);
  }
  mlr_tf_free(&tf);
  return 0;
}
