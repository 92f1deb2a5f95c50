// GPU side of the bit-identity probe (see bits_digest.h): for each function, the digest over
// every 7th binary32 pattern (compared with tests/data/bits_digests.txt, made on the CPU) and
// over all 2^32 patterns on the GPU and on this machine's CPU (OpenMP), which must agree.
// Build: nvcc with -fmad=false -prec-div=true -prec-sqrt=true -ftz=false (scripts/gpu_run.sh).
#include "gpu/hip_compat.h"
#include "gpu/probes/bits_digest.h"

#include <omp.h>
#include <stdint.h>
#include <stdio.h>

__global__ void digest_kernel(int fn, uint64_t stride, uint64_t count, unsigned long long *out) {
  uint64_t sum = 0;
  for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < count;
       k += (uint64_t)gridDim.x * blockDim.x)
    sum += mlr_digest_item(fn, (uint32_t)(k * stride));
  atomicAdd(out, (unsigned long long)sum); // addition mod 2^64: order-independent
}

static uint64_t gpu_digest(int fn, uint64_t stride, unsigned long long *d_sum) {
  const uint64_t count = (0xFFFFFFFFull / stride) + 1;
  MLR_GPU_CHECK(hipMemset(d_sum, 0, sizeof *d_sum));
  digest_kernel<<<132 * 16, 256>>>(fn, stride, count, d_sum);
  MLR_GPU_CHECK(hipGetLastError());
  unsigned long long h = 0;
  MLR_GPU_CHECK(hipMemcpy(&h, d_sum, sizeof h, hipMemcpyDeviceToHost));
  return h;
}

static uint64_t cpu_digest(int fn, uint64_t stride) {
  const long long count = (long long)(0xFFFFFFFFull / stride) + 1;
  uint64_t sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (long long k = 0; k < count; k++)
    sum += mlr_digest_item(fn, (uint32_t)((uint64_t)k * stride));
  return sum;
}

int main(int argc, char **argv) {
  const int full = !(argc > 1 && argv[1][0] == 's'); // "stride7" alone skips the full range
  unsigned long long *d_sum;
  MLR_GPU_CHECK(hipMalloc((void **)&d_sum, sizeof *d_sum));
  for (int fn = 0; fn < MLR_DIGEST_FNS; fn++)
    printf("%-26s stride7 %016llx\n", mlr_digest_names[fn],
           (unsigned long long)gpu_digest(fn, 7, d_sum));
  fflush(stdout);
  int bad = 0;
  if (full) {
    for (int fn = 0; fn < MLR_DIGEST_FNS; fn++) {
      const uint64_t g = gpu_digest(fn, 1, d_sum), c = cpu_digest(fn, 1);
      fprintf(stderr, "%-26s all-2^32 gpu %016llx cpu %016llx %s\n", mlr_digest_names[fn],
              (unsigned long long)g, (unsigned long long)c, g == c ? "same" : "DIFFERENT");
      bad |= g != c;
    }
  }
  MLR_GPU_CHECK(hipFree(d_sum));
  return bad;
}
