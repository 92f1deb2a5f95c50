/* mlaref formats info|boundaries|encode|decode */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "mlr_formats.h"

typedef struct fmt_args {
  int have_format;
  mlr_format format;
  mlr_rounding rounding;
  mlr_overflow overflow;
  uint32_t rbits;
} fmt_args;

/* which options a formats subcommand takes: --format always; --overflow and --rounding but for
 * decode (a decode has neither); --rbits for encode */
enum { FA_BOUNDARIES, FA_ENCODE, FA_DECODE };

/* Parse the options shared by the formats subcommands (kind: FA_*). Positional arguments are
 * moved, in order, to argv[0..*npos). Returns 0, or MLR_EXIT_USAGE after printing the reason. */
static int parse_fmt_args(const char *cmd, int argc, char **argv, fmt_args *a, int kind,
                          int allow_positional, int *npos_out) {
  const int allow_rbits = kind == FA_ENCODE, allow_modes = kind != FA_DECODE;
  a->have_format = 0;
  a->rounding = MLR_RND_NEAREST_EVEN;
  a->overflow = MLR_OVF_SATURATE;
  a->rbits = 0;
  int npos = 0;
  for (int i = 0; i < argc; i++) {
    const char *v = NULL;
    int m;
    if ((m = mlr_cli_opt(argc, argv, &i, "format", &v)) != 0) {
      if (m < 0)
        return mlr_cli_usage_error(cmd, "--format needs a value (valid: %s)", mlr_format_names());
      if (mlr_format_parse(v, &a->format) != MLR_OK)
        return mlr_cli_usage_error(cmd, "unknown format '%s' (valid: %s)", v, mlr_format_names());
      a->have_format = 1;
    } else if (allow_modes && (m = mlr_cli_opt(argc, argv, &i, "overflow", &v)) != 0) {
      if (m < 0 || mlr_overflow_parse(v, &a->overflow) != MLR_OK)
        return mlr_cli_usage_error(cmd, "unknown overflow mode '%s' (valid: %s)", m < 0 ? "" : v,
                                   mlr_overflow_names());
    } else if (allow_modes && (m = mlr_cli_opt(argc, argv, &i, "rounding", &v)) != 0) {
      if (m < 0 || mlr_rounding_parse(v, &a->rounding) != MLR_OK)
        return mlr_cli_usage_error(cmd, "unknown rounding mode '%s' (valid: %s)", m < 0 ? "" : v,
                                   mlr_rounding_names());
    } else if (allow_rbits && (m = mlr_cli_opt(argc, argv, &i, "rbits", &v)) != 0) {
      uint64_t r;
      if (m < 0 || mlr_cli_parse_u64(v, &r) || r > 0xFFFFFFFFu)
        return mlr_cli_usage_error(cmd, "--rbits '%s' is not an integer in 0..0xffffffff",
                                   m < 0 ? "" : v);
      a->rbits = (uint32_t)r;
    } else if (argv[i][0] == '-' && argv[i][1] == '-') {
      return mlr_cli_unknown_option(cmd, argv[i],
                                    allow_rbits   ? "--format, --overflow, --rounding, --rbits"
                                    : allow_modes ? "--format, --overflow, --rounding"
                                                  : "--format");
    } else {
      if (!allow_positional)
        return mlr_cli_usage_error(
            cmd, "unexpected argument '%s' (this command takes options only)", argv[i]);
      /* move positionals to the front of the tail in order */
      char *p = argv[i];
      memmove(argv + npos + 1, argv + npos, (size_t)(i - npos) * sizeof *argv);
      argv[npos++] = p;
    }
  }
  if (!a->have_format)
    return mlr_cli_usage_error(cmd, "missing --format (valid: %s)", mlr_format_names());
  *npos_out = npos;
  return 0;
}

static int code_digits(mlr_format f) { return mlr_format_get(f).bits / 4; }

static int cmd_boundaries(int argc, char **argv) {
  const char *cmd = "formats boundaries";
  fmt_args a;
  int npos;
  if (parse_fmt_args(cmd, argc, argv, &a, FA_BOUNDARIES, 0, &npos)) return MLR_EXIT_USAGE;
  if (a.rounding == MLR_RND_STOCHASTIC)
    return mlr_cli_usage_error(cmd, "rounding 'sr' has no boundaries (valid: rne|rtz)");
  uint32_t *pats, *codes;
  size_t n;
  mlr_status st = mlr_encode_boundaries(a.format, a.rounding, a.overflow, &pats, &codes, &n);
  if (st != MLR_OK) {
    fprintf(stderr, "mlaref %s: %s\n", cmd, mlr_status_str(st));
    return MLR_EXIT_FAIL;
  }
  const int w = code_digits(a.format);
  for (size_t i = 0; i < n; i++) printf("0x%08X 0x%0*X\n", pats[i], w, codes[i]);
  free(pats);
  free(codes);
  if (fflush(stdout) != 0) {
    fprintf(stderr, "mlaref %s: cannot write the output\n", cmd);
    return MLR_EXIT_FAIL;
  }
  return MLR_EXIT_OK;
}

static const char *code_class(mlr_format f, uint32_t c) {
  const mlr_format_params p = mlr_format_get(f);
  const uint32_t mag = c & (p.sign_bit - 1u);
  if (mlr_is_nan(f, c)) return "nan";
  if (p.inf_code && mag == p.inf_code) return "inf";
  if (mag == 0) return "zero";
  if ((mag >> p.t) == 0) return "subnormal";
  return "normal";
}

static int cmd_encode(int argc, char **argv) {
  const char *cmd = "formats encode";
  fmt_args a;
  int npos;
  if (parse_fmt_args(cmd, argc, argv, &a, FA_ENCODE, 1, &npos)) return MLR_EXIT_USAGE;
  if (npos == 0)
    return mlr_cli_usage_error(cmd, "no values given (decimal or hex floats, inf, nan)");
  double *vals = malloc((size_t)npos * sizeof *vals);
  if (!vals) return mlr_cli_usage_error(cmd, "out of memory");
  for (int i = 0; i < npos; i++)
    if (mlr_cli_parse_double(argv[i], &vals[i])) {
      free(vals);
      return mlr_cli_usage_error(cmd, "'%s' is not a number (decimal or hex float, inf, nan)",
                                 argv[i]);
    }
  const int w = code_digits(a.format);
  for (int i = 0; i < npos; i++) {
    const uint32_t c = mlr_encode_f64(vals[i], a.format, a.rounding, a.overflow, a.rbits);
    const float d = mlr_decode(a.format, c);
    printf("%s %a -> 0x%0*X %s %a (%.9g)\n", mlr_format_name(a.format), vals[i], w, c,
           code_class(a.format, c), (double)d, (double)d);
  }
  free(vals);
  return MLR_EXIT_OK;
}

static int cmd_decode(int argc, char **argv) {
  const char *cmd = "formats decode";
  fmt_args a;
  int npos;
  if (parse_fmt_args(cmd, argc, argv, &a, FA_DECODE, 1, &npos)) return MLR_EXIT_USAGE;
  if (npos == 0) return mlr_cli_usage_error(cmd, "no codes given (integers such as 0x7e)");
  const mlr_format_params p = mlr_format_get(a.format);
  const uint64_t top = (1ull << p.bits) - 1u;
  /* all checked before anything is printed */
  uint64_t *codes = malloc((size_t)npos * sizeof *codes);
  if (!codes) return mlr_cli_usage_error(cmd, "out of memory");
  for (int i = 0; i < npos; i++)
    if (mlr_cli_parse_u64(argv[i], &codes[i]) || codes[i] > top) {
      free(codes);
      return mlr_cli_usage_error(cmd, "code '%s' is not an integer in 0..0x%llX for %s", argv[i],
                                 (unsigned long long)top, mlr_format_name(a.format));
    }
  const int w = code_digits(a.format);
  for (int i = 0; i < npos; i++) {
    const uint32_t c = (uint32_t)codes[i];
    const float d = mlr_decode(a.format, c);
    printf("%s 0x%0*X %s %a (%.9g)\n", mlr_format_name(a.format), w, c, code_class(a.format, c),
           (double)d, (double)d);
  }
  free(codes);
  return MLR_EXIT_OK;
}

/* The contract table, computed from the library itself. */
void mlr_cli_print_format_table(FILE *out) {
  fprintf(out, "%-9s %4s %3s %4s  %-14s %-12s %-12s %-14s %s\n", "format", "bits", "t", "bias",
          "max", "min normal", "min subnorm", "NaN", "Inf");
  for (int i = 0; i < MLR_FMT_COUNT; i++) {
    const mlr_format f = (mlr_format)i;
    const mlr_format_params p = mlr_format_get(f);
    const int w = p.bits / 4;
    char nan[32], inf[16];
    if (p.fnuz)
      snprintf(nan, sizeof nan, "0x%0*X only", w, p.nan_code);
    else
      snprintf(nan, sizeof nan, "0x%0*X (+sign)", w, p.nan_code);
    if (p.inf_code)
      snprintf(inf, sizeof inf, "0x%0*X", w, p.inf_code);
    else
      snprintf(inf, sizeof inf, "none");
    fprintf(out, "%-9s %4d %3d %4d  %-14.8g %-12a %-12a %-14s %s%s\n", mlr_format_name(f), p.bits,
            p.t, p.bias, (double)mlr_format_max(f), (double)mlr_decode(f, 1u << p.t),
            (double)mlr_decode(f, 1u), nan, inf, p.fnuz ? ", no -0" : "");
  }
}

int mlr_cmd_formats(int argc, char **argv) {
  if (mlr_cli_asks_help(argc, argv) ||
      (argc > 1 && mlr_cli_asks_help(argc - 1, argv + 1) && strcmp(argv[0], "info") == 0))
    return mlr_cli_help("formats");
  if (argc < 1)
    return mlr_cli_usage_error("formats",
                               "missing subcommand (valid: info|boundaries|encode|decode)");
  const char *sub = argv[0];
  if (strcmp(sub, "boundaries") == 0) return cmd_boundaries(argc - 1, argv + 1);
  if (strcmp(sub, "encode") == 0) return cmd_encode(argc - 1, argv + 1);
  if (strcmp(sub, "decode") == 0) return cmd_decode(argc - 1, argv + 1);
  if (strcmp(sub, "info") == 0) {
    if (argc > 1) return mlr_cli_usage_error("formats info", "unexpected argument '%s'", argv[1]);
    mlr_cli_print_format_table(stdout);
    return MLR_EXIT_OK;
  }
  return mlr_cli_usage_error("formats",
                             "unknown subcommand '%s' (valid: info|boundaries|encode|decode)", sub);
}
