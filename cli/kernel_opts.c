/* The user kernels' options (--kernel, --kernel-recipe, --kernel-policy, --kernel-timeout,
 * --kernel-rule), shared by `report` and `policy-check` so both read them alike and refuse the
 * same mistakes with the same lines. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "mlr_kernel.h"
#include "mlr_report.h"

enum { MAXK = MLR_CLI_MAX_KERNELS, MAXKRULES = 4 * MLR_CLI_MAX_KERNELS };
_Static_assert((int)MLR_CLI_MAX_KERNELS == (int)MLR_REPORT_MAX_KERNELS,
               "the report's kernel columns");

int mlr_cli_kernel_opt(const char *cmd, int argc, char **argv, int *i, mlr_cli_kernel_args *a,
                       int *rc) {
  return mlr_cli_list(cmd, argc, argv, i, "kernel", "NAME='COMMAND {inputs} {out}'", a->specs,
                      &a->nspecs, MAXK, rc) ||
         mlr_cli_list(cmd, argc, argv, i, "kernel-recipe", "NAME=RECIPE", a->recipes, &a->nrecipes,
                      MAXK, rc) ||
         mlr_cli_list(cmd, argc, argv, i, "kernel-policy", "NAME=POLICY", a->policies,
                      &a->npolicies, MAXK, rc) ||
         mlr_cli_list(cmd, argc, argv, i, "kernel-timeout", "seconds, or NAME=SECONDS", a->timeouts,
                      &a->ntimeouts, MAXK + 1, rc) ||
         mlr_cli_list(cmd, argc, argv, i, "kernel-rule", "NAME=RULE", a->rules, &a->nrules,
                      MAXKRULES, rc) ||
         mlr_cli_list(cmd, argc, argv, i, "kernel-inputs", "NAME=safetensors|npy", a->inputs,
                      &a->ninputs, MAXK, rc);
}

/* the kernel a NAME=VALUE option names (its index), or a usage error; *value after the '=' */
static int kernel_of(const char *cmd, const char *opt, const char *arg, char names[][64], int n,
                     const char **value, int *k) {
  const char *eq = strchr(arg, '=');
  for (*k = 0; eq && *k < n; (*k)++)
    if (strlen(names[*k]) == (size_t)(eq - arg) && !strncmp(names[*k], arg, (size_t)(eq - arg))) {
      *value = eq + 1;
      return MLR_EXIT_OK;
    }
  char list[MAXK * 66] = "";
  for (int j = 0; j < n; j++)
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? ", " : "", names[j]);
  if (!eq) return mlr_cli_usage_error(cmd, "--%s '%s' is not NAME=VALUE", opt, arg);
  return mlr_cli_usage_error(cmd, "--%s '%s': no --kernel named '%.*s' (given: %s)", opt, arg,
                             (int)(eq - arg), arg, n ? list : "none");
}

/* a per-kernel option's values by kernel (each once, unless many) */
static int by_kernel(const char *cmd, const char *opt, const char *const *args, int nargs,
                     char names[][64], int n, const char **out, int many) {
  for (int j = 0; j < nargs; j++) {
    const char *v;
    int k, rc = kernel_of(cmd, opt, args[j], names, n, &v, &k);
    if (rc != MLR_EXIT_OK) return rc;
    if (!many && out[k]) return mlr_cli_usage_error(cmd, "--%s %s given twice", opt, names[k]);
    out[many ? j : k] = v;
  }
  return MLR_EXIT_OK;
}

/* the timeouts: one for every kernel (S), or for one (NAME=S); default 600 s */
static int kernel_timeouts(const char *cmd, const mlr_cli_kernel_args *a, char names[][64], int n,
                           double *t) {
  double all = 600;
  const char *per[MAXK] = {NULL};
  for (int j = 0; j < a->ntimeouts; j++) {
    const char *v = a->timeouts[j];
    int k = -1, rc;
    if (strchr(v, '=') && (rc = kernel_of(cmd, "kernel-timeout", v, names, n, &v, &k))) return rc;
    double x;
    if (mlr_cli_parse_double(v, &x) || !(x > 0 && x <= 86400))
      return mlr_cli_usage_error(cmd, "--kernel-timeout '%s': seconds, a number in (0, 86400]",
                                 a->timeouts[j]);
    if (k < 0)
      all = x;
    else if (per[k])
      return mlr_cli_usage_error(cmd, "--kernel-timeout %s given twice", names[k]);
    else {
      per[k] = v;
      t[k] = x;
    }
  }
  for (int k = 0; k < n; k++)
    if (!per[k]) t[k] = all;
  return MLR_EXIT_OK;
}

/* the kernels' names from their specs, each once */
static int kernel_names(const char *cmd, const mlr_cli_kernel_args *a, char names[][64]) {
  mlr_error err = {""};
  for (int k = 0; k < a->nspecs; k++) {
    if (mlr_kernel_spec_name(a->specs[k], names[k], &err) != MLR_OK)
      return mlr_cli_usage_error(cmd, "%s", err.msg);
    for (int j = 0; j < k; j++)
      if (!strcmp(names[j], names[k]))
        return mlr_cli_usage_error(cmd, "--kernel %s given twice", names[k]);
  }
  return MLR_EXIT_OK;
}

int mlr_cli_kernels_define(const char *cmd, const mlr_cli_kernel_args *a, const char *policy,
                           struct mlr_kernel *ks) {
  char names[MAXK][64];
  const int n = a->nspecs;
  const char *recipe[MAXK] = {NULL}, *pol[MAXK] = {NULL}, *rule[MAXKRULES] = {NULL},
             *form[MAXK] = {NULL};
  double timeout[MAXK];
  int rc;
  if ((rc = kernel_names(cmd, a, names)) ||
      (rc = by_kernel(cmd, "kernel-recipe", a->recipes, a->nrecipes, names, n, recipe, 0)) ||
      (rc = by_kernel(cmd, "kernel-policy", a->policies, a->npolicies, names, n, pol, 0)) ||
      (rc = by_kernel(cmd, "kernel-rule", a->rules, a->nrules, names, n, rule, 1)) ||
      (rc = by_kernel(cmd, "kernel-inputs", a->inputs, a->ninputs, names, n, form, 0)) ||
      (rc = kernel_timeouts(cmd, a, names, n, timeout)))
    return rc;
  mlr_error err = {""};
  for (int k = 0; k < n; k++) {
    const char *mine[MAXKRULES];
    int nmine = 0;
    for (int j = 0; j < a->nrules; j++) /* this kernel's rules, in the order given */
      if (!strncmp(a->rules[j], names[k], strlen(names[k])) && a->rules[j][strlen(names[k])] == '=')
        mine[nmine++] = rule[j];
    if (mlr_kernel_define(&ks[k], a->specs[k], recipe[k], policy ? policy : pol[k], timeout[k],
                          mine, nmine, &err) != MLR_OK)
      return mlr_cli_usage_error(cmd, "%s", err.msg);
    if (form[k] && strcmp(form[k], "npy") && strcmp(form[k], "safetensors"))
      return mlr_cli_usage_error(cmd, "--kernel-inputs %s=%s: the form is safetensors or npy",
                                 names[k], form[k]);
    ks[k].inputs_npy = form[k] && !strcmp(form[k], "npy");
  }
  if (!n && (a->nrecipes || a->npolicies || a->nrules || a->ntimeouts || a->ninputs))
    return mlr_cli_usage_error(cmd, "--kernel-recipe, -policy, -rule, -timeout and -inputs need a "
                                    "--kernel");
  return MLR_EXIT_OK;
}
