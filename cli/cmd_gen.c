/* mlaref gen, mlaref suite, mlaref inputs: fixtures from the command line. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "mlr_gen.h"
#include "mlr_inputs.h"
#include "mlr_suites.h"

typedef struct prog {
  const char *what;
  int tty, last;
} prog;

static void progress(double f, void *ctx) {
  prog *p = (prog *)ctx;
  const int pct = (int)(f * 100.0);
  if (!p->tty || pct == p->last) return;
  p->last = pct;
  fprintf(stderr, "\rgen %s: %3d%%%s", p->what, pct, pct >= 100 ? "\n" : "");
  fflush(stderr);
}

/* one cell: parse, check memory, generate, write; returns an exit code */
static int gen_one(const char *cmd, const char *spec_text, const char *out) {
  mlr_gen_spec spec;
  mlr_error err = {""};
  const int rc = mlr_cli_spec_fits(cmd, "--shape", spec_text, &spec);
  if (rc != MLR_EXIT_OK) return rc;
  mlr_tensor_file tf;
  prog pg = {out, isatty(2), -1};
  mlr_status st = mlr_gen_inputs(&spec, &tf, progress, &pg, &err);
  mlr_gen_spec_free(&spec);
  if (st != MLR_OK) {
    fprintf(stderr, "mlaref %s: %s\n", cmd, err.msg);
    return MLR_EXIT_FAIL;
  }
  st = mlr_safetensors_write(out, &tf, &err);
  mlr_tf_free(&tf);
  if (st != MLR_OK) {
    fprintf(stderr, "mlaref %s: %s\n", cmd, err.msg);
    return st == MLR_EIO ? MLR_EXIT_USAGE : MLR_EXIT_FAIL;
  }
  return MLR_EXIT_OK;
}

int mlr_cli_spec_fits(const char *cmd, const char *what, const char *spec_text,
                      mlr_gen_spec *spec) {
  mlr_error err = {""};
  if (mlr_gen_spec_parse(spec_text, spec, &err) != MLR_OK)
    return mlr_cli_usage_error(cmd, "%s '%s': %s", what, spec_text, err.msg);
  uint64_t need;
  /* the inputs' size, refused up front (with the figure) where it does not fit */
  const int rc =
      mlr_gen_bytes(spec, &need) != MLR_OK /* the size arithmetic overflowed 64 bits */
          ? mlr_cli_usage_error(cmd, "%s '%s': its inputs' size in bytes does not fit in 64 bits",
                                what, spec_text)
          : mlr_cli_memory_fits(cmd, (double)need, "%s '%s' (its inputs)", what, spec_text);
  if (rc != MLR_EXIT_OK) mlr_gen_spec_free(spec);
  return rc;
}

int mlr_cli_read_inputs(const char *cmd, const char *path, int allow_nonfinite, mlr_tensor_file *tf,
                        mlr_inputs *in) {
  mlr_tensor_file raw;
  mlr_error err = {""};
  const mlr_status st = mlr_inputs_load(path, allow_nonfinite, &raw, tf, in, &err);
  mlr_tf_free(&raw); /* tf owns what it uses */
  if (st == MLR_OK) return MLR_EXIT_OK;
  mlr_tf_free(tf);
  return st == MLR_ENOMEM ? mlr_cli_fail(cmd, "%s", err.msg)
                          : mlr_cli_usage_error(cmd, "%s", err.msg);
}

int mlr_cli_gen_memory(const char *cmd, const char *what, const char *spec_text,
                       mlr_tensor_file *tf, mlr_inputs *in, double *gen_seconds) {
  mlr_gen_spec spec;
  mlr_error err = {""};
  const int rc = mlr_cli_spec_fits(cmd, what, spec_text, &spec);
  if (rc != MLR_EXIT_OK) return rc;
  const double t0 = mlr_cli_now();
  const mlr_status st = mlr_gen_inputs(&spec, tf, NULL, NULL, &err);
  if (gen_seconds) *gen_seconds = mlr_cli_now() - t0;
  mlr_gen_spec_free(&spec);
  if (st != MLR_OK) {
    fprintf(stderr, "mlaref %s: %s\n", cmd, err.msg);
    return MLR_EXIT_FAIL;
  }
  if (mlr_inputs_check(tf, spec_text, 0, in, &err) != MLR_OK) {
    mlr_tf_free(tf);
    fprintf(stderr, "mlaref %s: %s\n", cmd, err.msg);
    return MLR_EXIT_FAIL;
  }
  return MLR_EXIT_OK;
}

int mlr_cmd_gen(int argc, char **argv) {
  const char *cmd = "gen", *shape = NULL, *out = NULL, *suite = NULL;
  int rc = MLR_EXIT_OK;
  for (int i = 0; i < argc && rc == MLR_EXIT_OK; i++) {
    const char *v;
    int m;
    if ((m = mlr_cli_opt(argc, argv, &i, "shape", &v)) != 0) {
      if (m < 0) return mlr_cli_usage_error(cmd, "--shape needs a value, e.g. bs=4,kv=1024,seed=1");
      shape = v;
    } else if ((m = mlr_cli_opt(argc, argv, &i, "out", &v)) != 0) {
      if (m < 0) return mlr_cli_usage_error(cmd, "--out needs a file (or a folder with --suite)");
      out = v;
    } else if ((m = mlr_cli_opt(argc, argv, &i, "suite", &v)) != 0) {
      if (m < 0)
        return mlr_cli_usage_error(cmd, "--suite needs a name (valid: %s)", mlr_suite_names());
      suite = v;
    } else if (mlr_cli_max_memory_opt(cmd, argc, argv, &i, &rc))
      continue;
    else
      return mlr_cli_unknown_option(cmd, argv[i], "--shape, --suite, --out, --max-memory");
  }
  if (rc != MLR_EXIT_OK) return rc;
  if (!out)
    return mlr_cli_usage_error(cmd,
                               "missing --out (a .safetensors file, or a folder with --suite)");
  if (!!shape == !!suite)
    return mlr_cli_usage_error(cmd, "give exactly one of --shape SPEC or --suite NAME (valid: %s)",
                               mlr_suite_names());
  if (shape)
    return (rc = mlr_cli_out_file_check(cmd, out)) != MLR_EXIT_OK ? rc : gen_one(cmd, shape, out);
  const mlr_suite *s = mlr_suite_find(suite);
  if (!s)
    return mlr_cli_usage_error(cmd, "unknown suite '%s' (valid: %s)", suite, mlr_suite_names());
  if ((rc = mlr_cli_make_dir(cmd, "--out", out)) != MLR_EXIT_OK) return rc;
  for (size_t i = 0; i < s->n; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.safetensors", out, s->cells[i].name);
    if ((rc = gen_one(cmd, s->cells[i].spec, path)) != MLR_EXIT_OK) return rc;
    printf("%s %s\n", path, s->cells[i].spec);
  }
  return MLR_EXIT_OK;
}

int mlr_cmd_suite(int argc, char **argv) {
  const char *cmd = "suite";
  for (int i = 0; i < argc; i++)
    if (mlr_cli_asks_help(argc - i, argv + i)) return mlr_cli_help(cmd);
  if (argc >= 1 && strcmp(argv[0], "list") == 0 && argc == 1) {
    size_t n;
    const mlr_suite *s = mlr_suites(&n);
    for (size_t i = 0; i < n; i++) printf("%-8s %3zu cells  %s\n", s[i].name, s[i].n, s[i].doc);
    return MLR_EXIT_OK;
  }
  if (argc == 2 && strcmp(argv[0], "show") == 0) {
    const mlr_suite *s = mlr_suite_find(argv[1]);
    if (!s)
      return mlr_cli_usage_error("suite show", "unknown suite '%s' (valid: %s)", argv[1],
                                 mlr_suite_names());
    for (size_t i = 0; i < s->n; i++) {
      mlr_gen_spec spec;
      mlr_error err;
      char canon[512];
      if (mlr_gen_spec_parse(s->cells[i].spec, &spec, &err) != MLR_OK) {
        fprintf(stderr, "mlaref suite show: cell %s: %s\n", s->cells[i].name, err.msg);
        return MLR_EXIT_FAIL;
      }
      mlr_gen_spec_format(&spec, canon, sizeof canon);
      mlr_gen_spec_free(&spec);
      printf("%-12s %s\n", s->cells[i].name, canon);
    }
    return MLR_EXIT_OK;
  }
  return mlr_cli_usage_error(cmd, "usage: suite list | suite show NAME (valid names: %s)",
                             mlr_suite_names());
}

/* --- inputs check | pack | unpack --- */

static int inputs_check(int argc, char **argv) {
  const char *cmd = "inputs check", *path = NULL;
  int allow = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--allow-nonfinite") == 0)
      allow = 1;
    else if (argv[i][0] == '-' && argv[i][1] == '-')
      return mlr_cli_unknown_option(cmd, argv[i], "--allow-nonfinite");
    else if (path)
      return mlr_cli_usage_error(cmd, "one file at a time ('%s' and '%s')", path, argv[i]);
    else
      path = argv[i];
  }
  if (!path) return mlr_cli_usage_error(cmd, "missing the inputs file (.safetensors)");
  mlr_tensor_file tf;
  mlr_inputs in;
  const int rc = mlr_cli_read_inputs(cmd, path, allow, &tf, &in);
  if (rc != MLR_EXIT_OK) return rc;
  printf("%s: conforms: T=%lld H=%lld B=%lld kv rows=%lld page=%lld kv=%s kv_scale=%a%s%s\n", path,
         (long long)in.T, (long long)in.H, (long long)in.B, (long long)in.N, (long long)in.page,
         mlr_format_name(in.kv_format), (double)in.kv_scale, in.kv_indices ? " paged" : "",
         in.kv_bf16 ? " with kv_bf16" : "");
  mlr_tf_free(&tf);
  return MLR_EXIT_OK;
}

/* DTYPE names of pack: the tensor dtype, and the fp8 variant recorded in metadata */
static int pack_dtype(const char *s, mlr_dtype *d, const char **variant) {
  static const struct {
    const char *n;
    mlr_dtype d;
    const char *v;
  } t[] = {{"bf16", MLR_DT_BF16, NULL},
           {"f16", MLR_DT_F16, NULL},
           {"f32", MLR_DT_F32, NULL},
           {"f64", MLR_DT_F64, NULL},
           {"i32", MLR_DT_I32, NULL},
           {"i64", MLR_DT_I64, NULL},
           {"u8", MLR_DT_U8, NULL},
           {"e4m3", MLR_DT_F8_E4M3, NULL},
           {"e5m2", MLR_DT_F8_E5M2, NULL},
           {"e4m3fnuz", MLR_DT_U8, "e4m3fnuz"},
           {"e5m2fnuz", MLR_DT_U8, "e5m2fnuz"}};
  for (size_t i = 0; i < sizeof t / sizeof *t; i++)
    if (strcasecmp(s, t[i].n) == 0) {
      *d = t[i].d;
      *variant = t[i].v;
      return 0;
    }
  /* the safetensors names inputs unpack prints (BF16, F8_E4M3, ..), in either case */
  for (int k = 0; k < MLR_DT_COUNT; k++)
    if (strcasecmp(s, mlr_dtype_name((mlr_dtype)k)) == 0) {
      *d = (mlr_dtype)k;
      *variant = NULL;
      return 0;
    }
  return -1;
}

static int inputs_pack(int argc, char **argv) {
  const char *cmd = "inputs pack", *out = NULL;
  mlr_tensor_file tf;
  mlr_tf_init(&tf);
  mlr_error err;
  int rc = MLR_EXIT_OK;
  for (int i = 0; i < argc && rc == MLR_EXIT_OK; i++) {
    const char *v;
    int m;
    if ((m = mlr_cli_opt(argc, argv, &i, "out", &v)) != 0) {
      if (m < 0) rc = mlr_cli_usage_error(cmd, "--out needs a .safetensors file");
      out = v;
      continue;
    }
    if ((m = mlr_cli_opt(argc, argv, &i, "meta", &v)) != 0) {
      const char *eq = m > 0 ? strchr(v, '=') : NULL;
      if (!eq) {
        rc = mlr_cli_usage_error(cmd, "--meta needs KEY=VALUE");
        break;
      }
      char key[256];
      snprintf(key, sizeof key, "%.*s", (int)(eq - v), v);
      mlr_tf_set_meta(&tf, key, eq + 1);
      continue;
    }
    if (argv[i][0] == '-' && argv[i][1] == '-') {
      rc = mlr_cli_unknown_option(cmd, argv[i], "--out, --meta");
      break;
    }
    /* NAME=FILE.npy:DTYPE */
    const char *eq = strchr(argv[i], '='), *colon = strrchr(argv[i], ':');
    mlr_dtype d;
    const char *variant;
    if (!eq || !colon || colon < eq || pack_dtype(colon + 1, &d, &variant)) {
      rc = mlr_cli_usage_error(cmd,
                               "'%s' is not NAME=FILE.npy:DTYPE (DTYPE: "
                               "bf16|f16|f32|f64|i32|i64|u8|e4m3|e5m2|e4m3fnuz|e5m2fnuz, either "
                               "case, or the names inputs unpack prints: F8_E4M3, F8_E5M2)",
                               argv[i]);
      break;
    }
    char name[MLR_NAME_MAX], file[4096];
    snprintf(name, sizeof name, "%.*s", (int)(eq - argv[i]), argv[i]);
    snprintf(file, sizeof file, "%.*s", (int)(colon - eq - 1), eq + 1);
    if (mlr_npy_read(file, d, name, &tf, &err) != MLR_OK) {
      rc = mlr_cli_usage_error(cmd, "%s", err.msg);
      break;
    }
    if (variant) {
      char key[MLR_NAME_MAX + 32];
      snprintf(key, sizeof key, "mlaref.format.%s", name);
      mlr_tf_set_meta(&tf, key, variant);
    }
  }
  if (rc == MLR_EXIT_OK && !out) rc = mlr_cli_usage_error(cmd, "missing --out");
  if (rc == MLR_EXIT_OK && tf.n == 0)
    rc = mlr_cli_usage_error(cmd, "no tensors given (NAME=FILE.npy:DTYPE ...)");
  if (rc == MLR_EXIT_OK && mlr_safetensors_write(out, &tf, &err) != MLR_OK)
    rc = mlr_cli_usage_error(cmd, "%s", err.msg);
  mlr_tf_free(&tf);
  return rc;
}

static int inputs_unpack(int argc, char **argv) {
  const char *cmd = "inputs unpack", *in = NULL, *dir = NULL;
  for (int i = 0; i < argc; i++) {
    const char *v;
    int m;
    if ((m = mlr_cli_opt(argc, argv, &i, "dir", &v)) != 0) {
      if (m < 0) return mlr_cli_usage_error(cmd, "--dir needs a folder");
      dir = v;
    } else if (argv[i][0] == '-' && argv[i][1] == '-')
      return mlr_cli_unknown_option(cmd, argv[i], "--dir");
    else
      in = argv[i];
  }
  if (!in || !dir) return mlr_cli_usage_fail(cmd);
  mlr_tensor_file tf;
  mlr_error err;
  if (mlr_safetensors_read(in, &tf, &err) != MLR_OK) return mlr_cli_usage_error(cmd, "%s", err.msg);
  int rc = mlr_cli_make_dir(cmd, "--dir", dir);
  if (rc == MLR_EXIT_OK && mlr_inputs_write_npy(&tf, dir, &err) != MLR_OK)
    rc = mlr_cli_usage_error(cmd, "%s", err.msg);
  for (size_t i = 0; i < tf.n && rc == MLR_EXIT_OK; i++) {
    /* the dtype as pack takes it back: an FNUZ fp8 tensor (U8) by its format in the metadata */
    char key[MLR_NAME_MAX + 32];
    snprintf(key, sizeof key, "mlaref.format.%s", tf.t[i].name);
    const char *variant = tf.t[i].dtype == MLR_DT_U8 ? mlr_tf_get_meta(&tf, key) : NULL;
    printf("%s/%s.npy %s\n", dir, tf.t[i].name, variant ? variant : mlr_dtype_name(tf.t[i].dtype));
  }
  if (rc == MLR_EXIT_OK) printf("%s/metadata.json\n", dir);
  mlr_tf_free(&tf);
  return rc;
}

int mlr_cmd_inputs(int argc, char **argv) {
  if (mlr_cli_asks_help(argc, argv)) return mlr_cli_help("inputs");
  if (argc >= 1 && strcmp(argv[0], "check") == 0) return inputs_check(argc - 1, argv + 1);
  if (argc >= 1 && strcmp(argv[0], "pack") == 0) return inputs_pack(argc - 1, argv + 1);
  if (argc >= 1 && strcmp(argv[0], "unpack") == 0) return inputs_unpack(argc - 1, argv + 1);
  return mlr_cli_usage_error("inputs",
                             "unknown or missing subcommand '%s' (valid: check|pack|unpack)",
                             argc ? argv[0] : "");
}
