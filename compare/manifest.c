/* The golden digest manifest's line format (mlr_manifest.h): parsed field by field, strictly, so
 * a damaged manifest is named at its line and column instead of being half-read. */
#include "mlr_manifest.h"

#include <stdio.h>
#include <string.h>

static const char *const FIELDS[6] = {"suite", "cell", "recipe", "recipe_sha256", "o_sha256", "lse_sha256"};

static int name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

mlr_status mlr_manifest_parse_line(const char *line, size_t len, mlr_manifest_row *row, int *is_row, mlr_error *err) {
  *is_row = 0;
  memset(row, 0, sizeof *row);
  if (len == 0 || line[0] == '#') return MLR_OK;
  char *dst[6] = {row->suite, row->cell, row->recipe, row->recipe_sha, row->o_sha, row->lse_sha};
  size_t at = 0;
  for (int f = 0; f < 6; f++) {
    const size_t start = at;
    while (at < len && line[at] != '\t') at++;
    const size_t n = at - start;
    if (f < 3) {
      if (n == 0 || n > MLR_MANIFEST_NAME_MAX)
        return mlr_error_set(err, MLR_EPARSE, "column %zu: field %s has %zu characters (valid: 1..%d of [A-Za-z0-9._-])", start + 1, FIELDS[f], n,
                             MLR_MANIFEST_NAME_MAX);
      for (size_t k = start; k < at; k++)
        if (!name_char(line[k]))
          return mlr_error_set(err, MLR_EPARSE, "column %zu: field %s has the byte 0x%02X (valid: [A-Za-z0-9._-], fields separated by one tab)", k + 1,
                               FIELDS[f], (unsigned char)line[k]);
    } else {
      if (n != 64) return mlr_error_set(err, MLR_EPARSE, "column %zu: field %s has %zu characters (valid: 64 lowercase hex digits)", start + 1, FIELDS[f], n);
      for (size_t k = start; k < at; k++)
        if (!((line[k] >= '0' && line[k] <= '9') || (line[k] >= 'a' && line[k] <= 'f')))
          return mlr_error_set(err, MLR_EPARSE, "column %zu: field %s has the byte 0x%02X (valid: lowercase hex digits)", k + 1, FIELDS[f],
                               (unsigned char)line[k]);
    }
    memcpy(dst[f], line + start, n);
    dst[f][n] = 0;
    if (f < 5) {
      if (at == len) return mlr_error_set(err, MLR_EPARSE, "column %zu: the line ends after field %s (valid: 6 tab-separated fields)", at + 1, FIELDS[f]);
      at++; /* the tab */
    }
  }
  if (at != len) return mlr_error_set(err, MLR_EPARSE, "column %zu: more after the 6th field, lse_sha256 (valid: 6 tab-separated fields)", at + 1);
  *is_row = 1;
  return MLR_OK;
}

size_t mlr_manifest_format_row(const mlr_manifest_row *r, char *buf, size_t n) {
  return (size_t)snprintf(buf, n, "%s\t%s\t%s\t%s\t%s\t%s\n", r->suite, r->cell, r->recipe, r->recipe_sha, r->o_sha, r->lse_sha);
}
