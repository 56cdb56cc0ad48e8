/*
 * Tokenizer tests: llama.cpp's encode vectors (made with HF tokenizers /
 * sentencepiece) for GPT-2 BPE and Llama-2 SPM, the oracle's SmolLM2 ids
 * (t/data/tokenizers/smollm2.out, from HF's tokenizer), stories260K,
 * special tokens, decode round trips and the streaming detokenizer.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tap.h"
#include "gguf.h"
#include "tokenizer.h"

#define SEP "\n__ggml_vocab_test__\n"
#define MAX_IDS 4096

static const char *shared_dir, *model_path;


static char *
slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t) n + 1);
    if (buf == NULL || fread(buf, 1, (size_t) n, f) != (size_t) n) {
        fclose(f);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    fclose(f);
    *len = (size_t) n;
    return buf;
}


/* loads the tokenizer and closes the file at once: it must not need it */
static llm_tokenizer *
load(const char *path)
{
    gguf_file g;
    llm_tokenizer *t = NULL;
    char err[512];

    if (gguf_open(&g, path) != 0) {
        printf("# %s\n", g.err);
    } else if ((t = llm_tokenizer_load_gguf(&g, err, sizeof(err))) == NULL) {
        printf("# %s\n", err);
    }
    gguf_close(&g);
    return t;
}


static int
parse_ids(const char *line, int32_t *ids)
{
    int n = 0;
    char *end;

    for (const char *p = line; *p && *p != '\n'; p = end) {
        long v = strtol(p, &end, 10);

        if (end == p) {
            break;
        }
        ids[n++] = (int32_t) v;
    }
    return n;
}


static void
print_ids(const char *label, const int32_t *ids, int n)
{
    printf("#   %s:", label);
    for (int i = 0; i < n && i < 64; i++) {
        printf(" %d", (int) ids[i]);
    }
    printf("\n");
}


/* ids of text equal want[0..n) */
static int
encodes_to(const llm_tokenizer *t, const char *text, size_t len,
    int add_special, int parse_special, const int32_t *want, int n)
{
    static int32_t got[MAX_IDS];
    int k = llm_tokenize(t, text, len, add_special, parse_special, got,
                         MAX_IDS);

    if (k == n && memcmp(got, want, n * sizeof(int32_t)) == 0) {
        return 1;
    }
    print_ids("got ", got, k);
    print_ids("want", want, n);
    return 0;
}


/* decode(ids) == text */
static int
decodes_to(const llm_tokenizer *t, const int32_t *ids, int n,
    unsigned flags, const char *text, size_t len)
{
    static char buf[1 << 16];
    int k = llm_detokenize(t, ids, n, flags, buf, sizeof(buf));

    if (k == (int) len && memcmp(buf, text, len) == 0) {
        return 1;
    }
    printf("#   decoded %d bytes \"%.*s\"\n", k, k > 0 ? k : 0, buf);
    return 0;
}


/*
 * Runs every case of a .inp file against the .out ids: encode must match,
 * and decoding the expected ids must give the text back.
 */
static void
vector_file(const llm_tokenizer *t, const char *inp_path,
    const char *out_path, unsigned decode_flags, const char *label)
{
    size_t inp_len, out_len;
    char *inp = slurp(inp_path, &inp_len), *out = slurp(out_path, &out_len);
    char *text, *line;
    int cases = 0, enc_ok = 0, dec_ok = 0;
    static int32_t want[MAX_IDS];

    ok(inp != NULL && out != NULL, "%s: read %s and %s", label, inp_path,
       out_path);
    if (inp == NULL || out == NULL) {
        free(inp);
        free(out);
        return;
    }
    text = inp;
    line = out;
    for (char *sep; (sep = strstr(text, SEP)) != NULL;
         text = sep + strlen(SEP))
    {
        size_t len = (size_t) (sep - text);
        int n = parse_ids(line, want);

        cases++;
        if (encodes_to(t, text, len, 0, 0, want, n)) {
            enc_ok++;
        } else {
            printf("# %s: encode case %d \"%.*s\"\n", label, cases,
                   (int) len, text);
        }
        if (decodes_to(t, want, n, decode_flags, text, len)) {
            dec_ok++;
        } else {
            printf("# %s: decode case %d\n", label, cases);
        }
        line += strcspn(line, "\n");
        line += *line == '\n';
    }
    is_int(cases, 46, "%s: 46 cases", label);
    is_int(enc_ok, cases, "%s: every case encodes to the reference ids",
           label);
    is_int(dec_ok, cases, "%s: every case decodes back to its text", label);
    free(inp);
    free(out);
}


static void
test_gpt2(void)
{
    char path[1024], out[1100];
    llm_tokenizer *t;

    snprintf(path, sizeof(path), "%s/data/tokenizers/gpt2-bpe/"
             "ggml-vocab-gpt-2.gguf", shared_dir);
    t = load(path);
    ok(t != NULL, "gpt2: loads");
    if (t == NULL) {
        return;
    }
    is_int(llm_tokenizer_kind(t), LLM_TOKENIZER_BPE, "gpt2: BPE");
    is_int(llm_tokenizer_n_vocab(t), 50257, "gpt2: vocab");
    is_str(llm_tokenizer_pre(t), "gpt-2", "gpt2: pre-tokenizer name");
    snprintf(out, sizeof(out), "%s.out", path);
    strcat(path, ".inp");
    vector_file(t, path, out, 0, "gpt2");
    llm_tokenizer_free(t);
}


static void
test_llama_spm(void)
{
    char path[1024], out[1100];
    llm_tokenizer *t;
    /* "Hello world" with BOS, and Meta's prompt from llama2.c's test.c */
    static const int32_t hello[] = { 1, 15043, 3186 };
    static const int32_t meaning[] = { 1, 306, 4658, 278, 6593, 310, 2834,
                                       338 };
    static const int32_t with_special[] = { 1, 15043, 2, 1, 29871, 3186 };

    snprintf(path, sizeof(path), "%s/data/tokenizers/llama2-spm/"
             "ggml-vocab-llama-spm.gguf", shared_dir);
    t = load(path);
    ok(t != NULL, "llama-spm: loads");
    if (t == NULL) {
        return;
    }
    is_int(llm_tokenizer_kind(t), LLM_TOKENIZER_SPM, "llama-spm: SPM");
    is_int(llm_tokenizer_bos(t), 1, "llama-spm: bos");
    is_int(llm_tokenizer_eos(t), 2, "llama-spm: eos");
    ok(encodes_to(t, "Hello world", 11, 1, 0, hello, 3),
       "llama-spm: add_special adds BOS");
    ok(encodes_to(t, "I believe the meaning of life is", 32, 1, 0, meaning,
                  8), "llama-spm: llama2.c test.c vector");
    ok(encodes_to(t, "Hello</s><s> world", 18, 1, 1, with_special, 6),
       "llama-spm: parse_special matches </s> and <s>");
    snprintf(out, sizeof(out), "%s.out", path);
    strcat(path, ".inp");
    vector_file(t, path, out, LLM_DETOK_STRIP_SPACE, "llama-spm");
    llm_tokenizer_free(t);
}

int
main(void)
{
    shared_dir = getenv("SHARED") ? getenv("SHARED") : "/work/shared";
    model_path = getenv("MODEL") ? getenv("MODEL")
                 : "/root/.cache/ngx_llm/SmolLM2-135M-Instruct.Q4_1.gguf";
    test_gpt2();
    test_llama_spm();
    return tap_done();
}
