/*
 * libFuzzer harness for the tokenizers: arbitrary bytes to ids and back,
 * through each kind of vocabulary we load: GGUF byte-level BPE (gpt-2),
 * GGUF SentencePiece (llama-spm) and Hugging Face tokenizer.json
 * (llama3-bpe, qwen2-bpe, llama2-spm). The first byte picks the tokenizer,
 * the second the flags, the rest is the text.
 *
 *   FIXTURES=~/.cache/ngx_llm/fixtures build/fuzz/fuzz_tokenizer fuzz/corpus/tokenizer
 *
 * Beyond "no crash": every id is in the vocabulary; the streaming
 * detokenizer, fed the ids one by one, writes what llm_detokenize() writes;
 * and for valid UTF-8 encoded without special tokens, decode(encode(x))
 * is x, as tokenizer/tokenizer.h promises (byte-level BPE: always;
 * SentencePiece: unless x holds U+2581, the piece SentencePiece writes
 * for a space; a vocabulary that normalizes, Qwen's NFC: NFC(x), e.g.
 * U+0387 -> U+00B7).
 */
#define _GNU_SOURCE     /* memmem */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

#define N_TOK  5

static const char *const  tok_names[N_TOK] = {
    "llama.cpp/ggml-vocab-gpt-2.gguf",
    "llama.cpp/ggml-vocab-llama-spm.gguf",
    "tokenizers/llama3-bpe",
    "tokenizers/qwen2-bpe",
    "tokenizers/llama2-spm",
};

/* SentencePiece's normalisation: a space is written U+2581 */
static const int  tok_spm[N_TOK] = { 0, 1, 0, 0, 1 };
/* the tokenizer.json's normalizer is NFC (Qwen's) */
static const int  tok_nfc[N_TOK] = { 0, 0, 0, 1, 0 };

static llm_tokenizer  *toks[N_TOK];


static llm_tokenizer *
load(const char *fixtures, const char *name)
{
    char            path[4096], err[256];
    gguf_file       g;
    llm_tokenizer  *t;

    snprintf(path, sizeof(path), "%s/%s", fixtures, name);
    if (strstr(name, ".gguf") == NULL) {
        t = llm_tokenizer_load_hf(path, err, sizeof(err));

    } else {
        if (gguf_open(&g, path) != 0) {
            fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, g.err);
            exit(1);
        }
        t = llm_tokenizer_load_gguf(&g, err, sizeof(err));
        gguf_close(&g);
    }
    if (t == NULL) {
        fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, err);
        exit(1);
    }
    return t;
}


int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    int          i;
    const char  *fixtures = getenv("FIXTURES");

    (void) argc;
    (void) argv;
    if (fixtures == NULL || fixtures[0] == '\0') {
        fprintf(stderr, "fuzz_tokenizer: FIXTURES is not set (the folder "
                "make deps fills; make fuzz sets it)\n");
        exit(1);
    }
    for (i = 0; i < N_TOK; i++) {
        toks[i] = load(fixtures, tok_names[i]);
    }
    return 0;
}


/* strict UTF-8: no overlongs, surrogates or code points past U+10FFFF */
static int
is_utf8(const uint8_t *p, size_t n)
{
    size_t    i, k, len;
    uint32_t  cp;

    for (i = 0; i < n; i += len) {
        if (p[i] < 0x80) {
            len = 1;
            continue;
        }
        len = (p[i] >= 0xf0) ? 4 : (p[i] >= 0xe0) ? 3 : (p[i] >= 0xc0) ? 2 : 0;
        if (len == 0 || p[i] > 0xf4 || i + len > n) {
            return 0;
        }
        cp = p[i] & (0x7f >> len);
        for (k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80) {
                return 0;
            }
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        if (cp < (len == 2 ? 0x80u : len == 3 ? 0x800u : 0x10000u)
            || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        {
            return 0;
        }
    }
    return 1;
}


static void
fail(int which, const char *what, const uint8_t *text, size_t len)
{
    fprintf(stderr, "fuzz_tokenizer: %s: %s for %zu bytes of text\n",
            tok_names[which], what, len);
    (void) text;
    abort();
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int                   n, k, m, i, w, cap, which, add_special,
                          parse_special;
    char                 *full, *stream;
    size_t                len, max_out, at;
    int32_t              *ids, n_vocab;
    unsigned              flags;
    llm_detok             d;
    const uint8_t        *text;
    const llm_tokenizer  *t;

    if (size < 2) {
        return 0;
    }
    which = data[0] % N_TOK;
    add_special = data[1] & 1;
    parse_special = (data[1] >> 1) & 1;
    flags = (data[1] >> 2) & (LLM_DETOK_SKIP_SPECIAL | LLM_DETOK_STRIP_SPACE);
    text = data + 2;
    len = size - 2;
    t = toks[which];
    n_vocab = llm_tokenizer_n_vocab(t);

    /* snprintf-style: a short buffer first, then one of the size said */
    cap = (int) len / 2 + 4;
    ids = malloc((size_t) cap * sizeof(int32_t));
    n = llm_tokenize(t, (const char *) text, len, add_special, parse_special,
                     ids, cap);
    if (n > cap) {
        free(ids);
        cap = n;
        ids = malloc((size_t) cap * sizeof(int32_t));
        if (llm_tokenize(t, (const char *) text, len, add_special,
                         parse_special, ids, cap) != n)
        {
            fail(which, "llm_tokenize gave two counts", text, len);
        }
    }
    if (n < 0) {
        fail(which, "llm_tokenize failed", text, len);
    }
    for (i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= n_vocab) {
            fail(which, "an id outside the vocabulary", text, len);
        }
    }

    /* whole decode, then the streaming one: the same bytes */
    k = llm_detokenize(t, ids, n, flags, NULL, 0);
    if (k < 0) {
        fail(which, "llm_detokenize failed", text, len);
    }
    full = malloc((size_t) k + 1);
    if (llm_detokenize(t, ids, n, flags, full, (size_t) k + 1) != k) {
        fail(which, "llm_detokenize gave two lengths", text, len);
    }

    max_out = llm_detok_max_out(t);
    stream = malloc((size_t) k + max_out + 4);
    llm_detok_init(&d, flags);
    at = 0;
    for (i = 0; i < n; i++) {
        w = llm_detok_push(t, &d, ids[i], stream + at, max_out);
        if (w < 0 || at + (size_t) w > (size_t) k) {
            fail(which, "llm_detok_push wrote past the whole decode", text,
                 len);
        }
        at += (size_t) w;
    }
    m = llm_detok_flush(&d, stream + at, 3);
    if (m < 0) {
        fail(which, "llm_detok_flush failed", text, len);
    }
    at += (size_t) m;
    if (at != (size_t) k || memcmp(stream, full, at) != 0) {
        fail(which, "streaming and whole decodes differ", text, len);
    }

    /* the round trip the tokenizer promises */
    if (!add_special && !parse_special && is_utf8(text, len)
        && (!tok_spm[which] || memmem(text, len, "\xe2\x96\x81", 3) == NULL))
    {
        const char  *want = (const char *) text;
        size_t       want_len = len;
        char        *nfc = NULL;

        if (tok_nfc[which]) {
            utf8proc_uint8_t  *dst = NULL;
            utf8proc_ssize_t   m = utf8proc_map(
                (const utf8proc_uint8_t *) text, (utf8proc_ssize_t) len,
                &dst, UTF8PROC_STABLE | UTF8PROC_COMPOSE);

            nfc = (char *) dst;
            want = m >= 0 ? nfc : NULL;
            want_len = m >= 0 ? (size_t) m : 0;
        }
        k = llm_detokenize(t, ids, n, LLM_DETOK_STRIP_SPACE, full, 0);
        free(full);
        full = malloc((size_t) k + 1);
        llm_detokenize(t, ids, n, LLM_DETOK_STRIP_SPACE, full, (size_t) k + 1);
        if (want == NULL || (size_t) k != want_len
            || memcmp(full, want, want_len) != 0)
        {
            fprintf(stderr, "decoded %d bytes: \"%.*s\"\n", k, k, full);
            fail(which, "decode(encode(x)) != x", text, len);
        }
        free(nfc);
    }

    free(stream);
    free(full);
    free(ids);
    return 0;
}
