/*
 * Internals shared by the files of the Jinja interpreter. The layers, each
 * using only those below it (no two files call each other):
 *
 *   jinja/parse.c         lexer and parser: source -> syntax tree
 *   jinja/eval.c    the evaluator: statements, expressions, calls, scopes
 *   jinja/filter.c  filters and tests, dispatched by id
 *   jinja/json.c    tojson (Python's json.dumps) and cJSON -> values
 *   jinja/methods.c  str and dict methods
 *   jinja/ops.c     Python's operators: arithmetic, comparison, `in`,
 *                   attributes, items, slices
 *   jinja/value.c   values: errors, buffers, equality, dicts, UTF-8, str()
 *   jinja/arena.c   the arena every tree and every render allocates from
 *
 * The tree is built once and only read afterwards. Every runtime value lives
 * in the arena of one render, so values share structure freely and nothing
 * is freed one by one; errors unwind with longjmp to jinja_render_ex(),
 * which frees the arena.
 *
 * Taint: a string knows which of its bytes came from the request (the
 * context's untrusted strings), so that jinja_render_spans() can say which
 * bytes of the output did and the tokenizer matches no control token there.
 * Every operation that makes a string from strings carries the marks along:
 * a byte copied keeps its mark, a character transformed (upper(), an escape,
 * a JSON escape) is marked when any byte of the source character was, and
 * the template's own text is never marked.
 */
#ifndef NGX_LLM_JINJA_INTERNAL_H
#define NGX_LLM_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <utf8proc.h>

#include "jinja/jinja.h"

/* --- arena (jinja/arena.c) ---------------------------------------------- */

typedef struct jarena_chunk jarena_chunk;

typedef struct {
    jarena_chunk  *head;
    size_t         used;       /* bytes handed out plus chunk overhead */
    size_t         limit;      /* 0: unbounded (the parser's arena) */
} jarena;

/* NULL when the limit is reached or malloc fails */
void *jarena_alloc(jarena *a, size_t n);
void jarena_free(jarena *a);

/* --- syntax tree -------------------------------------------------------- */

typedef enum {
    /* statements, chained by next */
    JN_TEXT,        /* str: literal text */
    JN_OUTPUT,      /* {{ a }} */
    JN_IF,          /* if a: b else c (elif is a nested JN_IF in c) */
    JN_FOR,         /* for t in a [if d]: b else c */
    JN_SET,         /* set t = a */
    JN_SET_BLOCK,   /* set t: b endset */
    JN_MACRO,       /* macro str(kids: JN_NAME params, a = default): b */
    JN_BREAK,
    JN_CONTINUE,
    JN_BLOCK,       /* a body rendered in place ({% generation %}) */
    /* expressions */
    JN_LITERAL,     /* lit */
    JN_NAME,        /* str */
    JN_GETATTR,     /* a.str */
    JN_GETITEM,     /* a[b] */
    JN_SLICE,       /* a[kids[0]:kids[1]:kids[2]], each may be NULL */
    JN_CALL,        /* a(kids) */
    JN_FILTER,      /* a | str(kids) */
    JN_TEST,        /* a is [not] str(kids); op = 1 when negated */
    JN_BINOP,       /* a op b, op is a JOP_* */
    JN_COMPARE,     /* kids[0] ops[0] kids[1] ops[1] kids[2] ... */
    JN_AND,
    JN_OR,
    JN_NOT,
    JN_NEG,
    JN_POS,
    JN_COND,        /* a if b else c (c may be NULL) */
    JN_LIST,        /* [kids] */
    JN_TUPLE,       /* (kids) */
    JN_DICT,        /* {kids[0]: kids[1], ...} */
    JN_KWARG,       /* str=a, only inside call/filter/test arguments */
} jnode_kind;

enum {
    JOP_ADD = 1, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW,
    JOP_CONCAT,
    JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOTIN,
};

typedef struct jval jval;
typedef struct jnode jnode;

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jloop jloop;
typedef struct jmethod jmethod;

typedef enum {
    JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT,
    JV_NS,          /* namespace(): a dict whose attributes can be set */
    JV_MACRO,       /* a template macro */
    JV_FUNC,        /* a global function, JF_* */
    JV_METHOD,      /* a bound method of a str/dict/list */
    JV_LOOP,        /* the loop variable of a for */
} jval_type;

/* a string's taint, jval.taint */
enum {
    JT_NONE = 0,    /* the template's own text */
    JT_ALL,         /* every byte came from the request */
    JT_MARKS,       /* byte i's mark (0/1) is at s[i + marks] */
};

struct jval {
    uint8_t   type;
    uint8_t   taint;    /* JT_*, strings only */
    uint32_t  marks;    /* JT_MARKS: how far past a byte its mark is; a
                           slice keeps it, so the padding carries taint at
                           no cost in size */
    union {
        int          b;
        long long    i;
        double       f;
        struct {
            const char  *s;    /* UTF-8, not NUL-terminated; for JV_UNDEF: */
            size_t       n;    /* the name that was looked up (messages) */
        } str;
        jlist       *list;
        jdict       *dict;
        const jnode *macro;
        int          func;
        jmethod     *method;
        jloop       *loop;
    } u;
};

/* taint rides in the padding after type: values stay 24 bytes, as many as
   a render copies */
_Static_assert(sizeof(jval) <= 8 + 2 * sizeof(size_t), "a jval is 24 bytes");

/* a Python list, tuple or dict view: all the same but for how str() prints
   them ("[1]", "(1,)", "dict_items([...])") */
enum {
    JLIST_LIST = 0, JLIST_TUPLE, JLIST_DICT_ITEMS, JLIST_DICT_KEYS,
    JLIST_DICT_VALUES,
};

struct jlist {
    jval    *items;   /* (n) */
    size_t   n;
    int      is_tuple;   /* JLIST_* */
};

/* ordered, like Python's dict; keys are any hashable value (mostly str) */
struct jdict {
    jval    *keys;    /* (n) */
    jval    *vals;    /* (n) */
    size_t   n;
    size_t   cap;
};

struct jmethod {
    jval     self;
    int      id;      /* JM_* */
};

struct jnode {
    jnode_kind   kind;
    int          line;
    int          op;       /* JOP_* for JN_BINOP; negation for JN_TEST;
                              jfilter_id() for JN_FILTER */
    const char  *str;      /* text, names; NUL-terminated, parse arena */
    size_t       len;
    jval         lit;      /* JN_LITERAL */
    jnode       *a, *b, *c, *d;
    jnode       *t;        /* assignment / loop target */
    jnode      **kids;     /* (nkids) */
    int          nkids;
    int         *ops;      /* JN_COMPARE: (nkids - 1) JOP_* */
    jnode       *next;     /* next statement in a body */
};

struct jinja_tmpl {
    jarena   arena;        /* every node and string of the tree */
    jnode   *body;
};


/* --- one render --------------------------------------------------------- */

/* templates can build nested lists at run time ({% set ns.x = [ns.x] %});
   printing and comparing them recurses, so the nesting is bounded */
#define JINJA_MAX_NEST  256

#define JINJA_MAX_ARGS  16

typedef struct jframe jframe;     /* a scope, jinja/eval.c's */

typedef struct {
    char    *s;        /* cap bytes, then cap marks when marked */
    size_t   n;
    size_t   cap;
    int      marked;   /* a byte came from the request: marks follow s */
} jbuf;

/* the marks of bytes being appended: NULL none, JTAINT_ALL all, else one
   per byte */
extern const uint8_t  jtaint_all[1];
#define JTAINT_ALL  jtaint_all

struct jloop {
    jlist   *items;
    size_t   i;
};

/* the state of one render that every layer may read: limits, counters, where
   a fault unwinds to and where its message goes */
typedef struct {
    jarena        arena;
    jinja_limits  lim;
    jmp_buf       jmp;
    char         *err;
    size_t        errlen;
    jbuf         *out;
    long          steps;
    int           depth;
    jframe       *root;
    int           loop_ctl;    /* break / continue pending (jinja/eval.c) */
    int           line;        /* of the statement being run, for messages */
    int           nest;        /* containers being printed or compared */
    int           eval_depth;  /* nested eval() and exec_body() calls */
} jrender;

/* the evaluated arguments of a call, filter or test */
typedef struct {
    jval         pos[JINJA_MAX_ARGS];
    int          npos;
    const char  *kwname[JINJA_MAX_ARGS];
    jval         kw[JINJA_MAX_ARGS];
    int          nkw;
    const char  *callee;       /* the name in messages */
    int          line;
} jargs;

/* bound methods: jget_attr() makes them, jcall_method() runs them */
enum {
    JM_STRIP = 1, JM_LSTRIP, JM_RSTRIP, JM_STARTSWITH, JM_ENDSWITH, JM_SPLIT,
    JM_RSPLIT, JM_REPLACE, JM_UPPER, JM_LOWER, JM_TITLE, JM_CAPITALIZE,
    JM_FIND, JM_COUNT, JM_JOIN, JM_SPLITLINES, JM_ISDIGIT, JM_ISSPACE,
    JM_ISALPHA, JM_ISALNUM, JM_ISUPPER, JM_ISLOWER,
    JM_ITEMS, JM_KEYS, JM_VALUES, JM_GET,
    JM_CYCLE,
};

/* jstr_case(): upper / lower / title / capitalize, by code point */
enum { CASE_UPPER, CASE_LOWER, CASE_TITLE, CASE_CAPITALIZE };

/* jjson_dump(): the arguments of Python's json.dumps */
typedef struct {
    int          indent;       /* < 0: none */
    int          ensure_ascii;
    int          sort_keys;
    jval         item_sep, key_sep;
} jjson_opts;


/* --- values (jinja/value.c) --------------------------------------------- */

/* "line N: message" into the caller's buffer, then unwind the render */
void jdie(jrender *r, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
/* "'x' is undefined", or the message a missing attribute left in v */
void jdie_undefined(jrender *r, int line, jval v) __attribute__((noreturn));
/* arena memory for this render; dies past max_memory */
void *jalloc(jrender *r, size_t n);

/* appends to b, growing it in the arena; dies past max_output; the bytes
   are the template's own (unmarked) */
void jbuf_add(jrender *r, jbuf *b, const char *s, size_t n);
/* the same with their marks t (NULL, JTAINT_ALL or one per byte) */
void jbuf_add_t(jrender *r, jbuf *b, const char *s, size_t n,
    const uint8_t *t);
void jlist_push(jrender *r, jval *list, size_t *cap, jval item);

const char *jtype_name(jval v);
int jequal(jval a, jval b);
jval *jdict_find(jdict *d, jval key);
jval *jdict_find_str(jdict *d, const char *s, size_t n);
void jdict_set(jrender *r, jdict *d, jval key, jval val);

size_t ju8_step(const char *s, size_t n);
size_t ju8_len(const char *s, size_t n);
utf8proc_int32_t ju8_get(const char *s, size_t n, size_t *len);
int jpy_isspace(utf8proc_int32_t c);
size_t *ju8_offsets(jrender *r, jval s, size_t *count);
jval jstr_copy(jrender *r, const char *s, size_t n);

void jfloat_repr(double f, char *out, size_t outlen);
/* str(v), or repr(v) when repr is set, appended to b */
void jto_str_buf(jrender *r, jbuf *b, jval v, int repr);
jval jto_str(jrender *r, jval v);
/* iter(v) as a list: a str by code point, a dict by key, Undefined empty */
jval jiterate(jrender *r, jval v, int line);

/* argument i (positional) or name (keyword); def when absent */
jval jarg(jargs *a, int i, const char *name, jval def);
jval jarg_str(jrender *r, jargs *a, int i, const char *name, const char *def);
long long jarg_int(jrender *r, jargs *a, int i, const char *name,
    long long def);


/* short enough to be inlined everywhere, as they were in one file */

static inline void
jstep(jrender *r, int line)
{
    if (++r->steps > r->lim.max_steps) {
        jdie(r, line, "template ran more than %ld steps", r->lim.max_steps);
    }
}


static inline void
jbuf_str(jrender *r, jbuf *b, const char *s)
{
    jbuf_add(r, b, s, strlen(s));
}


/* the marks of string s's bytes from off on, for jbuf_add_t() */
static inline const uint8_t *
jtaint_at(jval s, size_t off)
{
    return s.taint == JT_NONE ? NULL
           : s.taint == JT_ALL ? JTAINT_ALL
           : (const uint8_t *) s.u.str.s + off + s.marks;
}


/* any byte of [off, off + n) marked: for a character transformed whole */
static inline int
jtaint_any(jval s, size_t off, size_t n)
{
    const uint8_t  *t;

    if (s.taint != JT_MARKS) {
        return s.taint == JT_ALL;
    }
    t = jtaint_at(s, off);
    for (size_t i = 0; i < n; i++) {
        if (t[i]) {
            return 1;
        }
    }
    return 0;
}


/* appends all of string v, marks included */
static inline void
jbuf_addv(jrender *r, jbuf *b, jval v)
{
    jbuf_add_t(r, b, v.u.str.s, v.u.str.n, jtaint_at(v, 0));
}


/* appends n bytes made from v's bytes [off, off + k) (an escape, a case
   mapping), marked when any of those was */
static inline void
jbuf_add_from(jrender *r, jbuf *b, const char *s, size_t n, jval v,
    size_t off, size_t k)
{
    jbuf_add_t(r, b, s, n, jtaint_any(v, off, k) ? JTAINT_ALL : NULL);
}


static inline jval
mk_undef(const char *name, size_t n)
{
    jval  v = { .type = JV_UNDEF };

    v.u.str.s = name;
    v.u.str.n = n;
    return v;
}


static inline jval
mk_none(void)
{
    jval  v = { .type = JV_NONE };
    return v;
}


static inline jval
mk_bool(int b)
{
    jval  v = { .type = JV_BOOL };
    v.u.b = !!b;
    return v;
}


static inline jval
mk_int(long long i)
{
    jval  v = { .type = JV_INT };
    v.u.i = i;
    return v;
}


static inline jval
mk_float(double f)
{
    jval  v = { .type = JV_FLOAT };
    v.u.f = f;
    return v;
}


/* a string of the template's own (unmarked) */
static inline jval
mk_str(const char *s, size_t n)
{
    jval  v = { .type = JV_STR };
    v.u.str.s = s;
    v.u.str.n = n;
    return v;
}


/* bytes [off, off + n) of string v, marks included */
static inline jval
mk_sub(jval v, size_t off, size_t n)
{
    jval  s = v;

    s.u.str.s = v.u.str.s + off;
    s.u.str.n = n;
    return s;
}


static inline jval
mk_cstr(const char *s)
{
    return mk_str(s, strlen(s));
}


static inline jval
mk_buf(jbuf *b)
{
    jval  v = mk_str(b->s ? b->s : "", b->n);

    if (b->marked) {
        v.taint = JT_MARKS;
        v.marks = (uint32_t) b->cap;
    }
    return v;
}


static inline jval
mk_list(jrender *r, size_t n)
{
    jval  v = { .type = JV_LIST };

    v.u.list = jalloc(r, sizeof(jlist));
    v.u.list->n = n;
    v.u.list->is_tuple = 0;
    v.u.list->items = n ? jalloc(r, n * sizeof(jval)) : NULL;
    return v;
}


static inline jval
mk_dict(jrender *r, int type)
{
    jval  v = { .type = (uint8_t) type };

    v.u.dict = jalloc(r, sizeof(jdict));
    memset(v.u.dict, 0, sizeof(jdict));
    return v;
}


/* memcpy of n values: an empty list's items may be NULL, which memcpy must
   not be given even for 0 bytes */
static inline void
jval_copy(jval *dst, const jval *src, size_t n)
{
    if (n > 0) {
        memcpy(dst, src, n * sizeof(jval));
    }
}


static inline int
is_number(jval v)
{
    return v.type == JV_INT || v.type == JV_FLOAT || v.type == JV_BOOL;
}


static inline double
num_f(jval v)
{
    return v.type == JV_FLOAT ? v.u.f : v.type == JV_INT ? (double) v.u.i
                                                         : (double) v.u.b;
}


static inline long long
num_i(jval v)
{
    return v.type == JV_INT ? v.u.i : v.u.b;
}


static inline int
str_eq(jval a, const char *s)
{
    size_t  n = strlen(s);

    return a.type == JV_STR && a.u.str.n == n && memcmp(a.u.str.s, s, n) == 0;
}


static inline int
truthy(jval v)
{
    switch (v.type) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.str.n != 0;
    case JV_LIST: return v.u.list->n != 0;
    case JV_DICT: return v.u.dict->n != 0;
    default: return 1;
    }
}


/* --- operators (jinja/ops.c) -------------------------------------------- */

/* obj.name: attributes and methods first, then items, as jinja2's getattr */
jval jget_attr(jrender *r, jval obj, const char *name, size_t n, int line);
jval jget_item(jrender *r, jval obj, jval key, int line);
/* obj[sv[0]:sv[1]:sv[2]] */
jval jslice(jrender *r, jval obj, jval *sv, int line);
/* -1, 0, 1 as Python's <; dies on types Python cannot order */
int jcompare(jrender *r, jval a, jval b, int line);
/* needle in hay */
int jcontains(jrender *r, jval hay, jval needle, int line);
/* a op b for op JOP_ADD .. JOP_POW */
jval jarith(jrender *r, int op, jval a, jval b, int line);


/* --- methods (jinja/methods.c) ------------------------------------------- */

jval jcall_method(jrender *r, jmethod *m, jargs *a);
jval jstr_case(jrender *r, jval s, int mode);
/* chars None: whitespace */
jval jstr_strip(jval s, jval chars, int left, int right);
/* sep None: runs of whitespace */
jval jstr_split(jrender *r, jval s, jval sep, long long maxsplit, int line);
jval jstr_replace(jrender *r, jval s, jval old, jval new, long long count,
    int line);
/* sep.join(items), with attr (NULL: none) of each item */
jval jstr_join(jrender *r, jval sep, jval items, const char *attr, int line);
int jstr_is_case(jval s, int upper);


/* --- JSON (jinja/json.c) ------------------------------------------------ */

void jjson_dump(jrender *r, jbuf *b, jval v, const jjson_opts *o, int level);
/* taint: every string in it (keys too) came from the request */
jval jfrom_cjson(jrender *r, const cJSON *j, int depth, int taint);


/* --- filters and tests (jinja/filter.c) --------------------------------- */

/* the id the parser stores in a JN_FILTER node; 0: no such filter */
int jfilter_id(const char *name, size_t n);
jval jfilter_apply(jrender *r, int id, jval v, jargs *a);
int jrun_test(jrender *r, const char *name, jval v, jargs *a);

#endif
