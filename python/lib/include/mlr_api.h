/* mlr_api.h: a flat C API over the mlaref libraries for callers through a foreign-function
 * interface (the Python package python/mlaref calls it with ctypes). Opaque handles, plain
 * integers, pointers and NUL-terminated strings; every failure is a status (mlr_base.h) with one
 * line in an mlr_error, the same line the command prints.
 *
 * libmlaref.so holds these functions and the public functions of the modules they use; the
 * package also calls a few of those directly (mlr_tf_borrow, mlr_tf_set_meta,
 * mlr_safetensors_write, mlr_recipe_set, mlr_recipe_check, mlr_recipe_hash, mlr_recipe_text,
 * mlr_recipe_builtin_names, mlr_gpu_fast_recipe_names, mlr_decode_array, mlr_encode_f32_array,
 * mlr_encode_f64_array), which api.c keeps in the library.
 *
 * Memory: a tensor file built by the caller borrows the caller's buffers (mlr_tf_borrow), which
 * must outlive every handle made from it; handles are freed by their own free function; strings
 * returned in char ** are freed with mlr_api_free. */
#ifndef MLR_API_H
#define MLR_API_H

#include <stddef.h>
#include <stdint.h>

#include "mlr_base.h"
#include "mlr_inputs_view.h"
#include "mlr_kernel.h"
#include "mlr_recipe.h"
#include "mlr_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The library's version, the project's (CMake project(VERSION)): "0.1.0". */
const char *mlr_api_version(void);
/** 1 when this build holds mlr_check_run (compare/include/mlr_check.h), else 0. */
int mlr_api_has_check(void);
/** Cell i of a suite (fixtures/suites): its name, its generator spec in *spec; NULL past the
 *  last cell or for an unknown suite (*spec NULL too). mlr_api_suite_names: "bench|test|...". */
const char *mlr_api_suite_cell(const char *suite, size_t i, const char **spec);
const char *mlr_api_suite_names(void);
/** Free a string or buffer this API returned. */
void mlr_api_free(void *p);

/* ---- tensor files ---- */

/** A new, empty tensor file (mlr_tf_init'ed) on the heap; NULL when out of memory. */
mlr_tensor_file *mlr_api_tf_new(void);
/** mlr_tf_free, then the struct itself. NULL is fine. */
void mlr_api_tf_delete(mlr_tensor_file *tf);
/** Read a .safetensors file into a new tensor file (*out, freed with mlr_api_tf_delete). */
mlr_status mlr_api_tf_read(const char *path, mlr_tensor_file **out, mlr_error *err);
size_t mlr_api_tf_count(const mlr_tensor_file *tf);
/** Tensor i (0 .. count-1), or NULL. */
const mlr_tensor *mlr_api_tf_tensor(const mlr_tensor_file *tf, size_t i);
const char *mlr_api_tensor_name(const mlr_tensor *t);
int mlr_api_tensor_dtype(const mlr_tensor *t); /* an mlr_dtype */
int mlr_api_tensor_ndim(const mlr_tensor *t);
int64_t mlr_api_tensor_dim(const mlr_tensor *t, int k);
void *mlr_api_tensor_data(const mlr_tensor *t);
size_t mlr_api_tensor_nbytes(const mlr_tensor *t);
size_t mlr_api_tf_meta_count(const mlr_tensor_file *tf);
const char *mlr_api_tf_meta_key(const mlr_tensor_file *tf, size_t i);
const char *mlr_api_tf_meta_value(const mlr_tensor_file *tf, size_t i);

/* ---- inputs ---- */

/** Checked inputs: the tensors as given, the contract's layout (mlr_inputs_from) and its view. */
typedef struct mlr_api_inputs mlr_api_inputs;

/** The inputs in any layout mlr_inputs_from accepts. The handle takes over src's tensors and
 *  metadata (src is left empty; the caller still deletes it); label names the inputs in
 *  messages. MLR_ECONTRACT with the contract's line, MLR_ENOMEM. */
mlr_status mlr_api_inputs_from(mlr_tensor_file *src, const char *label, int allow_nonfinite,
                               mlr_api_inputs **out, mlr_error *err);
/** The inputs of a .safetensors file (mlr_inputs_load). */
mlr_status mlr_api_inputs_load(const char *path, int allow_nonfinite, mlr_api_inputs **out,
                               mlr_error *err);
/** The inputs `mlaref gen --shape SPEC` writes (mlr_gen_spec_parse, mlr_gen_inputs): the same
 *  tensors and metadata. MLR_EPARSE ("--shape 'SPEC': ..."), MLR_ENOMEM. */
mlr_status mlr_api_inputs_gen(const char *spec, int threads, mlr_api_inputs **out, mlr_error *err);
void mlr_api_inputs_free(mlr_api_inputs *h);
const mlr_inputs *mlr_api_inputs_view(const mlr_api_inputs *h);
/** The tensors in the contract's layout (what save writes). */
const mlr_tensor_file *mlr_api_inputs_contract(const mlr_api_inputs *h);
/** The label given (a file name, the spec, or the caller's). */
const char *mlr_api_inputs_label(const mlr_api_inputs *h);
/** A figure of the view: "T", "H", "N", "B", "page", "P", "kv_format" (an mlr_format),
 *  "q_format" (an mlr_format: MLR_FMT_BF16 for bf16 Q), "has_q_scale", "noncausal", "paged",
 *  "has_kv_bf16"; -1 for another name. */
int64_t mlr_api_inputs_info(const mlr_api_inputs *h, const char *what);
/** Where the view reads "q" (bf16 or fp8 codes), "kv", "qo_indptr", "kv_indptr", "kv_indices",
 *  "kv_last_page_len" or "kv_bf16": NULL when absent or for another name. */
const void *mlr_api_inputs_ptr(const mlr_api_inputs *h, const char *what);
/** Write the contract's layout as .safetensors, atomically. */
mlr_status mlr_api_inputs_save(const mlr_api_inputs *h, const char *path, mlr_error *err);

/* ---- recipes ---- */

/** A recipe by name (a built-in or the fast kernel's), from a file, or from its text (when what
 *  holds '=' and names no file), as `mlaref run --recipe` takes it; freed with
 *  mlr_api_recipe_free. MLR_EINVAL (neither a name nor a readable file), MLR_EPARSE. */
mlr_status mlr_api_recipe_new(const char *what, mlr_recipe **out, mlr_error *err);
void mlr_api_recipe_free(mlr_recipe *r);
const char *mlr_api_recipe_name(const mlr_recipe *r);
/** The output format: an mlr_outfmt (MLR_OUT_BF16, MLR_OUT_FP16, MLR_OUT_FP32). */
int mlr_api_recipe_out_format(const mlr_recipe *r);

/* ---- the model, the truth, the check ----
 * threads: the OpenMP team size for the call (0: the calling thread's current default); the
 * calling thread's setting is restored afterwards. The bits never depend on it. */

/** Run the model (mlr_emulate) into the caller's buffers: o [T, H, 512] of the recipe's output
 *  format (o_bytes must be T x H x 512 x 2, or x 4 for fp32) and lse [T, H]. MLR_EINVAL with the
 *  reason when the recipe does not fit the inputs. */
mlr_status mlr_api_emulate(const mlr_recipe *r, const mlr_api_inputs *h, int threads, void *o,
                           size_t o_bytes, float *lse, mlr_error *err);
/** The certified truth (mlr_oracle) into o [T, H, 512] and lse [T, H] (binary64); from is an
 *  mlr_truth_from; *uncertified (may be NULL) the elements not certified within 1 ulp. */
mlr_status mlr_api_oracle(const mlr_api_inputs *h, int from, int threads, double *o, double *lse,
                          int64_t *uncertified, mlr_error *err);
/** `mlaref check` (mlr_check_run): out holds 'o' and optionally 'lse'; rules in the command's
 *  spellings, one a line (NULL or "": the default set); recipe_label as the user named it. On
 *  MLR_OK, *exit_code is 0 (every rule passed) or 1, and *text and *json are what the command
 *  prints (free both with mlr_api_free). MLR_EPARSE for a bad rule, MLR_EINVAL for a bad output
 *  or a build without mlr_check_run, each with one line in err. */
mlr_status mlr_api_check(const mlr_api_inputs *h, const mlr_tensor_file *out, const char *out_label,
                         const mlr_recipe *r, const char *recipe_label, const char *rules, int from,
                         int threads, int *exit_code, char **text, char **json, mlr_error *err);

/* ---- the report, with kernels that are callbacks ---- */

/** A callback kernel for mlr_api_report (mlr_kernel_define_call): name, the recipe it claims (a
 *  built-in, fast-* or a recipe file), policy (NULL: the recipe's own), rules besides fa3 and
 *  structure one a line (NULL or ""), the callback and its ctx. Freed with mlr_api_kernel_free.
 *  MLR_EINVAL with one line for a bad name, recipe, policy or rule. */
mlr_status mlr_api_kernel_new(const char *name, const char *recipe, const char *policy,
                              const char *rules, mlr_kernel_call call, void *ctx, mlr_kernel **out,
                              mlr_error *err);
void mlr_api_kernel_free(mlr_kernel *k);

/** `mlaref report --suite SUITE --out OUT_DIR [--recipe R]... [--baseline B] [--quick]
 *  [--threads N]` with these kernels as its --kernel columns, and the command's defaults
 *  otherwise (the GPU leg where a GPU is, the golden manifest fixtures/goldens/digests.tsv where
 *  it is readable from the current folder, the default policy axis). recipes: NULL for every
 *  built-in, or names one a line ("none" alone: no recipe column, kernels only); out_dir an
 *  existing writable folder; baseline NULL or a summary.json. The callbacks run in the calling
 *  thread, one at a time. *exit_code is the command's: 0 clean, 1 a failing cell or a regression
 *  (also for a failure of the run itself, with err set and its status), 2 bad input (err set,
 *  nothing written). *summary_path (freed with mlr_api_free) is OUT_DIR/summary.json when it was
 *  written, else NULL. */
mlr_status mlr_api_report(const char *suite, const char *out_dir, const char *recipes,
                          const mlr_kernel *const *kernels, int nkernels, const char *baseline,
                          int quick, int threads, int *exit_code, char **summary_path,
                          mlr_error *err);

#ifdef __cplusplus
}
#endif
#endif
