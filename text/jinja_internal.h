/* jinja internals shared by jinja_*.c: the arena, the growable buffer, values (Python-like:
 * None, bool, int, float, str, list/tuple, dict, namespace, macro, loop, builtin), the AST and
 * the builtin tables. Everything a render creates lives in one arena and is freed at once. */
#ifndef TEXT_JINJA_INTERNAL_H
#define TEXT_JINJA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "text/jinja.h"

// ---- arena and buffer ----

struct jarena {
    struct jchunk *head; // newest chunk first
    size_t total;        // bytes handed out so far
};

void ja_init(struct jarena *a);
void ja_deinit(struct jarena *a);
void *ja_alloc(struct jarena *a, size_t n); /* 16-byte aligned; aborts on OOM (xmalloc) */
char *ja_strndup(struct jarena *a, const char *s, size_t n);
/* The most temporaries one render may hold (an arena's total). Code that builds a big string
 * outside the arena (a buf) checks total + what it is about to add against it BEFORE growing,
 * so that a small template cannot ask for gigabytes (chained joins grow exponentially). */
#define JINJA_ARENA_MAX ((size_t)64 << 20)

// ---- values ----

enum jv_kind {
    JV_UNDEF = 0,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_BIGINT, // an int literal beyond 64 bits from JSON: u.s holds its decimal text
    JV_STR,
    JV_LIST, // list, or tuple when JV_F_TUPLE
    JV_DICT,
    JV_NS,     // namespace(): a mutable dict
    JV_MACRO,  // a {% macro %}
    JV_LOOP,   // the `loop` object of a for
    JV_FUNC,   // builtin global or bound method (fn = id, self = bound object or NULL)
    JV_CALLER, // `caller` inside a macro invoked by {% call %} (u.caller)
};

#define JV_F_SAFE 1u    /* str is markupsafe.Markup */
#define JV_F_TUPLE 2u   /* list is a tuple */
#define JV_F_HINT 4u    /* undefined: undef_name is a full message, not a variable name */
#define JV_F_GEN 8u     /* list stands for a Python generator (select, map, items... filters) */
#define JV_F_KEYS 16u   /* list stands for dict.keys() */
#define JV_F_VALUES 32u /* list stands for dict.values() */
#define JV_F_ITEMS 64u  /* list stands for dict.items() */
#define JV_F_LAZY (JV_F_GEN | JV_F_KEYS | JV_F_VALUES | JV_F_ITEMS) /* not a real list */

struct jv_list;
struct jv_dict;
struct jloop;
struct jnode;

struct jinja_value {
    uint8_t kind;  // enum jv_kind
    uint8_t flags; // JV_F_*
    uint16_t fn;   // JV_FUNC: builtin id
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *s; // not NUL-terminated in general
            size_t n;      // bytes
        } s;
        struct jv_list *list;
        struct jv_dict *dict;
        const struct jnode *macro;
        struct jloop *loop;
        const struct jinja_value *self; // JV_FUNC
        struct jcaller *caller;         // JV_CALLER
        const char *undef_name;         // JV_UNDEF: name for error messages (may be NULL)
    } u;
};

struct jv_list {
    size_t n, cap;
    struct jinja_value *v;
};

struct jv_dict {
    size_t n, cap;
    struct jinja_value *k; // keys (str, int, ...)
    struct jinja_value *v;
};

struct jscope;

struct jcaller {
    const struct jnode *block; // the JN_CALLBLOCK
    struct jscope *scope;      // scope of the {% call %} statement
    bool active;               // false once the call block has finished
};

struct jloop {
    struct jv_list *items; // the (filtered) sequence
    size_t i;              // current index0
    int depth0;
    struct jinja_value last_changed; // for loop.changed()
    bool changed_set;
    struct jinja_value self; // value pointing at this loop (bound methods use it)
};

struct jinja_value jv_undef(const char *name);
struct jinja_value jv_undef_hint(const char *msg); /* static or arena message */
struct jinja_value jv_none(void);
struct jinja_value jv_bool(bool b);
struct jinja_value jv_int(int64_t i);
struct jinja_value jv_float(double f);
struct jinja_value jv_str(const char *s, size_t n); /* borrows s: it must outlive the value */
struct jinja_value jv_strdup(struct jarena *a, const char *s, size_t n);
struct jinja_value jv_list_new(struct jarena *a, size_t cap);
struct jinja_value jv_dict_new(struct jarena *a, size_t cap);
void jv_list_push(struct jarena *a, struct jv_list *l, struct jinja_value v);
/* Set d[k] = v (replace in place when k exists, like a Python dict). */
void jv_dict_set(struct jarena *a, struct jv_dict *d, struct jinja_value k, struct jinja_value v);
/* d[key] for a str key; NULL when missing. */
struct jinja_value *jv_dict_get(const struct jv_dict *d, const char *key, size_t n);
struct jinja_value *jv_dict_find(const struct jv_dict *d, struct jinja_value key);

bool jv_truthy(struct jinja_value v);
bool jv_equal(struct jinja_value a, struct jinja_value b);
bool jv_is_str(struct jinja_value v, const char *s); /* v is a str equal to s */
const char *jv_type_name(struct jinja_value v);      /* Python type name for errors */
/* Append str(v) (Python str(); Undefined prints nothing) / repr(v). */
void jv_to_str(struct buf *b, struct jinja_value v);
void jv_repr(struct buf *b, struct jinja_value v);
void jv_float_repr(struct buf *b, double f); /* Python float repr */
/* str(v) as a value (strings are returned as is). */
struct jinja_value jv_stringify(struct jarena *a, struct jinja_value v);

// ---- utf-8 and Python string helpers ----

size_t utf8_len(const char *s, size_t n);                /* code points */
size_t utf8_next(const char *s, size_t n, size_t i);     /* offset of the next code point */
uint32_t utf8_decode(const char *s, size_t n, size_t i); /* code point at offset i */
size_t utf8_encode(uint32_t cp, char out[4]);
bool py_isspace(uint32_t cp);
/* Byte offsets of each code point plus the end: returns count, fills *offs (arena). */
size_t utf8_offsets(struct jarena *a, const char *s, size_t n, size_t **offs);

// ---- json ----

/* Parse JSON like Python json.loads (ints stay ints, object key order kept, last duplicate wins).
 */
int jv_json_parse(struct jarena *a, const char *s, size_t n, struct jinja_value *out, char *err,
                  size_t errlen);
struct tojson_opts {
    bool ensure_ascii;
    bool sort_keys;
    const char *indent; // NULL: single line
    size_t indent_n;
    const char *item_sep; // default ", " or "," when indented
    size_t item_sep_n;
    const char *key_sep; // default ": "
    size_t key_sep_n;
};
/* json.dumps(v, ...). Returns 0 or ERR_INVAL (value not serializable; msg set). */
int jv_tojson(struct buf *b, struct jinja_value v, const struct tojson_opts *o, char *msg,
              size_t msglen);

// ---- render context internals (jinja.c), used by chat.c ----

struct jarena *jinja_ctx_arena(struct jinja_ctx *c);
void jinja_ctx_bind(struct jinja_ctx *c, const char *name, struct jinja_value v);

// ---- AST ----

enum jn_type {
    // statements
    JN_BODY = 1, // kids: statements
    JN_TEXT,     // val: str
    JN_OUTPUT,   // a: expr
    JN_IF,       // a: cond, b: body, c: else (JN_IF for elif, JN_BODY, or NULL)
    JN_FOR,      // a: target (JN_NAME or JN_TUPLE of names), b: iter, c: body, d: else, e: filter
    JN_SET,      // a: target (JN_NAME, JN_TUPLE, JN_NSATTR), b: value expr, c: block body
    JN_MACRO,    // name; kids: params (JN_NAME with a=default or NULL); c: body;
                 // op: MACRO_VARARGS / MACRO_KWARGS when the body uses them
    JN_BREAK,
    JN_CONTINUE,
    JN_SCOPE,       // a: body run in a child scope ({% generation %})
    JN_WITH,        // kids: targets (JN_NAME), kw: values, c: body (child scope)
    JN_FILTERBLOCK, // a: filter chain over JN_BLOCKVAL, c: body
    JN_CALLBLOCK,   // a: JN_CALL of a macro, kids: caller params (JN_NAME, a=default), c: body
    // expressions
    JN_CONST,    // val
    JN_NAME,     // name (interned)
    JN_NSATTR,   // set target ns.attr: a = JN_NAME, name = attr
    JN_GETATTR,  // a: obj, name
    JN_GETITEM,  // a: obj, b: key
    JN_SLICE,    // a: obj, b: start, c: stop, d: step (each may be NULL)
    JN_CALL,     // a: callee; kids: positional args; kw: keyword args (JN_KWARG)
    JN_KWARG,    // name, a: value
    JN_FILTER,   // a: operand, op: filter id, kids/kw: args
    JN_TEST,     // a: operand, op: test id, kids: args, neg
    JN_NEG,      // a
    JN_POS,      // a
    JN_NOT,      // a
    JN_AND,      // a, b
    JN_OR,       // a, b
    JN_BINOP,    // op: '+', '-', '*', '/', 'F' (//), '%', 'P' (**); a, b
    JN_CONCAT,   // kids
    JN_COMPARE,  // a: first; kids: operands (JN_CMPOP with op and a)
    JN_CMPOP,    // op: enum jcmp; a: operand
    JN_COND,     // a: test, b: then, c: else (may be NULL)
    JN_LIST,     // kids
    JN_TUPLE,    // kids
    JN_DICT,     // kids: keys, kw: values (plain exprs)
    JN_BLOCKVAL, // the rendered body of the enclosing {% filter %} block
};

#define MACRO_VARARGS 1 /* the macro body reads `varargs`: extra positional args are kept */
#define MACRO_KWARGS 2  /* the macro body reads `kwargs`: unknown keyword args are kept */
#define MACRO_CALLER 4  /* the macro body reads `caller` */

enum jcmp { JCMP_EQ, JCMP_NE, JCMP_LT, JCMP_LE, JCMP_GT, JCMP_GE, JCMP_IN, JCMP_NOTIN };

struct jnode {
    uint8_t type; // enum jn_type
    bool neg;     // JN_TEST: "is not"
    int op;
    int line;
    const char *name; // interned (template arena)
    struct jnode *a, *b, *c, *d, *e;
    struct jnode **kids;
    size_t n_kids;
    struct jnode **kw;
    size_t n_kw;
    struct jinja_value val;
};

struct jinja_template {
    struct jarena arena;      // AST, interned names, literal strings
    struct jnode *root;       // JN_BODY
    const char *name_loop;    // interned "loop"
    const char *name_varargs; // interned "varargs"
    const char *name_kwargs;  // interned "kwargs"
    const char *name_caller;  // interned "caller"
};

/* Parse src into t->root (t->arena initialised by the caller). */
int jinja_parse(struct jinja_template *t, const char *src, size_t len, struct jinja_error *err);

// ---- builtins (jinja_builtins.c / jinja_filters.c) ----

/* Ids for filters, tests, globals and methods; -1 when the name is unknown. */
int jinja_filter_id(const char *name);
int jinja_test_id(const char *name);
int jinja_global_id(const char *name);
int jinja_method_id(const char *name); /* any type's method name */
const char *jinja_builtin_name(int id);

struct jrt; /* evaluator state (jinja_eval.c) */

/* Call args after evaluation. */
struct jargs {
    struct jinja_value *pos;
    size_t n_pos;
    const char **kw_names;
    struct jinja_value *kw;
    size_t n_kw;
};

int jinja_apply_filter(struct jrt *rt, int id, struct jinja_value v, const struct jargs *args,
                       struct jinja_value *out);
int jinja_apply_test(struct jrt *rt, int id, struct jinja_value v, const struct jargs *args,
                     bool *out);
/* Call a builtin global (self NULL) or a method bound to self. */
int jinja_call_builtin(struct jrt *rt, int id, const struct jinja_value *self,
                       const struct jargs *args, struct jinja_value *out);
/* obj.name as a bound method when obj's type has it: returns true and fills *out. */
bool jinja_method_bind(struct jrt *rt, struct jinja_value obj, const char *name,
                       struct jinja_value *out);

/* Argument pos (positional index) or name (keyword); NULL when not given. */
const struct jinja_value *jargs_get(const struct jargs *a, size_t pos, const char *name);

// ---- Python str methods (jinja_str.c); results live in the arena ----

enum py_strip_mode { PY_STRIP_BOTH, PY_STRIP_LEFT, PY_STRIP_RIGHT };
/* s.strip(chars) / lstrip / rstrip; chars NULL = whitespace. Keeps the Markup flag. */
struct jinja_value py_strip(struct jinja_value s, const struct jinja_value *chars,
                            enum py_strip_mode mode);
/* s.split(sep, maxsplit) (sep NULL = whitespace runs); right = rsplit. sep must not be empty. */
struct jinja_value py_split(struct jarena *a, struct jinja_value s, const struct jinja_value *sep,
                            int64_t maxsplit, bool right);
struct jinja_value py_replace(struct jarena *a, struct jinja_value s, struct jinja_value old,
                              struct jinja_value new_, int64_t count);
struct jinja_value py_case(struct jarena *a, struct jinja_value s, int mode); /* 'u','l','c' */
struct jinja_value py_splitlines(struct jarena *a, struct jinja_value s, bool keepends);
int64_t py_find(struct jinja_value s, struct jinja_value sub, bool right); /* code points */
int64_t py_count(struct jinja_value s, struct jinja_value sub);

// ---- services of the evaluator used by builtins ----

struct jarena *jrt_arena(struct jrt *rt);
/* Record a runtime error (printf style); returns ERR_INVAL. */
int jrt_fail(struct jrt *rt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Python-style attribute / item access used by filters such as map(attribute=). */
int jrt_getattr(struct jrt *rt, struct jinja_value obj, const char *name, size_t n,
                struct jinja_value *out);
int jrt_getitem(struct jrt *rt, struct jinja_value obj, struct jinja_value key,
                struct jinja_value *out);
/* Call any callable value (macro, builtin). */
int jrt_call(struct jrt *rt, struct jinja_value fn, const struct jargs *args,
             struct jinja_value *out);
/* Error for using an undefined value (its name or hint); returns ERR_INVAL. */
int jrt_fail_undefined(struct jrt *rt, struct jinja_value v);
/* l op r for op in '+', '-', '*', '/', 'F' (//), '%', 'P' (**) (jinja_ops.c). */
int jrt_binop(struct jrt *rt, int op, struct jinja_value l, struct jinja_value r,
              struct jinja_value *out);
/* a < <= > >= b (op: JCMP_LT..JCMP_GE) with Python's rules. */
int jrt_compare_order(struct jrt *rt, struct jinja_value a, struct jinja_value b, int op,
                      bool *res);
/* fmt % args, Python printf-style formatting (jinja_format.c). */
int jrt_percent_format(struct jrt *rt, struct jinja_value fmt, struct jinja_value args,
                       struct jinja_value *out);
/* needle in hay (Python `in`). */
int jrt_contains(struct jrt *rt, struct jinja_value hay, struct jinja_value needle, bool *res);
/* Run the template with vars as the render context, appending to out. */
int jinja_eval_render(const struct jinja_template *t, struct jarena *a, const struct jv_dict *vars,
                      struct buf *out, struct jinja_error *err);
/* Materialise an iterable as a list (str -> chars, dict -> keys, undefined -> empty). */
int jrt_iterate(struct jrt *rt, struct jinja_value v, struct jv_list **out);

#endif
