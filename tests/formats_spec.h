/* An independent description of the formats for the tests, written from the OCP 8-bit
 * floating point specification and IEEE 754, not from ref/formats: the oracles below use
 * only this table, ldexp and comparisons. */
#ifndef MLR_TEST_FORMATS_SPEC_H
#define MLR_TEST_FORMATS_SPEC_H

#include <math.h>
#include <stdint.h>

typedef enum { SPEC_IEEE, SPEC_OCP_E4M3, SPEC_FNUZ } spec_kind;
typedef struct spec {
  const char *name;
  int bits, ebits, mbits, bias;
  spec_kind kind;
} spec;

/* Indexed like mlr_format. */
static const spec SPECS[6] = {
    {"e4m3", 8, 4, 3, 7, SPEC_OCP_E4M3}, {"e4m3fnuz", 8, 4, 3, 8, SPEC_FNUZ},
    {"e5m2", 8, 5, 2, 15, SPEC_IEEE},    {"e5m2fnuz", 8, 5, 2, 16, SPEC_FNUZ},
    {"bf16", 16, 8, 7, 127, SPEC_IEEE},  {"fp16", 16, 5, 10, 15, SPEC_IEEE},
};

static inline uint32_t spec_sign(const spec *s) { return 1u << (s->bits - 1); }
/* magnitude code of the largest finite value */
static inline uint32_t spec_max_code(const spec *s) {
  const uint32_t all = (1u << (s->bits - 1)) - 1u;
  if (s->kind == SPEC_OCP_E4M3) return all - 1u;     /* S.1111.111 is NaN */
  if (s->kind == SPEC_FNUZ) return all;              /* every positive code is finite */
  return (((1u << s->ebits) - 1u) << s->mbits) - 1u; /* below the all-ones exponent */
}
/* the value of magnitude code c by the formula, also past max (an unbounded exponent) */
static inline double spec_value(const spec *s, uint32_t c) {
  const uint32_t e = c >> s->mbits, m = c & ((1u << s->mbits) - 1u);
  if (e == 0) return ldexp((double)m, 1 - s->bias - s->mbits);
  return ldexp((double)((1u << s->mbits) + m), (int)e - s->bias - s->mbits);
}
static inline int spec_has_inf(const spec *s) { return s->kind == SPEC_IEEE; }
static inline uint32_t spec_inf_code(const spec *s) { return ((1u << s->ebits) - 1u) << s->mbits; }
static inline int spec_is_nan(const spec *s, uint32_t code) {
  const uint32_t mag = code & (spec_sign(s) - 1u);
  if (s->kind == SPEC_FNUZ) return code == spec_sign(s);
  if (s->kind == SPEC_OCP_E4M3) return mag == (spec_sign(s) - 1u);
  return mag > spec_inf_code(s);
}

#endif
