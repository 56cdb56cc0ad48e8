/*
 * Hugging Face tokenizer.json loader: byte-level BPE (Llama 3, Qwen2/3,
 * GPT-2, SmolLM2), WordPiece (BERT: BertNormalizer, BertPreTokenizer,
 * wordpiece.c) and SentencePiece-style BPE with byte fallback (Mistral,
 * Llama 2), filling the same llm_tokenizer as the GGUF loader through the
 * builder in tokenizer/internal.h. SentencePiece-style files carry merge ranks
 * instead of scores; tokenizer/spm.c then merges by rank, as HF does.
 *
 * Design note. tokenizer.json spells out what GGUF only names: the
 * pre-tokenizer regexes (Split / ByteLevel / Digits, in order), the
 * normalizer (NFC / NFKC via libutf8proc), added tokens with their
 * "special" flag, and the BOS the post-processor adds. Anything this
 * loader does not implement is a load error naming it, never a silent
 * approximation. tokenizer_config.json, when present, names bos/eos/pad
 * and may override add_bos_token.
 *
 * defines: llm_tokenizer_load_hf
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "format/file.h"
#include "tokenizer/internal.h"

#define HF_MAX_FILE  (512u << 20)


static char *
read_file(const char *path, size_t *len, char *err, size_t errlen)
{
    char *buf = llm_read_file(path, (size_t) HF_MAX_FILE + 1, len);

    if (buf == NULL) {
        snprintf(err, errlen, "tokenizer: %s: %s", path, strerror(errno));
    }
    return buf;
}


static cJSON *
parse_file(const char *path, int required, char *err, size_t errlen)
{
    size_t len;
    char *text = read_file(path, &len, err, errlen);
    cJSON *j;

    if (text == NULL) {
        if (!required) {
            err[0] = '\0';
        }
        return NULL;
    }
    j = cJSON_ParseWithLength(text, len);
    free(text);
    if (j == NULL) {
        snprintf(err, errlen, "tokenizer: %s: invalid JSON", path);
    }
    return j;
}


static const char *
json_str(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}


static int
json_type_is(const cJSON *obj, const char *type)
{
    const char *s = json_str(obj, "type");

    return s != NULL && strcmp(s, type) == 0;
}


/* any object in the tree with "type": type */
static int
json_has_type(const cJSON *j, const char *type)
{
    const cJSON *c;

    if (j == NULL) {
        return 0;
    }
    if (cJSON_IsObject(j) && json_type_is(j, type)) {
        return 1;
    }
    cJSON_ArrayForEach(c, j) {
        if (json_has_type(c, type)) {
            return 1;
        }
    }
    return 0;
}


/* --- vocabulary --------------------------------------------------------- */

static int32_t
count_ids(const cJSON *vocab, const cJSON *added)
{
    const cJSON *c;
    double max = -1;

    cJSON_ArrayForEach(c, vocab) {
        max = cJSON_IsNumber(c) && c->valuedouble > max ? c->valuedouble : max;
    }
    cJSON_ArrayForEach(c, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");

        max = cJSON_IsNumber(id) && id->valuedouble > max ? id->valuedouble
                                                          : max;
    }
    return max < 0 || max >= (1 << 24) ? -1 : (int32_t) max + 1;
}


/* "<0x0A>": SentencePiece byte-fallback pieces */
static int
is_byte_token(const char *s, size_t len)
{
    return len == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>'
           && strchr("0123456789ABCDEF", s[3]) && strchr("0123456789ABCDEF",
                                                         s[4]);
}


static int
load_vocab(llm_tokenizer *t, const cJSON *vocab, const cJSON *added,
    char *err, size_t errlen)
{
    const cJSON *c;

    cJSON_ArrayForEach(c, vocab) {
        size_t len = strlen(c->string);
        int type = t->kind == LLM_TOKENIZER_SPM && is_byte_token(c->string,
                                                                 len)
                   ? LLM_TOKEN_BYTE : LLM_TOKEN_NORMAL;

        if (!cJSON_IsNumber(c) || c->valuedouble < 0
            || tok_add_token(t, (int32_t) c->valuedouble, c->string, len,
                             0.0f, type) != 0)
        {
            snprintf(err, errlen, "tokenizer: bad vocab entry \"%s\"",
                     c->string);
            return -1;
        }
    }
    cJSON_ArrayForEach(c, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
        const char *content = json_str(c, "content");
        int special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                                       c, "special"));

        if (!cJSON_IsNumber(id) || content == NULL
            || tok_add_token(t, (int32_t) id->valuedouble, content,
                             strlen(content), 0.0f,
                             special ? LLM_TOKEN_CONTROL
                                     : LLM_TOKEN_USER_DEFINED) != 0)
        {
            snprintf(err, errlen, "tokenizer: bad added_tokens entry");
            return -1;
        }
    }
    /* ids nobody named stay unused, never produced */
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (t->tokens[id].type == LLM_TOKEN_UNDEFINED
            && tok_add_token(t, id, "", 0, 0.0f, LLM_TOKEN_UNUSED) != 0)
        {
            snprintf(err, errlen, "tokenizer: out of memory");
            return -1;
        }
    }
    return 0;
}


/* merges are "left right" strings or ["left", "right"] pairs */
static int
load_merges(llm_tokenizer *t, const cJSON *merges, char *err, size_t errlen)
{
    const cJSON *m;

    if (!cJSON_IsArray(merges)) {
        snprintf(err, errlen, "tokenizer: model.merges is not an array");
        return -1;
    }
    cJSON_ArrayForEach(m, merges) {
        const char *l = NULL, *r = NULL;
        size_t llen = 0;
        int rc;

        if (cJSON_IsString(m)) {
            const char *sp = strchr(m->valuestring, ' ');

            if (sp != NULL) {
                l = m->valuestring;
                llen = (size_t) (sp - l);
                r = sp + 1;
            }
        } else if (cJSON_GetArraySize(m) == 2
                   && cJSON_IsString(cJSON_GetArrayItem(m, 0))
                   && cJSON_IsString(cJSON_GetArrayItem(m, 1)))
        {
            l = cJSON_GetArrayItem(m, 0)->valuestring;
            llen = strlen(l);
            r = cJSON_GetArrayItem(m, 1)->valuestring;
        }
        if (l == NULL) {
            snprintf(err, errlen, "tokenizer: a merge is neither \"a b\" "
                     "nor [\"a\", \"b\"]");
            return -1;
        }
        rc = tok_add_merge(t, l, llen, r, strlen(r));
        if (rc != 0) {
            snprintf(err, errlen, "tokenizer: out of memory");
            return -1;
        }
    }
    return 0;
}


/* --- pipeline pieces ---------------------------------------------------- */

static int
load_pre(llm_tokenizer *t, const cJSON *pre, char *err, size_t errlen)
{
    const char *type = json_str(pre, "type");
    const cJSON *c;

    if (pre == NULL || cJSON_IsNull(pre)) {
        return 0;
    }
    if (type == NULL) {
        snprintf(err, errlen, "tokenizer: pre_tokenizer without a type");
        return -1;
    }
    if (strcmp(type, "Sequence") == 0) {
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(
                                  pre, "pretokenizers"))
        {
            if (load_pre(t, c, err, errlen) != 0) {
                return -1;
            }
        }
        return 0;
    }
    if (strcmp(type, "Metaspace") == 0 && t->kind == LLM_TOKENIZER_SPM) {
        const char *scheme = json_str(pre, "prepend_scheme");

        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pre, "split"))
            || json_str(pre, "replacement") == NULL
            || strcmp(json_str(pre, "replacement"), "\xE2\x96\x81") != 0)
        {
            snprintf(err, errlen, "tokenizer: Metaspace with split or "
                     "another replacement is not supported");
            return -1;
        }
        t->add_space_prefix = scheme == NULL || strcmp(scheme, "never") != 0;
        t->prefix_first_only = scheme != NULL && strcmp(scheme, "first") == 0;
        t->prefix_if_no_space = 1;
        return 0;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                             pre, "add_prefix_space")))
        {
            snprintf(err, errlen, "tokenizer: ByteLevel add_prefix_space "
                     "is not supported");
            return -1;
        }
        return cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(pre,
                                                              "use_regex"))
               ? 0 : tok_bpe_add_regex(t, tok_bpe_gpt2_regex(), err, errlen);
    }
    if (strcmp(type, "Digits") == 0) {
        return tok_bpe_add_regex(t, cJSON_IsTrue(
                   cJSON_GetObjectItemCaseSensitive(pre, "individual_digits"))
                   ? "\\p{N}" : "\\p{N}+", err, errlen);
    }
    if (strcmp(type, "Split") == 0) {
        const char *re = json_str(cJSON_GetObjectItemCaseSensitive(
                                      pre, "pattern"), "Regex");
        const char *behavior = json_str(pre, "behavior");

        if (re == NULL || behavior == NULL
            || strcmp(behavior, "Isolated") != 0
            || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pre, "invert")))
        {
            snprintf(err, errlen, "tokenizer: only Split with a Regex, "
                     "behavior Isolated, invert false is supported");
            return -1;
        }
        return tok_bpe_add_regex(t, re, err, errlen);
    }
    snprintf(err, errlen, "tokenizer: pre_tokenizer type \"%s\" is not "
             "supported", type);
    return -1;
}


static int
load_normalizer(llm_tokenizer *t, const cJSON *n, char *err, size_t errlen)
{
    const cJSON *c;

    if (n == NULL || cJSON_IsNull(n)) {
        return 0;
    }
    if (json_type_is(n, "Sequence")) {
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(
                                  n, "normalizers"))
        {
            if (load_normalizer(t, c, err, errlen) != 0) {
                return -1;
            }
        }
        return 0;
    }
    if (t->kind == LLM_TOKENIZER_SPM && json_type_is(n, "Prepend")
        && json_str(n, "prepend") != NULL
        && strcmp(json_str(n, "prepend"), "\xE2\x96\x81") == 0)
    {
        t->add_space_prefix = 1;
        return 0;
    }
    if (t->kind == LLM_TOKENIZER_SPM && json_type_is(n, "Replace")
        && json_str(n, "content") != NULL
        && strcmp(json_str(n, "content"), "\xE2\x96\x81") == 0
        && json_str(cJSON_GetObjectItemCaseSensitive(n, "pattern"), "String")
        && strcmp(json_str(cJSON_GetObjectItemCaseSensitive(n, "pattern"),
                           "String"), " ") == 0)
    {
        return 0;              /* " " -> "▁": what tok_spm_encode does */
    }
    if (json_type_is(n, "NFC")) {
        t->normalize = TOK_NORM_NFC;
        return 0;
    }
    if (json_type_is(n, "NFKC")) {
        t->normalize = TOK_NORM_NFKC;
        return 0;
    }
    snprintf(err, errlen, "tokenizer: normalizer \"%s\" is not supported",
             json_str(n, "type") ? json_str(n, "type") : "?");
    return -1;
}


/* TemplateProcessing "single": a leading SpecialToken is the BOS it adds,
   a trailing one the EOS */
static void
load_post(llm_tokenizer *t, const cJSON *post)
{
    const cJSON *single, *first, *last, *c;

    if (json_type_is(post, "Sequence")) {
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(
                                  post, "processors"))
        {
            load_post(t, c);
        }
        return;
    }
    if (!json_type_is(post, "TemplateProcessing")) {
        return;
    }
    single = cJSON_GetObjectItemCaseSensitive(post, "single");
    first = cJSON_GetArrayItem(single, 0);
    last = cJSON_GetArrayItem(single, cJSON_GetArraySize(single) - 1);
    first = cJSON_GetObjectItemCaseSensitive(first, "SpecialToken");
    last = cJSON_GetObjectItemCaseSensitive(last, "SpecialToken");
    if (first != NULL && json_str(first, "id") != NULL) {
        const char *s = json_str(first, "id");

        t->bos = tok_find(t, s, strlen(s));
        t->add_bos = t->bos >= 0;
    }
    if (last != NULL && last != first && json_str(last, "id") != NULL) {
        const char *s = json_str(last, "id");

        t->eos = tok_find(t, s, strlen(s));
        t->post_eos = t->eos;
        t->add_eos = t->eos >= 0;
    }
}


/* "bos_token": "<s>" or {"content": "<s>", ...} */
static int32_t
config_token(const llm_tokenizer *t, const cJSON *cfg, const char *key,
    int32_t dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    const char *s = cJSON_IsString(v) ? v->valuestring
                                      : json_str(v, "content");
    int32_t id;

    if (s == NULL) {
        return dflt;
    }
    id = tok_find(t, s, strlen(s));
    return id >= 0 ? id : dflt;
}


static void
load_config(llm_tokenizer *t, const cJSON *cfg)
{
    const cJSON *v;

    if (cfg == NULL) {
        return;
    }
    t->bos = config_token(t, cfg, "bos_token", t->bos);
    t->eos = config_token(t, cfg, "eos_token", t->eos);
    t->pad = config_token(t, cfg, "pad_token", t->pad);
    t->unk = config_token(t, cfg, "unk_token", t->unk);
    v = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token");
    if (cJSON_IsBool(v)) {
        t->add_bos = cJSON_IsTrue(v) && t->bos >= 0;
    }
    v = cJSON_GetObjectItemCaseSensitive(cfg, "add_eos_token");
    if (cJSON_IsBool(v)) {
        t->add_eos = cJSON_IsTrue(v) && t->eos >= 0;
    }
}


/* WordPiece: BertNormalizer's switches (strip_accents null: as
   lowercase), BertPreTokenizer (or Whitespace-like: none), "##" pieces */
static int
load_wordpiece(llm_tokenizer *t, const cJSON *tj, const cJSON *model,
    char *err, size_t errlen)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(tj, "normalizer");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(tj, "pre_tokenizer");
    const cJSON *v;
    const char *prefix = json_str(model, "continuing_subword_prefix");

    if (prefix != NULL && strcmp(prefix, "##") != 0) {
        snprintf(err, errlen, "tokenizer: WordPiece prefix \"%s\" is not "
                 "supported (only \"##\")", prefix);
        return -1;
    }
    if (n != NULL && !cJSON_IsNull(n) && !json_type_is(n, "BertNormalizer")) {
        snprintf(err, errlen, "tokenizer: WordPiece with a %s normalizer is "
                 "not supported (only BertNormalizer)",
                 json_str(n, "type") ? json_str(n, "type") : "?");
        return -1;
    }
    if (!json_type_is(pre, "BertPreTokenizer")) {
        snprintf(err, errlen, "tokenizer: WordPiece needs the "
                 "BertPreTokenizer");
        return -1;
    }
    if (n != NULL && !cJSON_IsNull(n)) {
        t->wpm_clean = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(
                                          n, "clean_text"));
        t->wpm_chinese = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(
                                            n, "handle_chinese_chars"));
        t->wpm_lower = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(
                                          n, "lowercase"));
        v = cJSON_GetObjectItemCaseSensitive(n, "strip_accents");
        t->wpm_strip = cJSON_IsBool(v) ? cJSON_IsTrue(v) : t->wpm_lower;
    }
    v = cJSON_GetObjectItemCaseSensitive(model, "max_input_chars_per_word");
    t->wpm_max_chars = cJSON_IsNumber(v) && v->valuedouble >= 1
                       && v->valuedouble < 1e6 ? (int) v->valuedouble : 100;
    snprintf(t->pre_name, sizeof(t->pre_name), "tokenizer.json");
    return 0;
}


static llm_tokenizer *
build(const cJSON *tj, const cJSON *cfg, char *err, size_t errlen)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(tj, "model");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(tj, "added_tokens");
    llm_tokenizer *t;
    int32_t n;
    int kind;

    if ((!json_type_is(model, "BPE") && !json_type_is(model, "WordPiece"))
        || !cJSON_IsObject(vocab))
    {
        snprintf(err, errlen, "tokenizer: model.type must be \"BPE\" or "
                 "\"WordPiece\" with a vocab object");
        return NULL;
    }
    if (json_type_is(model, "WordPiece")) {
        kind = LLM_TOKENIZER_WPM;
    } else if (json_has_type(cJSON_GetObjectItemCaseSensitive(tj, "pre_tokenizer"),
                      "ByteLevel")
        || json_has_type(cJSON_GetObjectItemCaseSensitive(tj, "decoder"),
                         "ByteLevel"))
    {
        kind = LLM_TOKENIZER_BPE;
    } else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                                model, "byte_fallback"))
               || json_has_type(tj, "Metaspace"))
    {
        kind = LLM_TOKENIZER_SPM;
    } else {
        snprintf(err, errlen, "tokenizer: neither byte-level BPE nor "
                 "SentencePiece-style (byte_fallback / Metaspace)");
        return NULL;
    }
    if ((n = count_ids(vocab, added)) <= 0
        || (t = tok_new(kind, n)) == NULL)
    {
        snprintf(err, errlen, "tokenizer: empty vocabulary or out of memory");
        return NULL;
    }
    snprintf(t->pre_name, sizeof(t->pre_name), "tokenizer.json");
    t->ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                                        model, "ignore_merges"));
    if (kind == LLM_TOKENIZER_WPM) {
        if (load_vocab(t, vocab, added, err, errlen) != 0
            || load_wordpiece(t, tj, model, err, errlen) != 0)
        {
            llm_tokenizer_free(t);
            return NULL;
        }
    } else if (load_vocab(t, vocab, added, err, errlen) != 0
        || load_merges(t, cJSON_GetObjectItemCaseSensitive(model, "merges"),
                       err, errlen) != 0
        || load_pre(t, cJSON_GetObjectItemCaseSensitive(tj, "pre_tokenizer"),
                    err, errlen) != 0
        || load_normalizer(t, cJSON_GetObjectItemCaseSensitive(
                                  tj, "normalizer"), err, errlen) != 0)
    {
        llm_tokenizer_free(t);
        return NULL;
    }
    if (json_str(model, "unk_token") != NULL) {
        const char *u = json_str(model, "unk_token");

        t->unk = tok_find(t, u, strlen(u));
    }
    if (kind == LLM_TOKENIZER_WPM && t->unk < 0) {
        snprintf(err, errlen, "tokenizer: WordPiece without an unk_token "
                 "in its vocabulary");
        llm_tokenizer_free(t);
        return NULL;
    }
    load_post(t, cJSON_GetObjectItemCaseSensitive(tj, "post_processor"));
    load_config(t, cfg);
    if (tok_finish(t, err, errlen) != 0) {
        llm_tokenizer_free(t);
        return NULL;
    }
    return t;
}


llm_tokenizer *
llm_tokenizer_load_hf(const char *dir, char *err, size_t errlen)
{
    char path[4096];
    cJSON *tj, *cfg;
    llm_tokenizer *t;

    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    if ((tj = parse_file(path, 1, err, errlen)) == NULL) {
        return NULL;
    }
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    cfg = parse_file(path, 0, err, errlen);
    if (cfg == NULL && err[0] != '\0') {
        cJSON_Delete(tj);
        return NULL;
    }
    t = build(tj, cfg, err, errlen);
    cJSON_Delete(tj);
    cJSON_Delete(cfg);
    return t;
}
