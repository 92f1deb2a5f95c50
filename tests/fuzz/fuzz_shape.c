/* Fuzz target: shape specs (mlr_gen_spec_parse) and suite names (mlr_suite_find). Any string must
 * come back as MLR_OK or an error with a message, never a crash, a hang or a leak; a spec that
 * parses must survive its canonical text (mlr_gen_spec_format) unchanged, and its byte count
 * (mlr_gen_bytes) must not wrap. Built as fuzz_recipe.c. */
#include <stdlib.h>
#include <string.h>

#include "mlr_gen.h"
#include "mlr_suites.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 14)
    return 0; /* specs are under a hundred bytes; lens= lists a few thousand at most */
  char *s = malloc(size + 1);
  if (!s) return 0;
  memcpy(s, data, size);
  s[size] = 0;
  (void)mlr_suite_find(s);
  mlr_gen_spec spec, back;
  mlr_error err = {""};
  const mlr_status st = mlr_gen_spec_parse(s, &spec, &err);
  if (st != MLR_OK && !err.msg[0]) abort();
  if (st == MLR_OK) {
    char canon[1 << 16], again[1 << 16];
    mlr_gen_spec_format(&spec, canon, sizeof canon);
    if (mlr_gen_spec_parse(canon, &back, &err) != MLR_OK) abort();
    mlr_gen_spec_format(&back, again, sizeof again);
    if (strcmp(canon, again)) abort();
    uint64_t bytes;
    if (mlr_gen_bytes(&spec, &bytes) == MLR_OK && bytes == 0)
      abort(); /* every spec has some bytes (Q at least) */
    mlr_gen_spec_free(&back);
    mlr_gen_spec_free(&spec);
  }
  free(s);
  return 0;
}
