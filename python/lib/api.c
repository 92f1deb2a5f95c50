/* api.c: the flat C API of libmlaref.so (mlr_api.h), for the Python package. */
#define _POSIX_C_SOURCE 200809L
#include "mlr_api.h"

#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mlr_check.h"
#include "mlr_emulate.h"
#include "mlr_formats.h"
#include "mlr_gen.h"
#include "mlr_gpu_fast.h"
#include "mlr_inputs.h"
#include "mlr_suites.h"
#include "mlr_oracle.h"
#include "mlr_report.h"

#ifndef MLAREF_VERSION
#error "MLAREF_VERSION must be defined (python/CMakeLists.txt: the project's version)"
#endif
#ifndef MLAREF_COMMIT
#define MLAREF_COMMIT "unknown"
#endif

/* mlr_check_run is referenced weakly: a build whose libraries lack it still loads, and
 * mlr_api_has_check says so (python/CMakeLists.txt asks the linker for it with -u). */
#pragma weak mlr_check_run
#pragma weak mlr_check_report_free

/* The library functions the package calls directly: referenced here, so that the linker takes
 * them from the static module libraries into the shared one. */
__attribute__((used)) static void *const direct_calls[] = {
    (void *)mlr_tf_borrow,
    (void *)mlr_tf_set_meta,
    (void *)mlr_tf_add,
    (void *)mlr_safetensors_write,
    (void *)mlr_recipe_set,
    (void *)mlr_recipe_check,
    (void *)mlr_recipe_hash,
    (void *)mlr_recipe_text,
    (void *)mlr_recipe_builtin_names,
    (void *)mlr_gpu_fast_recipe_names,
    (void *)mlr_decode_array,
    (void *)mlr_encode_f32_array,
    (void *)mlr_encode_f64_array,
    (void *)mlr_status_str,
};

const char *mlr_api_version(void) { return MLAREF_VERSION; }

/* cell i of a suite (mlr_api.h) */
const char *mlr_api_suite_cell(const char *suite, size_t i, const char **spec) {
  const mlr_suite *s = mlr_suite_find(suite);
  *spec = s && i < s->n ? s->cells[i].spec : NULL;
  return *spec ? s->cells[i].name : NULL;
}

const char *mlr_api_suite_names(void) { return mlr_suite_names(); }

int mlr_api_has_check(void) { return mlr_check_run != NULL && mlr_check_report_free != NULL; }

void mlr_api_free(void *p) { free(p); }

/* The calling thread's OpenMP team size for one call, then back to what it was: a host process
 * may have lowered it for itself (PyTorch does on import), and the command's default is every
 * processor. Returns the size to restore. */
static int threads_begin(int threads) {
  const int old = omp_get_max_threads();
  if (threads > 0) omp_set_num_threads(threads);
  return old;
}
static void threads_end(int old) { omp_set_num_threads(old); }

/* ---- tensor files ---- */

mlr_tensor_file *mlr_api_tf_new(void) {
  mlr_tensor_file *tf = malloc(sizeof *tf);
  if (tf) mlr_tf_init(tf);
  return tf;
}

void mlr_api_tf_delete(mlr_tensor_file *tf) {
  if (!tf) return;
  mlr_tf_free(tf);
  free(tf);
}

mlr_status mlr_api_tf_read(const char *path, mlr_tensor_file **out, mlr_error *err) {
  *out = NULL;
  mlr_tensor_file *tf = mlr_api_tf_new();
  if (!tf) return mlr_error_set(err, MLR_ENOMEM, "%s: out of memory", path);
  const mlr_status st = mlr_safetensors_read(path, tf, err);
  if (st != MLR_OK) {
    mlr_api_tf_delete(tf);
    return st;
  }
  *out = tf;
  return MLR_OK;
}

size_t mlr_api_tf_count(const mlr_tensor_file *tf) { return tf->n; }

const mlr_tensor *mlr_api_tf_tensor(const mlr_tensor_file *tf, size_t i) {
  return i < tf->n ? &tf->t[i] : NULL;
}

const char *mlr_api_tensor_name(const mlr_tensor *t) { return t->name; }
int mlr_api_tensor_dtype(const mlr_tensor *t) { return (int)t->dtype; }
int mlr_api_tensor_ndim(const mlr_tensor *t) { return t->ndim; }
int64_t mlr_api_tensor_dim(const mlr_tensor *t, int k) {
  return k >= 0 && k < t->ndim ? t->shape[k] : -1;
}
void *mlr_api_tensor_data(const mlr_tensor *t) { return t->data; }
size_t mlr_api_tensor_nbytes(const mlr_tensor *t) { return t->nbytes; }

size_t mlr_api_tf_meta_count(const mlr_tensor_file *tf) { return tf->nmeta; }
const char *mlr_api_tf_meta_key(const mlr_tensor_file *tf, size_t i) {
  return i < tf->nmeta ? tf->meta[i].key : NULL;
}
const char *mlr_api_tf_meta_value(const mlr_tensor_file *tf, size_t i) {
  return i < tf->nmeta ? tf->meta[i].value : NULL;
}

/* ---- inputs ---- */

struct mlr_api_inputs {
  mlr_tensor_file raw; /* the tensors as given (borrowed from the caller, or read, or generated) */
  mlr_tensor_file dst; /* the contract's layout; may borrow from raw: freed first */
  mlr_inputs in;
  char label[512];
};

static mlr_api_inputs *inputs_new(const char *label) {
  mlr_api_inputs *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  mlr_tf_init(&h->raw);
  mlr_tf_init(&h->dst);
  snprintf(h->label, sizeof h->label, "%s", label ? label : "inputs");
  return h;
}

void mlr_api_inputs_free(mlr_api_inputs *h) {
  if (!h) return;
  mlr_tf_free(&h->dst);
  mlr_tf_free(&h->raw);
  free(h);
}

/* the last step of every constructor: *out on success, everything freed on failure */
static mlr_status inputs_done(mlr_api_inputs *h, mlr_status st, mlr_api_inputs **out) {
  if (st != MLR_OK) {
    mlr_api_inputs_free(h);
    return st;
  }
  *out = h;
  return MLR_OK;
}

mlr_status mlr_api_inputs_from(mlr_tensor_file *src, const char *label, int allow_nonfinite,
                               mlr_api_inputs **out, mlr_error *err) {
  *out = NULL;
  mlr_api_inputs *h = inputs_new(label);
  if (!h) return mlr_error_set(err, MLR_ENOMEM, "%s: out of memory", label);
  h->raw = *src; /* take the tensors over: src is left empty */
  mlr_tf_init(src);
  const mlr_status st = mlr_inputs_from(&h->raw, h->label, allow_nonfinite, &h->dst, &h->in, err);
  return inputs_done(h, st, out);
}

mlr_status mlr_api_inputs_load(const char *path, int allow_nonfinite, mlr_api_inputs **out,
                               mlr_error *err) {
  *out = NULL;
  mlr_api_inputs *h = inputs_new(path);
  if (!h) return mlr_error_set(err, MLR_ENOMEM, "%s: out of memory", path);
  const mlr_status st = mlr_inputs_load(path, allow_nonfinite, &h->raw, &h->dst, &h->in, err);
  return inputs_done(h, st, out);
}

mlr_status mlr_api_inputs_gen(const char *spec_text, int threads, mlr_api_inputs **out,
                              mlr_error *err) {
  *out = NULL;
  mlr_gen_spec spec;
  mlr_error e = {""};
  if (mlr_gen_spec_parse(spec_text, &spec, &e) != MLR_OK)
    return mlr_error_set(err, MLR_EPARSE, "--shape '%s': %s", spec_text, e.msg);
  mlr_api_inputs *h = inputs_new(spec_text);
  if (!h) {
    mlr_gen_spec_free(&spec);
    return mlr_error_set(err, MLR_ENOMEM, "--shape '%s': out of memory", spec_text);
  }
  const int old = threads_begin(threads);
  mlr_status st = mlr_gen_inputs(&spec, &h->raw, NULL, NULL, err);
  threads_end(old);
  mlr_gen_spec_free(&spec);
  if (st == MLR_OK) st = mlr_inputs_from(&h->raw, h->label, 0, &h->dst, &h->in, err);
  return inputs_done(h, st, out);
}

const mlr_inputs *mlr_api_inputs_view(const mlr_api_inputs *h) { return &h->in; }
const mlr_tensor_file *mlr_api_inputs_contract(const mlr_api_inputs *h) { return &h->dst; }
const char *mlr_api_inputs_label(const mlr_api_inputs *h) { return h->label; }

int64_t mlr_api_inputs_info(const mlr_api_inputs *h, const char *what) {
  const mlr_inputs *in = &h->in;
  const struct {
    const char *name;
    int64_t value;
  } figures[] = {
      {"T", in->T},
      {"H", in->H},
      {"N", in->N},
      {"B", in->B},
      {"page", in->page},
      {"P", in->P},
      {"kv_format", in->kv_format},
      {"q_format", in->q8 ? in->q_format : MLR_FMT_BF16},
      {"has_q_scale", in->has_q_scale},
      {"noncausal", in->noncausal},
      {"paged", in->kv_indices != NULL},
      {"has_kv_bf16", in->kv_bf16 != NULL},
  };
  for (size_t k = 0; k < sizeof figures / sizeof *figures; k++)
    if (strcmp(what, figures[k].name) == 0) return figures[k].value;
  return -1;
}

const void *mlr_api_inputs_ptr(const mlr_api_inputs *h, const char *what) {
  const mlr_inputs *in = &h->in;
  if (strcmp(what, "q") == 0) return in->q8 ? (const void *)in->q8 : (const void *)in->q;
  if (strcmp(what, "kv") == 0) return in->kv;
  if (strcmp(what, "qo_indptr") == 0) return in->qo_indptr;
  if (strcmp(what, "kv_indptr") == 0) return in->kv_indptr;
  if (strcmp(what, "kv_indices") == 0) return in->kv_indices;
  if (strcmp(what, "kv_last_page_len") == 0) return in->kv_last_page_len;
  if (strcmp(what, "kv_bf16") == 0) return in->kv_bf16;
  return NULL;
}

mlr_status mlr_api_inputs_save(const mlr_api_inputs *h, const char *path, mlr_error *err) {
  return mlr_safetensors_write(path, &h->dst, err);
}

/* ---- recipes ---- */

/* what names a file: read it (at most 1 MiB) into a new string */
static mlr_status read_text(const char *path, char **text, mlr_error *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return MLR_EIO;
  char *buf = malloc(1 << 20);
  const size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
  const int too_big = buf && !feof(f);
  fclose(f);
  if (!buf) return mlr_error_set(err, MLR_ENOMEM, "%s: out of memory", path);
  if (too_big) {
    free(buf);
    return mlr_error_set(err, MLR_EINVAL, "%s: recipe files are at most 1 MiB", path);
  }
  buf[n] = 0;
  *text = buf;
  return MLR_OK;
}

mlr_status mlr_api_recipe_new(const char *what, mlr_recipe **out, mlr_error *err) {
  *out = NULL;
  mlr_recipe *r = calloc(1, sizeof *r);
  if (!r) return mlr_error_set(err, MLR_ENOMEM, "recipe '%s': out of memory", what);
  mlr_status st = MLR_OK;
  if (mlr_recipe_builtin(what, r) != MLR_OK && mlr_gpu_fast_recipe(what, r) != MLR_OK) {
    char *text = NULL;
    st = read_text(what, &text, err);
    const int errno_file = errno;
    if (st == MLR_OK) {
      st = mlr_recipe_parse(text, what, r, err);
      free(text);
    } else if (st == MLR_EIO && strchr(what, '='))
      st = mlr_recipe_parse(what, "recipe text", r, err);
    else if (st == MLR_EIO)
      st = mlr_error_set(
          err, MLR_EINVAL,
          "'%s' is neither a built-in recipe (%s; the fast kernel's: %s) nor a readable file: %s",
          what, mlr_recipe_builtin_names(), mlr_gpu_fast_recipe_names(), strerror(errno_file));
  }
  if (st != MLR_OK) {
    free(r);
    return st;
  }
  *out = r;
  return MLR_OK;
}

void mlr_api_recipe_free(mlr_recipe *r) { free(r); }
const char *mlr_api_recipe_name(const mlr_recipe *r) { return r->name; }
int mlr_api_recipe_out_format(const mlr_recipe *r) { return r->out_format; }

/* ---- the model, the truth, the check ---- */

mlr_status mlr_api_emulate(const mlr_recipe *r, const mlr_api_inputs *h, int threads, void *o,
                           size_t o_bytes, float *lse, mlr_error *err) {
  mlr_emu_opts opts = {threads, 0, MLR_FAULT_NONE, 0};
  mlr_emu_result res = {0};
  const int old = threads_begin(threads);
  mlr_status st = mlr_emulate(r, &h->in, &opts, &res, err);
  threads_end(old);
  if (st == MLR_OK) {
    const size_t n = mlr_emu_o_bytes(&res);
    if (n != o_bytes)
      st = mlr_error_set(err, MLR_EINVAL, "the output buffer holds %zu bytes, o needs %zu", o_bytes,
                         n);
    else {
      memcpy(o, res.o, n);
      memcpy(lse, res.lse, (size_t)(res.T * res.H) * sizeof(float));
    }
  }
  mlr_emu_result_free(&res);
  return st;
}

mlr_status mlr_api_oracle(const mlr_api_inputs *h, int from, int threads, double *o, double *lse,
                          int64_t *uncertified, mlr_error *err) {
  mlr_oracle_stats stats = {0};
  const int old = threads_begin(threads);
  const mlr_status st = mlr_oracle(&h->in, (mlr_truth_from)from, o, lse, &stats, err);
  threads_end(old);
  if (uncertified) *uncertified = stats.uncertified;
  return st;
}

enum { MAX_RULES = 16 };

/* rules, one a line, into r[]: the count, or -1 with err set */
static int parse_rules(const char *text, mlr_rule *r, mlr_error *err) {
  int n = 0;
  const char *p = text ? text : "";
  while (*p) {
    const char *e = strchr(p, '\n');
    const size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len) {
      char one[256];
      if (n == MAX_RULES || len >= sizeof one) {
        mlr_error_set(err, MLR_EPARSE, "at most %d rules of at most %zu characters (rules: %s)",
                      MAX_RULES, sizeof one - 1, mlr_rule_forms());
        return -1;
      }
      memcpy(one, p, len);
      one[len] = 0;
      if (mlr_rule_parse(one, &r[n++], err) != MLR_OK) return -1;
    }
    p += len + (e != NULL);
  }
  return n;
}

mlr_status mlr_api_check(const mlr_api_inputs *h, const mlr_tensor_file *out, const char *out_label,
                         const mlr_recipe *r, const char *recipe_label, const char *rules, int from,
                         int threads, int *exit_code, char **text, char **json, mlr_error *err) {
  *text = *json = NULL;
  *exit_code = 2;
  if (!mlr_api_has_check())
    return mlr_error_set(err, MLR_EINVAL,
                         "this build of libmlaref has no mlr_check_run (compare/check.c): "
                         "rebuild with it");
  mlr_rule rs[MAX_RULES];
  const int n = parse_rules(rules, rs, err);
  if (n < 0) return MLR_EPARSE;
  const char *shape = mlr_tf_get_meta(&h->dst, "mlaref.shape");
  if (!shape) shape = mlr_tf_get_meta(&h->raw, "mlaref.shape");
  mlr_check_args a = {
      .in = &h->in,
      .inputs_label = h->label,
      .shape = shape,
      .out = out,
      .out_label = out_label,
      .recipe = r,
      .recipe_label = recipe_label,
      .rules = n ? rs : NULL,
      .nrules = n,
      .tensors = MLR_CHECK_BOTH,
      .from = from,
      .threads = threads,
      .commit = MLAREF_COMMIT,
      .o_alone = "lse=None checks o alone",
  };
  mlr_check_report rep = {0};
  const int old = threads_begin(threads);
  const mlr_status st = mlr_check_run(&a, &rep, err);
  threads_end(old);
  if (st != MLR_OK) return st;
  *exit_code = rep.exit_code;
  *text = rep.text ? strdup(rep.text) : strdup("");
  *json = rep.json ? strdup(rep.json) : strdup("{}");
  mlr_check_report_free(&rep);
  if (!*text || !*json) {
    free(*text);
    free(*json);
    *text = *json = NULL;
    return mlr_error_set(err, MLR_ENOMEM, "check: out of memory for its report");
  }
  return MLR_OK;
}

/* ---- the report, with kernels that are callbacks ---- */

mlr_status mlr_api_kernel_new(const char *name, const char *recipe, const char *policy,
                              const char *rules, mlr_kernel_call call, void *ctx, mlr_kernel **out,
                              mlr_error *err) {
  *out = NULL;
  mlr_rule rs[MAX_RULES];
  const int n = parse_rules(rules, rs, err);
  if (n < 0) return MLR_EINVAL;
  const char *texts[MAX_RULES];
  for (int k = 0; k < n; k++) texts[k] = rs[k].text;
  mlr_kernel *k = malloc(sizeof *k);
  if (!k) return mlr_error_set(err, MLR_ENOMEM, "kernel %s: out of memory", name);
  const mlr_status st = mlr_kernel_define_call(k, name, recipe, policy, texts, n, call, ctx, err);
  if (st != MLR_OK) {
    free(k);
    return st;
  }
  *out = k;
  return MLR_OK;
}

void mlr_api_kernel_free(mlr_kernel *k) { free(k); }

enum { MAX_REPORT_RECIPES = 16 };

/* the recipe names, one a line, split in place into names[] (at most MAX_REPORT_RECIPES) */
static mlr_status recipe_list(char *text, const char **names, int *n, int nkernels,
                              mlr_error *err) {
  *n = 0;
  for (char *p = strtok(text, "\n"); p; p = strtok(NULL, "\n")) {
    if (*n == MAX_REPORT_RECIPES)
      return mlr_error_set(err, MLR_EINVAL, "at most %d recipes", MAX_REPORT_RECIPES);
    names[(*n)++] = p;
  }
  for (int k = 0; k < *n; k++)
    if (!strcmp(names[k], "none") && (*n > 1 || !nkernels))
      return mlr_error_set(err, MLR_EINVAL,
                           *n > 1 ? "recipe none is given alone (no recipe column)"
                                  : "recipe none leaves no column: give a kernel");
  return MLR_OK;
}

/* what the command checks before any work: the folder, the plotter, the baseline (read into
 * base); the golden manifest where it is readable */
static mlr_status report_checks(const char *out_dir, const char *baseline, mlr_report *base,
                                const char **digests, mlr_error *err) {
  struct stat sb;
  if (stat(out_dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(out_dir, W_OK | X_OK) != 0)
    return mlr_error_set(err, MLR_EINVAL, "--out '%s' is not a writable folder", out_dir);
  mlr_status st = mlr_report_plotter_check("gnuplot", err);
  if (st == MLR_OK && baseline && access(baseline, R_OK) != 0)
    st = mlr_error_set(err, MLR_EIO, "--baseline %s: cannot read it", baseline);
  if (st == MLR_OK && baseline) st = mlr_report_read(baseline, base, err);
  *digests = access(MLR_REPORT_DEFAULT_DIGESTS, R_OK) == 0 ? MLR_REPORT_DEFAULT_DIGESTS : NULL;
  return st;
}

/* the run, the comparison and the files (the kernels copied into one array, as the run takes
 * them) */
static mlr_status report_do(const mlr_report_opts *o, const mlr_kernel *const *kernels,
                            const mlr_report *base, const char *baseline, const char *out_dir,
                            mlr_report *rep, mlr_error *err) {
  mlr_kernel *ks = calloc((size_t)(o->nkernels > 0 ? o->nkernels : 1), sizeof *ks);
  if (!ks) return mlr_error_set(err, MLR_ENOMEM, "report: out of memory for the kernels");
  for (int k = 0; k < o->nkernels; k++) ks[k] = *kernels[k];
  mlr_report_opts run = *o;
  run.kernels = ks;
  mlr_status st = mlr_report_run(&run, rep, err);
  free(ks);
  snprintf(rep->version, sizeof rep->version, "%s", MLAREF_VERSION);
  if (st == MLR_OK)
    st = mlr_report_finish(rep, baseline ? base : NULL, baseline, out_dir, "gnuplot", err);
  return st;
}

mlr_status mlr_api_report(const char *suite, const char *out_dir, const char *recipes,
                          const mlr_kernel *const *kernels, int nkernels, const char *baseline,
                          int quick, int threads, int *exit_code, char **summary_path,
                          mlr_error *err) {
  *exit_code = 2;
  *summary_path = NULL;
  if (nkernels < 0 || nkernels > MLR_REPORT_MAX_KERNELS)
    return mlr_error_set(err, MLR_EINVAL, "at most %d kernels", MLR_REPORT_MAX_KERNELS);
  for (int k = 0; k < nkernels; k++)
    for (int j = 0; j < k; j++)
      if (!strcmp(kernels[j]->name, kernels[k]->name))
        return mlr_error_set(err, MLR_EINVAL, "kernel %s given twice", kernels[k]->name);
  char *text = recipes ? strdup(recipes) : NULL;
  const char *names[MAX_REPORT_RECIPES];
  int nrec = 0;
  mlr_status st = recipes && !text ? mlr_error_set(err, MLR_ENOMEM, "out of memory") : MLR_OK;
  if (st == MLR_OK && text) st = recipe_list(text, names, &nrec, nkernels, err);
  mlr_report base, rep;
  memset(&base, 0, sizeof base);
  memset(&rep, 0, sizeof rep);
  const char *digests = NULL;
  if (st == MLR_OK) st = report_checks(out_dir, baseline, &base, &digests, err);
  if (st == MLR_OK) {
    const mlr_report_opts o = {.suite = suite,
                               .recipes = text ? names : NULL,
                               .nrecipes = nrec,
                               .nkernels = nkernels,
                               .commit = MLAREF_COMMIT,
                               .quick = quick,
                               .digests = digests,
                               .threads = threads,
                               .gpu = MLR_REPORT_GPU_AUTO};
    const int old = threads_begin(threads);
    st = report_do(&o, kernels, &base, baseline, out_dir, &rep, err);
    threads_end(old);
    *exit_code = st == MLR_OK ? mlr_report_exit_code(&rep)
                 : st == MLR_EINVAL || st == MLR_EPARSE || st == MLR_EIO || st == MLR_EDEVICE ? 2
                                                                                              : 1;
  }
  free(text);
  mlr_report_free(&base);
  mlr_report_free(&rep);
  if (st != MLR_OK) return st;
  const size_t n = strlen(out_dir) + sizeof "/summary.json";
  if (!(*summary_path = malloc(n))) return mlr_error_set(err, MLR_ENOMEM, "out of memory");
  snprintf(*summary_path, n, "%s/summary.json", out_dir);
  return MLR_OK;
}
