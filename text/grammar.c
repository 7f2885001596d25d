/* grammar: the byte-level pushdown automaton over a compiled schema (grammar_internal.h). One
 * frame per open value; a frame in sub-state 0 waits for its value's first byte (after optional
 * whitespace) and, for a union, picks the alternative by that byte. Numbers and literals end
 * implicitly: a byte they refuse closes them (when complete) and goes on to the parent. */
#include "grammar_internal.h"

#include <assert.h>
#include <string.h>

enum { ST_PENDING = 0 };
enum { O_START = 1, O_KEYLIT, O_KEY, O_COLON, O_VALUE, O_AFTER, O_NEXT };
enum { A_START = 1, A_ITEM, A_AFTER };
enum { S_BODY = 1, S_ESC, S_HEX };
enum { N_MINUS = 1, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };
enum { L_BODY = 1 };

/* outcome of one byte offered to the innermost frame */
enum step {
    STEP_REJECT,  // not allowed
    STEP_OK,      // consumed
    STEP_WS,      // consumed as structural whitespace (counted against GRAMMAR_WS_MAX)
    STEP_CLOSE,   // consumed, and it closed the value
    STEP_ENDED,   // not consumed: the value ended before it; offer it to the parent
    STEP_DESCEND, // not consumed: a child frame was pushed; offer it to the child
};

static bool is_ws(uint8_t b)
{
    return b == ' ' || b == '\n' || b == '\t' || b == '\r';
}

static bool is_digit(uint8_t b)
{
    return b >= '0' && b <= '9';
}

static bool is_hex(uint8_t b)
{
    return is_digit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F');
}

void grammar_state_init(struct grammar_state *s, const struct grammar *g)
{
    s->depth = 1;
    s->ws = 0;
    s->done = false;
    memset(&s->f[0], 0, sizeof(s->f[0]));
    s->f[0].node = (uint16_t)g->root;
}

void grammar_state_copy(struct grammar_state *dst, const struct grammar_state *src)
{
    dst->depth = src->depth;
    dst->ws = src->ws;
    dst->done = src->done;
    memcpy(dst->f, src->f, sizeof(src->f[0]) * src->depth);
}

bool grammar_is_done(const struct grammar_state *s)
{
    return s->done;
}

static bool push(struct grammar_state *s, int node, uint8_t st)
{
    if (s->depth == GRAMMAR_DEPTH_MAX)
        return false;
    struct grammar_frame *f = &s->f[s->depth++];
    memset(f, 0, sizeof(*f));
    f->node = (uint16_t)node;
    f->st = st;
    return true;
}

// ---- objects ----

/* candidate properties for the next key: from f->n up to the first required one */
static uint64_t key_cands(const struct gnode *o, uint32_t next)
{
    uint64_t m = 0;
    for (int j = (int)next; j < o->n_props; j++) {
        m |= (uint64_t)1 << j;
        if (o->required >> j & 1)
            break;
    }
    return m;
}

static bool obj_may_close(const struct gnode *o, const struct grammar_frame *f)
{
    return o->n_props == 0 || f->n >= 64 || (o->required >> f->n) == 0;
}

static bool obj_may_add(const struct gnode *o, const struct grammar_frame *f)
{
    return o->n_props ? (int)f->n < o->n_props : o->extra >= 0;
}

static enum step obj_begin_key(struct grammar_state *s, const struct grammar *g,
                               struct grammar_frame *f, const struct gnode *o)
{
    if (o->n_props) {
        f->cand = key_cands(o, f->n);
        f->off = 0;
        f->st = O_KEYLIT;
        return STEP_OK;
    }
    f->st = O_KEY;
    return push(s, g->string_node, S_BODY) ? STEP_OK : STEP_REJECT;
}

static enum step obj_keylit(struct grammar_frame *f, const struct gnode *o, uint8_t b)
{
    uint64_t keep = 0;
    for (int j = 0; j < o->n_props; j++)
        if ((f->cand >> j & 1) && f->off < o->key_lens[j] && (uint8_t)o->keys[j][f->off] == b)
            keep |= (uint64_t)1 << j;
    if (keep) { // a '"' inside an encoded key is escaped, so no key ends where another goes on
        f->cand = keep;
        f->off++;
        return STEP_OK;
    }
    if (b != '"')
        return STEP_REJECT;
    for (int j = 0; j < o->n_props; j++)
        if ((f->cand >> j & 1) && o->key_lens[j] == f->off) {
            f->n = (uint32_t)j + 1;
            f->st = O_COLON;
            return STEP_OK;
        }
    return STEP_REJECT;
}

static enum step obj_step(struct grammar_state *s, const struct grammar *g, uint8_t b)
{
    struct grammar_frame *f = &s->f[s->depth - 1];
    const struct gnode *o = &g->nodes[f->node];
    if (f->st == O_KEYLIT)
        return obj_keylit(f, o, b);
    if (is_ws(b))
        return f->st == O_START || f->st == O_NEXT || f->st == O_COLON || f->st == O_AFTER
                   ? STEP_WS
                   : STEP_REJECT;
    switch (f->st) {
    case O_START:
    case O_NEXT:
        if (b == '"' && obj_may_add(o, f))
            return obj_begin_key(s, g, f, o);
        if (b == '}' && f->st == O_START && obj_may_close(o, f))
            return STEP_CLOSE;
        return STEP_REJECT;
    case O_COLON:
        if (b != ':')
            return STEP_REJECT;
        f->st = O_VALUE;
        return push(s, o->n_props ? o->prop_nodes[f->n - 1] : o->extra, ST_PENDING) ? STEP_OK
                                                                                    : STEP_REJECT;
    case O_AFTER:
        if (b == ',' && obj_may_add(o, f)) {
            f->st = O_NEXT;
            return STEP_OK;
        }
        if (b == '}' && obj_may_close(o, f))
            return STEP_CLOSE;
        return STEP_REJECT;
    }
    return STEP_REJECT;
}

// ---- arrays ----

static enum step arr_step(struct grammar_state *s, const struct grammar *g, uint8_t b)
{
    struct grammar_frame *f = &s->f[s->depth - 1];
    const struct gnode *a = &g->nodes[f->node];
    if (is_ws(b))
        return f->st == A_START || f->st == A_AFTER ? STEP_WS : STEP_REJECT;
    if (f->st == A_START) {
        if (b == ']')
            return a->min_items == 0 ? STEP_CLOSE : STEP_REJECT;
        if (a->max_items == 0)
            return STEP_REJECT;
        f->n = 1;
        f->st = A_ITEM;
        return push(s, a->items, ST_PENDING) ? STEP_DESCEND : STEP_REJECT;
    }
    if (f->st == A_AFTER) {
        if (b == ',' && f->n < a->max_items) {
            f->n++;
            f->st = A_ITEM;
            return push(s, a->items, ST_PENDING) ? STEP_OK : STEP_REJECT;
        }
        if (b == ']' && f->n >= a->min_items)
            return STEP_CLOSE;
    }
    return STEP_REJECT;
}

// ---- strings ----

static void utf8_expect(struct grammar_frame *f, int more, uint8_t lo, uint8_t hi)
{
    f->aux = (uint8_t)more;
    f->lim = (uint16_t)(lo | hi << 8);
}

/* a byte >= 0x80 that starts a UTF-8 sequence (RFC 3629: no overlongs, surrogates or code points
 * past U+10FFFF): expect its continuation bytes */
static enum step utf8_lead(struct grammar_frame *f, uint8_t b)
{
    if (b >= 0xc2 && b <= 0xdf)
        utf8_expect(f, 1, 0x80, 0xbf);
    else if (b == 0xe0)
        utf8_expect(f, 2, 0xa0, 0xbf);
    else if (b == 0xed)
        utf8_expect(f, 2, 0x80, 0x9f);
    else if (b >= 0xe1 && b <= 0xef)
        utf8_expect(f, 2, 0x80, 0xbf);
    else if (b == 0xf0)
        utf8_expect(f, 3, 0x90, 0xbf);
    else if (b >= 0xf1 && b <= 0xf3)
        utf8_expect(f, 3, 0x80, 0xbf);
    else if (b == 0xf4)
        utf8_expect(f, 3, 0x80, 0x8f);
    else
        return STEP_REJECT;
    return STEP_OK;
}

static enum step str_step(struct grammar_frame *f, uint8_t b)
{
    if (f->st == S_ESC) {
        if (b == 'u') {
            f->st = S_HEX;
            f->off = 0;
            f->n = 0;
            return STEP_OK;
        }
        if (!strchr("\"\\/bfnrt", b) || b == 0)
            return STEP_REJECT;
        f->st = S_BODY;
        return STEP_OK;
    }
    if (f->st == S_HEX) {
        if (!is_hex(b))
            return STEP_REJECT;
        if (f->off == 0)
            f->n = b == 'd' || b == 'D';
        else if (f->off == 1 && f->n && (!is_digit(b) || b >= '8'))
            return STEP_REJECT; // \uD800-\uDFFF: no surrogates (cJSON refuses lone ones)
        if (++f->off == 4)
            f->st = S_BODY;
        return STEP_OK;
    }
    if (f->aux) {
        if (b < (f->lim & 0xff) || b > (f->lim >> 8))
            return STEP_REJECT;
        utf8_expect(f, f->aux - 1, 0x80, 0xbf);
        return STEP_OK;
    }
    if (b == '"')
        return STEP_CLOSE;
    if (b == '\\') {
        f->st = S_ESC;
        return STEP_OK;
    }
    if (b < 0x20)
        return STEP_REJECT;
    if (b < 0x80)
        return STEP_OK;
    return utf8_lead(f, b);
}

// ---- numbers and literals ----

static bool num_complete(const struct grammar_frame *f)
{
    return f->st == N_ZERO || f->st == N_INT || f->st == N_FRAC || f->st == N_EXP;
}

static enum step num_to(struct grammar_frame *f, uint8_t st, uint32_t n)
{
    f->st = st;
    f->n = n;
    return STEP_OK;
}

static enum step num_step(struct grammar_frame *f, bool integer, uint8_t b)
{
    bool d = is_digit(b);
    switch (f->st) {
    case ST_PENDING:
    case N_MINUS:
        if (b == '-' && f->st == ST_PENDING)
            return num_to(f, N_MINUS, 0);
        if (d)
            return num_to(f, b == '0' ? N_ZERO : N_INT, 1);
        return STEP_REJECT;
    case N_ZERO:
    case N_INT:
        if (d && f->st == N_INT && f->n < GRAMMAR_DIGITS_MAX)
            return num_to(f, N_INT, f->n + 1);
        if (b == '.' && !integer)
            return num_to(f, N_DOT, 0);
        if ((b == 'e' || b == 'E') && !integer)
            return num_to(f, N_E, 0);
        break;
    case N_DOT:
    case N_FRAC:
        if (d && f->n < GRAMMAR_DIGITS_MAX)
            return num_to(f, N_FRAC, f->n + 1);
        if ((b == 'e' || b == 'E') && f->st == N_FRAC)
            return num_to(f, N_E, 0);
        break;
    case N_E:
    case N_ESIGN:
    case N_EXP:
        if ((b == '+' || b == '-') && f->st == N_E)
            return num_to(f, N_ESIGN, 0);
        if (d && f->n < 3)
            return num_to(f, N_EXP, f->n + 1);
        break;
    }
    return num_complete(f) ? STEP_ENDED : STEP_REJECT;
}

static bool lit_complete(const struct grammar_frame *f, const struct gnode *l)
{
    for (int j = 0; j < l->n_lits; j++)
        if ((f->cand >> j & 1) && l->lit_lens[j] == f->off)
            return true;
    return false;
}

static enum step lit_step(struct grammar_frame *f, const struct gnode *l, uint8_t b)
{
    uint64_t cand = f->st == ST_PENDING ? ~(uint64_t)0 : f->cand;
    uint64_t keep = 0;
    for (int j = 0; j < l->n_lits; j++)
        if ((cand >> j & 1) && f->off < l->lit_lens[j] && (uint8_t)l->lits[j][f->off] == b)
            keep |= (uint64_t)1 << j;
    if (keep) {
        f->st = L_BODY;
        f->cand = keep;
        f->off++;
        return STEP_OK;
    }
    return f->st != ST_PENDING && lit_complete(f, l) ? STEP_ENDED : STEP_REJECT;
}

static enum step markup_step(struct grammar_state *s, const struct grammar *g, uint8_t b);

// ---- dispatch ----

static enum step start_step(struct grammar_frame *f, const struct grammar *g, uint8_t b)
{
    if (is_ws(b))
        return STEP_WS;
    const struct gnode *n = &g->nodes[f->node];
    if (n->kind == GNODE_UNION) {
        if (n->alt_of_byte[b] < 0)
            return STEP_REJECT;
        f->node = (uint16_t)n->alt_of_byte[b];
        n = &g->nodes[f->node];
    }
    switch (n->kind) {
    case GNODE_OBJECT:
        return b == '{' ? num_to(f, O_START, 0) : STEP_REJECT;
    case GNODE_ARRAY:
        return b == '[' ? num_to(f, A_START, 0) : STEP_REJECT;
    case GNODE_STRING:
        return b == '"' ? num_to(f, S_BODY, 0) : STEP_REJECT;
    case GNODE_NUMBER:
    case GNODE_INTEGER:
        return num_step(f, n->kind == GNODE_INTEGER, b);
    case GNODE_LITERAL:
        return lit_step(f, n, b);
    case GNODE_UNION:
        break; // unions are flattened at compile time
    case GNODE_TEXT:
    case GNODE_SEQ:
    case GNODE_TAGS:
    case GNODE_RAW:
    case GNODE_REPEAT:
        break; // markup_step
    }
    return STEP_REJECT;
}

static enum step frame_step(struct grammar_state *s, const struct grammar *g, uint8_t b)
{
    struct grammar_frame *f = &s->f[s->depth - 1];
    if (g->nodes[f->node].kind >= GNODE_TEXT)
        return markup_step(s, g, b);
    if (f->st == ST_PENDING)
        return start_step(f, g, b);
    const struct gnode *n = &g->nodes[f->node];
    switch (n->kind) {
    case GNODE_OBJECT:
        return obj_step(s, g, b);
    case GNODE_ARRAY:
        return arr_step(s, g, b);
    case GNODE_STRING:
        return str_step(f, b);
    case GNODE_NUMBER:
        return num_step(f, false, b);
    case GNODE_INTEGER:
        return num_step(f, true, b);
    case GNODE_LITERAL:
        return lit_step(f, n, b);
    case GNODE_UNION:
    case GNODE_TEXT:
    case GNODE_SEQ:
    case GNODE_TAGS:
    case GNODE_RAW:
    case GNODE_REPEAT:
        break;
    }
    return STEP_REJECT;
}

/* the innermost value is complete: pop it and move its parent on */
static void close_top(struct grammar_state *s)
{
    if (--s->depth == 0) {
        s->done = true;
        return;
    }
    struct grammar_frame *p = &s->f[s->depth - 1];
    if (p->st == O_KEY)
        p->st = O_COLON;
    else if (p->st == O_VALUE)
        p->st = O_AFTER;
    else if (p->st == A_ITEM)
        p->st = A_AFTER;
}

bool grammar_feed(struct grammar_state *s, const struct grammar *g, uint8_t b)
{
    for (;;) {
        if (s->done)
            return false;
        switch (frame_step(s, g, b)) {
        case STEP_REJECT:
            return false;
        case STEP_WS:
            return ++s->ws <= GRAMMAR_WS_MAX;
        case STEP_OK:
            s->ws = 0;
            return true;
        case STEP_CLOSE:
            s->ws = 0;
            close_top(s);
            return true;
        case STEP_ENDED:
            close_top(s);
            break;
        case STEP_DESCEND:
            break;
        }
    }
}

bool grammar_feed_bytes(struct grammar_state *s, const struct grammar *g, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (!grammar_feed(s, g, b[i]))
            return false;
    return true;
}

static bool markup_is_accepting(const struct grammar_frame *f, const struct gnode *n);

bool grammar_is_accepting(const struct grammar_state *s, const struct grammar *g)
{
    if (s->done)
        return true;
    if (s->depth != 1)
        return false;
    const struct grammar_frame *f = &s->f[0];
    const struct gnode *n = &g->nodes[f->node];
    if (f->st == ST_PENDING)
        return false;
    if (n->kind == GNODE_REPEAT)
        return markup_is_accepting(f, n);
    if (n->kind == GNODE_NUMBER || n->kind == GNODE_INTEGER)
        return num_complete(f);
    return n->kind == GNODE_LITERAL && lit_complete(f, n);
}

bool grammar_in_string(const struct grammar_state *s, const struct grammar *g)
{
    if (s->done || s->depth == 0)
        return false;
    const struct grammar_frame *f = &s->f[s->depth - 1];
    return g->nodes[f->node].kind == GNODE_STRING && f->st == S_BODY && f->aux == 0;
}

bool grammar_is_string_neutral(const void *p, size_t n)
{
    struct grammar_frame f = {.st = S_BODY};
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] == '"' || b[i] == '\\' || str_step(&f, b[i]) != STEP_OK)
            return false;
    return n > 0 && f.aux == 0;
}

// ---- string text, for token masks ----

static_assert(GRAMMAR_STR_KEY_OPEN == S_BODY, "the key of a string just opened");

/* the fields of a string frame that its next bytes depend on, packed: st (2 bits), then per
 * sub-state aux (2 bits) and lim (bits 8-23) in the body, off (2 bits) and the surrogate flag
 * (bit 4, read only at off 1) in a \u escape; nothing after a backslash */
static uint32_t str_key(const struct grammar_frame *f)
{
    if (f->st == S_ESC)
        return S_ESC;
    if (f->st == S_HEX)
        return S_HEX | (uint32_t)(f->off & 3) << 2 | (f->off == 1 ? f->n & 1 : 0) << 4;
    return S_BODY | (uint32_t)(f->aux & 3) << 2 | (f->aux ? (uint32_t)f->lim << 8 : 0);
}

static bool str_unkey(struct grammar_frame *f, uint32_t key)
{
    memset(f, 0, sizeof(*f));
    f->st = (uint8_t)(key & 3);
    if (f->st == S_HEX) {
        f->off = (uint16_t)(key >> 2 & 3);
        f->n = key >> 4 & 1;
    } else if (f->st == S_BODY) {
        f->aux = (uint8_t)(key >> 2 & 3);
        f->lim = (uint16_t)(key >> 8);
    }
    return f->st != ST_PENDING && str_key(f) == key;
}

uint32_t grammar_str_key(const struct grammar_state *s, const struct grammar *g)
{
    if (s->done || s->depth == 0)
        return 0;
    const struct grammar_frame *f = &s->f[s->depth - 1];
    if (g->nodes[f->node].kind != GNODE_STRING || f->st == ST_PENDING)
        return 0;
    return str_key(f);
}

enum grammar_str grammar_str_scan(uint32_t key, const void *p, size_t n, size_t *used,
                                  uint32_t *key_after)
{
    struct grammar_frame f;
    if (!str_unkey(&f, key))
        return GRAMMAR_STR_REFUSED;
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        enum step r = str_step(&f, b[i]);
        if (r == STEP_CLOSE) {
            *used = i + 1;
            return GRAMMAR_STR_CLOSED;
        }
        if (r != STEP_OK)
            return GRAMMAR_STR_REFUSED;
    }
    *used = n;
    *key_after = str_key(&f);
    return GRAMMAR_STR_OPEN;
}

void grammar_str_close(struct grammar_state *s)
{
    s->ws = 0;
    close_top(s);
}

// ---- next bytes, for token masks ----

static void set_add(uint64_t set[4], uint8_t b)
{
    set[b >> 6] |= (uint64_t)1 << (b & 63);
}

static void set_ws(uint64_t set[4])
{
    set_add(set, ' ');
    set_add(set, '\n');
    set_add(set, '\t');
    set_add(set, '\r');
}

static void set_all(uint64_t set[4])
{
    memset(set, 0xff, sizeof(uint64_t) * 4);
}

/* the first bytes of a value of node */
static void value_first(const struct grammar *g, int node, uint64_t set[4])
{
    const struct gnode *n = &g->nodes[node];
    switch (n->kind) {
    case GNODE_OBJECT:
        set_add(set, '{');
        return;
    case GNODE_ARRAY:
        set_add(set, '[');
        return;
    case GNODE_STRING:
        set_add(set, '"');
        return;
    case GNODE_NUMBER:
    case GNODE_INTEGER:
        set_add(set, '-');
        for (uint8_t d = '0'; d <= '9'; d++)
            set_add(set, d);
        return;
    case GNODE_LITERAL:
        for (int j = 0; j < n->n_lits; j++)
            if (n->lit_lens[j])
                set_add(set, (uint8_t)n->lits[j][0]);
        return;
    case GNODE_UNION:
        for (int w = 0; w < 4; w++)
            set[w] |= n->alt_bytes[w];
        return;
    default:
        break;
    }
    set_all(set);
}

/* a number or literal that may end: the bytes its parent takes after a value */
static void after_value(const struct grammar_state *s, const struct grammar *g, uint64_t set[4])
{
    if (s->depth < 2)
        return; // the text ends with the top-level value
    enum gnode_kind k = g->nodes[s->f[s->depth - 2].node].kind;
    if (k != GNODE_OBJECT && k != GNODE_ARRAY) {
        set_all(set);
        return;
    }
    set_ws(set);
    set_add(set, ',');
    set_add(set, '}');
    set_add(set, ']');
}

void grammar_next_bytes(const struct grammar_state *s, const struct grammar *g, uint64_t set[4])
{
    memset(set, 0, sizeof(uint64_t) * 4);
    if (s->done || s->depth == 0)
        return;
    const struct grammar_frame *f = &s->f[s->depth - 1];
    const struct gnode *n = &g->nodes[f->node];
    if (f->st == ST_PENDING) {
        set_ws(set);
        value_first(g, f->node, set);
        return;
    }
    switch (n->kind) {
    case GNODE_OBJECT:
        if (f->st == O_START || f->st == O_NEXT || f->st == O_COLON || f->st == O_AFTER) {
            set_ws(set);
            set_add(set, f->st == O_COLON ? ':' : f->st == O_AFTER ? ',' : '"');
            if (f->st == O_START || f->st == O_AFTER)
                set_add(set, '}');
            return;
        }
        break;
    case GNODE_ARRAY:
        if (f->st == A_START || f->st == A_AFTER) {
            set_ws(set);
            set_add(set, ']');
            if (f->st == A_START)
                value_first(g, n->items, set);
            else
                set_add(set, ',');
            return;
        }
        break;
    case GNODE_NUMBER:
    case GNODE_INTEGER:
        for (uint8_t d = '0'; d <= '9'; d++)
            set_add(set, d);
        set_add(set, '.');
        set_add(set, 'e');
        set_add(set, 'E');
        set_add(set, '+');
        set_add(set, '-');
        after_value(s, g, set);
        return;
    case GNODE_LITERAL:
        for (int j = 0; j < n->n_lits; j++)
            if ((f->cand >> j & 1) && f->off < n->lit_lens[j])
                set_add(set, (uint8_t)n->lits[j][f->off]);
        after_value(s, g, set);
        return;
    default:
        break;
    }
    set_all(set);
}

// ---- markup: tool-call text (grammar_tools.c) ----
/* Sub-states of the markup kinds, apart from the ones close_top moves on (O_KEY, O_VALUE, A_ITEM):
 * a markup frame that is on top again in M_CHILD knows that its child is complete. */
enum { M_BODY = 16, M_CHILD, M_AFTER };

/* the frame becomes a pending value of node */
static void become(struct grammar_frame *f, int node)
{
    memset(f, 0, sizeof(*f));
    f->node = (uint16_t)node;
}

static uint64_t low_bits(int n)
{
    return n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
}

static enum step text_step(struct grammar_frame *f, const struct gnode *t, uint8_t b)
{
    if (f->off >= t->lit_lens[0] || (uint8_t)t->lits[0][f->off] != b)
        return STEP_REJECT;
    f->st = M_BODY;
    return ++f->off == t->lit_lens[0] ? STEP_CLOSE : STEP_OK;
}

static enum step seq_step(struct grammar_state *s, struct grammar_frame *f, const struct gnode *q)
{
    uint32_t i = f->st == ST_PENDING ? 0 : f->n + 1;
    if ((int)i >= q->n_seq - 1) { // the last child takes the frame's place
        become(f, q->seq[q->n_seq - 1]);
        return STEP_DESCEND;
    }
    f->n = i;
    f->st = M_CHILD;
    return push(s, q->seq[i], ST_PENDING) ? STEP_DESCEND : STEP_REJECT;
}

/* keys (and the end tag) matched byte by byte; a complete key starts its value */
static enum step tags_step(struct grammar_state *s, struct grammar_frame *f, const struct gnode *t,
                           uint8_t b)
{
    if (f->st != M_BODY) { // not started, or the previous value is complete
        f->cand = t->tags_once ? low_bits(t->n_props) : key_cands(t, f->n);
        f->aux = !t->tags_once && t->n_lits > 0 && (f->n >= 64 || (t->required >> f->n) == 0);
        f->off = 0;
        f->st = M_BODY;
    }
    uint64_t keep = 0;
    for (int j = 0; j < t->n_props; j++)
        if ((f->cand >> j & 1) && f->off < t->key_lens[j] && (uint8_t)t->keys[j][f->off] == b)
            keep |= (uint64_t)1 << j;
    bool end = f->aux && f->off < t->lit_lens[0] && (uint8_t)t->lits[0][f->off] == b;
    if (!keep && !end)
        return STEP_REJECT;
    f->cand = keep;
    f->aux = end;
    f->off++;
    if (end && f->off == t->lit_lens[0])
        return STEP_CLOSE;
    for (int j = 0; j < t->n_props; j++) {
        if (!(keep >> j & 1) || t->key_lens[j] != f->off)
            continue;
        if (t->prop_nodes[j] < 0)
            return STEP_CLOSE;
        if (t->tags_once) {
            become(f, t->prop_nodes[j]);
            return STEP_OK;
        }
        f->n = (uint32_t)j + 1;
        f->st = M_CHILD;
        return push(s, t->prop_nodes[j], ST_PENDING) ? STEP_OK : STEP_REJECT;
    }
    return STEP_OK;
}

/* a byte of raw text outside a terminator: no control bytes but tab and newlines, valid UTF-8 */
static enum step raw_char(struct grammar_frame *f, uint8_t b)
{
    if (b < 0x20)
        return b == '\n' || b == '\t' || b == '\r' ? STEP_OK : STEP_REJECT;
    if (b < 0x80)
        return STEP_OK;
    return utf8_lead(f, b);
}

/* Every lit starts with the same byte, found nowhere else in them (grammar_tools.c builds them
 * so): a failed partial match can only restart at the byte that failed it. */
static enum step raw_step(struct grammar_frame *f, const struct gnode *r, uint8_t b)
{
    f->st = M_BODY;
    if (f->aux) {
        if (b < (f->lim & 0xff) || b > (f->lim >> 8))
            return STEP_REJECT;
        utf8_expect(f, f->aux - 1, 0x80, 0xbf);
        return STEP_OK;
    }
    if (f->off) {
        uint64_t keep = 0;
        for (int j = 0; j < r->n_lits; j++)
            if ((f->cand >> j & 1) && f->off < r->lit_lens[j] && (uint8_t)r->lits[j][f->off] == b)
                keep |= (uint64_t)1 << j;
        if (keep) {
            f->cand = keep;
            f->off++;
            for (int j = 0; j < r->n_lits; j++)
                if ((keep >> j & 1) && r->lit_lens[j] == f->off)
                    return j == 0 ? STEP_CLOSE : STEP_REJECT;
            return STEP_OK;
        }
        f->off = 0;
    }
    if (b == (uint8_t)r->lits[0][0]) {
        f->off = 1;
        f->cand = low_bits(r->n_lits);
        return STEP_OK;
    }
    return raw_char(f, b);
}

/* the root: whitespace, then an item, up to max_items times, then whitespace; it never ends by
 * itself */
static enum step repeat_step(struct grammar_state *s, struct grammar_frame *f,
                             const struct gnode *r, uint8_t b)
{
    if (is_ws(b))
        return STEP_WS;
    if (f->st == M_AFTER && f->n >= r->max_items)
        return STEP_REJECT;
    f->n = f->st == M_AFTER ? f->n + 1 : 1;
    f->st = M_AFTER;
    return push(s, r->items, ST_PENDING) ? STEP_DESCEND : STEP_REJECT;
}

static enum step markup_step(struct grammar_state *s, const struct grammar *g, uint8_t b)
{
    struct grammar_frame *f = &s->f[s->depth - 1];
    const struct gnode *n = &g->nodes[f->node];
    switch (n->kind) {
    case GNODE_TEXT:
        return text_step(f, n, b);
    case GNODE_SEQ:
        return seq_step(s, f, n);
    case GNODE_TAGS:
        return tags_step(s, f, n, b);
    case GNODE_RAW:
        return raw_step(f, n, b);
    case GNODE_REPEAT:
        return repeat_step(s, f, n, b);
    default:
        return STEP_REJECT;
    }
}

/* after an item (and at most GRAMMAR_WS_MAX whitespace bytes), with enough items */
static bool markup_is_accepting(const struct grammar_frame *f, const struct gnode *n)
{
    return f->st == M_AFTER && f->n >= n->min_items;
}

bool grammar_in_raw(const struct grammar_state *s, const struct grammar *g)
{
    if (s->done || s->depth == 0)
        return false;
    const struct grammar_frame *f = &s->f[s->depth - 1];
    const struct gnode *n = &g->nodes[f->node];
    bool pending = f->st == ST_PENDING; // a sequence not started yet starts with its first child
    while (pending && n->kind == GNODE_SEQ)
        n = &g->nodes[n->seq[0]];
    return n->kind == GNODE_RAW && (pending || (f->off == 0 && f->aux == 0)) &&
           n->lits[0][0] == '<';
}

bool grammar_is_raw_neutral(const void *p, size_t n)
{
    struct grammar_frame f = {.st = M_BODY};
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        if (f.aux) {
            if (b[i] < (f.lim & 0xff) || b[i] > (f.lim >> 8))
                return false;
            utf8_expect(&f, f.aux - 1, 0x80, 0xbf);
        } else if (b[i] == '<' || raw_char(&f, b[i]) != STEP_OK) {
            return false;
        }
    }
    return n > 0 && f.aux == 0;
}
