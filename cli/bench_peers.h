/* The peers' times beside `bench gpu`: files of other kernels' medians on the same machine, read
 * by shape. Two kinds of entry in a file's 'shapes' array, matched on bs, kv and, where given,
 * heads (default 16) and q (query tokens a sequence, default 1):
 *  - the seeds' benchmark (.peers/seed_peers.py): variant objects named triton_* with "us";
 *  - scripts/gpu/third_party_bench.py: a "kernels" object of NAME: {"us": median}. */
#ifndef MLAREF_CLI_BENCH_PEERS_H
#define MLAREF_CLI_BENCH_PEERS_H

#include <jansson.h>
#include <stdint.h>

enum { MLR_BENCH_PEER_FILES = 4, MLR_BENCH_PEER_KERNELS = 8 };

typedef struct {
  json_t *files[MLR_BENCH_PEER_FILES];
  int nfile;
  const char *names[MLR_BENCH_PEER_KERNELS]; /* the third-party kernels seen, in order */
  int nname;
} mlr_bench_peers;

/* file read into p: 0, or -1 with the reason in why (n bytes) */
int mlr_bench_peers_load(mlr_bench_peers *p, const char *file, char *why, size_t n);
void mlr_bench_peers_free(mlr_bench_peers *p);

/* the best seed Triton median (us) of the shape, or 0 */
double mlr_bench_peers_seed_us(const mlr_bench_peers *p, int64_t bs, int64_t kv, int64_t heads,
                               int64_t q);

/* third-party kernel k's (index into names) median (us) on the shape, or 0 */
double mlr_bench_peers_kernel_us(const mlr_bench_peers *p, int k, int64_t bs, int64_t kv,
                                 int64_t heads, int64_t q);

#endif
