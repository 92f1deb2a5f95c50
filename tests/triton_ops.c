/* The steps that model what Triton and CUDA emit on an H200 (ref/emulate/mlr_emu_ops.h): Triton's
 * 2-byte dot operand order (dot.k_order = triton), tl.sum over a 4-warp mma tile (tl32x4) and
 * libdevice's logf (lse.log = cuda-logf). Whole kernels built from them are checked against the
 * kernels' outputs in tests/third_party.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <mpfr.h>
#include <string.h>

#include "mlr_emu_ops.h"

Test(triton_ops, k4_order_is_a_permutation_of_each_32) {
  int seen[576] = {0};
  for (int p = 0; p < 576; p++) {
    const int i = mlr__emu_k4_index(p);
    cr_assert(i >= 0 && i < 576 && i / 32 == p / 32, "position %d holds %d", p, i);
    seen[i]++;
  }
  for (int i = 0; i < 576; i++) cr_assert_eq(seen[i], 1, "index %d", i);
  /* the first mma.sync of a 32: its thread t holds k = 2t, 2t+1 and 8+2t, 9+2t, filled from the
   * 4 consecutive values 4t..4t+3 the thread loads (the second instruction takes 4t+2, 4t+3) */
  static const int first[16] = {0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29};
  for (int p = 0; p < 16; p++) {
    cr_assert_eq(mlr__emu_k4_index(p), first[p], "position %d", p);
    cr_assert_eq(mlr__emu_k4_index(p + 16), first[p] + 2, "position %d", p + 16);
    cr_assert_eq(mlr__emu_k4_index(p + 512), first[p] + 512, "rope position %d", p);
  }
}

/* (b0 + b2) + (b1 + b3) over the warps: 1 + (2^-24 + 2^-24) keeps both halves, where token
 * order (and the fast kernel's groups of 16) add each 2^-24 to 1 alone and lose it */
Test(triton_ops, tl32x4_sums_warps_by_butterfly) {
  float p[32] = {0};
  p[0] = 1.0f;
  p[8] = 0x1p-24f;  /* warp 1 */
  p[24] = 0x1p-24f; /* warp 3 */
  cr_assert_eq(mlr__emu_rowsum(MLR_SUM_TL32X4, p, 32), 1.0f + 0x1p-23f);
  cr_assert_eq(mlr__emu_rowsum(MLR_SUM_SEQ, p, 32), 1.0f);
  cr_assert_eq(mlr__emu_rowsum(MLR_SUM_WARP16, p, 32), 1.0f);
  /* within a warp the lanes pair as (a0 + a2) + (a1 + a3): tokens 0 and 4 (lanes 0 and 2) meet
   * first */
  float q[32] = {0};
  q[0] = 1.0f;
  q[2] = 0x1p-24f; /* lane 1 */
  q[6] = 0x1p-24f; /* lane 3 */
  cr_assert_eq(mlr__emu_rowsum(MLR_SUM_TL32X4, q, 32), 1.0f + 0x1p-23f);
  q[4] = q[2], q[2] = 0.0f; /* lanes 2 and 3: 1 + 2^-24 first, rounded away */
  cr_assert_eq(mlr__emu_rowsum(MLR_SUM_TL32X4, q, 32), 1.0f);
  /* tokens past n are masked (p = 0): with n = 9 token 24 is out, 1 + 2^-24 rounds to 1 */
  cr_assert_eq(mlr__emu_rowsum(MLR_SUM_TL32X4, p, 9), 1.0f);
}

/* libdevice's logf: the special values the PTX sequence gives, and within 1 ulp of ln x (its
 * documented bound) on a sweep of the normal and subnormal floats, checked with MPFR */
Test(triton_ops, cuda_logf_special_values_and_one_ulp) {
  cr_assert_eq(mlr__emu_logf_cuda(1.0f), 0.0f);
  cr_assert(isinf(mlr__emu_logf_cuda(0.0f)) && mlr__emu_logf_cuda(0.0f) < 0);
  cr_assert(isinf(mlr__emu_logf_cuda(-0.0f)) && mlr__emu_logf_cuda(-0.0f) < 0);
  cr_assert(isnan(mlr__emu_logf_cuda(-1.0f)));
  cr_assert(isnan(mlr__emu_logf_cuda(NAN)));
  cr_assert_eq(mlr__emu_logf_cuda(INFINITY), INFINITY);
  mpfr_t x;
  mpfr_init2(x, 24);
  int worst = 0;
  for (uint32_t b = 1; b < 0x7F800000u; b += 4099) { /* every exponent, many significands */
    const float v = mlr_bits_f32(b), y = mlr__emu_logf_cuda(v);
    mpfr_set_flt(x, v, MPFR_RNDN);
    mpfr_log(x, x, MPFR_RNDN); /* ln x rounded to 24 bits: the reference */
    const float ref = mpfr_get_flt(x, MPFR_RNDN);
    const int d = abs((int)(mlr_f32_bits(fabsf(y)) - mlr_f32_bits(fabsf(ref))));
    cr_assert((y < 0) == (ref < 0) || y == 0 || ref == 0, "x %a: %a vs %a", (double)v, (double)y,
              (double)ref);
    worst = d > worst ? d : worst;
  }
  mpfr_clear(x);
  cr_assert_leq(worst, 1, "max %d ulp from the correctly rounded ln", worst);
}
