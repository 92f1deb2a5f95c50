/* opts.c: the fast kernel's variant options (mlr_gpu_fast_opts, mlr_gpu_fast.h): their defaults,
 * their range check and the "key=value,..." form of `mlaref gpu run --variant` and `mlaref bench
 * gpu --variant`. Pure C, in every build. */
#include <stdio.h>
#include <string.h>

#include "mlr_gpu_fast.h"

#ifdef MLR_FAST_FAULTS
/* a test build's planted faults (gpu/fast/host.cu): 1 drop-last, 2 causal-late, 3 no-kv-scale,
 * 4 page-off-by-one */
#define VALID                                                                                      \
  "valid: ws=0|1, cluster=0|1, toktable=0|1, qdiv=0|1, lin=0|1|2, rows=0|1, tma=0|1, fault=0..4, " \
  "comma-separated"
#else
#define VALID                                                                                      \
  "valid: ws=0|1, cluster=0|1, toktable=0|1, qdiv=0|1, lin=0|1|2, rows=0|1, tma=0|1, "             \
  "comma-separated"
#endif

/* the options by name: the field and its largest value */
static const struct {
  const char *name;
  size_t off;
  int max;
} KEYS[] = {
    {"ws", offsetof(mlr_gpu_fast_opts, ws), 1},
    {"cluster", offsetof(mlr_gpu_fast_opts, cluster), 1},
    {"toktable", offsetof(mlr_gpu_fast_opts, toktable), 1},
    {"qdiv", offsetof(mlr_gpu_fast_opts, qdiv), 1},
    {"lin", offsetof(mlr_gpu_fast_opts, lin), 2},
    {"rows", offsetof(mlr_gpu_fast_opts, rows), 1},
    {"tma", offsetof(mlr_gpu_fast_opts, tma), 1},
#ifdef MLR_FAST_FAULTS
    {"fault", offsetof(mlr_gpu_fast_opts, fault), 4},
#endif
};
enum { NKEYS = sizeof KEYS / sizeof KEYS[0] };

static int *field(mlr_gpu_fast_opts *o, int k) { return (int *)((char *)o + KEYS[k].off); }

void mlr_gpu_fast_opts_init(mlr_gpu_fast_opts *o) {
  for (int k = 0; k < NKEYS; k++) *field(o, k) = -1;
  o->fault = 0; /* not a plan choice: no fault unless asked for */
}

mlr_status mlr_gpu_fast_opts_check(const mlr_gpu_fast_opts *o, mlr_error *err) {
  mlr_gpu_fast_opts c = *o;
  for (int k = 0; k < NKEYS; k++) {
    const int v = *field(&c, k);
    if (v < -1 || v > KEYS[k].max)
      return mlr_error_set(err, MLR_EINVAL,
                           "the fast kernel's option %s is %d: -1 (the plan's choice) or 0..%d",
                           KEYS[k].name, v, KEYS[k].max);
  }
  return MLR_OK;
}

mlr_status mlr_gpu_fast_opts_parse(const char *spec, mlr_gpu_fast_opts *o, mlr_error *err) {
  mlr_gpu_fast_opts_init(o);
  int given[NKEYS] = {0};
  for (const char *item = spec;; item++) {
    const size_t n = strcspn(item, ",");
    const char *eq = memchr(item, '=', n);
    int k = 0;
    while (eq && k < NKEYS &&
           (strlen(KEYS[k].name) != (size_t)(eq - item) ||
            strncmp(item, KEYS[k].name, (size_t)(eq - item)) != 0))
      k++;
    if (!eq)
      return mlr_error_set(err, MLR_EINVAL, "'%.*s' is not key=value (%s)", (int)n, item, VALID);
    if (k == NKEYS)
      return mlr_error_set(err, MLR_EINVAL, "'%.*s': no variant '%.*s' (%s)", (int)n, item,
                           (int)(eq - item), item, VALID);
    const char *v = eq + 1;
    if (v + 1 != item + n || *v < '0' || *v > '0' + KEYS[k].max)
      return mlr_error_set(err, MLR_EINVAL, "'%.*s': %s takes 0..%d (%s)", (int)n, item,
                           KEYS[k].name, KEYS[k].max, VALID);
    if (given[k]++)
      return mlr_error_set(err, MLR_EINVAL, "'%.*s': %s given twice (%s)", (int)n, item,
                           KEYS[k].name, VALID);
    *field(o, k) = *v - '0';
    item += n;
    if (!*item) break;
  }
  return MLR_OK;
}
