/* The mlaref command: thin dispatch to the libraries. Exit codes: 0 success, 1 a check
 * failed, 2 bad input (one line on stderr: what, where, what is valid). */
#ifndef MLR_CLI_H
#define MLR_CLI_H

#include <stddef.h>
#include <stdint.h>

enum { MLR_EXIT_OK = 0, MLR_EXIT_FAIL = 1, MLR_EXIT_USAGE = 2 };

/* Print "mlaref <cmd>: <message>" on stderr; returns MLR_EXIT_USAGE. */
int mlr_cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The same line for a failure that is not bad input; returns MLR_EXIT_FAIL. */
int mlr_cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The usage error "unknown option 'OPTION' (valid: VALID)"; returns MLR_EXIT_USAGE. --help and -h
 * are not unknown: they print CMD's usage (mlr_cli_help) and exit 0 (options are read before any
 * work, so there is nothing to undo). */
int mlr_cli_unknown_option(const char *cmd, const char *option, const char *valid);
/* CMD's usage line (by its first word) and the exit statuses on stdout; returns MLR_EXIT_OK. */
int mlr_cli_help(const char *cmd);
/* bad input for want of an argument: "usage: " and cmd's part of its usage (a subcommand's, e.g.
 * "report merge ...", else the whole), the one `mlaref CMD --help` prints; exit 2 */
int mlr_cli_usage_fail(const char *cmd);
/* bad input for want of a required option: "missing OPTION (usage: ...)", the usage as above */
int mlr_cli_missing(const char *cmd, const char *option);
/* Whether argv[0] is --help or -h (for the commands whose first argument is a subcommand). */
int mlr_cli_asks_help(int argc, char **argv);

/* An output folder (--out DIR, --dir DIR) is made when missing, with its parents, like mkdir -p.
 * mlr_cli_out_dir_check, before any work: DIR is a writable folder, or can be made (its nearest
 * existing part is a writable folder); a path that exists as a file is bad input. mlr_cli_make_dir,
 * when the command is about to write: the check, then the folders. Exit codes (the message
 * printed, naming OPT). */
int mlr_cli_out_dir_check(const char *cmd, const char *opt, const char *dir);
int mlr_cli_make_dir(const char *cmd, const char *opt, const char *dir);
/* An output .safetensors file (--out FILE), before any work: its folder exists and is writable,
 * and its name does not end in .npy (the writer refuses it: numpy could not load the bytes).
 * Exit codes, with the writer's messages. */
int mlr_cli_out_file_check(const char *cmd, const char *path);

/* Option scanning: at argv[*i], match "--name value" or "--name=value"; on a match store the
 * value, advance *i past it and return 1; a match without a value returns -1. */
int mlr_cli_opt(int argc, char **argv, int *i, const char *name, const char **value);

/* Strict number parsing (whole string, in range); 0 on success. */
int mlr_cli_parse_u64(const char *s, uint64_t *out);
int mlr_cli_parse_double(const char *s, double *out);

/* A recipe by built-in name, else from a recipe file; returns an exit code (the message
 * printed). */
struct mlr_recipe;
int mlr_cli_recipe(const char *cmd, const char *what, struct mlr_recipe *r);

/* The recipes named by --recipe options (none, or the one name "all": every built-in, at most 16)
 * into out[*nout]; an exit code (the message printed). */
int mlr_cli_recipes(const char *cmd, const char **names, int n, struct mlr_recipe *out, int *nout);

/* A string option: when argv[*i] is --name, store its value in *dst and return 1 (a missing value
 * sets *rc to the usage error: "--name needs WHAT"); otherwise return 0. */
int mlr_cli_str(const char *cmd, int argc, char **argv, int *i, const char *name, const char *what,
                const char **dst, int *rc);

/* A repeated option: when argv[*i] is --name, append its value to list[*n] and return 1 (a missing
 * value, or max values already, sets *rc to the usage error "--name needs WHAT (at most MAX)");
 * otherwise return 0. */
int mlr_cli_list(const char *cmd, int argc, char **argv, int *i, const char *name, const char *what,
                 const char **list, int *n, int max, int *rc);

/* A count: when argv[*i] is --name, store its value in *out and return 1 (a missing value or one
 * outside lo..hi sets *rc to the usage error "--name: an integer in LO..HI"); otherwise return 0.
 */
int mlr_cli_count(const char *cmd, int argc, char **argv, int *i, const char *name, uint64_t lo,
                  uint64_t hi, uint64_t *out, int *rc);

/* --threads N (1..1024): when argv[*i] is that option, store N in *threads (a bad value sets *rc to
 * the usage error "--threads 'VALUE': an integer in 1..1024") and return 1; otherwise return 0. */
int mlr_cli_threads_opt(const char *cmd, int argc, char **argv, int *i, int *threads, int *rc);

/* A recipe (built-in name or file), then its --set overrides, then mlr_recipe_check; an exit
 * code. */
int mlr_cli_recipe_sets(const char *cmd, const char *what, const char *const *sets, int nsets,
                        struct mlr_recipe *r);

/* The CPU's model name from /proc/cpuinfo ("unknown" where there is none), for benchmark
 * headers. */
void mlr_cli_cpu_model(char *buf, size_t n);

/* Inputs generated in memory from a shape spec and checked against the contract: an exit code
 * (the message printed, naming the spec as `WHAT 'SPEC'`; tf freed on failure); *gen_seconds
 * (may be NULL) times the generation. */
struct mlr_tensor_file;
struct mlr_inputs;
struct mlr_gen_spec;
/* A shape spec parsed into *spec (free it with mlr_gen_spec_free) whose inputs fit the available
 * memory: an exit code (the message printed, naming the spec as `WHAT 'SPEC'`, with the figure). */
int mlr_cli_spec_fits(const char *cmd, const char *what, const char *spec_text,
                      struct mlr_gen_spec *spec);
int mlr_cli_gen_memory(const char *cmd, const char *what, const char *spec,
                       struct mlr_tensor_file *tf, struct mlr_inputs *in, double *gen_seconds);
/* Inputs read from a file in any layout (docs/inputs.md) and checked: an exit code (the message
 * printed; tf freed on failure), tf owning every tensor in views. */
int mlr_cli_read_inputs(const char *cmd, const char *path, int allow_nonfinite,
                        struct mlr_tensor_file *tf, struct mlr_inputs *in);

/* --tolerance RTOL,ATOL (two numbers >= 0, not both 0; v NULL: the option had no value): an exit
 * code (the message printed). */
int mlr_cli_parse_tolerance(const char *cmd, const char *v, double *rtol, double *atol);
/* Bytes of memory available now (physical pages free); UINT64_MAX when the system does not say. */
uint64_t mlr_cli_available_memory(void);
/* --max-memory GB (a limit below the available memory, for CI machines shared with other jobs):
 * when argv[*i] is that option, record it (a bad value sets *rc to the usage error) and return 1.
 */
int mlr_cli_max_memory_opt(const char *cmd, int argc, char **argv, int *i, int *rc);
/* The bytes a command may use: the available memory, or --max-memory where that is lower. */
uint64_t mlr_cli_memory_limit(void);
/* MLR_EXIT_OK when NEED bytes fit the limit; otherwise the usage error "WHAT needs N GB of memory,
 * more than the M GB available" (or "allowed (--max-memory)"), printed before anything is
 * allocated. */
int mlr_cli_memory_fits(const char *cmd, double need, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An inputs file is read whole: its size (in *bytes, for the later figure of inputs and outputs
 * together) against the limit; a missing file is left to the reader. */
int mlr_cli_file_fits(const char *cmd, const char *path, double *bytes);
/* Seconds from a monotonic clock. */
double mlr_cli_now(void);

/* The user kernels' options as given (`report`, `policy-check`; cli/kernel_opts.c). */
enum { MLR_CLI_MAX_KERNELS = 16 };
typedef struct mlr_cli_kernel_args {
  const char *specs[MLR_CLI_MAX_KERNELS], *recipes[MLR_CLI_MAX_KERNELS],
      *policies[MLR_CLI_MAX_KERNELS], *timeouts[MLR_CLI_MAX_KERNELS + 1],
      *rules[4 * MLR_CLI_MAX_KERNELS], *inputs[MLR_CLI_MAX_KERNELS];
  int nspecs, nrecipes, npolicies, ntimeouts, nrules, ninputs;
} mlr_cli_kernel_args;
/* One of --kernel, --kernel-recipe, --kernel-policy, --kernel-timeout, --kernel-rule at argv[*i]:
 * stored in *a and 1 (a missing value or one too many sets *rc to the usage error), else 0. */
int mlr_cli_kernel_opt(const char *cmd, int argc, char **argv, int *i, mlr_cli_kernel_args *a,
                       int *rc);
/* The kernels of *a into ks[a->nspecs] (mlr_kernel_define), each option checked: an exit code
 * (the usage error printed). policy NULL: each kernel's --kernel-policy, else its recipe's own;
 * otherwise that policy for every kernel (the caller refuses --kernel-policy then). */
struct mlr_kernel;
int mlr_cli_kernels_define(const char *cmd, const mlr_cli_kernel_args *a, const char *policy,
                           struct mlr_kernel *ks);

int mlr_cmd_formats(int argc, char **argv);
int mlr_cmd_bench(int argc, char **argv);
int mlr_cmd_selfcheck(int argc, char **argv);
int mlr_cmd_gen(int argc, char **argv);
int mlr_cmd_suite(int argc, char **argv);
int mlr_cmd_inputs(int argc, char **argv);
int mlr_cmd_recipe(int argc, char **argv);
int mlr_cmd_run(int argc, char **argv);
int mlr_cmd_gpu(int argc, char **argv);
int mlr_cmd_compare(int argc, char **argv);
int mlr_cmd_check(int argc, char **argv);
int mlr_cmd_golden(int argc, char **argv);
int mlr_cmd_oracle(int argc, char **argv);
int mlr_cmd_budget(int argc, char **argv);
int mlr_cmd_policy_check(int argc, char **argv);
int mlr_cmd_report(int argc, char **argv);
int mlr_cmd_discriminate(int argc, char **argv);
int mlr_cmd_mma(int argc, char **argv);
int mlr_bench_oracle(int argc, char **argv);
int mlr_bench_emulate(int argc, char **argv);
int mlr_bench_gpu_exact(int argc, char **argv);
int mlr_bench_gpu_fast(int argc, char **argv);
int mlr_bench_mma(int argc, char **argv);

#endif
