/* fuzz_file.h: the file-reading fuzz targets' one step: the input written to a temporary file of
 * this process (the readers under test take a path, as mlaref does), reused across inputs. */
#ifndef MLR_FUZZ_FILE_H
#define MLR_FUZZ_FILE_H
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char fuzz_path[64];
static void fuzz_file_remove(void) { remove(fuzz_path); }

/* the path holding data[0..size), or NULL when it cannot be written (then the input is skipped);
 * removed when the process exits */
static const char *fuzz_file(const uint8_t *data, size_t size) {
  char *path = fuzz_path;
  if (!path[0]) {
    snprintf(fuzz_path, sizeof fuzz_path, "/tmp/mlr_fuzz_%ld.bin", (long)getpid());
    atexit(fuzz_file_remove);
  }
  FILE *f = fopen(path, "wb");
  if (!f) return NULL;
  const int ok = fwrite(data, 1, size, f) == size;
  return fclose(f) == 0 && ok ? path : NULL;
}
#endif
