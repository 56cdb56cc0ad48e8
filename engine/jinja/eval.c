/*
 * Jinja subset, part 2: the evaluator. Runs a parsed tree against a context:
 * statements (for with loop.*, if, set, macro, break/continue), expressions,
 * calls to macros, the globals (raise_exception, strftime_now, namespace,
 * dict, range) and bound methods, and the scopes they see. What a value does
 * lives below: operators in jinja/ops.c, methods in jinja/methods.c, filters
 * and tests in jinja/filter.c, str()/== and the rest in jinja/value.c.
 *
 * Semantics follow jinja2 3.1 under transformers' ImmutableSandboxedEnvironment
 * with Python's rules underneath: str() of values (None, True, 1.5, lists and
 * dicts printed as Python reprs), truthiness, ==, slicing by code point,
 * str methods, and jinja2's Undefined (renders empty, is falsy, iterates as
 * empty, but any arithmetic or attribute access on it is an error). The
 * tojson filter is transformers' json.dumps(ensure_ascii=False, indent=None).
 *
 * Everything a render creates lives in its arena; faults unwind with
 * longjmp to jinja_render_ex(), which frees the arena.
 *
 * defines: jinja_render, jinja_render_ex, jinja_render_spans,
 *          jinja_limits_default
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja/internal.h"


/* a scope: the root (the context), a macro call, a loop iteration */
struct jframe {
    jframe  *parent;
    jdict    vars;
};

/* bounds the C stack across macro calls too (about 1.2 KB a level, so
   under 0.5 MB): 64 macros x 200 nested expressions would need megabytes */
#define JINJA_MAX_EVAL_DEPTH  400

enum { LOOP_NONE, LOOP_BREAK, LOOP_CONTINUE };

/* the global functions, JV_FUNC's u.func */
enum {
    JG_RAISE_EXCEPTION = 1, JG_STRFTIME_NOW, JG_NAMESPACE, JG_DICT, JG_RANGE,
};

static void exec_body(jrender *r, const jnode *n, jframe *f);
static jval eval(jrender *r, const jnode *n, jframe *f);


/* --- variables ---------------------------------------------------------- */

static jval
lookup(jrender *r, jframe *f, const char *name, size_t n)
{
    static const struct { const char *name; int id; } globals[] = {
        { "raise_exception", JG_RAISE_EXCEPTION },
        { "strftime_now", JG_STRFTIME_NOW },
        { "namespace", JG_NAMESPACE },
        { "dict", JG_DICT },
        { "range", JG_RANGE },
    };
    jval  *v;

    (void) r;
    for (; f != NULL; f = f->parent) {
        v = jdict_find_str(&f->vars, name, n);
        if (v != NULL) {
            return *v;
        }
    }
    for (size_t i = 0; i < sizeof(globals) / sizeof(globals[0]); i++) {
        if (strlen(globals[i].name) == n
            && memcmp(globals[i].name, name, n) == 0)
        {
            jval  g = { .type = JV_FUNC };

            g.u.func = globals[i].id;
            return g;
        }
    }
    return mk_undef(name, n);
}


static void
assign(jrender *r, jframe *f, const jnode *target, jval v)
{
    jval  *ns;

    if (target->kind == JN_NAME) {
        jdict_set(r, &f->vars, mk_str(target->str, target->len), v);
        return;
    }
    if (target->kind == JN_GETATTR) {
        jval  obj = lookup(r, f, target->a->str, target->a->len);

        ns = &obj;
        if (ns->type != JV_NS) {
            jdie(r, target->line, "can only assign attributes of a namespace, "
                 "'%s' is %s", target->a->str, jtype_name(obj));
        }
        jdict_set(r, ns->u.dict, mk_str(target->str, target->len), v);
        return;
    }
    /* a, b = pair */
    if (v.type != JV_LIST || (int) v.u.list->n != target->nkids) {
        jdie(r, target->line, "cannot unpack %s into %d names", jtype_name(v),
             target->nkids);
    }
    for (int i = 0; i < target->nkids; i++) {
        assign(r, f, target->kids[i], v.u.list->items[i]);
    }
}


static void
eval_args(jrender *r, const jnode *n, jframe *f, jargs *a,
    const char *callee)
{
    memset(a, 0, sizeof(*a));
    a->callee = callee;
    a->line = n->line;
    for (int i = 0; i < n->nkids; i++) {
        const jnode  *k = n->kids[i];

        if (a->npos + a->nkw >= JINJA_MAX_ARGS) {
            jdie(r, n->line, "%s: too many arguments", callee);
        }
        if (k->kind == JN_KWARG) {
            a->kwname[a->nkw] = k->str;
            a->kw[a->nkw++] = eval(r, k->a, f);
        } else {
            a->pos[a->npos++] = eval(r, k, f);
        }
    }
}


/* --- calls -------------------------------------------------------------- */

static jval call_value(jrender *r, jval callee, jargs *a, const jnode *n);

static jval
call_macro(jrender *r, const jnode *m, jargs *a)
{
    jframe  f;
    jbuf    capture = { 0 }, *saved_out;
    int     saved_ctl;

    if (++r->depth > r->lim.max_depth) {
        jdie(r, a->line, "macros nested deeper than %d calls",
             r->lim.max_depth);
    }
    jstep(r, a->line);
    memset(&f, 0, sizeof(f));
    f.parent = r->root;
    if (a->npos > m->nkids) {
        jdie(r, a->line, "macro '%s' takes not more than %d argument(s)",
             m->str, m->nkids);
    }
    for (int i = 0; i < m->nkids; i++) {
        const jnode  *p = m->kids[i];
        jval          v = jarg(a, i, p->str, mk_undef(p->str, p->len));

        if (v.type == JV_UNDEF && p->a != NULL) {
            v = eval(r, p->a, &f);
        }
        jdict_set(r, &f.vars, mk_str(p->str, p->len), v);
    }
    saved_out = r->out;
    saved_ctl = r->loop_ctl;
    r->out = &capture;
    exec_body(r, m->b, &f);
    r->out = saved_out;
    r->loop_ctl = saved_ctl;
    r->depth--;
    return mk_buf(&capture);
}


static jval
call_global(jrender *r, int id, jargs *a)
{
    jval       v, out;
    long long  start, stop, st, count;
    size_t     cap = 0;

    switch (id) {
    case JG_RAISE_EXCEPTION:
        v = jto_str(r, jarg(a, 0, "message", mk_cstr("")));
        if (r->errlen > 0) {
            snprintf(r->err, r->errlen, "%.*s", (int) v.u.str.n, v.u.str.s);
        }
        longjmp(r->jmp, 1);
    case JG_STRFTIME_NOW: {
        jval       fmt = jarg_str(r, a, 0, "format", NULL);
        char      *cfmt, buf[512];
        time_t     now = r->lim.now ? (time_t) r->lim.now : time(NULL);
        struct tm  tm;
        size_t     k;

        cfmt = jalloc(r, fmt.u.str.n + 1);
        memcpy(cfmt, fmt.u.str.s, fmt.u.str.n);
        cfmt[fmt.u.str.n] = '\0';
        if (r->lim.now) {
            gmtime_r(&now, &tm);
        } else {
            localtime_r(&now, &tm);
        }
        k = strftime(buf, sizeof(buf), cfmt, &tm);
        v = jstr_copy(r, buf, k);
        /* a format from the request writes the request's text */
        v.taint = jtaint_any(fmt, 0, fmt.u.str.n) ? JT_ALL : JT_NONE;
        return v;
    }
    case JG_NAMESPACE:
    case JG_DICT:
        out = mk_dict(r, id == JG_NAMESPACE ? JV_NS : JV_DICT);
        for (int i = 0; i < a->npos; i++) {
            if (a->pos[i].type != JV_DICT) {
                jdie(r, a->line, "%s: positional arguments must be mappings",
                     a->callee);
            }
            for (size_t k = 0; k < a->pos[i].u.dict->n; k++) {
                jdict_set(r, out.u.dict, a->pos[i].u.dict->keys[k],
                          a->pos[i].u.dict->vals[k]);
            }
        }
        for (int i = 0; i < a->nkw; i++) {
            jdict_set(r, out.u.dict, mk_cstr(a->kwname[i]), a->kw[i]);
        }
        return out;
    case JG_RANGE:
        if (a->npos == 1) {
            start = 0;
            stop = jarg_int(r, a, 0, "stop", 0);
            st = 1;
        } else {
            start = jarg_int(r, a, 0, "start", 0);
            stop = jarg_int(r, a, 1, "stop", 0);
            st = jarg_int(r, a, 2, "step", 1);
        }
        if (st == 0) {
            jdie(r, a->line, "range() arg 3 must not be zero");
        }
        out = mk_list(r, 0);
        count = 0;
        for (long long i = start; st > 0 ? i < stop : i > stop; i += st) {
            jstep(r, a->line);
            jlist_push(r, &out, &cap, mk_int(i));
            if (++count > r->lim.max_steps) break;
        }
        return out;
    }
    jdie(r, a->line, "unknown function");
}


static jval
call_value(jrender *r, jval callee, jargs *a, const jnode *n)
{
    switch (callee.type) {
    case JV_MACRO: return call_macro(r, callee.u.macro, a);
    case JV_FUNC: return call_global(r, callee.u.func, a);
    case JV_METHOD: return jcall_method(r, callee.u.method, a);
    case JV_UNDEF: jdie_undefined(r, n->line, callee);
    default:
        jdie(r, n->line, "'%s' object is not callable", jtype_name(callee));
    }
}


/* --- expressions -------------------------------------------------------- */

static jval eval_node(jrender *r, const jnode *n, jframe *f);

static jval
eval(jrender *r, const jnode *n, jframe *f)
{
    jval  v;

    if (++r->eval_depth > JINJA_MAX_EVAL_DEPTH) {
        jdie(r, n->line, "template nested deeper than %d levels",
             JINJA_MAX_EVAL_DEPTH);
    }
    v = eval_node(r, n, f);
    r->eval_depth--;
    return v;
}


static jval
eval_node(jrender *r, const jnode *n, jframe *f)
{
    jval   a, b, v, sv[3];
    jargs *args;

    switch (n->kind) {
    case JN_LITERAL:
        return n->lit;
    case JN_NAME:
        return lookup(r, f, n->str, n->len);
    case JN_GETATTR:
        return jget_attr(r, eval(r, n->a, f), n->str, n->len, n->line);
    case JN_GETITEM:
        a = eval(r, n->a, f);
        return jget_item(r, a, eval(r, n->b, f), n->line);
    case JN_SLICE:
        a = eval(r, n->a, f);
        for (int i = 0; i < 3; i++) {
            sv[i] = n->kids[i] ? eval(r, n->kids[i], f) : mk_none();
        }
        return jslice(r, a, sv, n->line);
    case JN_CALL:
        a = eval(r, n->a, f);
        args = jalloc(r, sizeof(jargs));
        eval_args(r, n, f, args,
                  n->a->kind == JN_NAME || n->a->kind == JN_GETATTR
                  ? n->a->str : "call");
        return call_value(r, a, args, n);
    case JN_FILTER:
        a = eval(r, n->a, f);
        args = jalloc(r, sizeof(jargs));
        eval_args(r, n, f, args, n->str);
        return jfilter_apply(r, n->op, a, args);
    case JN_TEST:
        a = eval(r, n->a, f);
        args = jalloc(r, sizeof(jargs));
        eval_args(r, n, f, args, n->str);
        return mk_bool(jrun_test(r, n->str, a, args) != n->op);
    case JN_BINOP:
        a = eval(r, n->a, f);
        b = eval(r, n->b, f);
        if (n->op == JOP_CONCAT) {
            jbuf  buf = { 0 };

            jto_str_buf(r, &buf, a, 0);
            jto_str_buf(r, &buf, b, 0);
            return mk_buf(&buf);
        }
        return jarith(r, n->op, a, b, n->line);
    case JN_COMPARE:
        a = eval(r, n->kids[0], f);
        for (int i = 1; i < n->nkids; i++) {
            int  ok;

            b = eval(r, n->kids[i], f);
            switch (n->ops[i - 1]) {
            case JOP_EQ: ok = jequal(a, b); break;
            case JOP_NE: ok = !jequal(a, b); break;
            case JOP_LT: ok = jcompare(r, a, b, n->line) < 0; break;
            case JOP_LE: ok = jcompare(r, a, b, n->line) <= 0; break;
            case JOP_GT: ok = jcompare(r, a, b, n->line) > 0; break;
            case JOP_GE: ok = jcompare(r, a, b, n->line) >= 0; break;
            case JOP_IN: ok = jcontains(r, b, a, n->line); break;
            default: ok = !jcontains(r, b, a, n->line); break;
            }
            if (!ok) {
                return mk_bool(0);
            }
            a = b;
        }
        return mk_bool(1);
    case JN_AND:
        a = eval(r, n->a, f);
        return truthy(a) ? eval(r, n->b, f) : a;
    case JN_OR:
        a = eval(r, n->a, f);
        return truthy(a) ? a : eval(r, n->b, f);
    case JN_NOT:
        return mk_bool(!truthy(eval(r, n->a, f)));
    case JN_NEG:
    case JN_POS:
        a = eval(r, n->a, f);
        if (a.type == JV_UNDEF) jdie_undefined(r, n->line, a);
        if (!is_number(a)) {
            jdie(r, n->line, "bad operand type for unary %c: '%s'",
                 n->kind == JN_NEG ? '-' : '+', jtype_name(a));
        }
        if (n->kind == JN_POS) return a.type == JV_BOOL ? mk_int(a.u.b) : a;
        if (a.type == JV_FLOAT) return mk_float(-a.u.f);
        if (num_i(a) == LLONG_MIN) jdie(r, n->line, "integer overflow");
        return mk_int(-num_i(a));
    case JN_COND:
        if (truthy(eval(r, n->b, f))) {
            return eval(r, n->a, f);
        }
        return n->c ? eval(r, n->c, f) : mk_undef("", 0);
    case JN_LIST:
    case JN_TUPLE:
        v = mk_list(r, (size_t) n->nkids);
        v.u.list->is_tuple = n->kind == JN_TUPLE ? JLIST_TUPLE : JLIST_LIST;
        for (int i = 0; i < n->nkids; i++) {
            v.u.list->items[i] = eval(r, n->kids[i], f);
        }
        return v;
    case JN_DICT:
        v = mk_dict(r, JV_DICT);
        for (int i = 0; i + 1 < n->nkids; i += 2) {
            a = eval(r, n->kids[i], f);
            jdict_set(r, v.u.dict, a, eval(r, n->kids[i + 1], f));
        }
        return v;
    default:
        jdie(r, n->line, "not an expression");
    }
}


/* --- statements --------------------------------------------------------- */

static void
exec_for(jrender *r, const jnode *n, jframe *f)
{
    jval     list, filtered, item;
    jloop    loop;
    jframe   it;
    size_t   cap = 0;
    jval     loopv = { .type = JV_LOOP };

    list = jiterate(r, eval(r, n->a, f), n->line);
    if (n->d != NULL) {
        /* "for x in xs if cond": the condition sees x, and loop.* counts
           only the items that pass */
        filtered = mk_list(r, 0);
        for (size_t i = 0; i < list.u.list->n; i++) {
            memset(&it, 0, sizeof(it));
            it.parent = f;
            assign(r, &it, n->t, list.u.list->items[i]);
            jstep(r, n->line);
            if (truthy(eval(r, n->d, &it))) {
                jlist_push(r, &filtered, &cap, list.u.list->items[i]);
            }
        }
        list = filtered;
    }
    if (list.u.list->n == 0) {
        if (n->c != NULL) {
            exec_body(r, n->c, f);
        }
        return;
    }
    loop.items = list.u.list;
    loopv.u.loop = &loop;
    for (loop.i = 0; loop.i < list.u.list->n; loop.i++) {
        jstep(r, n->line);
        item = list.u.list->items[loop.i];
        /* each iteration is a fresh scope, as in jinja2 */
        memset(&it, 0, sizeof(it));
        it.parent = f;
        jdict_set(r, &it.vars, mk_cstr("loop"), loopv);
        assign(r, &it, n->t, item);
        exec_body(r, n->b, &it);
        if (r->loop_ctl == LOOP_BREAK) {
            r->loop_ctl = LOOP_NONE;
            break;
        }
        r->loop_ctl = LOOP_NONE;
    }
}


static void
exec_body(jrender *r, const jnode *n, jframe *f)
{
    jval    v;
    jbuf    capture, *saved;

    if (++r->eval_depth > JINJA_MAX_EVAL_DEPTH) {
        jdie(r, n ? n->line : 0, "template nested deeper than %d levels",
             JINJA_MAX_EVAL_DEPTH);
    }
    for (; n != NULL && r->loop_ctl == LOOP_NONE; n = n->next) {
        r->line = n->line;
        switch (n->kind) {
        case JN_TEXT:
            jbuf_add(r, r->out, n->str, n->len);
            break;
        case JN_OUTPUT:
            v = eval(r, n->a, f);
            jto_str_buf(r, r->out, v, 0);
            break;
        case JN_IF:
            if (truthy(eval(r, n->a, f))) {
                exec_body(r, n->b, f);
            } else if (n->c != NULL) {
                exec_body(r, n->c, f);
            }
            break;
        case JN_FOR:
            exec_for(r, n, f);
            break;
        case JN_SET:
            assign(r, f, n->t, eval(r, n->a, f));
            break;
        case JN_SET_BLOCK:
            memset(&capture, 0, sizeof(capture));
            saved = r->out;
            r->out = &capture;
            exec_body(r, n->b, f);
            r->out = saved;
            assign(r, f, n->t, mk_buf(&capture));
            break;
        case JN_MACRO: {
            jval  m = { .type = JV_MACRO };

            m.u.macro = n;
            jdict_set(r, &f->vars, mk_str(n->str, n->len), m);
            break;
        }
        case JN_BREAK:
            r->loop_ctl = LOOP_BREAK;
            break;
        case JN_CONTINUE:
            r->loop_ctl = LOOP_CONTINUE;
            break;
        case JN_BLOCK:
            exec_body(r, n->b, f);
            break;
        default:
            jdie(r, n->line, "not a statement");
        }
    }
    r->eval_depth--;
}


/* --- entry points ------------------------------------------------------- */

jinja_limits
jinja_limits_default(void)
{
    jinja_limits  l;

    l.max_output = 4u << 20;
    l.max_memory = 64u << 20;
    l.max_steps = 1000000;
    l.max_depth = 64;
    l.now = 0;
    return l;
}


int
jinja_render(const jinja_tmpl *t, const cJSON *ctx, char **out,
    size_t *out_len, char *err, size_t errlen)
{
    jinja_limits  l = jinja_limits_default();

    return jinja_render_ex(t, ctx, &l, out, out_len, err, errlen);
}


/* the output's marked bytes as [start, end) runs, malloc'ed */
static int
taint_spans(const jbuf *b, jinja_span **spans, size_t *n_spans)
{
    size_t          i, n = 0, cap = 0;
    jinja_span     *sp = NULL, *grown;
    const uint8_t  *t;

    /* an empty render has no buffer: NULL + 0 is undefined (UBSan) */
    t = b->marked ? (const uint8_t *) b->s + b->cap : NULL;

    for (i = 0; b->marked && i < b->n; i++) {
        if (!t[i]) {
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            grown = realloc(sp, cap * sizeof(jinja_span));
            if (grown == NULL) {
                free(sp);
                return -1;
            }
            sp = grown;
        }
        sp[n].start = i;
        while (i < b->n && t[i]) {
            i++;
        }
        sp[n++].end = i;
    }
    *spans = sp;
    *n_spans = n;
    return 0;
}


static int
is_trusted(const char *const *trusted, const char *name)
{
    for (; trusted != NULL && *trusted != NULL; trusted++) {
        if (strcmp(*trusted, name) == 0) {
            return 1;
        }
    }
    return 0;
}


static int
render(const jinja_tmpl *t, const cJSON *ctx, const char *const *trusted,
    const jinja_limits *limits, char **out, size_t *out_len,
    jinja_span **spans, size_t *n_spans, char *err, size_t errlen)
{
    jrender          *r;
    jframe            root;
    jbuf              main_out = { 0 };
    const cJSON      *c;
    volatile int      rc;

    *out = NULL;
    *out_len = 0;
    if (spans != NULL) {
        *spans = NULL;
        *n_spans = 0;
    }
    if (errlen > 0) {
        err[0] = '\0';
    }
    if (ctx != NULL && !cJSON_IsObject(ctx)) {
        snprintf(err, errlen, "line 1: the context must be a JSON object");
        return -1;
    }
    /* volatile state across longjmp lives in this heap block */
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "line 1: out of memory");
        return -1;
    }
    r->lim = *limits;
    r->arena.limit = limits->max_memory;
    r->err = err;
    r->errlen = errlen;
    r->out = &main_out;
    r->line = 1;
    memset(&root, 0, sizeof(root));
    r->root = &root;
    rc = -1;
    if (setjmp(r->jmp) == 0) {
        if (ctx != NULL) {
            cJSON_ArrayForEach(c, ctx) {
                if (c->string != NULL) {
                    /* without spans asked for, nothing is marked: no cost */
                    jdict_set(r, &root.vars, mk_cstr(c->string),
                              jfrom_cjson(r, c, 0, spans != NULL
                                          && !is_trusted(trusted, c->string)));
                }
            }
        }
        exec_body(r, t->body, &root);
        *out = malloc(r->out->n + 1);
        if (*out == NULL
            || (spans != NULL && taint_spans(r->out, spans, n_spans) != 0))
        {
            free(*out);
            *out = NULL;
            snprintf(err, errlen, "line 1: out of memory");
        } else {
            if (r->out->n) {
                memcpy(*out, r->out->s, r->out->n);
            }
            (*out)[r->out->n] = '\0';
            *out_len = r->out->n;
            rc = 0;
        }
    }
    jarena_free(&r->arena);
    free(r);
    return rc;
}


int
jinja_render_ex(const jinja_tmpl *t, const cJSON *ctx,
    const jinja_limits *limits, char **out, size_t *out_len, char *err,
    size_t errlen)
{
    return render(t, ctx, NULL, limits, out, out_len, NULL, NULL, err,
                  errlen);
}


int
jinja_render_spans(const jinja_tmpl *t, const cJSON *ctx,
    const char *const *trusted, const jinja_limits *limits, char **out,
    size_t *out_len, jinja_span **spans, size_t *n_spans, char *err,
    size_t errlen)
{
    return render(t, ctx, trusted, limits, out, out_len, spans, n_spans, err,
                  errlen);
}
