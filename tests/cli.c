/* End-to-end tests of the mlaref command: outputs, exit codes, one-line errors. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run "mlaref ARGS", capture stdout and stderr (separately), return the exit status. */
static int run(const char *args, char **out, char **err) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s %s >mlr_cli_out.$PPID 2>mlr_cli_err.$PPID", MLAREF_BIN, args);
  const int st = system(cmd);
  char path[64];
  const char *kinds[2] = {"out", "err"};
  char **dst[2] = {out, err};
  for (int i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "mlr_cli_%s.%d", kinds[i], (int)getpid());
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

Test(cli, main_job_passes, .timeout = 120) {
  char *o, *e;
  cr_assert_eq(run("", &o, &e), 0, "stderr: %s", e);
  cr_assert(strstr(o, " 0 failed"), "%s", o);
  cr_assert(strstr(o, "e4m3fnuz"));
  /* it ends with a quick report and says where its page is: the page is there */
  const char *at = strstr(o, "mlaref: the quick report's page: ");
  /* 6 shapes x (14 recipes + 2 on the policy axis); where a GPU is, the fast kernel's recipes too
   */
  cr_assert(at && (strstr(o, "report: suite edge (quick): 96 cells, 0 failed") ||
                   (strstr(o, "GPU leg: NVIDIA") && strstr(o, " cells, 0 failed"))),
            "%s", o);
  char page[1024], cmd[2200];
  cr_assert_eq(sscanf(at, "mlaref: the quick report's page: %1023s", page), 1);
  snprintf(cmd, sizeof cmd, "grep -q '<svg' %s && rm -rf $(dirname %s)", page, page);
  cr_assert_eq(system(cmd), 0, "%s", page);
  free(o);
  free(e);
}

Test(cli, boundaries_e4m3) {
  char *o, *e;
  cr_assert_eq(run("formats boundaries --format e4m3 --overflow sat", &o, &e), 0);
  cr_assert_eq(strncmp(o, "0x00000000 0x00\n0x3A800001 0x01\n", 32), 0, "%.64s", o);
  cr_assert_eq(count_lines(o), 256);
  free(o);
  free(e);
  cr_assert_eq(run("formats boundaries --format=e4m3 --overflow=nonsat", &o, &e), 0);
  cr_assert(strstr(o, "\n0x43E80001 0x7F\n"), "nonsat: above 464 is NaN"); /* 464 = 0x43E80000 */
  free(o);
  free(e);
  cr_assert_eq(run("formats boundaries --format e4m3 --overflow legacy", &o, &e), 0);
  cr_assert(strstr(o, "\n0x43E00001 0x7F\n"), "legacy: above 448 is NaN"); /* 448 = 0x43E00000 */
  free(o);
  free(e);
  cr_assert_eq(run("formats boundaries --format fp16 --overflow nonsat", &o, &e), 0);
  cr_assert(strstr(o, "\n0x477FF000 0x7C00\n"), "65520 rounds to Inf"); /* 65520 = 0x477FF000 */
  free(o);
  free(e);
}

/* Each bad input: exit 2 and exactly one line on stderr that says what is valid. */
static void bad(const char *args, const char *must_contain) {
  char *o, *e;
  cr_assert_eq(run(args, &o, &e), 2, "'%s' should exit 2; stderr: %s", args, e);
  cr_assert_eq(count_lines(e), 1, "'%s': one line expected, got: %s", args, e);
  cr_assert(strstr(e, must_contain), "'%s': '%s' not in: %s", args, must_contain, e);
  cr_assert_str_empty(o, "'%s' printed on stdout: %s", args, o);
  free(o);
  free(e);
}

/* matrix-unit dots: run on fitting inputs; a unit's operand format, and its fp8 flavour, checked */
Test(cli, matrix_unit_dots) {
  char *o, *e;
  cr_assert_eq(run("gen --shape bs=1,kv=40,seed=3 --out mlr_cli_mma.safetensors", &o, &e), 0, "%s",
               e);
  free(o);
  free(e);
  cr_assert_eq(run("run --recipe aiter-a8w8-ps --set qk.dot=mma:sm90-e4m3 --set "
                   "pv.dot=mma:sm90-e4m3 --inputs mlr_cli_mma.safetensors "
                   "--out mlr_cli_mma_o.safetensors",
                   &o, &e),
               0, "%s", e);
  free(o);
  free(e);
  bad("run --recipe aiter-a8w8-ps --set q.format=e4m3fnuz --set qk.dot=mma:cdna3-fp8 --inputs "
      "mlr_cli_mma.safetensors "
      "--out mlr_cli_never.safetensors",
      "qk.dot = mma:cdna3-fp8 multiplies e4m3fnuz codes, but the inputs' kv is e4m3");
  bad("recipe show fp32-seq --set qk.dot=mma:sm90-bf16",
      "qk.dot = mma:sm90-bf16 multiplies bf16 operands: it needs qk.operand = bf16");
  bad("recipe show aiter-a8w8-ps --set pv.dot=mma:sm90-f16",
      "pv.dot = mma:sm90-f16 multiplies fp16 operands: it needs pv.operand = fp16");
  remove("mlr_cli_mma.safetensors");
  remove("mlr_cli_mma_o.safetensors");
}

/* `recipe show NAME` prints every line of want ("\n"-separated); then the CPU model runs the
 * recipe on a generated shape and `check --rule exact --rule budget` passes its output */
static void fast_recipe_runs(const char *name, const char *want, const char *shape) {
  char *o, *e, cmd[512];
  snprintf(cmd, sizeof cmd, "recipe show %s", name);
  cr_assert_eq(run(cmd, &o, &e), 0, "%s", e);
  for (const char *w = want; *w; w += strcspn(w, "\n") + (w[strcspn(w, "\n")] != 0)) {
    char line[128];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(w, "\n"), w);
    cr_assert(strstr(o, line), "%s: no '%s' in %s", name, line, o);
  }
  free(o);
  free(e);
  snprintf(cmd, sizeof cmd,
           MLAREF_BIN " gen --shape %s --out mlr_cli_fast_in.safetensors >/dev/null", shape);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  snprintf(
      cmd, sizeof cmd,
      "run --recipe %s --inputs mlr_cli_fast_in.safetensors --out mlr_cli_fast_out.safetensors",
      name);
  cr_assert_eq(run(cmd, &o, &e), 0, "%s", e);
  free(o);
  free(e);
  snprintf(cmd, sizeof cmd,
           "check --inputs mlr_cli_fast_in.safetensors --output mlr_cli_fast_out.safetensors "
           "--recipe %s --rule exact --rule budget",
           name);
  cr_assert_eq(run(cmd, &o, &e), 0, "%s%s", o, e);
  free(o);
  free(e);
  remove("mlr_cli_fast_in.safetensors");
  remove("mlr_cli_fast_out.safetensors");
}

/* the fast GPU kernel's recipes: listed apart from the built-ins, shown, and run by the CPU model
 * (fp8 KV and, with blocks of 64 tokens, bf16 KV) */
Test(cli, fast_kernel_recipes) {
  char *o, *e;
  cr_assert_eq(run("recipe list", &o, &e), 0, "%s", e);
  const char *sep = strstr(o, "# the fast GPU kernel's recipes");
  cr_assert(sep && strstr(sep, "fast-a16w8") && strstr(sep, "fast-a8w8") &&
                strstr(sep, "fast-a16w16") && strstr(sep, "fast-a8w16") &&
                strstr(sep, "fast-wgmma-a8w8") && strstr(sep, "fast-wgmma-fp8") &&
                strstr(sep, "fast-mi300-a16w8") && strstr(sep, "fast-mi300-a8w8") &&
                !strstr(sep, "fp32-seq"),
            "%s", o);
  free(o);
  free(e);
  fast_recipe_runs(
      "fast-a8w8",
      "qk.dot = mma:sm90-f16\nq.scale = static\nsoftmax.block = 128\npartial.normalized = no",
      "bs=2,kv=300,q=2,seed=5");
  fast_recipe_runs("fast-a16w8", "q.format = bf16\nsoftmax.block = 128", "bs=2,kv=300,q=2,seed=5");
  /* the logits on wgmma's fp8 unit: Q's and K's e4m3 codes multiplied as they are */
  fast_recipe_runs("fast-wgmma-a8w8",
                   "qk.operand = fp8\nqk.dot = mma:sm90-e4m3\nq.format = e4m3\npv.dot = "
                   "mma:sm90-f16\nsoftmax.block = 128",
                   "bs=2,kv=300,q=2,seed=5");
  /* both products on it: e4m3 P times V's codes */
  fast_recipe_runs("fast-wgmma-fp8",
                   "p.format = e4m3\npv.operand = fp8\npv.dot = mma:sm90-e4m3\nqk.dot = "
                   "mma:sm90-e4m3\nsoftmax.block = 128",
                   "bs=2,kv=300,q=2,seed=5");
  fast_recipe_runs("fast-a8w16", "softmax.block = 64\nq.format = e4m3\npv.operand = fp16",
                   "bs=2,kv=300,q=2,fmt=bf16,seed=5");
  fast_recipe_runs("fast-a16w16", "softmax.block = 64\nq.format = bf16",
                   "bs=2,kv=300,q=2,fmt=bf16,seed=5");
  /* the AMD (MFMA) variant's: bf16 operands on the CDNA3 unit's model */
  fast_recipe_runs("fast-mi300-a8w8",
                   "qk.dot = mma:cdna3-bf16\nq.format = e4m3fnuz\nsoftmax.exp_unit = exact",
                   "bs=2,kv=300,q=2,fmt=e4m3fnuz,seed=5");
  fast_recipe_runs("fast-mi300-a16w8",
                   "p.format = bf16\nsoftmax.sum = seq\nsplit.cus = 304\npartial.normalized = yes",
                   "bs=2,kv=300,q=2,seed=5");
}

Test(cli, bad_input_exits_2_with_one_line) {
  bad("formats boundaries --format e4m4 --overflow sat",
      "valid: e4m3|e4m3fnuz|e5m2|e5m2fnuz|bf16|fp16");
  bad("formats boundaries --overflow sat", "missing --format");
  bad("formats boundaries --format e4m3 --overflow clamp", "valid: sat|nonsat|legacy");
  bad("formats boundaries --format e4m3 --rounding sr", "valid: rne|rtz");
  bad("formats boundaries --format e4m3 --bogus 1", "unknown option '--bogus'");
  bad("formats boundaries --format", "--format needs a value");
  bad("formats frobnicate", "valid: info|boundaries|encode|decode");
  bad("frobnicate", "valid: "
                    "selfcheck|formats|gen|suite|inputs|recipe|run|gpu|compare|check|golden|oracle|"
                    "budget|policy-check|report|discriminate|mma|bench|version|help");
  bad("gpu", "unknown subcommand '' (valid: run, info)");
  bad("gpu frob", "unknown subcommand 'frob' (valid: run, info)");
  bad("gpu info extra", "takes no options ('extra')");
  bad("gpu run --recipe fp32-seq --inputs x --out mlr_cli_never.safetensors",
      "usage: gpu run --kernel exact|fast [--variant");
  bad("gpu run --kernel frob --recipe fp32-seq --inputs x --out mlr_cli_never.safetensors",
      "--kernel 'frob' is not a GPU kernel (valid: exact, fast)");
  /* the fast kernel refuses a recipe it does not compute, before looking for a GPU */
  bad("gpu run --kernel fast --recipe fp32-seq --inputs x --out mlr_cli_never.safetensors",
      "recipe 'fp32-seq': the fast kernel computes kv.scale_at = folded only");
  bad("gpu run --kernel fast --recipe fast-a8w8 --set q.scale=per_head --inputs x --out "
      "mlr_cli_never.safetensors",
      "the fast kernel quantizes Q with one scale (q.scale = static or dynamic)");
  bad("gpu run --kernel fast --recipe fast-a16w8 --set softmax.block=32 --inputs x --out "
      "mlr_cli_never.safetensors",
      "the fast kernel computes softmax.block = 128 only");
  bad("gpu run --kernel fast --recipe fast-wgmma-a8w8 --set q.format=e4m3fnuz --inputs x --out "
      "mlr_cli_never.safetensors",
      "recipe fast-wgmma-a8w8: qk.dot = mma:sm90-e4m3 multiplies e4m3 Q: it needs q.format = e4m3");
  bad("gpu run --kernel fast --recipe fast-wgmma-a8w8 --set softmax.block=64 --inputs x --out "
      "mlr_cli_never.safetensors",
      "with qk.dot = mma:sm90-e4m3 the fast kernel computes softmax.block = 128 only (see `mlaref "
      "recipe show fast-wgmma-a8w8`)");
  /* a damaged digest manifest is named at its line and column, before any row runs */
  cr_assert_eq(
      system("printf '# manifest\\nedge\\tbs1_kv1\\tfp32-seq\\tabc\\n' > mlr_cli_badmanifest.tsv"),
      0);
  bad("golden --verify --digests mlr_cli_badmanifest.tsv",
      "mlr_cli_badmanifest.tsv:2: column 23: field recipe_sha256 has 3 characters (valid: 64 "
      "lowercase hex digits)");
  remove("mlr_cli_badmanifest.tsv");
  bad("bench gpu --reps 5", "--reps: an integer in 100..10000");
  bad("bench gpu --peers /nonexistent/peers.json",
      "--peers /nonexistent/peers.json: not a peers file");
  bad("bench gpu --frob", "unknown option '--frob' (valid: --shape --recipe --reps --peers --flush "
                          "--warmup --variant)");
  bad("bench gpu --warmup -5", "--warmup: milliseconds of untimed launches before each shape's "
                               "timed ones, an integer in 0..60000");
  bad("bench gpu --warmup 60001", "--warmup: milliseconds of untimed launches before each shape's "
                                  "timed ones, an integer in 0..60000");
  bad("bench gpu --warmup", "--warmup: milliseconds of untimed launches before each shape's timed "
                            "ones, an integer in 0..60000");
  bad("bench gpu --flush warm",
      "--flush: dirty (the seeds' way: a 256 MiB write) or clean (then a 256 MiB read)");
  bad("bench gpu --flush",
      "--flush: dirty (the seeds' way: a 256 MiB write) or clean (then a 256 MiB read)");
  bad("gpu run --kernel exact --recipe fp32-seq --inputs x --out mlr_cli_never.safetensors "
      "--partials",
      "--partials is an option of the CPU model");
  bad("gpu run --kernel exact --recipe fp32-seq --inputs x --out mlr_cli_never.safetensors "
      "--threads 2",
      "--threads is an option of the CPU model");
  bad("gpu run --kernel exact --recipe nope --inputs x --out mlr_cli_never.safetensors --bogus",
      "unknown option '--bogus' (valid: --kernel");
  bad("golden --verify --gpu --bogus", "unknown option '--bogus'");
  bad("formats decode --format e4m3 0x100", "0..0xFF");
  bad("formats encode --format e4m3 abc", "is not a number");
  bad("bench formats --n 12", "--n must be");
  bad("bench nothing", "valid: formats, emulate, oracle, gpu, gpu-exact, mma");
  bad("bench mma --dots 0", "--dots: an integer in 1..10000000");
  bad("bench mma --bogus", "unknown option '--bogus' (valid: --dots --reps)");
  bad("bench gpu-exact --reps 0", "--reps: an integer in 1..100");
  bad("bench emulate --recipe nope", "neither a built-in recipe");
  bad("bench emulate --threads 0", "--threads: an integer in 1..1024");
  bad("selfcheck extra", "takes none");
  bad("gen --shape bs=4 --out mlr_cli_never.safetensors", "needs bs= and kv=");
  bad("gen --out mlr_cli_never.safetensors", "give exactly one of --shape SPEC or --suite NAME");
  bad("gen --shape bs=1,kv=1", "missing --out");
  bad("gen --suite nope --out /tmp", "unknown suite 'nope' (valid: bench|test|edge|nightly|probe)");
  /* an output folder is made when missing; a path that is a file is bad input */
  cr_assert_eq(system("echo x > mlr_cli_a_file"), 0);
  bad("gen --suite edge --out mlr_cli_a_file", "--out 'mlr_cli_a_file' is a file, not a folder");
  bad("gen --suite edge --out mlr_cli_a_file/sub",
      "--out 'mlr_cli_a_file/sub': 'mlr_cli_a_file' is a file, not a folder");
  bad("gen --shape bs=256,kv=8192 --out mlr_cli_never.safetensors --max-memory 0.5",
      "more than the 0.5 GB allowed");
  bad("gen --shape bs=1,kv=1 --out mlr_cli_no_such_dir/x.safetensors", "its folder does not exist");
  bad("suite show nope", "unknown suite 'nope'");
  bad("suite", "usage: suite list | suite show NAME");
  bad("inputs check mlr_cli_no_such_file.safetensors", "cannot open");
  bad("inputs frob", "valid: check|pack|unpack");
  bad("inputs pack --out mlr_cli_never.safetensors q=x.npy:zz", "not NAME=FILE.npy:DTYPE");
  bad("recipe show nope", "neither a built-in recipe");
  bad("recipe show fp32-seq --set qk.dot=fma",
      "--set qk.dot = 'fma' is not one of seq|nope_rope|exact");
  bad("recipe show fp32-seq --set q.format=e4m3", "needs a scale policy");
  bad("recipe", "usage: recipe list | recipe show");
  bad("check --inputs x --recipe fp32-seq",
      "missing --output (usage: check --inputs IN --output KERNEL_OUT --recipe");
  bad("check --inputs x --output y", "missing --recipe");
  bad("check --inputs x --output y --recipe fp32-seq --truth fp64",
      "--truth 'fp64' is not one of dequantized|bf16");
  bad("check --inputs mlr_cli_no_such_file.safetensors --output y --recipe fp32-seq",
      "cannot open");
  bad("golden --suite nope --recipe all --out /tmp",
      "unknown suite 'nope' (valid: bench|test|edge|nightly|probe)");
  bad("golden --suite edge --recipe all", "usage: golden --suite NAME");
  bad("golden --suite edge --recipe all --out mlr_cli_a_file",
      "--out 'mlr_cli_a_file' is a file, not a folder");
  remove("mlr_cli_a_file");
  bad("golden --verify --digests mlr_cli_no_such_file.tsv", "cannot open the digest manifest");
  bad("oracle --inputs x", "usage: oracle --inputs IN --out OUT");
  bad("oracle --inputs x --out mlr_cli_never.safetensors --from fp32",
      "--from 'fp32' is not one of dequantized|bf16");
  bad("bench oracle --bogus", "unknown option '--bogus'");
  bad("run --recipe fp32-seq --inputs x.safetensors", "usage: run --recipe");
  bad("run --recipe nope --inputs x.safetensors --out mlr_cli_never.safetensors",
      "neither a built-in recipe");
  bad("run --recipe fp32-seq --set qk.dot=fma --inputs x --out mlr_cli_never.safetensors",
      "not one of seq|nope_rope|exact");
  bad("run --recipe fp32-seq --set qk.operand=fp8 --inputs x --out mlr_cli_never.safetensors",
      "needs an fp8 q.format");
  bad("run --recipe fp32-seq --inputs mlr_cli_no_such_file.safetensors --out "
      "mlr_cli_never.safetensors",
      "cannot open");
  bad("run --recipe fp32-seq --inputs x --out mlr_cli_never.safetensors --threads 0",
      "--threads '0': an integer in 1..1024");
  bad("run --recipe fp32-seq --bogus", "unknown option '--bogus'");
  bad("budget --recipe fp32-seq", "usage: budget --inputs IN | --shape SPEC --recipe");
  bad("budget --shape bs=1,kv=8 --inputs x --recipe fp32-seq",
      "usage: budget --inputs IN | --shape SPEC --recipe");
  bad("budget --shape bs=1,kv=8 --recipe nope", "neither a built-in recipe");
  bad("budget --shape bs=1 --recipe fp32-seq", "needs bs= and kv=");
  bad("budget --shape bs=1,kv=8 --recipe fp32-seq --policy static:absmax=4",
      "has bf16 Q, which has no scale");
  bad("budget --shape bs=1,kv=8 --recipe aiter-a8w8-ps --policy static:absmax=-1",
      "absmax must be a number > 0");
  bad("budget --shape bs=1,kv=8 --recipe aiter-a8w8-ps --policy fixed",
      "is not one of static:absmax=A (A > 0), dynamic, per_head, per_token");
  bad("budget --shape bs=1,kv=8 --recipe fp32-seq --sweep absmax",
      "has bf16 Q, which has no scale");
  bad("budget --shape bs=1,kv=8 --recipe aiter-a8w8-ps --sweep scale", "only absmax can be swept");
  bad("budget --shape bs=1,kv=8 --recipe fp32-seq --tolerance 0.1", "is not RTOL,ATOL");
  bad("budget --shape bs=1,kv=8 --recipe fp32-seq --tolerance 0,0", "is not RTOL,ATOL");
  bad("budget --shape bs=1,kv=8 --recipe aiter-a8w8-ps --sweep absmax --points 1",
      "--points needs a count from 2 to 64");
  bad("budget --shape bs=1,kv=8 --recipe fp32-seq --threads 0",
      "--threads '0': an integer in 1..1024");
  bad("budget --inputs mlr_cli_no_such_file.safetensors --recipe fp32-seq", "cannot open");
  bad("budget --shape bs=1,kv=8 --recipe fp32-seq --bogus", "unknown option '--bogus'");
  bad("budget --shape bs=1,kv=8 --recipe fp32-seq --truth fp64",
      "--truth 'fp64' is not one of bf16|dequantized");
  bad("check --inputs x --output y --recipe fp32-seq --rule budget:0", "is not one of");
  bad("budget --shape bs=1,kv=8 --recipe fp32-seq --out mlr_cli_no_such_dir/b.safetensors",
      "mlr_cli_no_such_dir/b.safetensors: its folder does not exist");
  bad("budget --shape bs=1,kv=8 --recipe aiter-a8w8-ps --sweep absmax --out "
      "mlr_cli_never.safetensors",
      "with --sweep use --json");
  cr_assert_neq(access("mlr_cli_never.safetensors", F_OK), 0, "nothing is written on failure");
}

/* The GPU commands: where this build or machine has no usable GPU they refuse with one line naming
 * why (exit 2) and write nothing; where there is one, gpu info names it. The bit identity of the
 * GPU kernel itself is the gpu label's test (gpu_exact). */
Test(cli, gpu_commands_need_a_gpu) {
  char *o, *e;
  const int rc = run("gpu info", &o, &e);
  if (rc == 0) {
    cr_assert(strstr(o, "kernels: exact, fast"), "%s", o);
    free(o);
    free(e);
    return;
  }
  cr_assert_eq(rc, 2, "gpu info: %s", e);
  cr_assert(strstr(e, "GPU"), "%s", e);
  cr_assert_eq(count_lines(e), 1, "%s", e);
  free(o);
  free(e);
  cr_assert_eq(system(MLAREF_BIN
                      " gen --shape bs=1,kv=40,seed=3 --out mlr_cli_gpu_in.safetensors >/dev/null"),
               0);
  cr_assert_eq(run("gpu run --kernel exact --recipe fp32-seq --inputs mlr_cli_gpu_in.safetensors "
                   "--out mlr_cli_never.safetensors",
                   &o, &e),
               2);
  cr_assert(strstr(e, "mlaref gpu run: ") && strstr(e, "GPU") && count_lines(e) == 1, "%s", e);
  free(o);
  free(e);
  cr_assert_eq(run("gpu run --kernel fast --recipe fast-a8w8 --inputs mlr_cli_gpu_in.safetensors "
                   "--out mlr_cli_never.safetensors",
                   &o, &e),
               2);
  cr_assert(strstr(e, "mlaref gpu run: ") && strstr(e, "GPU") && count_lines(e) == 1, "%s", e);
  free(o);
  free(e);
  cr_assert_eq(run("bench gpu --shape bs=1,kv=40", &o, &e), 2);
  cr_assert(strstr(e, "mlaref bench gpu: ") && strstr(e, "GPU") && count_lines(e) == 1, "%s", e);
  free(o);
  free(e);
  cr_assert_eq(run("golden --verify --gpu --suite edge", &o, &e), 2);
  cr_assert(strstr(e, "--gpu: ") && count_lines(e) == 1, "%s", e);
  free(o);
  free(e);
  cr_assert_neq(access("mlr_cli_never.safetensors", F_OK), 0, "nothing is written on failure");
  remove("mlr_cli_gpu_in.safetensors");
}

/* mlaref budget: the decomposition closes, the bound holds, the JSON parses; the sweep marks the
 * seeds' 6.0; check --rule budget passes the model and fails a wrong output */
Test(cli, budget_report_sweep_and_rule, .timeout = 300) {
  char *o, *e;
  cr_assert_eq(run("budget --shape bs=1,kv=100,seed=3 --recipe aiter-a8w8-ps", &o, &e), 0,
               "stderr: %s", e);
  cr_assert(strstr(o, "all sources on vs the model: 0 elements differ"), "%s", o);
  cr_assert(strstr(o, "a priori bound (truth from bf16 KV): holds"), "%s", o);
  cr_assert(strstr(o, "q_quant       yes"), "%s", o);
  cr_assert(strstr(o, "operand       no"), "%s", o);
  free(o);
  free(e);
  cr_assert_eq(
      run("budget --shape bs=1,kv=100,seed=3 --recipe triton-fp8-split --json > "
          "mlr_cli_budget.json; "
          "python3 -c \"import json; d = json.load(open('mlr_cli_budget.json')); "
          "assert d['decomposition']['closure_model_diff'] == 0 and d['bound']['violations'] == 0; "
          "assert d['decomposition']['sources']['merge']['present']; print('ok')\"",
          &o, &e),
      0, "stderr: %s", e);
  cr_assert(strstr(o, "ok"), "%s", o);
  free(o);
  free(e);
  /* --out: every element's truth, model, error and bound; read back with the standard library */
  cr_assert_eq(run("budget --shape bs=1,kv=40,seed=3 --recipe aiter-a16w8-ps --out "
                   "mlr_cli_belems.safetensors >/dev/null && python3 -c \""
                   "import json, struct; b = open('mlr_cli_belems.safetensors', 'rb').read(); n = "
                   "struct.unpack('<Q', b[:8])[0]; "
                   "h = json.loads(b[8:8 + n]); d = 8 + n; "
                   "g = lambda k: struct.unpack('<%dd' % (16 * 512), b[d + "
                   "h[k]['data_offsets'][0]:d + h[k]['data_offsets'][1]]); "
                   "t, m, e, bd = g('truth'), g('model'), g('error'), g('bound'); "
                   "assert h['truth']['shape'] == [1, 16, 512] and "
                   "h['__metadata__']['mlaref.kind'] == 'budget'; "
                   "assert all(e[i] == m[i] - t[i] and abs(e[i]) <= bd[i] for i in range(len(t))); "
                   "print('elements ok')\"",
                   &o, &e),
               0, "stderr: %s", e);
  cr_assert(strstr(o, "elements ok"), "%s", o);
  free(o);
  free(e);
  remove("mlr_cli_belems.safetensors");
  cr_assert_eq(run("budget --shape bs=1,kv=64,seed=3 --recipe aiter-a8w8-ps --sweep absmax "
                   "--points 4 --dists 'normal;t3'",
                   &o, &e),
               0, "stderr: %s", e);
  cr_assert(strstr(o, "absmax=6 "), "%s", o);
  cr_assert(strstr(o, "<- the seeds' 6.0"), "%s", o);
  cr_assert(strstr(o, "Q distribution t3"), "%s", o);
  cr_assert(strstr(o, "per_head"), "%s", o);
  free(o);
  free(e);
  cr_assert_eq(run("budget --shape bs=1,kv=64,seed=3 --recipe aiter-a8w8-ps --sweep absmax "
                   "--points 3 --dists normal --json | python3 -c \""
                   "import json, sys; d = json.load(sys.stdin)['sweep']['distributions'][0]; p = "
                   "d['points']; "
                   "assert [x['policy'] for x in p] == ['static:absmax=1', 'static:absmax=6', "
                   "'static:absmax=21.166', 'static:absmax=448', 'dynamic', "
                   "'per_head', 'per_token']; assert [x['seeds'] for x in p][:4] == [False, True, "
                   "False, False]; "
                   "assert p[0]['clipped_fraction'] > 0.25 and p[3]['clipped_fraction'] == 0; "
                   "print('sweep json ok')\"",
                   &o, &e),
               0, "stderr: %s", e);
  cr_assert(strstr(o, "sweep json ok"), "%s", o);
  free(o);
  free(e);
  cr_assert_eq(run("gen --shape bs=2,kv=70,seed=4 --out mlr_cli_bin.safetensors && " MLAREF_BIN
                   " run --recipe triton-fp8-split --inputs mlr_cli_bin.safetensors --out "
                   "mlr_cli_bout.safetensors",
                   &o, &e),
               0, "%s", e);
  free(o);
  free(e);
  bad("budget --inputs mlr_cli_bin.safetensors --recipe fp32-seq --truth bf16",
      "--truth bf16: the inputs have no kv_bf16");
  cr_assert_eq(run("check --inputs mlr_cli_bin.safetensors --output mlr_cli_bout.safetensors "
                   "--recipe triton-fp8-split --rule budget",
                   &o, &e),
               0, "%s %s", o, e);
  cr_assert(strstr(o, "rule budget                   pass every element within 1 x its bound"),
            "%s", o);
  free(o);
  free(e);
  /* a bound scaled down below the model's own error fails, naming the worst element */
  cr_assert_eq(run("check --inputs mlr_cli_bin.safetensors --output mlr_cli_bout.safetensors "
                   "--recipe triton-fp8-split --rule budget:0.01",
                   &o, &e),
               1, "%s %s", o, e);
  cr_assert(strstr(o, "FAIL") && strstr(o, "beyond 0.01 x their bound; worst element"), "%s", o);
  free(o);
  free(e);
  remove("mlr_cli_bin.safetensors");
  remove("mlr_cli_bout.safetensors");
  remove("mlr_cli_budget.json");
}

/* policy-check: the verdicts follow the numbers; the same policy on both sides changes nothing */
Test(cli, policy_check, .timeout = 120) {
  char *o, *e;
  /* the same policy against itself: identical utilisation and clipping, never a failure */
  cr_assert_eq(
      run("policy-check --policy static:absmax=6 --against static:absmax=6 --recipe fast-a8w8 "
          "--recipe aiter-a8w8-ps "
          "--shape bs=2,kv=64,seed=3 --shape bs=1,kv=100,seed=22,dist=t3 --json | python3 -c "
          "\"import json, sys; d = json.load(sys.stdin); "
          "c = d['cells']; assert len(c) == 4 and all(x['applicable'] for x in c); "
          "assert all(x['before']['util_max'] == x['after']['util_max'] and "
          "x['before']['clipped_fraction'] == "
          "x['after']['clipped_fraction'] and x['verdict'] != 'FAIL' for x in c); assert "
          "d['verdict'].startswith('static:absmax=6: 0 of 2 kernels fail'); print('same ok')\"",
          &o, &e),
      0, "stderr: %s", e);
  cr_assert(strstr(o, "same ok"), "%s", o);
  free(o);
  free(e);
  /* a scale far too small clips Q: every verdict follows its numbers, and the exit code says it */
  cr_assert_eq(
      run("policy-check --policy static:absmax=0.25 --against dynamic --recipe aiter-a8w8-ps "
          "--shape bs=2,kv=64,seed=3 --json "
          "> mlr_cli_pc.json; (echo policy-check exit $?; python3 -c \"import json; d = "
          "json.load(open('mlr_cli_pc.json')); "
          "c = d['cells'][0]; b, a, t = c['before'], c['after'], d['threshold']; "
          "assert a['clipped_fraction'] > 0.1 and b['clipped_fraction'] == 0; assert a['util_max'] "
          "> b['util_max'] and a['util_max'] > t; "
          "v = 'pass' if a['util_max'] <= t else 'no worse' if b['util_max'] > t and a['util_max'] "
          "<= (1 + d['margin']) * b['util_max'] else 'FAIL'; "
          "assert c['verdict'] == v == 'FAIL' and d['kernels'][0]['fails']; print('fail ok')\")",
          &o, &e),
      0, "stderr: %s", e);
  cr_assert(strstr(o, "policy-check exit 1\nfail ok"), "%s", o);
  free(o);
  free(e);
  remove("mlr_cli_pc.json");
  /* the default kernels: every fp8-Q recipe, the bf16-Q ones named as unaffected; bf16 KV is n/a
   * for fp8-KV recipes */
  const int rc = run(
      "policy-check --policy dynamic --shape bs=1,kv=40,seed=5 --shape bs=1,kv=40,seed=5,fmt=bf16",
      &o, &e);
  cr_assert(strstr(o, "unaffected (bf16 Q, no scale): triton-fp8-single"), "%s", o);
  cr_assert(strstr(o, "\naiter-a8w8-ps ") && strstr(o, "\naiter-test-ref ") &&
                strstr(o, "\nfast-a8w8 "),
            "%s", o);
  cr_assert(strstr(o, "\naiter-a8w8-ps          bs=1,kv=40,seed=5,fmt=bf16 n/a: recipe "
                      "'aiter-a8w8-ps' multiplies fp8 KV codes"),
            "%s", o);
  cr_assert(strstr(o, "\nGPU kernels: "), "%s", o);
  cr_assert(strstr(o, "recommendations:\n") && strstr(o, "policy-check: dynamic: "), "%s", o);
  /* the exit code is the verdict line's: 0 exactly when no kernel fails */
  cr_assert_eq(rc, strstr(o, "policy-check: dynamic: 0 of 3 kernels fail") ? 0 : 1,
               "exit %d: %s %s", rc, o, e);
  cr_assert_eq(rc, strstr(o, "  FAIL\n") ? 1 : 0, "exit %d: %s", rc, o);
  free(o);
  free(e);
  bad("policy-check", "usage: policy-check --policy");
  bad("policy-check --policy 5",
      "--policy: policy '5' is not one of static:absmax=A (A > 0), dynamic, per_head, per_token");
  bad("policy-check --policy static:absmax=0", "absmax must be a number > 0");
  bad("policy-check --policy dynamic --against foo", "--against: policy 'foo' is not one of");
  bad("policy-check --policy dynamic --recipe aiter-a16w8-ps",
      "recipe 'aiter-a16w8-ps' has bf16 Q, which has no scale policy to check");
  bad("policy-check --policy dynamic --suite nope",
      "--suite 'nope' is not a suite (valid: bench|test|edge|nightly|probe)");
  bad("policy-check --policy dynamic --suite test --shape bs=1,kv=2",
      "--suite and --shape: give one of them");
  bad("policy-check --policy dynamic --shape bs=0,kv=2",
      "shape 'bs=0,kv=2': shape field bs='0' is not an integer");
  bad("policy-check --policy dynamic --tolerance 1", "--tolerance '1' is not RTOL,ATOL");
  bad("policy-check --policy dynamic --margin -1", "--margin needs a number >= 0");
  bad("policy-check --policy dynamic --frob", "unknown option '--frob' (valid: --policy --against");
  /* inputs past the machine's memory are refused before anything is allocated (3.1 TB here) */
  bad("policy-check --policy dynamic --shape bs=60000,kv=30000",
      "shape 'bs=60000,kv=30000' (its inputs) needs 3.12e+03 GB of memory, more than the");
  bad("budget --shape bs=60000,kv=30000 --recipe fp32-seq",
      "(its inputs) needs 3.12e+03 GB of memory, more than the");
}

/* report: the three files, the JSON against its schema, the page self-contained with its plots;
 * a baseline whose digest and utilisation differ gives regressions, listed first, and exit 1 */
Test(cli, report_quick_and_baseline, .timeout = 300) {
  char *o, *e;
  cr_assert_eq(system("rm -rf mlr_cli_rep && mkdir -p mlr_cli_rep/a mlr_cli_rep/b"), 0);
  cr_assert_eq(run("report --suite edge --out mlr_cli_rep/a --quick --recipe fp32-seq --recipe "
                   "aiter-a8w8-ps --digests " MLAREF_SOURCE_DIR "/fixtures/goldens/digests.tsv",
                   &o, &e),
               0, "%s %s", o, e);
  /* 6 shapes x (fp32-seq, aiter-a8w8-ps under its own dynamic policy and under static:absmax=6, the
   * quick policy axis) */
  cr_assert(strstr(o, "report: suite edge (quick): 18 cells, 0 failed, 0 regressions"), "%s", o);
  free(o);
  free(e);
  /* the schema, with whichever python has jsonschema (pyenv's or Debian's python3-jsonschema) */
  cr_assert_eq(
      run("x 2>/dev/null; (for py in python3 /usr/bin/python3; do $py -c 'import jsonschema' "
          "2>/dev/null && break; done; $py -c \""
          "import json, jsonschema; d = json.load(open('mlr_cli_rep/a/summary.json')); "
          "jsonschema.validate(d, json.load(open('" MLAREF_SOURCE_DIR
          "/reports/summary.schema.json'))); "
          "c = [x for x in d['cells'] if x['applicable']]; assert len(d['cells']) == 18; "
          "assert all(x['golden'] == ('match' if x['own_policy'] else 'none') for x in c); "
          "assert sum(1 for x in d['cells'] if x['policy'] == 'static:absmax=6' and not "
          "x['own_policy']) == 6; "
          "assert [p['absmax'] for p in d['sweep']['distributions'][0]['points']].count(6.0) == 1; "
          "assert [x['recipe'] for x in d['decomposition']] == ['fp32-seq', 'aiter-a8w8-ps']; "
          "t = d['discrimination']; assert t['model_passes'] and all(r[1] is not False for r in "
          "t['caught']) and [r[0] for r in t['caught']].count(False) > 0; "
          "print('schema ok')\")",
          &o, &e),
      0, "%s %s", o, e);
  cr_assert(strstr(o, "schema ok"), "%s", o);
  free(o);
  free(e);
  /* the page: four inline SVG plots by gnuplot (heatmap, sweep, decomposition, histograms), the
   * discrimination table, nothing fetched from elsewhere */
  cr_assert_eq(system("test $(grep -c '<svg' mlr_cli_rep/a/index.html) -eq 4 && grep -q 'Produced "
                      "by GNUPLOT' mlr_cli_rep/a/index.html && "
                      "grep -q '<h2>Discrimination</h2>' mlr_cli_rep/a/index.html && "
                      "! grep -q -E '<script|src=.http|href=.http' mlr_cli_rep/a/index.html"),
               0);
  /* shards: two halves merged give the same cells and extras as the whole run */
  cr_assert_eq(system("mkdir -p mlr_cli_rep/s1 mlr_cli_rep/s2 mlr_cli_rep/m"), 0);
  for (int k = 1; k <= 2; k++) {
    char args[512];
    snprintf(args, sizeof args,
             "report --suite edge --out mlr_cli_rep/s%d --quick --gpu off --shard %d/2 --recipe "
             "fp32-seq "
             "--recipe aiter-a8w8-ps --digests " MLAREF_SOURCE_DIR "/fixtures/goldens/digests.tsv",
             k, k);
    cr_assert_eq(run(args, &o, &e), 0, "%s %s", o, e);
    cr_assert(strstr(o, k == 1 ? "shard 1/2 (from --shard 1/2)" : "shard 2/2"), "%s", o);
    free(o);
    free(e);
  }
  cr_assert_eq(run("report merge --out mlr_cli_rep/m mlr_cli_rep/s2 mlr_cli_rep/s1", &o, &e), 0,
               "%s %s", o, e);
  cr_assert(strstr(o, "report: suite edge (quick): 18 cells, 0 failed, 0 regressions"), "%s", o);
  free(o);
  free(e);
  cr_assert_eq(system("python3 -c \"import json; a, b = "
                      "(json.load(open('mlr_cli_rep/%s/summary.json' % x)) for x in 'am'); "
                      "t = lambda c: [dict(x, seconds=0) for x in c]; "
                      "assert t(a['cells']) == t(b['cells']) and all(a[k] == b[k] for k in "
                      "('sweep', 'decomposition', 'discrimination', 'policies')) "
                      "and 'shard' not in b and b['missing'] == []\""),
               0);
  /* a shard missing: the report is incomplete (exit 1), its cells listed */
  cr_assert_eq(run("report merge --out mlr_cli_rep/m1 mlr_cli_rep/s1", &o, &e), 1, "%s %s", o, e);
  cr_assert(strstr(e, "incomplete: ") && strstr(e, "missing from shards not given"), "%s", e);
  free(o);
  free(e);
  bad("report merge --out mlr_cli_rep/m mlr_cli_rep/s1 mlr_cli_rep/s1", "shard 1/2 given twice");
  bad("report merge --out mlr_cli_rep/m", "usage: report merge --out DIR");
  bad("report --suite edge --out mlr_cli_rep --shard 3/2", "--shard 3/2: shard 3 is outside 1..2");
  bad("report --suite edge --out mlr_cli_rep --gpu maybe",
      "--gpu 'maybe' is not one of auto|off|require");
  /* a baseline with another digest for one cell and a lower utilisation for another */
  cr_assert_eq(
      system("python3 -c \"import json; d = json.load(open('mlr_cli_rep/a/summary.json')); c = [x "
             "for x in d['cells'] if x['applicable']]; "
             "c[0]['o_sha256'] = '0' * 64; c[1]['utilisation']['max'] = c[1]['utilisation']['max'] "
             "/ 2; "
             "json.dump(d, open('mlr_cli_rep/base.json', 'w'))\""),
      0);
  cr_assert_eq(run("report --suite edge --out mlr_cli_rep/b --quick --recipe fp32-seq --recipe "
                   "aiter-a8w8-ps --baseline mlr_cli_rep/base.json",
                   &o, &e),
               1, "%s %s", o, e);
  cr_assert(strstr(o, "2 regressions against mlr_cli_rep/base.json"), "%s", o);
  cr_assert_eq(system("grep -q '<h2>Trend against the baseline</h2>' mlr_cli_rep/b/index.html"), 0,
               "the trend plot");
  cr_assert(strstr(o, "regression: bs1_kv1 / fp32-seq: output digest changed: 0000000000000000 in "
                      "the baseline"),
            "%s", o);
  cr_assert(strstr(o, "regression: bs1_kv1 / aiter-a8w8-ps: utilisation max up from"), "%s", o);
  free(o);
  free(e);
  cr_assert_eq(system("grep -n '^## ' mlr_cli_rep/b/summary.md | head -1 | grep -q 'Regressions' "
                      "&& grep -q 'output digest changed' mlr_cli_rep/b/summary.md && "
                      "grep -q 'class=\"reg\"' mlr_cli_rep/b/index.html"),
               0);
  /* bad input: one line, exit 2, nothing written */
  bad("report --suite edge", "usage: report --suite NAME --out DIR");
  bad("report --suite nope --out mlr_cli_rep",
      "--suite 'nope' is not a suite (valid: bench|test|edge|nightly|probe)");
  bad("report --suite edge --out mlr_cli_rep/b/summary.md",
      "--out 'mlr_cli_rep/b/summary.md' is a file, not a folder");
  bad("report --suite edge --out mlr_cli_rep --baseline /nonexistent.json",
      "--baseline /nonexistent.json: cannot read it");
  cr_assert_eq(
      system("mkdir -p mlr_cli_rep/c && echo '{\"schema\": \"other\"}' > mlr_cli_rep/other.json"),
      0);
  bad("report --suite edge --quick --recipe fp32-seq --out mlr_cli_rep/c --baseline "
      "mlr_cli_rep/other.json",
      "baseline mlr_cli_rep/other.json: not a summary.json of schema mlaref.report/1");
  cr_assert_eq(system("test -z \"$(ls mlr_cli_rep/c)\""), 0, "a refused report wrote files");
  bad("report --suite edge --out mlr_cli_rep --recipe frob", "unknown recipe 'frob'");
  cr_assert_eq(system("rm -rf mlr_cli_rep"), 0);
}

Test(cli, gen_check_unpack_pack) {
  char *o, *e;
  cr_assert_eq(system("rm -rf mlr_cli_gen && mkdir -p mlr_cli_gen/npy"), 0);
  cr_assert_eq(
      run("gen --shape lens=3:40,q=2,page=16,seed=7,bf16kv=1 --out mlr_cli_gen/a.safetensors", &o,
          &e),
      0, "%s", e);
  free(o);
  free(e);
  cr_assert_eq(run("inputs check mlr_cli_gen/a.safetensors", &o, &e), 0, "%s", e);
  cr_assert(strstr(o, "conforms: T=4 H=16 B=2 kv rows=64 page=16 kv=e4m3"), "%s", o);
  free(o);
  free(e);
  cr_assert_eq(run("inputs unpack mlr_cli_gen/a.safetensors --dir mlr_cli_gen/npy", &o, &e), 0,
               "%s", e);
  free(o);
  free(e);
  cr_assert_eq(
      /* DTYPE as pack names it, or as unpack prints it (BF16, F8_E4M3, F32) */
      run("inputs pack --out mlr_cli_gen/b.safetensors --meta mlaref.page_size=16 "
          "q=mlr_cli_gen/npy/q.npy:BF16 kv=mlr_cli_gen/npy/kv.npy:F8_E4M3 "
          "kv_scale=mlr_cli_gen/npy/kv_scale.npy:F32 qo_indptr=mlr_cli_gen/npy/qo_indptr.npy:i32 "
          "kv_indptr=mlr_cli_gen/npy/kv_indptr.npy:i32 "
          "kv_indices=mlr_cli_gen/npy/kv_indices.npy:i32 "
          "kv_last_page_len=mlr_cli_gen/npy/kv_last_page_len.npy:i32",
          &o, &e),
      0, "%s", e);
  free(o);
  free(e);
  cr_assert_eq(run("inputs check mlr_cli_gen/b.safetensors", &o, &e), 0, "%s", e);
  cr_assert(strstr(o, "conforms: T=4 H=16 B=2 kv rows=64 page=16 kv=e4m3"), "%s", o);
  free(o);
  free(e);
  /* the same tensors: compare the kv bytes of both files through unpack */
  cr_assert_eq(system("mkdir -p mlr_cli_gen/npy2 && " MLAREF_BIN
                      " inputs unpack mlr_cli_gen/b.safetensors --dir mlr_cli_gen/npy2 >/dev/null"
                      " && cmp mlr_cli_gen/npy/kv.npy mlr_cli_gen/npy2/kv.npy && cmp "
                      "mlr_cli_gen/npy/q.npy mlr_cli_gen/npy2/q.npy"),
               0);
  /* unpack's list packs back as it is, FNUZ fp8 by its format: a file that conforms */
  cr_assert_eq(
      system(MLAREF_BIN
             " gen --shape bs=1,kv=20,fmt=e4m3fnuz --out mlr_cli_gen/z.safetensors"
             " >/dev/null && " MLAREF_BIN
             " inputs unpack mlr_cli_gen/z.safetensors --dir mlr_cli_gen/z | "
             "grep '\\.npy ' | while read f d; do n=${f##*/}; "
             "echo \"${n%.npy}=$f:$d\"; done > mlr_cli_gen/z.args && "
             "grep -q '^kv=mlr_cli_gen/z/kv.npy:e4m3fnuz$' mlr_cli_gen/z.args && " MLAREF_BIN
             " inputs pack --out mlr_cli_gen/z2.safetensors "
             "$(cat mlr_cli_gen/z.args) >/dev/null && " MLAREF_BIN
             " inputs check mlr_cli_gen/z2.safetensors | grep -q kv=e4m3fnuz"),
      0);
  /* a contract violation found by check: exit 2, one line naming file and tensor */
  cr_assert_eq(
      run("inputs pack --out mlr_cli_gen/c.safetensors q=mlr_cli_gen/npy/q.npy:bf16", &o, &e), 0);
  free(o);
  free(e);
  cr_assert_eq(run("inputs check mlr_cli_gen/c.safetensors", &o, &e), 2);
  cr_assert(strstr(e, "mlr_cli_gen/c.safetensors: missing tensor 'kv'"), "%s", e);
  free(o);
  free(e);
  /* run: a recipe that needs fp8 KV on a bf16-KV file is bad input; a good run writes o and lse */
  cr_assert_eq(
      run("gen --shape bs=2,kv=30,seed=2,fmt=bf16 --out mlr_cli_gen/bf.safetensors", &o, &e), 0,
      "%s", e);
  free(o);
  free(e);
  bad("run --recipe aiter-a8w8-ps --inputs mlr_cli_gen/bf.safetensors --out "
      "mlr_cli_gen/never.safetensors",
      "multiplies fp8 KV codes (qk.operand = fp8) but the inputs' kv is bf16");
  cr_assert_neq(access("mlr_cli_gen/never.safetensors", F_OK), 0, "nothing is written on failure");
  cr_assert_eq(run("run --recipe triton-fp8-split --set split.count=4 --inputs "
                   "mlr_cli_gen/a.safetensors --out "
                   "mlr_cli_gen/o.safetensors --partials --threads 2",
                   &o, &e),
               0, "%s", e);
  cr_assert(strstr(o, "run: triton-fp8-split on mlr_cli_gen/a.safetensors: 4 tokens x 16 heads, 2 "
                      "batches, up to 4 splits"),
            "%s", o);
  free(o);
  free(e);
  cr_assert_eq(
      system(
          "mkdir -p mlr_cli_gen/onpy && " MLAREF_BIN
          " inputs unpack mlr_cli_gen/o.safetensors --dir mlr_cli_gen/onpy"
          " >/dev/null && test -s mlr_cli_gen/onpy/o.npy && test -s mlr_cli_gen/onpy/partial_o.npy"
          " && test -s mlr_cli_gen/onpy/lse.npy"),
      0);
  /* check: the model's own output passes its recipe; a file of another recipe's output fails fa3 */
  cr_assert_eq(run("run --recipe aiter-a8w8-ps --inputs mlr_cli_gen/a.safetensors --out "
                   "mlr_cli_gen/a8.safetensors",
                   &o, &e),
               0, "%s", e);
  free(o);
  free(e);
  cr_assert_eq(run("check --inputs mlr_cli_gen/a.safetensors --output mlr_cli_gen/a8.safetensors "
                   "--recipe aiter-a8w8-ps",
                   &o, &e),
               0, "%s%s", o, e);
  cr_assert(strstr(o, "rule fa3                      pass"), "%s", o);
  free(o);
  free(e);
  cr_assert_eq(run("check --inputs mlr_cli_gen/a.safetensors --output mlr_cli_gen/a8.safetensors "
                   "--recipe fp32-seq",
                   &o, &e),
               1, "%s%s", o, e);
  cr_assert(strstr(o, "rule fa3                      FAIL"), "%s", o);
  cr_assert(strstr(o, "reproduce batch ") && strstr(o, "; shape lens=3:40,"), "%s", o);
  free(o);
  free(e);
  /* inputs that gen did not make (packed: no shape) are named in the reproducer lines instead */
  cr_assert_eq(run("check --inputs mlr_cli_gen/b.safetensors --output mlr_cli_gen/a8.safetensors "
                   "--recipe fp32-seq",
                   &o, &e),
               1, "%s%s", o, e);
  cr_assert(strstr(o, "; inputs mlr_cli_gen/b.safetensors, recipe "), "%s", o);
  free(o);
  free(e);
  /* oracle: F64 o and lse; the truth from bf16 KV needs kv_bf16 (a.safetensors has it) */
  cr_assert_eq(
      run("oracle --inputs mlr_cli_gen/a.safetensors --out mlr_cli_gen/t.safetensors --from bf16",
          &o, &e),
      0, "%s%s", o, e);
  cr_assert(strstr(o, "0 uncertified"), "%s", o);
  free(o);
  free(e);
  cr_assert_eq(run("compare mlr_cli_gen/a8.safetensors mlr_cli_gen/a8.safetensors --truth "
                   "mlr_cli_gen/t.safetensors --rule fa3",
                   &o, &e),
               0, "%s%s", o, e);
  free(o);
  free(e);
  cr_assert_eq(run("suite show bench", &o, &e), 0);
  cr_assert(strstr(o, "bs256_kv8k   bs=256,kv=8192,q=1,page=1,seed=9826,dist=normal,fmt=e4m3"),
            "%s", o);
  free(o);
  free(e);
  cr_assert_eq(system("rm -rf mlr_cli_gen"), 0);
}

Test(cli, encode_decode) {
  char *o, *e;
  cr_assert_eq(run("formats encode --format e4m3 --overflow nonsat 464 464.0001 -0x1p-10", &o, &e),
               0);
  cr_assert(strstr(o, "-> 0x7E normal"), "%s", o);
  cr_assert(strstr(o, "-> 0x7F nan"), "%s", o);
  cr_assert(strstr(o, "-> 0x80 zero"), "%s", o);
  free(o);
  free(e);
  cr_assert_eq(run("formats decode --format e4m3fnuz 0x80 0x7f 1", &o, &e), 0);
  cr_assert(strstr(o, "0x80 nan"));
  cr_assert(strstr(o, "0x7F normal 0x1.ep+7 (240)"), "%s", o);
  cr_assert(strstr(o, "0x01 subnormal 0x1p-10"), "%s", o);
  free(o);
  free(e);
}

static const char *const ST_PY; /* below: a Python helper that rewrites tensor files */

/* goldens: one self-contained cell file a cell (inputs, each recipe's o and lse, metadata) and the
 * manifest beside them; --verify (the manifest found beside the cells) names a corrupted,
 * truncated or changed golden and a manifest row whose digest no longer matches; a cell file's
 * inputs and outputs pass `check` with nothing else */
Test(cli, golden_write_and_verify_catch_corruption, .timeout = 300) {
  char *o, *e;
  cr_assert_eq(system("rm -rf mlr_cli_gold && mkdir -p mlr_cli_gold/g"), 0);
  FILE *f = fopen("mlr_cli_st.py", "w");
  cr_assert_not_null(f);
  fputs(ST_PY, f);
  fclose(f);
  cr_assert_eq(
      run("golden --suite edge --recipe fp32-seq --recipe triton-fp8-split --out mlr_cli_gold/g",
          &o, &e),
      0, "%s", e);
  free(o);
  free(e);
  cr_assert_eq(run("golden --verify --goldens mlr_cli_gold/g", &o, &e), 0, "%s%s", o, e);
  cr_assert(strstr(o, "golden verify: 26 manifest rows, 26 in golden cells, 0 failed"), "%s", o);
  free(o);
  free(e);
  /* the committed manifest agrees with this build for those rows */
  cr_assert_eq(
      system("grep -P '^edge\\t[^\\t]+\\t(fp32-seq|triton-fp8-split)\\t' " MLAREF_SOURCE_DIR
             "/fixtures/goldens/digests.tsv | sort > mlr_cli_gold/a && grep -v '^#' "
             "mlr_cli_gold/g/digests.tsv | sort > mlr_cli_gold/b && cmp -s mlr_cli_gold/a "
             "mlr_cli_gold/b"),
      0, "the committed manifest differs from this build's");
  /* a cell file alone checks a kernel output: the model's own, pulled out of the cell */
  cr_assert_eq(system("python3 mlr_cli_st.py pick mlr_cli_gold/g/edge.q4_kv100.safetensors "
                      "mlr_cli_gold/out.safetensors triton-fp8-split"),
               0);
  cr_assert_eq(run("check --inputs mlr_cli_gold/g/edge.q4_kv100.safetensors --output "
                   "mlr_cli_gold/out.safetensors --recipe triton-fp8-split --rule exact",
                   &o, &e),
               0, "%s%s", o, e);
  free(o);
  free(e);
  /* two bytes of o.fp32-seq overwritten in a cell (the tensor's offset from its header) */
  cr_assert_eq(system("python3 mlr_cli_st.py poke mlr_cli_gold/g/edge.bs2_kv33.safetensors "
                      "o.fp32-seq 100"),
               0);
  /* a truncated cell */
  cr_assert_eq(system("truncate -s 100 mlr_cli_gold/g/edge.page16.safetensors"), 0);
  /* a manifest row whose lse digest changed */
  cr_assert_eq(system("sed -i "
                      "'/^edge\tq4_kv3\tfp32-seq\t/s/\t[0-9a-f]*$/"
                      "\t0000000000000000000000000000000000000000000000000000000000000000/' "
                      "mlr_cli_gold/g/digests.tsv"),
               0);
  cr_assert_eq(run("golden --verify --goldens mlr_cli_gold/g", &o, &e), 1, "%s%s", o, e);
  cr_assert(strstr(o, "golden edge/bs2_kv33/fp32-seq: FAIL: "
                      "mlr_cli_gold/g/edge.bs2_kv33.safetensors: o.fp32-seq differs from the "
                      "model's"),
            "%s", o);
  cr_assert(strstr(o, "golden edge/page16/triton-fp8-split: FAIL: "
                      "mlr_cli_gold/g/edge.page16.safetensors:"),
            "%s", o);
  cr_assert(strstr(o, "golden edge/q4_kv3/fp32-seq: FAIL: lse digest"), "%s", o);
  cr_assert(strstr(o, "4 failed"), "%s", o); /* page16's two recipes, bs2_kv33, q4_kv3 */
  free(o);
  free(e);
  /* the metadata a cell carries */
  cr_assert_eq(system("grep -q 'mlaref.recipe.fp32-seq.canonical' "
                      "mlr_cli_gold/g/edge.bs1_kv1.safetensors && grep -q "
                      "'mlaref.inputs.kv.sha256' mlr_cli_gold/g/edge.bs1_kv1.safetensors"),
               0);
  cr_assert_eq(system("rm -rf mlr_cli_gold"), 0);
}

/* A Python helper (standard library only) that rewrites a kernel output file: `python3
 * mlr_cli_st.py OP IN OUT [ARG]` with OP x1.5 (lse times 1.5), base2 (lse times log2 e), bhs and
 * bhs_flat (o as [B, s_q, H, 512], lse as [B, H, s_q] FlashMLA's way, transposed or, wrongly, not;
 * ARG = B), truth32 (lse the F64 truth of the oracle file ARG, rounded to F32), nan_q (an inputs
 * file with q[0] NaN), pick (a golden cell's o.ARG and lse.ARG as o and lse), poke (`poke FILE NAME
 * AT`: two bytes of tensor NAME at byte AT set to 0xFF, in place). */
static const char *const ST_PY =
    "import json, math, struct, sys\n"
    "def read(p):\n"
    "    b = open(p, 'rb').read()\n"
    "    n = struct.unpack('<Q', b[:8])[0]\n"
    "    h = json.loads(b[8:8 + n])\n"
    "    meta, d = h.pop('__metadata__', None), b[8 + n:]\n"
    "    return {k: [v['dtype'], v['shape'], d[v['data_offsets'][0]:v['data_offsets'][1]]]\n"
    "            for k, v in h.items()}, meta\n"
    "def write(p, t, meta):\n"
    "    h, off = ({'__metadata__': meta} if meta else {}), 0\n"
    "    for k, (dt, sh, raw) in t.items():\n"
    "        h[k] = {'dtype': dt, 'shape': sh, 'data_offsets': [off, off + len(raw)]}\n"
    "        off += len(raw)\n"
    "    hb = json.dumps(h).encode()\n"
    "    hb += b' ' * (-len(hb) % 8)\n"
    "    data = b''.join(x[2] for x in t.values())\n"
    "    open(p, 'wb').write(struct.pack('<Q', len(hb)) + hb + data)\n"
    "f32 = lambda raw: struct.unpack('<%df' % (len(raw) // 4), raw)\n"
    "pf32 = lambda v: struct.pack('<%df' % len(v), *v)\n"
    "op, src, dst = sys.argv[1:4]\n"
    "t, meta = read(src)\n"
    "if op == 'nan_q':\n"
    "    t['q'][2] = b'\\xc0\\x7f' + t['q'][2][2:]\n"
    "elif op == 'x1.5':\n"
    "    t['lse'][2] = pf32([x * 1.5 for x in f32(t['lse'][2])])\n"
    "elif op == 'base2':\n"
    "    t['lse'][2] = pf32([x * math.log2(math.e) for x in f32(t['lse'][2])])\n"
    "elif op in ('bhs', 'bhs_flat'):\n"
    "    B, (T, H) = int(sys.argv[4]), t['lse'][1]\n"
    "    s, v = T // B, f32(t['lse'][2])\n"
    "    if op == 'bhs':\n"
    "        v = [v[(b * s + i) * H + h] for b in range(B) for h in range(H) for i in "
    "range(s)]\n"
    "    t['lse'] = ['F32', [B, H, s], pf32(v)]\n"
    "    t['o'][1] = [B, s, H, 512]\n"
    "elif op == 'pick':\n"
    "    t, meta = {'o': t['o.' + sys.argv[4]], 'lse': t['lse.' + sys.argv[4]]}, None\n"
    "elif op == 'poke':\n"
    "    name, at, dst = dst, int(sys.argv[4]), src\n"
    "    raw = t[name][2]\n"
    "    t[name][2] = raw[:at] + b'\\xff\\xff' + raw[at + 2:]\n"
    "elif op == 'truth32':\n"
    "    raw = read(sys.argv[4])[0]['lse'][2]\n"
    "    t['lse'][2] = pf32(struct.unpack('<%dd' % (len(raw) // 8), raw))\n"
    "write(dst, t, meta)\n";

/* run ARGS; its exit status must be rc and its stdout must hold each of the texts (NULL ends) */
static void expect(const char *args, int rc, ...) {
  char *o, *e;
  const int got = run(args, &o, &e);
  cr_assert_eq(got, rc, "'%s': exit %d, want %d\n%s%s", args, got, rc, o, e);
  va_list ap;
  va_start(ap, rc);
  for (const char *want; (want = va_arg(ap, const char *));)
    cr_assert(strstr(o, want), "'%s': no '%s' in:\n%s%s", args, want, o, e);
  va_end(ap);
  free(o);
  free(e);
}

/* check holds lse: the model's own lse and the truth rounded to F32 pass; an lse times 1.5, or in
 * base 2 where the recipe says e (and the reverse), fails; FlashMLA's [B, H, s_q] lse and a 4-D o
 * are read by shape, transposed (the untransposed bytes fail); an F32 o is modelled with
 * out.format = fp32, saying so; .npy outputs (a folder, one o.npy) are read by their descr */
Test(cli, check_lse_dtype_npy, .timeout = 300) {
  FILE *f = fopen("mlr_cli_st.py", "w");
  cr_assert_not_null(f);
  fputs(ST_PY, f);
  fclose(f);
  cr_assert_eq(system("rm -rf mlr_cli_ck && mkdir mlr_cli_ck"), 0);
#define IN " --inputs mlr_cli_ck/in.safetensors --recipe aiter-a8w8-ps"
#define PY "python3 mlr_cli_st.py "
#define CK "mlr_cli_ck/"
  expect("gen --shape bs=2,kv=300,q=2,seed=4 --out " CK "in.safetensors && " MLAREF_BIN
         " run --recipe aiter-a8w8-ps --inputs " CK "in.safetensors --out " CK
         "m.safetensors && " MLAREF_BIN " oracle --inputs " CK "in.safetensors --out " CK
         "t.safetensors",
         0, NULL);
  expect("check" IN " --output " CK "m.safetensors", 0, "rule fa3                      pass",
         "rule lse fa3                  pass",
         "tensor 'lse' (base e): 64 elements, 64 bit-identical", NULL);
  char *o, *e;
  cr_assert_eq(run("check" IN " --output " CK "m.safetensors --tensor o", &o, &e), 0);
  cr_assert_null(strstr(o, "lse"), "--tensor o held lse:\n%s", o);
  free(o);
  free(e);
  cr_assert_eq(system(PY "x1.5 " CK "m.safetensors " CK "x15.safetensors && " PY "base2 " CK
                         "m.safetensors " CK "b2.safetensors && " PY "truth32 " CK
                         "m.safetensors " CK "t32.safetensors " CK "t.safetensors && " PY "bhs " CK
                         "m.safetensors " CK "bhs.safetensors 2 && " PY "bhs_flat " CK
                         "m.safetensors " CK "flat.safetensors 2"),
               0);
  expect("check" IN " --output " CK "x15.safetensors", 1, "rule fa3                      pass",
         "rule lse fa3                  FAIL", "reproduce lse batch ", NULL);
  expect("check" IN " --output " CK "b2.safetensors", 1, "rule lse fa3                  FAIL",
         NULL);
  expect("check" IN " --output " CK "b2.safetensors --set out.lse_base=2", 0,
         "tensor 'lse' (base 2)", "rule lse fa3                  pass", NULL);
  expect("check" IN " --output " CK "m.safetensors --set out.lse_base=2", 1,
         "rule lse fa3                  FAIL", NULL);
  expect("check" IN " --output " CK "t32.safetensors", 0, "rule lse fa3                  pass",
         NULL);
  expect("check" IN " --output " CK "bhs.safetensors --rule exact", 0,
         "rule lse exact                pass 0 of 64", NULL);
  expect("check" IN " --output " CK "flat.safetensors --rule exact", 1,
         "rule exact                    pass", "rule lse exact                FAIL", NULL);
  /* --tensor lse alone; with --rule nmse (o only) lse keeps the default fa3 */
  expect("check" IN " --output " CK "x15.safetensors --tensor lse --rule nmse:5e-4", 1,
         "rule lse fa3                  FAIL", NULL);
  /* an F32 o: out.format = fp32 in the model, bit for bit, and the first line says so */
  expect("run --recipe aiter-a8w8-ps --set out.format=fp32 --inputs " CK "in.safetensors --out " CK
         "f32.safetensors",
         0, NULL);
  cr_assert_eq(run("check" IN " --output " CK "f32.safetensors --rule exact", &o, &e), 0, "%s%s", o,
               e);
  const char *note = "note: o is F32; recipe aiter-a8w8-ps writes BF16: modelled with out.format "
                     "= fp32\n";
  cr_assert(strncmp(o, note, strlen(note)) == 0, "%s", o);
  cr_assert(strstr(o, "rule exact                    pass 0 of 32768"), "%s", o);
  free(o);
  free(e);
  /* .npy: a folder of o.npy and lse.npy (bf16 as '<u2'), one o.npy, an F32 o.npy ('<f4') */
  expect("inputs unpack " CK "m.safetensors --dir " CK "npy/m && " MLAREF_BIN " inputs unpack " CK
         "f32.safetensors --dir " CK "npy/f32",
         0, NULL);
  expect("check" IN " --output " CK "npy/m --rule exact", 0, "rule exact                    pass",
         "rule lse exact                pass", NULL);
  cr_assert_eq(run("check" IN " --output " CK "npy/m/o.npy --rule exact", &o, &e), 0, "%s", e);
  cr_assert(strstr(o, "rule exact   ") && !strstr(o, "lse"), "%s", o);
  free(o);
  free(e);
  expect("check" IN " --output " CK "npy/f32 --rule exact", 0, "note: o is F32",
         "rule lse exact                pass", NULL);
  bad("check" IN " --output " CK "npy/m/o.npy --tensor lse", "no tensor 'lse' for --tensor lse");
  /* the JSON: one document with both sections */
  expect("check" IN " --output " CK "x15.safetensors --json | python3 -c \"import json, sys; "
         "d = json.load(sys.stdin); assert d['exit_code'] == 1 and d['note'] is None; "
         "assert d['o']['rules'][0]['verdict'] == 'pass'; l = d['lse']; "
         "assert l['base'] == 'e' and l['rules'][0]['verdict'] == 'FAIL' and l['worst']; "
         "print('json ok')\"",
         0, "json ok", NULL);
#undef IN
#undef PY
#undef CK
  cr_assert_eq(system("rm -rf mlr_cli_ck"), 0);
}

/* recipe list describes every recipe; output folders are made; --allow-nonfinite is accepted
 * wherever the refusal suggests it; --help prints the usage and exits 0 */
Test(cli, recipe_list_folders_nonfinite_help, .timeout = 300) {
  char *o, *e;
  cr_assert_eq(run("recipe list | awk '!/^#/ && NF < 3' | wc -l", &o, &e), 0);
  cr_assert_str_eq(o, "0\n", "recipes without a description");
  free(o);
  free(e);
  expect("recipe list", 0, "AITER's persistent a8w8 MLA decode",
         "the seeds' Triton split-K fp8 kernel", NULL);
  cr_assert_eq(system("rm -rf mlr_cli_mk"), 0);
  expect("gen --suite edge --out mlr_cli_mk/gen/a", 0, NULL);
  expect("inputs unpack mlr_cli_mk/gen/a/bs1_kv1.safetensors --dir mlr_cli_mk/npy/b", 0, NULL);
  expect("golden --suite edge --recipe fp32-seq --out mlr_cli_mk/gold/c", 0, NULL);
  cr_assert_eq(system("test -s mlr_cli_mk/gen/a/ragged.safetensors && test -s "
                      "mlr_cli_mk/npy/b/q.npy && test -s "
                      "mlr_cli_mk/gold/c/edge.bs1_kv1.safetensors"),
               0);
  /* inputs with q[0] NaN: refused, saying --allow-nonfinite; accepted with it */
  FILE *f = fopen("mlr_cli_st.py", "w");
  cr_assert_not_null(f);
  fputs(ST_PY, f);
  fclose(f);
  cr_assert_eq(system("python3 mlr_cli_st.py nan_q mlr_cli_mk/gen/a/bs2_kv33.safetensors "
                      "mlr_cli_mk/nan.safetensors"),
               0);
  const char *cmds[] = {
      "inputs check mlr_cli_mk/nan.safetensors",
      "run --recipe fp32-seq --inputs mlr_cli_mk/nan.safetensors --out "
      "mlr_cli_mk/nan_o.safetensors",
      "oracle --inputs mlr_cli_mk/nan.safetensors --out mlr_cli_mk/nan_t.safetensors",
      "check --inputs mlr_cli_mk/nan.safetensors --output mlr_cli_mk/nan_o.safetensors --recipe "
      "fp32-seq",
      "budget --inputs mlr_cli_mk/nan.safetensors --recipe fp32-seq --rows 4"};
  for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --allow-nonfinite", cmds[k]);
    const int rc = run(cmd, &o, &e);
    /* a NaN in q is NaN in its row: the truth may not certify it, a check may fail (exit 1) */
    cr_assert(rc == 0 || (rc == 1 && k >= 2), "'%s': exit %d: %s", cmd, rc, e);
    cr_assert_null(strstr(e, "accepts it"), "'%s': %s", cmd, e);
    free(o);
    free(e);
    bad(cmds[k], "--allow-nonfinite accepts it");
  }
  cr_assert_eq(system("rm -rf mlr_cli_mk mlr_cli_st.py"), 0);
  const char *helps[] = {"run", "check", "gen", "recipe", "inputs", "golden", "report", "budget"};
  for (size_t k = 0; k < sizeof helps / sizeof helps[0]; k++) {
    char cmd[64], want[64];
    snprintf(cmd, sizeof cmd, "%s --help", helps[k]);
    snprintf(want, sizeof want, "usage: mlaref %s", helps[k]);
    cr_assert_eq(run(cmd, &o, &e), 0, "'%s': %s", cmd, e);
    cr_assert(strstr(o, want) && !*e, "'%s': %s%s", cmd, o, e);
    free(o);
    free(e);
  }
}

/* whether text names option opt as a whole word (--kernel is not named by --kernel-recipe) */
static int names_option(const char *text, size_t n, const char *opt) {
  const size_t k = strlen(opt);
  for (const char *p = text; (p = strstr(p, opt)) && p + k <= text + n; p += k)
    if (!(p[k] == '-' || (p[k] >= 'a' && p[k] <= 'z'))) return 1;
  return 0;
}

/* the part of a usage about command cmd ("gen", "bench gpu"): the segment (between " | ") that
 * starts with it, or the whole usage for a one-word command. *n: its length */
static const char *usage_part(const char *text, const char *cmd, size_t *n) {
  char key[64];
  if (!strchr(cmd, ' ')) {
    *n = strlen(text);
    return text;
  }
  snprintf(key, sizeof key, "%s ", cmd);
  const char *p = strstr(text, key);
  const char *e = p ? strstr(p, " | ") : NULL;
  *n = p ? (size_t)((e ? e : text + strlen(text)) - p) : 0;
  return p;
}

/* whether `mlaref help` names opt for cmd: in one of cmd's lines ("  cmd ...") or the lines
 * indented under it; -1 when it has no line for cmd */
static int help_names(const char *help, const char *cmd, const char *opt) {
  char key[64];
  snprintf(key, sizeof key, "\n  %s ", cmd);
  int lines = 0;
  for (const char *p = strstr(help, key); p; p = strstr(p + 1, key)) {
    const char *e = p + 1;
    while ((e = strstr(e + 1, "\n  ")) && e[3] == ' ') /* continuation lines */
      ;
    lines++;
    if (names_option(p, (size_t)((e ? e : help + strlen(help)) - p), opt)) return 1;
  }
  return lines ? 0 : -1;
}

/* the usage (`mlaref CMD --help`) and `mlaref help` name every option a command takes: the options
 * its unknown-option refusal lists as valid, each in the command's own part of the text */
Test(cli, usage_names_every_option) {
  const char *cmds[] = {"formats boundaries",
                        "formats encode",
                        "formats decode",
                        "gen",
                        "inputs check",
                        "inputs pack",
                        "inputs unpack",
                        "run",
                        "gpu run",
                        "compare",
                        "check",
                        "golden",
                        "oracle",
                        "budget",
                        "policy-check",
                        "report",
                        "report merge",
                        "discriminate",
                        "mma check",
                        "bench formats",
                        "bench emulate",
                        "bench oracle",
                        "bench gpu-exact",
                        "bench gpu",
                        "bench mma"};
  char *all, *e;
  cr_assert_eq(run("help", &all, &e), 0, "%s", e);
  free(e);
  for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
    char cmd[96], *o, *usage, *refusal;
    snprintf(cmd, sizeof cmd, "%.*s --help", (int)strcspn(cmds[k], " "), cmds[k]);
    cr_assert_eq(run(cmd, &usage, &e), 0, "'%s': %s", cmd, e);
    free(e);
    snprintf(cmd, sizeof cmd, "%s --no-such-option", cmds[k]);
    cr_assert_eq(run(cmd, &o, &refusal), 2, "'%s': %s", cmd, refusal);
    free(o);
    size_t nu;
    const char *u = usage_part(usage, cmds[k], &nu);
    cr_assert(u, "no usage of '%s': %s", cmds[k], usage);
    const char *v = strstr(refusal, "(valid: ");
    cr_assert_not_null(v, "'%s': %s", cmd, refusal);
    for (const char *p = strstr(v, "--"); p; p = strstr(p + 2, "--")) {
      char opt[40];
      snprintf(opt, sizeof opt, "%.*s", (int)strcspn(p, " ,)"), p);
      cr_expect(names_option(u, nu, opt), "'%s --help' does not name %s", cmds[k], opt);
      cr_expect(help_names(all, cmds[k], opt) == 1, "'mlaref help' does not name %s of %s", opt,
                cmds[k]);
    }
    free(usage);
    free(refusal);
  }
  free(all);
}

/* the built-in recipes' names, as `recipe list` gives them (its headings left out), each after a
 * ';' appended to names[n] */
static void builtin_names(char *names, size_t n) {
  char *o, *e;
  cr_assert_eq(run("recipe list", &o, &e), 0, "%s", e);
  free(e);
  for (char *line = strtok(o, "\n"); line; line = strtok(NULL, "\n")) {
    char name[64];
    if (sscanf(line, "%63s", name) == 1 && name[0] != '#')
      snprintf(names + strlen(names), n - strlen(names), ";%s", name);
  }
  free(o);
}

/* `recipe show` prints a file that parses back to the same recipe (docs/recipes.md): every
 * built-in, and one changed by --set, shown again from its printed form keeps its SHA-256 */
Test(cli, recipe_show_parses_back) {
  char *e, names[4096] = "fast-wgmma-a8w8 --set split.per=batch";
  builtin_names(names, sizeof names);
  int n = 0;
  for (char *nm = strtok(names, ";"); nm; nm = strtok(NULL, ";"), n++) {
    char cmd[256], *r, *r2;
    snprintf(cmd, sizeof cmd, "recipe show %s", nm);
    cr_assert_eq(run(cmd, &r, &e), 0, "%s: %s", nm, e);
    free(e);
    FILE *f = fopen("mlr_cli_show.recipe", "wb");
    cr_assert_not_null(f);
    fputs(r, f);
    fclose(f);
    cr_assert_eq(run("recipe show mlr_cli_show.recipe", &r2, &e), 0, "%s: %s", nm, e);
    free(e);
    const char *h = strstr(r, "# sha256 "), *h2 = strstr(r2, "# sha256 ");
    cr_assert(h && h2 && strncmp(h, h2, 9 + 64) == 0, "%s: %s against %s", nm, r, r2);
    free(r);
    free(r2);
  }
  remove("mlr_cli_show.recipe");
  cr_assert_gt(n, 10);
}

/* docs/recipes.md's order of the canonical string's keys is the command's: in every built-in
 * recipe's canonical line the keys come in the documented order (a recipe hash recomputed from
 * the docs is the command's) */
Test(cli, documented_canonical_order) {
  FILE *f = fopen(MLAREF_SOURCE_DIR "/docs/recipes.md", "rb");
  cr_assert_not_null(f);
  static char doc[1 << 20];
  doc[fread(doc, 1, sizeof doc - 1, f)] = 0;
  fclose(f);
  const char *list = strstr(doc, "in this fixed order");
  cr_assert_not_null(list, "docs/recipes.md has no 'in this fixed order' list");
  const char *end = strstr(list, "`softmax.schedule`;");
  cr_assert_not_null(end, "the list does not end at softmax.schedule");
  char *e, names[4096] = "";
  builtin_names(names, sizeof names);
  int nrecipes = 0;
  for (char *name = strtok(names, ";"); name; name = strtok(NULL, ";")) {
    char cmd[128], *r;
    snprintf(cmd, sizeof cmd, "recipe show %s", name);
    cr_assert_eq(run(cmd, &r, &e), 0, "%s", e);
    free(e);
    const char *c = strstr(r, "# canonical ");
    cr_assert_not_null(c, "%s", r);
    const char *at = list; /* each key found after the one before it */
    for (c += strlen("# canonical "); *c && *c != '\n';) {
      char key[64], quoted[68];
      const size_t n = strcspn(c, "=");
      snprintf(key, sizeof key, "%.*s", (int)n, c);
      snprintf(quoted, sizeof quoted, "`%s`", key);
      const char *p = strstr(at, quoted);
      cr_assert(p && p <= end, "%s: key %s is not where docs/recipes.md's order puts it", name,
                key);
      at = p + 1;
      c += strcspn(c, ";\n");
      if (*c == ';') c++;
    }
    free(r);
    nrecipes++;
  }
  cr_assert_gt(nrecipes, 10);
}
