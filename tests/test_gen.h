/* Test helper: inputs generated in memory from a spec and checked against the contract. */
#ifndef MLR_TEST_GEN_H
#define MLR_TEST_GEN_H

#include <criterion/criterion.h>

#include "mlr_gen.h"
#include "mlr_inputs.h"

typedef struct gen {
  mlr_tensor_file tf;
  mlr_inputs in;
} gen;

/* the tensors of a spec, unchecked (a test that breaks them checks them itself) */
static inline void gen_file(const char *spec_text, mlr_tensor_file *tf) {
  mlr_gen_spec spec;
  mlr_error err = {""};
  cr_assert_eq(mlr_gen_spec_parse(spec_text, &spec, &err), MLR_OK, "%s: %s", spec_text, err.msg);
  cr_assert_eq(mlr_gen_inputs(&spec, tf, NULL, NULL, &err), MLR_OK, "%s", err.msg);
  mlr_gen_spec_free(&spec);
}

static inline void gen_make(gen *g, const char *spec_text) {
  mlr_error err = {""};
  gen_file(spec_text, &g->tf);
  cr_assert_eq(mlr_inputs_check(&g->tf, spec_text, 0, &g->in, &err), MLR_OK, "%s", err.msg);
}

#endif
