/*
 * Internals shared by the Jinja parser (jinja.c) and evaluator
 * (jinja_eval.c): the syntax tree, the arena and the runtime values.
 *
 * The tree is built once and only read afterwards. Every runtime value lives
 * in the arena of one render, so values share structure freely and nothing
 * is freed one by one; errors unwind with longjmp to jinja_render_ex(),
 * which frees the arena.
 */
#ifndef NGX_LLM_JINJA_IMPL_H
#define NGX_LLM_JINJA_IMPL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "jinja.h"

/* --- arena -------------------------------------------------------------- */

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

struct jval {
    uint8_t  type;
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
    int          op;       /* JOP_* for JN_BINOP; negation for JN_TEST */
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

#endif
