/*
 * Fill-in-the-middle (tokenizer/fim.h): the qwen2-bpe tokenizer.json
 * fixture with Qwen2.5-Coder's three FIM tokens added (ids 151659-151661,
 * as Qwen2.5-Coder numbers them) finds them, and a prefix and a suffix
 * make <|fim_prefix|> prefix <|fim_suffix|> suffix <|fim_middle|>, the
 * texts tokenized as plain text; the fixture as it is has none. (A GGUF's
 * tokenizer.ggml.fim_*_token_id keys are not tested here: no fixture
 * has them.)
 */
#include "tap.h"
#include "tokenizer/fim.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>


static int
spew(const char *path, const char *s)
{
    FILE  *f = fopen(path, "wb");

    if (f == NULL) {
        return -1;
    }
    fputs(s, f);
    return fclose(f);
}


/* dir/ gets the fixture's two files, the FIM tokens added */
static int
coder_dir(const char *src, const char *dir)
{
    int          i;
    char         path[1200], *s, *out;
    size_t       len;
    cJSON       *root, *added, *tok;
    static const char *names[] = { "<|fim_prefix|>", "<|fim_suffix|>",
                                   "<|fim_middle|>" };

    snprintf(path, sizeof(path), "%s/tokenizer.json", src);
    s = tap_slurp(path, &len);
    root = s ? cJSON_Parse(s) : NULL;
    free(s);
    added = root ? cJSON_GetObjectItem(root, "added_tokens") : NULL;
    if (added == NULL) {
        cJSON_Delete(root);
        return -1;
    }
    for (i = 0; i < 3; i++) {
        tok = cJSON_CreateObject();
        cJSON_AddNumberToObject(tok, "id", 151659 + i);
        cJSON_AddStringToObject(tok, "content", names[i]);
        cJSON_AddBoolToObject(tok, "single_word", 0);
        cJSON_AddBoolToObject(tok, "lstrip", 0);
        cJSON_AddBoolToObject(tok, "rstrip", 0);
        cJSON_AddBoolToObject(tok, "normalized", 0);
        cJSON_AddBoolToObject(tok, "special", 1);
        cJSON_AddItemToArray(added, tok);
    }
    out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    mkdir(dir, 0700);
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    if (out == NULL || spew(path, out) != 0) {
        free(out);
        return -1;
    }
    free(out);

    snprintf(path, sizeof(path), "%s/tokenizer_config.json", src);
    s = tap_slurp(path, &len);
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    if (s == NULL || spew(path, s) != 0) {
        free(s);
        return -1;
    }
    free(s);
    return 0;
}


int
main(void)
{
    int             n, k, j;
    char            src[1024], dir[64], err[512];
    int32_t         ids[64], pre[32], suf[32];
    llm_fim         f;
    llm_tokenizer  *t;
    static const char  prefix[] = "def add(a, b):\n    ";
    static const char  suffix[] = "\n    return c\n";

    tap_fixture(src, sizeof(src), "tokenizers/qwen2-bpe");

    t = llm_tokenizer_load_hf(src, err, sizeof(err));
    ok(t != NULL, "qwen2-bpe loads");
    if (t) {
        is_int(llm_fim_find(t, NULL, &f), -1, "qwen2-bpe as it is: no FIM "
               "tokens");
        is_int(f.pre, -1, "... pre -1");
        llm_tokenizer_free(t);
    }

    snprintf(dir, sizeof(dir), "/tmp/ngx_llm_fim.%d", (int) getpid());
    ok(coder_dir(src, dir) == 0, "the fixture with the FIM tokens added");
    t = llm_tokenizer_load_hf(dir, err, sizeof(err));
    ok(t != NULL, "it loads%s%s", t ? "" : ": ", t ? "" : err);
    if (t == NULL) {
        return tap_done();
    }

    is_int(llm_fim_find(t, NULL, &f), 0, "Qwen2.5-Coder's FIM tokens found");
    is_int(f.pre, 151659, "<|fim_prefix|>");
    is_int(f.suf, 151660, "<|fim_suffix|>");
    is_int(f.mid, 151661, "<|fim_middle|>");

    k = llm_tokenize(t, prefix, strlen(prefix), 0, 0, pre, 32);
    j = llm_tokenize(t, suffix, strlen(suffix), 0, 0, suf, 32);
    n = llm_fim_prompt(t, &f, prefix, strlen(prefix), suffix, strlen(suffix),
                       ids, 64);
    is_int(n, k + j + 3, "the prompt: three FIM tokens and both texts");
    ok(n == k + j + 3 && ids[0] == 151659
       && memcmp(ids + 1, pre, k * sizeof(int32_t)) == 0
       && ids[1 + k] == 151660
       && memcmp(ids + 2 + k, suf, j * sizeof(int32_t)) == 0
       && ids[2 + k + j] == 151661,
       "in PSM order: <pre> prefix <suf> suffix <mid>");

    n = llm_fim_prompt(t, &f, "<|fim_middle|>", 14, "", 0, ids, 64);
    ok(n > 4 && ids[1] != 151661,
       "a FIM token written in the prefix is plain text, not the token");

    is_int(llm_fim_prompt(t, &f, prefix, strlen(prefix), suffix,
                          strlen(suffix), ids, 2), k + j + 3,
           "a short buffer: the count, as snprintf");

    llm_tokenizer_free(t);
    snprintf(src, sizeof(src), "rm -rf %s", dir);
    (void) system(src);

    return tap_done();
}
