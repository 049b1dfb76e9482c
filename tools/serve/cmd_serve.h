/* cmd_serve.h — `memra serve`: an OpenAI-compatible HTTP server over one model. */
#ifndef MEMRA_CMD_SERVE_H
#define MEMRA_CMD_SERVE_H

/* argv[first..argc) are the flags (the shared model flags plus the server's). Blocks
 * until SIGINT or SIGTERM, then shuts down gracefully. Returns the exit status. */
int memra_cmd_serve(int argc, char **argv, int first);

#endif
