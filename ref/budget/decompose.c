/* The error decomposition by source and the static Q scale's cost (mlr_budget.h). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mlr_values.h"
#include "mlr_emulate.h"
#include "mlr_formats.h"
#include "budget_internal.h"

#define DV MLR_EMU_V_DIM

mlr_err_stats mlr_err_stats_of(const double *a, const double *b, int64_t n) {
  mlr_err_stats s = {0, 0, 0};
  double *e = malloc((size_t)(n > 0 ? n : 1) * sizeof *e), ss = 0;
  int64_t m = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(a[i]) || !isfinite(b[i])) continue; /* class mismatches are the rules' business */
    const double d = fabs(a[i] - b[i]);
    ss += d * d;
    if (d > s.max) s.max = d;
    if (e) e[m] = d;
    m++;
  }
  if (m) s.rms = sqrt(ss / (double)m);
  if (e) {
    mlr_sort_values(e, m);
    s.p999 = mlr_sorted_quantile(e, m, 0.999);
  }
  free(e);
  return s;
}

static double l2(const double *a, const double *b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++)
    if (isfinite(a[i]) && (!b || isfinite(b[i])))
      s += (a[i] - (b ? b[i] : 0)) * (a[i] - (b ? b[i] : 0));
  return sqrt(s);
}

mlr_status mlr_budget_model(const mlr_recipe *r, const mlr_inputs *in, int threads, double *o,
                            int64_t *clipped, mlr_error *err) {
  mlr_emu_opts opts = {threads, 0, 0, 0};
  mlr_emu_result res;
  mlr_status st = mlr_emulate(r, in, &opts, &res, err);
  if (st != MLR_OK) return st;
  const mlr_cmp_tensor t = {res.out_format == MLR_OUT_FP32   ? MLR_CT_F32
                            : res.out_format == MLR_OUT_FP16 ? MLR_CT_F16
                                                             : MLR_CT_BF16,
                            res.o, res.T * res.H * DV};
  for (int64_t i = 0; i < t.n; i++) o[i] = mlr_cmp_value(&t, i); /* exact */
  if (clipped) *clipped = res.q_clipped;
  mlr_emu_result_free(&res);
  return MLR_OK;
}

mlr_status mlr_budget_decompose(const mlr_recipe *r, const mlr_inputs *in, mlr_truth_from from,
                                const double *truth_o, const double *model_o, const int64_t *rows,
                                int64_t nrows, int threads, mlr_decomp *dc, mlr_error *err) {
  memset(dc, 0, sizeof *dc);
  const int64_t N = rows ? nrows : in->T * in->H, n = N * DV;
  const int kv8 = in->kv_format != MLR_FMT_BF16;
  if (from == MLR_TRUTH_BF16 && !in->kv_bf16)
    return mlr_error_set(
        err, MLR_EINVAL,
        "the truth from bf16 KV needs the tensor kv_bf16 in the inputs (mlaref gen ... bf16kv=1)");
  dc->from = from;
  dc->n = n;
  dc->rows = N;
  /* with no kv_bf16, the truth is the dequantized KV's: kv_quant stays on everywhere */
  const unsigned base = dc->from == MLR_TRUTH_BF16 || !kv8 ? 0u : 1u << MLR_SRC_KV;
  for (int s = 0; s < MLR_NSRC; s++)
    if (mlr_source_present(r, in, s) && !(base >> s & 1u)) dc->present |= 1u << s;
  const size_t full = (size_t)(in->T * in->H) * DV;
  double *truth = truth_o ? NULL : malloc(full * sizeof(double)),
         *tlse = truth_o ? NULL : malloc((size_t)(in->T * in->H) * sizeof(double));
  double *mfull = model_o ? NULL : malloc(full * sizeof(double));
  double *t = malloc((size_t)n * sizeof(double)), *model = malloc((size_t)n * sizeof(double));
  double *ev = malloc((size_t)n * sizeof(double)), *ref = malloc((size_t)n * sizeof(double)),
         *sum = calloc((size_t)n, sizeof(double));
  mlr_status st = MLR_ENOMEM;
  if ((!truth_o && (!truth || !tlse)) || (!model_o && !mfull) || !t || !model || !ev || !ref ||
      !sum) {
    mlr_error_set(err, MLR_ENOMEM, "out of memory for the decomposition");
    goto out;
  }
  mlr_oracle_stats os;
  if (!truth_o && (st = mlr_oracle(in, dc->from, truth, tlse, &os, err)) != MLR_OK) goto out;
  if (!model_o && (st = mlr_budget_model(r, in, threads, mfull, NULL, err)) != MLR_OK) goto out;
  const double *tr = truth_o ? truth_o : truth, *mo = model_o ? model_o : mfull;
  for (int64_t k = 0; k < N; k++) {
    memcpy(t + k * DV, tr + (rows ? rows[k] : k) * DV, DV * sizeof(double));
    memcpy(model + k * DV, mo + (rows ? rows[k] : k) * DV, DV * sizeof(double));
  }
  dc->total = mlr_err_stats_of(model, t, n);
  dc->truth_rms = l2(t, NULL, n) / sqrt((double)(n ? n : 1));
  const double tl2 = l2(t, NULL, n);
  dc->rel_l2_total = tl2 > 0 ? l2(model, t, n) / tl2 : 0;
  /* closure: every source on is the model, bit for bit; every source off is the truth */
  if ((st = mlr_budget_eval(r, in, MLR_SRC_ALL, rows, N, threads, ev, err)) != MLR_OK) goto out;
  for (int64_t i = 0; i < n; i++)
    if (!(ev[i] == model[i] || (ev[i] != ev[i] && model[i] != model[i])) ||
        signbit(ev[i]) != signbit(model[i]))
      dc->closure_model_diff++;
  if ((st = mlr_budget_eval(r, in, base, rows, N, threads, ref, err)) != MLR_OK) goto out;
  dc->closure_truth_max = mlr_err_stats_of(ref, t, n).max;
  for (int s = 0; s < MLR_NSRC; s++) {
    if (!(dc->present >> s & 1u)) continue;
    if ((st = mlr_budget_eval(r, in, base | (1u << s), rows, N, threads, ev, err)) != MLR_OK)
      goto out;
    dc->alone[s] = mlr_err_stats_of(ev, ref, n);
    dc->rel_l2_alone[s] = tl2 > 0 ? l2(ev, ref, n) / tl2 : 0;
    for (int64_t i = 0; i < n; i++) sum[i] += ev[i] - ref[i];
    if ((st = mlr_budget_eval(r, in, MLR_SRC_ALL & ~(1u << s), rows, N, threads, ev, err)) !=
        MLR_OK)
      goto out;
    dc->without[s] = mlr_err_stats_of(model, ev, n);
  }
  /* interaction: total - sum of the sources alone; ev = the truth plus the sum of the sources */
  for (int64_t i = 0; i < n; i++) ev[i] = t[i] + sum[i];
  dc->interaction = mlr_err_stats_of(model, ev, n);
  st = MLR_OK;
out:
  free(truth);
  free(tlse);
  free(mfull);
  free(t);
  free(model);
  free(ev);
  free(ref);
  free(sum);
  return st;
}

mlr_status mlr_budget_policy_point(const mlr_recipe *r, const mlr_inputs *in, const double *truth_o,
                                   double rtol, double atol, int threads, mlr_policy_point *pt,
                                   mlr_error *err) {
  memset(pt, 0, sizeof *pt);
  if (r->q_format == MLR_Q_BF16)
    return mlr_error_set(
        err, MLR_EINVAL,
        "recipe '%s' has bf16 Q: a Q scale policy needs fp8 Q (--set q.format=e4m3)", r->name);
  if (in->q8)
    return mlr_error_set(err, MLR_EINVAL,
                         "the inputs' Q is fp8 codes with their q_scale already: no Q scale policy "
                         "applies to it");
  const int64_t n = in->T * in->H * DV;
  double *o = malloc((size_t)n * sizeof(double));
  if (!o) return mlr_error_set(err, MLR_ENOMEM, "out of memory for the model's output");
  int64_t clipped = 0;
  mlr_status st = mlr_budget_model(r, in, threads, o, &clipped, err);
  if (st == MLR_OK) st = mlr_budget_point_of(r, in, o, clipped, truth_o, rtol, atol, pt, err);
  free(o);
  return st;
}

mlr_status mlr_budget_point_of(const mlr_recipe *r, const mlr_inputs *in, const double *o,
                               int64_t clipped, const double *truth_o, double rtol, double atol,
                               mlr_policy_point *pt, mlr_error *err) {
  memset(pt, 0, sizeof *pt);
  const int64_t n = in->T * in->H * DV;
  const mlr_err_stats s = mlr_err_stats_of(o, truth_o, n);
  const double tl2 = l2(truth_o, NULL, n);
  pt->absmax = r->q_scale == MLR_QS_STATIC ? r->q_absmax : 0;
  pt->clipped_frac = (double)clipped / (double)(in->T * in->H * MLR_EMU_QK_DIM);
  pt->rms = s.rms;
  pt->max_abs = s.max;
  pt->rel_l2 = tl2 > 0 ? l2(o, truth_o, n) / tl2 : 0;
  mlr_cmp_tensor a = {MLR_CT_F64, o, n}, b = {MLR_CT_F64, truth_o, n};
  mlr_util u;
  const mlr_status st = mlr_compare_utilisation(&a, &b, rtol, atol, &u, err);
  if (st == MLR_OK) {
    pt->util_max = u.max;
    pt->util_p999 = u.p999;
  }
  return st;
}

void mlr_budget_absmax_grid(double lo, double hi, int n, double *out) {
  for (int i = 0; i < n; i++) out[i] = n == 1 ? lo : lo * pow(hi / lo, (double)i / (double)(n - 1));
  if (n > 1) out[n - 1] = hi; /* exactly the end, not its binary64 approximation */
}

int mlr_budget_sweep_grid(double lo, double hi, int n, double *out) {
  mlr_budget_absmax_grid(lo, hi, n, out);
  for (int i = 0; i < n; i++)
    if (out[i] == MLR_BUDGET_SEEDS_ABSMAX) return n;
  int k = n; /* insert it in order */
  while (k > 0 && out[k - 1] > MLR_BUDGET_SEEDS_ABSMAX) {
    out[k] = out[k - 1];
    k--;
  }
  out[k] = MLR_BUDGET_SEEDS_ABSMAX;
  return n + 1;
}
