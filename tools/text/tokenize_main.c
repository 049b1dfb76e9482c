/* tokenize_main.c — a stand-alone `memra tokenize` for the fixture scripts and tests,
 * until (and besides) the memra CLI. */
#include "tools/cli/cmd_tokenize.h"

int main(int argc, char **argv) { return memra_cmd_tokenize(argc, argv); }
