/* The fast kernel's fit test as a HIP build compiles it (gpu/fast/fast_recipe.c with MLR_FAST_MFMA:
 * the AMD MFMA variant's recipes). CI builds the CUDA library, so this is where that branch runs.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "mlr_gpu_fast.h"
#include "mlr_formats.h"

Test(fast_fit_mfma, amd_recipes_only) {
  cr_assert_str_eq(mlr_gpu_fast_platform_recipes(), "fast-mi300-a16w8|fast-mi300-a8w8");
  mlr_recipe a16, a8, nv, bad;
  mlr_error err = {""};
  cr_assert_eq(mlr_gpu_fast_recipe("fast-mi300-a16w8", &a16), MLR_OK);
  cr_assert_eq(mlr_gpu_fast_recipe("fast-mi300-a8w8", &a8), MLR_OK);
  cr_assert_eq(mlr_gpu_fast_recipe("fast-a16w8", &nv), MLR_OK);
  cr_assert_eq(a8.q_format, MLR_Q_E4M3FNUZ);
  cr_assert_eq(a16.softmax_block, 64);
  cr_assert_eq(mlr_gpu_fast_fit(&a16, NULL, &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(mlr_gpu_fast_fit(&a8, NULL, &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(mlr_gpu_fast_fit(&nv, NULL, &err), MLR_EINVAL);
  cr_assert(
      strstr(err.msg,
             "recipe 'fast-a16w8': the fast kernel (AMD MFMA) computes qk.operand = bf16 only"),
      "%s", err.msg);
  bad = a8;
  cr_assert_eq(mlr_recipe_set(&bad, "q.scale=per_head", &err), MLR_OK, "%s", err.msg);
  cr_assert_eq(mlr_gpu_fast_fit(&bad, NULL, &err), MLR_EINVAL);
  cr_assert(strstr(err.msg, "quantizes Q with one scale"), "%s", err.msg);
  /* inputs: fp8 KV of 16 or 128 heads fits; bf16 KV and 129 heads do not */
  static uint16_t q[129 * 576];
  static uint8_t kv[4 * 576];
  const int32_t qo[2] = {0, 1}, kvi[2] = {0, 4};
  mlr_inputs in;
  memset(&in, 0, sizeof in);
  in.T = 1;
  in.H = 16;
  in.N = 4;
  in.B = 1;
  in.page = 1;
  in.q = q;
  in.kv = kv;
  in.kv_format = MLR_FMT_E4M3FNUZ;
  in.kv_scale = 1.0f;
  in.qo_indptr = qo;
  in.kv_indptr = kvi;
  cr_assert_eq(mlr_gpu_fast_fit(&a16, &in, &err), MLR_OK, "%s", err.msg);
  in.kv_format = MLR_FMT_BF16;
  cr_assert_eq(mlr_gpu_fast_fit(&a16, &in, &err), MLR_EINVAL);
  cr_assert(strstr(err.msg, "the fast kernel's AMD variant reads fp8 KV (e4m3 or e4m3fnuz); these "
                            "inputs have bf16 KV"),
            "%s", err.msg);
  in.kv_format = MLR_FMT_E4M3;
  in.H = 128;
  cr_assert_eq(mlr_gpu_fast_fit(&a16, &in, &err), MLR_OK, "%s", err.msg);
  in.H = 129;
  cr_assert_eq(mlr_gpu_fast_fit(&a16, &in, &err), MLR_EINVAL);
  cr_assert(strstr(err.msg, "runs 1..128 heads; the inputs have 129"), "%s", err.msg);
}
