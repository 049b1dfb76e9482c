/* memra-serve: `memra serve` as its own binary (tests, and until the memra CLI wires it). */
#include "tools/serve/cmd_serve.h"

int main(int argc, char **argv) { return memra_cmd_serve(argc, argv, 1); }
