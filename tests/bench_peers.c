/* The peers' times beside `bench gpu` (cli/bench_peers.h): shapes matched on bs, kv, heads and q
 * with their defaults, the best seed variant, third-party kernels by name across files. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "cli/bench_peers.h"

static const char *write_file(const char *name, const char *text) {
  FILE *f = fopen(name, "w");
  cr_assert(f);
  fputs(text, f);
  fclose(f);
  return name;
}

Test(bench_peers, lookups) {
  mlr_bench_peers p = {0};
  char why[128];
  const char *seeds = write_file(
      "seeds.json", "{\"shapes\": [{\"bs\": 4, \"kv\": 1024, \"triton_single\": {\"us\": 60.5},"
                    " \"triton_split4\": {\"us\": 40.25}, \"other\": {\"us\": 1.0}}]}");
  const char *tp = write_file(
      "tp.json", "{\"shapes\": [{\"bs\": 4, \"kv\": 1024, \"kernels\": {\"flashmla-fp8\": "
                 "{\"us\": 30.0}, \"aiter-triton-dot\": {\"us\": 50.0}}},"
                 " {\"bs\": 4, \"kv\": 1024, \"heads\": 128, \"q\": 2, \"kernels\":"
                 " {\"flashmla-fp8\": {\"us\": 70.0}}}]}");
  cr_assert_eq(mlr_bench_peers_load(&p, seeds, why, sizeof why), 0);
  cr_assert_eq(mlr_bench_peers_load(&p, tp, why, sizeof why), 0);
  cr_assert_eq(p.nname, 2);
  cr_assert_str_eq(p.names[0], "flashmla-fp8");
  cr_assert_eq(mlr_bench_peers_seed_us(&p, 4, 1024, 16, 1), 40.25); /* the best triton_* */
  cr_assert_eq(mlr_bench_peers_seed_us(&p, 4, 1024, 128, 1), 0);    /* heads default 16 */
  cr_assert_eq(mlr_bench_peers_kernel_us(&p, 0, 4, 1024, 16, 1), 30.0);
  cr_assert_eq(mlr_bench_peers_kernel_us(&p, 0, 4, 1024, 128, 2), 70.0);
  cr_assert_eq(mlr_bench_peers_kernel_us(&p, 1, 4, 1024, 128, 2), 0);
  cr_assert_eq(mlr_bench_peers_kernel_us(&p, 1, 4, 8192, 16, 1), 0);
  mlr_bench_peers_free(&p);
  cr_assert_eq(p.nfile, 0);
}

Test(bench_peers, bad_files) {
  mlr_bench_peers p = {0};
  char why[128];
  cr_assert_eq(mlr_bench_peers_load(&p, write_file("a.json", "{\"x\": 1}"), why, sizeof why), -1);
  cr_assert_str_eq(why, "no 'shapes' array");
  cr_assert_eq(mlr_bench_peers_load(&p, "/nonexistent.json", why, sizeof why), -1);
  cr_assert(strstr(why, "unable to open") != NULL, "%s", why);
  cr_assert_eq(
      mlr_bench_peers_load(&p, write_file("c.json", "{\"shapes\": [\n,]}"), why, sizeof why), -1);
  cr_assert(strncmp(why, "line 2: ", 8) == 0, "%s", why);
  const char *ok = write_file("b.json", "{\"shapes\": []}");
  for (int f = 0; f < MLR_BENCH_PEER_FILES; f++)
    cr_assert_eq(mlr_bench_peers_load(&p, ok, why, sizeof why), 0);
  cr_assert_eq(mlr_bench_peers_load(&p, ok, why, sizeof why), -1);
  cr_assert_str_eq(why, "more than 4 files");
  mlr_bench_peers_free(&p);
}
