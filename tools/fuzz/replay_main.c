/* replay_main.c — a libFuzzer target's checks without libFuzzer: every file in the directories
 * named on the command line goes through LLVMFuzzerTestOneInput once (LLVMFuzzerInitialize first,
 * where the target has one). A broken property aborts, as in the fuzzer, so a regression test is
 * this program over the stored inputs. Exit 0 when at least one input ran. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The file's bytes in a buffer of exactly their size (reads past the input are caught). */
static int replay_file(const char *path, size_t n) {
  FILE *f = fopen(path, "rb");
  uint8_t *buf = malloc(n ? n : 1);
  if (!f || !buf || fread(buf, 1, n, f) != n) {
    fprintf(stderr, "replay: cannot read %s\n", path);
    exit(1);
  }
  fclose(f);
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 1;
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int ran = 0;
  for (int i = 1; i < argc; ++i) {
    DIR *d = opendir(argv[i]);
    if (!d) {
      fprintf(stderr, "replay: cannot open %s\n", argv[i]);
      return 1;
    }
    for (struct dirent *e; (e = readdir(d));) {
      char path[4096];
      struct stat sb;
      snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
      if (e->d_name[0] != '.' && stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
        ran += replay_file(path, (size_t)sb.st_size);
    }
    closedir(d);
  }
  printf("replay: %d inputs, every property held\n", ran);
  return ran > 0 ? 0 : 1;
}
