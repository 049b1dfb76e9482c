/* memra — the command line: run (default), chat, tokenize, backends, info, bench. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "tools/cli/cmd_tokenize.h"
#include "tools/memra/commands.h"
#include "tools/serve/cmd_serve.h"
#include "tools/memra/options.h"

static void usage(FILE *f) {
  fprintf(f, "usage: memra [run] [options]       generate text (prompt from -p or stdin)\n"
             "       memra backends [--plugin-dir DIR]   list plugins and their scores here\n"
             "       memra info [--full] FILE.gguf       metadata and tensor table\n"
             "       memra bench [options]       pp/tg tokens per second, median of -r runs\n"
             "       memra chat [options]        conversation (one message per stdin line)\n"
             "       memra serve [options]       OpenAI-compatible HTTP server (see --help)\n"
             "       memra tokenize [options]    text to token ids\n"
             "       memra gate graph [options]  graph replay == eager, token for token\n"
             "       memra gate batch [options]  each sequence alone == in a batch (--gate-b)\n"
             "       memra gate chunk [options]  prefill in --ubatch chunks == one step\n"
             "options:\n");
  memra_opts_usage(f);
}

int main(int argc, char **argv) {
  if (argc >= 2 &&
      (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))) {
    usage(stdout);
    return 0;
  }
  if (argc >= 2 && argv[1][0] != '-') {
    const char *cmd = argv[1];
    if (!strcmp(cmd, "run")) return memra_cmd_run(argc, argv, 2);
    if (!strcmp(cmd, "backends")) return memra_cmd_backends(argc, argv, 2);
    if (!strcmp(cmd, "info")) return memra_cmd_info(argc, argv, 2);
    if (!strcmp(cmd, "bench")) return memra_cmd_bench(argc, argv, 2);
    if (!strcmp(cmd, "chat")) return memra_cmd_chat(argc, argv, 2);
    if (!strcmp(cmd, "gate")) return memra_cmd_gate(argc, argv, 2);
    if (!strcmp(cmd, "serve")) return memra_cmd_serve(argc, argv, 2);
    if (!strcmp(cmd, "tokenize")) return memra_cmd_tokenize(argc - 1, argv + 1);
    fprintf(stderr,
            "memra: unknown command '%s' (expected run, chat, serve, backends, info, "
            "bench, tokenize, gate; see memra --help)\n",
            cmd);
    return 2;
  }
  return memra_cmd_run(argc, argv, 1);
}
