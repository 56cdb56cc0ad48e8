/*
 * Incremental stop-string matcher (design note in api/stop.h).
 */
#include "api/stop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static void
out_set(llm_stop_out *out, const char *text, size_t len, int stopped,
    int which)
{
    out->text = text;
    out->len = len;
    out->stopped = stopped;
    out->which = which;
}


/* fail[i]: length of the longest proper prefix of s[0..i] that is also
   its suffix (Knuth-Morris-Pratt) */
static void
build_failure(const char *s, size_t len, size_t *fail)
{
    size_t  i, k;

    fail[0] = 0;
    k = 0;
    for (i = 1; i < len; i++) {
        while (k > 0 && s[i] != s[k]) {
            k = fail[k - 1];
        }
        if (s[i] == s[k]) {
            k++;
        }
        fail[i] = k;
    }
}


int
llm_stop_init(llm_stop *m, const llm_stop_str *stops, int n, char *err,
    size_t err_len)
{
    int  i;

    memset(m, 0, sizeof(*m));
    m->which = -1;
    if (n < 0) {
        snprintf(err, err_len, "negative number of stop strings");
        return -1;
    }
    if (n == 0) {
        return 0;
    }
    m->pat = calloc((size_t) n, sizeof(*m->pat));
    if (m->pat == NULL) {
        snprintf(err, err_len, "out of memory for stop strings");
        return -1;
    }
    m->n_pat = n;
    for (i = 0; i < n; i++) {
        llm_stop_pattern  *p = &m->pat[i];

        if (stops[i].len == 0) {
            snprintf(err, err_len, "stop string %d is empty", i);
            llm_stop_free(m);
            return -1;
        }
        p->len = stops[i].len;
        p->s = malloc(p->len);
        p->fail = malloc(p->len * sizeof(*p->fail));
        if (p->s == NULL || p->fail == NULL) {
            snprintf(err, err_len, "out of memory for stop strings");
            llm_stop_free(m);
            return -1;
        }
        memcpy(p->s, stops[i].ptr, p->len);
        build_failure(p->s, p->len, p->fail);
    }
    return 0;
}


/* advances one pattern by byte c; returns the new state */
static size_t
pattern_step(llm_stop_pattern *p, char c)
{
    size_t  st = p->state;

    while (st > 0 && p->s[st] != c) {
        st = p->fail[st - 1];
    }
    if (p->s[st] == c) {
        st++;
    }
    p->state = st;
    return st;
}


/* makes room for len more bytes after buf_len */
static int
reserve(llm_stop *m, size_t len)
{
    size_t  cap;
    char   *buf;

    if (m->buf_len + len <= m->buf_cap) {
        return 0;
    }
    cap = m->buf_cap ? m->buf_cap : 64;
    while (cap < m->buf_len + len) {
        cap *= 2;
    }
    buf = realloc(m->buf, cap);
    if (buf == NULL) {
        return -1;
    }
    m->buf = buf;
    m->buf_cap = cap;
    return 0;
}


/*
 * Steps every pattern over buf[from..buf_len). Returns the index in buf
 * where the first completed stop string starts (longest one on ties), or
 * -1 when none completed; then *hold is the longest partial match.
 */
static long
scan(llm_stop *m, size_t from, size_t *hold)
{
    size_t  i, best_len, max_state;
    int     j;

    for (i = from; i < m->buf_len; i++) {
        best_len = 0;
        for (j = 0; j < m->n_pat; j++) {
            llm_stop_pattern  *p = &m->pat[j];

            if (pattern_step(p, m->buf[i]) == p->len && p->len > best_len) {
                best_len = p->len;
                m->which = j;
            }
        }
        if (best_len > 0) {
            return (long) (i + 1 - best_len);
        }
    }
    max_state = 0;
    for (j = 0; j < m->n_pat; j++) {
        if (m->pat[j].state > max_state) {
            max_state = m->pat[j].state;
        }
    }
    *hold = max_state;
    return -1;
}


int
llm_stop_push(llm_stop *m, const char *text, size_t len, llm_stop_out *out)
{
    size_t  held, hold = 0;
    long    start;

    out_set(out, "", 0, m->stopped, m->which);
    if (m->stopped) {
        return 0;
    }

    /* drop what the last call handed out; the held tail moves to the front */
    if (m->emitted > 0) {
        memmove(m->buf, m->buf + m->emitted, m->buf_len - m->emitted);
        m->buf_len -= m->emitted;
        m->emitted = 0;
    }
    if (len == 0) {
        return 0;
    }
    if (reserve(m, len) != 0) {
        return -1;
    }
    memcpy(m->buf + m->buf_len, text, len);
    held = m->buf_len;
    m->buf_len += len;

    /* the held bytes were scanned before: the states already cover them */
    start = scan(m, held, &hold);
    if (start >= 0) {
        m->stopped = 1;
        m->emitted = m->buf_len;
        out_set(out, m->buf, (size_t) start, 1, m->which);
        return 0;
    }
    m->emitted = m->buf_len - hold;
    out_set(out, m->buf, m->emitted, 0, -1);
    return 0;
}


void
llm_stop_flush(llm_stop *m, llm_stop_out *out)
{
    int  j;

    if (m->stopped) {
        out_set(out, "", 0, 1, m->which);
        return;
    }
    out_set(out, m->buf ? m->buf + m->emitted : "", m->buf_len - m->emitted,
            0, -1);
    m->emitted = m->buf_len;
    for (j = 0; j < m->n_pat; j++) {
        m->pat[j].state = 0;
    }
}


void
llm_stop_free(llm_stop *m)
{
    int  j;

    for (j = 0; j < m->n_pat; j++) {
        free(m->pat[j].s);
        free(m->pat[j].fail);
    }
    free(m->pat);
    free(m->buf);
    memset(m, 0, sizeof(*m));
    m->which = -1;
}
