/* mlaref golden: golden cells of the model and their digest manifest.
 *   golden --suite NAME... --recipe NAME|FILE|all --out DIR [--max-bs N]
 *          write DIR/SUITE.CELL.safetensors, one a cell, and the manifest DIR/digests.tsv
 *   golden --suite NAME... --recipe ...|all --digests FILE
 *          write the digest manifest only
 *   golden --verify [--goldens DIR] [--digests FILE] [--suite NAME]...
 *          regenerate every manifest row (of the named suites; the manifest DIR/digests.tsv
 *          unless --digests names another) and check the digests, and every golden cell present
 *          in DIR against the regenerated inputs and outputs.
 * A golden cell holds the cell's inputs in the contract's layout (when they take at most
 * GOLDEN_INPUTS_MAX bytes; larger cells name the generator spec and their inputs' digests, and
 * --verify regenerates them) and, for every recipe that fits the cell, its outputs o.RECIPE and
 * lse.RECIPE; its __metadata__ holds the mlaref version, the cell (suite, name, generator spec,
 * seed and version, the SHA-256 of q and kv) and each recipe's canonical string and SHA-256. So a
 * kernel's tests need only the cell file and `mlaref check` (or mlaref.check). Files are written
 * atomically (temporary name, fsync, rename). The manifest (tab-separated, '#' comments): suite,
 * cell, recipe, recipe SHA-256, SHA-256 of o's bytes, SHA-256 of lse's bytes. A recipe that does
 * not fit a cell (fp8 operands on bf16 KV) has no row. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mlr_manifest.h"
#include "mlr_gen.h"
#include "mlr_inputs.h"
#include "mlr_suites.h"
#include "mlr_gpu.h"
#include "mlr_emulate.h"
#include "mlr_recipe.h"

#define DEFAULT_GOLDENS   "fixtures/goldens"
#define MANIFEST_NAME     "digests.tsv" /* beside the golden cells */
/* a cell's inputs travel in its golden file up to this size (the edge, test and bs=4 kv=1024 cells;
 * bs=4 kv=8192 has 19 MB of KV): larger ones are regenerated from the spec the file names */
#define GOLDEN_INPUTS_MAX (4u << 20)

typedef struct outcome {
  char o_sha[65], lse_sha[65], recipe_sha[65];
  mlr_emu_result res;
  int fits; /* 0: the recipe does not fit the cell's inputs */
} outcome;

typedef struct cellin {
  mlr_tensor_file tf;
  mlr_inputs in;
  char q_sha[65], kv_sha[65];
} cellin;

static int cell_inputs(const char *cmd, const char *spec, cellin *c) {
  const int rc = mlr_cli_gen_memory(cmd, "cell", spec, &c->tf, &c->in, NULL);
  if (rc != MLR_EXIT_OK) return rc;
  const mlr_tensor *q = mlr_tf_find(&c->tf, "q"), *kv = mlr_tf_find(&c->tf, "kv");
  mlr_sha256_hex(q->data, q->nbytes, c->q_sha);
  mlr_sha256_hex(kv->data, kv->nbytes, c->kv_sha);
  return MLR_EXIT_OK;
}

static int use_gpu;          /* --gpu: the GPU exact kernel computes the outputs */
static double gpu_kernel_ms; /* their kernel time, summed */

static int run_cell(const char *cmd, const mlr_recipe *r, const cellin *c, outcome *out) {
  memset(out, 0, sizeof *out);
  mlr_error err = {""};
  mlr_emu_opts o = {0, 0, MLR_FAULT_NONE, 0};
  mlr_recipe_hash(r, out->recipe_sha);
  if (mlr_emu_check_fit(r, &c->in, &err) == MLR_EINVAL)
    return MLR_EXIT_OK; /* does not fit: no row */
  mlr_gpu_timing tm = {0, 0, 0, 0, 0, 0};
  const mlr_status st = use_gpu ? mlr_gpu_exact(r, &c->in, &out->res, &tm, &err)
                                : mlr_emulate(r, &c->in, &o, &out->res, &err);
  gpu_kernel_ms += tm.kernel_ms;
  if (st != MLR_OK) {
    fprintf(stderr, "mlaref %s: %s\n", cmd, err.msg);
    return MLR_EXIT_FAIL;
  }
  out->fits = 1;
  mlr_sha256_hex(out->res.o, mlr_emu_o_bytes(&out->res), out->o_sha);
  mlr_sha256_hex(out->res.lse, (size_t)(out->res.T * out->res.H) * 4, out->lse_sha);
  return MLR_EXIT_OK;
}

static void progress(int tty, const char *what, size_t k, size_t n) {
  if (!tty) return;
  fprintf(stderr, "\rgolden: %zu/%zu %-60.60s", k, n, what);
  if (k == n) fputc('\n', stderr);
  fflush(stderr);
}

/* the cell file's start: the inputs (when small enough) and the cell's metadata */
static mlr_status cell_file_begin(mlr_tensor_file *tf, const char *suite,
                                  const mlr_suite_cell *cell, const cellin *c) {
  mlr_tf_init(tf);
  size_t bytes = 0;
  for (size_t i = 0; i < c->tf.n; i++) bytes += c->tf.t[i].nbytes;
  const int with_inputs = bytes <= GOLDEN_INPUTS_MAX;
  mlr_status st = MLR_OK;
  for (size_t i = 0; with_inputs && st == MLR_OK && i < c->tf.n; i++) {
    const mlr_tensor *t = &c->tf.t[i];
    st = mlr_tf_borrow(tf, t->name, t->dtype, t->ndim, t->shape, t->data, NULL);
  }
  for (size_t i = 0; st == MLR_OK && i < c->tf.nmeta; i++)
    st = mlr_tf_set_meta(tf, c->tf.meta[i].key, c->tf.meta[i].value);
  const char *kv[][2] = {{"mlaref.version", MLAREF_VERSION},
                         {"mlaref.kind", "golden-cell"},
                         {"mlaref.suite", suite},
                         {"mlaref.cell", cell->name},
                         {"mlaref.inputs", with_inputs ? "included" : "regenerate"},
                         {"mlaref.inputs.q.sha256", c->q_sha},
                         {"mlaref.inputs.kv.sha256", c->kv_sha}};
  for (size_t k = 0; st == MLR_OK && k < sizeof kv / sizeof *kv; k++)
    st = mlr_tf_set_meta(tf, kv[k][0], kv[k][1]);
  return st;
}

/* a recipe's outputs o.NAME and lse.NAME into the cell file, with its hash and canonical string */
static mlr_status cell_file_add(mlr_tensor_file *tf, const mlr_recipe *r, const outcome *oc) {
  const mlr_emu_result *res = &oc->res;
  const int64_t so[3] = {res->T, res->H, MLR_EMU_V_DIM}, sl[2] = {res->T, res->H};
  const mlr_dtype od = res->out_format == MLR_OUT_FP32   ? MLR_DT_F32
                       : res->out_format == MLR_OUT_FP16 ? MLR_DT_F16
                                                         : MLR_DT_BF16;
  char name[MLR_NAME_MAX], key[160], canon[2048];
  mlr_tensor *t;
  snprintf(name, sizeof name, "o.%.63s", r->name);
  mlr_status st = mlr_tf_add(tf, name, od, 3, so, &t);
  if (st == MLR_OK) memcpy(t->data, res->o, mlr_emu_o_bytes(res));
  snprintf(name, sizeof name, "lse.%.63s", r->name);
  if (st == MLR_OK && (st = mlr_tf_add(tf, name, MLR_DT_F32, 2, sl, &t)) == MLR_OK)
    memcpy(t->data, res->lse, (size_t)(res->T * res->H) * 4);
  mlr_recipe_canonical(r, canon, sizeof canon);
  snprintf(key, sizeof key, "mlaref.recipe.%.63s.sha256", r->name);
  if (st == MLR_OK) st = mlr_tf_set_meta(tf, key, oc->recipe_sha);
  snprintf(key, sizeof key, "mlaref.recipe.%.63s.canonical", r->name);
  if (st == MLR_OK) st = mlr_tf_set_meta(tf, key, canon);
  return st;
}

/* a golden cell file's recipe outputs against the regenerated outcome, its inputs (when it holds
 * them) against the generator's: 0 when they match, else a message in why */
static int check_file(const char *path, const char *rname, const cellin *c, const outcome *oc,
                      char *why, size_t n) {
  mlr_tensor_file tf;
  mlr_error err = {""};
  if (mlr_safetensors_read(path, &tf, &err) != MLR_OK) {
    snprintf(why, n, "%s", err.msg);
    return 1;
  }
  char on[MLR_NAME_MAX], ln[MLR_NAME_MAX], key[160];
  snprintf(on, sizeof on, "o.%.63s", rname);
  snprintf(ln, sizeof ln, "lse.%.63s", rname);
  snprintf(key, sizeof key, "mlaref.recipe.%.63s.sha256", rname);
  const mlr_tensor *o = mlr_tf_find(&tf, on), *l = mlr_tf_find(&tf, ln), *q = mlr_tf_find(&tf, "q"),
                   *kv = mlr_tf_find(&tf, "kv");
  const char *rh = mlr_tf_get_meta(&tf, key);
  const mlr_tensor *gq = mlr_tf_find(&c->tf, "q"), *gkv = mlr_tf_find(&c->tf, "kv");
  int bad = 1;
  if (!o || !l)
    snprintf(why, n, "%s: no tensor '%s' or '%s'", path, on, ln);
  else if (o->nbytes != mlr_emu_o_bytes(&oc->res) || memcmp(o->data, oc->res.o, o->nbytes))
    snprintf(why, n, "%s: %s differs from the model's", path, on);
  else if (l->nbytes != (size_t)(oc->res.T * oc->res.H) * 4 ||
           memcmp(l->data, oc->res.lse, l->nbytes))
    snprintf(why, n, "%s: %s differs from the model's", path, ln);
  else if (!rh || strcmp(rh, oc->recipe_sha))
    snprintf(why, n, "%s: recipe hash %s, the recipe's is %s", path, rh ? rh : "(none)",
             oc->recipe_sha);
  else if ((q && (q->nbytes != gq->nbytes || memcmp(q->data, gq->data, q->nbytes))) ||
           (kv && (kv->nbytes != gkv->nbytes || memcmp(kv->data, gkv->data, kv->nbytes))))
    snprintf(why, n, "%s: its inputs differ from the generator's", path);
  else
    bad = 0;
  mlr_tf_free(&tf);
  return bad;
}

static int verify(const char *cmd, const char *digests, const char *goldens, const char **suites,
                  int nsuites) {
  mlr_manifest_row *mrows;
  size_t nrows;
  mlr_error merr = {""};
  const mlr_status mst = mlr_manifest_read(digests, &mrows, &nrows, &merr);
  if (mst == MLR_EIO)
    return mlr_cli_usage_error(cmd, "cannot open the digest manifest '%s' (--digests FILE)",
                               digests);
  if (mst != MLR_OK) return mlr_cli_usage_error(cmd, "%s", merr.msg);
  char last_cell[256] = "";
  size_t rows = 0, bad = 0, files = 0;
  static cellin c;
  int have = 0, rc = MLR_EXIT_OK, tty = isatty(2);
  for (size_t ri = 0; ri < nrows; ri++) {
    const mlr_manifest_row *mr = &mrows[ri];
    const char *suite = mr->suite, *cellname = mr->cell, *rname = mr->recipe,
               *rsha = mr->recipe_sha, *osha = mr->o_sha, *lsha = mr->lse_sha;
    int wanted = nsuites == 0;
    for (int k = 0; k < nsuites; k++) wanted |= strcmp(suites[k], suite) == 0;
    if (!wanted) continue;
    const mlr_suite *s = mlr_suite_find(suite);
    const mlr_suite_cell *cell = NULL;
    for (size_t k = 0; s && k < s->n; k++)
      if (strcmp(s->cells[k].name, cellname) == 0) cell = &s->cells[k];
    mlr_recipe r;
    if (!cell || mlr_recipe_builtin(rname, &r) != MLR_OK) {
      printf("golden %s/%s/%s: FAIL: the suite, cell or recipe no longer exists\n", suite, cellname,
             rname);
      bad++;
      rows++;
      continue;
    }
    char key[256];
    snprintf(key, sizeof key, "%s/%s", suite, cellname);
    if (!have || strcmp(key, last_cell)) {
      if (have) mlr_tf_free(&c.tf);
      have = 0;
      if ((rc = cell_inputs(cmd, cell->spec, &c)) != MLR_EXIT_OK) break;
      have = 1;
      snprintf(last_cell, sizeof last_cell, "%s", key);
    }
    outcome oc;
    if ((rc = run_cell(cmd, &r, &c, &oc)) != MLR_EXIT_OK) break;
    rows++;
    progress(tty, key, rows, rows);
    if (!oc.fits) {
      printf("golden %s/%s: FAIL: the recipe no longer fits the cell\n", key, rname);
      bad++;
    } else if (strcmp(oc.recipe_sha, rsha)) {
      printf("golden %s/%s: FAIL: recipe hash %s, manifest %s\n", key, rname, oc.recipe_sha, rsha);
      bad++;
    } else if (strcmp(oc.o_sha, osha)) {
      printf("golden %s/%s: FAIL: o digest %s, manifest %s\n", key, rname, oc.o_sha, osha);
      bad++;
    } else if (strcmp(oc.lse_sha, lsha)) {
      printf("golden %s/%s: FAIL: lse digest %s, manifest %s\n", key, rname, oc.lse_sha, lsha);
      bad++;
    }
    char path[4096], why[4800];
    snprintf(path, sizeof path, "%s/%s.%s.safetensors", goldens, suite, cellname);
    if (oc.fits && access(path, F_OK) == 0) {
      files++;
      if (check_file(path, rname, &c, &oc, why, sizeof why)) {
        printf("golden %s/%s: FAIL: %s\n", key, rname, why);
        bad++;
      }
    }
    mlr_emu_result_free(&oc.res);
  }
  free(mrows);
  if (have) mlr_tf_free(&c.tf);
  if (rc != MLR_EXIT_OK) return rc;
  if (tty) fputc('\n', stderr);
  printf("golden verify: %zu manifest rows, %zu in golden cells, %zu failed", rows, files, bad);
  if (use_gpu) printf(" (outputs from the GPU exact kernel: %.1f ms of kernels)", gpu_kernel_ms);
  printf("\n");
  if (!rows) return mlr_cli_usage_error(cmd, "no manifest row in %s for the suites named", digests);
  return bad ? MLR_EXIT_FAIL : MLR_EXIT_OK;
}

/* what golden --out / --digests writes */
typedef struct gold {
  const char *cmd, *out;
  uint64_t max_bs;
  const mlr_recipe *rs;
  int n;
  const char **suites;
  int nsuites;
  void *mf;    /* the manifest being written (FILE *) */
  size_t done; /* cell x recipe pairs run */
  size_t rows; /* of them, those the recipe fits: the manifest's rows */
} gold;

static void manifest_row(const gold *g, const char *suite, const char *cell, const mlr_recipe *r,
                         const outcome *oc) {
  mlr_manifest_row mr;
  char row[MLR_MANIFEST_LINE_MAX + 2];
  snprintf(mr.suite, sizeof mr.suite, "%s", suite);
  snprintf(mr.cell, sizeof mr.cell, "%s", cell);
  snprintf(mr.recipe, sizeof mr.recipe, "%.63s", r->name);
  snprintf(mr.recipe_sha, sizeof mr.recipe_sha, "%s", oc->recipe_sha);
  snprintf(mr.o_sha, sizeof mr.o_sha, "%s", oc->o_sha);
  snprintf(mr.lse_sha, sizeof mr.lse_sha, "%s", oc->lse_sha);
  mlr_manifest_format_row(&mr, row, sizeof row);
  fputs(row, (FILE *)g->mf);
}

/* one cell: every recipe's manifest row, and with --out its golden cell file */
static int write_cell(gold *g, const mlr_suite *s, const mlr_suite_cell *cell, size_t total) {
  static cellin c;
  int rc = cell_inputs(g->cmd, cell->spec, &c);
  if (rc != MLR_EXIT_OK) return rc;
  const int file = g->out && (!g->max_bs || (uint64_t)c.in.B <= g->max_bs);
  mlr_tensor_file tf;
  mlr_error err = {""};
  mlr_status st = file ? cell_file_begin(&tf, s->name, cell, &c) : MLR_OK;
  for (int ri = 0; ri < g->n && rc == MLR_EXIT_OK && st == MLR_OK; ri++) {
    outcome oc;
    char what[3400]; /* suite and cell names are short; the recipe name up to 3200 */
    snprintf(what, sizeof what, "%.64s/%.64s/%.3200s", s->name, cell->name, g->rs[ri].name);
    progress(isatty(2), what, ++g->done, total);
    if ((rc = run_cell(g->cmd, &g->rs[ri], &c, &oc)) != MLR_EXIT_OK) break;
    if (oc.fits) manifest_row(g, s->name, cell->name, &g->rs[ri], &oc);
    g->rows += oc.fits != 0;
    if (oc.fits && file) st = cell_file_add(&tf, &g->rs[ri], &oc);
    mlr_emu_result_free(&oc.res);
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/%s.%s.safetensors", g->out ? g->out : "", s->name, cell->name);
  if (rc == MLR_EXIT_OK && st != MLR_OK)
    rc = mlr_cli_fail(g->cmd, "%s: %s", path, mlr_status_str(st));
  else if (rc == MLR_EXIT_OK && file && mlr_safetensors_write(path, &tf, &err) != MLR_OK)
    rc = mlr_cli_usage_error(g->cmd, "%s", err.msg);
  if (file) mlr_tf_free(&tf);
  mlr_tf_free(&c.tf);
  return rc;
}

static int write_all(gold *g) {
  size_t total = 0;
  for (int k = 0; k < g->nsuites; k++) total += mlr_suite_find(g->suites[k])->n * (size_t)g->n;
  int rc = MLR_EXIT_OK;
  for (int k = 0; k < g->nsuites && rc == MLR_EXIT_OK; k++) {
    const mlr_suite *s = mlr_suite_find(g->suites[k]);
    for (size_t ci = 0; ci < s->n && rc == MLR_EXIT_OK; ci++)
      rc = write_cell(g, s, &s->cells[ci], total);
  }
  return rc;
}

int mlr_cmd_golden(int argc, char **argv) {
  const char *cmd = "golden", *out = NULL, *digests = NULL, *goldens = DEFAULT_GOLDENS, *suites[8],
             *rnames[16];
  int nsuites = 0, nr = 0, do_verify = 0;
  uint64_t max_bs = 0;
  int rc = MLR_EXIT_OK;
  for (int i = 0; i < argc && rc == MLR_EXIT_OK; i++) {
    const char *v;
    int m;
    if ((m = mlr_cli_opt(argc, argv, &i, "suite", &v))) {
      if (m < 0 || nsuites == 8)
        return mlr_cli_usage_error(cmd, "--suite needs one of %s (at most 8)", mlr_suite_names());
      if (!mlr_suite_find(v))
        return mlr_cli_usage_error(cmd, "unknown suite '%s' (valid: %s)", v, mlr_suite_names());
      suites[nsuites++] = v;
    } else if (mlr_cli_list(cmd, argc, argv, &i, "recipe", "a name, a file or 'all'", rnames, &nr,
                            16, &rc) ||
               mlr_cli_str(cmd, argc, argv, &i, "out", "a folder", &out, &rc) ||
               mlr_cli_str(cmd, argc, argv, &i, "digests", "a file", &digests, &rc) ||
               mlr_cli_str(cmd, argc, argv, &i, "goldens", "a folder", &goldens, &rc))
      continue;
    else if ((m = mlr_cli_opt(argc, argv, &i, "max-bs", &v))) {
      if (m < 0 || mlr_cli_parse_u64(v, &max_bs) || max_bs < 1)
        return mlr_cli_usage_error(cmd, "--max-bs: a positive integer");
    } else if (strcmp(argv[i], "--verify") == 0)
      do_verify = 1;
    else if (strcmp(argv[i], "--gpu") == 0)
      use_gpu = 1;
    else
      return mlr_cli_unknown_option(
          cmd, argv[i], "--suite --recipe --out --digests --goldens --max-bs --verify --gpu");
  }
  if (rc != MLR_EXIT_OK) return rc;
  mlr_error derr = {""};
  char device[256];
  if (use_gpu && mlr_gpu_device(device, sizeof device, &derr) != MLR_OK)
    return mlr_cli_usage_error(cmd, "--gpu: %s", derr.msg);
  if (do_verify) {
    if (out || nr)
      return mlr_cli_usage_error(cmd, "--verify takes --digests, --goldens and --suite only");
    char beside[4200];
    snprintf(beside, sizeof beside, "%s/" MANIFEST_NAME, goldens);
    return verify(cmd, digests ? digests : beside, goldens, suites, nsuites);
  }
  if ((!out) == (!digests) || !nsuites) return mlr_cli_usage_fail(cmd);
  if (out && (rc = mlr_cli_out_dir_check(cmd, "--out", out)) != MLR_EXIT_OK) return rc;
  static mlr_recipe rs[16];
  int n;
  rc = mlr_cli_recipes(cmd, rnames, nr, rs, &n);
  if (rc != MLR_EXIT_OK) return rc;
  if (out && (rc = mlr_cli_make_dir(cmd, "--out", out)) != MLR_EXIT_OK) return rc;
  char beside[4200];
  snprintf(beside, sizeof beside, "%s/" MANIFEST_NAME, out ? out : "");
  gold g = {cmd, out, max_bs, rs, n, suites, nsuites, 0, 0, 0};
  mlr_atomic_file af;
  mlr_error err = {""};
  if (mlr_atomic_open(&af, digests ? digests : beside, &err) != MLR_OK)
    return mlr_cli_usage_error(cmd, "%s", err.msg);
  g.mf = af.fp;
  fprintf(g.mf, "# mlaref golden digests (mlaref golden --digests): suite, cell, recipe, recipe "
                "SHA-256, SHA-256 of o, SHA-256 of lse\n");
  rc = write_all(&g);
  if (rc == MLR_EXIT_OK && mlr_atomic_commit(&af, &err) != MLR_OK)
    rc = mlr_cli_usage_error(cmd, "%s", err.msg);
  else if (rc != MLR_EXIT_OK)
    mlr_atomic_abort(&af);
  if (rc == MLR_EXIT_OK && use_gpu)
    printf("golden: on the GPU exact kernel (%s, %s): %.1f ms of kernels\n", device,
           mlr_gpu_backend(), gpu_kernel_ms);
  if (rc == MLR_EXIT_OK)
    printf("golden: %zu cell x recipe pairs, %zu that fit their recipe%s%s, manifest %s\n", g.done,
           g.rows, out ? ", cells in " : "", out ? out : "", digests ? digests : beside);
  return rc;
}
