/* mlaref run --recipe NAME|FILE [--set key=value]... --inputs IN --out OUT [--threads N]
 *            [--partials] [--allow-nonfinite]
 * mlaref gpu run --kernel exact|fast [--variant KEY=V[,KEY=V]...] --recipe NAME|FILE
 *            [--set key=value]... --inputs IN --out OUT [--allow-nonfinite]
 *            on the GPU: exact (gpu/exact: bit-identical to run) or the fast kernel (gpu/fast: its
 *            own recipes, fast-a16w8 / fast-a8w8 / fast-wgmma-a8w8 / fast-wgmma-fp8, bf16 KV
 *            fast-a16w16 / fast-a8w16; --variant forces its variants, mlr_gpu_fast_opts_parse's
 *            form)
 * mlaref gpu info   the build's GPU runtime and the GPU found
 * Runs the model (ref/emulate) on a checked inputs file and writes its
 * outputs as .safetensors: o [T,H,512] (BF16, F16 or F32 by out.format), lse [T,H] F32, split_count
 * [B] I32, split_len [B] I32, q_scales [n] F32 (fp8 Q only); with --partials partial_o [T,H,S,512],
 *   partial_lse, partial_max, partial_sum [T,H,S] F32 (NaN in slots past a batch's splits).
 * __metadata__: mlaref.version, mlaref.recipe (name), mlaref.recipe.sha256,
 * mlaref.recipe.canonical, mlaref.inputs (the file's name), mlaref.q_clipped. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "mlr_inputs.h"
#include "mlr_gpu.h"
#include "mlr_gpu_fast.h"
#include "mlr_emulate.h"
#include "mlr_recipe.h"

/* copy n bytes into a new tensor of tf */
static mlr_status put(mlr_tensor_file *tf, const char *name, mlr_dtype d, int nd,
                      const int64_t *shape, const void *src, size_t n) {
  mlr_tensor *t;
  mlr_status st = mlr_tf_add(tf, name, d, nd, shape, &t);
  if (st == MLR_OK) memcpy(t->data, src, n);
  return st;
}

static mlr_status result_file(const mlr_emu_result *res, const mlr_recipe *r, const char *inputs,
                              mlr_tensor_file *tf) {
  const int64_t T = res->T, H = res->H, S = res->S, B = res->B;
  const mlr_dtype od = res->out_format == MLR_OUT_FP32   ? MLR_DT_F32
                       : res->out_format == MLR_OUT_FP16 ? MLR_DT_F16
                                                         : MLR_DT_BF16;
  const int64_t so[3] = {T, H, MLR_EMU_V_DIM}, sl[2] = {T, H}, sb[1] = {B},
                sp[4] = {T, H, S, MLR_EMU_V_DIM}, sq[1] = {res->n_q_scales};
  mlr_status st = put(tf, "o", od, 3, so, res->o, mlr_emu_o_bytes(res));
  if (st == MLR_OK) st = put(tf, "lse", MLR_DT_F32, 2, sl, res->lse, (size_t)(T * H) * 4);
  if (st == MLR_OK) st = put(tf, "split_count", MLR_DT_I32, 1, sb, res->split_count, (size_t)B * 4);
  if (st == MLR_OK) st = put(tf, "split_len", MLR_DT_I32, 1, sb, res->split_len, (size_t)B * 4);
  if (st == MLR_OK && res->n_q_scales)
    st = put(tf, "q_scales", MLR_DT_F32, 1, sq, res->q_scales, (size_t)res->n_q_scales * 4);
  if (st == MLR_OK && res->part_o) {
    st = put(tf, "partial_o", MLR_DT_F32, 4, sp, res->part_o,
             (size_t)(T * H * S * MLR_EMU_V_DIM) * 4);
    if (st == MLR_OK)
      st = put(tf, "partial_lse", MLR_DT_F32, 3, sp, res->part_lse, (size_t)(T * H * S) * 4);
    if (st == MLR_OK)
      st = put(tf, "partial_max", MLR_DT_F32, 3, sp, res->part_max, (size_t)(T * H * S) * 4);
    if (st == MLR_OK)
      st = put(tf, "partial_sum", MLR_DT_F32, 3, sp, res->part_sum, (size_t)(T * H * S) * 4);
  }
  char hash[65], canon[2048], clip[32];
  mlr_recipe_hash(r, hash);
  mlr_recipe_canonical(r, canon, sizeof canon);
  snprintf(clip, sizeof clip, "%lld", (long long)res->q_clipped);
  if (st == MLR_OK) st = mlr_tf_set_meta(tf, "mlaref.version", MLAREF_VERSION);
  if (st == MLR_OK) st = mlr_tf_set_meta(tf, "mlaref.recipe", r->name);
  if (st == MLR_OK) st = mlr_tf_set_meta(tf, "mlaref.recipe.sha256", hash);
  if (st == MLR_OK) st = mlr_tf_set_meta(tf, "mlaref.recipe.canonical", canon);
  if (st == MLR_OK) st = mlr_tf_set_meta(tf, "mlaref.inputs", inputs);
  if (st == MLR_OK) st = mlr_tf_set_meta(tf, "mlaref.q_clipped", clip);
  return st;
}

/* the fast kernel once, as mlr_gpu_exact is called: prepare, launch, outputs; the kernels it ran
 * (mlr_gpu_fast_kernels) into kn */
static mlr_status fast_run(const mlr_recipe *r, const mlr_inputs *in, const mlr_gpu_fast_opts *fo,
                           mlr_emu_result *res, mlr_gpu_timing *tm, char *kn, size_t n,
                           mlr_error *err) {
  mlr_gpu_fast *f;
  double us = 0;
  mlr_status st = mlr_gpu_fast_prepare(r, in, fo, &f, err);
  if (st == MLR_OK) snprintf(kn, n, "%s", mlr_gpu_fast_kernels(f));
  if (st == MLR_OK) st = mlr_gpu_fast_launch(f, 0, &us, err);
  if (st == MLR_OK) st = mlr_gpu_fast_result(f, res, err);
  mlr_gpu_fast_free(f);
  tm->kernel_ms = us * 1e-3;
  return st;
}

typedef struct run_opts {
  const char *recipe, *inputs, *out, *kernel, *sets[64];
  const char *variant; /* gpu run --kernel fast: mlr_gpu_fast_opts_parse's form */
  int nsets, allow;
  mlr_emu_opts emu;
  mlr_gpu_fast_opts fo; /* --variant: the fast kernel's variants forced (mlr_gpu_fast.h) */
} run_opts;

/* run's and gpu run's command line into o: an exit code */
static int run_args(const char *cmd, int argc, char **argv, int gpu, run_opts *o) {
  memset(o, 0, sizeof *o);
  o->emu = (mlr_emu_opts){0, 0, MLR_FAULT_NONE, 0};
  int rc = MLR_EXIT_OK;
  for (int i = 0; i < argc && rc == MLR_EXIT_OK; i++) {
    const char *v;
    int m;
    if (mlr_cli_str(cmd, argc, argv, &i, "recipe", "a name or file", &o->recipe, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "inputs", "a file", &o->inputs, &rc) ||
        mlr_cli_str(cmd, argc, argv, &i, "out", "a file", &o->out, &rc) ||
        (gpu && mlr_cli_str(cmd, argc, argv, &i, "kernel", "a kernel name (exact, fast)",
                            &o->kernel, &rc)) ||
        (gpu && mlr_cli_str(cmd, argc, argv, &i, "variant", "key=value[,key=value]...", &o->variant,
                            &rc)) ||
        mlr_cli_max_memory_opt(cmd, argc, argv, &i, &rc) ||
        mlr_cli_threads_opt(cmd, argc, argv, &i, &o->emu.threads, &rc))
      continue;
    if ((m = mlr_cli_opt(argc, argv, &i, "set", &v))) {
      if (m < 0) return mlr_cli_usage_error(cmd, "--set needs key=value");
      if (o->nsets == 64) return mlr_cli_usage_error(cmd, "at most 64 --set options");
      o->sets[o->nsets++] = v;
    } else if (strcmp(argv[i], "--partials") == 0)
      o->emu.partials = 1;
    else if (strcmp(argv[i], "--allow-nonfinite") == 0)
      o->allow = 1;
    else
      return mlr_cli_unknown_option(cmd, argv[i],
                                    gpu ? "--kernel --variant --recipe --set --inputs --out "
                                          "--max-memory --allow-nonfinite"
                                        : "--recipe --set --inputs --out --threads --partials "
                                          "--max-memory --allow-nonfinite");
  }
  if (rc != MLR_EXIT_OK) return rc;
  if (gpu && (o->emu.threads || o->emu.partials))
    return mlr_cli_usage_error(
        cmd, "--%s is an option of the CPU model (mlaref run), not of the GPU kernel",
        o->emu.threads ? "threads" : "partials");
  if (gpu && o->kernel && strcmp(o->kernel, "exact") != 0 && strcmp(o->kernel, "fast") != 0)
    return mlr_cli_usage_error(cmd, "--kernel '%s' is not a GPU kernel (valid: exact, fast)",
                               o->kernel);
  mlr_gpu_fast_opts_init(&o->fo);
  if (o->variant && o->kernel && strcmp(o->kernel, "fast") != 0)
    return mlr_cli_usage_error(cmd,
                               "--variant '%s': an option of the fast kernel (--kernel fast), "
                               "not of --kernel %s",
                               o->variant, o->kernel);
  if (o->variant) {
    mlr_error verr = {""};
    if (mlr_gpu_fast_opts_parse(o->variant, &o->fo, &verr) != MLR_OK)
      return mlr_cli_usage_error(cmd, "--variant %s", verr.msg);
  }
  if (!o->recipe || !o->inputs || !o->out || (gpu && !o->kernel)) return mlr_cli_usage_fail(cmd);
  return mlr_cli_out_file_check(cmd, o->out);
}

/* the inputs (read, in_bytes) and the outputs, refused before the outputs are allocated: o (bf16
 * or fp32), lse, and the split partials with --partials */
static int outputs_fit(const char *cmd, const run_opts *o, const mlr_recipe *r,
                       const mlr_inputs *in, double in_bytes) {
  int64_t S = 1, *plan = calloc((size_t)in->B * 3, sizeof(int64_t)); /* counts, firsts, lengths */
  if (!plan || mlr_emu_split_plan(r, in, plan, plan + in->B, plan + 2 * in->B) != MLR_OK) {
    free(plan);
    return mlr_cli_memory_fits(cmd, HUGE_VAL, "the split plan of %s", o->inputs);
  }
  for (int64_t b = 0; b < in->B; b++) S = plan[b] > S ? plan[b] : S;
  free(plan);
  const double rows = (double)in->T * (double)in->H, osz = r->out_format == MLR_OUT_FP32 ? 4 : 2;
  const double need = in_bytes + rows * MLR_EMU_V_DIM * osz + rows * 4 +
                      (o->emu.partials ? rows * (double)S * (MLR_EMU_V_DIM + 1) * 4 : 0);
  return mlr_cli_memory_fits(cmd, need, "%s with its outputs (%lld query tokens x %lld heads%s)",
                             o->inputs, (long long)in->T, (long long)in->H,
                             o->emu.partials ? " x their split partials" : "");
}

/* the outputs' file (result_file) written to out: MLR_OK, or the status with err's message */
static mlr_status write_result(const mlr_emu_result *res, const mlr_recipe *r, const char *inputs,
                               const char *out, mlr_error *err) {
  mlr_tensor_file of;
  mlr_tf_init(&of);
  mlr_status st = result_file(res, r, inputs, &of);
  if (st == MLR_OK)
    st = mlr_safetensors_write(out, &of, err);
  else
    snprintf(err->msg, sizeof err->msg, "%s: %s", out, mlr_status_str(st));
  mlr_tf_free(&of);
  return st;
}

/* run (gpu = 0) and gpu run (gpu = 1): the same options and output file */
static int run_main(const char *cmd, int argc, char **argv, int gpu) {
  run_opts o;
  int rc = run_args(cmd, argc, argv, gpu, &o);
  if (rc != MLR_EXIT_OK) return rc;
  mlr_recipe r;
  if ((rc = mlr_cli_recipe_sets(cmd, o.recipe, o.sets, o.nsets, &r)) != MLR_EXIT_OK) return rc;
  mlr_error err = {""};
  if (gpu && strcmp(o.kernel, "fast") == 0 && mlr_gpu_fast_fit(&r, NULL, &err) != MLR_OK)
    return mlr_cli_usage_error(cmd, "%s", err.msg);
  char device[256] = "";
  if (gpu && mlr_gpu_device(device, sizeof device, &err) != MLR_OK)
    return mlr_cli_usage_error(cmd, "%s", err.msg);
  double in_bytes;
  if ((rc = mlr_cli_file_fits(cmd, o.inputs, &in_bytes)) != MLR_EXIT_OK) return rc;
  mlr_tensor_file tf;
  mlr_inputs in;
  if ((rc = mlr_cli_read_inputs(cmd, o.inputs, o.allow, &tf, &in)) != MLR_EXIT_OK) return rc;
  mlr_status st;
  if ((rc = outputs_fit(cmd, &o, &r, &in, in_bytes)) != MLR_EXIT_OK) {
    mlr_tf_free(&tf);
    return rc;
  }
  const double t0 = mlr_cli_now();
  mlr_emu_result res;
  mlr_gpu_timing tm = {0, 0, 0, 0, 0, 0};
  const int fast = gpu && strcmp(o.kernel, "fast") == 0;
  char kn[64] = "";
  if (fast)
    st = fast_run(&r, &in, &o.fo, &res, &tm, kn, sizeof kn, &err);
  else
    st = gpu ? mlr_gpu_exact(&r, &in, &res, &tm, &err) : mlr_emulate(&r, &in, &o.emu, &res, &err);
  const double secs = mlr_cli_now() - t0;
  if (st != MLR_OK) {
    mlr_tf_free(&tf);
    if (st == MLR_EINVAL)
      return mlr_cli_usage_error(cmd, "%s with %s: %s", o.recipe, o.inputs, err.msg);
    return mlr_cli_fail(cmd, "%s", err.msg);
  }
  st = write_result(&res, &r, o.inputs, o.out, &err);
  if (st == MLR_OK && gpu)
    printf("gpu run: %s kernel on %s (%s): %s on %s: %lld tokens x %lld heads, %lld batches, up to "
           "%lld splits, %lld Q elements "
           "clipped; kernels %.3f ms%s%s%s, %.3f s in all; wrote %s\n",
           o.kernel, device, mlr_gpu_backend(), r.name, o.inputs, (long long)res.T,
           (long long)res.H, (long long)res.B, (long long)res.S, (long long)res.q_clipped,
           tm.kernel_ms, *kn ? " (" : "", kn, *kn ? ")" : "", secs, o.out);
  else if (st == MLR_OK)
    printf("run: %s on %s: %lld tokens x %lld heads, %lld batches, up to %lld splits, %lld Q "
           "elements clipped; %.3f s; wrote %s\n",
           r.name, o.inputs, (long long)res.T, (long long)res.H, (long long)res.B, (long long)res.S,
           (long long)res.q_clipped, secs, o.out);
  mlr_emu_result_free(&res);
  mlr_tf_free(&tf);
  if (st != MLR_OK) {
    fprintf(stderr, "mlaref %s: %s\n", cmd, err.msg);
    return st == MLR_EIO ? MLR_EXIT_USAGE : MLR_EXIT_FAIL;
  }
  return MLR_EXIT_OK;
}

int mlr_cmd_run(int argc, char **argv) { return run_main("run", argc, argv, 0); }

int mlr_cmd_gpu(int argc, char **argv) {
  const char *sub = argc > 0 ? argv[0] : "";
  if (mlr_cli_asks_help(argc, argv) ||
      (strcmp(sub, "info") == 0 && mlr_cli_asks_help(argc - 1, argv + 1)))
    return mlr_cli_help("gpu");
  if (strcmp(sub, "run") == 0) return run_main("gpu run", argc - 1, argv + 1, 1);
  if (strcmp(sub, "info") == 0) {
    if (argc > 1) return mlr_cli_usage_error("gpu info", "takes no options ('%s')", argv[1]);
    char name[256];
    mlr_error err = {""};
    if (mlr_gpu_device(name, sizeof name, &err) != MLR_OK)
      return mlr_cli_usage_error("gpu info", "%s", err.msg);
    printf("gpu: %s runtime, device 0: %s, kernels: exact, fast\n", mlr_gpu_backend(), name);
    return MLR_EXIT_OK;
  }
  return mlr_cli_usage_error("gpu", "unknown subcommand '%s' (valid: run, info)", sub);
}
