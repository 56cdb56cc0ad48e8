/*
 * A whole file read into memory: the one copy of the fopen/ftell/fread
 * sequence that the command line (server/cli.c), tokenizer.json's
 * reader (tokenizer/hf.c), the synthetic models (model/synth.c), the
 * unit tests (t/unit/tap.h's tap_slurp, t/unit/json_schema_dump.c) and
 * the benchmarks (bench/grammar_bench.c, bench/serve_bench.c) share.
 * Blocking stdio: at load or config time,
 * never in an nginx worker's request path.
 *
 * defines: llm_read_file
 */
#ifndef NGX_LLM_FILE_H
#define NGX_LLM_FILE_H

#include <stddef.h>

/* the file at path, NUL-terminated, its length in *len (unless NULL);
 * NULL with errno set where it cannot be opened or read, or has max
 * bytes or more (EFBIG; max 0: no limit); the caller frees it */
char *llm_read_file(const char *path, size_t max, size_t *len);

#endif /* NGX_LLM_FILE_H */
