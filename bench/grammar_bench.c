/*
 * Grammar engine benchmark (docs/grammar.md): on a model's vocabulary
 * (SmolLM2's 49,152 tokens by default), compile time and per-token mask
 * time, p50/p99/max, for our own GBNF / regex / JSON grammars walked over
 * real outputs (each text tokenized, a fresh matcher per text as per
 * request: mask, then accept the text's next token), and for every
 * *.json schema in a folder (argument 2), walked by seeded random choices
 * among the allowed tokens.
 *
 * usage: grammar_bench MODEL.gguf [SCHEMA_DIR ...] [ROUNDS]
 *
 * Each schema folder gets a table: how many compile, the refusals by
 * keyword, compile times, and masks, cold (the first request on a grammar
 * compiled afresh) and warm (the same request again), along random walks,
 * along the walks' texts tokenized by the model's tokenizer, and along
 * the folder's examples/NAME.json (a hand-written instance of NAME.json).
 * GRAMMAR_BENCH_ONLY=schemas skips the built-in grammars;
 * GRAMMAR_BENCH_COLD_VOCAB=1 makes cold walks start on a new vocabulary;
 * GRAMMAR_BENCH_VERBOSE=1 prints each refusal.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/grammar.h"
#include "grammar/grammar_impl.h"
#include "format/file.h"

#define MAX_SAMPLES  (1 << 20)

typedef struct {
    double     *v;
    int         n;
} samples;

static llm_tokenizer      *tok;
static llm_grammar_vocab  *vocab;
static int                 n_words;
static uint32_t           *mask;
static clockid_t           mask_clock = CLOCK_MONOTONIC;
static double              sum_states, sum_kib, n_walks, max_kib;


/* compile and mask times on the wall clock, or (GRAMMAR_BENCH_CLOCK=cpu)
   on this thread's CPU clock: on a shared machine preemption is not ours */
static uint64_t
mask_now(void)
{
    struct timespec  ts;

    clock_gettime(mask_clock, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}


static void
add(samples *s, double x)
{
    if (s->v == NULL) {
        s->v = malloc(MAX_SAMPLES * sizeof(double));
    }
    if (s->n < MAX_SAMPLES) {
        s->v[s->n++] = x;
    }
}


static int
dcmp(const void *a, const void *b)
{
    double  x = *(const double *) a, y = *(const double *) b;

    return x < y ? -1 : x > y;
}


static double
pct(samples *s, double p)
{
    int  i;

    if (s->n == 0) {
        return 0;
    }
    qsort(s->v, (size_t) s->n, sizeof(double), dcmp);
    i = (int) (p * (s->n - 1) + 0.5);
    return s->v[i];
}


/* rounds compiles, without the vocabulary's grammar cache (cached 0) or
   through it (cached 1: the first may compile, the others are hits) */
static llm_grammar *
compile_timed(int kind, const char *src, size_t len, samples *ct, int rounds,
    int cached, char *err, size_t err_len)
{
    llm_grammar_limits   lim;
    llm_grammar         *g = NULL;
    uint64_t             t0;
    int                  r;

    llm_grammar_limits_default(&lim);

    lim.json_ws = LLM_JSON_WS_FLEXIBLE;     /* the texts have blanks */
    for (r = 0; r < rounds; r++) {
        llm_grammar_free(g);
        t0 = mask_now();
        g = cached ? llm_grammar_compile(vocab, kind, src, len, &lim, err,
                                         err_len)
                   : llm_grammar_compile_uncached(vocab, kind, src, len,
                                                  &lim, err, err_len);
        add(ct, (double) (mask_now() - t0) / 1e3);
        if (g == NULL) {
            return NULL;
        }
    }
    return g;
}


/* masks along the tokens of text; -1 when a token was refused */
static int
walk_text(const llm_grammar *g, const char *text, samples *mt)
{
    llm_matcher  *m = llm_matcher_new(g);
    int32_t      *ids;
    uint64_t      t0;
    int           n, i, rc = 0;

    ids = malloc(65536 * sizeof(int32_t));
    n = llm_tokenize(tok, text, strlen(text), 0, 0, ids, 65536);
    for (i = 0; i < n && i < 65536; i++) {
        t0 = mask_now();
        llm_matcher_mask(m, mask);
        add(mt, (double) (mask_now() - t0) / 1e3);
        if (llm_matcher_accept(m, ids[i]) != 0) {
            rc = -1;
            break;
        }
    }
    {
        int     states, nodes;
        size_t  bytes;

        llm_matcher_stats(m, &states, &nodes, &bytes);
        sum_states += states;
        sum_kib += bytes / 1024.0;
        max_kib = bytes / 1024.0 > max_kib ? bytes / 1024.0 : max_kib;
        n_walks++;
    }
    free(ids);
    llm_matcher_free(m);
    return rc;
}


static void
row(const char *name, samples *ct, samples *mt, const char *note)
{
    double  c50 = pct(ct, 0.5), c99 = pct(ct, 0.99);
    double  m50 = pct(mt, 0.5), m99 = pct(mt, 0.99), mmax = pct(mt, 1.0);
    double  sum = 0;
    int     i;

    for (i = 0; i < mt->n; i++) {
        sum += mt->v[i];
    }
    printf("%-22s %9.1f %9.1f %9d %9.1f %9.1f %9.1f %9.1f  %s\n", name, c50,
           c99, mt->n, m50, m99, mmax, mt->n ? sum / mt->n : 0.0, note);
}


static const char  *json_outputs[] = {
    "{\"name\": \"Ada Lovelace\", \"born\": 1815, \"died\": 1852, "
    "\"known_for\": [\"Analytical Engine notes\", \"first algorithm\"], "
    "\"nationality\": \"British\", \"married\": true}",
    "{\n  \"city\": \"Paris\",\n  \"country\": \"France\",\n  "
    "\"population\": 2148271,\n  \"coordinates\": {\"lat\": 48.8566, "
    "\"lon\": 2.3522},\n  \"landmarks\": [\"Eiffel Tower\", \"Louvre\", "
    "\"Notre-Dame\"],\n  \"capital\": true\n}",
    "{\"tool\": \"get_weather\", \"arguments\": {\"location\": "
    "\"San Francisco, CA\", \"unit\": \"celsius\", \"days\": 3}}",
    "{\"items\": [{\"id\": 1, \"title\": \"Buy milk\", \"done\": false}, "
    "{\"id\": 2, \"title\": \"Write the report on Q3 results\", "
    "\"done\": true, \"tags\": [\"work\", \"urgent\"]}, {\"id\": 3, "
    "\"title\": \"Call mom\", \"done\": false, \"due\": \"2024-06-01\"}], "
    "\"count\": 3}",
    "{\"sentiment\": \"positive\", \"confidence\": 0.93, \"summary\": "
    "\"The reviewer loved the caf\\u00e9's atmosphere and the "
    "\\\"amazing\\\" croissants, but found the service slow.\", "
    "\"aspects\": {\"food\": 5, \"service\": 2, \"ambience\": 4}}",
    "{\"model\": \"smollm2\", \"layers\": 30, \"hidden\": 576, "
    "\"heads\": {\"q\": 9, \"kv\": 3}, \"rope_theta\": 100000.0, "
    "\"vocab\": 49152, \"tied\": true, \"notes\": null}",
};

static const char  *arith_outputs[] = {
    "(12 + 3.5) * 4 - 7 / (2 + 1)", "x * (y + 2) - 3 * z",
    "((1 + 2) * (3 + 4)) / 5",
};

static const char  *tool_outputs[] = {
    "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": "
    "\"nginx modules\", \"limit\": 5}}\n</tool_call>",
};

static const char  *csv_outputs[] = {
    "name,age,city\nAlice,30,Berlin\nBob,25,\"New York, NY\"\n"
    "Carol,41,Tokyo\n",
};

static const char  *date_outputs[] = {
    "2024-06-01T12:30:00Z", "1999-12-31T23:59:59Z",
};

static const char  *email_outputs[] = {
    "jane.doe@example.com", "a.b-c@mail.co",
};

typedef struct {
    const char   *name;
    int           kind;
    const char   *src;
    const char  **texts;
    int           n_texts;
} bench_grammar;

#define N(a)  (int) (sizeof(a) / sizeof(a[0]))

static const bench_grammar  grammars[] = {
    { "json_object", LLM_CONSTRAINT_JSON_OBJECT, "", json_outputs,
      N(json_outputs) },
    { "gbnf json (llama.cpp)", LLM_CONSTRAINT_GRAMMAR,
      "root   ::= object\n"
      "value  ::= object | array | string | number | (\"true\" | \"false\" "
      "| \"null\") ws\n"
      "object ::= \"{\" ws ( string \":\" ws value ( \",\" ws string \":\" "
      "ws value )* )? \"}\" ws\n"
      "array  ::= \"[\" ws ( value ( \",\" ws value )* )? \"]\" ws\n"
      "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" "
      "([\"\\\\bfnrt/] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
      "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? "
      "([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
      "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n",
      json_outputs, N(json_outputs) },
    { "gbnf arithmetic", LLM_CONSTRAINT_GRAMMAR,
      "root ::= expr\n"
      "expr ::= term (ws [-+] ws term)*\n"
      "term ::= factor (ws [*/] ws factor)*\n"
      "factor ::= num | var | \"(\" ws expr ws \")\"\n"
      "num ::= [0-9]+ (\".\" [0-9]+)?\n"
      "var ::= [a-z]+\n"
      "ws ::= \" \"?\n", arith_outputs, N(arith_outputs) },
    { "gbnf tool call", LLM_CONSTRAINT_GRAMMAR,
      "root ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n"
      "call ::= \"{\\\"name\\\": \" name \", \\\"arguments\\\": \" "
      "%json {\"type\": \"object\"} \"}\"\n"
      "name ::= \"\\\"\" [a-z_]+ \"\\\"\"\n", tool_outputs,
      N(tool_outputs) },
    { "gbnf csv", LLM_CONSTRAINT_GRAMMAR,
      "root ::= line+\n"
      "line ::= field (\",\" field)* \"\\n\"\n"
      "field ::= [^,\"\\n]* | \"\\\"\" [^\"]* \"\\\"\"\n",
      csv_outputs, N(csv_outputs) },
    { "regex date-time", LLM_CONSTRAINT_REGEX,
      "\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?(Z|[+-]\\d{2}:"
      "\\d{2})", date_outputs, N(date_outputs) },
    { "regex email", LLM_CONSTRAINT_REGEX,
      "[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}", email_outputs,
      N(email_outputs) },
};


/* seeded random choices among the allowed tokens, up to steps tokens;
   the bytes of the tokens taken go to text (a valid prefix of an instance,
   a whole one when the walk ended) */
static int
walk_random_text(const llm_grammar *g, unsigned seed, int steps, samples *mt,
    char *text, size_t cap)
{
    llm_matcher  *m = llm_matcher_new(g);
    const char   *piece;
    uint64_t      t0;
    size_t        len = 0, pl;
    int32_t       id, pick;
    int           i, n, k, ended = 0;

    srand(seed);
    text[0] = '\0';
    for (i = 0; i < steps; i++) {
        t0 = mask_now();
        n = llm_matcher_mask(m, mask);
        add(mt, (double) (mask_now() - t0) / 1e3);
        if (n == 0 || llm_matcher_is_done(m)) {
            ended = 1;
            break;
        }
        pick = rand() % n;
        for (id = 0, k = 0; id < vocab->n_vocab; id++) {
            if (((mask[id >> 5] >> (id & 31)) & 1) && k++ == pick) {
                break;
            }
        }
        if (vocab->kind[id] == TK_STOP) {
            ended = 1;
            break;
        }
        if (llm_matcher_accept(m, id) != 0) {
            break;
        }
        piece = llm_token_piece(tok, id, &pl);
        if (len + pl < cap) {
            memcpy(text + len, piece, pl);
            len += pl;
            text[len] = '\0';
        }
    }
    llm_matcher_free(m);
    return ended;
}


/* GRAMMAR_BENCH_COLD_VOCAB=1: a new vocabulary before each cold walk, so
   that no local mask another grammar left is there (the first request of
   a fresh engine); else cold is a grammar's first request in an engine
   that has run the schemas before it */
static void
cold_vocab(void)
{
    char  err[256];

    if (getenv("GRAMMAR_BENCH_COLD_VOCAB") == NULL) {
        return;
    }
    llm_grammar_vocab_free(vocab);
    vocab = llm_grammar_vocab_new(tok, err, sizeof(err));
    if (vocab == NULL) {
        fprintf(stderr, "grammar_bench: %s\n", err);
        exit(1);
    }
}


/* the keyword of a refusal ("unsupported keyword 'X'"), else its kind */
static void
refusal_reason(const char *err, char *out, size_t len)
{
    const char  *k = strstr(err, "keyword '");
    size_t       n;

    if (k != NULL) {
        k += 9;
        n = strcspn(k, "'");
        snprintf(out, len, "%.*s", (int) n, k);
    } else if (strstr(err, "unsupported format") != NULL) {
        snprintf(out, len, "format");
    } else if (strstr(err, "minProperties") != NULL) {
        snprintf(out, len, "minProperties/maxProperties");
    } else if (strstr(err, "over the limit") != NULL) {
        snprintf(out, len, "size cap");
    } else if (strstr(err, "time limit") != NULL) {
        snprintf(out, len, "time cap");
    } else {
        n = strcspn(err, "'(0123456789");
        snprintf(out, len, "%.*s", (int) (n > 60 ? 60 : n), err);
    }
}


typedef struct {
    char  name[64];
    int   n;
} reason;

typedef struct {
    samples   ct, rand_cold, rand_warm, ex_cold, ex_warm, gen_cold, gen_warm;
    reason    why[64];
    int       n_why, n_ok, n_bad, n_ex, ex_refused, gen_refused, n_ended;
} schema_set;


static void
count_reason(schema_set *ss, const char *err)
{
    char  r[64];
    int   i;

    refusal_reason(err, r, sizeof(r));
    for (i = 0; i < ss->n_why && strcmp(ss->why[i].name, r); i++) {
        /* seen? */
    }
    if (i == ss->n_why && ss->n_why < 64) {
        snprintf(ss->why[ss->n_why++].name, sizeof(ss->why[0].name), "%s", r);
    }
    if (i < 64) {
        ss->why[i].n++;
    }
}


static void
row_masks(const char *name, samples *mt, const char *note)
{
    double  sum = 0;
    int     i;

    for (i = 0; i < mt->n; i++) {
        sum += mt->v[i];
    }
    printf("  %-34s %8d %9.1f %9.1f %9.1f %9.1f  %s\n", name, mt->n,
           pct(mt, 0.5), pct(mt, 0.99), pct(mt, 1.0),
           mt->n ? sum / mt->n : 0.0, note);
}


/*
 * One schema: compiled rounds times without the grammar cache (compile
 * times); then, each on a grammar compiled afresh, so that every cache is
 * cold on its first request: 3 random walks, each done twice (cold, then
 * warm: the same request again on the same grammar); the text of each
 * walk tokenized as a model's tokenizer would write it, walked cold and
 * warm; and the folder's examples/NAME.json when there is one.
 */
static void
bench_schema(schema_set *ss, const char *dir, const char *file, int rounds,
    int verbose)
{
    llm_grammar  *g;
    samples       ct1 = { 0 };
    char          path[4096], err[512], *src, *ex, *text;
    size_t        len, ex_len;
    int           seed, i, ended;

    snprintf(path, sizeof(path), "%s/%s", dir, file);
    if ((src = llm_read_file(path, 0, &len)) == NULL) {
        return;
    }
    g = compile_timed(LLM_CONSTRAINT_JSON_SCHEMA, src, len, &ct1, rounds, 0,
                      err, sizeof(err));
    for (i = 0; i < ct1.n; i++) {
        add(&ss->ct, ct1.v[i]);
    }
    ct1.n = 0;      /* the later compiles are not counted */
    if (g == NULL) {
        ss->n_bad++;
        count_reason(ss, err);
        if (verbose) {
            printf("# %s: %s\n", file, err);
        }
        free(ct1.v);
        free(src);
        return;
    }
    llm_grammar_free(g);
    ss->n_ok++;
    text = malloc(1 << 16);
    for (seed = 1; seed <= 3; seed++) {
        cold_vocab();
        g = compile_timed(LLM_CONSTRAINT_JSON_SCHEMA, src, len, &ct1, 1, 0,
                          err, sizeof(err));
        ended = walk_random_text(g, (unsigned) seed, 200, &ss->rand_cold,
                                 text, 1 << 16);
        walk_random_text(g, (unsigned) seed, 200, &ss->rand_warm, text,
                         1 << 16);
        llm_grammar_free(g);
        ss->n_ended += ended;

        /* the walk's bytes, on real token boundaries */
        cold_vocab();
        g = compile_timed(LLM_CONSTRAINT_JSON_SCHEMA, src, len, &ct1, 1, 0,
                          err, sizeof(err));
        if (walk_text(g, text, &ss->gen_cold) != 0) {
            ss->gen_refused++;
        }
        walk_text(g, text, &ss->gen_warm);
        llm_grammar_free(g);
    }
    free(text);

    snprintf(path, sizeof(path), "%s/examples/%s", dir, file);
    if ((ex = llm_read_file(path, 0, &ex_len)) != NULL) {
        while (ex_len > 0 && (ex[ex_len - 1] == '\n' || ex[ex_len - 1] == ' '))
        {
            ex[--ex_len] = '\0';
        }
        ct1.n = 0;
        cold_vocab();
        g = compile_timed(LLM_CONSTRAINT_JSON_SCHEMA, src, len, &ct1, 1, 0,
                          err, sizeof(err));
        ss->n_ex++;
        if (walk_text(g, ex, &ss->ex_cold) != 0) {
            ss->ex_refused++;
            printf("# %s: its example is REFUSED\n", file);
        }
        walk_text(g, ex, &ss->ex_warm);
        llm_grammar_free(g);
        free(ex);
    }
    free(ct1.v);
    free(src);
}


static int
name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}


static void
bench_dir(schema_set *ss, const char *dir, int rounds, int verbose)
{
    struct dirent  *e;
    char          **files = NULL;
    DIR            *d = opendir(dir);
    int             n = 0, i;

    if (d == NULL) {
        fprintf(stderr, "grammar_bench: cannot open %s\n", dir);
        return;
    }
    while ((e = readdir(d)) != NULL) {
        size_t  nl = strlen(e->d_name);

        if (nl >= 5 && strcmp(e->d_name + nl - 5, ".json") == 0) {
            files = realloc(files, (size_t) (n + 1) * sizeof(*files));
            files[n++] = strdup(e->d_name);
        }
    }
    closedir(d);
    qsort(files, (size_t) n, sizeof(*files), name_cmp);
    for (i = 0; i < n; i++) {
        bench_schema(ss, dir, files[i], rounds, verbose);
        free(files[i]);
    }
    free(files);
}


static void
print_set(const char *title, schema_set *ss)
{
    char  note[128];
    int   i;

    printf("-- %s: %d schemas, %d compile, %d refused\n", title,
           ss->n_ok + ss->n_bad, ss->n_ok, ss->n_bad);
    if (ss->n_bad) {
        printf("  refused:");
        for (i = 0; i < ss->n_why; i++) {
            printf("%s %s %d", i ? "," : "", ss->why[i].name, ss->why[i].n);
        }
        printf("\n");
    }
    printf("  %-34s %8d %9.1f %9.1f %9.1f  (us, every compile of every "
           "schema)\n", "compile (no grammar cache)", ss->ct.n,
           pct(&ss->ct, 0.5), pct(&ss->ct, 0.99), pct(&ss->ct, 1.0));
    printf("  %-34s %8s %9s %9s %9s %9s\n", "masks (us)", "n", "p50", "p99",
           "max", "mean");
    snprintf(note, sizeof(note), "%d of %d walks ended", ss->n_ended,
             3 * ss->n_ok);
    row_masks("random walk, cold", &ss->rand_cold, note);
    row_masks("random walk, warm", &ss->rand_warm, "");
    snprintf(note, sizeof(note), "%d texts refused", ss->gen_refused);
    row_masks("walk's text tokenized, cold", &ss->gen_cold, note);
    row_masks("walk's text tokenized, warm", &ss->gen_warm, "");
    if (ss->n_ex) {
        snprintf(note, sizeof(note), "%d examples, %d refused", ss->n_ex,
                 ss->ex_refused);
        row_masks("example tokenized, cold", &ss->ex_cold, note);
        row_masks("example tokenized, warm", &ss->ex_warm, "");
    }
}


static void
merge_samples(samples *to, samples *from)
{
    int  i;

    for (i = 0; i < from->n; i++) {
        add(to, from->v[i]);
    }
}


static void
bench_schema_dirs(char **dirs, int n, int rounds)
{
    schema_set  *ss = calloc((size_t) n + 1, sizeof(*ss));
    schema_set  *all = &ss[n];
    int          i, j;

    for (i = 0; i < n; i++) {
        bench_dir(&ss[i], dirs[i], rounds, getenv("GRAMMAR_BENCH_VERBOSE")
                  != NULL);
        print_set(dirs[i], &ss[i]);
        merge_samples(&all->ct, &ss[i].ct);
        merge_samples(&all->rand_cold, &ss[i].rand_cold);
        merge_samples(&all->rand_warm, &ss[i].rand_warm);
        merge_samples(&all->gen_cold, &ss[i].gen_cold);
        merge_samples(&all->gen_warm, &ss[i].gen_warm);
        merge_samples(&all->ex_cold, &ss[i].ex_cold);
        merge_samples(&all->ex_warm, &ss[i].ex_warm);
        all->n_ok += ss[i].n_ok;
        all->n_bad += ss[i].n_bad;
        all->n_ex += ss[i].n_ex;
        all->ex_refused += ss[i].ex_refused;
        all->gen_refused += ss[i].gen_refused;
        all->n_ended += ss[i].n_ended;
        for (j = 0; j < ss[i].n_why; j++) {
            int  k;

            for (k = 0; k < all->n_why
                 && strcmp(all->why[k].name, ss[i].why[j].name); k++)
            {
                /* seen? */
            }
            if (k == all->n_why && k < 64) {
                all->why[all->n_why++] = ss[i].why[j];
            } else if (k < 64) {
                all->why[k].n += ss[i].why[j].n;
            }
        }
    }
    if (n > 1) {
        print_set("all schemas", all);
    }
    for (i = 0; i <= n; i++) {
        free(ss[i].ct.v);
        free(ss[i].rand_cold.v);
        free(ss[i].rand_warm.v);
        free(ss[i].gen_cold.v);
        free(ss[i].gen_warm.v);
        free(ss[i].ex_cold.v);
        free(ss[i].ex_warm.v);
    }
    free(ss);
}


int
main(int argc, char **argv)
{
    gguf_file    gf;
    uint64_t     t0;
    char         err[512], note[64];
    int          only_schemas;
    int          gi, t, rounds, i, bad, mode, n_dirs;

    if (argc < 2) {
        fprintf(stderr, "usage: grammar_bench MODEL.gguf [SCHEMA_DIR ...] "
                "[ROUNDS]\n");
        return 2;
    }
    rounds = 20;
    n_dirs = argc - 2;
    if (n_dirs > 0 && strspn(argv[argc - 1], "0123456789")
                      == strlen(argv[argc - 1]))
    {
        rounds = atoi(argv[argc - 1]);
        n_dirs--;
    }
    if (getenv("GRAMMAR_BENCH_CLOCK") != NULL
        && strcmp(getenv("GRAMMAR_BENCH_CLOCK"), "cpu") == 0)
    {
        mask_clock = CLOCK_THREAD_CPUTIME_ID;
    }
    only_schemas = getenv("GRAMMAR_BENCH_ONLY") != NULL
                   && strcmp(getenv("GRAMMAR_BENCH_ONLY"), "schemas") == 0;
    if (gguf_open(&gf, argv[1]) != 0) {
        fprintf(stderr, "grammar_bench: %s\n", gf.err);
        return 1;
    }
    tok = llm_tokenizer_load_gguf(&gf, err, sizeof(err));
    gguf_close(&gf);
    if (tok == NULL) {
        fprintf(stderr, "grammar_bench: %s\n", err);
        return 1;
    }
    t0 = llm_grammar_now_ns();
    vocab = llm_grammar_vocab_new(tok, err, sizeof(err));
    if (vocab == NULL) {
        fprintf(stderr, "grammar_bench: %s\n", err);
        return 1;
    }
    n_words = (vocab->n_vocab + 31) / 32;
    mask = malloc((size_t) n_words * 4);
    printf("compile and mask times: %s clock\n", mask_clock == CLOCK_MONOTONIC
           ? "wall" : "thread CPU");
    printf("vocabulary: %d tokens, trie of %d nodes built in %.1f ms\n",
           vocab->n_vocab, vocab->n_nodes,
           (double) (llm_grammar_now_ns() - t0) / 1e6);
    printf("%-22s %9s %9s %9s %9s %9s %9s %9s\n", "grammar", "comp p50",
           "comp p99", "masks", "mask p50", "mask p99", "mask max",
           "mean");
    printf("%-22s %9s %9s %9s %9s %9s %9s %9s\n", "", "(us)", "(us)", "",
           "(us)", "(us)", "(us)", "(us)");
    for (mode = 0; mode < 2 && !only_schemas; mode++) {
        samples  all_ct = { 0 }, all_mt = { 0 };

        printf("-- %s\n", mode == 0
               ? "a grammar compiled per request, without the grammar "
                 "cache (cold caches each time)"
               : "through the grammar cache: every request gets the same "
                 "grammar, and shares its local masks");
        for (gi = 0; gi < N(grammars); gi++) {
            const bench_grammar  *b = &grammars[gi];
            samples               ct = { 0 }, mt = { 0 }, hit = { 0 };
            llm_grammar          *g;

            g = compile_timed(b->kind, b->src, strlen(b->src), &ct, rounds,
                              0, err, sizeof(err));
            if (g == NULL) {
                printf("%-22s compile failed: %s\n", b->name, err);
                continue;
            }
            bad = 0;
            for (i = 0; i < 3; i++) {           /* 3 requests per text */
                for (t = 0; t < b->n_texts; t++) {
                    llm_grammar_free(g);
                    g = compile_timed(b->kind, b->src, strlen(b->src),
                                      mode ? &hit : &ct, 1, mode, err,
                                      sizeof(err));
                    bad += walk_text(g, b->texts[t], &mt) != 0;
                }
            }
            if (bad) {
                snprintf(note, sizeof(note), "%d texts REFUSED", bad);
            } else if (mode) {
                snprintf(note, sizeof(note), "cache hit p50 %.1f us",
                         pct(&hit, 0.5));
            } else {
                note[0] = '\0';
            }
            free(hit.v);
            for (i = 0; i < ct.n; i++) {
                add(&all_ct, ct.v[i]);
            }
            for (i = 0; i < mt.n; i++) {
                add(&all_mt, mt.v[i]);
            }
            row(b->name, &ct, &mt, note);
            llm_grammar_free(g);
            free(ct.v);
            free(mt.v);
        }
        row("all of the above", &all_ct, &all_mt, "");
        free(all_ct.v);
        free(all_mt.v);
    }
    if (!only_schemas) {
        printf("per request (walk of a text): %.0f states, %.0f KiB on "
               "average, %.0f KiB at most\n", sum_states / n_walks,
               sum_kib / n_walks, max_kib);
    }
    if (n_dirs > 0) {
        uint64_t  hits;
        int       kept;

        bench_schema_dirs(argv + 2, n_dirs, rounds);
        kept = llm_grammar_vocab_shared(vocab, &hits);
        printf("local masks the vocabulary shares across grammars: %d kept, "
               "%llu walks spared\n", kept, (unsigned long long) hits);
    }
    llm_grammar_vocab_free(vocab);
    llm_tokenizer_free(tok);
    free(mask);
    return 0;
}
