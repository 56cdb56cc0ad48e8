/*
 * gpt-oss's Harmony replies: detected from the published template, split
 * by channel on fixed model outputs (analysis -> reasoning, final and
 * commentary -> content, to=functions.NAME -> a call, both header orders,
 * <|constrain|>json), malformed ones back as content with the reason, cut
 * streams (a header, a thinking, a call, a constrained call), and the same
 * result however the text is split (api/harmony.h, api/reply.h).
 */
#include "tap.h"
#include "api/reply.h"
#include "api/harmony.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOOLS_JSON                                                            \
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","         \
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":"          \
    "{\"type\":\"string\"}},\"required\":[\"city\"]}}},"                     \
    "{\"type\":\"function\",\"function\":{\"name\":\"now\",\"parameters\":"   \
    "{\"type\":\"object\",\"properties\":{}}}}]"

#define A(t)    "<|channel|>analysis<|message|>" t "<|end|>"
#define S       "<|start|>assistant"
#define F(t)    "<|channel|>final<|message|>" t
#define CALL(f, args)                                                         \
    "<|channel|>commentary to=functions." f " <|constrain|>json<|message|>"  \
    args "<|call|>"

static cJSON  *tools;

typedef struct {
    char    reasoning[1024];
    char    content[1024];
    char    calls[1024];
    int     failed;
    int     dropped;
    int     ids_ok;
} result;

typedef struct {
    int     reasoning;
    int     constrained;
    int     parallel;
} opts;


static void
take(result *r, const llm_reply_piece *p)
{
    strncat(r->reasoning, p->reasoning ? p->reasoning : "",
            p->reasoning_len);
    strncat(r->content, p->content ? p->content : "", p->content_len);
}


/* the reply pushed in two pieces cut at `cut` (0: whole) */
static void
run(const char *text, size_t cut, const opts *op, result *r)
{
    int              i;
    size_t           len = strlen(text);
    llm_reply        o;
    llm_reply_piece  p;

    memset(r, 0, sizeof(*r));
    r->ids_ok = 1;
    llm_reply_init(&o, LLM_TOOL_FMT_HARMONY, op->reasoning, 0, op->parallel,
                   tools);
    o.constrained = op->constrained;
    if (cut) {
        llm_reply_push(&o, text, cut, &p);
        take(r, &p);
    }
    llm_reply_push(&o, text + cut, len - cut, &p);
    take(r, &p);
    llm_reply_finish(&o, &p);
    take(r, &p);
    for (i = 0; i < o.n_calls; i++) {
        strcat(r->calls, o.calls[i].name);
        strcat(r->calls, ":");
        strcat(r->calls, o.calls[i].arguments);
        strcat(r->calls, ";");
        r->ids_ok &= strncmp(o.calls[i].id, "call_", 5) == 0
                     && strlen(o.calls[i].id) == 29;
    }
    r->failed = o.failed;
    r->dropped = o.dropped;
    llm_reply_free(&o);
}


static void
is_reply_opts(const char *text, const opts *op, const char *reasoning,
    const char *content, const char *calls, int failed, const char *what)
{
    result  a, b;
    size_t  k, len = strlen(text);
    int     split_ok = 1;

    run(text, 0, op, &a);
    is_str(a.reasoning, reasoning, "%s: reasoning", what);
    is_str(a.content, content, "%s: content", what);
    is_str(a.calls, calls, "%s: calls", what);
    is_int(a.failed, failed, "%s: failed", what);
    ok(a.ids_ok, "%s: OpenAI call ids", what);
    for (k = 1; k < len; k++) {
        run(text, k, op, &b);
        if (strcmp(a.reasoning, b.reasoning) || strcmp(a.content, b.content)
            || strcmp(a.calls, b.calls) || a.failed != b.failed
            || a.dropped != b.dropped)
        {
            printf("# split at %zu: reasoning \"%s\" content \"%s\" "
                   "calls \"%s\"\n", k, b.reasoning, b.content, b.calls);
            split_ok = 0;
            break;
        }
    }
    ok(split_ok, "%s: split at every byte = whole", what);
}


static void
is_reply(const char *text, const char *reasoning, const char *content,
    const char *calls, int failed, const char *what)
{
    opts  op = { 1, 0, 1 };

    is_reply_opts(text, &op, reasoning, content, calls, failed, what);
}


/* the published template (make deps: the llama-cpp-python sdist's
   openai-gpt-oss-120b.jinja) is Harmony; the others are not */
static void
test_detect(void)
{
    char         path[4096], *text;
    const char  *fx = getenv("FIXTURES");
    size_t       n;
    static const char *const  others[] = {
        "Qwen3-Coder.jinja", "Qwen-Qwen3-0.6B.jinja",
        "meta-llama-Llama-3.1-8B-Instruct.jinja",
        "mistralai-Mistral-Nemo-Instruct-2407.jinja", NULL
    };

    snprintf(path, sizeof(path),
             "%s/llama.cpp/templates/openai-gpt-oss-120b.jinja",
             fx ? fx : "");
    text = tap_slurp(path, &n);
    ok(text != NULL, "the published template: %s", path);
    if (text) {
        is_int(llm_tool_format_detect(text, n), LLM_TOOL_FMT_HARMONY,
               "the published gpt-oss template: harmony");
        free(text);
    }
    for (int i = 0; others[i]; i++) {
        snprintf(path, sizeof(path), "%s/llama.cpp/templates/%s",
                 fx ? fx : "", others[i]);
        text = tap_slurp(path, &n);
        ok(text && llm_tool_format_detect(text, n) != LLM_TOOL_FMT_HARMONY,
           "%s: not harmony", others[i]);
        free(text);
    }
    is_str(llm_tool_format_name(LLM_TOOL_FMT_HARMONY), "harmony", "name");
}


static void
test_channels(void)
{
    is_reply(A("The user greets me.") S F("Hello!") "<|return|>",
             "The user greets me.", "Hello!", "", 0,
             "analysis, then final, <|return|>");
    is_reply(A("Think.") S F("Hello!"), "Think.", "Hello!", "", 0,
             "the stop token not written (the detokenizer skipped it)");
    is_reply(F("Just the answer.") "<|return|>", "", "Just the answer.", "",
             0, "final only");
    is_reply(A("a <b> c <| d < |e") S F("x < y <|"), "a <b> c <| d < |e",
             "x < y <|", "", 0,
             "'<' and a marker's start that is none, in both channels");
    is_reply(A("one") S A(" two") S F("three"), "one two", "three", "", 0,
             "two analysis messages");
    is_reply("<|channel|>commentary<|message|>Let me check.<|end|>" S
             F("Done."), "", "Let me check.Done.", "", 0,
             "commentary without a recipient: a preamble, content");
    is_reply("<|channel|>notes<|message|>odd<|end|>" S F("ok"), "", "oddok",
             "", 0, "an unknown channel: content");
    is_reply(A("no end") S F("yes"), "no end", "yes", "", 0,
             "a message not closed before the next <|start|>");
    is_reply("<|channel|>analysis<|message|>unclosed" S F("yes"),
             "unclosed", "yes", "", 0,
             "a message the model did not close before <|start|>");
}


static void
test_calls(void)
{
    opts  op = { 1, 0, 1 };

    is_reply(A("Need the weather.") S CALL("get_weather",
             "{\"city\": \"Paris\"}"), "Need the weather.", "",
             "get_weather:{\"city\":\"Paris\"};", 0,
             "analysis, then a call (<|constrain|>json)");
    is_reply(" to=functions.get_weather<|channel|>commentary json<|message|>"
             "{\"city\":\"Oslo\"}<|call|>", "", "",
             "get_weather:{\"city\":\"Oslo\"};", 0,
             "to= before the channel (the template's order), json");
    is_reply("<|channel|>commentary to=functions.now <|constrain|>json"
             "<|message|>{}", "", "", "now:{};", 0,
             "a call whose <|call|> the detokenizer skipped");
    is_reply("<|channel|>analysis to=functions.now<|message|>{}<|call|>",
             "", "", "now:{};", 0, "a call from the analysis channel");
    is_reply("<|channel|>commentary<|message|>Checking.<|end|>" S
             CALL("now", " {} "), "", "Checking.", "now:{};", 0,
             "a preamble, then a call");
    op.parallel = 0;
    is_reply_opts(CALL("now", "{}") S CALL("get_weather",
                  "{\"city\":\"Rome\"}"), &op, "", "", "now:{};", 0,
                  "parallel_tool_calls false: the first call only");
    op.parallel = 1;
    is_reply_opts(CALL("now", "{}") S CALL("get_weather",
                  "{\"city\":\"Rome\"}"), &op, "", "",
                  "now:{};get_weather:{\"city\":\"Rome\"};", 0,
                  "two calls (a model that did not stop at <|call|>)");
}


static void
test_malformed(void)
{
    opts  op = { 1, 1, 1 };

    is_reply(CALL("rm", "{\"path\": \"/\"}"), "", "{\"path\": \"/\"}", "", 1,
             "malformed: an unknown function, its body is content");
    is_reply("<|channel|>commentary to=browser.search<|message|>{\"q\":1}"
             "<|call|>", "", "{\"q\":1}", "", 1,
             "malformed: a built-in tool's recipient");
    is_reply(CALL("get_weather", "{\"city\": "), "", "{\"city\": ", "", 1,
             "malformed: arguments that are not JSON");
    is_reply(CALL("get_weather", "[1]"), "", "[1]", "", 1,
             "malformed: arguments that are not an object");
    is_reply(CALL("now", "{} trailing"), "", "{} trailing", "", 1,
             "malformed: text after the arguments");
    is_reply("Hello, no Harmony here.", "", "Hello, no Harmony here.", "",
             0, "plain text without a header: content");
    is_reply("Plain <|end|> text", "", "Plain <|end|> text", "", 0,
             "plain text with a stray marker: content");

    /* cut streams */
    is_reply("<|channel|>analy", "", "", "", 0, "cut in the header");
    is_reply(A("done") S "<|channel|>fin", "done", "", "", 0,
             "cut in the second header");
    is_reply("<|channel|>analysis<|message|>I am thinking ab",
             "I am thinking ab", "", "", 0, "cut in the thinking");
    is_reply("<|channel|>final<|message|>Half an ans", "", "Half an ans",
             "", 0, "cut in the answer");
    is_reply_opts("<|channel|>commentary to=functions.get_weather "
                  "<|constrain|>json<|message|>{\"city\": \"Pa", &op, "", "",
                  "", 0, "constrained, cut in the arguments: dropped");
    is_reply_opts(CALL("get_weather", "{\"city\": \"Paris\"}"), &op, "", "",
                  "get_weather:{\"city\":\"Paris\"};", 0,
                  "constrained, a whole call");
}


static void
test_no_reasoning(void)
{
    opts  op = { 0, 0, 1 };

    is_reply_opts(A("hidden") S F("shown") "<|return|>", &op, "", "shown",
                  "", 0, "without reasoning: the analysis is dropped");
}


static void
test_long_header(void)
{
    char  text[LLM_HARMONY_HEAD_MAX + 64];

    memset(text, 'x', LLM_HARMONY_HEAD_MAX + 10);
    strcpy(text + LLM_HARMONY_HEAD_MAX + 10, "<|message|>y");
    is_reply(text, "", text, "", 0,
             "a header past its bound: all of it content");
}


/* o200k_harmony's special tokens, control tokens as the published
   tokenizer.json has them (special: true) */
static const char *const  harmony_tokens[] = {
    "<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>",
    "<|channel|>", "<|start|>", "<|end|>", "<|message|>", "<|call|>", NULL
};


/* a qwen2 BPE vocabulary (make deps) with Harmony's special tokens added:
   the markers are tokens, as in gpt-oss's */
static llm_tokenizer *
harmony_tokenizer(void)
{
    char            path[1024], dir[] = "/tmp/test_harmony.XXXXXX", err[256];
    char           *src, *j;
    size_t          len;
    cJSON          *tj, *added, *vocab, *a;
    llm_tokenizer  *t = NULL;
    FILE           *f;
    int             id;

    src = tap_slurp(tap_fixture(path, sizeof(path),
                               "tokenizers/qwen2-bpe/tokenizer.json"), &len);
    tj = src ? cJSON_Parse(src) : NULL;
    free(src);
    if (tj == NULL || mkdtemp(dir) == NULL) {
        cJSON_Delete(tj);
        return NULL;
    }
    added = cJSON_GetObjectItem(tj, "added_tokens");
    vocab = cJSON_GetObjectItem(cJSON_GetObjectItem(tj, "model"), "vocab");
    id = cJSON_GetArraySize(vocab) + cJSON_GetArraySize(added);
    for (int i = 0; harmony_tokens[i]; i++, id++) {
        a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", id);
        cJSON_AddStringToObject(a, "content", harmony_tokens[i]);
        cJSON_AddBoolToObject(a, "single_word", 0);
        cJSON_AddBoolToObject(a, "lstrip", 0);
        cJSON_AddBoolToObject(a, "rstrip", 0);
        cJSON_AddBoolToObject(a, "normalized", 0);
        cJSON_AddBoolToObject(a, "special", 1);
        cJSON_AddItemToArray(added, a);
    }
    j = cJSON_PrintUnformatted(tj);
    cJSON_Delete(tj);
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    f = fopen(path, "w");
    if (f && j) {
        fputs(j, f);
        fclose(f);
        t = llm_tokenizer_load_hf(dir, err, sizeof(err));
        if (t == NULL) {
            printf("# %s\n", err);
        }
    } else if (f) {
        fclose(f);
    }
    free(j);
    unlink(path);
    rmdir(dir);
    return t;
}


/* <|return|> and <|call|> end a reply, <|end|> does not */
static void
test_stops(const llm_tokenizer *tok)
{
    int  ret = 0, call = 0, end = 0, i, n;
    const int32_t  *ids;

    n = llm_tokenizer_stop_ids(tok, &ids);
    for (i = 0; i < n; i++) {
        ret |= ids[i] == llm_token_lookup(tok, "<|return|>", 10);
        call |= ids[i] == llm_token_lookup(tok, "<|call|>", 8);
        end |= ids[i] == llm_token_lookup(tok, "<|end|>", 7);
    }
    ok(ret && call, "stop ids: <|return|> and <|call|>");
    ok(!end, "stop ids: not <|end|> (the thinking's end)");
}


/* a reply as the model's token ids, through the detokenizer that keeps
   special tokens (the module's for Harmony), one token at a time */
static void
test_token_stream(const llm_tokenizer *tok)
{
    static const char  text[] =
        "<|channel|>analysis<|message|>User wants Paris weather; call it."
        "<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.get_weather <|constrain|>json<|message|>"
        "{\"city\":\"Paris\"}<|call|>";
    int32_t          ids[256];
    char            *buf;
    int              n, k, pieces = 0, marker_split = 1;
    llm_detok        d;
    llm_reply        o;
    llm_reply_piece  p;
    result           r;

    memset(&r, 0, sizeof(r));
    n = llm_tokenize(tok, text, sizeof(text) - 1, 0, 1, ids, 256);
    ok(n > 0 && n < 256, "the reply encodes to %d ids", n);
    for (k = 0; k < n; k++) {
        marker_split &= !(ids[k] == llm_token_lookup(tok, "<|", 2));
    }
    ok(ids[0] == llm_token_lookup(tok, "<|channel|>", 11) && marker_split,
       "the markers are single tokens");
    buf = malloc(llm_detok_max_out(tok));
    llm_detok_init(&d, 0);
    llm_reply_init(&o, LLM_TOOL_FMT_HARMONY, 1, 0, 1, tools);
    for (k = 0; k < n && buf; k++) {
        int  w = llm_detok_push(tok, &d, ids[k], buf, llm_detok_max_out(tok));

        llm_reply_push(&o, buf, w > 0 ? (size_t) w : 0, &p);
        pieces += p.reasoning_len > 0;
        take(&r, &p);
    }
    llm_reply_finish(&o, &p);
    take(&r, &p);
    is_str(r.reasoning, "User wants Paris weather; call it.",
           "token stream: the reasoning");
    ok(pieces > 3, "token stream: the reasoning came in %d pieces as it was "
       "written", pieces);
    is_str(r.content, "", "token stream: no content");
    ok(o.n_calls == 1 && strcmp(o.calls[0].name, "get_weather") == 0
       && strcmp(o.calls[0].arguments, "{\"city\":\"Paris\"}") == 0,
       "token stream: the call");
    llm_reply_free(&o);
    free(buf);
}


/* ids of text (markers as their tokens) through a matcher: 1 when every
   one is allowed and the grammar may end there */
static int
grammar_takes(const llm_grammar *g, const llm_tokenizer *tok,
    const char *text)
{
    int32_t       ids[512];
    int           n, k, rc = 1;
    llm_matcher  *m = llm_matcher_new(g);

    n = llm_tokenize(tok, text, strlen(text), 0, 1, ids, 512);
    for (k = 0; m && k < n && rc; k++) {
        rc = llm_matcher_accept(m, ids[k]) == 0;
    }
    rc = m && rc && llm_matcher_can_end(m);
    llm_matcher_free(m);
    return rc;
}


static void
test_grammar(const llm_tokenizer *tok)
{
    char                 err[256], *src;
    size_t               len;
    llm_grammar_vocab   *v;
    llm_grammar         *g;
    llm_grammar_limits   lim;

    src = llm_tool_grammar(LLM_TOOL_FMT_HARMONY, tools, NULL, 4, NULL, &len);
    ok(src && strstr(src, "call ::= \"<|channel|>\" \"commentary "
                          "to=functions.\" (f0 | f1) \"<|call|>\"\n"),
       "required: a call of either tool (tags as text without the tokens)");
    free(src);

    src = llm_tool_grammar(LLM_TOOL_FMT_HARMONY, tools, NULL, 4, tok, &len);
    ok(src && strstr(src, "f0 ::= \"get_weather\" \" \" <|constrain|> "
                          "\"json\" <|message|> %json {"),
       "required: the markers as tokens");
    v = llm_grammar_vocab_new(tok, err, sizeof(err));
    llm_grammar_limits_default(&lim);
    g = v && src ? llm_grammar_compile(v, LLM_CONSTRAINT_GRAMMAR, src, len,
                                       &lim, err, sizeof(err))
                 : NULL;
    ok(g != NULL, "required: compiles%s%s", g ? "" : ": ", g ? "" : err);
    free(src);
    if (g) {
        ok(grammar_takes(g, tok, CALL("get_weather",
                                      "{\"city\":\"Paris\"}")),
           "required: takes a call");
        ok(grammar_takes(g, tok, A("Paris, so get_weather.") S
                         CALL("now", "{}")),
           "required: takes the thinking, then a call");
        ok(!grammar_takes(g, tok, CALL("rm", "{}")),
           "required: refuses an unknown function");
        ok(!grammar_takes(g, tok, CALL("get_weather", "{}")),
           "required: refuses arguments the schema does not allow");
        ok(!grammar_takes(g, tok, F("Hi") "<|return|>"),
           "required: refuses an answer");
        llm_grammar_free(g);
    }

    src = llm_tool_grammar(LLM_TOOL_FMT_HARMONY, tools, "now", 1, tok, &len);
    g = v && src ? llm_grammar_compile(v, LLM_CONSTRAINT_GRAMMAR, src, len,
                                       &lim, err, sizeof(err))
                 : NULL;
    ok(g != NULL, "named: compiles%s%s", g ? "" : ": ", g ? "" : err);
    free(src);
    if (g) {
        ok(grammar_takes(g, tok, CALL("now", "{}")), "named: takes its call");
        ok(!grammar_takes(g, tok, CALL("get_weather",
                                       "{\"city\":\"Paris\"}")),
           "named: refuses the other tool");
        llm_grammar_free(g);
    }
    llm_grammar_vocab_free(v);
}


int
main(void)
{
    llm_tokenizer  *tok;

    tools = cJSON_Parse(TOOLS_JSON);
    test_detect();
    test_channels();
    test_calls();
    test_malformed();
    test_no_reasoning();
    test_long_header();
    tok = harmony_tokenizer();
    ok(tok != NULL, "a vocabulary with Harmony's special tokens");
    if (tok) {
        test_stops(tok);
        test_token_stream(tok);
        test_grammar(tok);
        llm_tokenizer_free(tok);
    }
    cJSON_Delete(tools);
    return tap_done();
}
