/*
 * The grammar engine (engine/grammar): GBNF syntax and its errors, strings
 * accepted and rejected byte by byte, regexes, caps that fail fast, and on
 * SmolLM2's vocabulary: every token of a tokenized JSON document allowed
 * at its step, masks equal to a brute-force check (try every token), the
 * cache equal to a fresh walk, special tokens only where named, stop
 * tokens only where the grammar may end, rollback giving the same mask,
 * counted repetitions (x{m,n} past the unrolling cap) exact at their
 * bounds, in mask, cache and rollback,
 * and random walks of allowed tokens that always end in accepted text.
 */
#include "tap.h"
#include "grammar/grammar.h"
#include "grammar/grammar_impl.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static llm_tokenizer      *tok;
static llm_grammar_vocab  *vocab;
static int32_t             n_vocab;
static int                 n_words;


static llm_grammar *
compile(int kind, const char *src, char *err, size_t err_len)
{
    llm_grammar_limits  lim;

    llm_grammar_limits_default(&lim);

    lim.json_ws = LLM_JSON_WS_FLEXIBLE;     /* the texts have blanks */
    return llm_grammar_compile(vocab, kind, src, strlen(src), &lim, err,
                               err_len);
}


/* 1 when the grammar matches s whole; -1 when it does not compile */
static int
matches(int kind, const char *src, const char *s)
{
    llm_grammar  *g;
    llm_matcher  *m;
    char          err[256];
    int           ok_;

    if ((g = compile(kind, src, err, sizeof(err))) == NULL) {
        printf("# %s\n", err);
        return -1;
    }
    m = llm_matcher_new(g);
    ok_ = llm_matcher_accept_bytes(m, s, strlen(s)) == 0
          && llm_matcher_can_end(m);
    llm_matcher_free(m);
    llm_grammar_free(g);
    return ok_;
}


/* the error a source gets, "" when it compiles */
#define error_of(kind, src, len)  error_of_len(kind, src, strlen(src))

static const char *
error_of_len(int kind, const char *src, size_t len)
{
    static char          err[512];
    llm_grammar_limits   lim;
    llm_grammar         *g;

    llm_grammar_limits_default(&lim);

    lim.json_ws = LLM_JSON_WS_FLEXIBLE;     /* the texts have blanks */
    g = llm_grammar_compile(vocab, kind, src, len, &lim, err, sizeof(err));
    if (g != NULL) {
        llm_grammar_free(g);
        return "";
    }
    return err;
}


#define GR  LLM_CONSTRAINT_GRAMMAR


static void
test_syntax(void)
{
    static const char  *g1 =
        "# a comment\n"
        "root ::= greeting \" \" name  # trailing\n"
        "greeting ::= \"hi\" | \"hello\"\n"
        "name ::= [A-Z] [a-z]* \"!\"?\n";
    static const char  *g2 =
        "root ::= (\"ab\" | \"c\")+ \"\\n\\t\\\"\\\\\\x41\"";
    static const char  *g3 = "root ::= \"x\"{2} \"y\"{1,3} \"z\"{2,}";
    static const char  *g4 = "root ::=\n  \"a\" |\n  \"b\" (\n \"c\"\n )";
    static const char  *g5 = "root ::= [^a-c] [\\u00e9-\\u00ff] . \"\\u20AC\"";

    is_int(matches(GR, g1, "hi Bob!"), 1, "rules, classes");
    is_int(matches(GR, g1, "hello X"), 1, "optional");
    is_int(matches(GR, g1, "hey Bob"), 0, "wrong word");
    is_int(matches(GR, g1, "hi bob"), 0, "wrong class");
    is_int(matches(GR, g1, "hi Bob!!"), 0, "extra byte");
    is_int(matches(GR, g2, "abcab\n\t\"\\A"), 1,
           "group +, escapes");
    is_int(matches(GR, g2, "\n\t\"\\A"), 0,
           "+ needs one");
    is_int(matches(GR, g3, "xxyzz"), 1, "{2} {1,3} {2,}");
    is_int(matches(GR, g3, "xxyyyzzzzzz"), 1, "upper");
    is_int(matches(GR, g3, "xxyyyyzz"), 0, "{1,3} max");
    is_int(matches(GR, g3, "xyzz"), 0, "{2} exact");
    is_int(matches(GR, g3, "xxyz"), 0, "{2,} min");
    is_int(matches(GR, g4, "bc"), 1, "newlines");
    is_int(matches(GR, g5, "d\xc3\xa9\xe4\xb8\xad\xe2\x82\xac"),
           1, "UTF-8 classes, any char, \\u");
    is_int(matches(GR, g5, "a\xc3\xa9xx"), 0, "[^a-c]");
    is_int(matches(GR, g5, "d\xc3\xa8x\xe2\x82\xac"), 0,
           "range below");
    is_int(matches(GR, g5, "d\xc3\xa9\xed\xa0\x80\xe2\x82\xac"),
           0, "a surrogate is no char");
    is_int(matches(GR, "root ::= [\\U0001F600-\\U0001F64F]+",
                   "\xf0\x9f\x98\x80\xf0\x9f\x99\x8f"), 1, "4-byte range");
    is_int(matches(GR, "root ::= [\\U0001F600-\\U0001F64F]+",
                   "\xf0\x9f\x99\x90"), 0, "past the 4-byte range");
    is_int(matches(GR, "root ::= a-b\na-b ::= \"\"", ""),
           1, "empty match");

    is_str(error_of(GR,
                    "root ::= a\n\na ::= \"x\"\n  | b  foo\nb ::= \"y\"", 38),
           "grammar: undefined rule 'foo' at 4:8", "undefined rule, line:col");
    is_str(error_of(GR, "a ::= \"x\"", 9),
           "grammar: no rule 'root'", "no root");
    is_str(error_of(GR, "root ::= \"x\\q\"", 14),
           "grammar: unknown escape '\\q' at 1:12", "bad escape");
    is_str(error_of(GR, "root ::= \"x", 11),
           "grammar: unterminated literal at 1:12", "unterminated");
    is_str(error_of(GR, "root ::= \"x\"\nroot ::= \"y\"", 25),
           "grammar: rule 'root' defined twice at 2:1", "twice");
    is_str(error_of(GR, "root ::= (\"x\"", 13),
           "grammar: expected ')' at 1:10", "unclosed group");
    is_str(error_of(GR, "root = \"x\"", 10),
           "grammar: expected '::=' at 1:6", "no ::=");
    is_str(error_of(GR, "root ::= \"x\"{3,2}", 17),
           "grammar: repetition {3,2}: max below min at 1:13", "{3,2}");
    is_str(error_of(GR, "root ::= \"x\"{0,5000}", 20), "", "{0,5000}: "
           "counted");
    is_str(error_of(GR, "root ::= \"x\"{0,1073741825}", 26),
           "grammar: bad repetition count at 1:13", "{0,2^30+1}");
    is_str(error_of(GR, "root ::= (\"x\"?){0,5000}", 24),
           "grammar: a repetition {0,5000} over 1000 of 'root-1', which may "
           "match the empty string (not supported)",
           "a counted body that may be empty");
    is_str(error_of(GR, "root ::= [b-a]", 14),
           "grammar: bad range in char class at 1:10", "[b-a]");
    is_str(error_of(GR, "root ::= <no-such>", 18),
           "grammar: the vocabulary has no token '<no-such>' at 1:10",
           "unknown special token");
    is_str(error_of(GR, "root ::= <[99999999]>", 21),
           "grammar: bad token id '<[99999999]>' at 1:10", "bad token id");
    ok(strstr(error_of(GR, "root ::= root \"x\" | \"y\"",
                       23), "left recursion through rule 'root'") != NULL,
       "direct left recursion refused");
    ok(strstr(error_of(GR,
                       "root ::= a\na ::= b \"x\"\nb ::= e a | \"y\"\n"
                       "e ::= \"\" | \"z\"",
                       46), "left recursion") != NULL,
       "left recursion through an empty rule refused");
    ok(strstr(error_of(GR, "root ::= (\"\")*", 14),
              "left recursion") != NULL
       || strstr(error_of(GR, "root ::= (\"\")*", 14),
                 "nothing") != NULL, "repeating the empty string refused");
    is_str(error_of(GR, "root ::= \"a\" | b\nb ::= \"x\" b",
                    27),
           "grammar: rule 'b' can never complete (it only recurses)",
           "a rule that never completes");
    is_str(error_of(GR, "root ::= %json {\"not\":{}}", 25),
           "grammar: json_schema: unsupported keyword 'not' at the root at "
           "1:10", "%%json error passed through");
    is_int(matches(GR,
                   "root ::= \"A:\" %json {\"type\": \"object\"} \"!\"",
                   "A:{\"a\": [1, 2.5e3, \"x\"]}!"), 1, "%%json inline");
}


static void
test_caps(void)
{
    llm_grammar_limits   lim;
    llm_grammar         *g;
    uint64_t             t0;
    size_t               n = 1 << 20, i, k;
    char                *big, err[256];

    big = malloc(n + 64);
    memcpy(big, "root ::= ", 9);
    for (i = 9; i < n - 1; i++) {
        big[i] = 'x';
    }
    big[n - 1] = '\0';
    llm_grammar_limits_default(&lim);
    lim.json_ws = LLM_JSON_WS_FLEXIBLE;     /* the texts have blanks */
    t0 = llm_grammar_now_ns();
    g = llm_grammar_compile(vocab, LLM_CONSTRAINT_GRAMMAR, big, n - 1, &lim,
                            err, sizeof(err));
    ok(g == NULL && strstr(err, "over the limit of 65536") != NULL,
       "1 MB source refused: %s", err);

    /* 50000 nested groups: the parser's nesting cap */
    for (i = 0; i < 50000; i++) {
        big[9 + i] = '(';
    }
    big[9 + i] = '"';
    big[10 + i] = '"';
    big[11 + i] = '\0';
    lim.max_source = n;
    g = llm_grammar_compile(vocab, LLM_CONSTRAINT_GRAMMAR, big,
                            strlen(big), &lim, err, sizeof(err));
    ok(g == NULL && strstr(err, "nesting deeper than 256") != NULL,
       "deep nesting refused: %s", err);

    /* a grammar that takes long: the compile time limit */
    k = (size_t) sprintf(big, "root ::= a0\n");
    for (i = 0; i < 20000; i++) {
        k += (size_t) sprintf(big + k, "a%zu ::= [a-z]{0,20} a%zu | \"x\"\n",
                              i, i + 1);
    }
    sprintf(big + k, "a%zu ::= \"end\"\n", i);
    lim.max_compile_ns = 2 * 1000000ull;
    g = llm_grammar_compile(vocab, LLM_CONSTRAINT_GRAMMAR, big,
                            strlen(big), &lim, err, sizeof(err));
    ok(g == NULL && (strstr(err, "compile time limit") != NULL
                     || strstr(err, "rules") != NULL),
       "compile time cap: %s", err);
    ok(llm_grammar_now_ns() - t0 < 2000000000ull, "caps fail fast");

    /* deep nesting at run time: 2000 arrays in arrays, then closed */
    {
        llm_matcher  *m;
        uint32_t     *mask = malloc((size_t) n_words * 4);

        llm_grammar_limits_default(&lim);

        lim.json_ws = LLM_JSON_WS_FLEXIBLE;     /* the texts have blanks */
        g = llm_grammar_compile(vocab, LLM_CONSTRAINT_GRAMMAR,
                                "root ::= %json {}", 17, &lim, err,
                                sizeof(err));
        m = llm_matcher_new(g);
        memset(big, '[', 2000);
        memset(big + 2000, ']', 2000);
        ok(llm_matcher_accept_bytes(m, big, 2000) == 0
           && llm_matcher_mask(m, mask) > 0
           && llm_matcher_accept_bytes(m, big + 2000, 2000) == 0
           && llm_matcher_can_end(m), "2000 nested arrays");
        llm_matcher_free(m);
        llm_grammar_free(g);

        /* ambiguous: the stacks multiply with every "a"; past the cap
           the step is dead, in bounded time */
        t0 = llm_grammar_now_ns();
        g = llm_grammar_compile(vocab, LLM_CONSTRAINT_GRAMMAR,
                                "root ::= s \"b\"\ns ::= \"a\" s s | "
                                "\"a\" | \"\"", 36, &lim, err, sizeof(err));
        ok(g != NULL, "an ambiguous grammar compiles %s", err);
        m = llm_matcher_new(g);
        for (i = 0; i < 5000 && llm_matcher_accept_bytes(m, "a", 1) == 0;
             i++)
        {
            /* until a cap refuses */
        }
        llm_matcher_mask(m, mask);
        ok(llm_grammar_now_ns() - t0 < 10000000000ull, "%zu ambiguous "
           "steps in %.0f ms", i, (llm_grammar_now_ns() - t0) / 1e6);
        llm_matcher_free(m);
        llm_grammar_free(g);
        free(mask);
    }
    free(big);
}


static void
test_regex(void)
{
    static const struct { const char *re, *s; int want; } cases[] = {
        { "^[a-z]+@[a-z]+\\.com$", "bob@ex.com", 1 },
        { "[a-z]+@[a-z]+\\.com", "bob@ex.org", 0 },
        { "\\d{3}-\\d{4}", "555-1234", 1 },
        { "\\d{3}-\\d{4}", "555-123", 0 },
        { "(?:ab|cd)*e?", "abcdab", 1 },
        { "(?:ab|cd)*e?", "abce", 0 },
        { "(?<year>\\d{4})-(\\d\\d)", "2024-05", 1 },
        { "\\w+\\s\\W", "a_1 !", 1 },
        { "\\w+\\s\\W", "a_1 b", 0 },
        { "[^\\d\\s]x", "ax", 1 },
        { "[^\\d\\s]x", "3x", 0 },
        { "a.c", "a\xc3\xa9" "c", 1 },
        { "a.c", "a\nc", 0 },
        { "(yes|no|maybe)", "maybe", 1 },
        { "colou?r", "color", 1 },
        { "x{2,}?y", "xxxy", 1 },
        { "[-a]+", "-a-", 1 },
        { "\\u00e9\\x41\\.", "\xc3\xa9" "A.", 1 },
    };
    static const struct { const char *re, *err; } bad[] = {
        { "(a)\\1", "backreferences are not supported" },
        { "a(?=b)", "lookahead is not supported" },
        { "(?<!a)b", "lookbehind is not supported" },
        { "\\bword", "word boundaries" },
        { "(?i)abc", "inline flags" },
        { "a^b", "'^' is supported at the start only" },
        { "a$b", "'$' is supported at the end only" },
        { "*a", "nothing to repeat" },
        { "(ab", "missing ')'" },
        { "ab)", "unmatched ')'" },
        { "a++", "possessive" },
    };
    size_t  i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        is_int(matches(LLM_CONSTRAINT_REGEX, cases[i].re, cases[i].s),
               cases[i].want, "regex /%s/ case %zu", cases[i].re, i);
    }
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char  *e = error_of(LLM_CONSTRAINT_REGEX, bad[i].re,
                                  strlen(bad[i].re));

        ok(strncmp(e, "regex: ", 7) == 0 && strstr(e, bad[i].err) != NULL,
           "regex /%s/ refused: %s", bad[i].re, e);
    }
}


/* --- on SmolLM2's vocabulary --------------------------------------------- */

static const char  *doc =
    "{\"id\": \"chatcmpl-8f3a\", \"object\": \"chat.completion\", "
    "\"created\": 1717171717, \"model\": \"smollm2-135m\",\n"
    "  \"choices\": [{\"index\": 0, \"message\": {\"role\": \"assistant\", "
    "\"content\": \"Caf\\u00e9 na\\\"ive \xc3\xa9t\xc3\xa9 \xe2\x82\xac 5\\n"
    "line\\ttab \\\\ slash \\/ done\"}, \"logprobs\": null, "
    "\"finish_reason\": \"stop\"}],\n"
    "  \"usage\": {\"prompt_tokens\": 12, \"completion_tokens\": -3.25e-2, "
    "\"total\": 0.5E+10, \"ok\": true, \"bad\": false},\n"
    "  \"nested\": [[], {}, [1, [2, [3, {\"k\": [\"v\"]}]]]], "
    "\"emoji\": \"\xf0\x9f\x98\x80 \xe4\xb8\xad\xe6\x96\x87\"}";


/* the mask's allowed set against trying every token (accept, rollback) */
static int
mask_is_exact(llm_matcher *m, const uint32_t *mask)
{
    int32_t  id;
    int      in, can, bad = 0;

    for (id = 0; id < n_vocab; id++) {
        in = (mask[id >> 5] >> (id & 31)) & 1;
        can = llm_matcher_accept(m, id) == 0;
        if (can) {
            llm_matcher_rollback(m, 1);
        }
        if (in != can) {
            if (bad++ < 3) {
                size_t       len;
                const char  *p = llm_token_piece(tok, id, &len);

                printf("# token %d \"%.*s\": mask %d, accept %d\n", id,
                       (int) len, p, in, can);
            }
        }
    }
    return bad == 0;
}


static void
test_json_walk(void)
{
    llm_grammar  *g;
    llm_matcher  *m;
    uint32_t     *mask, *fresh;
    int32_t       ids[2048];
    char          err[256];
    int           n, i, bad_allowed = 0, bad_cache = 0, exact = 1, cnt;
    int           stop_early = 0, n_exact = 0;
    int32_t       eos = llm_tokenizer_eos(tok);

    g = compile(LLM_CONSTRAINT_JSON_OBJECT, "", err, sizeof(err));
    ok(g != NULL, "json_object compiles %s", err);
    if (g == NULL) {
        return;
    }
    n = llm_tokenize(tok, doc, strlen(doc), 0, 0, ids, 2048);
    ok(n > 100 && n < 2048, "the document is %d tokens", n);
    mask = malloc((size_t) n_words * 4);
    fresh = malloc((size_t) n_words * 4);
    m = llm_matcher_new(g);
    for (i = 0; i < n; i++) {
        cnt = llm_matcher_mask(m, mask);
        if (!((mask[ids[i] >> 5] >> (ids[i] & 31)) & 1)) {
            if (bad_allowed++ < 3) {
                printf("# step %d: token %d not allowed\n", i, ids[i]);
            }
        }
        if (eos >= 0 && ((mask[eos >> 5] >> (eos & 31)) & 1)) {
            stop_early++;
        }
        if (llm_matcher_mask_nocache(m, fresh) != cnt
            || memcmp(mask, fresh, (size_t) n_words * 4) != 0)
        {
            bad_cache++;
        }
        if (i % 23 == 0 || i == n - 1) {
            exact &= mask_is_exact(m, mask);
            n_exact++;
        }
        if (llm_matcher_accept(m, ids[i]) != 0) {
            printf("# step %d: accept %d failed\n", i, ids[i]);
            bad_allowed++;
            break;
        }
    }
    is_int(bad_allowed, 0, "every token of the document allowed at its step");
    is_int(bad_cache, 0, "cached masks equal fresh walks");
    ok(exact, "masks equal brute force at %d steps", n_exact);
    is_int(stop_early, 0, "no stop token inside the document");
    ok(llm_matcher_can_end(m), "the document is complete");
    llm_matcher_mask(m, mask);
    ok(eos >= 0 && ((mask[eos >> 5] >> (eos & 31)) & 1), "EOS allowed at "
       "the end");
    ok(mask_is_exact(m, mask), "brute force at the end");
    ok(llm_matcher_is_done(m), "nothing may follow the object");
    ok(llm_matcher_accept(m, eos) == 0, "EOS accepted");
    is_int(llm_matcher_mask(m, mask), 0, "nothing after EOS");
    ok(llm_matcher_accept(m, ids[0]) == -1, "no token after EOS");

    /* rollback gives the exact mask back */
    {
        uint32_t  *before = malloc((size_t) n_words * 4);
        int        c0, c1;

        llm_matcher_rollback(m, 1 + n - 40);
        c0 = llm_matcher_mask_nocache(m, before);
        for (i = 40; i < 60; i++) {
            llm_matcher_accept(m, ids[i]);
        }
        ok(llm_matcher_rollback(m, 20) == 0, "rollback 20");
        c1 = llm_matcher_mask(m, mask);
        ok(c0 == c1 && memcmp(before, mask, (size_t) n_words * 4) == 0,
           "rollback restores the exact mask (%d allowed)", c1);
        ok(llm_matcher_rollback(m, 41) == -1, "rollback past the start "
           "refused");
        ok(llm_matcher_rollback(m, 40) == 0 && llm_matcher_accept(m, ids[0])
           == 0, "rollback to the start");
        free(before);
    }
    llm_matcher_free(m);
    llm_grammar_free(g);
    free(mask);
    free(fresh);
}


static void
test_special(void)
{
    llm_grammar  *g;
    llm_matcher  *m;
    uint32_t     *mask;
    char          err[256];
    int32_t       start = llm_token_lookup(tok, "<|im_start|>", 12);
    int32_t       end = llm_token_lookup(tok, "<|im_end|>", 10);
    int32_t       x = -1, ids[8];
    int           cnt, n;
    char          src[128];

    ok(start >= 0 && llm_token_is_special(tok, start) && end >= 0
       && llm_token_is_stop(tok, end), "<|im_start|> special, <|im_end|> "
       "stop");
    n = llm_tokenize(tok, "x", 1, 0, 0, ids, 8);
    x = n == 1 ? ids[0] : -1;
    mask = malloc((size_t) n_words * 4);

    g = compile(LLM_CONSTRAINT_GRAMMAR, "root ::= \"x\" <|im_start|> \"x\"*",
                err, sizeof(err));
    ok(g != NULL, "a grammar naming <|im_start|> %s", err);
    m = llm_matcher_new(g);
    llm_matcher_mask(m, mask);
    ok(!((mask[start >> 5] >> (start & 31)) & 1), "not before its place");
    ok(!((mask[end >> 5] >> (end & 31)) & 1), "no stop before the end");
    ok(llm_matcher_accept(m, start) == -1, "accept refuses it there");
    ok(llm_matcher_accept(m, x) == 0, "x");
    cnt = llm_matcher_mask(m, mask);
    ok(cnt == 1 && ((mask[start >> 5] >> (start & 31)) & 1),
       "then only <|im_start|> (%d allowed)", cnt);
    ok(mask_is_exact(m, mask), "brute force agrees");
    ok(llm_matcher_accept(m, start) == 0, "accepted where named");
    llm_matcher_mask(m, mask);
    ok(!((mask[start >> 5] >> (start & 31)) & 1)
       && ((mask[end >> 5] >> (end & 31)) & 1)
       && ((mask[x >> 5] >> (x & 31)) & 1), "then x or a stop token");
    ok(mask_is_exact(m, mask), "brute force agrees");
    ok(!llm_matcher_is_done(m), "x* may go on");
    llm_matcher_free(m);
    llm_grammar_free(g);

    /* a special token by id, and a stop token the grammar names */
    snprintf(src, sizeof(src), "root ::= <[%d]> \"x\" <|im_end|> \"x\"", start);
    g = compile(LLM_CONSTRAINT_GRAMMAR, src, err, sizeof(err));
    ok(g != NULL, "<[id]> and a named stop token %s", err);
    m = llm_matcher_new(g);
    ok(llm_matcher_accept(m, x) == -1 && llm_matcher_accept(m, start) == 0
       && llm_matcher_accept(m, x) == 0, "<[id]> matched the token only");
    ok(llm_matcher_accept(m, end) == 0 && !llm_matcher_is_done(m)
       && llm_matcher_accept(m, x) == 0 && llm_matcher_is_done(m),
       "a stop token the grammar names is text there");
    llm_matcher_free(m);
    llm_grammar_free(g);
    free(mask);
}


/* walks of random allowed tokens end in text the grammar accepts */
static void
test_random_walks(void)
{
    static const struct { int kind; const char *src; int json; } gs[] = {
        { LLM_CONSTRAINT_JSON_OBJECT, "", 1 },
        { LLM_CONSTRAINT_GRAMMAR, "root ::= %json {}", 1 },
        { LLM_CONSTRAINT_GRAMMAR, "root ::= (\"a\" | [0-9]+ \" \" | "
          "[\\u00e0-\\u00ff\\u4e00-\\u4e10])* \".\"", 0 },
        { LLM_CONSTRAINT_REGEX, "[A-Z][a-z]{2,8}( [a-z]{1,8}){0,6}\\.", 0 },
    };
    uint32_t    *mask, *ref;
    int32_t     *allowed;
    char         text[8192], err[256];
    int          bad_cache = 0, n_cmp = 0;
    size_t       g_i, len;
    int          seed, step, n, k, bad = 0, bad_json = 0, walks = 0, ended;

    mask = malloc((size_t) n_words * 4);
    ref = malloc((size_t) n_words * 4);
    allowed = malloc((size_t) n_vocab * sizeof(int32_t));
    for (g_i = 0; g_i < sizeof(gs) / sizeof(gs[0]); g_i++) {
        llm_grammar  *g = compile(gs[g_i].kind, gs[g_i].src, err,
                                  sizeof(err));

        if (g == NULL) {
            ok(0, "walk grammar %zu: %s", g_i, err);
            continue;
        }
        for (seed = 1; seed <= 25; seed++) {
            llm_matcher  *m = llm_matcher_new(g), *check;

            srand((unsigned) (seed * 7919 + (int) g_i));
            len = 0;
            ended = 0;
            for (step = 0; step < 400; step++) {
                int32_t  id;

                n = llm_matcher_mask(m, mask);
                if (step % 7 == 0) {
                    /* the grammar's shared local masks (kept from the
                       walks before) against a fresh full walk */
                    n_cmp++;
                    if (llm_matcher_mask_nocache(m, ref) != n
                        || memcmp(ref, mask, (size_t) n_words * 4) != 0)
                    {
                        bad_cache++;
                    }
                }
                if (n == 0 || llm_matcher_is_done(m)) {
                    ended = 1;
                    break;
                }
                for (k = 0, id = 0; id < n_vocab; id++) {
                    if ((mask[id >> 5] >> (id & 31)) & 1) {
                        allowed[k++] = id;
                    }
                }
                if (k != n) {
                    bad++;
                    break;
                }
                /* late in the walk, end when we may, else close brackets
                   faster by preferring short tokens */
                if (step > 60 && llm_matcher_can_end(m)) {
                    ended = 1;
                    break;
                }
                id = allowed[rand() % k];
                if (step > 60) {
                    int  t, best = id;
                    size_t  bl, l;

                    llm_token_piece(tok, best, &bl);
                    for (t = 0; t < 30; t++) {
                        int32_t  c = allowed[rand() % k];

                        llm_token_piece(tok, c, &l);
                        if (llm_token_is_stop(tok, c)) {
                            continue;
                        }
                        if (l < bl) {
                            best = c;
                            bl = l;
                        }
                    }
                    id = best;
                }
                if (llm_token_is_stop(tok, id)) {
                    ended = llm_matcher_can_end(m);
                    break;
                }
                {
                    size_t       pl;
                    const char  *p = llm_token_piece(tok, id, &pl);

                    if (len + pl < sizeof(text)) {
                        memcpy(text + len, p, pl);
                        len += pl;
                    }
                }
                if (llm_matcher_accept(m, id) != 0) {
                    bad++;
                    break;
                }
            }
            if (!ended) {
                llm_matcher_free(m);
                continue;               /* ran out of steps: not judged */
            }
            walks++;
            check = llm_matcher_new(g);
            if (llm_matcher_accept_bytes(check, text, len) != 0
                || !llm_matcher_can_end(check))
            {
                if (bad++ < 3) {
                    printf("# walk %d/%zu: \"%.*s\" not accepted\n", seed,
                           g_i, (int) len, text);
                }
            }
            if (gs[g_i].json) {
                cJSON  *j = cJSON_ParseWithLength(text, len);

                if (j == NULL) {
                    if (bad_json++ < 3) {
                        printf("# not JSON: \"%.*s\"\n", (int) len, text);
                    }
                }
                cJSON_Delete(j);
            }
            llm_matcher_free(check);
            llm_matcher_free(m);
        }
        llm_grammar_free(g);
    }
    is_int(bad, 0, "random walks stay in the grammar");
    is_int(bad_json, 0, "random JSON walks parse as JSON (cJSON)");
    ok(walks >= 60, "%d walks ended and were checked", walks);
    is_int(bad_cache, 0, "masks from shared local masks equal full walks "
           "(%d steps)", n_cmp);
    free(ref);
    free(mask);
    free(allowed);
}


/* local masks shared across grammars of one vocabulary (by the cut
   stack's structure): grammars of the same shape under other texts and
   rule numbers get another grammar's masks, and every mask stays exact */
static void
test_vocab_shared(void)
{
    static const char *const schemas[] = {
        "{\"type\":\"array\",\"items\":{\"type\":\"string\"}}",
        "{\"items\":{\"type\":\"string\"},\"type\":\"array\"}",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},"
        "\"n\":{\"type\":\"integer\",\"maximum\":99}},\"required\":[\"a\"]}",
        "{\"$defs\":{\"x\":{\"type\":\"integer\"}},\"type\":\"object\","
        "\"properties\":{\"q\":{\"type\":\"string\"},\"m\":{\"$ref\":"
        "\"#/$defs/x\"}},\"required\":[\"q\"]}",
        "{\"type\":\"object\",\"patternProperties\":{\"^[a-z]+$\":{\"type\":"
        "\"string\"}},\"additionalProperties\":false}",
    };
    llm_grammar_vocab  *v;
    llm_grammar_limits  lim;
    uint32_t           *mask, *ref;
    uint64_t            hits;
    char                err[256];
    size_t              i;
    int                 seed, step, n, k, bad = 0, steps = 0, kept;
    int32_t             id;

    v = llm_grammar_vocab_new(tok, err, sizeof(err));
    mask = malloc((size_t) n_words * 4);
    ref = malloc((size_t) n_words * 4);
    llm_grammar_limits_default(&lim);
    lim.json_ws = LLM_JSON_WS_FLEXIBLE;     /* the texts have blanks */
    for (i = 0; v && i < sizeof(schemas) / sizeof(schemas[0]); i++) {
        llm_grammar  *g = llm_grammar_compile_uncached(v,
                              LLM_CONSTRAINT_JSON_SCHEMA, schemas[i],
                              strlen(schemas[i]), &lim, err, sizeof(err));

        if (g == NULL) {
            ok(0, "shared: %s: %s", schemas[i], err);
            continue;
        }
        for (seed = 1; seed <= 4; seed++) {
            llm_matcher  *m = llm_matcher_new(g);

            srand((unsigned) (seed * 31 + (int) i));
            for (step = 0; step < 60; step++) {
                n = llm_matcher_mask(m, mask);
                steps++;
                bad += llm_matcher_mask_nocache(m, ref) != n
                       || memcmp(ref, mask, (size_t) n_words * 4) != 0;
                if (n == 0 || llm_matcher_is_done(m)) {
                    break;
                }
                k = rand() % n;
                for (id = 0; id < n_vocab; id++) {
                    if (((mask[id >> 5] >> (id & 31)) & 1) && k-- == 0) {
                        break;
                    }
                }
                if (llm_token_is_stop(tok, id)
                    || llm_matcher_accept(m, id) != 0)
                {
                    break;
                }
            }
            llm_matcher_free(m);
        }
        llm_grammar_free(g);
    }
    kept = v ? llm_grammar_vocab_shared(v, &hits) : 0;
    ok(kept > 0 && hits > 0, "grammars share local masks through the "
       "vocabulary (%d kept, %llu walks spared)", kept,
       (unsigned long long) hits);
    is_int(bad, 0, "masks from another grammar's local masks equal full "
           "walks (%d steps)", steps);
    llm_grammar_vocab_free(v);
    free(mask);
    free(ref);
}


/* more states than the mask cache holds: evicted masks come back exact */
static void
test_mask_eviction(void)
{
    llm_grammar  *g;
    llm_matcher  *m;
    uint32_t     *mask = malloc((size_t) n_words * 4);
    uint32_t     *ref = malloc((size_t) n_words * 4);
    char          err[256];
    int           i, c, bad = 0, steps = 0;

    /* state i wants "abc"[i % 3]: the state that takes an evicted
       state's slot wants another letter (128 % 3 != 0) */
    g = compile(LLM_CONSTRAINT_REGEX, "(abc){100}", err, sizeof(err));
    m = llm_matcher_new(g);
    for (i = 0; i < 300; i++) {
        c = llm_matcher_mask(m, mask);
        bad += llm_matcher_mask_nocache(m, ref) != c
               || memcmp(ref, mask, (size_t) n_words * 4) != 0;
        steps += llm_matcher_accept_bytes(m, &"abc"[i % 3], 1) == 0;
    }
    ok(steps == 300 && llm_matcher_can_end(m), "300 distinct states");
    llm_matcher_rollback(m, 290);
    c = llm_matcher_mask(m, mask);
    bad += llm_matcher_mask_nocache(m, ref) != c
           || memcmp(ref, mask, (size_t) n_words * 4) != 0;
    is_int(bad, 0, "masks exact past the cache's 128 slots and after "
           "rollback to an evicted state");
    llm_matcher_free(m);
    llm_grammar_free(g);
    free(mask);
    free(ref);
}


/* the vocabulary's grammar cache: same key, same grammar; refs counted */
static void
test_cache(void)
{
    llm_grammar_limits   lim;
    llm_grammar         *a, *b, *c, *d, *e, *f, *x[20];
    llm_matcher         *m;
    char                 err[256], src[64];
    int                  i;

    llm_grammar_limits_default(&lim);

    lim.json_ws = LLM_JSON_WS_FLEXIBLE;     /* the texts have blanks */
    a = llm_grammar_compile(vocab, LLM_CONSTRAINT_GRAMMAR, "root ::= \"q\"",
                            12, &lim, err, sizeof(err));
    b = llm_grammar_compile(vocab, LLM_CONSTRAINT_GRAMMAR, "root ::= \"q\"",
                            12, &lim, err, sizeof(err));
    c = llm_grammar_compile(vocab, LLM_CONSTRAINT_GRAMMAR, "root ::= \"r\"",
                            12, &lim, err, sizeof(err));
    d = llm_grammar_compile(vocab, LLM_CONSTRAINT_REGEX, "root ::= \"q\"",
                            12, &lim, err, sizeof(err));
    ok(a != NULL && a == b && c != NULL && c != a && d != NULL && d != a,
       "same text, same grammar; other text or kind, another");
    llm_grammar_free(d);
    e = llm_grammar_compile(vocab, LLM_CONSTRAINT_JSON_OBJECT, "x", 1, &lim,
                            err, sizeof(err));
    f = llm_grammar_compile(vocab, LLM_CONSTRAINT_JSON_OBJECT, "yy", 2, &lim,
                            err, sizeof(err));
    ok(e != NULL && e == f, "json_object: one grammar whatever its text");
    lim.max_ws = 3;
    b = llm_grammar_compile(vocab, LLM_CONSTRAINT_JSON_OBJECT, "", 0, &lim,
                            err, sizeof(err));
    ok(b != NULL && b != e, "another max_ws, another grammar");
    llm_grammar_free(b);
    llm_grammar_free(f);
    llm_grammar_free(a);
    /* 20 more push the first ones out; those still held stay usable */
    for (i = 0; i < 20; i++) {
        snprintf(src, sizeof(src), "root ::= \"%d\"", i);
        x[i] = llm_grammar_compile(vocab, LLM_CONSTRAINT_GRAMMAR, src,
                                   strlen(src), &lim, err, sizeof(err));
    }
    m = llm_matcher_new(a);
    ok(m != NULL && llm_matcher_accept_bytes(m, "q", 1) == 0
       && llm_matcher_can_end(m), "an evicted grammar still held works");
    llm_matcher_free(m);
    llm_grammar_free(a);
    llm_grammar_free(c);
    llm_grammar_free(e);
    for (i = 0; i < 20; i++) {
        llm_grammar_free(x[i]);
    }
    a = llm_grammar_compile(vocab, LLM_CONSTRAINT_GRAMMAR, "root ::= \"q\"",
                            12, &lim, err, sizeof(err));
    ok(a != NULL, "compiled again after eviction");
    llm_grammar_free(a);
}


typedef struct {
    const llm_grammar  *g;
    const int32_t      *ids;
    int                 n;
    int                 bad;
} thread_arg;


static void *
thread_walk(void *p)
{
    thread_arg   *a = p;
    uint32_t     *mask = malloc((size_t) n_words * 4);
    uint32_t     *ref = malloc((size_t) n_words * 4);
    int           r, i, c;

    for (r = 0; r < 4; r++) {
        llm_matcher  *m = llm_matcher_new(a->g);

        for (i = 0; i < a->n; i++) {
            c = llm_matcher_mask(m, mask);
            if (i % 5 == r && (llm_matcher_mask_nocache(m, ref) != c
                               || memcmp(ref, mask, (size_t) n_words * 4)))
            {
                a->bad++;
            }
            if (llm_matcher_accept(m, a->ids[i]) != 0) {
                a->bad++;
                break;
            }
        }
        llm_matcher_free(m);
    }
    free(mask);
    free(ref);
    return NULL;
}


/* matchers of one grammar on several threads share its local masks */
static void
test_threads(void)
{
    llm_grammar  *g;
    pthread_t     th[4];
    thread_arg    a[4];
    int32_t       ids[2048];
    char          err[256];
    int           n, i, bad = 0;

    g = compile(LLM_CONSTRAINT_JSON_OBJECT, "", err, sizeof(err));
    n = llm_tokenize(tok, doc, strlen(doc), 0, 0, ids, 2048);
    for (i = 0; i < 4; i++) {
        a[i].g = g;
        a[i].ids = ids;
        a[i].n = n;
        a[i].bad = 0;
        pthread_create(&th[i], NULL, thread_walk, &a[i]);
    }
    for (i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        bad += a[i].bad;
    }
    is_int(bad, 0, "4 threads, one grammar: every mask exact, every token "
           "accepted");
    llm_grammar_free(g);
}


/* n letters */
static char *
letters(int n)
{
    char  *s = malloc((size_t) n + 3);

    s[0] = '<';
    memset(s + 1, 'a', (size_t) n);
    s[n + 1] = '>';
    s[n + 2] = '\0';
    return s;
}


/*
 * x{m,n} past the unrolling cap: a counter. Exact at n-1, n, n+1; the
 * mask at and near the bounds equal to trying every token; two counts
 * near a bound keep different masks (the cache keys on the counter's
 * class); rollback across the counter gives back the count.
 */
static void
test_counters(void)
{
    static const int   at[] = { 0, 1, 700, 1500, 2000, 4000, 4960, 4990,
                                4995, 4999, 5000 };
    const char        *src = "root ::= \"<\" [a-z]{1500,5000} \">\"";
    llm_grammar       *g;
    llm_matcher       *m, *m2;
    uint32_t          *mask, *ref, *m4990, *m4999;
    char               err[256], *s;
    int                i, c, bad, n0;

    s = letters(1499);
    is_int(matches(GR, src, s), 0, "{1500,5000}: 1499 refused");
    free(s);
    s = letters(1500);
    is_int(matches(GR, src, s), 1, "{1500,5000}: 1500 accepted");
    free(s);
    s = letters(1501);
    is_int(matches(GR, src, s), 1, "{1500,5000}: 1501 accepted");
    free(s);
    s = letters(4999);
    is_int(matches(GR, src, s), 1, "{1500,5000}: 4999 accepted");
    free(s);
    s = letters(5000);
    is_int(matches(GR, src, s), 1, "{1500,5000}: 5000 accepted");
    free(s);
    s = letters(5001);
    is_int(matches(GR, src, s), 0, "{1500,5000}: 5001 refused");
    free(s);
    s = letters(7000);
    is_int(matches(GR, "root ::= \"<\" \"a\"{7000} \">\"", s), 1,
           "{7000}: 7000 accepted");
    s[7000] = '>', s[7001] = '\0';
    is_int(matches(GR, "root ::= \"<\" \"a\"{7000} \">\"", s), 0,
           "{7000}: 6999 refused");
    free(s);
    s = letters(3000);
    is_int(matches(GR, "root ::= \"<\" \"a\"{3000,} \">\"", s), 1,
           "{3000,}: 3000 accepted");
    s[3000] = '>', s[3001] = '\0';
    is_int(matches(GR, "root ::= \"<\" \"a\"{3000,} \">\"", s), 0,
           "{3000,}: 2999 refused");
    free(s);
    s = letters(9000);
    is_int(matches(GR, "root ::= \"<\" \"a\"{3000,} \">\"", s), 1,
           "{3000,}: 9000 accepted");
    free(s);
    is_int(matches(LLM_CONSTRAINT_REGEX, "a{0,10000}b", "aab"), 1,
           "regex a{0,10000}b: aab");
    s = letters(10001);
    s[0] = 'a';                         /* 10002 letters, then "b" */
    s[10002] = 'b';
    is_int(matches(LLM_CONSTRAINT_REGEX, "a{0,10000}b", s + 3), 1,
           "regex a{0,10000}b: 9999 a and b");
    is_int(matches(LLM_CONSTRAINT_REGEX, "a{0,10000}b", s + 2), 1,
           "regex a{0,10000}b: 10000 a and b");
    is_int(matches(LLM_CONSTRAINT_REGEX, "a{0,10000}b", s + 1), 0,
           "regex a{0,10000}b: 10001 a and b refused");
    free(s);

    /* small, bounded memory: one element, whatever n */
    g = compile(GR, "root ::= \"a\"{0,100000000}", err, sizeof(err));
    ok(g != NULL && g->n_el < 16 && g->n_reps == 1,
       "{0,100000000}: %d elements", g ? g->n_el : -1);
    llm_grammar_free(g);

    /* masks near the bounds: equal to trying every token */
    mask = malloc((size_t) n_words * 4);
    ref = malloc((size_t) n_words * 4);
    m4990 = malloc((size_t) n_words * 4);
    m4999 = malloc((size_t) n_words * 4);
    g = compile(GR, src, err, sizeof(err));
    m = llm_matcher_new(g);
    llm_matcher_accept_bytes(m, "<", 1);
    for (i = 0, c = 0, bad = 0; i < (int) (sizeof(at) / sizeof(at[0])); i++)
    {
        for (; c < at[i]; c++) {
            llm_matcher_accept_bytes(m, "a", 1);
        }
        n0 = llm_matcher_mask(m, mask);
        if (llm_matcher_mask_nocache(m, ref) != n0
            || memcmp(mask, ref, (size_t) n_words * 4) != 0
            || !mask_is_exact(m, mask))
        {
            printf("# count %d: the mask is wrong\n", c);
            bad++;
        }
        if (c == 4990) {
            memcpy(m4990, mask, (size_t) n_words * 4);
        }
        if (c == 4999) {
            memcpy(m4999, mask, (size_t) n_words * 4);
        }
    }
    is_int(bad, 0, "masks at counts 0..5000 of {1500,5000}: exact");
    ok(memcmp(m4990, m4999, (size_t) n_words * 4) != 0,
       "counts 4990 and 4999: different masks");
    ok(llm_matcher_accept_bytes(m, "a", 1) != 0
       && llm_matcher_accept_bytes(m, ">", 1) == 0, "5001st letter refused, "
       "the end taken");

    /* rollback across the counter */
    llm_matcher_rollback(m, 1 + 10);    /* ">" and 10 letters: count 4990 */
    n0 = llm_matcher_mask(m, mask);
    ok(memcmp(mask, m4990, (size_t) n_words * 4) == 0,
       "rollback to count 4990: its mask");
    ok(llm_matcher_accept_bytes(m, "aaaaaaaaa", 9) == 0
       && llm_matcher_mask(m, mask) >= 0
       && memcmp(mask, m4999, (size_t) n_words * 4) == 0,
       "9 letters more: the mask of 4999");
    llm_matcher_rollback(m, 1);
    ok(llm_matcher_accept_bytes(m, "aaaaaaaaaaa", 11) != 0
       && llm_matcher_accept_bytes(m, "aaaaaaaaaa>", 11) == 0,
       "rolled back to 4990: 11 letters refused, 10 taken");
    llm_matcher_free(m);

    /* a second matcher of the grammar, straight to 4999 and 4990: the
       grammar's cached local masks keep the two counts apart */
    m2 = llm_matcher_new(g);
    llm_matcher_accept_bytes(m2, "<", 1);
    for (c = 0; c < 4999; c++) {
        llm_matcher_accept_bytes(m2, "a", 1);
    }
    llm_matcher_mask(m2, mask);
    ok(memcmp(mask, m4999, (size_t) n_words * 4) == 0,
       "another matcher at 4999: the same mask");
    llm_matcher_rollback(m2, 9);
    llm_matcher_mask(m2, mask);
    ok(memcmp(mask, m4990, (size_t) n_words * 4) == 0,
       "and at 4990 (rollback 9)");
    llm_matcher_free(m2);
    llm_grammar_free(g);
    free(mask);
    free(ref);
    free(m4990);
    free(m4999);
}


int
main(void)
{
    gguf_file  gf;
    char       err[512];

    if (gguf_open(&gf, tap_model()) != 0) {
        tap_bail_out(gf.err);
    }
    tok = llm_tokenizer_load_gguf(&gf, err, sizeof(err));
    gguf_close(&gf);
    if (tok == NULL) {
        tap_bail_out(err);
    }
    vocab = llm_grammar_vocab_new(tok, err, sizeof(err));
    if (vocab == NULL) {
        tap_bail_out(err);
    }
    n_vocab = llm_tokenizer_n_vocab(tok);
    n_words = (n_vocab + 31) / 32;

    test_syntax();
    test_caps();
    test_regex();
    test_counters();
    test_special();
    test_json_walk();
    test_random_walks();
    test_threads();
    test_cache();
    test_mask_eviction();
    test_vocab_shared();

    llm_grammar_vocab_free(vocab);
    llm_tokenizer_free(tok);
    return tap_done();
}
