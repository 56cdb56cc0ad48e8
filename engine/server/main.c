/*
 * ngx_llm_engine: the engine executable.
 *
 *   ngx_llm_engine serve ...      the engine process nginx starts (server.c)
 *   ngx_llm_engine generate ...   offline generation for users and tests
 *   ngx_llm_engine bench ...      the batching benchmark without nginx
 *   ngx_llm_engine plan ...       the memory plan of a model and settings
 */
#include <stdio.h>
#include <string.h>

#include "server/cli.h"
#include "server/server.h"


static void
usage(void)
{
    fprintf(stderr,
        "usage: ngx_llm_engine generate --model PATH (--prompt TEXT | "
        "--chat FILE.json) [options]\n"
        "       ngx_llm_engine bench --model PATH [--streams 1,4,16,64] "
        "[options]\n"
        "       ngx_llm_engine plan (--model PATH | --config config.json | "
        "--layers N ...) [options]\n"
        "       ngx_llm_engine serve [options]   (started by nginx)\n");
}


int
main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "generate") == 0) {
        return llm_cli_generate(argc - 1, argv + 1);
    }

    if (argc >= 2 && strcmp(argv[1], "bench") == 0) {
        return llm_cli_bench(argc - 1, argv + 1);
    }

    if (argc >= 2 && strcmp(argv[1], "plan") == 0) {
        return llm_cli_plan(argc - 1, argv + 1);
    }

    if (argc >= 2 && strcmp(argv[1], "serve") == 0) {
        return llm_server_main(argc - 1, argv + 1);
    }

    usage();
    return 2;
}
