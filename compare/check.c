/* `mlaref check` as a library call (mlr_check.h): the kernel's o and lse against the model of its
 * recipe (B), the certified truth and, for `budget`, the recipe's a priori bound; the rules'
 * verdicts; the text and the JSON the command prints. */
#define _POSIX_C_SOURCE 200809L
#include "mlr_check.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mlr_budget.h"
#include "mlr_emu_ops.h"
#include "mlr_emulate.h"
#include "mlr_oracle.h"

#define DV MLR_EMU_V_DIM

/* an element for the reproducer lines */
typedef struct worst {
  int64_t index;
  int tier;           /* 2 unwritten, 1 NaN/Inf class differs, 0 a finite difference */
  double va, vb, err; /* the values, |va - vb| */
  int64_t ulp;        /* in A's format; -1 where not defined */
} worst;

/* one tensor held: the kernel's (a), the model's (b) and the truth (t), and what came of it */
typedef struct held {
  const char *name; /* "o" or "lse" */
  int64_t C;        /* values per (token, head): 512 for o, 1 for lse */
  mlr_cmp_tensor a, b, t;
  mlr_metrics m, mt, mr;
  const double *bound; /* o under a budget rule */
  mlr_rule rules[16];
  mlr_verdict v[16];
  int nrules, fails, evaluated;
  worst w[MLR_CMP_WORST];
  int nw;
  double scale; /* max |b| over the finite b: the scale errors are ranked and shown against */
  void *own_a;  /* copies made here: an lse transposed or rounded, the lse's b and t */
  float *own_b;
  double *own_t;
} held;

typedef struct ctx {
  const mlr_check_args *a;
  mlr_recipe r; /* the recipe, with out.format set to o's dtype where they differ */
  char note[320];
  mlr_emu_result res;
  double *truth, *tlse, *bound;
  mlr_oracle_stats ost;
  held o, l;
  int want_o, want_l;
  char hash[65];
} ctx;

static const char *fmt_name(int f) {
  return f == MLR_OUT_FP32 ? "F32" : f == MLR_OUT_FP16 ? "F16" : "BF16";
}

/* the out.format value that names it */
static const char *fmt_key(int f) {
  return f == MLR_OUT_FP32 ? "fp32" : f == MLR_OUT_FP16 ? "fp16" : "bf16";
}

static const char *base_name(int b) { return b == MLR_EXP_2 ? "2" : "e"; }

/* s_q when every batch has that many query tokens, else 0 */
static int64_t uniform_sq(const mlr_inputs *in) {
  const int64_t sq = in->B ? in->qo_indptr[1] - in->qo_indptr[0] : 0;
  for (int64_t b = 1; b < in->B; b++)
    if (in->qo_indptr[b + 1] - in->qo_indptr[b] != sq) return 0;
  return sq;
}

static void dims(const mlr_tensor *t, char *buf, size_t n) {
  size_t at = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < t->ndim && at < n; i++)
    at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
  if (at < n) snprintf(buf + at, n - at, "]");
}

/* the kernel's o into c->o.a; out.format set to its dtype where the recipe's differs */
static mlr_status view_o(ctx *c, mlr_error *err) {
  const mlr_check_args *a = c->a;
  const mlr_inputs *in = a->in;
  const mlr_tensor *x = mlr_tf_find(a->out, "o");
  if (!x && !mlr_tf_find(a->out, "lse"))
    return mlr_error_set(
        err, MLR_EINVAL, "%s: no tensor 'o' or 'lse': not a kernel's output (it holds '%s'%s)",
        a->out_label, a->out->n ? a->out->t[0].name : "nothing", a->out->n > 1 ? ", ..." : "");
  if (!x)
    return mlr_error_set(err, MLR_EINVAL,
                         "%s: no tensor 'o' (--tensor lse checks the kernel's lse alone)",
                         a->out_label);
  const int fmt = x->dtype == MLR_DT_BF16  ? MLR_OUT_BF16
                  : x->dtype == MLR_DT_F16 ? MLR_OUT_FP16
                  : x->dtype == MLR_DT_F32 ? MLR_OUT_FP32
                                           : -1;
  if (fmt < 0)
    return mlr_error_set(err, MLR_EINVAL, "%s: tensor 'o' is %s; o must be BF16, F16 or F32",
                         a->out_label, mlr_dtype_name(x->dtype));
  const int64_t sq = uniform_sq(in);
  const int flat =
      x->ndim == 3 && x->shape[0] == in->T && x->shape[1] == in->H && x->shape[2] == DV;
  const int batched = x->ndim == 4 && sq && x->shape[0] == in->B && x->shape[1] == sq &&
                      x->shape[2] == in->H && x->shape[3] == DV;
  if (!flat && !batched) {
    char is[128], alt[96] = "when every batch has s_q query tokens";
    dims(x, is, sizeof is);
    if (sq)
      snprintf(alt, sizeof alt, "= [%lld, %lld, %lld, 512]", (long long)in->B, (long long)sq,
               (long long)in->H);
    return mlr_error_set(err, MLR_EINVAL,
                         "%s: tensor 'o' is %s; it must be [%lld, %lld, 512] for these inputs "
                         "([T, H, 512]), or [B, s_q, H, 512] %s",
                         a->out_label, is, (long long)in->T, (long long)in->H, alt);
  }
  c->o.name = "o";
  c->o.C = DV;
  c->o.a.type = fmt == MLR_OUT_FP32 ? MLR_CT_F32 : fmt == MLR_OUT_FP16 ? MLR_CT_F16 : MLR_CT_BF16;
  c->o.a.data = x->data;
  c->o.a.n = in->T * in->H * DV;
  if (fmt != c->r.out_format) {
    snprintf(c->note, sizeof c->note,
             "note: o is %s; recipe %s writes %s: modelled with out.format = %s", fmt_name(fmt),
             c->r.name, fmt_name(c->r.out_format), fmt_key(fmt));
    c->r.out_format = fmt;
  }
  return MLR_OK;
}

/* element (t, h) of an lse [T, H] (flat) or [B, H, s_q] as binary32 bits: an F64 value rounded
 * to nearest, an F32 one as it is (so the unwritten pattern survives) */
static uint32_t lse_bits(const mlr_tensor *x, int flat, int64_t H, int64_t sq, int64_t t,
                         int64_t h) {
  const int64_t at = flat ? t * H + h : ((t / sq) * H + h) * sq + t % sq;
  uint32_t bits;
  if (x->dtype == MLR_DT_F64) {
    const float f = (float)((const double *)x->data)[at];
    memcpy(&bits, &f, 4);
  } else
    memcpy(&bits, (const uint32_t *)x->data + at, 4);
  return bits;
}

/* the kernel's lse into c->l.a as binary32 [T, H] */
static mlr_status view_lse(ctx *c, mlr_error *err) {
  const mlr_check_args *a = c->a;
  const mlr_inputs *in = a->in;
  const mlr_tensor *x = mlr_tf_find(a->out, "lse");
  if (!x)
    return mlr_error_set(err, MLR_EINVAL,
                         "%s: no tensor 'lse' for --tensor lse (the kernel's lse: [T, H] or "
                         "[B, H, s_q], F32 or F64)",
                         a->out_label);
  /* an lse the user did not ask for by name is still the kernel's: say how to leave it out */
  char only_o[96] = "";
  if (c->want_o)
    snprintf(only_o, sizeof only_o, " (%s)", a->o_alone ? a->o_alone : "--tensor o holds o alone");
  if (x->dtype != MLR_DT_F32 && x->dtype != MLR_DT_F64)
    return mlr_error_set(err, MLR_EINVAL, "%s: tensor 'lse' is %s; lse must be F32 or F64%s",
                         a->out_label, mlr_dtype_name(x->dtype), only_o);
  const int64_t T = in->T, H = in->H, sq = uniform_sq(in);
  const int flat = x->ndim == 2 && x->shape[0] == T && x->shape[1] == H;
  const int fmla =
      x->ndim == 3 && sq && x->shape[0] == in->B && x->shape[1] == H && x->shape[2] == sq;
  if (!flat && !fmla) {
    char is[128];
    dims(x, is, sizeof is);
    return mlr_error_set(err, MLR_EINVAL,
                         "%s: tensor 'lse' is %s; it must be [%lld, %lld] for these inputs ([T, "
                         "H]), or [B, H, s_q] when every batch has s_q query tokens%s",
                         a->out_label, is, (long long)T, (long long)H, only_o);
  }
  c->l.name = "lse";
  c->l.C = 1;
  c->l.a.type = MLR_CT_F32;
  c->l.a.n = T * H;
  if (flat && x->dtype == MLR_DT_F32) {
    c->l.a.data = x->data;
    return MLR_OK;
  }
  uint32_t *v = malloc((size_t)(T * H > 0 ? T * H : 1) * 4);
  if (!v) return mlr_error_set(err, MLR_ENOMEM, "out of memory for the kernel's lse");
  for (int64_t t = 0; t < T; t++)
    for (int64_t h = 0; h < H; h++) v[t * H + h] = lse_bits(x, flat, H, sq, t, h);
  c->l.own_a = v;
  c->l.a.data = v;
  return MLR_OK;
}

/* the rules for o (the user's, or the default set) and those of them that hold lse (exact, ulp,
 * fa3, structure; the default set where none does) */
static mlr_status pick_rules(ctx *c, mlr_error *err) {
  const mlr_check_args *a = c->a;
  if (a->nrules < 0 || a->nrules > 16 || (a->nrules && !a->rules))
    return mlr_error_set(err, MLR_EINVAL, "at most 16 rules");
  if (a->nrules) {
    memcpy(c->o.rules, a->rules, (size_t)a->nrules * sizeof *a->rules);
    c->o.nrules = a->nrules;
  } else
    c->o.nrules = mlr_rule_defaults(c->o.rules);
  for (int k = 0; k < c->o.nrules; k++) {
    const mlr_rule_kind kind = c->o.rules[k].kind;
    if (kind == MLR_RULE_EXACT || kind == MLR_RULE_ULP || kind == MLR_RULE_FA3 ||
        kind == MLR_RULE_STRUCTURE)
      c->l.rules[c->l.nrules++] = c->o.rules[k];
  }
  if (!c->l.nrules) c->l.nrules = mlr_rule_defaults(c->l.rules);
  return MLR_OK;
}

/* which tensors to hold, and the kernel's views of them */
static mlr_status plan(ctx *c, mlr_error *err) {
  const mlr_check_args *a = c->a;
  const int t = a->tensors ? a->tensors : MLR_CHECK_BOTH;
  if (t < MLR_CHECK_O || t > MLR_CHECK_BOTH)
    return mlr_error_set(err, MLR_EINVAL, "tensors %d is not one of o (1), lse (2), both (3)", t);
  c->want_o = (t & MLR_CHECK_O) != 0;
  c->want_l = t == MLR_CHECK_LSE || ((t & MLR_CHECK_LSE) && mlr_tf_find(a->out, "lse"));
  mlr_status st = pick_rules(c, err);
  if (st == MLR_OK && c->want_o) st = view_o(c, err);
  if (st == MLR_OK && c->want_l) st = view_lse(c, err);
  return st;
}

/* the model of the recipe (out.format as o's) and the certified truth */
static mlr_status run_refs(ctx *c, mlr_error *err) {
  const mlr_check_args *a = c->a;
  const mlr_inputs *in = a->in;
  mlr_error e = {""};
  const mlr_emu_opts eo = {a->threads, 0, MLR_FAULT_NONE, 0};
  mlr_status st = mlr_emulate(&c->r, in, &eo, &c->res, &e);
  if (st == MLR_EINVAL)
    return mlr_error_set(err, st, "%s with %s: %s", a->recipe_label, a->inputs_label, e.msg);
  if (st != MLR_OK) return mlr_error_set(err, st, "the model: %s", e.msg);
  c->truth = malloc((size_t)(in->T * in->H * DV) * sizeof(double));
  c->tlse = malloc((size_t)(in->T * in->H) * sizeof(double));
  if (!c->truth || !c->tlse) return mlr_error_set(err, MLR_ENOMEM, "out of memory for the truth");
  st = mlr_oracle(in, (mlr_truth_from)a->from, c->truth, c->tlse, &c->ost, &e);
  if (st == MLR_EINVAL) return mlr_error_set(err, st, "%s: %s", a->inputs_label, e.msg);
  if (st != MLR_OK) return mlr_error_set(err, st, "the truth: %s", e.msg);
  return MLR_OK;
}

/* o's references: the model's o, the truth, and the bound where a rule asks for it */
static mlr_status refs_o(ctx *c, mlr_error *err) {
  const mlr_check_args *a = c->a;
  held *h = &c->o;
  h->b.type = h->a.type;
  h->b.data = c->res.o;
  h->b.n = h->a.n;
  h->t.type = MLR_CT_F64;
  h->t.data = c->truth;
  h->t.n = h->a.n;
  int want_bound = 0;
  for (int k = 0; k < h->nrules; k++) want_bound |= h->rules[k].kind == MLR_RULE_BUDGET;
  if (!want_bound) return MLR_OK;
  if (!(c->bound = malloc((size_t)h->a.n * sizeof(double))))
    return mlr_error_set(err, MLR_ENOMEM, "out of memory for the bound");
  mlr_error e = {""};
  const mlr_status st =
      mlr_budget_bound(&c->r, a->in, (mlr_truth_from)a->from, c->truth, a->threads, c->bound, &e);
  if (st != MLR_OK)
    return mlr_error_set(err, st, "%s: %s", st == MLR_EINVAL ? a->inputs_label : "the bound",
                         e.msg);
  h->bound = c->bound;
  return MLR_OK;
}

/* lse's references in out.lse_base: the model's as the kernel returns it (mlr_emu_result's
 * lse_out); the truth's (natural log) in binary64 */
static mlr_status refs_lse(ctx *c, mlr_error *err) {
  held *h = &c->l;
  const int64_t n = h->a.n;
  h->own_b = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  h->own_t = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  if (!h->own_b || !h->own_t) return mlr_error_set(err, MLR_ENOMEM, "out of memory for lse");
  const int to = c->r.out_lse_base;
  for (int64_t i = 0; i < n; i++) {
    h->own_b[i] = c->res.lse_out[i];
    h->own_t[i] = to == MLR_EXP_2 ? c->tlse[i] * MLR_EMU_LOG2E_D : c->tlse[i];
  }
  h->b = (mlr_cmp_tensor){MLR_CT_F32, h->own_b, n};
  h->t = (mlr_cmp_tensor){MLR_CT_F64, h->own_t, n};
  return MLR_OK;
}

/* the encoding as an ordered integer (+0 and -0 both 0), as mlr_compare_metrics measures ulps */
static int64_t ordered(mlr_ctype t, uint32_t c) {
  const uint32_t sign = t == MLR_CT_F32 ? 0x80000000u : 0x8000u;
  return (c & sign) ? -(int64_t)(c & (sign - 1)) : (int64_t)c;
}

static int worse(const worst *x, const worst *y) {
  return x->tier != y->tier ? x->tier > y->tier : x->err > y->err;
}

/* the elements that differ most from the model, by |a - b| (the same order as |a - b| / max|b|,
 * the error against the output's scale): unwritten ones first, then NaN/Inf class mismatches.
 * Not by ulp, which near zero makes a negligible absolute error look large */
static void rank(held *h) {
  const uint32_t unw = mlr_cmp_unwritten(h->a.type);
  h->nw = 0;
  h->scale = 0;
  for (int64_t i = 0; i < h->a.n; i++) {
    const uint32_t ca = mlr_cmp_code(&h->a, i), cb = mlr_cmp_code(&h->b, i);
    const double va = mlr_cmp_code_value(h->a.type, ca), vb = mlr_cmp_value(&h->b, i);
    if (isfinite(vb) && fabs(vb) > h->scale) h->scale = fabs(vb);
    worst e = {i, 0, va, vb, fabs(va - vb), -1};
    if (ca == unw)
      e.tier = 2;
    else if (isnan(va) != isnan(vb) || isinf(va) != isinf(vb) || (isinf(va) && va != vb))
      e.tier = 1;
    else if (!isfinite(va) || !(e.err > 0))
      continue;
    else
      e.ulp = llabs(ordered(h->a.type, ca) - ordered(h->b.type, cb));
    if (h->nw == MLR_CMP_WORST && !worse(&e, &h->w[MLR_CMP_WORST - 1])) continue;
    int at = h->nw < MLR_CMP_WORST ? h->nw++ : MLR_CMP_WORST - 1;
    for (; at > 0 && worse(&e, &h->w[at - 1]); at--) h->w[at] = h->w[at - 1];
    h->w[at] = e;
  }
}

/* the metrics, the verdicts and the worst elements of one tensor */
static mlr_status hold(held *h, const mlr_inputs *in, mlr_error *err) {
  const mlr_groups g = {in->T, in->H, h->C, in->B, in->qo_indptr};
  mlr_status st = mlr_compare_metrics(&h->a, &h->b, &h->m, err);
  if (st == MLR_OK) st = mlr_compare_metrics(&h->a, &h->t, &h->mt, err);
  if (st == MLR_OK) st = mlr_compare_metrics(&h->b, &h->t, &h->mr, err);
  if (st != MLR_OK) return st;
  for (int k = 0; k < h->nrules; k++) {
    const mlr_rule *r = &h->rules[k];
    if (r->kind == MLR_RULE_STRUCTURE)
      h->v[k] = mlr_rule_apply_structure(r, &h->a, &h->b, &h->t, &g);
    else
      h->v[k] = r->kind == MLR_RULE_BUDGET && h->bound
                    ? mlr_rule_apply_budget(r, &h->mt, &h->a, &h->t, h->bound)
                    : mlr_rule_apply(r, &h->m, &h->a, &h->b, &h->mt, &h->mr);
    h->fails += h->v[k].kind == MLR_VERDICT_FAIL;
    h->evaluated += h->v[k].kind != MLR_VERDICT_NA;
  }
  rank(h);
  return MLR_OK;
}

/* element i of a [T, H, C] tensor as "batch b token t head h[ column c]" */
static void position(const held *h, const mlr_inputs *in, int64_t i, char *buf, size_t n) {
  const int64_t C = h->C, H = in->H, tok = i / (H * C), hd = (i / C) % H;
  int64_t b = 0;
  while (b + 1 < in->B && in->qo_indptr[b + 1] <= tok) b++;
  int at = snprintf(buf, n, "batch %lld token %lld head %lld", (long long)b, (long long)tok,
                    (long long)hd);
  if (C > 1 && at > 0 && (size_t)at < n)
    snprintf(buf + at, n - (size_t)at, " column %lld", (long long)(i % C));
}

static const char *vname(mlr_verdict_kind k) {
  return k == MLR_VERDICT_PASS ? "pass" : k == MLR_VERDICT_FAIL ? "FAIL" : "n/a";
}

/* a worst element's difference: its ulp distance and its error against the output's scale */
static void difference(const held *h, const worst *e, char *buf, size_t n) {
  if (e->tier == 2)
    snprintf(buf, n, "never written");
  else if (e->tier == 1)
    snprintf(buf, n, "NaN/Inf class differs");
  else if (h->scale > 0)
    snprintf(buf, n, "%lld ulp, error %.3g (%.3g%% of max|B| %.4g)", (long long)e->ulp, e->err,
             100 * e->err / h->scale, h->scale);
  else
    snprintf(buf, n, "%lld ulp, error %.3g", (long long)e->ulp, e->err);
}

/* one tensor's lines of the text */
static void text_held(FILE *f, const ctx *c, const held *h, const char *model, const char *truth) {
  const mlr_check_args *a = c->a;
  const mlr_metrics *m = &h->m;
  const int lse = h->C == 1;
  char base[32] = "";
  if (lse) snprintf(base, sizeof base, " (base %s)", base_name(c->r.out_lse_base));
  fprintf(f,
          "check %s vs %s, tensor '%s'%s: %lld elements, %lld bit-identical (%.4f%%), %lld "
          "unwritten, %lld NaN/Inf class mismatches\n",
          a->out_label, model, h->name, base, (long long)m->n, (long long)m->identical,
          m->n ? 100.0 * (double)m->identical / (double)m->n : 100.0, (long long)m->unwritten,
          (long long)m->class_mismatch);
  fprintf(f,
          "ulp: max %lld, p50 %g, p99 %g, p99.9 %g; max abs %.4g, max rel %.4g, RMSE %.4g, rel L2 "
          "%.4g, NMSE %.4g, cos diff %.4g\n",
          (long long)m->ulp_max, m->ulp_p50, m->ulp_p99, m->ulp_p999, m->max_abs, m->max_rel,
          m->rmse, m->rel_l2, m->nmse, m->cos_diff);
  fprintf(f, "against the truth %s: max abs %.4g (A), %.4g (B)\n", truth, h->mt.max_abs,
          h->mr.max_abs);
  for (int k = 0; k < h->nrules; k++) {
    char name[80];
    snprintf(name, sizeof name, "%s%s", lse ? "lse " : "", h->rules[k].text);
    fprintf(f, "rule %-24s %-4s %s\n", name, vname(h->v[k].kind), h->v[k].detail);
  }
  const int show = h->fails ? h->nw : (h->nw < 3 ? h->nw : 3);
  for (int k = 0; k < show; k++) {
    const worst *e = &h->w[k];
    char pos[160], diff[160];
    position(h, a->in, e->index, pos, sizeof pos);
    difference(h, e, diff, sizeof diff);
    /* the shape gen made the inputs from, else the inputs' own name */
    fprintf(f, "%s %s%s: A %a (%.9g) B %a (%.9g), %s; %s %s, recipe %.16s, commit %s\n",
            h->fails ? "reproduce" : "largest", lse ? "lse " : "", pos, e->va, e->va, e->vb, e->vb,
            diff, a->shape ? "shape" : "inputs", a->shape ? a->shape : a->inputs_label, c->hash,
            a->commit ? a->commit : "unknown");
  }
}

/* a number, or null where JSON has none (NaN, Inf) */
static json_t *num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static json_t *hex(double x) {
  char b[64];
  snprintf(b, sizeof b, "%a", x);
  return json_string(b);
}

/* the rules and the worst elements of one tensor as JSON arrays into s */
static void json_lists(json_t *s, const ctx *c, const held *h) {
  json_t *rules = json_array(), *w = json_array();
  for (int k = 0; k < h->nrules; k++)
    json_array_append_new(rules, json_pack("{s:s, s:s, s:o, s:o, s:s}", "rule", h->rules[k].text,
                                           "verdict", vname(h->v[k].kind), "measured",
                                           num(h->v[k].measured), "limit", num(h->v[k].limit),
                                           "detail", h->v[k].detail));
  for (int k = 0; k < h->nw; k++) {
    const worst *e = &h->w[k];
    char pos[160];
    position(h, c->a->in, e->index, pos, sizeof pos);
    json_array_append_new(w, json_pack("{s:I, s:s, s:o, s:o, s:I, s:o, s:o}", "index",
                                       (json_int_t)e->index, "where", pos, "a", hex(e->va), "b",
                                       hex(e->vb), "ulp", (json_int_t)e->ulp, "error",
                                       num(e->tier ? NAN : e->err), "error_of_scale",
                                       num(e->tier || !(h->scale > 0) ? NAN : e->err / h->scale)));
  }
  json_object_set_new(s, "rules", rules);
  json_object_set_new(s, "worst", w);
}

/* one tensor's section of the JSON document */
static json_t *json_held(const ctx *c, const held *h) {
  const mlr_metrics *m = &h->m;
  json_t *s = json_object();
  json_object_set_new(s, "tensor", json_string(h->name));
  if (h->C == 1) json_object_set_new(s, "base", json_string(base_name(c->r.out_lse_base)));
  const struct {
    const char *k;
    int64_t v;
  } ints[] = {{"n", m->n},
              {"identical", m->identical},
              {"unwritten", m->unwritten},
              {"class_mismatch", m->class_mismatch},
              {"ulp_max", m->ulp_max}};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
    json_object_set_new(s, ints[i].k, json_integer((json_int_t)ints[i].v));
  const struct {
    const char *k;
    double v;
  } reals[] = {{"ulp_p50", m->ulp_p50},
               {"ulp_p99", m->ulp_p99},
               {"ulp_p999", m->ulp_p999},
               {"max_abs", m->max_abs},
               {"max_rel", m->max_rel},
               {"rmse", m->rmse},
               {"rel_l2", m->rel_l2},
               {"nmse", m->nmse},
               {"cos_diff", m->cos_diff},
               {"truth_max_abs_a", h->mt.max_abs},
               {"truth_max_abs_b", h->mr.max_abs},
               {"scale", h->scale}};
  for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++)
    json_object_set_new(s, reals[i].k, num(reals[i].v));
  json_lists(s, c, h);
  return s;
}

/* the JSON document: what was checked against what, each tensor's section, the verdict */
static char *json_doc(const ctx *c, const char *model, const char *truth, int code) {
  const mlr_check_args *a = c->a;
  json_t *d = json_object();
  json_object_set_new(d, "schema", json_string("mlaref.check/1"));
  json_object_set_new(d, "output", json_string(a->out_label ? a->out_label : ""));
  json_object_set_new(d, "model", json_string(model));
  json_object_set_new(d, "truth", json_string(truth));
  json_object_set_new(d, "recipe", json_string(c->r.name));
  json_object_set_new(d, "recipe_sha256", json_string(c->hash));
  json_object_set_new(d, "shape", json_string(a->shape ? a->shape : ""));
  json_object_set_new(d, "commit", json_string(a->commit ? a->commit : "unknown"));
  json_object_set_new(d, "note", c->note[0] ? json_string(c->note) : json_null());
  json_object_set_new(d, "uncertified", json_integer((json_int_t)c->ost.uncertified));
  json_object_set_new(d, "o", c->want_o ? json_held(c, &c->o) : json_null());
  json_object_set_new(d, "lse", c->want_l ? json_held(c, &c->l) : json_null());
  json_object_set_new(d, "exit_code", json_integer(code));
  char *s = json_dumps(d, JSON_REAL_PRECISION(17));
  json_decref(d);
  if (!s) return NULL;
  const size_t n = strlen(s);
  char *line = realloc(s, n + 2);
  if (!line) {
    free(s);
    return NULL;
  }
  memcpy(line + n, "\n", 2);
  return line;
}

/* the text and the JSON into rep */
static mlr_status write_report(const ctx *c, mlr_check_report *rep, mlr_error *err) {
  char model[160];
  snprintf(model, sizeof model, "model(%s)", c->r.name);
  const char *truth = c->a->from == MLR_TRUTH_BF16 ? "truth(bf16 KV)" : "truth(dequantized KV)";
  const int fails = c->o.fails + c->l.fails;
  rep->exit_code = fails ? 1 : 0;
  rep->held = (c->want_o ? MLR_CHECK_O : 0) | (c->want_l ? MLR_CHECK_LSE : 0);
  size_t n = 0;
  FILE *f = open_memstream(&rep->text, &n);
  if (!f) return mlr_error_set(err, MLR_ENOMEM, "out of memory for the report");
  if (c->note[0]) fprintf(f, "%s\n", c->note);
  if (c->ost.uncertified)
    fprintf(f, "note: %lld truth elements could not be certified within 1 ulp\n",
            (long long)c->ost.uncertified);
  if (c->want_o) text_held(f, c, &c->o, model, truth);
  if (c->want_l) text_held(f, c, &c->l, model, truth);
  const int ok = fclose(f) == 0;
  rep->json = ok ? json_doc(c, model, truth, rep->exit_code) : NULL;
  if (!ok || !rep->json) {
    mlr_check_report_free(rep);
    return mlr_error_set(err, MLR_ENOMEM, "out of memory for the report");
  }
  return MLR_OK;
}

static void ctx_free(ctx *c) {
  held *hs[2] = {&c->o, &c->l};
  for (int k = 0; k < 2; k++) {
    free(hs[k]->own_a);
    free(hs[k]->own_b);
    free(hs[k]->own_t);
  }
  free(c->truth);
  free(c->tlse);
  free(c->bound);
  mlr_emu_result_free(&c->res);
  free(c);
}

mlr_status mlr_check_run(const mlr_check_args *a, mlr_check_report *rep, mlr_error *err) {
  memset(rep, 0, sizeof *rep);
  if (!a || !a->in || !a->out || !a->recipe)
    return mlr_error_set(err, MLR_EINVAL, "a check needs the inputs, the output and the recipe");
  ctx *c = calloc(1, sizeof *c);
  if (!c) return mlr_error_set(err, MLR_ENOMEM, "out of memory for the check");
  c->a = a;
  c->r = *a->recipe;
  mlr_status st = plan(c, err);
  if (st == MLR_OK) st = run_refs(c, err);
  if (st == MLR_OK && c->want_o) st = refs_o(c, err);
  if (st == MLR_OK && c->want_o) st = hold(&c->o, a->in, err);
  if (st == MLR_OK && c->want_l) st = refs_lse(c, err);
  if (st == MLR_OK && c->want_l) st = hold(&c->l, a->in, err);
  if (st == MLR_OK && !c->o.evaluated && !c->l.evaluated)
    st = mlr_error_set(err, MLR_EINVAL, "no rule could be evaluated (%s)",
                       c->want_o ? c->o.v[0].detail : c->l.v[0].detail);
  if (st == MLR_OK) st = mlr_recipe_hash(&c->r, c->hash);
  if (st == MLR_OK) st = write_report(c, rep, err);
  ctx_free(c);
  return st;
}

void mlr_check_report_free(mlr_check_report *rep) {
  if (!rep) return;
  free(rep->text);
  free(rep->json);
  rep->text = rep->json = NULL;
}

/* an output folder: o.npy and, or, lse.npy */
static mlr_status load_folder(const char *dir, mlr_tensor_file *out, mlr_error *err) {
  static const char *const names[2] = {"o", "lse"};
  int found = 0;
  for (int k = 0; k < 2; k++) {
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s.npy", dir, names[k]);
    if (stat(path, &sb) != 0) continue;
    found++;
    const mlr_status st = mlr_npy_read(path, MLR_DT_COUNT, names[k], out, err);
    if (st != MLR_OK) return st;
  }
  if (!found)
    return mlr_error_set(err, MLR_EIO,
                         "%s: a folder without o.npy or lse.npy (an output folder holds o.npy "
                         "and, optionally, lse.npy)",
                         dir);
  return MLR_OK;
}

mlr_status mlr_check_load_output(const char *path, mlr_tensor_file *out, mlr_error *err) {
  mlr_tf_init(out);
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return load_folder(path, out, err);
  const size_t n = strlen(path);
  if (n >= 4 && strcmp(path + n - 4, ".npy") == 0)
    return mlr_npy_read(path, MLR_DT_COUNT, "o", out, err);
  return mlr_safetensors_read(path, out, err);
}
