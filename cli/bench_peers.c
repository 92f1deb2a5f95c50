/* The peers' times beside `bench gpu` (bench_peers.h). */
#include "bench_peers.h"

#include <stdio.h>
#include <string.h>

/* an integer field of a shape entry, def where absent */
static int64_t field(json_t *s, const char *k, int64_t def) {
  json_t *v = json_object_get(s, k);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : def;
}

static int same_shape(json_t *s, int64_t bs, int64_t kv, int64_t heads, int64_t q) {
  return field(s, "bs", -1) == bs && field(s, "kv", -1) == kv && field(s, "heads", 16) == heads &&
         field(s, "q", 1) == q;
}

int mlr_bench_peers_load(mlr_bench_peers *p, const char *file, char *why, size_t n) {
  json_error_t je;
  json_t *j = json_load_file(file, 0, &je);
  if (!j || !json_is_array(json_object_get(j, "shapes"))) {
    if (j)
      snprintf(why, n, "no 'shapes' array");
    else if (je.line < 1) /* the file could not be read */
      snprintf(why, n, "%s", je.text);
    else
      snprintf(why, n, "line %d: %s", je.line, je.text);
    json_decref(j);
    return -1;
  }
  if (p->nfile == MLR_BENCH_PEER_FILES) {
    snprintf(why, n, "more than %d files", MLR_BENCH_PEER_FILES);
    json_decref(j);
    return -1;
  }
  p->files[p->nfile++] = j;
  size_t i;
  json_t *s;
  json_array_foreach(json_object_get(j, "shapes"), i, s) {
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(s, "kernels"), k, v) {
      int seen = 0;
      for (int m = 0; m < p->nname; m++) seen |= !strcmp(p->names[m], k);
      if (!seen && p->nname < MLR_BENCH_PEER_KERNELS) p->names[p->nname++] = k;
    }
  }
  return 0;
}

void mlr_bench_peers_free(mlr_bench_peers *p) {
  for (int f = 0; f < p->nfile; f++) json_decref(p->files[f]);
  memset(p, 0, sizeof *p);
}

double mlr_bench_peers_seed_us(const mlr_bench_peers *p, int64_t bs, int64_t kv, int64_t heads,
                               int64_t q) {
  double best = 0;
  for (int f = 0; f < p->nfile; f++) {
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(p->files[f], "shapes"), i, s) {
      if (!same_shape(s, bs, kv, heads, q)) continue;
      const char *k;
      json_t *v;
      json_object_foreach(s, k, v) {
        const double us = json_number_value(json_object_get(v, "us"));
        if (strncmp(k, "triton", 6) == 0 && us > 0 && (best == 0 || us < best)) best = us;
      }
    }
  }
  return best;
}

double mlr_bench_peers_kernel_us(const mlr_bench_peers *p, int k, int64_t bs, int64_t kv,
                                 int64_t heads, int64_t q) {
  for (int f = 0; f < p->nfile; f++) {
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(p->files[f], "shapes"), i, s) {
      if (!same_shape(s, bs, kv, heads, q)) continue;
      json_t *e = json_object_get(json_object_get(s, "kernels"), p->names[k]);
      const double us = json_number_value(json_object_get(e, "us"));
      if (us > 0) return us;
    }
  }
  return 0;
}
