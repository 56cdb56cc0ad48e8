/*
 * serve_bench: the project's own load client for nginx + ngx_llm
 * (docs/perf.md). One thread, epoll, plain HTTP/1.1 over TCP, so the
 * client costs little CPU next to the engine on the same small machine.
 *
 *   build/bench/serve_bench stream --port P --streams N [--requests R]
 *       [--tokens 64] [--model smollm2] [--path /v1/chat/completions]
 *       (or /v1/completions: the same texts as one raw prompt)
 *       [--system-file F] [--bust TAG] [--tag TAG] [--timeout 600]
 *       [--host 127.0.0.1] [--response-format JSON]
 *   build/bench/serve_bench http --port P --path /x [--conns 8]
 *       [--seconds 3] [--host 127.0.0.1]
 *
 * stream: N connections, each a closed loop of streaming chat requests
 * (R requests in all, default max(N, 16)), so every concurrency level
 * covers the same 16 user messages; at N >= 16 every request is sent at
 * once. Request i sends message i % 16 (below), greedy, `tokens` tokens
 * with ignore_eos, stream_options.include_usage. With --system-file the
 * file's text is the system message of every request (the shared-prefix
 * workload); --bust TAG puts "[TAG-i] " in front of it, which makes every
 * prompt's first block unique and so defeats prefix caching while keeping
 * the work the same (for servers without a switch for it). --tag TAG
 * puts "[TAG] " before every user message: a run with a new tag finds
 * none of its messages in the prefix cache from earlier runs (only the
 * system block the chat template puts in front of all of them), as
 * different users' messages would. --response-format puts its JSON text
 * (e.g. {"type":"json_object"}) in every request: constrained streams.
 *
 * The stream is read as the SSE format allows any server to send it
 * (LF or CRLF lines, "data:" with or without a space, comments, other
 * fields, data split over lines, chunks split anywhere across reads), so
 * that the same client measures llama-server and ik_llama.cpp's server in
 * make bench's peer mode. A server that sends no usage object has its
 * content chunks counted as tokens (no_usage=N in the RESULT line).
 *
 * Per request: TTFT = first SSE chunk with content - request start;
 * TPOT = (last content chunk - first) / (completion_tokens - 1); ITL = the
 * gaps between successive content chunks (per token: the module sends one
 * chunk per token unless a token ends inside a UTF-8 sequence). Aggregate
 * tokens/s = all completion tokens / (last chunk - first request start).
 *
 * http: C keep-alive connections each sending GET path back to back for
 * the given seconds; requests/s and latency percentiles.
 *
 * Output: a human line, then one "RESULT key=value ..." line that
 * bench/run.sh parses. Times in milliseconds (ms) or microseconds (us).
 * Exit status 1 when any request failed (status != 200, cut short).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cjson/cJSON.h>

#include "format/file.h"

#define SB_N_MESSAGES   16
#define SB_MAX_CONNS    1024
#define SB_MAX_TOKENS   4096

/* the messages of the batching workload (docs/perf.md); the same as
   engine/server/cli_bench.c's, so the engine bench and this one run one
   workload */
static const char *sb_messages[SB_N_MESSAGES] = {
    "What is the capital of France and why is it famous?",
    "Explain in simple words how a rainbow forms in the sky.",
    "Write a short poem about a cat sleeping in the sun.",
    "Give me three tips for staying focused while studying.",
    "Why do leaves change color in the autumn season?",
    "Describe the taste of a fresh strawberry to a friend.",
    "How does a bicycle stay upright when it is moving?",
    "Suggest a name for a small bakery near the sea.",
    "What are the main differences between frogs and toads?",
    "Tell me a fun fact about the planet Jupiter.",
    "How should I prepare for my first job interview?",
    "Summarize the story of Little Red Riding Hood.",
    "What makes a good cup of coffee in the morning?",
    "Explain why the ocean water tastes salty.",
    "Recommend a hobby for someone who likes being outdoors.",
    "How do bees make honey from the flowers they visit?",
};


typedef struct {
    const char  *mode;          /* "stream" or "http" */
    const char  *host;
    int          port;
    const char  *path;
    const char  *model;
    const char  *system;        /* system message text, or NULL */
    const char  *bust;          /* per-request tag before the system text */
    const char  *tag;           /* before every user message: a fresh cache */
    cJSON       *response_format;   /* added to every request, or NULL */
    int          streams;       /* stream: concurrent connections */
    int          requests;      /* stream: requests in all */
    int          tokens;
    int          conns;         /* http */
    double       seconds;       /* http: run time */
    double       timeout;       /* stream: give up on what is left after */
} sb_opts;


/* what one finished streaming request measured */
typedef struct {
    int          ok;
    int          status;
    int          tokens;        /* usage.completion_tokens */
    int          cached;        /* usage.prompt_tokens_details.cached_tokens */
    int          prompt;        /* usage.prompt_tokens */
    int          n_chunks;      /* content chunks seen */
    int          usage;         /* a usage object was seen */
    double       t_start;
    double       t_first;
    double       t_last;
} sb_record;


/* one HTTP/1.1 exchange on one connection */
typedef struct {
    int          fd;
    int          busy;
    int          request_id;    /* stream: index into the records */
    char        *out;           /* request bytes */
    size_t       out_len;
    size_t       out_off;
    char        *in;            /* received, not yet consumed */
    size_t       in_len;
    size_t       in_cap;
    char        *body;          /* de-chunked body, not yet parsed as SSE */
    size_t       body_len;
    size_t       body_cap;
    char        *data;          /* the SSE event being read: its data lines */
    size_t       data_len;
    size_t       data_cap;
    int          has_data;      /* a data field seen since the last event */
    int          headers_done;
    int          status;
    int          chunked;
    long         content_left;  /* Content-Length bytes still to come */
    long         chunk_left;    /* bytes of the current chunk still to come */
    int          last_chunk;    /* the 0-size chunk seen; its CRLF to come */
    int          close;         /* the server closes after this response */
    int          complete;
    double       t_start;
    double       t_prev;        /* previous content chunk (ITL) */
} sb_conn;


typedef struct {
    sb_opts      o;
    int          ep;
    struct sockaddr_in  addr;
    sb_conn     *conns;
    int          n_conns;
    sb_record   *rec;
    int          next_request;
    int          n_done;
    double      *itl;           /* every inter-token gap, seconds */
    size_t       n_itl;
    size_t       itl_cap;
    double      *lat;           /* http: every request's latency, seconds */
    size_t       n_lat;
    size_t       lat_cap;
    long         http_ok;
    long         http_failed;
    int          no_usage;      /* streams whose server sent no usage */
} sb_bench;


static double
now_s(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


static int
cmp_double(const void *a, const void *b)
{
    double  x = *(const double *) a, y = *(const double *) b;

    return x < y ? -1 : x > y;
}


/* nearest-rank percentile of a sorted array */
static double
percentile(const double *v, size_t n, double p)
{
    size_t  k;

    if (n == 0) {
        return 0;
    }
    k = (size_t) (p / 100.0 * n + 0.999999);
    k = k < 1 ? 1 : (k > n ? n : k);
    return v[k - 1];
}


static int
push_double(double **v, size_t *n, size_t *cap, double x)
{
    double  *p;

    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 1024;
        p = realloc(*v, *cap * sizeof(double));
        if (p == NULL) {
            fprintf(stderr, "serve_bench: out of memory\n");
            return -1;
        }
        *v = p;
    }
    (*v)[(*n)++] = x;
    return 0;
}


static int
append(char **buf, size_t *len, size_t *cap, const char *data, size_t n)
{
    char  *p;

    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        p = realloc(*buf, *cap);
        if (p == NULL) {
            fprintf(stderr, "serve_bench: out of memory\n");
            return -1;
        }
        *buf = p;
    }
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}


static void
consume(char *buf, size_t *len, size_t n)
{
    memmove(buf, buf + n, *len - n);
    *len -= n;
    buf[*len] = '\0';
}


/* ---------------------------------------------------------------------------
 * requests
 */

/* the request's texts as one prompt (--path /v1/completions): no chat
 * template on either side, so servers whose chat-output parsers fail on a
 * random-weight model's bytes (ik_llama.cpp's server aborts on invalid
 * UTF-8 in a chat reply) are measured on the same prompt tokens as ours */
static char *
completion_body(const sb_opts *o, int i, cJSON *root)
{
    char    *json, prompt[8192];

    snprintf(prompt, sizeof(prompt), "%s%s%s%s%s%s",
             o->system != NULL ? o->system : "",
             o->system != NULL ? "\n\n" : "",
             o->tag != NULL ? "[" : "", o->tag != NULL ? o->tag : "",
             o->tag != NULL ? "] " : "", sb_messages[i % SB_N_MESSAGES]);
    cJSON_AddStringToObject(root, "prompt", prompt);
    json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return json;
}


static char *
chat_body(const sb_opts *o, int i)
{
    char    *json, *sys = NULL;
    cJSON   *root, *msgs, *m, *so;
    size_t   n;

    root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", o->model);
    cJSON_AddBoolToObject(root, "stream", 1);
    cJSON_AddNumberToObject(root, "max_tokens", o->tokens);
    cJSON_AddBoolToObject(root, "ignore_eos", 1);
    cJSON_AddNumberToObject(root, "temperature", 0);
    so = cJSON_AddObjectToObject(root, "stream_options");
    cJSON_AddBoolToObject(so, "include_usage", 1);
    if (strstr(o->path, "chat/") == NULL) {
        /* /v1/completions: the same texts as one raw prompt */
        return completion_body(o, i, root);
    }
    msgs = cJSON_AddArrayToObject(root, "messages");
    if (o->response_format != NULL) {
        cJSON_AddItemToObject(root, "response_format",
                              cJSON_Duplicate(o->response_format, 1));
    }

    if (o->system != NULL) {
        n = strlen(o->system) + 64;
        sys = malloc(n);
        if (sys == NULL) {
            cJSON_Delete(root);
            return NULL;
        }
        if (o->bust != NULL) {
            snprintf(sys, n, "[%s-%d] %s", o->bust, i, o->system);
        } else {
            snprintf(sys, n, "%s", o->system);
        }
        m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddStringToObject(m, "content", sys);
        cJSON_AddItemToArray(msgs, m);
        free(sys);
    }
    m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "user");
    if (o->tag != NULL) {
        n = strlen(o->tag) + strlen(sb_messages[i % SB_N_MESSAGES]) + 8;
        sys = malloc(n);
        if (sys == NULL) {
            cJSON_Delete(root);
            return NULL;
        }
        snprintf(sys, n, "[%s] %s", o->tag, sb_messages[i % SB_N_MESSAGES]);
        cJSON_AddStringToObject(m, "content", sys);
        free(sys);
    } else {
        cJSON_AddStringToObject(m, "content", sb_messages[i % SB_N_MESSAGES]);
    }
    cJSON_AddItemToArray(msgs, m);

    json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return json;
}


static int
build_request(sb_bench *b, sb_conn *c, int request_id)
{
    char    *body = NULL;
    size_t   cap;
    int      n;

    if (strcmp(b->o.mode, "stream") == 0) {
        body = chat_body(&b->o, request_id);
        if (body == NULL) {
            fprintf(stderr, "serve_bench: cannot build request %d\n",
                    request_id);
            return -1;
        }
        cap = strlen(body) + 512;
        c->out = realloc(c->out, cap);
        n = c->out == NULL ? -1
            : snprintf(c->out, cap, "POST %s HTTP/1.1\r\nHost: %s\r\n"
                       "Content-Type: application/json\r\n"
                       "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                       b->o.path, b->o.host, strlen(body), body);
        free(body);
    } else {
        cap = strlen(b->o.path) + 256;
        c->out = realloc(c->out, cap);
        n = c->out == NULL ? -1
            : snprintf(c->out, cap, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n",
                       b->o.path, b->o.host);
    }
    if (n < 0) {
        fprintf(stderr, "serve_bench: out of memory\n");
        return -1;
    }
    c->out_len = n;
    c->out_off = 0;
    return 0;
}


static void
reset_response(sb_conn *c)
{
    c->in_len = 0;
    c->body_len = 0;
    c->data_len = 0;
    c->has_data = 0;
    c->headers_done = 0;
    c->status = 0;
    c->chunked = 0;
    c->content_left = -1;
    c->chunk_left = 0;
    c->last_chunk = 0;
    c->close = 0;
    c->complete = 0;
}


static int
open_conn(sb_bench *b, sb_conn *c)
{
    int                  one = 1;
    struct epoll_event   ev;

    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd == -1) {
        fprintf(stderr, "serve_bench: socket(): %s\n", strerror(errno));
        return -1;
    }
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(c->fd, (struct sockaddr *) &b->addr, sizeof(b->addr)) == -1
        && errno != EINPROGRESS)
    {
        fprintf(stderr, "serve_bench: connect(%s:%d): %s\n", b->o.host,
                b->o.port, strerror(errno));
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
    ev.data.ptr = c;
    if (epoll_ctl(b->ep, EPOLL_CTL_ADD, c->fd, &ev) == -1) {
        fprintf(stderr, "serve_bench: epoll_ctl(): %s\n", strerror(errno));
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    return 0;
}


static void
close_conn(sb_bench *b, sb_conn *c)
{
    if (c->fd != -1) {
        epoll_ctl(b->ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
    }
}


/* stream mode: start the next request on c, or leave c idle */
static int
start_stream_request(sb_bench *b, sb_conn *c)
{
    sb_record  *r;

    c->busy = 0;
    if (b->next_request >= b->o.requests) {
        return 0;
    }
    c->request_id = b->next_request++;
    r = &b->rec[c->request_id];
    if (build_request(b, c, c->request_id) != 0) {
        return -1;
    }
    reset_response(c);
    r->t_start = c->t_start = now_s();
    c->t_prev = 0;
    c->busy = 1;
    return open_conn(b, c);
}


/* ---------------------------------------------------------------------------
 * responses
 */

/* the status line and headers; 1 when complete, 0 for more, -1 on error */
static int
parse_headers(sb_conn *c)
{
    char  *end, *line, *next;

    end = strstr(c->in, "\r\n\r\n");
    if (end == NULL) {
        return 0;
    }
    *end = '\0';
    if (sscanf(c->in, "HTTP/1.%*d %d", &c->status) != 1) {
        fprintf(stderr, "serve_bench: bad status line\n");
        return -1;
    }
    for (line = strstr(c->in, "\r\n"); line != NULL; line = next) {
        line += 2;
        next = strstr(line, "\r\n");
        if (next != NULL) {
            *next = '\0';
        }
        if (strncasecmp(line, "Transfer-Encoding:", 18) == 0
            && strcasestr(line, "chunked") != NULL)
        {
            c->chunked = 1;
        } else if (strncasecmp(line, "Connection:", 11) == 0
                   && strcasestr(line, "close") != NULL)
        {
            c->close = 1;
        } else if (strncasecmp(line, "Content-Length:", 15) == 0) {
            c->content_left = strtol(line + 15, NULL, 10);
        }
    }
    consume(c->in, &c->in_len, end + 4 - c->in);
    c->headers_done = 1;
    return 1;
}


/* moves body bytes from c->in to c->body, removing chunk framing */
static int
dechunk(sb_conn *c)
{
    char   *crlf, *endp;
    size_t  n;

    if (!c->chunked) {
        n = c->in_len;
        if (c->content_left >= 0 && (long) n > c->content_left) {
            n = c->content_left;
        }
        if (append(&c->body, &c->body_len, &c->body_cap, c->in, n) != 0) {
            return -1;
        }
        consume(c->in, &c->in_len, n);
        if (c->content_left >= 0) {
            c->content_left -= n;
            c->complete = c->content_left == 0;
        }
        return 0;
    }

    while (c->in_len > 0 && !c->complete) {
        if (c->last_chunk) {
            /* no trailers expected: the final CRLF ends the body */
            if (c->in_len < 2) {
                return 0;
            }
            consume(c->in, &c->in_len, 2);
            c->complete = 1;
            break;
        }
        if (c->chunk_left > 0) {
            n = (size_t) c->chunk_left < c->in_len ? (size_t) c->chunk_left
                                                   : c->in_len;
            if (append(&c->body, &c->body_len, &c->body_cap, c->in, n) != 0)
            {
                return -1;
            }
            consume(c->in, &c->in_len, n);
            c->chunk_left -= n;
            continue;
        }
        /* chunk_left == 0: the CRLF after a chunk, then a size line */
        if (c->in_len >= 2 && c->in[0] == '\r' && c->in[1] == '\n') {
            consume(c->in, &c->in_len, 2);
            continue;
        }
        crlf = strstr(c->in, "\r\n");
        if (crlf == NULL) {
            return 0;
        }
        c->chunk_left = strtol(c->in, &endp, 16);
        if (endp == c->in || c->chunk_left < 0) {
            fprintf(stderr, "serve_bench: bad chunk size\n");
            return -1;
        }
        consume(c->in, &c->in_len, crlf + 2 - c->in);
        c->last_chunk = c->chunk_left == 0;
    }
    return 0;
}


static void
sse_event(sb_bench *b, sb_conn *c, const char *data, double t)
{
    cJSON      *root, *choices, *delta, *content, *usage, *x;
    sb_record  *r = &b->rec[c->request_id];

    if (strcmp(data, "[DONE]") == 0) {
        return;
    }
    root = cJSON_Parse(data);
    if (root == NULL) {
        fprintf(stderr, "serve_bench: request %d: bad SSE JSON: %.80s\n",
                c->request_id, data);
        return;
    }
    choices = cJSON_GetObjectItem(root, "choices");
    x = cJSON_GetArrayItem(choices, 0);
    delta = cJSON_GetObjectItem(x, "delta");
    content = delta != NULL ? cJSON_GetObjectItem(delta, "content")
                            : cJSON_GetObjectItem(x, "text");
    if (cJSON_IsString(content) && content->valuestring[0] != '\0') {
        if (r->n_chunks == 0) {
            r->t_first = t;
        } else {
            push_double(&b->itl, &b->n_itl, &b->itl_cap, t - c->t_prev);
        }
        c->t_prev = t;
        r->t_last = t;
        r->n_chunks++;
    }
    usage = cJSON_GetObjectItem(root, "usage");
    if (cJSON_IsObject(usage)) {
        r->usage = 1;
        x = cJSON_GetObjectItem(usage, "completion_tokens");
        r->tokens = cJSON_IsNumber(x) ? x->valueint : 0;
        x = cJSON_GetObjectItem(usage, "prompt_tokens");
        r->prompt = cJSON_IsNumber(x) ? x->valueint : 0;
        x = cJSON_GetObjectItem(usage, "prompt_tokens_details");
        x = cJSON_GetObjectItem(x, "cached_tokens");
        r->cached = cJSON_IsNumber(x) ? x->valueint : 0;
    }
    cJSON_Delete(root);
}


/* an event is over (a blank line): its data, if any, is one JSON chunk */
static void
sse_dispatch(sb_bench *b, sb_conn *c, double t)
{
    if (c->has_data) {
        sse_event(b, c, c->data != NULL ? c->data : "", t);
    }
    c->data_len = 0;
    c->has_data = 0;
    if (c->data != NULL) {
        c->data[0] = '\0';
    }
}


/*
 * The body as a text/event-stream (the SSE format of the HTML standard,
 * which every OpenAI-compatible server follows, each in its own way):
 * lines end in LF or CRLF (a lone CR is taken as an end of line too); a
 * blank line ends an event; "data:" with or without one space, several
 * data lines joined by LF; comments (":" first, e.g. keep-alive pings) and
 * other fields (event:, id:, retry:) are skipped. Only whole lines are
 * taken from the body; the rest waits for the next read.
 */
static void
parse_sse(sb_bench *b, sb_conn *c, double t)
{
    char    *line, *eol, *v;
    size_t   n, len;

    /* headers read alone (llama-server sends them before any chunk): no
       body yet, and strstr(NULL) was the crash against its streams */
    if (c->body == NULL) {
        return;
    }
    for ( ;; ) {
        line = c->body;
        eol = memchr(line, '\n', c->body_len);
        v = memchr(line, '\r', eol != NULL ? (size_t) (eol - line)
                                           : c->body_len);
        if (v != NULL && (eol == NULL || v < eol)) {
            /* CR: the end of a line, with an LF after it or alone; a CR
               last in the buffer may have its LF in the next read */
            if (v + 1 == line + c->body_len && !c->complete) {
                break;
            }
            eol = v;
            n = (size_t) (eol - line) + (eol[1] == '\n' ? 2 : 1);
        } else if (eol != NULL) {
            n = (size_t) (eol - line) + 1;
        } else {
            break;
        }
        len = (size_t) (eol - line);
        *eol = '\0';
        if (len == 0) {
            sse_dispatch(b, c, t);
        } else if (line[0] != ':'
                   && strncmp(line, "data", 4) == 0
                   && (line[4] == ':' || line[4] == '\0'))
        {
            v = line[4] == ':' ? line + 5 : line + 4;
            v += *v == ' ';
            if ((c->has_data
                 && append(&c->data, &c->data_len, &c->data_cap, "\n", 1)
                    != 0)
                || append(&c->data, &c->data_len, &c->data_cap, v,
                          strlen(v)) != 0)
            {
                return;
            }
            c->has_data = 1;
        }
        consume(c->body, &c->body_len, n);
    }
    /* a stream that ends without its last blank line: take what it had */
    if (c->complete) {
        if (c->body_len > 0 && strncmp(c->body, "data:", 5) == 0) {
            v = c->body + 5;
            v += *v == ' ';
            if (append(&c->data, &c->data_len, &c->data_cap, v, strlen(v))
                == 0)
            {
                c->has_data = 1;
            }
            c->body_len = 0;
        }
        sse_dispatch(b, c, t);
    }
}


static void
finish_stream(sb_bench *b, sb_conn *c)
{
    sb_record  *r = &b->rec[c->request_id];

    r->status = c->status;
    if (!r->usage && r->n_chunks > 0) {
        /* no usage object (stream_options.include_usage is optional for a
           server): one content chunk per token, as servers stream them */
        r->tokens = r->n_chunks;
        b->no_usage++;
    }
    r->ok = c->status == 200 && c->complete && r->tokens > 0
            && r->n_chunks > 0;
    if (!r->ok) {
        fprintf(stderr, "serve_bench: request %d failed: status %d, %s, "
                "%d tokens\n", c->request_id, c->status,
                c->complete ? "complete" : "cut short", r->tokens);
    }
    b->n_done++;
    close_conn(b, c);
}


/* reads what is there; returns 1 when the response is over */
static int
on_readable(sb_bench *b, sb_conn *c)
{
    char     buf[16384];
    ssize_t  n;
    double   t;
    int      eof = 0;

    for ( ;; ) {
        n = read(c->fd, buf, sizeof(buf));
        if (n > 0) {
            if (append(&c->in, &c->in_len, &c->in_cap, buf, n) != 0) {
                return -1;
            }
            continue;
        }
        if (n == 0) {
            eof = 1;
        } else if (errno != EAGAIN && errno != EINTR) {
            eof = 1;
        }
        if (n == -1 && errno == EINTR) {
            continue;
        }
        break;
    }
    t = now_s();

    if (!c->headers_done && c->in_len > 0) {
        if (parse_headers(c) < 0) {
            return 1;
        }
    }
    if (c->headers_done) {
        if (dechunk(c) != 0) {
            return 1;
        }
        if (strcmp(b->o.mode, "stream") == 0) {
            parse_sse(b, c, t);
        } else {
            c->body_len = 0;    /* http mode: the body is not looked at */
        }
    }
    if (c->headers_done && !c->chunked && c->content_left < 0 && eof) {
        c->complete = 1;        /* delimited by close */
    }
    return c->complete || eof;
}


static int
on_writable(sb_conn *c)
{
    ssize_t  n;

    while (c->out_off < c->out_len) {
        n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n == -1) {
            return errno == EAGAIN ? 0 : -1;
        }
        c->out_off += n;
    }
    return 0;
}


/* ---------------------------------------------------------------------------
 * the two modes
 */

static int
run_loop(sb_bench *b, double deadline)
{
    int                  i, n, over;
    sb_conn             *c;
    struct epoll_event   evs[256], ev;

    for ( ;; ) {
        if (strcmp(b->o.mode, "stream") == 0 && b->n_done == b->o.requests) {
            return 0;
        }
        if (deadline > 0 && now_s() >= deadline) {
            return 0;
        }
        n = epoll_wait(b->ep, evs, 256, 1000);
        if (n == -1 && errno != EINTR) {
            fprintf(stderr, "serve_bench: epoll_wait(): %s\n",
                    strerror(errno));
            return -1;
        }
        for (i = 0; i < n; i++) {
            c = evs[i].data.ptr;
            if (c->fd == -1) {
                continue;
            }
            if ((evs[i].events & EPOLLOUT) && c->out_off < c->out_len) {
                if (on_writable(c) != 0) {
                    fprintf(stderr, "serve_bench: write(): %s\n",
                            strerror(errno));
                }
                if (c->out_off == c->out_len) {
                    ev.events = EPOLLIN | EPOLLRDHUP;
                    ev.data.ptr = c;
                    epoll_ctl(b->ep, EPOLL_CTL_MOD, c->fd, &ev);
                }
            }
            if (!(evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP
                                   | EPOLLERR)))
            {
                continue;
            }
            over = on_readable(b, c);
            if (over < 0) {
                return -1;
            }
            if (!over) {
                continue;
            }
            if (strcmp(b->o.mode, "stream") == 0) {
                finish_stream(b, c);
                if (start_stream_request(b, c) != 0) {
                    return -1;
                }
                continue;
            }
            /* http: count, then the next request on the same connection */
            if (c->complete && c->status == 200) {
                b->http_ok++;
                if (push_double(&b->lat, &b->n_lat, &b->lat_cap,
                                now_s() - c->t_start) != 0)
                {
                    return -1;
                }
            } else {
                b->http_failed++;
            }
            if (!c->complete || c->close || c->in_len > 0) {
                close_conn(b, c);      /* cannot reuse it: start afresh */
                reset_response(c);
                if (open_conn(b, c) != 0) {
                    return -1;
                }
            }
            reset_response(c);
            c->out_off = 0;
            c->t_start = now_s();
            ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
            ev.data.ptr = c;
            epoll_ctl(b->ep, EPOLL_CTL_MOD, c->fd, &ev);
        }
    }
}


static int
report_stream(sb_bench *b, double wall)
{
    int         i, n_ok = 0, n = b->o.requests;
    long        tokens = 0, cached = 0, prompt = 0;
    double     *ttft, *tpot, t0 = 1e300, t1 = 0, tok_s;
    sb_record  *r;

    ttft = calloc(n, sizeof(double));
    tpot = calloc(n, sizeof(double));
    if (ttft == NULL || tpot == NULL) {
        fprintf(stderr, "serve_bench: out of memory\n");
        return -1;
    }
    for (i = 0; i < n; i++) {
        r = &b->rec[i];
        if (!r->ok) {
            continue;
        }
        ttft[n_ok] = r->t_first - r->t_start;
        tpot[n_ok] = r->tokens > 1
                     ? (r->t_last - r->t_first) / (r->tokens - 1) : 0;
        n_ok++;
        tokens += r->tokens;
        cached += r->cached;
        prompt += r->prompt;
        t0 = r->t_start < t0 ? r->t_start : t0;
        t1 = r->t_last > t1 ? r->t_last : t1;
    }
    qsort(ttft, n_ok, sizeof(double), cmp_double);
    qsort(tpot, n_ok, sizeof(double), cmp_double);
    if (b->n_itl > 0) {
        qsort(b->itl, b->n_itl, sizeof(double), cmp_double);
    }
    tok_s = n_ok > 0 && t1 > t0 ? tokens / (t1 - t0) : 0;

    if (b->no_usage > 0) {
        fprintf(stderr, "serve_bench: %d of %d streams had no usage object: "
                "their content chunks counted as tokens\n", b->no_usage, n);
    }
    printf("%d streams, %d/%d requests ok, %ld tokens in %.2f s: "
           "%.1f tokens/s; TTFT p50 %.0f ms; TPOT p50 %.1f ms\n",
           b->o.streams, n_ok, n, tokens, wall, tok_s,
           percentile(ttft, n_ok, 50) * 1e3, percentile(tpot, n_ok, 50) * 1e3);
    printf("RESULT mode=stream streams=%d requests=%d ok=%d tokens=%ld "
           "prompt_tokens=%ld cached_tokens=%ld wall_s=%.3f tok_s=%.2f "
           "ttft_p50_ms=%.1f ttft_p95_ms=%.1f ttft_p99_ms=%.1f "
           "tpot_p50_ms=%.2f tpot_p95_ms=%.2f tpot_p99_ms=%.2f "
           "itl_p50_ms=%.2f itl_p95_ms=%.2f itl_p99_ms=%.2f no_usage=%d\n",
           b->o.streams, n, n_ok, tokens, prompt, cached, wall, tok_s,
           percentile(ttft, n_ok, 50) * 1e3, percentile(ttft, n_ok, 95) * 1e3,
           percentile(ttft, n_ok, 99) * 1e3, percentile(tpot, n_ok, 50) * 1e3,
           percentile(tpot, n_ok, 95) * 1e3, percentile(tpot, n_ok, 99) * 1e3,
           percentile(b->itl, b->n_itl, 50) * 1e3,
           percentile(b->itl, b->n_itl, 95) * 1e3,
           percentile(b->itl, b->n_itl, 99) * 1e3, b->no_usage);
    free(ttft);
    free(tpot);
    return n_ok == n ? 0 : 1;
}


static int
run_stream(sb_bench *b)
{
    int     i;
    double  t0;

    b->rec = calloc(b->o.requests, sizeof(sb_record));
    if (b->rec == NULL) {
        fprintf(stderr, "serve_bench: out of memory\n");
        return -1;
    }
    t0 = now_s();
    for (i = 0; i < b->n_conns; i++) {
        if (start_stream_request(b, &b->conns[i]) != 0) {
            return -1;
        }
    }
    if (run_loop(b, t0 + b->o.timeout) != 0) {
        return -1;
    }
    if (b->n_done < b->o.requests) {
        fprintf(stderr, "serve_bench: %d of %d requests not done after "
                "%.0f s\n", b->o.requests - b->n_done, b->o.requests,
                b->o.timeout);
    }
    return report_stream(b, now_s() - t0);
}


static int
run_http(sb_bench *b)
{
    int     i;
    double  t0, wall;

    for (i = 0; i < b->n_conns; i++) {
        if (build_request(b, &b->conns[i], i) != 0
            || open_conn(b, &b->conns[i]) != 0)
        {
            return -1;
        }
        reset_response(&b->conns[i]);
        b->conns[i].t_start = now_s();
    }
    t0 = now_s();
    if (run_loop(b, t0 + b->o.seconds) != 0) {
        return -1;
    }
    wall = now_s() - t0;
    if (b->n_lat > 0) {
        qsort(b->lat, b->n_lat, sizeof(double), cmp_double);
    }

    printf("GET %s, %d connections, %.1f s: %.0f requests/s, "
           "p50 %.0f us, p99 %.0f us, %ld failed\n", b->o.path,
           b->o.conns, wall, b->http_ok / wall,
           percentile(b->lat, b->n_lat, 50) * 1e6,
           percentile(b->lat, b->n_lat, 99) * 1e6, b->http_failed);
    printf("RESULT mode=http path=%s conns=%d seconds=%.2f requests=%ld "
           "failed=%ld rps=%.1f lat_p50_us=%.1f lat_p95_us=%.1f "
           "lat_p99_us=%.1f\n", b->o.path, b->o.conns, wall, b->http_ok,
           b->http_failed, b->http_ok / wall,
           percentile(b->lat, b->n_lat, 50) * 1e6,
           percentile(b->lat, b->n_lat, 95) * 1e6,
           percentile(b->lat, b->n_lat, 99) * 1e6);
    return b->http_failed == 0 && b->http_ok > 0 ? 0 : 1;
}


/* ---------------------------------------------------------------------------
 * options
 */

static void
usage(void)
{
    fprintf(stderr,
        "usage: serve_bench stream --port P --streams N [--requests R] "
        "[--tokens 64]\n"
        "           [--model smollm2] [--path /v1/chat/completions] "
        "[--system-file F]\n"
        "           [--bust TAG] [--tag TAG] [--timeout 600] "
        "[--host 127.0.0.1]\n"
        "           [--response-format JSON]\n"
        "       serve_bench http --port P --path /x [--conns 8] "
        "[--seconds 3] [--host 127.0.0.1]\n");
}


static int
parse_int(const char *name, const char *s, int lo, int hi, int *out)
{
    char  *end;
    long   v = strtol(s, &end, 10);

    if (end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "serve_bench: %s \"%s\": expected %d..%d\n",
                name, s, lo, hi);
        return -1;
    }
    *out = (int) v;
    return 0;
}


/* the file's text without its trailing newlines and blanks */
static char *
read_file(const char *path)
{
    size_t  n;
    char   *text = llm_read_file(path, 0, &n);

    if (text == NULL) {
        fprintf(stderr, "serve_bench: cannot read \"%s\": %s\n", path,
                strerror(errno));
        return NULL;
    }
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' ')) {
        n--;
    }
    text[n] = '\0';
    return text;
}


static int
parse_opts(sb_opts *o, int argc, char **argv)
{
    int          i, rc = 0;
    const char  *a, *v;

    memset(o, 0, sizeof(*o));
    o->host = "127.0.0.1";
    o->model = "smollm2";
    o->tokens = 64;
    o->streams = 1;
    o->conns = 8;
    o->seconds = 3;
    o->timeout = 600;
    if (argc < 2 || (strcmp(argv[1], "stream") != 0
                     && strcmp(argv[1], "http") != 0))
    {
        usage();
        return -1;
    }
    o->mode = argv[1];
    for (i = 2; i < argc && rc == 0; i += 2) {
        a = argv[i];
        v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) {
            fprintf(stderr, "serve_bench: %s needs a value\n", a);
            return -1;
        }
        if (strcmp(a, "--host") == 0) {
            o->host = v;
        } else if (strcmp(a, "--port") == 0) {
            rc = parse_int(a, v, 1, 65535, &o->port);
        } else if (strcmp(a, "--path") == 0) {
            o->path = v;
        } else if (strcmp(a, "--model") == 0) {
            o->model = v;
        } else if (strcmp(a, "--streams") == 0) {
            rc = parse_int(a, v, 1, SB_MAX_CONNS, &o->streams);
        } else if (strcmp(a, "--requests") == 0) {
            rc = parse_int(a, v, 1, 1000000, &o->requests);
        } else if (strcmp(a, "--tokens") == 0) {
            rc = parse_int(a, v, 1, SB_MAX_TOKENS, &o->tokens);
        } else if (strcmp(a, "--conns") == 0) {
            rc = parse_int(a, v, 1, SB_MAX_CONNS, &o->conns);
        } else if (strcmp(a, "--seconds") == 0) {
            o->seconds = atof(v);
        } else if (strcmp(a, "--timeout") == 0) {
            o->timeout = atof(v);
        } else if (strcmp(a, "--system-file") == 0) {
            o->system = read_file(v);
            rc = o->system == NULL ? -1 : 0;
        } else if (strcmp(a, "--bust") == 0) {
            o->bust = v;
        } else if (strcmp(a, "--tag") == 0) {
            o->tag = v;
        } else if (strcmp(a, "--response-format") == 0) {
            o->response_format = cJSON_Parse(v);
            if (!cJSON_IsObject(o->response_format)) {
                fprintf(stderr, "serve_bench: --response-format \"%s\": "
                        "expected a JSON object\n", v);
                rc = -1;
            }
        } else {
            fprintf(stderr, "serve_bench: unknown option \"%s\"\n", a);
            usage();
            return -1;
        }
    }
    if (rc != 0) {
        return -1;
    }
    if (o->port == 0) {
        fprintf(stderr, "serve_bench: --port is required\n");
        return -1;
    }
    if (strcmp(o->mode, "stream") == 0) {
        o->path = o->path ? o->path : "/v1/chat/completions";
        o->requests = o->requests ? o->requests
                      : (o->streams > SB_N_MESSAGES ? o->streams
                                                    : SB_N_MESSAGES);
    } else if (o->path == NULL || o->seconds <= 0) {
        fprintf(stderr, "serve_bench: http needs --path and --seconds > 0\n");
        return -1;
    }
    return 0;
}


int
main(int argc, char **argv)
{
    int        i, rc;
    sb_bench   b;

    memset(&b, 0, sizeof(b));
    if (parse_opts(&b.o, argc, argv) != 0) {
        return 2;
    }
    b.addr.sin_family = AF_INET;
    b.addr.sin_port = htons(b.o.port);
    if (inet_pton(AF_INET, b.o.host, &b.addr.sin_addr) != 1) {
        fprintf(stderr, "serve_bench: --host \"%s\": expected an IPv4 "
                "address\n", b.o.host);
        return 2;
    }
    b.ep = epoll_create1(EPOLL_CLOEXEC);
    b.n_conns = strcmp(b.o.mode, "stream") == 0 ? b.o.streams : b.o.conns;
    b.conns = calloc(b.n_conns, sizeof(sb_conn));
    if (b.ep == -1 || b.conns == NULL) {
        fprintf(stderr, "serve_bench: cannot set up: %s\n", strerror(errno));
        return 1;
    }
    for (i = 0; i < b.n_conns; i++) {
        b.conns[i].fd = -1;
    }

    rc = strcmp(b.o.mode, "stream") == 0 ? run_stream(&b) : run_http(&b);
    return rc == 0 ? 0 : 1;
}
