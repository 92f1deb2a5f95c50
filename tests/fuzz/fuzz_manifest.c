/* Fuzz target: the golden digest manifest (mlr_manifest_parse_line), every line of the input.
 * Any line must come back as MLR_OK or an error with a message, never a crash, a hang or a leak; a
 * line that parses as a row must format back to itself (mlr_manifest_format_row). Built as
 * fuzz_recipe.c. */
#include <stdlib.h>
#include <string.h>

#include "mlr_manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 16) return 0;
  for (size_t at = 0; at < size;) {
    const uint8_t *nl = memchr(data + at, '\n', size - at);
    const size_t len = nl ? (size_t)(nl - (data + at)) : size - at;
    char *line = malloc(len + 1); /* exactly the line: no terminator for the parser to lean on */
    if (!line) return 0;
    memcpy(line, data + at, len);
    mlr_manifest_row r;
    int is_row;
    mlr_error err = {""};
    const mlr_status st = mlr_manifest_parse_line(line, len, &r, &is_row, &err);
    if (st != MLR_OK && !err.msg[0]) abort();
    if (st == MLR_OK && is_row) {
      char back[MLR_MANIFEST_LINE_MAX + 2];
      const size_t n = mlr_manifest_format_row(&r, back, sizeof back);
      if (n != len + 1 || memcmp(back, line, len) || back[len] != '\n') abort();
    }
    free(line);
    at += len + 1;
  }
  return 0;
}
