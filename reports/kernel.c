/* A user's kernel as a command or a callback (mlr_kernel.h): its definition checked, its command
 * (or callback) run on a cell's inputs in a folder of the run's own, and its output checked by
 * mlr_check_run. Whatever the kernel does (not found, crashes, hangs, writes garbage or nothing,
 * declines the cell) ends as a verdict of the cell, so one bad kernel never stops a report. */
#define _XOPEN_SOURCE 700
#include "mlr_kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mlr_check.h"
#include "mlr_formats.h"
#include "mlr_gpu_fast.h"
#include "mlr_inputs.h"
#include "mlr_oracle.h"

static const char *const PLACEHOLDERS[] = {"inputs", "out", "q_scale", "cell", "q_policy"};
enum { NPLACE = 5, MAX_COMMAND = 65536 };

const char *mlr_kernel_verdict_name(int v) {
  return v == MLR_KERNEL_PASS   ? "pass"
         : v == MLR_KERNEL_FAIL ? "fail"
         : v == MLR_KERNEL_SKIP ? "skipped"
                                : "error";
}

/* 1 when s[0..n) is a kernel's name: 1 to 63 of [A-Za-z0-9._-] (it names files in the folder) */
static int name_ok(const char *s, size_t n) {
  int ok = n >= 1 && n <= 63;
  for (size_t i = 0; ok && i < n; i++)
    ok = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
         (s[i] >= '0' && s[i] <= '9') || (s[i] && strchr("._-", s[i]));
  return ok;
}

mlr_status mlr_kernel_spec_name(const char *spec, char name[64], mlr_error *err) {
  const char *eq = strchr(spec, '=');
  const size_t n = eq ? (size_t)(eq - spec) : 0;
  if (!name_ok(spec, n))
    return mlr_error_set(err, MLR_EINVAL,
                         "--kernel '%.60s': not NAME=COMMAND (NAME: 1 to 63 of A-Z a-z 0-9 . _ -)",
                         spec);
  memcpy(name, spec, n);
  name[n] = 0;
  return MLR_OK;
}

/* the placeholder at s ("{name}"): its index, or -1; *len its length */
static int placeholder(const char *s, size_t *len) {
  for (int k = 0; k < NPLACE; k++) {
    const size_t n = strlen(PLACEHOLDERS[k]);
    if (!strncmp(s + 1, PLACEHOLDERS[k], n) && s[n + 1] == '}') {
      *len = n + 2;
      return k;
    }
  }
  return -1;
}

/* every {word} in the template is known, and {inputs} and {out} are there */
static mlr_status check_template(const char *name, const char *cmd, mlr_error *err) {
  int seen[NPLACE] = {0};
  for (const char *s = cmd; *s; s++) {
    if (*s != '{') continue;
    size_t len = 0, w = 1;
    const int k = placeholder(s, &len);
    if (k >= 0) {
      seen[k] = 1;
      continue;
    }
    while (s[w] == '_' || (s[w] >= 'a' && s[w] <= 'z')) w++;
    if (w > 1 && s[w] == '}')
      return mlr_error_set(err, MLR_EINVAL,
                           "--kernel %s: unknown placeholder '%.*s' in its command (valid: "
                           "{inputs}, {out}, {q_scale}, {q_policy}, {cell})",
                           name, (int)(w + 1), s);
  }
  if (!seen[0] || !seen[1])
    return mlr_error_set(err, MLR_EINVAL,
                         "--kernel %s: its command needs {inputs} (the inputs file it reads) and "
                         "{out} (where it writes o and lse)",
                         name);
  return MLR_OK;
}

/* a built-in or fast-* recipe by name, else a recipe file */
static mlr_status find_recipe(const char *kname, const char *what, mlr_recipe *r, mlr_error *err) {
  if (mlr_recipe_builtin(what, r) == MLR_OK || mlr_gpu_fast_recipe(what, r) == MLR_OK)
    return MLR_OK;
  FILE *f = fopen(what, "rb");
  if (!f)
    return mlr_error_set(err, MLR_EINVAL,
                         "--kernel-recipe %s=%s: neither a built-in recipe (%s|%s) nor a readable "
                         "file",
                         kname, what, mlr_recipe_builtin_names(), mlr_gpu_fast_recipe_names());
  char *text = malloc(1 << 20);
  const size_t n = text ? fread(text, 1, (1 << 20) - 1, f) : 0;
  const int whole = feof(f);
  fclose(f);
  if (!text || !whole) {
    free(text);
    return mlr_error_set(err, MLR_EINVAL, "--kernel-recipe %s=%s: recipe files are at most 1 MiB",
                         kname, what);
  }
  text[n] = 0;
  mlr_error e = {""};
  const mlr_status st = mlr_recipe_parse(text, what, r, &e);
  free(text);
  return st == MLR_OK ? MLR_OK
                      : mlr_error_set(err, MLR_EINVAL, "--kernel-recipe %s: %s", kname, e.msg);
}

/* the recipe, its policy and the rules of a kernel */
static mlr_status define_contract(mlr_kernel *k, const char *recipe, const char *policy,
                                  const char *const *rules, int nrules, mlr_error *err) {
  mlr_status st = find_recipe(k->name, recipe, &k->recipe, err);
  if (st != MLR_OK) return st;
  snprintf(k->recipe_label, sizeof k->recipe_label, "%.255s", recipe);
  mlr_error e = {""};
  if (policy && k->recipe.q_format == MLR_Q_BF16)
    return mlr_error_set(err, MLR_EINVAL,
                         "--kernel-policy %s=%s: recipe '%s' has bf16 Q, which has no scale policy",
                         k->name, policy, k->recipe.name);
  if (policy && mlr_recipe_set_policy(&k->recipe, policy, &e) != MLR_OK)
    return mlr_error_set(err, MLR_EINVAL, "--kernel-policy %s: %s", k->name, e.msg);
  snprintf(k->policy, sizeof k->policy, "%.47s", policy ? policy : "");
  if (nrules > MLR_KERNEL_MAX_RULES - 2)
    return mlr_error_set(err, MLR_EINVAL,
                         "--kernel-rule %s: at most %d rules besides fa3 and structure", k->name,
                         MLR_KERNEL_MAX_RULES - 2);
  /* the default set is always held */
  k->nrules = mlr_rule_defaults(k->rules);
  for (int i = 0; i < nrules; i++) {
    mlr_rule r;
    if (mlr_rule_parse(rules[i], &r, &e) != MLR_OK)
      return mlr_error_set(err, MLR_EINVAL, "--kernel-rule %s=%s: %s", k->name, rules[i], e.msg);
    if (strcmp(r.text, "fa3") && strcmp(r.text, "structure")) k->rules[k->nrules++] = r;
  }
  return MLR_OK;
}

mlr_status mlr_kernel_define(mlr_kernel *k, const char *spec, const char *recipe,
                             const char *policy, double timeout_s, const char *const *rules,
                             int nrules, mlr_error *err) {
  memset(k, 0, sizeof *k);
  mlr_status st = mlr_kernel_spec_name(spec, k->name, err);
  if (st != MLR_OK) return st;
  const char *cmd = spec + strlen(k->name) + 1;
  if (!*cmd || strlen(cmd) >= sizeof k->command)
    return mlr_error_set(err, MLR_EINVAL, "--kernel %s: the command is empty or over %zu bytes",
                         k->name, sizeof k->command - 1);
  snprintf(k->command, sizeof k->command, "%s", cmd);
  if ((st = check_template(k->name, cmd, err)) != MLR_OK) return st;
  if (!recipe)
    return mlr_error_set(err, MLR_EINVAL,
                         "--kernel %s: no recipe: say which numerics it claims with "
                         "--kernel-recipe %s=R (a built-in, fast-* or a recipe file)",
                         k->name, k->name);
  if (!(timeout_s > 0 && timeout_s <= 86400))
    return mlr_error_set(err, MLR_EINVAL,
                         "--kernel-timeout %s: %g s is not a number of seconds in (0, 86400]",
                         k->name, timeout_s);
  k->timeout_s = timeout_s;
  return define_contract(k, recipe, policy, rules, nrules, err);
}

mlr_status mlr_kernel_define_call(mlr_kernel *k, const char *name, const char *recipe,
                                  const char *policy, const char *const *rules, int nrules,
                                  mlr_kernel_call call, void *ctx, mlr_error *err) {
  memset(k, 0, sizeof *k);
  if (!name || !name_ok(name, strlen(name)))
    return mlr_error_set(err, MLR_EINVAL,
                         "kernel '%.60s': not a name (1 to 63 of A-Z a-z 0-9 . _ -)",
                         name ? name : "");
  snprintf(k->name, sizeof k->name, "%s", name);
  if (!call) return mlr_error_set(err, MLR_EINVAL, "kernel %s: no function to call", name);
  if (!recipe)
    return mlr_error_set(err, MLR_EINVAL,
                         "kernel %s: no recipe: say which numerics it claims (a built-in, fast-* "
                         "or a recipe file)",
                         name);
  k->call = call; /* timeout_s stays 0: a call in this thread cannot be stopped from outside */
  k->ctx = ctx;
  return define_contract(k, recipe, policy, rules, nrules, err);
}

double mlr_kernel_q_scale(const mlr_kernel *k) {
  if (k->recipe.q_scale != MLR_QS_STATIC) return 1.0; /* the recipe's own policy, or the given */
  const mlr_format f8 = k->recipe.q_format == MLR_Q_E4M3 ? MLR_FMT_E4M3 : MLR_FMT_E4M3FNUZ;
  return (float)(k->recipe.q_absmax / (double)mlr_format_max(f8)); /* as the model takes it */
}

mlr_status mlr_kernel_workdir(char dir[4096], mlr_error *err) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, 4096, "%s/mlaref-kernels-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir))
    return mlr_error_set(err, MLR_EIO, "cannot make a folder for the kernels' files (%s): %s", dir,
                         strerror(errno));
  return MLR_OK;
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *f) {
  (void)sb;
  (void)flag;
  (void)f;
  remove(path);
  return 0;
}

void mlr_kernel_workdir_remove(const char *dir) {
  if (dir && *dir) nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

mlr_status mlr_kernel_write_inputs(const char *dir, const char *cell, const mlr_tensor_file *tf,
                                   char path[4096], mlr_error *err) {
  snprintf(path, 4096, "%s/%s.inputs.safetensors", dir, cell);
  return mlr_safetensors_write(path, tf, err);
}

void mlr_kernel_result_free(mlr_kernel_result *res) {
  if (res) mlr_tf_free(&res->out);
}

/* ---- the command ---- */

/* a value as the shell reads it: as it is when every character is plain, else single-quoted */
static void shell_word(char *dst, size_t n, const char *v) {
  int plain = *v != 0;
  for (const char *s = v; *s && plain; s++)
    plain = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
            strchr("._-/+=:,@%", *s);
  if (plain) {
    snprintf(dst, n, "%s", v);
    return;
  }
  size_t at = 0;
  if (at + 1 < n) dst[at++] = '\'';
  for (const char *s = v; *s && at + 5 < n; s++)
    if (*s == '\'') {
      memcpy(dst + at, "'\\''", 4);
      at += 4;
    } else
      dst[at++] = *s;
  if (at + 1 < n) dst[at++] = '\'';
  dst[at] = 0;
}

/* the template with its placeholders replaced (malloc'd; NULL: out of memory or too long) */
static char *substitute(const char *tpl, const char *const vals[NPLACE]) {
  char words[NPLACE][8200];
  for (int k = 0; k < NPLACE; k++) shell_word(words[k], sizeof words[k], vals[k]);
  char *out = malloc(MAX_COMMAND);
  size_t at = 0;
  for (const char *s = tpl; out && *s;) {
    size_t len = 1;
    const int k = *s == '{' ? placeholder(s, &len) : -1;
    const char *add = k >= 0 ? words[k] : s;
    const size_t n = k >= 0 ? strlen(add) : 1;
    if (at + n + 1 >= MAX_COMMAND) {
      free(out);
      return NULL;
    }
    memcpy(out + at, add, n);
    at += n;
    s += len;
  }
  if (out) out[at] = 0;
  return out;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* how the command ended */
typedef struct ending {
  int timed_out, signalled, code; /* code: the exit status, or the signal */
  double seconds;
} ending;

/* wait for pid until the deadline (polling, from 1 ms to 20 ms apart): 1 when it ended */
static int wait_until(pid_t pid, double deadline, int *ws) {
  long ns = 1000000;
  for (;;) {
    const pid_t r = waitpid(pid, ws, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return 1;
    if (now_s() >= deadline) return 0;
    const struct timespec d = {0, ns};
    nanosleep(&d, NULL);
    if (ns < 20000000) ns *= 2;
  }
}

/* sh -c CMD in its own process group, stderr into err_path; past the timeout the group gets
 * SIGTERM, then SIGKILL a second later. The group is killed at the end in any case, so nothing the
 * kernel left in the background writes into the folder after it is gone. */
static mlr_status run_command(const char *cmd, const char *err_path, double timeout_s, ending *e,
                              mlr_error *err) {
  memset(e, 0, sizeof *e);
  const int efd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600),
            nfd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (efd < 0 || nfd < 0) {
    if (efd >= 0) close(efd);
    if (nfd >= 0) close(nfd);
    return mlr_error_set(err, MLR_EIO, "%s: cannot open it for the kernel's stderr: %s", err_path,
                         strerror(errno));
  }
  const double t0 = now_s();
  const pid_t pid = fork();
  if (pid == 0) { /* only async-signal-safe calls until exec: the parent has threads */
    setpgid(0, 0);
    if (dup2(nfd, 0) < 0 || dup2(nfd, 1) < 0 || dup2(efd, 2) < 0) _exit(126);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  close(efd);
  close(nfd);
  if (pid < 0) return mlr_error_set(err, MLR_EIO, "cannot start a kernel: %s", strerror(errno));
  setpgid(pid, pid); /* both sides, so the group exists before either goes on */
  int ws = 0;
  if (!wait_until(pid, t0 + timeout_s, &ws)) {
    e->timed_out = 1;
    kill(-pid, SIGTERM);
    if (!wait_until(pid, now_s() + 1.0, &ws)) {
      kill(-pid, SIGKILL);
      waitpid(pid, &ws, 0);
    }
  }
  kill(-pid, SIGKILL);
  e->seconds = now_s() - t0;
  e->signalled = !e->timed_out && WIFSIGNALED(ws);
  e->code = WIFSIGNALED(ws) ? WTERMSIG(ws) : WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
  return MLR_OK;
}

/* the last non-empty line of a file (its last 4 KiB), at most n - 1 bytes, control characters as
 * spaces; "" when there is none */
static void last_line(const char *path, char *line, size_t n) {
  line[0] = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return;
  char tail[4097];
  fseek(f, 0, SEEK_END);
  const long size = ftell(f);
  fseek(f, size > 4096 ? size - 4096 : 0, SEEK_SET);
  size_t len = fread(tail, 1, 4096, f);
  fclose(f);
  while (len && (unsigned char)tail[len - 1] <= ' ') len--;
  tail[len] = 0;
  const char *start = strrchr(tail, '\n');
  start = start ? start + 1 : tail;
  const size_t len2 = strlen(start) < n - 1 ? strlen(start) : n - 1;
  memcpy(line, start, len2);
  line[len2] = 0;
  for (char *s = line; *s; s++)
    if ((unsigned char)*s < ' ') *s = ' ';
}

/* an error verdict: "kernel K, cell C: WHAT" */
static mlr_status verdict_error(mlr_kernel_result *res, const mlr_kernel *k, const char *cell,
                                const char *what) {
  res->verdict = MLR_KERNEL_ERROR;
  snprintf(res->reason, sizeof res->reason, "kernel %s, cell %s: %.900s", k->name, cell, what);
  for (char *s = res->reason; *s; s++)
    if ((unsigned char)*s < ' ') *s = ' ';
  return MLR_OK;
}

/* a skipped cell: "kernel K, cell C: WHY" (the kernel's own words) */
static mlr_status verdict_skip(mlr_kernel_result *res, const mlr_kernel *k, const char *cell,
                               const char *why) {
  verdict_error(res, k, cell, why[0] ? why : "skipped (no reason given)");
  res->verdict = MLR_KERNEL_SKIP;
  return MLR_OK;
}

/* the command's ending as an error or skip verdict (1), or 0 when it exited 0 */
static int ended_badly(const ending *e, const mlr_kernel *k, const char *cell,
                       const char *stderr_path, mlr_kernel_result *res) {
  char last[240], what[512];
  last_line(stderr_path, last, sizeof last);
  const char *sep = last[0] ? ": " : "";
  if (e->timed_out)
    snprintf(what, sizeof what, "timed out after %g s (its process group killed)", k->timeout_s);
  else if (e->signalled)
    snprintf(what, sizeof what, "killed by signal %d (%s)%s%s", e->code, strsignal(e->code), sep,
             last);
  else if (e->code == MLR_KERNEL_SKIP_CODE) {
    verdict_skip(res, k, cell, last);
    return 1;
  } else if (e->code == 126 || e->code == 127)
    snprintf(what, sizeof what, "command not found or not executable (sh exit %d)%s%s", e->code,
             sep, last);
  else if (e->code != 0)
    snprintf(what, sizeof what, "exited with status %d%s%s", e->code, sep, last);
  else
    return 0;
  verdict_error(res, k, cell, what);
  return 1;
}

/* ---- the output and its check ---- */

/* the output's path in a message as {out}: the folder differs from run to run, the reason not */
static void unpath(char *msg, size_t n, const char *path) {
  const size_t pl = strlen(path);
  char *at;
  while (pl && (at = strstr(msg, path)) != NULL) {
    const size_t tail = strlen(at + pl);
    if ((size_t)(at - msg) + 5 + tail >= n) break;
    memmove(at + 5, at + pl, tail + 1);
    memcpy(at, "{out}", 5);
  }
}

/* the rules' verdicts of one tensor's section of the check's JSON into res->checks; the first
 * failed one's detail into *failed (when none yet) */
static void read_rules(json_t *sec, const char *tensor, mlr_kernel_result *res, const char **failed,
                       const char **failed_rule) {
  json_t *rules = json_object_get(sec, "rules");
  for (size_t i = 0; i < json_array_size(rules) && res->nchecks < MLR_KERNEL_MAX_CHECKS; i++) {
    json_t *r = json_array_get(rules, i), *m = json_object_get(r, "measured"),
           *l = json_object_get(r, "limit");
    mlr_kernel_check *c = &res->checks[res->nchecks++];
    snprintf(c->tensor, sizeof c->tensor, "%s", tensor);
    snprintf(c->rule, sizeof c->rule, "%s", json_string_value(json_object_get(r, "rule")));
    snprintf(c->verdict, sizeof c->verdict, "%s", json_string_value(json_object_get(r, "verdict")));
    c->measured = json_is_number(m) ? json_number_value(m) : NAN;
    c->limit = json_is_number(l) ? json_number_value(l) : NAN;
    if (!*failed && !strcmp(c->verdict, "FAIL")) {
      *failed = json_string_value(json_object_get(r, "detail"));
      *failed_rule = c->rule;
    }
  }
}

/* o's non-finite elements (o is BF16, F16 or F32: the check took it) */
static int64_t nonfinite(const mlr_tensor *o) {
  int64_t n = 0, count = 1;
  for (int i = 0; i < o->ndim; i++) count *= o->shape[i];
  for (int64_t i = 0; i < count; i++) {
    if (o->dtype == MLR_DT_F32) {
      uint32_t v;
      memcpy(&v, (const char *)o->data + 4 * i, 4);
      n += (v & 0x7f800000u) == 0x7f800000u;
    } else {
      uint16_t v;
      memcpy(&v, (const char *)o->data + 2 * i, 2);
      n += o->dtype == MLR_DT_BF16 ? (v & 0x7f80u) == 0x7f80u : (v & 0x7c00u) == 0x7c00u;
    }
  }
  return n;
}

/* the verdict from the check's report: pass, fail (the rule and the worst element's reproducer
 * line), or an error for values that are not finite where the model's are */
static mlr_status judge(const mlr_kernel *k, const mlr_kernel_cell *c, const mlr_check_report *rep,
                        mlr_kernel_result *res, mlr_error *err) {
  json_error_t je;
  json_t *root = json_loads(rep->json, 0, &je), *o = json_object_get(root, "o");
  if (!root) return mlr_error_set(err, MLR_ENOMEM, "the check's JSON: %s", je.text);
  const char *failed = NULL, *failed_rule = NULL;
  read_rules(o, "o", res, &failed, &failed_rule);
  read_rules(json_object_get(root, "lse"), "lse", res, &failed, &failed_rule);
  const json_int_t differ = json_integer_value(json_object_get(o, "class_mismatch")) +
                            json_integer_value(json_object_get(o, "unwritten"));
  const int64_t nf = nonfinite(mlr_tf_find(&res->out, "o"));
  char what[900];
  if (nf && differ) {
    snprintf(what, sizeof what, "%lld non-finite values in o where the model has none",
             (long long)nf);
    verdict_error(res, k, c->name, what);
  } else if (rep->exit_code) {
    const char *rp = strstr(rep->text, "reproduce ");
    char repro[600] = "";
    if (rp) snprintf(repro, sizeof repro, "; %.*s", (int)strcspn(rp, "\n"), rp);
    res->verdict = MLR_KERNEL_FAIL;
    snprintf(res->reason, sizeof res->reason, "kernel %s, cell %s: rule %s FAIL: %.300s%s", k->name,
             c->name, failed_rule ? failed_rule : "?", failed ? failed : "", repro);
  }
  json_decref(root);
  return MLR_OK;
}

/* the output at path read and checked against the kernel's recipe: the verdict into res */
static mlr_status check_output(const mlr_kernel *k, const mlr_kernel_cell *c, const char *path,
                               mlr_kernel_result *res, mlr_error *err) {
  mlr_error e = {""};
  struct stat sb;
  if (stat(path, &sb) != 0)
    return verdict_error(res, k, c->name, "wrote no output (exited 0, nothing at {out})");
  if (mlr_check_load_output(path, &res->out, &e) != MLR_OK) {
    unpath(e.msg, sizeof e.msg, path);
    mlr_tf_free(&res->out);
    return verdict_error(res, k, c->name, e.msg);
  }
  const mlr_check_args a = {.in = c->in,
                            .inputs_label = "{inputs}",
                            .shape = c->shape,
                            .out = &res->out,
                            .out_label = "{out}",
                            .recipe = &k->recipe,
                            .recipe_label = k->recipe_label,
                            .rules = k->rules,
                            .nrules = k->nrules,
                            .tensors = MLR_CHECK_BOTH,
                            .from = MLR_TRUTH_DEQUANTIZED,
                            .threads = c->threads,
                            .commit = c->commit};
  mlr_check_report rep = {0, 0, NULL, NULL};
  mlr_status st = mlr_check_run(&a, &rep, &e);
  if (st == MLR_EINVAL) { /* an output of the wrong shape or dtype: the check's own words */
    mlr_tf_free(&res->out);
    return verdict_error(res, k, c->name, e.msg);
  }
  if (st != MLR_OK)
    return mlr_error_set(err, st, "kernel %s, cell %s: %s", k->name, c->name, e.msg);
  st = judge(k, c, &rep, res, err);
  mlr_check_report_free(&rep);
  if (res->verdict == MLR_KERNEL_ERROR) mlr_tf_free(&res->out);
  return st;
}

/* the callback on the cell: its return as a verdict (0: the output checked as a command's) */
static mlr_status run_call(const mlr_kernel *k, const mlr_kernel_cell *c, const char *out,
                           mlr_kernel_result *res, mlr_error *err) {
  char why[512] = "", what[560];
  const double t0 = now_s();
  const int rc = k->call(k->ctx, c->name, c->inputs_path, out, why, sizeof why);
  res->seconds = now_s() - t0;
  why[sizeof why - 1] = 0;
  if (rc == MLR_KERNEL_SKIP_CODE) return verdict_skip(res, k, c->name, why);
  if (rc == 0) return check_output(k, c, out, res, err);
  if (!why[0]) snprintf(why, sizeof why, "its callback returned %d", rc);
  snprintf(what, sizeof what, "%s", why);
  unpath(what, sizeof what, out);
  return verdict_error(res, k, c->name, what);
}

/* the cell's inputs as a folder of .npy files beside its .safetensors file (written once a cell,
 * for every kernel that asks), its path into dir */
static mlr_status npy_inputs(const mlr_kernel_cell *c, char dir[4096], mlr_error *err) {
  const size_t n = strlen(c->inputs_path);
  snprintf(dir, 4096, "%.*s.npy", (int)(n > 12 ? n - 12 : n), c->inputs_path); /* .safetensors */
  struct stat sb;
  if (stat(dir, &sb) == 0) return MLR_OK;
  mlr_tensor_file tf;
  mlr_status st = mlr_safetensors_read(c->inputs_path, &tf, err);
  if (st == MLR_OK) st = mlr_inputs_write_npy(&tf, dir, err);
  mlr_tf_free(&tf);
  return st;
}

mlr_status mlr_kernel_run_cell(const mlr_kernel *k, const mlr_kernel_cell *c,
                               mlr_kernel_result *res, mlr_error *err) {
  memset(res, 0, sizeof *res);
  mlr_tf_init(&res->out);
  char out[4096], errp[4096], qs[32], qp[64];
  snprintf(out, sizeof out, "%s/%s.%s.out.safetensors", c->dir, k->name, c->name);
  snprintf(errp, sizeof errp, "%s/%s.%s.stderr", c->dir, k->name, c->name);
  snprintf(qs, sizeof qs, "%.9g", mlr_kernel_q_scale(k));
  /* {q_policy}: absmax to 17 digits, so that a kernel reading it gets the model's scale */
  if (k->recipe.q_scale == MLR_QS_STATIC)
    snprintf(qp, sizeof qp, "static:absmax=%.17g", k->recipe.q_absmax);
  else
    mlr_recipe_policy_text(&k->recipe, qp, sizeof qp);
  mlr_kernel_workdir_remove(out); /* a file or a folder another cell's run left */
  if (k->call) {
    const mlr_status st = run_call(k, c, out, res, err);
    mlr_kernel_workdir_remove(out);
    return st;
  }
  char npy[4096];
  if (k->inputs_npy) {
    const mlr_status st = npy_inputs(c, npy, err);
    if (st != MLR_OK) return st;
  }
  const char *const vals[NPLACE] = {k->inputs_npy ? npy : c->inputs_path, out, qs, c->name, qp};
  char *cmd = substitute(k->command, vals);
  if (!cmd)
    return verdict_error(res, k, c->name,
                         "its command with the placeholders filled is over 64 KiB");
  ending e;
  mlr_status st = run_command(cmd, errp, k->timeout_s, &e, err);
  free(cmd);
  if (st != MLR_OK) return st;
  res->seconds = e.seconds;
  if (!ended_badly(&e, k, c->name, errp, res)) st = check_output(k, c, out, res, err);
  mlr_kernel_workdir_remove(out);
  remove(errp);
  return st;
}
