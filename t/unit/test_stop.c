/*
 * Stop-string matcher: chunk boundaries, overlapping candidates, held bytes
 * released on mismatch, several stop strings, UTF-8, and a randomized check
 * that every chunking gives the output of a whole-text reference.
 */
#include "tap.h"
#include "api/stop.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>


/* the output of a stream, with what each push emitted, '|' separated */
typedef struct {
    char    text[4096];     /* everything emitted, in order */
    char    trace[4096];    /* per call: emitted bytes then '|' */
    int     stopped;
    int     which;
} run_result;


static void
append(char *dst, const char *src, size_t len)
{
    size_t  n = strlen(dst);

    memcpy(dst + n, src, len);
    dst[n + len] = '\0';
}


static int
make(llm_stop *m, const char **stops, int n)
{
    llm_stop_str  s[8];
    char          err[128];
    int           i;

    for (i = 0; i < n; i++) {
        s[i].ptr = (char *) stops[i];
        s[i].len = strlen(stops[i]);
    }
    return llm_stop_init(m, s, n, err, sizeof(err));
}


/* pushes each chunk, then flushes; chunks end with NULL */
static void
run(const char **stops, int n, const char **chunks, run_result *r)
{
    llm_stop      m;
    llm_stop_out  out;
    int           i;

    memset(r, 0, sizeof(*r));
    if (make(&m, stops, n) != 0) {
        strcpy(r->trace, "init failed");
        return;
    }
    for (i = 0; chunks[i] != NULL; i++) {
        if (llm_stop_push(&m, chunks[i], strlen(chunks[i]), &out) != 0) {
            strcpy(r->trace, "push failed");
            break;
        }
        append(r->text, out.text, out.len);
        append(r->trace, out.text, out.len);
        append(r->trace, "|", 1);
        r->stopped = out.stopped;
        r->which = out.which;
    }
    llm_stop_flush(&m, &out);
    append(r->text, out.text, out.len);
    append(r->trace, out.text, out.len);
    if (out.stopped != r->stopped) {
        strcpy(r->trace, "flush changed stopped");
    }
    llm_stop_free(&m);
}


static void
test_basic(void)
{
    run_result  r;

    {
        const char *stops[] = { "STOP" };
        const char *chunks[] = { "hello ", "world", NULL };

        run(stops, 1, chunks, &r);
        is_str(r.trace, "hello |world|", "no match: everything passes");
        is_int(r.stopped, 0, "no match: not stopped");
    }
    {
        const char *stops[] = { "STOP" };
        const char *chunks[] = { "say ST", "O", "P now", NULL };

        run(stops, 1, chunks, &r);
        is_str(r.trace, "say |||", "stop split over 3 pushes: ST held");
        is_str(r.text, "say ", "stop split over 3 pushes: text before it");
        is_int(r.stopped, 1, "stop split over 3 pushes: stopped");
        is_int(r.which, 0, "stop split over 3 pushes: which");
    }
    {
        const char *stops[] = { "STOP" };
        const char *chunks[] = { "a ST", "OX", "b", NULL };

        run(stops, 1, chunks, &r);
        is_str(r.trace, "a |STOX|b|", "partial then mismatch releases");
        is_int(r.stopped, 0, "partial then mismatch: not stopped");
    }
    {
        const char *stops[] = { "STOP" };
        const char *chunks[] = { "end ST", NULL };

        run(stops, 1, chunks, &r);
        is_str(r.trace, "end |ST", "flush releases the held tail");
    }
    {
        const char *stops[] = { "STOP" };
        const char *chunks[] = { "STOP", NULL };

        run(stops, 1, chunks, &r);
        is_str(r.trace, "|", "stop at the very start: nothing out");
        is_int(r.stopped, 1, "stop at the very start: stopped");
    }
    {
        const char *stops[] = { "x" };
        const char *chunks[] = { "abxcd", "more", NULL };

        run(stops, 1, chunks, &r);
        is_str(r.trace, "ab||", "text after the stop is dropped");
    }
}


static void
test_overlap(void)
{
    run_result  r;

    {
        /* "ab" completes before "abc": stop at "ab" even byte by byte */
        const char *stops[] = { "abc", "ab" };
        const char *chunks[] = { "xa", "b", "c", NULL };

        run(stops, 2, chunks, &r);
        is_str(r.text, "x", "ab vs abc: cut before ab");
        is_int(r.which, 1, "ab vs abc: ab matched");
        is_str(r.trace, "x|||", "ab vs abc: a held, then stop");
    }
    {
        /* both end on the same byte: the longer one (earlier start) wins,
           so no stop string remains in the output */
        const char *stops[] = { "c", "bc" };
        const char *chunks[] = { "abcd", NULL };

        run(stops, 2, chunks, &r);
        is_str(r.text, "a", "same end: longest wins");
        is_int(r.which, 1, "same end: bc");
    }
    {
        /* "c" ends before "bcd": output must not depend on chunking */
        const char *stops[] = { "bcd", "c" };
        const char *whole[] = { "abcd", NULL };
        const char *bytes[] = { "a", "b", "c", "d", NULL };
        run_result  r2;

        run(stops, 2, whole, &r);
        run(stops, 2, bytes, &r2);
        is_str(r.text, "ab", "earliest end wins in one push");
        is_str(r2.text, "ab", "earliest end wins byte by byte");
    }
    {
        /* self-overlapping stop: "aab" inside "aaab" (KMP fallback) */
        const char *stops[] = { "aab" };
        const char *chunks[] = { "xa", "a", "a", "b", NULL };

        run(stops, 1, chunks, &r);
        is_str(r.trace, "x||a||", "aab in aaab: one a released, then stop");
        is_str(r.text, "xa", "aab in aaab: cut before aab");
        is_int(r.stopped, 1, "aab in aaab: stopped");
    }
    {
        /* held "aa" of "aab": a third "a" releases one byte only */
        const char *stops[] = { "aab" };
        const char *chunks[] = { "aa", "a", "c", NULL };

        run(stops, 1, chunks, &r);
        is_str(r.trace, "|a|aac|", "aab: holds exactly the live prefix");
    }
    {
        const char *stops[] = { "\n\n", "User:", "###", "END" };
        const char *chunks[] = { "one\n", "two", " Us", "er", ": hi", NULL };

        run(stops, 4, chunks, &r);
        is_str(r.text, "one\ntwo ", "four stops: User: matched");
        is_int(r.which, 1, "four stops: index of User:");
        is_str(r.trace, "one|\ntwo| |||", "four stops: trace");
    }
}


static void
test_utf8(void)
{
    run_result  r;

    {
        /* stop "世界" (e4 b8 96 e7 95 8c); text arrives as whole chars */
        const char *stops[] = { "\xe4\xb8\x96\xe7\x95\x8c" };
        const char *chunks[] = { "\xe4\xbd\xa0\xe5\xa5\xbd", "\xe4\xb8\x96",
                                 "\xe7\x95\x8c", "!", NULL };

        run(stops, 1, chunks, &r);
        is_str(r.trace, "\xe4\xbd\xa0\xe5\xa5\xbd||||", "UTF-8 stop: held char");
        is_int(r.stopped, 1, "UTF-8 stop: stopped");
    }
    {
        /* shares the lead bytes e4 b8 with the stop, then differs */
        const char *stops[] = { "\xe4\xb8\x96\xe7\x95\x8c" };
        const char *chunks[] = { "\xe4\xb8\x96", "\xe4\xb8\x80", NULL };

        run(stops, 1, chunks, &r);
        is_str(r.trace, "|\xe4\xb8\x96\xe4\xb8\x80|",
               "UTF-8: mismatch releases whole characters");
    }
    {
        /* emoji stop, partial match of its first char only */
        const char *stops[] = { "\xf0\x9f\x98\x80" };
        const char *chunks[] = { "a\xf0\x9f\x98\x81", "b", NULL };

        run(stops, 1, chunks, &r);
        is_str(r.trace, "a\xf0\x9f\x98\x81|b|", "UTF-8: other emoji passes");
    }
}


static void
test_edges(void)
{
    llm_stop      m;
    llm_stop_out  out;
    llm_stop_str  empty = { (char *) "", 0 };
    char          err[128] = "";
    run_result    r;

    ok(llm_stop_init(&m, &empty, 1, err, sizeof(err)) == -1,
       "empty stop string rejected");
    is_str(err, "stop string 0 is empty", "empty stop string: message");

    {
        const char *chunks[] = { "abc", "", "d", NULL };

        run(NULL, 0, chunks, &r);
        is_str(r.trace, "abc||d|", "no stop strings: passthrough");
    }

    ok(make(&m, (const char *[]) { "zz" }, 1) == 0, "init");
    llm_stop_push(&m, "az", 2, &out);
    is_int(out.len, 1, "push: a out, z held");
    llm_stop_push(&m, "", 0, &out);
    is_int(out.len, 0, "empty push: nothing out");
    is_int(out.stopped, 0, "empty push: not stopped");
    llm_stop_push(&m, "z", 1, &out);
    is_int(out.stopped, 1, "zz across empty push: stopped");
    llm_stop_push(&m, "more", 4, &out);
    ok(out.len == 0 && out.stopped == 1, "push after stop: empty, stopped");
    llm_stop_flush(&m, &out);
    ok(out.len == 0 && out.stopped == 1, "flush after stop: empty");
    llm_stop_free(&m);
}


/* reference over the whole text: earliest end, then earliest start */
static size_t
reference(const char *text, const char **stops, int n, int *stopped)
{
    size_t  e, len = strlen(text), l;
    int     j;

    *stopped = 0;
    for (e = 1; e <= len; e++) {
        size_t best = 0;

        for (j = 0; j < n; j++) {
            l = strlen(stops[j]);
            if (l <= e && memcmp(text + e - l, stops[j], l) == 0 && l > best) {
                best = l;
            }
        }
        if (best > 0) {
            *stopped = 1;
            return e - best;
        }
    }
    return len;
}


static uint64_t
rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}


static void
test_random(void)
{
    uint64_t      seed = 0x9e3779b97f4a7c15ull;
    char          text[200], stopbuf[4][8], out[256];
    const char   *stops[4];
    int           iter, bad = 0, held_bad = 0;

    for (iter = 0; iter < 20000; iter++) {
        llm_stop      m;
        llm_stop_out  o;
        size_t        len = rnd(&seed) % 60, pos, got = 0, want;
        int           n = 1 + (int) (rnd(&seed) % 4), j, stopped;

        for (pos = 0; pos < len; pos++) {
            text[pos] = "abc"[rnd(&seed) % 3];
        }
        text[len] = '\0';
        for (j = 0; j < n; j++) {
            size_t k, l = 1 + rnd(&seed) % 5;

            for (k = 0; k < l; k++) {
                stopbuf[j][k] = "abc"[rnd(&seed) % 3];
            }
            stopbuf[j][l] = '\0';
            stops[j] = stopbuf[j];
        }
        want = reference(text, stops, n, &stopped);
        make(&m, stops, n);
        o.stopped = 0;
        for (pos = 0; pos < len && !o.stopped; ) {
            size_t chunk = 1 + rnd(&seed) % 7;

            if (chunk > len - pos) {
                chunk = len - pos;
            }
            llm_stop_push(&m, text + pos, chunk, &o);
            memcpy(out + got, o.text, o.len);
            got += o.len;
            pos += chunk;
            /* never hold more than the longest stop string minus one */
            if (!o.stopped && pos - got > 4) {
                held_bad++;
            }
        }
        llm_stop_flush(&m, &o);
        memcpy(out + got, o.text, o.len);
        got += o.len;
        if (got != want || memcmp(out, text, got) != 0
            || o.stopped != stopped)
        {
            if (bad++ < 3) {
                printf("# text %s stops %d: got %zu want %zu\n", text, n,
                       got, want);
            }
        }
        llm_stop_free(&m);
    }
    is_int(bad, 0, "20000 random chunkings match the whole-text reference");
    is_int(held_bad, 0, "held tail never exceeds max stop length - 1");
}


int
main(void)
{
    test_basic();
    test_overlap();
    test_utf8();
    test_edges();
    test_random();
    return tap_done();
}
