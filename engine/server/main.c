/*
 * ngx_llm_engine: the engine executable.
 *
 *   ngx_llm_engine serve ...      the engine process nginx starts (server.c)
 *   ngx_llm_engine generate ...   offline generation for users and tests
 *   ngx_llm_engine bench ...      the batching benchmark without nginx
 *   ngx_llm_engine plan ...       the memory plan of a model and settings
 *   ngx_llm_engine quantize IN OUT TYPE   a GGUF requantized (model/quantize.h)
 *   ngx_llm_engine synth ...      a random-weight GGUF of a real shape
 *                                 (model/synth.h, cli_synth.c)
 */
#include <stdio.h>
#include <string.h>

#include "model/quantize.h"
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
        "       ngx_llm_engine quantize IN.gguf OUT.gguf TYPE   (TYPE: %s)\n"
        "       ngx_llm_engine synth --arch ARCH --shape NAME --vocab "
        "VOCAB.gguf [--type TYPE] OUT.gguf\n"
        "       ngx_llm_engine serve [options]   (started by nginx)\n",
        llm_quant_ftype_list());
}


/* quantize IN OUT TYPE: 0, 1 on failure (one line on stderr), 2 usage */
static int
quantize(int argc, char **argv)
{
    char err[512];
    const llm_quant_ftype *ft;

    if (argc != 4) {
        usage();
        return 2;
    }
    if ((ft = llm_quant_ftype_find(argv[3])) == NULL) {
        fprintf(stderr, "ngx_llm_engine quantize: type '%s' is not one of "
                "%s\n", argv[3], llm_quant_ftype_list());
        return 2;
    }
    if (llm_quantize_file(argv[1], argv[2], ft, stdout, err,
                          sizeof(err)) != 0)
    {
        fprintf(stderr, "ngx_llm_engine quantize: %s\n", err);
        return 1;
    }
    return 0;
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

    if (argc >= 2 && strcmp(argv[1], "quantize") == 0) {
        return quantize(argc - 1, argv + 1);
    }

    if (argc >= 2 && strcmp(argv[1], "synth") == 0) {
        return llm_cli_synth(argc - 1, argv + 1);
    }

    if (argc >= 2 && strcmp(argv[1], "serve") == 0) {
        return llm_server_main(argc - 1, argv + 1);
    }

    usage();
    return 2;
}
