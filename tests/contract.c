/* The build turns contraction off: a*b + c is two roundings unless fma() is written. The
 * probe is compiled with -mfma, so the compiler could fuse it; only -ffp-contract=off stops
 * it. A copy of the same source built with contraction on shows that fusion would change
 * the result here, so this test would catch a build that lost the flag. */
#include <criterion/criterion.h>
#include <math.h>

double probe_project(double, double, double);
double probe_contracted(double, double, double);

/* a*b = 1 - 2^-60 exactly; rounded it is 1, so a*b - 1 is 0 with two roundings and -2^-60 fused */
static const double A = 1.0 + 0x1p-30, B = 1.0 - 0x1p-30, C = -1.0;

Test(contract, project_flags_keep_two_roundings) {
  cr_assert_eq(probe_project(A, B, C), 0.0, "a*b+c was fused: the build lost -ffp-contract=off");
  cr_assert_eq(fma(A, B, C), -0x1p-60, "an explicit fma() is fused");
}

Test(contract, a_contracted_build_would_be_caught) {
  if (!__builtin_cpu_supports("fma"))
    cr_skip_test("this CPU has no FMA instruction: the contracted probe cannot run");
  cr_assert_eq(probe_contracted(A, B, C), -0x1p-60,
               "with contraction on, the compiler fuses a*b+c");
  cr_assert_neq(probe_contracted(A, B, C), probe_project(A, B, C));
}
