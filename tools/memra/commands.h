/* commands.h — the subcommands of the memra CLI; each returns the process exit code
 * (0 ok, 1 runtime failure, 2 bad usage). argv[first..] are the subcommand's arguments. */
#ifndef MEMRA_CLI_COMMANDS_H
#define MEMRA_CLI_COMMANDS_H

int memra_cmd_run(int argc, char **argv, int first);
int memra_cmd_backends(int argc, char **argv, int first);
int memra_cmd_info(int argc, char **argv, int first);
int memra_cmd_bench(int argc, char **argv, int first);
int memra_cmd_chat(int argc, char **argv, int first);
int memra_cmd_gate(int argc, char **argv, int first);
/* memra gate batch / chunk (gate_batch.c, gate_chunk.c), with parsed options. */
struct memra_opts;
int memra_gate_batch(struct memra_opts *o);
int memra_gate_chunk(struct memra_opts *o);

#endif
