/* cmd_tokenize.h — `memra tokenize`: text to token ids, like llama-tokenize. */
#ifndef MEMRA_CMD_TOKENIZE_H
#define MEMRA_CMD_TOKENIZE_H

#ifdef __cplusplus
extern "C" {
#endif

/* argv[0] is "tokenize". Returns the process exit status (0 ok, 1 error, 2 usage). */
int memra_cmd_tokenize(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
