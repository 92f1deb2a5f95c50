/* The report's user kernels (reports/kernel.c, `mlaref report --kernel`), end to end with the
 * kernels of tests/kernels: a correct one (the model), wrong ones, one that fails, hangs, writes
 * the wrong shape, nothing, or cannot be run, one that skips cells (exit status 77); each cell's
 * verdict and reason, the report going on, the exit codes, summary.json against its schema, a
 * baseline turning a fix undone into a regression, shards merged as one run, and the folder of the
 * kernels' files removed. The callback kernels are tests/python/test_harness.py's. */
#define _GNU_SOURCE /* asprintf */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define K MLAREF_SOURCE_DIR "/tests/kernels/"
#define GOOD(name, recipe)                                                                         \
  " --kernel " name "='" K "good.sh " MLAREF_BIN " " recipe                                        \
  " {inputs} {out}' --kernel-recipe " name "=" recipe
#define WRONG(name, mode)                                                                          \
  " --kernel " name "='" K "wrong.py " mode " " MLAREF_BIN " fp32-seq {inputs} {out}'"             \
  " --kernel-recipe " name "=fp32-seq"

/* "mlaref ARGS" with TMPDIR=mlr_kern/tmp, stdout into *out (stderr into mlr_kern/err); the exit
 * status */
static int run(const char *args, char **out) {
  char *cmd = NULL;
  cr_assert(asprintf(&cmd, "TMPDIR=$PWD/mlr_kern/tmp %s %s >mlr_kern/out 2>mlr_kern/err",
                     MLAREF_BIN, args) > 0);
  const int st = system(cmd);
  free(cmd);
  FILE *f = fopen("mlr_kern/out", "rb");
  cr_assert_not_null(f);
  fseek(f, 0, SEEK_END);
  const long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *out = calloc((size_t)n + 1, 1);
  cr_assert_eq(fread(*out, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* a python3 program over the report in mlr_kern/DIR (d: its summary.json, s: the schema) */
static void py(const char *dir, const char *prog) {
  char *cmd = NULL;
  cr_assert(
      asprintf(
          &cmd,
          "for py in python3 /usr/bin/python3; do $py -c 'import jsonschema' "
          "2>/dev/null && break; done; $py -c \"import json, jsonschema; "
          "d = json.load(open('mlr_kern/%s/summary.json')); s = json.load(open('" MLAREF_SOURCE_DIR
          "/reports/summary.schema.json')); "
          "jsonschema.validate(d, s); %s\"",
          dir, prog) > 0);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  free(cmd);
}

static void fresh(void) {
  cr_assert_eq(system("rm -rf mlr_kern && mkdir -p mlr_kern/tmp mlr_kern/a mlr_kern/b "
                      "mlr_kern/s1 mlr_kern/s2 mlr_kern/m"),
               0);
}

/* every kind of kernel on two cells: each verdict and reason, the report goes on to the end */
Test(kernel, verdicts_and_reasons, .timeout = 120) {
  fresh();
  char *o;
  const int rc = run(
      "report --suite edge --cells bs1_kv1,bs3_kv1000 --gpu off --recipe none --out "
      "mlr_kern/a" GOOD("good", "fp32-seq") WRONG("scaled", "scale") WRONG("shape", "shape") WRONG(
          "nan",
          "nan") " --kernel exit3='" K "exit3.sh {inputs} {out}' --kernel-recipe exit3=fp32-seq"
                 " --kernel slow='" K "slow.sh $PWD/mlr_kern/pids # {inputs} {out}'"
                 " --kernel-recipe slow=fp32-seq --kernel-timeout slow=2"
                 " --kernel nothing='" K
                 "nothing.sh {inputs} {out}' --kernel-recipe nothing=fp32-seq"
                 " --kernel noexec='" K
                 "not_executable.sh {inputs} {out}' --kernel-recipe noexec=fp32-seq"
                 " --kernel echo='" K "echo.sh {q_scale} {q_policy} {cell} {inputs} {out}'"
                 " --kernel-recipe echo=aiter-a8w8-ps --kernel-policy echo=static:absmax=6.0000001",
      &o);
  cr_assert_eq(rc, 1, "%s", o);
  cr_assert(strstr(o, "report: suite edge: 18 cells, 16 failed, 0 regressions"), "%s", o);
  const char *want[] = {
      "kernel fail: kernel scaled, cell bs1_kv1: rule fa3 FAIL: max|out - truth| = ",
      "; reproduce batch 0 token 0 head ",
      "kernel error: kernel shape, cell bs3_kv1000: {out}: tensor 'o' is [1, 1, 512]; it must be "
      "[3, 16, 512] for these inputs",
      "kernel error: kernel nan, cell bs1_kv1: 1 non-finite values in o where the model has none",
      "kernel error: kernel exit3, cell bs1_kv1: exited with status 3: my_kernel: no device found",
      "kernel error: kernel slow, cell bs3_kv1000: timed out after 2 s",
      "kernel error: kernel nothing, cell bs1_kv1: wrote no output (exited 0, nothing at {out})",
      "kernel error: kernel noexec, cell bs1_kv1: command not found or not executable (sh exit "
      "126)",
      /* {q_scale}: 6.0000001 / 448 as binary32 (that of 6); {q_policy} to 17 digits; {cell};
       * {inputs} in the run's folder */
      "kernel error: kernel echo, cell bs3_kv1000: exited with status 5: q_scale 0.0133928573 "
      "q_policy static:absmax=6.0000001000000003 cell bs3_kv1000 inputs "
      "bs3_kv1000.inputs.safetensors"};
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
    cr_assert(strstr(o, want[k]), "no '%s' in: %s", want[k], o);
  free(o);
  py("a", "c = d['cells']; v = {(x['shape'], x['kernel']['name']): x for x in c}; "
          "assert len(c) == 18 and all(x['applicable'] for x in c); "
          "assert [k['name'] for k in d['kernels']] == ['good', 'scaled', 'shape', 'nan', "
          "'exit3', 'slow', 'nothing', 'noexec', 'echo']; "
          "assert d['kernels'][8]['policy'] == 'static:absmax=6.0000001' and 'command' not in "
          "d['kernels'][0]; "
          "g = v[('bs1_kv1', 'good')]; assert g['pass'] and g['kernel']['verdict'] == 'pass' and "
          "[(r['tensor'], r['rule'], r['verdict']) for r in g['kernel']['rules']] == "
          "[('o', 'fa3', 'pass'), ('o', 'structure', 'pass'), ('lse', 'fa3', 'pass'), "
          "('lse', 'structure', 'pass')] and g['utilisation']['max'] < 1; "
          "b = v[('bs3_kv1000', 'scaled')]; r = b['kernel']['rules'][0]; "
          "assert b['kernel']['verdict'] == 'fail' and r['verdict'] == 'FAIL' and "
          "r['measured'] > r['limit'] and len(b['o_sha256']) == 64; "
          "assert all(v[(s, n)]['kernel']['verdict'] == 'error' and 'o_sha256' not in "
          "v[(s, n)] for s in ('bs1_kv1', 'bs3_kv1000') for n in ('shape', 'nan', 'exit3', "
          "'slow', 'nothing', 'noexec', 'echo')); "
          "assert d['failures'] == 16 and d['decomposition'] == []");
  /* the process group killed: the hanging kernel's child is gone; the run's folder removed */
  /* (killed, it may stay a zombie a moment, until init reaps it) */
  cr_assert_eq(system("test $(wc -l <mlr_kern/pids) -eq 2 || exit 1; for i in $(seq 50); do "
                      "alive=0; for p in $(cat mlr_kern/pids); do kill -0 $p 2>/dev/null && "
                      "alive=1; done; [ $alive = 0 ] && exit 0; sleep 0.1; done; exit 1"),
               0, "a hanging kernel's child outlived its timeout");
  cr_assert_eq(system("test -z \"$(ls mlr_kern/tmp)\""), 0, "the kernels' folder was left");
  cr_assert_eq(
      system("grep -q '<h2>Kernels</h2>' mlr_kern/a/index.html && grep -q '^## Kernels: "
             "18 cells, 2 failed, 14 errors' mlr_kern/a/summary.md && grep -q '^## "
             "Failures: 16 (16 in the kernels. cells, below)$' mlr_kern/a/summary.md && grep -q "
             "'Failures: 16 (16 in the kernels. cells); 0 skipped' "
             "mlr_kern/a/index.html"),
      0);
}

/* a baseline with the correct kernel: the same kernel name broken is a regression (exit 1);
 * shards of a run with a kernel merge into the same cells as the whole run */
Test(kernel, baseline_regression_and_shards, .timeout = 180) {
  fresh();
  char *o;
  const char *base = "report --suite edge --quick --gpu off --recipe fp32-seq --policy dynamic";
  char *args = NULL;
  cr_assert(asprintf(&args, "%s --out mlr_kern/a" GOOD("k", "fp32-seq"), base) > 0);
  cr_assert_eq(run(args, &o), 0, "%s", o);
  cr_assert(strstr(o, "12 cells, 0 failed, 0 regressions"), "%s", o);
  free(o);
  free(args);
  cr_assert(asprintf(&args,
                     "%s --out mlr_kern/b --baseline mlr_kern/a/summary.json" WRONG("k", "scale"),
                     base) > 0);
  cr_assert_eq(run(args, &o), 1, "%s", o);
  cr_assert(strstr(o, "regression: bs1_kv1 / kernel k: passed in the baseline, fails now (fail: "
                      "kernel k, cell bs1_kv1: rule fa3 FAIL"),
            "%s", o);
  /* a fail and a utilisation up on each cell but bs1_kv0, whose o (no KV) is 0 */
  cr_assert(strstr(o, "5 failed, 10 regressions"), "%s", o);
  free(o);
  free(args);
  py("b", "assert len(d['regressions']) == 10 and d['baseline'] == 'mlr_kern/a/summary.json'");
  for (int i = 1; i <= 2; i++) {
    cr_assert(asprintf(&args, "%s --out mlr_kern/s%d --shard %d/2" GOOD("k", "fp32-seq"), base, i,
                       i) > 0);
    cr_assert_eq(run(args, &o), 0, "%s", o);
    free(o);
    free(args);
  }
  cr_assert_eq(run("report merge --out mlr_kern/m mlr_kern/s2 mlr_kern/s1", &o), 0, "%s", o);
  cr_assert(strstr(o, "12 cells, 0 failed, 0 regressions"), "%s", o);
  free(o);
  /* the same cells as the whole run but the wall times */
  py("m", "a = json.load(open('mlr_kern/a/summary.json')); "
          "strip = lambda c: [dict(x, seconds=0, kernel=dict(x['kernel'], seconds=0)) if 'kernel' "
          "in x else dict(x, seconds=0) for x in c]; assert strip(a['cells']) == strip(d['cells']) "
          "and a['kernels'] == d['kernels']");
  /* a shard of another run's kernels is refused */
  cr_assert(asprintf(&args, "%s --out mlr_kern/s2 --shard 2/2" GOOD("k2", "fp32-seq"), base) > 0);
  cr_assert_eq(run(args, &o), 0, "%s", o);
  free(o);
  free(args);
  cr_assert_eq(run("report merge --out mlr_kern/m mlr_kern/s2 mlr_kern/s1", &o), 2);
  free(o);
  cr_assert_eq(system("grep -q 'not of the same run as the first' mlr_kern/err"), 0);
  cr_assert_eq(system("rm -rf mlr_kern"), 0);
}

/* a kernel that exits with status 77 skips the cell with its last stderr line: neither passed nor
 * failed (exit 0), counted apart in every file, and so in shards merged */
Test(kernel, exit_77_skips, .timeout = 120) {
  fresh();
  char *o;
  const char *skip = " --kernel skip='" K "skip.sh " MLAREF_BIN " fp32-seq {cell} {inputs} {out}'"
                     " --kernel-recipe skip=fp32-seq";
  char *args = NULL;
  cr_assert(asprintf(&args,
                     "report --suite edge --quick --gpu off --recipe none --out "
                     "mlr_kern/a%s",
                     skip) > 0);
  cr_assert_eq(run(args, &o), 0, "%s", o);
  free(args);
  cr_assert(strstr(o, "6 cells, 0 failed, 0 regressions"), "%s", o);
  cr_assert(strstr(o, "kernels: 6 cells, 5 passed or n/a, 1 skipped"), "%s", o);
  cr_assert(strstr(o, "kernel skipped: kernel skip, cell bs3_kv1000: skip.sh: no kernel for 3 "
                      "batches\n"),
            "%s", o);
  free(o);
  py("a", "c = [x for x in d['cells'] if x['kernel']['verdict'] == 'skipped']; "
          "assert d['failures'] == 0 and d['skipped'] == 1 and len(c) == 1; "
          "assert c[0]['shape'] == 'bs3_kv1000' and not c[0]['pass'] and 'o_sha256' not in c[0]");
  cr_assert_eq(system("grep -q '^## Kernels: 6 cells, 0 failed, 0 errors, 1 skipped' "
                      "mlr_kern/a/summary.md && grep -q '<td>skipped</td>' mlr_kern/a/index.html"),
               0);
  for (int i = 1; i <= 2; i++) {
    cr_assert(asprintf(&args,
                       "report --suite edge --quick --gpu off --recipe none --out "
                       "mlr_kern/s%d --shard %d/2%s",
                       i, i, skip) > 0);
    cr_assert_eq(run(args, &o), 0, "%s", o);
    free(o);
    free(args);
  }
  cr_assert_eq(run("report merge --out mlr_kern/m mlr_kern/s1 mlr_kern/s2", &o), 0, "%s", o);
  free(o);
  py("m", "assert d['failures'] == 0 and d['skipped'] == 1");
  cr_assert_eq(system("rm -rf mlr_kern"), 0);
}

/* --kernel-inputs NAME=npy: {inputs} is a folder of .npy files with metadata.json, which every
 * command reads like the .safetensors file (the model from it is the model from the file) */
Test(kernel, npy_inputs, .timeout = 120) {
  fresh();
  char *o;
  const int rc = run("report --suite edge --quick --gpu off --recipe none --out mlr_kern/a"
                     " --kernel folder='test -d {inputs} && test -f {inputs}/metadata.json && " K
                     "good.sh " MLAREF_BIN " fp32-seq {inputs} {out}' --kernel-recipe "
                     "folder=fp32-seq --kernel-inputs folder=npy --kernel-rule folder=exact",
                     &o);
  cr_assert_eq(rc, 0, "%s", o);
  cr_assert(strstr(o, "kernels: 6 cells, 6 passed"), "%s", o);
  free(o);
  cr_assert_eq(run("report --suite edge --quick --gpu off --recipe none --out mlr_kern/b"
                   " --kernel f='" K "good.sh {inputs} {out}' --kernel-recipe f=fp32-seq"
                   " --kernel-inputs f=csv",
                   &o),
               2);
  free(o);
  cr_assert_eq(system("grep -q 'kernel-inputs f=csv: the form is safetensors or npy' "
                      "mlr_kern/err"),
               0);
  cr_assert_eq(system("rm -rf mlr_kern"), 0);
}
