/* Fuzz target: the report's summary.json reader (mlr_report_baseline: a file from another run, read
 * field by field and compared cell by cell with this run's; then mlr_report_merge of it as a
 * shard). Any file must come back as MLR_OK or an error with a message, never a crash, a hang or a
 * leak; with MLR_OK every regression is a non-empty line naming a cell of this run. Built as
 * fuzz_recipe.c. */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "mlr_report.h"
#include "tests/fuzz/fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 20) return 0;
  const char *path = fuzz_file(data, size);
  if (!path) return 0;
  /* this run: three cells, as a quick report of the edge suite would have them */
  static mlr_report_cell cells[3];
  static const char *const SHAPES[3] = {"bs1_kv1", "bs1_kv1", "bs2_kv33"}, *const RECIPES[3] = {
                                                                               "fp32-seq",
                                                                               "aiter-a8w8-ps",
                                                                               "fp32-seq"};
  for (int k = 0; k < 3; k++) {
    memset(&cells[k], 0, sizeof cells[k]);
    snprintf(cells[k].shape, sizeof cells[k].shape, "%s", SHAPES[k]);
    snprintf(cells[k].recipe, sizeof cells[k].recipe, "%s", RECIPES[k]);
    memset(cells[k].o_sha, 'a' + k, 64);
    cells[k].applicable = k != 2;
    cells[k].pass = k != 1;
    cells[k].util.max = 0.5 * (k + 1);
    cells[k].bound_computed = 1;
    cells[k].bound_holds = 1;
  }
  mlr_report rep;
  memset(&rep, 0, sizeof rep);
  rep.cells = cells;
  rep.ncells = 3;
  rep.margin = 0.1;
  mlr_error err = {""};
  const mlr_status st = mlr_report_baseline(&rep, path, &err);
  if (st != MLR_OK && !err.msg[0]) abort();
  for (int k = 0; k < rep.nregressions; k++)
    if (!rep.regressions[k][0] ||
        (!strstr(rep.regressions[k], "bs1_kv1") && !strstr(rep.regressions[k], "bs2_kv33")))
      abort();
  rep.cells = NULL; /* static: not the report's to free */
  mlr_report_free(&rep);
  /* the same file as a shard: read, merged alone (a file that reads must merge or be refused with a
   * message) */
  mlr_report part, whole;
  if (mlr_report_read(path, &part, &err) == MLR_OK) {
    if (mlr_report_merge(&part, 1, &whole, &err) == MLR_OK) {
      if (whole.ncells != part.ncells) abort();
      mlr_report_free(&whole);
    } else if (!err.msg[0])
      abort();
    mlr_report_free(&part);
  } else if (!err.msg[0])
    abort();
  return 0;
}
