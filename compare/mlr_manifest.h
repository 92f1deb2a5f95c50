/* mlr_manifest.h: the golden digest manifest (fixtures/goldens/digests.tsv), one row a line:
 *   suite \t cell \t recipe \t recipe_sha256 \t o_sha256 \t lse_sha256
 * names of 1..63 characters from [A-Za-z0-9._-], digests of 64 lowercase hex digits. Lines that
 * start with '#' and empty lines are comments. Written by `mlaref golden --digests`, read by
 * `golden --verify` (cli/cmd_golden.c). */
#ifndef MLR_MANIFEST_H
#define MLR_MANIFEST_H

#include <stddef.h>

#include "ref/base/mlr_base.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MLR_MANIFEST_NAME_MAX = 63, MLR_MANIFEST_LINE_MAX = 3 * (MLR_MANIFEST_NAME_MAX + 1) + 3 * 65 };

typedef struct mlr_manifest_row {
  char suite[MLR_MANIFEST_NAME_MAX + 1], cell[MLR_MANIFEST_NAME_MAX + 1], recipe[MLR_MANIFEST_NAME_MAX + 1];
  char recipe_sha[65], o_sha[65], lse_sha[65];
} mlr_manifest_row;

/** One line (len bytes, no newline; a trailing '\r' is not accepted): MLR_OK with *is_row 1 and
 *  the row, MLR_OK with *is_row 0 for a comment or an empty line, or MLR_EPARSE naming the field,
 *  its 1-based column and what is valid. */
mlr_status mlr_manifest_parse_line(const char *line, size_t len, mlr_manifest_row *row, int *is_row, mlr_error *err);

/** The row as its line, newline included, into buf (at most MLR_MANIFEST_LINE_MAX + 2 bytes);
 *  returns the length snprintf would write. */
size_t mlr_manifest_format_row(const mlr_manifest_row *row, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
