/*
 * ngx_llm_engine's commands besides serve (main.c dispatches): generate
 * (cli.c), bench (cli_bench.c), plan (cli_plan.c), synth (cli_synth.c),
 * and what they share.
 *
 * defines: llm_cli_generate, llm_cli_bench, llm_cli_plan, llm_cli_synth,
 *          llm_cli_read_file
 */
#ifndef NGX_LLM_CLI_H
#define NGX_LLM_CLI_H

#include <stddef.h>

int llm_cli_generate(int argc, char **argv);
int llm_cli_bench(int argc, char **argv);
int llm_cli_plan(int argc, char **argv);
int llm_cli_synth(int argc, char **argv);

/* a whole file, NUL-terminated, in malloc'ed memory; NULL with one line
   on stderr ("WHO: PATH: why") when it cannot be read or has max bytes
   or more (max 0: any size) */
char *llm_cli_read_file(const char *who, const char *path, size_t max,
    size_t *len);

#endif /* NGX_LLM_CLI_H */
