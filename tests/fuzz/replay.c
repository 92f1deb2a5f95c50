/* Replays fuzz inputs through a target's LLVMFuzzerTestOneInput: every file named, and every file
 * in every folder named (one level). Used by CTest on the committed corpora (tests/fuzz/corpus),
 * so the default and asan-ubsan presets run them without clang's libFuzzer. Exit 0 when every input
 * ran (a crash or an abort ends the process), 2 when a path cannot be read. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return 2;
  }
  uint8_t *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? 2 * cap : 4096;
      uint8_t *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        fprintf(stderr, "replay: out of memory reading %s\n", path);
        return 2;
      }
      buf = nb;
    }
    const size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  fclose(f);
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  long files = 0;
  for (int a = 1; a < argc; a++) {
    struct stat st;
    if (stat(argv[a], &st) != 0) {
      fprintf(stderr, "replay: cannot read %s\n", argv[a]);
      return 2;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (run_file(argv[a])) return 2;
      files++;
      continue;
    }
    DIR *d = opendir(argv[a]);
    if (!d) {
      fprintf(stderr, "replay: cannot list %s\n", argv[a]);
      return 2;
    }
    for (struct dirent *e; (e = readdir(d));) {
      if (e->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
      if (run_file(path)) {
        closedir(d);
        return 2;
      }
      files++;
    }
    closedir(d);
  }
  printf("replay: %ld inputs, no crash\n", files);
  return 0;
}
