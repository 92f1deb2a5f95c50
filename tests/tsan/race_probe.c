/* A planted data race in an OpenMP loop (every thread adds to one unprotected sum): the
 * ThreadSanitizer run (scripts/tsan.sh) must report it, or its clean reports on mlaref prove
 * nothing (a build without TSan, or OpenMP's synchronisation hidden from it). */
#include <stdio.h>

int main(void) {
  long sum = 0;
#pragma omp parallel for num_threads(4)
  for (int i = 0; i < 100000; i++) sum += i; /* the race */
  printf("%ld\n", sum);
  return 0;
}
