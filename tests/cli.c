/* End-to-end tests of the mlaref command: outputs, exit codes, one-line errors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run "mlaref ARGS", capture stdout and stderr (separately), return the exit status. */
static int run(const char *args, char **out, char **err) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s %s >/tmp/mlr_cli_out.$PPID 2>/tmp/mlr_cli_err.$PPID", MLAREF_BIN, args);
  const int st = system(cmd);
  char path[64];
  const char *kinds[2] = {"out", "err"};
  char **dst[2] = {out, err};
  for (int i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "/tmp/mlr_cli_%s.%d", kinds[i], (int)getpid());
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "no output file %s", path);
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *dst[i] = calloc((size_t)n + 1, 1);
    cr_assert_eq(fread(*dst[i], 1, (size_t)n, f), (size_t)n);
    fclose(f);
    remove(path);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

Test(cli, main_job_passes) {
  char *o, *e;
  cr_assert_eq(run("", &o, &e), 0, "stderr: %s", e);
  cr_assert(strstr(o, " 0 failed"), "%s", o);
  cr_assert(strstr(o, "e4m3fnuz"));
  free(o); free(e);
}

Test(cli, boundaries_e4m3) {
  char *o, *e;
  cr_assert_eq(run("formats boundaries --format e4m3 --overflow sat", &o, &e), 0);
  cr_assert_eq(strncmp(o, "0x00000000 0x00\n0x3A800001 0x01\n", 32), 0, "%.64s", o);
  cr_assert_eq(count_lines(o), 256);
  free(o); free(e);
  cr_assert_eq(run("formats boundaries --format=e4m3 --overflow=nonsat", &o, &e), 0);
  cr_assert(strstr(o, "\n0x43E80001 0x7F\n"), "nonsat: above 464 is NaN"); /* 464 = 0x43E80000 */
  free(o); free(e);
  cr_assert_eq(run("formats boundaries --format e4m3 --overflow legacy", &o, &e), 0);
  cr_assert(strstr(o, "\n0x43E00001 0x7F\n"), "legacy: above 448 is NaN"); /* 448 = 0x43E00000 */
  free(o); free(e);
  cr_assert_eq(run("formats boundaries --format fp16 --overflow nonsat", &o, &e), 0);
  cr_assert(strstr(o, "\n0x477FF000 0x7C00\n"), "65520 rounds to Inf"); /* 65520 = 0x477FF000 */
  free(o); free(e);
}

/* Each bad input: exit 2 and exactly one line on stderr that says what is valid. */
static void bad(const char *args, const char *must_contain) {
  char *o, *e;
  cr_assert_eq(run(args, &o, &e), 2, "'%s' should exit 2; stderr: %s", args, e);
  cr_assert_eq(count_lines(e), 1, "'%s': one line expected, got: %s", args, e);
  cr_assert(strstr(e, must_contain), "'%s': '%s' not in: %s", args, must_contain, e);
  cr_assert_str_empty(o, "'%s' printed on stdout: %s", args, o);
  free(o); free(e);
}

Test(cli, bad_input_exits_2_with_one_line) {
  bad("formats boundaries --format e4m4 --overflow sat", "valid: e4m3|e4m3fnuz|e5m2|e5m2fnuz|bf16|fp16");
  bad("formats boundaries --overflow sat", "missing --format");
  bad("formats boundaries --format e4m3 --overflow clamp", "valid: sat|nonsat|legacy");
  bad("formats boundaries --format e4m3 --rounding sr", "valid: rne|rtz");
  bad("formats boundaries --format e4m3 --bogus 1", "unknown option '--bogus'");
  bad("formats boundaries --format", "--format needs a value");
  bad("formats frobnicate", "valid: info|boundaries|encode|decode");
  bad("frobnicate", "valid: selfcheck|formats|gen|suite|inputs|bench|version|help");
  bad("formats decode --format e4m3 0x100", "0..0xFF");
  bad("formats encode --format e4m3 abc", "is not a number");
  bad("bench formats --n 12", "--n must be");
  bad("bench nothing", "valid: formats");
  bad("selfcheck extra", "takes none");
}

Test(cli, encode_decode) {
  char *o, *e;
  cr_assert_eq(run("formats encode --format e4m3 --overflow nonsat 464 464.0001 -0x1p-10", &o, &e), 0);
  cr_assert(strstr(o, "-> 0x7E normal"), "%s", o);
  cr_assert(strstr(o, "-> 0x7F nan"), "%s", o);
  cr_assert(strstr(o, "-> 0x80 zero"), "%s", o);
  free(o); free(e);
  cr_assert_eq(run("formats decode --format e4m3fnuz 0x80 0x7f 1", &o, &e), 0);
  cr_assert(strstr(o, "0x80 nan"));
  cr_assert(strstr(o, "0x7F normal 0x1.ep+7 (240)"), "%s", o);
  cr_assert(strstr(o, "0x01 subnormal 0x1p-10"), "%s", o);
  free(o); free(e);
}
