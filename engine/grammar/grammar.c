/*
 * Compile: source of any constraint kind -> GBNF rules (gbnf.c, regex.c,
 * json_schema.c) -> checks -> the flat element array the matcher walks.
 *
 * Checks, each an error naming the rule: no root, an undefined rule, left
 * recursion (direct, indirect or through rules that match the empty
 * string: the matcher expands rules eagerly and would loop), a rule that
 * can never complete (a mask would allow a token leading nowhere), a
 * counted repetition (GE_REPEAT) of a rule that may be empty. The
 * caps of grammar_impl.h and the limits' source size and compile time.
 *
 * Compiled grammars are kept by the vocabulary (LLM_GRAMMAR_CACHED, least
 * recently used out, reference counted), so requests with the same
 * constraint share one grammar and the masks it caches.
 *
 * defines: llm_grammar_limits_default, llm_grammar_compile,
 *          llm_grammar_compile_uncached, llm_grammar_free,
 *          llm_grammar_relaxed, llm_grammar_from_build,
 *          llm_grammar_cache_clear
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"
#include "grammar/json_schema.h"


static void grammar_destroy(llm_grammar *g);

void
llm_grammar_limits_default(llm_grammar_limits *lim)
{
    lim->max_source = LLM_CONSTRAINT_MAX_BYTES;
    lim->max_compile_ns = 100 * 1000000ull;
    lim->max_ws = 20;
    /* flexible until the request path chooses (llm_json_whitespace):
       compact on SmolLM2 made t/026's greedy json_object nest
       {"name":{"name":... to max_tokens (docs/json_schema.md) */
    lim->json_ws = LLM_JSON_WS_FLEXIBLE;
    lim->strict = 1;
}


/* the blanks JSON may have in a row: none when compact */
static int
json_max_ws(const llm_grammar_limits *lim)
{
    return lim->json_ws == LLM_JSON_WS_FLEXIBLE ? lim->max_ws : 0;
}


const char *
llm_grammar_relaxed(const llm_grammar *g)
{
    return g != NULL && g->relaxed != NULL ? g->relaxed : "";
}


static int
timed_out(llm_gbuild *b)
{
    if (b->deadline_ns && llm_grammar_now_ns() > b->deadline_ns) {
        snprintf(b->err, b->err_len, "grammar: compile time limit");
        return 1;
    }
    return 0;
}


/* the rule element e refers to (GE_RULE, GE_REPEAT's body), or -1 */
static int
elem_rule(const llm_gbuild *b, const llm_gelem *e)
{
    return e->type == GE_RULE ? e->val
           : e->type == GE_REPEAT ? b->reps[e->val].rule : -1;
}


static int
elem_nullable(const llm_gbuild *b, const llm_gelem *e,
    const uint8_t *nullable)
{
    if (e->type == GE_REPEAT) {
        return b->reps[e->val].min == 0 || nullable[b->reps[e->val].rule];
    }
    return e->type == GE_RULE && nullable[e->val];
}


static void
compute_nullable(llm_gbuild *b, uint8_t *nullable)
{
    int  changed, r, i, ok;

    memset(nullable, 0, (size_t) b->n_rules);
    do {
        changed = 0;
        for (r = 0; r < b->n_rules; r++) {
            const llm_grule  *ru = &b->rules[r];

            if (nullable[r]) {
                continue;
            }
            ok = 1;
            for (i = 0; i <= ru->n_el; i++) {
                if (i == ru->n_el || ru->el[i].type == GE_ALT) {
                    if (ok) {
                        nullable[r] = 1;
                        changed = 1;
                        break;
                    }
                    ok = 1;
                } else if (!elem_nullable(b, &ru->el[i], nullable)) {
                    ok = 0;
                }
            }
        }
    } while (changed);
}


static void
compute_productive(llm_gbuild *b, uint8_t *prod)
{
    int  changed, r, i, ok;

    memset(prod, 0, (size_t) b->n_rules);
    do {
        changed = 0;
        for (r = 0; r < b->n_rules; r++) {
            const llm_grule  *ru = &b->rules[r];

            if (prod[r]) {
                continue;
            }
            ok = 1;
            for (i = 0; i <= ru->n_el; i++) {
                if (i == ru->n_el || ru->el[i].type == GE_ALT) {
                    if (ok) {
                        prod[r] = 1;
                        changed = 1;
                        break;
                    }
                    ok = 1;
                } else if (elem_rule(b, &ru->el[i]) >= 0
                           && !prod[elem_rule(b, &ru->el[i])])
                {
                    ok = 0;
                }
            }
        }
    } while (changed);
}


/*
 * Left recursion: a cycle in "A may start with B" (B's left in an
 * alternative of A, after rules that may be empty). Depth-first with an
 * explicit stack: rules nest deep (x{0,1000}).
 */
static int
check_left_recursion(llm_gbuild *b, const uint8_t *nullable)
{
    uint8_t  *color;
    int32_t  *stack, *edge;
    int       r, top, i, j, rule, found = -1;

    color = calloc((size_t) b->n_rules, 1);
    stack = malloc((size_t) b->n_rules * sizeof(int32_t));
    edge = malloc((size_t) b->n_rules * sizeof(int32_t));
    if (color == NULL || stack == NULL || edge == NULL) {
        free(color);
        free(stack);
        free(edge);
        snprintf(b->err, b->err_len, "grammar: out of memory");
        return -1;
    }
    for (r = 0; r < b->n_rules && found < 0; r++) {
        if (color[r]) {
            continue;
        }
        top = 0;
        stack[0] = r;
        edge[0] = 0;
        color[r] = 1;
        while (top >= 0 && found < 0) {
            const llm_grule  *ru = &b->rules[stack[top]];
            int               start = 1;

            /* the next left-corner rule of ru after element edge[top]:
               left when all before it in its alternative may be empty */
            rule = -1;
            i = edge[top];
            for (j = i - 1; j >= 0 && ru->el[j].type != GE_ALT; j--) {
                if (!elem_nullable(b, &ru->el[j], nullable)) {
                    start = 0;
                    break;
                }
            }
            for ( ; i < ru->n_el; i++) {
                const llm_gelem  *e = &ru->el[i];

                if (e->type == GE_ALT) {
                    start = 1;
                    continue;
                }
                if (start && elem_rule(b, e) >= 0) {
                    rule = elem_rule(b, e);
                    i++;
                    break;
                }
                start = start && elem_nullable(b, e, nullable);
            }
            edge[top] = i;
            if (rule < 0) {
                color[stack[top--]] = 2;
            } else if (color[rule] == 1) {
                found = rule;
            } else if (color[rule] == 0) {
                color[rule] = 1;
                stack[++top] = rule;
                edge[top] = 0;
            }
        }
    }
    free(color);
    free(stack);
    free(edge);
    if (found >= 0) {
        snprintf(b->err, b->err_len, "grammar: left recursion through rule "
                 "'%s' (not supported: write it right-recursive or with "
                 "*)", b->rules[found].name);
        return -1;
    }
    return 0;
}


/* a counter's body may not be empty: empty iterations would loop */
static int
check_repeats(llm_gbuild *b, const uint8_t *nullable)
{
    int  i;

    for (i = 0; i < b->n_reps; i++) {
        if (nullable[b->reps[i].rule]) {
            snprintf(b->err, b->err_len, "grammar: a repetition {%d,%d} over "
                     "%d of '%s', which may match the empty string (not "
                     "supported)", (int) b->reps[i].min, (int) b->reps[i].max,
                     LLM_GRAMMAR_MAX_UNROLL, b->rules[b->reps[i].rule].name);
            return -1;
        }
    }
    return 0;
}


/* rules the root reaches must be able to complete */
static int
check_productive(llm_gbuild *b, int root, const uint8_t *prod)
{
    uint8_t  *seen;
    int32_t  *todo;
    int       n = 0, r, i, bad = -1;

    seen = calloc((size_t) b->n_rules, 1);
    todo = malloc((size_t) b->n_rules * sizeof(int32_t));
    if (seen == NULL || todo == NULL) {
        free(seen);
        free(todo);
        snprintf(b->err, b->err_len, "grammar: out of memory");
        return -1;
    }
    todo[n++] = root;
    seen[root] = 1;
    while (n > 0 && bad < 0) {
        r = todo[--n];
        if (!prod[r]) {
            bad = r;
        }
        for (i = 0; i < b->rules[r].n_el; i++) {
            const llm_gelem  *e = &b->rules[r].el[i];

            int               x = elem_rule(b, e);

            if (x >= 0 && !seen[x]) {
                seen[x] = 1;
                todo[n++] = x;
            }
        }
    }
    free(seen);
    free(todo);
    if (bad >= 0) {
        snprintf(b->err, b->err_len, "grammar: rule '%s' can never complete "
                 "(it only recurses)", b->rules[bad].name);
        return -1;
    }
    return 0;
}


static llm_grammar *
flatten(llm_gbuild *b, int root)
{
    llm_grammar  *g;
    int           r, i, n_el = 0, n_alt = 0, k = 0, a = 0;

    for (r = 0; r < b->n_rules; r++) {
        n_el += b->rules[r].n_el + 1;
        n_alt++;
        for (i = 0; i < b->rules[r].n_el; i++) {
            n_alt += b->rules[r].el[i].type == GE_ALT;
        }
        if (n_el > LLM_GRAMMAR_MAX_ELEMS) {
            snprintf(b->err, b->err_len, "grammar: more than %d elements "
                     "(the automaton's cap)", LLM_GRAMMAR_MAX_ELEMS);
            return NULL;
        }
    }
    g = calloc(1, sizeof(*g));
    if (g == NULL) {
        goto oom;
    }
    g->el = malloc((size_t) n_el * sizeof(llm_gelem));
    g->rule_start = malloc((size_t) b->n_rules * sizeof(int32_t));
    g->alt_first = malloc((size_t) (b->n_rules + 1) * sizeof(int32_t));
    g->alt_start = malloc((size_t) n_alt * sizeof(int32_t));
    g->sets = malloc((size_t) (b->n_sets ? b->n_sets : 1) * 32);
    g->reps = malloc((size_t) (b->n_reps ? b->n_reps : 1)
                     * sizeof(llm_grepeat));
    g->shared = calloc(1, sizeof(llm_gshared));
    if (g->el == NULL || g->rule_start == NULL || g->alt_first == NULL
        || g->alt_start == NULL || g->sets == NULL || g->reps == NULL
        || g->shared == NULL
        || pthread_mutex_init(&g->shared->lock, NULL) != 0)
    {
        free(g->shared);
        g->shared = NULL;
        llm_grammar_free(g);
        goto oom;
    }
    for (r = 0; r < b->n_rules; r++) {
        g->rule_start[r] = k;
        g->alt_first[r] = a;
        g->alt_start[a++] = k;
        for (i = 0; i < b->rules[r].n_el; i++) {
            g->el[k++] = b->rules[r].el[i];
            if (b->rules[r].el[i].type == GE_ALT) {
                g->alt_start[a++] = k;
            }
        }
        g->el[k].type = GE_END;
        g->el[k++].val = 0;
    }
    g->alt_first[b->n_rules] = a;
    if (b->n_sets > 0) {
        memcpy(g->sets, b->sets, (size_t) b->n_sets * 32);
    }
    g->n_sets = b->n_sets;
    if (b->n_reps > 0) {
        memcpy(g->reps, b->reps, (size_t) b->n_reps * sizeof(llm_grepeat));
    }
    g->n_reps = b->n_reps;
    g->n_el = n_el;
    g->n_rules = b->n_rules;
    g->root = root;
    g->vocab = b->vocab;
    return g;

oom:
    snprintf(b->err, b->err_len, "grammar: out of memory");
    return NULL;
}


llm_grammar *
llm_grammar_from_build(llm_gbuild *b)
{
    llm_grammar  *g = NULL;
    uint8_t      *flags;
    int           r, root;

    root = -1;
    for (r = 0; r < b->n_rules; r++) {
        if (!b->rules[r].defined) {
            snprintf(b->err, b->err_len, "grammar: undefined rule '%s' at "
                     "%d:%d", b->rules[r].name, b->rules[r].ref_line,
                     b->rules[r].ref_col);
            return NULL;
        }
        if (strcmp(b->rules[r].name, "root") == 0) {
            root = r;
        }
    }
    if (root < 0) {
        snprintf(b->err, b->err_len, "grammar: no rule 'root'");
        return NULL;
    }
    flags = malloc((size_t) b->n_rules);
    if (flags == NULL) {
        snprintf(b->err, b->err_len, "grammar: out of memory");
        return NULL;
    }
    compute_nullable(b, flags);
    if (timed_out(b) || check_repeats(b, flags) != 0
        || check_left_recursion(b, flags) != 0 || timed_out(b))
    {
        goto done;
    }
    compute_productive(b, flags);
    if (timed_out(b) || check_productive(b, root, flags) != 0) {
        goto done;
    }
    g = flatten(b, root);

done:
    free(flags);
    return g;
}


llm_grammar *
llm_grammar_compile_uncached(const llm_grammar_vocab *v, int kind,
    const char *src, size_t len, const llm_grammar_limits *lim, char *err,
    size_t err_len)
{
    llm_grammar_limits    def;
    llm_grammar          *g = NULL;
    llm_gbuild            b;
    llm_strbuf            out;
    llm_json_schema_opts  opts;
    char                *text = NULL;
    const char          *what = "grammar";

    if (lim == NULL) {
        llm_grammar_limits_default(&def);
        lim = &def;
    }
    err[0] = '\0';
    memset(&b, 0, sizeof(b));
    memset(&out, 0, sizeof(out));
    b.vocab = v;
    b.max_ws = json_max_ws(lim);
    b.strict = lim->strict;
    b.max_source = lim->max_source;
    b.err = err;
    b.err_len = err_len;
    b.deadline_ns = lim->max_compile_ns
                    ? llm_grammar_now_ns() + lim->max_compile_ns : 0;
    if (kind != LLM_CONSTRAINT_JSON_OBJECT && len > lim->max_source) {
        snprintf(err, err_len, "grammar: the constraint is %zu bytes, over "
                 "the limit of %zu", len, lim->max_source);
        return NULL;
    }
    out.max = lim->max_source * 8 + 65536;

    switch (kind) {
    case LLM_CONSTRAINT_GRAMMAR:
        break;
    case LLM_CONSTRAINT_REGEX:
        if (llm_regex_to_gbnf(src, len, &text, err, err_len) != 0) {
            return NULL;
        }
        src = text;
        len = strlen(text);
        what = "regex";
        break;
    case LLM_CONSTRAINT_JSON_OBJECT:
        src = "{\"type\":\"object\"}";
        len = strlen(src);
        /* fall through */
    case LLM_CONSTRAINT_JSON_SCHEMA:
        opts.root = "root";
        opts.max_ws = b.max_ws;
        opts.strict = b.strict;
        opts.relaxed = &b.relaxed;
        if (llm_json_schema_compile(src, len, &opts, &out, err, err_len)
            != 0)
        {
            goto done;
        }
        src = out.data;
        len = out.len;
        what = "json_schema";
        break;
    default:
        snprintf(err, err_len, "grammar: unknown constraint kind %d", kind);
        return NULL;
    }
    if (llm_gbnf_parse(&b, src, len, what) == 0) {
        g = llm_grammar_from_build(&b);
    }
    if (g != NULL && b.relaxed.len > 0
        && (g->relaxed = strdup(b.relaxed.data)) == NULL)
    {
        grammar_destroy(g);
        g = NULL;
    }

done:
    llm_gbuild_free(&b);
    llm_strbuf_free(&out);
    free(text);
    if (g == NULL && err[0] == '\0') {
        snprintf(err, err_len, "grammar: out of memory");
    }
    return g;
}


static void
grammar_destroy(llm_grammar *g)
{
    if (g == NULL) {
        return;
    }
    free(g->el);
    free(g->rule_start);
    free(g->alt_first);
    free(g->alt_start);
    free(g->sets);
    free(g->reps);
    free(g->relaxed);
    if (g->shared != NULL) {
        int  i;

        for (i = 0; i < LLM_GRAMMAR_SHARED * 2; i++) {
            if (g->shared->slot[i] != NULL) {
                free(g->shared->slot[i]->accepted);
                free(g->shared->slot[i]->unsure);
                free(g->shared->slot[i]);
            }
        }
        pthread_mutex_destroy(&g->shared->lock);
        free(g->shared->min_bytes);
        free(g->shared);
    }
    free(g);
}


void
llm_grammar_free(llm_grammar *g)
{
    int  refs;

    if (g == NULL) {
        return;
    }
    if (g->cache != NULL) {
        pthread_mutex_lock(&g->cache->lock);
        refs = --g->refs;
        pthread_mutex_unlock(&g->cache->lock);
        if (refs > 0) {
            return;
        }
    }
    grammar_destroy(g);
}


static uint64_t
text_hash(const char *s, size_t len)
{
    uint64_t  h = 14695981039346656037ull;
    size_t    i;

    for (i = 0; i < len; i++) {
        h = (h ^ (uint8_t) s[i]) * 1099511628211ull;
    }
    return h;
}


/* the cached grammar of this key with one more reference, or NULL */
static llm_grammar *
cache_find(llm_gcache *c, int kind, int max_ws, int strict, uint64_t h,
    const char *src, size_t len)
{
    llm_gcache_entry  *e;
    int                i;

    for (i = 0; i < LLM_GRAMMAR_CACHED; i++) {
        e = &c->e[i];
        if (e->g != NULL && e->kind == kind && e->max_ws == max_ws
            && e->strict == strict && e->hash == h && e->len == len
            && (len == 0 || memcmp(e->text, src, len) == 0))
        {
            e->used = ++c->tick;
            e->g->refs++;
            return e->g;
        }
    }
    return NULL;
}


llm_grammar *
llm_grammar_compile(const llm_grammar_vocab *v, int kind, const char *src,
    size_t len, const llm_grammar_limits *lim, char *err, size_t err_len)
{
    llm_grammar_limits   def;
    llm_gcache_entry    *e;
    llm_grammar         *g, *found, *old = NULL;
    llm_gcache          *c = v != NULL ? v->cache : NULL;
    uint64_t             h;
    char                *copy;
    int                  i;

    if (lim == NULL) {
        llm_grammar_limits_default(&def);
        lim = &def;
    }
    if (kind == LLM_CONSTRAINT_JSON_OBJECT) {
        src = "";                           /* its text is ignored */
        len = 0;
    }
    if (c == NULL || len > lim->max_source) {
        return llm_grammar_compile_uncached(v, kind, src, len, lim, err,
                                            err_len);
    }
    h = text_hash(src, len);
    pthread_mutex_lock(&c->lock);
    g = cache_find(c, kind, json_max_ws(lim), lim->strict, h, src, len);
    pthread_mutex_unlock(&c->lock);
    if (g != NULL) {
        err[0] = '\0';
        return g;
    }
    g = llm_grammar_compile_uncached(v, kind, src, len, lim, err, err_len);
    if (g == NULL || (copy = malloc(len + 1)) == NULL) {
        return g;
    }
    memcpy(copy, src, len);
    copy[len] = '\0';
    pthread_mutex_lock(&c->lock);
    found = cache_find(c, kind, json_max_ws(lim), lim->strict, h, src, len);
    if (found == NULL) {                    /* in, the least recent out */
        e = &c->e[0];
        for (i = 0; i < LLM_GRAMMAR_CACHED; i++) {
            if (c->e[i].g == NULL) {
                e = &c->e[i];
                break;
            }
            if (c->e[i].used < e->used) {
                e = &c->e[i];
            }
        }
        if (e->g != NULL && --e->g->refs == 0) {
            old = e->g;
        }
        free(e->text);
        e->g = g;
        e->kind = kind;
        e->max_ws = json_max_ws(lim);
        e->strict = lim->strict;
        e->hash = h;
        e->len = len;
        e->text = copy;
        e->used = ++c->tick;
        g->cache = c;
        g->refs = 2;                        /* the cache and the caller */
        copy = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    free(copy);
    if (old != NULL) {
        grammar_destroy(old);
    }
    if (found != NULL) {                    /* another thread was first */
        grammar_destroy(g);
        g = found;
    }
    return g;
}


void
llm_grammar_cache_clear(llm_gcache *c)
{
    int  i, refs;

    for (i = 0; i < LLM_GRAMMAR_CACHED; i++) {
        if (c->e[i].g == NULL) {
            continue;
        }
        pthread_mutex_lock(&c->lock);
        refs = --c->e[i].g->refs;
        pthread_mutex_unlock(&c->lock);
        if (refs == 0) {
            grammar_destroy(c->e[i].g);
        }
        free(c->e[i].text);
        c->e[i].g = NULL;
        c->e[i].text = NULL;
    }
}
