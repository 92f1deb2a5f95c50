/* Prints the digests of gpu/probes/bits_digest.h over every 7th binary32 pattern, computed on
 * the CPU; the 'bits_digest' test compares them with tests/data/bits_digests.txt, which the
 * GPU probe (gpu/probes/bits_digest.cu) is checked against too. */
#include <stdio.h>

#include "gpu/probes/bits_digest.h"

int main(void) {
  for (int fn = 0; fn < MLR_DIGEST_FNS; fn++) {
    uint64_t sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
    for (long long k = 0; k < (long long)(0x100000000ull / 7 + 1); k++) {
      const uint64_t p = (uint64_t)k * 7;
      if (p <= 0xFFFFFFFFull) sum += mlr_digest_item(fn, (uint32_t)p);
    }
    printf("%-26s stride7 %016llx\n", mlr_digest_names[fn], (unsigned long long)sum);
  }
  return 0;
}
