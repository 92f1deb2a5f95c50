/* The fast kernel's variant options (gpu/fast/opts.c): the defaults, the range check and the
 * "key=value,..." form of `gpu run --variant` and `bench gpu --variant`. Pure C, no GPU. */
#include <criterion/criterion.h>
#include <string.h>

#include "mlr_gpu_fast.h"

Test(fast_opts, defaults_are_the_plans) {
  mlr_gpu_fast_opts o;
  mlr_error err = {""};
  memset(&o, 0x5A, sizeof o);
  mlr_gpu_fast_opts_init(&o);
  cr_assert(o.ws == -1 && o.cluster == -1 && o.toktable == -1 && o.qdiv == -1 && o.lin == -1 &&
            o.rows == -1 && o.tma == -1);
  cr_assert_eq(mlr_gpu_fast_opts_check(&o, &err), MLR_OK, "%s", err.msg);
}

Test(fast_opts, parse_every_key) {
  mlr_gpu_fast_opts o;
  mlr_error err = {""};
  cr_assert_eq(
      mlr_gpu_fast_opts_parse("ws=1,cluster=0,toktable=1,qdiv=1,lin=2,rows=0,tma=0", &o, &err),
      MLR_OK, "%s", err.msg);
  cr_assert(o.ws == 1 && o.cluster == 0 && o.toktable == 1 && o.qdiv == 1 && o.lin == 2 &&
            o.rows == 0 && o.tma == 0);
  cr_assert_eq(mlr_gpu_fast_opts_parse("lin=1", &o, &err), MLR_OK, "%s", err.msg);
  cr_assert(o.ws == -1 && o.cluster == -1 && o.toktable == -1 && o.qdiv == -1 && o.lin == 1 &&
                o.rows == -1 && o.tma == -1,
            "keys not given are the plan's");
  cr_assert_eq(mlr_gpu_fast_opts_check(&o, &err), MLR_OK, "%s", err.msg);
}

Test(fast_opts, refusals_name_the_item) {
  static const struct {
    const char *spec, *msg;
  } BAD[] = {
      {"", "'' is not key=value"},
      {"ws", "'ws' is not key=value"},
      {"ws=1,", "'' is not key=value"},
      {"ws=2", "'ws=2': ws takes 0..1"},
      {"lin=3", "'lin=3': lin takes 0..2"},
      {"lin=11", "'lin=11': lin takes 0..2"},
      {"qdiv=-1", "'qdiv=-1': qdiv takes 0..1"},
      {"rows=2", "'rows=2': rows takes 0..1"},
      {"tma=2", "'tma=2': tma takes 0..1"},
      {"ws=1,frob=0", "'frob=0': no variant 'frob'"},
      {"w=1", "no variant 'w'"},
      {"ws=0,ws=1", "'ws=1': ws given twice"},
  };
  for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; k++) {
    mlr_gpu_fast_opts o;
    mlr_error err = {""};
    cr_assert_eq(mlr_gpu_fast_opts_parse(BAD[k].spec, &o, &err), MLR_EINVAL, "%s", BAD[k].spec);
    cr_assert(strstr(err.msg, BAD[k].msg) && strstr(err.msg, "valid: ws=0|1"), "%s: %s",
              BAD[k].spec, err.msg);
  }
  mlr_gpu_fast_opts o;
  mlr_error err = {""};
  mlr_gpu_fast_opts_init(&o);
  o.lin = 3;
  cr_assert_eq(mlr_gpu_fast_opts_check(&o, &err), MLR_EINVAL);
  cr_assert(strstr(err.msg, "lin is 3"), "%s", err.msg);
}
