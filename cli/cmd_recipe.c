/* mlaref recipe list | show NAME|FILE [--set key=value]... */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "mlr_gpu_fast.h"
#include "mlr_recipe.h"

int mlr_cli_recipe(const char *cmd, const char *what, mlr_recipe *r) {
  if (mlr_recipe_builtin(what, r) == MLR_OK || mlr_gpu_fast_recipe(what, r) == MLR_OK)
    return MLR_EXIT_OK;
  FILE *f = fopen(what, "rb");
  if (!f)
    return mlr_cli_usage_error(
        cmd,
        "'%s' is neither a built-in recipe (%s; the fast kernel's: %s) nor a readable file: %s",
        what, mlr_recipe_builtin_names(), mlr_gpu_fast_recipe_names(), strerror(errno));
  char *text = malloc(1 << 20);
  const size_t n = text ? fread(text, 1, (1 << 20) - 1, f) : 0;
  const int too_big = !feof(f);
  fclose(f);
  if (!text || too_big) {
    free(text);
    return mlr_cli_usage_error(cmd, "%s: recipe files are at most 1 MiB", what);
  }
  text[n] = 0;
  mlr_error err;
  const mlr_status st = mlr_recipe_parse(text, what, r, &err);
  free(text);
  return st == MLR_OK ? MLR_EXIT_OK : mlr_cli_usage_error(cmd, "%s", err.msg);
}

int mlr_cli_recipes(const char *cmd, const char **names, int n, mlr_recipe *out, int *nout) {
  *nout = 0;
  if (n == 0 || (n == 1 && strcmp(names[0], "all") == 0)) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", mlr_recipe_builtin_names());
    for (char *save = NULL, *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save))
      mlr_recipe_builtin(t, &out[(*nout)++]);
    return MLR_EXIT_OK;
  }
  for (int k = 0; k < n; k++) {
    const int rc = mlr_cli_recipe(cmd, names[k], &out[(*nout)++]);
    if (rc != MLR_EXIT_OK) return rc;
  }
  return MLR_EXIT_OK;
}

int mlr_cli_recipe_sets(const char *cmd, const char *what, const char *const *sets, int nsets,
                        struct mlr_recipe *r) {
  int rc = mlr_cli_recipe(cmd, what, r);
  mlr_error err = {""};
  for (int k = 0; rc == MLR_EXIT_OK && k < nsets; k++)
    if (mlr_recipe_set(r, sets[k], &err) != MLR_OK)
      rc = mlr_cli_usage_error(cmd, "--set %s", err.msg);
  if (rc == MLR_EXIT_OK && mlr_recipe_check(r, &err) != MLR_OK)
    rc = mlr_cli_usage_error(cmd, "recipe %s: %s", what, err.msg);
  return rc;
}

/* recipe list: each built-in, then the fast GPU kernel's own recipes, with its hash prefix and
 * what it models */
static int recipe_list(void) {
  for (int k = 0; k < 2; k++) {
    char names[512];
    snprintf(names, sizeof names, "%s",
             k ? mlr_gpu_fast_recipe_names() : mlr_recipe_builtin_names());
    if (k) printf("# the fast GPU kernel's recipes (gpu/fast)\n");
    for (char *save = NULL, *t = strtok_r(names, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
      mlr_recipe r;
      char h[65];
      if (k)
        mlr_gpu_fast_recipe(t, &r);
      else
        mlr_recipe_builtin(t, &r);
      mlr_recipe_hash(&r, h);
      const char *what = mlr_recipe_builtin_description(t);
      printf("%-18s %.16s  %s\n", t, h, what ? what : "");
    }
  }
  return MLR_EXIT_OK;
}

int mlr_cmd_recipe(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (mlr_cli_asks_help(argc - i, argv + i)) return mlr_cli_help("recipe");
  if (argc == 1 && strcmp(argv[0], "list") == 0) return recipe_list();
  if (argc < 2 || strcmp(argv[0], "show") != 0) return mlr_cli_usage_fail("recipe");
  const char *cmd = "recipe show";
  mlr_recipe r;
  int rc = mlr_cli_recipe(cmd, argv[1], &r);
  if (rc != MLR_EXIT_OK) return rc;
  for (int i = 2; i < argc; i++) {
    const char *v;
    const int m = mlr_cli_opt(argc, argv, &i, "set", &v);
    if (m == 0) return mlr_cli_unknown_option(cmd, argv[i], "--set key=value");
    if (m < 0) return mlr_cli_usage_error(cmd, "--set needs key=value");
    mlr_error err;
    if (mlr_recipe_set(&r, v, &err) != MLR_OK) return mlr_cli_usage_error(cmd, "--set %s", err.msg);
  }
  mlr_error err;
  if (mlr_recipe_check(&r, &err) != MLR_OK)
    return mlr_cli_usage_error(cmd, "%s: %s", argv[1], err.msg);
  char text[4096], canon[2048], h[65];
  mlr_recipe_text(&r, text, sizeof text);
  mlr_recipe_canonical(&r, canon, sizeof canon);
  mlr_recipe_hash(&r, h);
  printf("# recipe %s\n# sha256 %s\n# canonical %s\n%s", r.name, h, canon, text);
  return MLR_EXIT_OK;
}
