/* The mlaref command: thin dispatch to the libraries. Exit codes: 0 success, 1 a check
 * failed, 2 bad input (one line on stderr: what, where, what is valid). */
#ifndef MLR_CLI_H
#define MLR_CLI_H

#include <stdint.h>

enum { MLR_EXIT_OK = 0, MLR_EXIT_FAIL = 1, MLR_EXIT_USAGE = 2 };

/* Print "mlaref <cmd>: <message>" on stderr; returns MLR_EXIT_USAGE. */
int mlr_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Option scanning: at argv[*i], match "--name value" or "--name=value"; on a match store the
 * value, advance *i past it and return 1; a match without a value returns -1. */
int mlr_cli_opt(int argc, char **argv, int *i, const char *name, const char **value);

/* Strict number parsing (whole string, in range); 0 on success. */
int mlr_cli_parse_u64(const char *s, uint64_t *out);
int mlr_cli_parse_double(const char *s, double *out);

/* A recipe by built-in name, else from a recipe file; returns an exit code (the message printed). */
struct mlr_recipe;
int mlr_cli_recipe(const char *cmd, const char *what, struct mlr_recipe *r);

/* A string option: when argv[*i] is --name, store its value in *dst and return 1 (a missing value
 * sets *rc to the usage error: "--name needs WHAT"); otherwise return 0. */
int mlr_cli_str(const char *cmd, int argc, char **argv, int *i, const char *name, const char *what, const char **dst, int *rc);

/* A recipe (built-in name or file), then its --set overrides, then mlr_recipe_check; an exit code. */
int mlr_cli_recipe_sets(const char *cmd, const char *what, const char *const *sets, int nsets, struct mlr_recipe *r);

/* Seconds from a monotonic clock. */
double mlr_cli_now(void);

int mlr_cmd_formats(int argc, char **argv);
int mlr_cmd_bench(int argc, char **argv);
int mlr_cmd_selfcheck(int argc, char **argv);
int mlr_cmd_gen(int argc, char **argv);
int mlr_cmd_suite(int argc, char **argv);
int mlr_cmd_inputs(int argc, char **argv);
int mlr_cmd_recipe(int argc, char **argv);
int mlr_cmd_run(int argc, char **argv);
int mlr_cmd_compare(int argc, char **argv);
int mlr_cmd_check(int argc, char **argv);
int mlr_cmd_golden(int argc, char **argv);
int mlr_cmd_oracle(int argc, char **argv);
int mlr_bench_oracle(int argc, char **argv);
int mlr_bench_emulate(int argc, char **argv);

#endif
