#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "mlr_tensor.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <math.h>
#include <time.h>
#include <unistd.h>

/* "mlaref <cmd>: <message>" on stderr */
static void report(const char *cmd, const char *fmt, va_list ap) {
  fprintf(stderr, "mlaref %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
}

int mlr_cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report(cmd, fmt, ap);
  va_end(ap);
  return MLR_EXIT_USAGE;
}

int mlr_cli_fail(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report(cmd, fmt, ap);
  va_end(ap);
  return MLR_EXIT_FAIL;
}

/* each command's usage for `mlaref CMD --help`, by the name its messages use (`mlaref help` prints
 * them all, with what each does) */
static const struct {
  const char *cmd, *usage;
} USAGES[] = {
    {"formats", "formats info | formats boundaries --format F [--overflow O] [--rounding R] | "
                "formats encode --format F [--overflow O] [--rounding R] [--rbits N] VALUE... | "
                "formats decode --format F CODE..."},
    {"gen", "gen --shape SPEC --out FILE | gen --suite NAME --out DIR [--max-memory GB]"},
    {"suite", "suite list | suite show NAME"},
    {"inputs", "inputs check FILE [--allow-nonfinite] | inputs pack --out FILE "
               "NAME=F.npy:DTYPE... [--meta K=V]... | inputs unpack FILE --dir DIR"},
    {"recipe", "recipe list | recipe show NAME|FILE [--set key=value]..."},
    {"run", "run --recipe NAME|FILE [--set key=value]... --inputs IN --out OUT [--threads N] "
            "[--partials] [--allow-nonfinite] [--max-memory GB]"},
    {"gpu", "gpu run --kernel exact|fast [--variant KEY=V[,KEY=V]...] --recipe NAME|FILE "
            "[--set key=value]... --inputs IN --out OUT [--allow-nonfinite] [--max-memory GB] | "
            "gpu info"},
    {"compare", "compare A B [--tensor o] [--rule R]... [--truth T] [--inputs IN] [--json]"},
    {"check", "check --inputs IN --output KERNEL_OUT --recipe NAME|FILE [--set k=v]... "
              "[--rule R]... [--tensor o|lse|both] [--truth dequantized|bf16] [--threads N] "
              "[--allow-nonfinite] [--json]"},
    {"golden", "golden --suite NAME... --recipe NAME|all (--out DIR [--max-bs N] | --digests "
               "FILE) [--gpu] | golden --verify [--goldens DIR] [--digests FILE] [--suite "
               "NAME]... [--gpu]"},
    {"oracle", "oracle --inputs IN --out OUT [--from dequantized|bf16] [--max-memory GB] "
               "[--allow-nonfinite]"},
    {"budget", "budget --inputs IN | --shape SPEC --recipe NAME|FILE [--set k=v]... [--policy P] "
               "[--rows N] [--truth bf16|dequantized] [--tolerance RTOL,ATOL] [--out FILE] "
               "[--sweep absmax [--points N] [--dists D;D...] [--threshold X]] [--threads N] "
               "[--max-memory GB] [--allow-nonfinite] [--json]"},
    {"policy-check",
     "policy-check --policy P [--against P0] [--suite NAME | --shape SPEC... | "
     "--inputs FILE...] [--recipe R|none]... [--tolerance RTOL,ATOL] "
     "[--threshold X] [--margin M] [--gpu auto|off|require] [--threads N] "
     "[--max-memory GB] [--json] [--kernel NAME='CMD {inputs} {out} {q_scale} {q_policy}' "
     "--kernel-recipe NAME=R [--kernel-timeout [NAME=]S] "
     "[--kernel-rule NAME=RULE]... [--kernel-inputs NAME=safetensors|npy]]..."},
    {"report", "report --suite NAME --out DIR [--recipe NAME|none]... [--policy P]... [--baseline "
               "OLD/summary.json] [--quick] [--cells A,B...] [--gpu auto|off|require] [--shard "
               "i/n | --shards N] [--plan] [--digests FILE] [--threads N] [--max-memory GB] "
               "[--kernel NAME='CMD {inputs} {out}' "
               "--kernel-recipe NAME=R [--kernel-policy NAME=P] [--kernel-timeout [NAME=]S] "
               "[--kernel-rule NAME=RULE]... [--kernel-inputs NAME=safetensors|npy]]... | report "
               "merge --out DIR [--baseline "
               "OLD/summary.json] SHARD_DIR..."},
    {"discriminate", "discriminate --suite NAME [--suite NAME]... [--recipe R] [--max-bs N] "
                     "[--threads N]"},
    {"mma", "mma check FILE... --unit U [--format F]"},
    {"bench", "bench formats [--n N] | bench emulate [--recipe NAME]... [--shape SPEC] "
              "[--threads N] [--reps N] | bench oracle [--shape SPEC] [--small SPEC] | bench "
              "gpu-exact [--shape SPEC]... [--recipe NAME]... [--reps N] | bench gpu [--shape "
              "SPEC]... [--recipe NAME]... [--reps N] [--peers FILE] [--flush dirty|clean] "
              "[--warmup MS] [--variant KEY=V[,KEY=V]...] | bench mma [--dots N] [--reps N]"},
    {"selfcheck", "selfcheck"},
};

int mlr_cli_asks_help(int argc, char **argv) {
  return argc >= 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0);
}

int mlr_cli_help(const char *cmd) {
  const size_t word = strcspn(cmd, " ");
  for (size_t k = 0; k < sizeof USAGES / sizeof USAGES[0]; k++)
    if (strlen(USAGES[k].cmd) == word && strncmp(cmd, USAGES[k].cmd, word) == 0) {
      printf("usage: mlaref %s\n", USAGES[k].usage);
      break;
    }
  printf("exit status: 0 success, 1 a check failed, 2 bad input; `mlaref help` lists every "
         "command\n");
  return MLR_EXIT_OK;
}

/* the segment of usage u (its alternatives are " | " apart) that starts with subcommand sub, or
 * NULL */
static const char *segment_of(const char *u, const char *sub) {
  const size_t n = strlen(sub);
  for (const char *s = u; s; s = strstr(s, " | ")) {
    if (s != u) s += 3;
    if (!strncmp(s, sub, n) && (s[n] == ' ' || !s[n])) return s;
  }
  return NULL;
}

/* cmd's part of its usage into *n characters from the pointer returned ("mlaref help" for an
 * unknown command) */
static const char *usage_of(const char *cmd, int *n) {
  const size_t word = strcspn(cmd, " ");
  for (size_t k = 0; k < sizeof USAGES / sizeof USAGES[0]; k++) {
    if (strlen(USAGES[k].cmd) != word || strncmp(cmd, USAGES[k].cmd, word) != 0) continue;
    const char *u = USAGES[k].usage, *p = cmd[word] ? segment_of(u, cmd) : NULL;
    if (!p) { /* a one-word command (or a subcommand with no segment): the whole usage */
      *n = (int)strlen(u);
      return u;
    }
    const char *end = strstr(p, " | ");
    *n = end ? (int)(end - p) : (int)strlen(p);
    return p;
  }
  *n = (int)strlen("mlaref help");
  return "mlaref help";
}

int mlr_cli_usage_fail(const char *cmd) {
  int n;
  const char *u = usage_of(cmd, &n);
  return mlr_cli_usage_error(cmd, "usage: %.*s", n, u);
}

int mlr_cli_missing(const char *cmd, const char *option) {
  int n;
  const char *u = usage_of(cmd, &n);
  return mlr_cli_usage_error(cmd, "missing %s (usage: %.*s)", option, n, u);
}

int mlr_cli_unknown_option(const char *cmd, const char *option, const char *valid) {
  /* options are read before any work and any output, so there is nothing to undo here */
  if (strcmp(option, "--help") == 0 || strcmp(option, "-h") == 0) exit(mlr_cli_help(cmd));
  return mlr_cli_usage_error(cmd, "unknown option '%s' (valid: %s)", option, valid);
}

/* the nearest part of dir's path that exists (dir itself, or a parent) into buf */
static void existing_part(const char *dir, char *buf, size_t n) {
  snprintf(buf, n, "%s", dir);
  struct stat sb;
  for (;;) {
    if (stat(buf, &sb) == 0) return;
    char *slash = strrchr(buf, '/');
    while (slash && slash > buf && slash[1] == 0) { /* a trailing slash: the one before it */
      *slash = 0;
      slash = strrchr(buf, '/');
    }
    if (!slash) {
      snprintf(buf, n, ".");
      return;
    }
    if (slash == buf)
      slash[1] = 0; /* "/x": the root */
    else
      *slash = 0;
  }
}

int mlr_cli_out_dir_check(const char *cmd, const char *opt, const char *dir) {
  char at[4096];
  struct stat sb;
  existing_part(dir, at, sizeof at);
  if (stat(at, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    if (strcmp(at, dir) == 0)
      return mlr_cli_usage_error(cmd, "%s '%s' is a file, not a folder", opt, dir);
    return mlr_cli_usage_error(cmd, "%s '%s': '%s' is a file, not a folder", opt, dir, at);
  }
  if (access(at, W_OK | X_OK) != 0)
    return mlr_cli_usage_error(cmd, "%s '%s': the folder '%s' is not writable", opt, dir, at);
  return MLR_EXIT_OK;
}

int mlr_cli_out_file_check(const char *cmd, const char *path) {
  mlr_error err = {{0}};
  if (mlr_out_name_check(path, &err) != MLR_OK || mlr_out_dir_check(path, &err) != MLR_OK)
    return mlr_cli_usage_error(cmd, "%s", err.msg);
  return MLR_EXIT_OK;
}

int mlr_cli_make_dir(const char *cmd, const char *opt, const char *dir) {
  int rc = mlr_cli_out_dir_check(cmd, opt, dir);
  if (rc != MLR_EXIT_OK) return rc;
  char p[4096];
  snprintf(p, sizeof p, "%s", dir);
  for (char *s = p + 1;; s++) { /* each parent, then dir itself: mkdir -p */
    if (*s != '/' && *s != 0) continue;
    const char keep = *s;
    *s = 0;
    struct stat sb;
    if (mkdir(p, 0777) != 0 && (errno != EEXIST || stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)))
      return mlr_cli_usage_error(cmd, "%s '%s': cannot make the folder '%s': %s", opt, dir, p,
                                 strerror(errno == EEXIST ? ENOTDIR : errno));
    *s = keep;
    if (!keep) break;
  }
  return MLR_EXIT_OK;
}

int mlr_cli_opt(int argc, char **argv, int *i, const char *name, const char **value) {
  const char *a = argv[*i];
  size_t len = strlen(name);
  if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, name, len) != 0) return 0;
  if (a[2 + len] == '=') {
    *value = a + 3 + len;
    return 1;
  }
  if (a[2 + len] != '\0') return 0;
  if (*i + 1 >= argc) return -1;
  *value = argv[++*i];
  return 1;
}

int mlr_cli_parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s || *s == '-') return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || *end) return -1;
  *out = v;
  return 0;
}

int mlr_cli_parse_double(const char *s, double *out) {
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  double v = strtod(s, &end); /* accepts decimal and hex floats, inf, nan */
  if (*end || (errno == ERANGE && v != 0.0 && (v == HUGE_VAL || v == -HUGE_VAL))) return -1;
  *out = v;
  return 0;
}

int mlr_cli_parse_tolerance(const char *cmd, const char *v, double *rtol, double *atol) {
  char *end = NULL;
  *rtol = v ? strtod(v, &end) : -1;
  int ok = v && *end == ',' && *rtol >= 0;
  if (ok) {
    *atol = strtod(end + 1, &end);
    ok = !*end && *atol >= 0 && *rtol + *atol > 0 && isfinite(*rtol + *atol);
  }
  if (!ok)
    return mlr_cli_usage_error(
        cmd, "--tolerance '%s' is not RTOL,ATOL (two numbers >= 0, not both 0)", v ? v : "");
  return MLR_EXIT_OK;
}

uint64_t mlr_cli_available_memory(void) {
  const long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : UINT64_MAX;
}

/* --max-memory, once per process (one command runs per process); 0: not given */
static uint64_t max_memory;

int mlr_cli_max_memory_opt(const char *cmd, int argc, char **argv, int *i, int *rc) {
  const char *v;
  const int m = mlr_cli_opt(argc, argv, i, "max-memory", &v);
  if (m == 0) return 0;
  double gb;
  /* 1e6 GB: past any machine, and small enough that gb * 1e9 converts to uint64_t exactly enough */
  if (m < 0 || mlr_cli_parse_double(v, &gb) || !(gb > 0) || gb > 1e6)
    *rc = mlr_cli_usage_error(cmd, "--max-memory must be a number of GB in (0, 1e6]");
  else
    max_memory = (uint64_t)(gb * 1e9);
  return 1;
}

uint64_t mlr_cli_memory_limit(void) {
  const uint64_t avail = mlr_cli_available_memory();
  return max_memory && max_memory < avail ? max_memory : avail;
}

int mlr_cli_memory_fits(const char *cmd, double need, const char *fmt, ...) {
  const uint64_t limit = mlr_cli_memory_limit();
  if (!(need > (double)limit)) return MLR_EXIT_OK;
  char what[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (max_memory && max_memory == limit)
    return mlr_cli_usage_error(
        cmd, "%s needs %.3g GB of memory, more than the %.3g GB allowed (--max-memory)", what,
        need / 1e9, (double)limit / 1e9);
  return mlr_cli_usage_error(cmd, "%s needs %.3g GB of memory, more than the %.3g GB available",
                             what, need / 1e9, (double)limit / 1e9);
}

int mlr_cli_file_fits(const char *cmd, const char *path, double *bytes) {
  struct stat sb;
  *bytes = 0;
  if (stat(path, &sb) != 0) return MLR_EXIT_OK; /* the reader names a missing file */
  *bytes = (double)sb.st_size;
  return mlr_cli_memory_fits(cmd, (double)sb.st_size, "%s (an inputs file, read whole)", path);
}

double mlr_cli_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int mlr_cli_str(const char *cmd, int argc, char **argv, int *i, const char *name, const char *what,
                const char **dst, int *rc) {
  const char *v;
  const int m = mlr_cli_opt(argc, argv, i, name, &v);
  if (m < 0)
    *rc = mlr_cli_usage_error(cmd, "--%s needs %s", name, what);
  else if (m > 0)
    *dst = v;
  return m != 0;
}

int mlr_cli_list(const char *cmd, int argc, char **argv, int *i, const char *name, const char *what,
                 const char **list, int *n, int max, int *rc) {
  const char *v;
  const int m = mlr_cli_opt(argc, argv, i, name, &v);
  if (m < 0 || (m > 0 && *n == max))
    *rc = mlr_cli_usage_error(cmd, "--%s needs %s (at most %d)", name, what, max);
  else if (m > 0)
    list[(*n)++] = v;
  return m != 0;
}

int mlr_cli_threads_opt(const char *cmd, int argc, char **argv, int *i, int *threads, int *rc) {
  const char *v;
  const int m = mlr_cli_opt(argc, argv, i, "threads", &v);
  if (m == 0) return 0;
  uint64_t n;
  if (m < 0 || mlr_cli_parse_u64(v, &n) || n < 1 || n > 1024)
    *rc = mlr_cli_usage_error(cmd, "--threads '%s': an integer in 1..1024", m < 0 ? "" : v);
  else
    *threads = (int)n;
  return 1;
}

int mlr_cli_count(const char *cmd, int argc, char **argv, int *i, const char *name, uint64_t lo,
                  uint64_t hi, uint64_t *out, int *rc) {
  const char *v;
  const int m = mlr_cli_opt(argc, argv, i, name, &v);
  if (m == 0) return 0;
  if (m < 0 || mlr_cli_parse_u64(v, out) || *out < lo || *out > hi)
    *rc = mlr_cli_usage_error(cmd, "--%s: an integer in %llu..%llu", name, (unsigned long long)lo,
                              (unsigned long long)hi);
  return 1;
}

void mlr_cli_cpu_model(char *buf, size_t n) {
  snprintf(buf, n, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "model name", 10) == 0) {
      const char *c = strchr(line, ':');
      if (c) {
        snprintf(buf, n, "%s", c + 2);
        buf[strcspn(buf, "\n")] = 0;
      }
      break;
    }
  fclose(f);
}
