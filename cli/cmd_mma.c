/* mlaref mma check FILE... --unit U [--format F]: a matrix-unit model (ref/mma) against vectors
 * measured on hardware or computed by another model (MMA-Sim), one inner product a line:
 * `C D a_0 .. a_(k-1) b_0 .. b_(k-1)`, C and D binary32 bit patterns in hex, the operands codes
 * of the unit's input format in hex (scripts/mma_vectors.py, scripts/mmasim_vectors.py write
 * them). D is held bit for bit (two NaNs agree whatever their payloads: they are not modelled);
 * k may be any length, run as the unit runs it (blocks in order, each block's D the next one's
 * C). Exit 0 when every D agrees, 1 when one differs (the first few printed), 2 on bad input. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "mlr_formats.h"
#include "mlr_mma.h"

#define CMD "mma check"
enum { MAX_K = 256, SHOWN = 5 };

/* the unit's operand format (--format overrides it) */
static mlr_format unit_format(const char *unit) {
  if (strstr(unit, "e5m2")) return MLR_FMT_E5M2;
  if (strstr(unit, "cdna3-fp8")) return MLR_FMT_E4M3FNUZ;
  if (strstr(unit, "e4m3")) return MLR_FMT_E4M3;
  if (strstr(unit, "f16") && !strstr(unit, "bf16")) return MLR_FMT_FP16;
  return MLR_FMT_BF16;
}

static int space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* one line into c, d, a, b (*k products): 0, or -1 when it is not such a line: hex numbers, C and
 * D within 32 bits, each operand within its format's width, at most MAX_K of each */
static int parse(char *line, uint32_t *c, uint32_t *d, mlr_format f, float *a, float *b, int *k) {
  uint32_t v[2 * MAX_K + 2];
  int n = 0;
  const unsigned long width = mlr_format_get(f).bits == 8 ? 0xFFul : 0xFFFFul;
  for (char *p = line, *end;; p = end) {
    while (*p && space(*p)) p++;
    if (!*p) break;
    if (n == 2 * MAX_K + 2) return -1; /* more than MAX_K products */
    const unsigned long x = strtoul(p, &end, 16);
    if (end == p || (*end && !space(*end)) || x > (n < 2 ? 0xFFFFFFFFul : width)) return -1;
    v[n++] = (uint32_t)x;
  }
  if (n < 4 || n % 2) return -1;
  *k = (n - 2) / 2;
  *c = v[0];
  *d = v[1];
  for (int i = 0; i < *k; i++) {
    a[i] = mlr_decode(f, v[2 + i]);
    b[i] = mlr_decode(f, v[2 + *k + i]);
  }
  return 0;
}

/* every line of one file: its lines and those whose D differs into *n and *bad */
static int check_file(const char *path, const mlr_mma_model *m, mlr_format f, long *n, long *bad) {
  FILE *fp = fopen(path, "r");
  if (!fp) return mlr_cli_usage_error(CMD, "%s: cannot open it (%s)", path, strerror(errno));
  static char line[16 * (2 * MAX_K + 2)];
  float a[MAX_K], b[MAX_K];
  for (long ln = 1; fgets(line, sizeof line, fp); ln++) {
    if (line[0] == '#' || line[0] == '\n') continue;
    uint32_t cb, db;
    int k;
    if (parse(line, &cb, &db, f, a, b, &k)) {
      fclose(fp);
      return mlr_cli_usage_error(CMD,
                                 "%s:%ld: not `C D a_0 .. a_(k-1) b_0 .. b_(k-1)` in hex "
                                 "(k <= %d)",
                                 path, ln, MAX_K);
    }
    const float dm = mlr_mma_dot(m, a, b, k, mlr_bits_f32(cb));
    const int same = mlr_f32_bits(dm) == db || (isnan(dm) && isnan(mlr_bits_f32(db)));
    if (!same && (*bad)++ < SHOWN)
      printf("%s:%ld: model %08x (%a), file %08x (%a)\n", path, ln, mlr_f32_bits(dm), dm, db,
             mlr_bits_f32(db));
    (*n)++;
  }
  fclose(fp);
  return MLR_EXIT_OK;
}

int mlr_cmd_mma(int argc, char **argv) {
  if (argc < 1 || strcmp(argv[0], "check")) return mlr_cli_usage_fail(CMD);
  const char *unit = NULL, *fmt = NULL, *files[64];
  int nf = 0, rc = MLR_EXIT_OK;
  for (int i = 1; i < argc; i++) {
    if (mlr_cli_str(CMD, argc, argv, &i, "unit", "a matrix unit (e.g. sm90-bf16)", &unit, &rc) ||
        mlr_cli_str(CMD, argc, argv, &i, "format", "a number format", &fmt, &rc)) {
      if (rc != MLR_EXIT_OK) return rc;
    } else if (argv[i][0] == '-' && argv[i][1] == '-')
      return mlr_cli_unknown_option(CMD, argv[i], "--unit --format");
    else if (nf == 64)
      return mlr_cli_usage_error(CMD, "at most 64 files");
    else
      files[nf++] = argv[i];
  }
  if (!unit || !nf) return mlr_cli_usage_fail(CMD);
  const mlr_mma_model *m = mlr_mma_find(unit);
  if (!m)
    return mlr_cli_usage_error(CMD,
                               "--unit '%s' is not a matrix unit (valid: sm90-e4m3, "
                               "sm90-bf16, sm90-f16, cdna3-fp8, sm90-e4m3-sync, cdna3-bf16, "
                               "sm90-e5m2)",
                               unit);
  mlr_format f = unit_format(unit);
  if (fmt && mlr_format_parse(fmt, &f) != MLR_OK)
    return mlr_cli_usage_error(CMD, "--format '%s' is not a number format (mlaref formats info)",
                               fmt);
  long n = 0, bad = 0;
  for (int k = 0; k < nf; k++)
    if ((rc = check_file(files[k], m, f, &n, &bad)) != MLR_EXIT_OK) return rc;
  printf("mma check %s (%s operands): %ld inner products, %ld bit-identical, %ld differ\n", unit,
         mlr_format_name(f), n, n - bad, bad);
  return bad ? MLR_EXIT_FAIL : MLR_EXIT_OK;
}
