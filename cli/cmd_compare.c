/* mlaref compare A B [--tensor o] [--rule R]... [--truth T] [--inputs IN] [--json], mlaref check
 * (the command line around mlr_check_run) and mlaref oracle. compare: A (candidate) against B
 * (reference) under tolerance rules (compare/mlr_compare.h); exit 0 when every evaluated rule
 * passes, 1 when one fails, 2 on bad input or when no rule could be evaluated. The worst elements
 * are printed as reproducer lines. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "mlr_check.h"
#include "mlr_compare.h"
#include "mlr_inputs.h"
#include "mlr_oracle.h"
#include "mlr_recipe.h"

#ifndef MLAREF_COMMIT
#define MLAREF_COMMIT "unknown"
#endif

static int to_view(const mlr_tensor *t, mlr_cmp_tensor *v) {
  if (t->dtype == MLR_DT_BF16)
    v->type = MLR_CT_BF16;
  else if (t->dtype == MLR_DT_F16)
    v->type = MLR_CT_F16;
  else if (t->dtype == MLR_DT_F32)
    v->type = MLR_CT_F32;
  else if (t->dtype == MLR_DT_F64)
    v->type = MLR_CT_F64;
  else
    return -1;
  v->data = t->data;
  v->n = (int64_t)(t->nbytes / mlr_dtype_size(t->dtype));
  return 0;
}

/* the tensor `name` of file path as a view; exit code on failure */
static int load_view(const char *cmd, const char *path, const char *name, mlr_tensor_file *tf,
                     mlr_cmp_tensor *v, const mlr_tensor **t) {
  mlr_error err = {""};
  if (mlr_safetensors_read(path, tf, &err) != MLR_OK)
    return mlr_cli_usage_error(cmd, "%s", err.msg);
  *t = mlr_tf_find(tf, name);
  if (!*t)
    return mlr_cli_usage_error(cmd, "%s: no tensor '%s' (--tensor NAME picks another)", path, name);
  if (to_view(*t, v))
    return mlr_cli_usage_error(cmd, "%s: tensor '%s' is %s; outputs are BF16, F16, F32 or F64",
                               path, name, mlr_dtype_name((*t)->dtype));
  return MLR_EXIT_OK;
}

static const char *meta_of(const mlr_tensor_file *a, const mlr_tensor_file *b, const char *key) {
  const char *v = mlr_tf_get_meta(a, key);
  return v ? v : (b ? mlr_tf_get_meta(b, key) : NULL);
}

/* element i of a [T, H, C] tensor as (batch, token, head, column), of a [T, H] lse as (batch,
 * token, head), of FlashMLA's [B, H, s_q] lse as (batch, token, head) too: its token is the
 * batch's first plus the query index */
static void position(const mlr_tensor *t, const mlr_inputs *in, int64_t i, char *buf, size_t n) {
  if (t->ndim != 3 && t->ndim != 2) {
    snprintf(buf, n, "element %lld", (long long)i);
    return;
  }
  const int bhs = t->ndim == 3 && strcmp(t->name, "lse") == 0; /* [B, H, s_q] */
  const int64_t C = t->ndim == 3 ? t->shape[2] : 1, H = t->shape[1];
  const int64_t r = i / (H * C), h = (i / C) % H, c = i % C; /* r: token, or batch (bhs) */
  int64_t b = -1, tok = r;
  if (bhs) {
    b = r;
    tok = in && r < in->B ? in->qo_indptr[r] + c : -1;
  } else if (in)
    for (int64_t k = 0; k < in->B; k++)
      if (r >= in->qo_indptr[k] && r < in->qo_indptr[k + 1]) b = k;
  size_t at = 0;
  if (b >= 0) at = (size_t)snprintf(buf, n, "batch %lld ", (long long)b);
  if (tok >= 0 && at < n) at += (size_t)snprintf(buf + at, n - at, "token %lld ", (long long)tok);
  if (at < n) at += (size_t)snprintf(buf + at, n - at, "head %lld", (long long)h);
  if (bhs && tok < 0 && at < n) /* no inputs to place the query: its index in the batch */
    snprintf(buf + at, n - at, " query %lld", (long long)c);
  else if (t->ndim == 3 && !bhs && at < n)
    snprintf(buf + at, n - at, " column %lld", (long long)c);
}

static const char *vname(mlr_verdict_kind k) {
  return k == MLR_VERDICT_PASS ? "pass" : k == MLR_VERDICT_FAIL ? "FAIL" : "n/a";
}

/* rules on A (la) against B (lb), optionally with the truth; prints the report (or JSON) and
 * returns the exit code */
static int evaluate(const char *cmd, const char *la, const char *lb, const char *tensor,
                    const char *truth, const mlr_tensor *xa, const mlr_cmp_tensor *a,
                    const mlr_cmp_tensor *b, const mlr_metrics *m, const mlr_metrics *mt,
                    const mlr_metrics *mr, const mlr_rule *rules, int nrules, int json,
                    const mlr_inputs *inp, const char *rhash, const char *shape) {
  const int t = truth != NULL;
  mlr_verdict vs[16];
  int fails = 0, evaluated = 0;
  for (int k = 0; k < nrules; k++) {
    vs[k] = mlr_rule_apply(&rules[k], m, a, b, t ? mt : NULL, t ? mr : NULL);
    fails += vs[k].kind == MLR_VERDICT_FAIL;
    evaluated += vs[k].kind != MLR_VERDICT_NA;
  }
  if (!evaluated) { /* bad input: one line, no report */
    fprintf(stderr, "mlaref %s: no rule could be evaluated (%s)\n", cmd, vs[0].detail);
    return MLR_EXIT_USAGE;
  }
  if (json) {
    printf("{\"a\": \"%s\", \"b\": \"%s\", \"tensor\": \"%s\", \"n\": %lld, \"identical\": %lld, "
           "\"unwritten\": %lld, "
           "\"class_mismatch\": %lld, \"ulp_max\": %lld, \"ulp_p50\": %g, \"ulp_p99\": %g, "
           "\"ulp_p999\": %g, \"max_abs\": %.17g, "
           "\"max_rel\": %.17g, \"rmse\": %.17g, \"rel_l2\": %.17g, \"nmse\": %.17g, \"cos_diff\": "
           "%.17g, \"rules\": [",
           la, lb, tensor, (long long)m->n, (long long)m->identical, (long long)m->unwritten,
           (long long)m->class_mismatch, (long long)m->ulp_max, m->ulp_p50, m->ulp_p99, m->ulp_p999,
           m->max_abs, m->max_rel, m->rmse, m->rel_l2, m->nmse, m->cos_diff);
    for (int k = 0; k < nrules; k++)
      printf("%s{\"rule\": \"%s\", \"verdict\": \"%s\", \"measured\": %.17g, \"limit\": %.17g, "
             "\"detail\": \"%s\"}",
             k ? ", " : "", rules[k].text, vname(vs[k].kind), vs[k].measured, vs[k].limit,
             vs[k].detail);
    printf("], \"worst\": [");
    for (int k = 0; k < m->nworst; k++) {
      char pos[128];
      position(xa, inp, m->worst[k].index, pos, sizeof pos);
      printf("%s{\"index\": %lld, \"where\": \"%s\", \"a\": \"%a\", \"b\": \"%a\", \"ulp\": %lld}",
             k ? ", " : "", (long long)m->worst[k].index, pos, m->worst[k].va, m->worst[k].vb,
             (long long)m->worst[k].ulp);
    }
    printf("], \"recipe_sha256\": \"%s\", \"shape\": \"%s\", \"commit\": \"%s\"}\n",
           rhash ? rhash : "", shape ? shape : "", MLAREF_COMMIT);
  } else {
    printf("%s %s vs %s, tensor '%s': %lld elements, %lld bit-identical (%.4f%%), %lld unwritten, "
           "%lld NaN/Inf class mismatches\n",
           cmd, la, lb, tensor, (long long)m->n, (long long)m->identical,
           m->n ? 100.0 * (double)m->identical / (double)m->n : 100.0, (long long)m->unwritten,
           (long long)m->class_mismatch);
    printf("ulp: max %lld, p50 %g, p99 %g, p99.9 %g; max abs %.4g, max rel %.4g, RMSE %.4g, rel L2 "
           "%.4g, NMSE %.4g, cos diff %.4g\n",
           (long long)m->ulp_max, m->ulp_p50, m->ulp_p99, m->ulp_p999, m->max_abs, m->max_rel,
           m->rmse, m->rel_l2, m->nmse, m->cos_diff);
    if (t)
      printf("against the truth %s: max abs %.4g (A), %.4g (B)\n", truth, mt->max_abs, mr->max_abs);
    for (int k = 0; k < nrules; k++)
      printf("rule %-24s %-4s %s\n", rules[k].text, vname(vs[k].kind), vs[k].detail);
    if (fails || m->nworst) {
      const int show = fails ? m->nworst : (m->nworst < 3 ? m->nworst : 3);
      for (int k = 0; k < show; k++) {
        const mlr_cmp_elem *e = &m->worst[k];
        char pos[128];
        position(xa, inp, e->index, pos, sizeof pos);
        printf("%s %s: A %a (%.9g) B %a (%.9g), %lld ulp; shape %s, recipe %.16s, commit %s\n",
               fails ? "reproduce" : "largest", pos, e->va, e->va, e->vb, e->vb, (long long)e->ulp,
               shape ? shape : "?", rhash ? rhash : "?", MLAREF_COMMIT);
      }
    }
  }
  return fails ? MLR_EXIT_FAIL : MLR_EXIT_OK;
}

int mlr_cmd_compare(int argc, char **argv) {
  const char *cmd = "compare", *files[2] = {NULL, NULL}, *tensor = "o", *truth = NULL,
             *inputs = NULL;
  mlr_rule rules[16];
  int nrules = 0, json = 0, nf = 0;
  int rc = MLR_EXIT_OK;
  for (int i = 0; i < argc && rc == MLR_EXIT_OK; i++) {
    const char *v;
    int m;
    if (mlr_cli_str(cmd, argc, argv, &i, "tensor", "a name", &tensor, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "truth", "a file", &truth, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "inputs", "a file", &inputs, &rc))
      continue;
    if ((m = mlr_cli_opt(argc, argv, &i, "rule", &v))) {
      mlr_error err = {""};
      if (m < 0) return mlr_cli_usage_error(cmd, "--rule needs one of %s", mlr_rule_forms());
      if (nrules == 16) return mlr_cli_usage_error(cmd, "at most 16 --rule options");
      if (mlr_rule_parse(v, &rules[nrules++], &err) != MLR_OK)
        return mlr_cli_usage_error(cmd, "%s", err.msg);
    } else if (strcmp(argv[i], "--json") == 0)
      json = 1;
    else if (argv[i][0] == '-' && argv[i][1] == '-')
      return mlr_cli_unknown_option(cmd, argv[i], "--tensor --rule --truth --inputs --json");
    else if (nf < 2)
      files[nf++] = argv[i];
    else
      return mlr_cli_usage_error(cmd,
                                 "more than two files ('%s'): usage: compare A B [--tensor o] "
                                 "[--rule R]... [--truth T] [--json]",
                                 argv[i]);
  }
  if (rc != MLR_EXIT_OK) return rc;
  if (nf != 2)
    return mlr_cli_usage_error(cmd,
                               "usage: compare A B [--tensor o] [--rule R]... [--truth T] "
                               "[--inputs IN] [--json] (rules: %s)",
                               mlr_rule_forms());
  if (!nrules) mlr_rule_parse("exact", &rules[nrules++], NULL);
  mlr_tensor_file ta, tb, tt, ti;
  mlr_tf_init(&ta);
  mlr_tf_init(&tb);
  mlr_tf_init(&tt);
  mlr_tf_init(&ti);
  mlr_cmp_tensor a, b, t;
  const mlr_tensor *xa, *xb, *xt = NULL;
  rc = load_view(cmd, files[0], tensor, &ta, &a, &xa);
  if (rc == MLR_EXIT_OK) rc = load_view(cmd, files[1], tensor, &tb, &b, &xb);
  if (rc == MLR_EXIT_OK && truth) rc = load_view(cmd, truth, tensor, &tt, &t, &xt);
  mlr_inputs in, *inp = NULL;
  mlr_error err = {""};
  if (rc == MLR_EXIT_OK && inputs) {
    if ((rc = mlr_cli_read_inputs(cmd, inputs, 1, &ti, &in)) == MLR_EXIT_OK) inp = &in;
  }
  mlr_metrics m, mt, mr;
  if (rc == MLR_EXIT_OK && mlr_compare_metrics(&a, &b, &m, &err) != MLR_OK)
    rc = mlr_cli_usage_error(cmd, "%s vs %s, tensor '%s': %s", files[0], files[1], tensor, err.msg);
  if (rc == MLR_EXIT_OK && truth &&
      (mlr_compare_metrics(&a, &t, &mt, &err) != MLR_OK ||
       mlr_compare_metrics(&b, &t, &mr, &err) != MLR_OK))
    rc = mlr_cli_usage_error(cmd, "against the truth %s: %s", truth, err.msg);
  if (rc != MLR_EXIT_OK) goto done;
  const char *rhash = meta_of(&ta, &tb, "mlaref.recipe.sha256"),
             *shape = inp ? mlr_tf_get_meta(&ti, "mlaref.shape") : NULL;
  rc = evaluate(cmd, files[0], files[1], tensor, truth, xa, &a, &b, &m, &mt, &mr, rules, nrules,
                json, inp, rhash, shape);
done:
  mlr_tf_free(&ta);
  mlr_tf_free(&tb);
  mlr_tf_free(&tt);
  mlr_tf_free(&ti);
  return rc;
}

typedef struct check_opts {
  const char *inputs, *output, *recipe, *sets[64];
  mlr_rule rules[16];
  int nrules, nsets, json, threads, tensors, allow;
  mlr_truth_from from;
} check_opts;

/* --tensor o|lse|both: an exit code */
static int check_tensor(const char *cmd, int m, const char *v, check_opts *o) {
  if (m > 0 && strcmp(v, "o") == 0)
    o->tensors = MLR_CHECK_O;
  else if (m > 0 && strcmp(v, "lse") == 0)
    o->tensors = MLR_CHECK_LSE;
  else if (m > 0 && strcmp(v, "both") == 0)
    o->tensors = MLR_CHECK_BOTH;
  else
    return mlr_cli_usage_error(cmd, "--tensor '%s' is not one of o|lse|both", m > 0 ? v : "");
  return MLR_EXIT_OK;
}

/* check's command line into o (the rules are the library's default where none is given): an exit
 * code */
static int check_args(const char *cmd, int argc, char **argv, check_opts *o) {
  int rc = MLR_EXIT_OK;
  uint64_t threads = (uint64_t)o->threads;
  for (int i = 0; i < argc && rc == MLR_EXIT_OK; i++) {
    const char *v;
    int m;
    if (mlr_cli_str(cmd, argc, argv, &i, "inputs", "a file", &o->inputs, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "output", "a file or a folder", &o->output, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "recipe", "a name or file", &o->recipe, &rc) ||
        mlr_cli_list(cmd, argc, argv, &i, "set", "key=value", o->sets, &o->nsets, 64, &rc) ||
        mlr_cli_count(cmd, argc, argv, &i, "threads", 1, 1024, &threads, &rc))
      continue;
    if ((m = mlr_cli_opt(argc, argv, &i, "tensor", &v)))
      rc = check_tensor(cmd, m, v, o);
    else if ((m = mlr_cli_opt(argc, argv, &i, "truth", &v))) {
      if (m < 0 || (strcmp(v, "dequantized") && strcmp(v, "bf16")))
        return mlr_cli_usage_error(cmd, "--truth '%s' is not one of dequantized|bf16",
                                   m < 0 ? "" : v);
      o->from = strcmp(v, "bf16") == 0 ? MLR_TRUTH_BF16 : MLR_TRUTH_DEQUANTIZED;
    } else if ((m = mlr_cli_opt(argc, argv, &i, "rule", &v))) {
      mlr_error err = {""};
      if (m < 0 || o->nrules == 16)
        return mlr_cli_usage_error(cmd, "--rule needs one of %s (at most 16)", mlr_rule_forms());
      if (mlr_rule_parse(v, &o->rules[o->nrules++], &err) != MLR_OK)
        return mlr_cli_usage_error(cmd, "%s", err.msg);
    } else if (strcmp(argv[i], "--json") == 0)
      o->json = 1;
    else if (strcmp(argv[i], "--allow-nonfinite") == 0)
      o->allow = 1;
    else
      return mlr_cli_unknown_option(cmd, argv[i],
                                    "--inputs --output --recipe --set --rule --tensor --truth "
                                    "--threads --allow-nonfinite --json");
  }
  if (rc != MLR_EXIT_OK) return rc;
  o->threads = (int)threads;
  if (!o->inputs || !o->output || !o->recipe)
    return mlr_cli_missing(cmd, !o->inputs ? "--inputs" : !o->output ? "--output" : "--recipe");
  return MLR_EXIT_OK;
}

/* mlaref check --inputs IN --output KERNEL_OUT --recipe NAME|FILE [--set k=v]... [--rule R]...
 *              [--tensor o|lse|both] [--truth dequantized|bf16] [--threads N]
 *              [--allow-nonfinite] [--json]
 * A kernel's output (o, and lse when it has one; a .safetensors file, an o.npy, or a folder of
 * o.npy and lse.npy) against the model of its recipe and the certified truth: mlr_check_run
 * (compare/mlr_check.h) does the work and writes the text; this reads the files and prints it. */
int mlr_cmd_check(int argc, char **argv) {
  const char *cmd = "check";
  check_opts o = {.tensors = MLR_CHECK_BOTH, .from = MLR_TRUTH_DEQUANTIZED};
  int rc = check_args(cmd, argc, argv, &o);
  if (rc != MLR_EXIT_OK) return rc;
  mlr_recipe r;
  if ((rc = mlr_cli_recipe_sets(cmd, o.recipe, o.sets, o.nsets, &r)) != MLR_EXIT_OK) return rc;
  mlr_error err = {""};
  mlr_tensor_file raw, dst, out;
  mlr_inputs in;
  mlr_tf_init(&out);
  if (mlr_inputs_load(o.inputs, o.allow, &raw, &dst, &in, &err) != MLR_OK ||
      mlr_check_load_output(o.output, &out, &err) != MLR_OK)
    rc = mlr_cli_usage_error(cmd, "%s", err.msg);
  mlr_check_report rep = {0, 0, NULL, NULL};
  if (rc == MLR_EXIT_OK) {
    const mlr_check_args ca = {.in = &in,
                               .inputs_label = o.inputs,
                               .shape = mlr_tf_get_meta(&dst, "mlaref.shape"),
                               .out = &out,
                               .out_label = o.output,
                               .recipe = &r,
                               .recipe_label = o.recipe,
                               .rules = o.nrules ? o.rules : NULL,
                               .nrules = o.nrules,
                               .tensors = o.tensors,
                               .from = o.from,
                               .threads = o.threads,
                               .commit = MLAREF_COMMIT};
    const mlr_status st = mlr_check_run(&ca, &rep, &err);
    if (st == MLR_EINVAL)
      rc = mlr_cli_usage_error(cmd, "%s", err.msg);
    else if (st != MLR_OK)
      rc = mlr_cli_fail(cmd, "%s", err.msg);
    else {
      fputs(o.json ? rep.json : rep.text, stdout);
      rc = rep.exit_code ? MLR_EXIT_FAIL : MLR_EXIT_OK;
    }
  }
  mlr_check_report_free(&rep);
  mlr_tf_free(&out);
  mlr_tf_free(&dst);
  mlr_tf_free(&raw);
  return rc;
}

/* mlaref oracle --inputs IN --out OUT [--from dequantized|bf16] [--allow-nonfinite]
 * The certified truth (ref/oracle): o [T,H,512] and lse [T,H] as F64, each within 1 ulp of the
 * exact attention output of the inputs' values; exit 1 when an element could not be certified. */
int mlr_cmd_oracle(int argc, char **argv) {
  const char *cmd = "oracle", *inputs = NULL, *out = NULL, *from_s = "dequantized";
  int rc = MLR_EXIT_OK, allow = 0;
  for (int i = 0; i < argc && rc == MLR_EXIT_OK; i++) {
    if (mlr_cli_str(cmd, argc, argv, &i, "inputs", "a file", &inputs, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "out", "a file", &out, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "from", "dequantized or bf16", &from_s, &rc) ||
        mlr_cli_max_memory_opt(cmd, argc, argv, &i, &rc))
      continue;
    if (strcmp(argv[i], "--allow-nonfinite") == 0)
      allow = 1;
    else
      rc = mlr_cli_unknown_option(cmd, argv[i],
                                  "--inputs --out --from --max-memory --allow-nonfinite");
  }
  if (rc != MLR_EXIT_OK) return rc;
  if (!inputs || !out) return mlr_cli_usage_fail(cmd);
  if (strcmp(from_s, "dequantized") && strcmp(from_s, "bf16"))
    return mlr_cli_usage_error(cmd, "--from '%s' is not one of dequantized|bf16", from_s);
  if ((rc = mlr_cli_out_file_check(cmd, out)) != MLR_EXIT_OK) return rc;
  const mlr_truth_from from = strcmp(from_s, "bf16") == 0 ? MLR_TRUTH_BF16 : MLR_TRUTH_DEQUANTIZED;
  double in_bytes;
  if ((rc = mlr_cli_file_fits(cmd, inputs, &in_bytes)) != MLR_EXIT_OK) return rc;
  mlr_tensor_file ti, to;
  mlr_tf_init(&ti);
  mlr_tf_init(&to);
  mlr_inputs in;
  mlr_error err = {""};
  if ((rc = mlr_cli_read_inputs(cmd, inputs, allow, &ti, &in)) != MLR_EXIT_OK) return rc;
  /* o and lse in F64 beside the inputs (the MPFR work is per thread and small) */
  if ((rc = mlr_cli_memory_fits(cmd, in_bytes + (double)in.T * (double)in.H * 513 * 8,
                                "%s with its truth (%lld query tokens x %lld heads, F64)", inputs,
                                (long long)in.T, (long long)in.H)) != MLR_EXIT_OK) {
    mlr_tf_free(&ti);
    return rc;
  }
  const int64_t so[3] = {in.T, in.H, 512}, sl[2] = {in.T, in.H};
  mlr_tensor *o, *l;
  mlr_status st = mlr_tf_add(&to, "o", MLR_DT_F64, 3, so, &o);
  if (st == MLR_OK) st = mlr_tf_add(&to, "lse", MLR_DT_F64, 2, sl, &l);
  mlr_oracle_stats stats = {0};
  const double t0 = mlr_cli_now();
  if (st == MLR_OK)
    st = mlr_oracle(&in, from, o->data, l->data, &stats, &err);
  else
    mlr_error_set(&err, st, "cannot allocate the outputs (%s)", mlr_status_str(st));
  const double secs = mlr_cli_now() - t0;
  if (st == MLR_EINVAL)
    rc = mlr_cli_usage_error(cmd, "%s: %s", inputs, err.msg);
  else if (st != MLR_OK)
    rc = mlr_cli_fail(cmd, "%s", err.msg);
  if (rc == MLR_EXIT_OK) {
    char unc[32];
    snprintf(unc, sizeof unc, "%lld", (long long)stats.uncertified);
    const char *kv[][2] = {
        {"mlaref.version", MLAREF_VERSION}, {"mlaref.kind", "oracle"},
        {"mlaref.oracle.from", from_s},     {"mlaref.oracle.uncertified", unc},
        {"mlaref.inputs", inputs},          {"mlaref.shape", mlr_tf_get_meta(&ti, "mlaref.shape")}};
    for (size_t k = 0; st == MLR_OK && k < sizeof kv / sizeof *kv; k++)
      st = kv[k][1] ? mlr_tf_set_meta(&to, kv[k][0], kv[k][1]) : MLR_OK;
    if (st == MLR_OK) st = mlr_safetensors_write(out, &to, &err);
    if (st != MLR_OK)
      rc = mlr_cli_usage_error(cmd, "%s", err.msg);
    else {
      printf("oracle: %s from %s KV: %lld x %lld x 512 elements within 1 ulp, %lld uncertified; "
             "%.2f s; wrote %s\n",
             inputs, from_s, (long long)in.T, (long long)in.H, (long long)stats.uncertified, secs,
             out);
      rc = stats.uncertified ? MLR_EXIT_FAIL : MLR_EXIT_OK;
    }
  }
  mlr_tf_free(&ti);
  mlr_tf_free(&to);
  return rc;
}
