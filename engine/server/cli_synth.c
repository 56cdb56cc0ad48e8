/*
 * `ngx_llm_engine synth`: a random-weight GGUF of a real model's shape
 * (engine/model/synth.h; docs/perf.md "Synthetic models").
 *
 *   synth --arch llama|qwen3moe|bert|gpt-oss --shape NAME --vocab VOCAB.gguf
 *         [--type F16|F32|BF16|Q8_0|...] [--layers N] [--seed N]
 *         [--template FILE.jinja] OUT.gguf
 *
 * Exit status: 0 written, 1 failed (one line on stderr), 2 bad arguments.
 *
 * defines: llm_cli_synth
 */
#include "model/quantize.h"
#include "model/synth.h"
#include "server/cli.h"
#include "tensor_type.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static int
synth_usage(void)
{
    fprintf(stderr, "usage: ngx_llm_engine synth --arch ARCH --shape NAME "
            "--vocab VOCAB.gguf [--type TYPE] [--layers N] [--seed N] "
            "[--template FILE] OUT.gguf\n  shapes: %s\n  types: %s\n",
            llm_synth_shapes(), llm_quant_ftype_list());
    return 2;
}


int
llm_cli_synth(int argc, char **argv)
{
    llm_synth_opts o = { NULL, NULL, NULL, NULL, GGML_TYPE_F16, 1, 0, 1 };
    const llm_quant_ftype *ft;
    const char *out = NULL;
    char err[512], *end;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strncmp(a, "--", 2) != 0) {
            if (out) {
                return synth_usage();
            }
            out = a;
            continue;
        }
        if (val == NULL) {
            return synth_usage();
        }
        i++;
        if (strcmp(a, "--arch") == 0) {
            o.arch = val;
        } else if (strcmp(a, "--shape") == 0) {
            o.shape = val;
        } else if (strcmp(a, "--vocab") == 0) {
            o.vocab = val;
        } else if (strcmp(a, "--template") == 0) {
            o.template_path = val;
        } else if (strcmp(a, "--type") == 0) {
            if ((ft = llm_quant_ftype_find(val)) == NULL) {
                fprintf(stderr, "ngx_llm_engine synth: type '%s' is not one "
                        "of %s\n", val, llm_quant_ftype_list());
                return 2;
            }
            o.type = ft->type;
            o.ftype = ft->ftype;
        } else if (strcmp(a, "--layers") == 0
                   || strcmp(a, "--seed") == 0)
        {
            unsigned long long n = strtoull(val, &end, 10);
            if (*val == '\0' || *end != '\0'
                || (a[2] == 'l' && (n < 1 || n > 1024)))
            {
                fprintf(stderr, "ngx_llm_engine synth: bad %s '%s'\n", a,
                        val);
                return 2;
            }
            if (a[2] == 'l') {
                o.layers = (int) n;
            } else {
                o.seed = n;
            }
        } else {
            fprintf(stderr, "ngx_llm_engine synth: unknown option %s\n", a);
            return synth_usage();
        }
    }
    if (o.arch == NULL || o.shape == NULL || o.vocab == NULL || out == NULL) {
        return synth_usage();
    }
    if (llm_synth_file(&o, out, stdout, err, sizeof(err)) != 0) {
        fprintf(stderr, "ngx_llm_engine synth: %s\n", err);
        return 1;
    }
    return 0;
}
