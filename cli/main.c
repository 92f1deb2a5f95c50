/* mlaref: deterministic reference model and checking toolkit for fp8 MLA decode kernels. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#ifndef MLAREF_COMMIT
#define MLAREF_COMMIT "unknown"
#endif

static void usage(FILE *out) {
  fputs(
      "usage: mlaref [COMMAND [ARGS]]\n"
      "  (no command)            the main job: selfcheck, then a quick report of the edge suite "
      "(page named)\n"
      "  selfcheck               formats, pmath and rng self-check with a summary\n"
      "  formats info            the contract of every number format\n"
      "  formats boundaries --format F [--overflow O] [--rounding rne|rtz]\n"
      "                          every binary32 pattern at which the encoded code changes\n"
      "  formats encode --format F [--overflow O] [--rounding R] [--rbits N] VALUE...\n"
      "  formats decode --format F CODE...\n"
      "  gen --shape SPEC --out FILE | --suite NAME --out DIR [--max-memory GB]\n"
      "                          inputs as the amd-mixed-mla task makes them (.safetensors)\n"
      "                          SPEC: bs=B,kv=L | lens=L1:L2:..., [q=1..16] [heads=1..128]\n"
      "                          [page=P] [seed=S]"
      " [dist=normal|scaled:S|t3|outliers:P|perhead] "
      "[fmt=e4m3|e4m3fnuz|bf16]\n                          [bf16kv=1] probes: [needle=N1:N2:...] "
      "[kscale=X] [vscale=X]\n                          [qscale=X] [sm=X] [spare=S]\n"
      "  suite list | suite show NAME\n"
      "  inputs check FILE [--allow-nonfinite]   check a file against the input contract\n"
      "  inputs pack --out FILE NAME=F.npy:DTYPE... [--meta K=V]   .npy files into .safetensors\n"
      "  inputs unpack FILE --dir DIR            every tensor to DIR/NAME.npy, metadata.json\n"
      "  recipe list | recipe show NAME|FILE [--set key=value]...   numerics contracts\n"
      "  run --recipe NAME|FILE [--set key=value]... --inputs IN --out OUT [--threads N] "
      "[--partials]\n"
      "      [--allow-nonfinite] [--max-memory GB]   the bit-accurate model of a kernel: o, lse "
      "(and partials)\n"
      "  gpu run --kernel exact|fast [--variant KEY=V[,KEY=V]...] --recipe NAME|FILE\n"
      "      [--set key=value]... --inputs IN --out OUT [--allow-nonfinite] [--max-memory GB]\n"
      "                          exact: the same model on the GPU, bit for bit (gpu/exact); fast: "
      "the\n"
      "                          fast kernel (gpu/fast) on its recipes fast-a16w8, fast-a8w8,\n"
      "                          fast-wgmma-a8w8, fast-wgmma-fp8 (bf16 KV: fast-a16w16, "
      "fast-a8w16);\n"
      "                          --variant forces its variants: keys ws, cluster, toktable,\n"
      "                          qdiv, rows, tma (0|1) and lin (0|1|2)\n"
      "  gpu info                the build's GPU runtime and the GPU found\n"
      "  compare A B [--tensor o] [--rule R]... [--truth T] [--inputs IN] [--json]\n"
      "                          metrics and tolerance rules "
      "(exact|ulp:N|allclose:RTOL,ATOL[,MISS]|\n"
      "                          fa3[:K[,ATOL]]|nmse:X|cos:X|budget[:F]|structure[:K[,ATOL]]);\n"
      "                          exit 1 when a rule fails\n"
      "  check --inputs IN --output KERNEL_OUT --recipe NAME|FILE [--set k=v]... [--rule R]...\n"
      "      [--tensor o|lse|both] [--truth dequantized|bf16] [--threads N] [--allow-nonfinite]\n"
      "      [--json]                a kernel's output (o and lse) against its recipe's model\n"
      "                          and the certified truth (default rules fa3 and structure;\n"
      "                          budget: the a priori bound)\n"
      "  golden --suite NAME... --recipe NAME|all (--out DIR [--max-bs N] | --digests FILE)\n"
      "  golden --verify [--goldens DIR] [--digests FILE] [--suite NAME]...   golden cells\n"
      "      (--gpu with either: computed by the GPU exact kernel)\n"
      "  oracle --inputs IN --out OUT [--from dequantized|bf16] [--max-memory GB]\n"
      "      [--allow-nonfinite]   the certified truth (F64, 1 ulp)\n"
      "  budget --inputs IN | --shape SPEC --recipe NAME|FILE [--set k=v]... [--policy P] [--rows "
      "N]\n"
      "      [--truth bf16|dequantized] [--tolerance RTOL,ATOL] [--out FILE] [--max-memory GB] "
      "[--json]\n      [--threads N] [--allow-nonfinite]\n"
      "                          the error by source, the a priori bound, utilisation\n"
      "  budget ... --sweep absmax [--points N] [--dists D;D...] [--threshold X]\n"
      "                          the static Q scale's cost against absmax (1..448, the seeds' 6.0 "
      "marked)\n"
      "  policy-check --policy P [--against P0] [--suite NAME | --shape SPEC... | --inputs "
      "FILE...]\n"
      "      [--recipe R|none]... [--tolerance RTOL,ATOL] [--threshold X] [--margin M]\n"
      "      [--gpu auto|off|require] [--threads N] [--max-memory GB] [--json]\n"
      "      [--kernel NAME='CMD {inputs} {out} {q_scale} {q_policy}' --kernel-recipe NAME=R\n"
      "       [--kernel-timeout [NAME=]S] [--kernel-rule NAME=RULE]...\n"
      "       [--kernel-inputs NAME=safetensors|npy]]...\n"
      "                          a new fp8 Q scale policy against the current one for every fp8-Q "
      "kernel\n"
      "                          (and the fast GPU kernel where a GPU is) and shape; exit 1 when "
      "one fails\n"
      "  report --suite NAME --out DIR [--recipe NAME|none]... [--policy P]...\n"
      "      [--baseline OLD/summary.json] [--quick] [--cells A,B...] [--gpu auto|off|require]\n"
      "      [--shard i/n | --shards N] [--plan] [--digests FILE] [--threads N] [--max-memory GB]\n"
      "      [--kernel NAME='CMD {inputs} {out}' --kernel-recipe NAME=R [--kernel-policy NAME=P]\n"
      "       [--kernel-timeout [NAME=]S] [--kernel-rule NAME=RULE]...\n"
      "       [--kernel-inputs NAME=safetensors|npy]]...   your kernels too\n"
      "                          the accuracy report: index.html, summary.json, summary.md; exit 1 "
      "on a\n"
      "                          failure or a regression against the baseline; the shard also\n"
      "                          from Slurm, Kubernetes or Buildkite variables (docs/report.md)\n"
      "  report merge --out DIR [--baseline OLD/summary.json] SHARD_DIR...   shards as one report\n"
      "  discriminate --suite NAME [--suite NAME]... [--recipe R] [--max-bs N] [--threads N]\n"
      "                          which check catches which wrong kernel, a table a suite; exit 1\n"
      "                          when one escapes the default rules on the first suite\n"
      "  mma check FILE... --unit U [--format F]   a matrix-unit model against vectors\n"
      "                          (C D a.. b.. in hex a line: hardware's, or MMA-Sim's); U one of\n"
      "                          sm90-bf16|sm90-f16|sm90-e4m3|sm90-e4m3-sync|sm90-e5m2|\n"
      "                          cdna3-bf16|cdna3-fp8\n"
      "  bench formats [--n N]   conversion and random-variate throughput on one core\n"
      "  bench emulate [--recipe NAME]... [--shape SPEC] [--threads N] [--reps N]   the model's "
      "speed\n"
      "  bench oracle [--shape SPEC] [--small SPEC]   the oracle's speed, and against plain MPFR\n"
      "  bench gpu-exact [--shape SPEC]... [--recipe NAME]... [--reps N]   the GPU exact kernel's "
      "speed\n"
      "  bench gpu [--shape SPEC]... [--recipe NAME]... [--reps N] [--peers FILE]\n"
      "      [--flush dirty|clean] [--warmup MS] [--variant KEY=V[,KEY=V]...]   the fast kernel's "
      "speed\n"
      "  bench mma [--dots N] [--reps N]   the matrix-unit models' cost against an fma chain\n"
      "  version\n"
      "exit status: 0 success, 1 a check failed, 2 bad input\n",
      out);
}

/* the main job: the self-check, then a quick report of the edge suite (every built-in) into a new
 * folder under the temporary directory, and where its page is */
static int main_job(void) {
  int rc = mlr_cmd_selfcheck(0, NULL);
#ifndef MLAREF_FORMATS_ONLY
  if (rc != MLR_EXIT_OK) return rc;
  const char *tmp = getenv("TMPDIR");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/mlaref-report-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    fprintf(stderr, "mlaref: cannot make a folder for the quick report under %s\n",
            tmp && *tmp ? tmp : "/tmp");
    return MLR_EXIT_FAIL;
  }
  char *args[] = {"--suite", "edge", "--quick", "--out", dir};
  rc = mlr_cmd_report(5, args);
  if (rc != MLR_EXIT_USAGE) printf("mlaref: the quick report's page: %s/index.html\n", dir);
#endif
  return rc;
}

/* the commands by name (besides version and help) */
static const struct command {
  const char *name;
  int (*run)(int argc, char **argv);
} COMMANDS[] = {
    {"selfcheck", mlr_cmd_selfcheck},
    {"formats", mlr_cmd_formats},
    {"bench", mlr_cmd_bench},
/* scripts/gpu_run.sh builds a CLI without the fixtures (no jansson there) */
#ifndef MLAREF_FORMATS_ONLY
    {"gen", mlr_cmd_gen},
    {"suite", mlr_cmd_suite},
    {"inputs", mlr_cmd_inputs},
    {"recipe", mlr_cmd_recipe},
    {"run", mlr_cmd_run},
    {"gpu", mlr_cmd_gpu},
    {"compare", mlr_cmd_compare},
    {"check", mlr_cmd_check},
    {"golden", mlr_cmd_golden},
    {"oracle", mlr_cmd_oracle},
    {"budget", mlr_cmd_budget},
    {"policy-check", mlr_cmd_policy_check},
    {"report", mlr_cmd_report},
    {"discriminate", mlr_cmd_discriminate},
    {"mma", mlr_cmd_mma},
#endif
};

int main(int argc, char **argv) {
  if (argc < 2) return main_job();
  const char *cmd = argv[1];
  for (size_t k = 0; k < sizeof COMMANDS / sizeof COMMANDS[0]; k++)
    if (strcmp(cmd, COMMANDS[k].name) == 0)
      return mlr_cli_asks_help(argc - 2, argv + 2) ? mlr_cli_help(cmd)
                                                   : COMMANDS[k].run(argc - 2, argv + 2);
  if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
    printf("mlaref %s (commit %s)\n", MLAREF_VERSION, MLAREF_COMMIT);
    return MLR_EXIT_OK;
  }
  if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
    usage(stdout);
    return MLR_EXIT_OK;
  }
  fprintf(stderr,
          "mlaref: unknown command '%s' (valid: "
          "selfcheck|formats|gen|suite|inputs|recipe|run|gpu|compare|check|golden|oracle|budget|"
          "policy-check|report|discriminate|mma|bench|version|help)\n",
          cmd);
  return MLR_EXIT_USAGE;
}
