/* Fuzz target: recipe text (mlr_recipe_parse). Any input must come back as MLR_OK or a
 * documented error with a message, never a crash, a hang or a leak; a recipe that parses and
 * passes its check must survive its own text form unchanged: parse(text(r)) has r's canonical
 * string. Built two ways: with libFuzzer (scripts/fuzz.sh, clang's -fsanitize=fuzzer) to search,
 * and with tests/fuzz/replay.c (any compiler) to replay the committed corpus in CTest, also
 * under ASan and UBSan (the asan-ubsan preset). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_recipe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 16) return 0; /* recipes are a few hundred bytes; longer inputs add nothing */
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  mlr_recipe r;
  mlr_error err = {""};
  const mlr_status st = mlr_recipe_parse(text, "fuzz", &r, &err);
  if (st != MLR_OK && !err.msg[0]) abort(); /* an error without a message */
  if (st == MLR_OK && mlr_recipe_check(&r, &err) == MLR_OK) {
    char canon[2048], back_canon[2048], txt[4096];
    const size_t n = mlr_recipe_canonical(&r, canon, sizeof canon);
    if (n >= sizeof canon || mlr_recipe_text(&r, txt, sizeof txt) >= sizeof txt) abort();
    mlr_recipe back;
    if (mlr_recipe_parse(txt, "text", &back, &err) != MLR_OK) abort();
    mlr_recipe_canonical(&back, back_canon, sizeof back_canon);
    if (strcmp(canon, back_canon) != 0) abort();
  }
  free(text);
  return 0;
}
