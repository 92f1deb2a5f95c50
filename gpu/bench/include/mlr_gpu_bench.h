/* mlr_gpu_bench.h: the measurement probes beside the fast kernel, for `mlaref bench gpu`
 * (cli/cmd_bench_gpu_fast.c): the GPU's read bandwidth, the launch floor, and a plan's read floor
 * and plan floor, the bounds its time is judged against. Not part of the kernel's API
 * (mlr_gpu_fast.h): they time kernels written to be timed, not to compute anything. Builds
 * without GPU code answer MLR_EDEVICE. */
#ifndef MLR_GPU_BENCH_H
#define MLR_GPU_BENCH_H

#include "mlr_base.h"
#include "mlr_gpu_fast.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The read floor, in microseconds: the time of a kernel that only reads the KV bytes the batches'
 *  tokens span (their rows of the plan's KV buffer, contiguous from its start, once each, 16-byte
 *  loads and an xor kept), flushed and timed as mlr_gpu_fast_launch times the fast kernel (the
 *  plan's flush: dirty, or clean after mlr_gpu_fast_clean_flush): the least, over 18 readers (1, 2,
 *  4, 8, 16 or 32 blocks an SM, 1, 4 or 8 loads a thread in flight: *blocks_per_sm and *unroll give
 *  the one taken), of each reader's median over reps runs. Each reader is first checked, untimed:
 *  its sum of the words it read against the host's sum of the buffer read back (MLR_EDEVICE when
 *  they differ). A kernel that must read those bytes, timed this way, is not expected to be faster:
 *  a measured bound, not a proven one (it leaves out Q, O and a merge's launch; plain loads, which
 *  evict the flush's dirty lines as any load does). MLR_OK, MLR_ENOMEM, MLR_EDEVICE. */
mlr_status mlr_gpu_fast_read_floor(mlr_gpu_fast *f, int reps, double *us, int *blocks_per_sm,
                                   int *unroll, mlr_error *err);

/** The plan floor, in microseconds: the time of the fast kernel's plan with none of the
 *  attention's arithmetic (gpu/bench/plan_floor.cu: the plan's grid of a block a query token and
 *  split, its clusters or its second kernel, each split's KV rows copied tile by tile through
 *  shared memory as the attention kernel copies them, the splits' results stored and merged as the
 *  fast kernel stores and merges them, sums in place of the arithmetic), flushed and timed as
 *  mlr_gpu_fast_launch times the fast kernel: the median of reps runs. First run untimed and
 *  checked (MLR_EDEVICE when an output is left unwritten or a row's count of KV rows, carried
 *  through the merge, is not its token's length). The fast kernel minus this is what its
 *  arithmetic costs; a measured bound for kernels of this plan, not a proven one. The plan's o and
 *  lse are left as they were. MLR_OK, MLR_ENOMEM, MLR_EDEVICE (also: a HIP build, which has no
 *  clusters or cp.async). */
mlr_status mlr_gpu_fast_plan_floor(mlr_gpu_fast *f, int reps, double *us, mlr_error *err);

/** 1 when this build has the plan floor (NVIDIA builds), 0 otherwise (HIP: no clusters or cp.async
 *  for its skeleton; no GPU build), so a caller can skip it rather than fail on MLR_EDEVICE. */
int mlr_gpu_fast_has_plan_floor(void);

/** GPU 0's read bandwidth in bytes per second: 2 GiB read with 16-byte loads by the read floor's 18
 *  readers (mlr_gpu_fast_read_floor, each checked first), the L2 flushed clean before each of reps
 *  runs (the flush's write, then a read of a second buffer, as mlr_gpu_fast_clean_flush: no
 *  write-back of the flush counted as reading time); the least of the readers' medians. */
mlr_status mlr_gpu_read_bandwidth(int reps, double *bytes_per_s, mlr_error *err);

/** The launch floor, in microseconds: the median over reps of the device-event time of kernels
 *  that do nothing, launched as mlr_gpu_fast_launch launches its own (the L2 flushed before each,
 *  one block an SM, the fast kernel's argument block): *one_us one kernel (the attention alone),
 *  *chain_us two, the second waiting for the first (the attention and the merge). No kernel time
 *  of a shape can be below it. */
mlr_status mlr_gpu_launch_floor(int reps, double *one_us, double *chain_us, mlr_error *err);

#ifdef __cplusplus
}
#endif
#endif
