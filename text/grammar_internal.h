/* grammar_internal: the compiled node graph shared by grammar_compile.c and grammar.c. */
#ifndef TEXT_GRAMMAR_INTERNAL_H
#define TEXT_GRAMMAR_INTERNAL_H

#include "text/grammar.h"

enum gnode_kind {
    GNODE_OBJECT,  // props (schema order) or, without props, any keys with values of `extra`
    GNODE_ARRAY,   // items of node `items`, count in [min_items, max_items]
    GNODE_STRING,  // any JSON string (valid UTF-8, no surrogate \u escapes)
    GNODE_NUMBER,  // JSON number
    GNODE_INTEGER, // JSON number without fraction or exponent
    GNODE_LITERAL, // one of lits[] (JSON-encoded enum / const values, true, false, null)
    GNODE_UNION,   // alternative alt_of_byte[first byte]
    /* markup kinds (tool-call text, grammar_tools.c): no implicit whitespace before them; they
     * stay last (grammar.c dispatches kind >= GNODE_TEXT to its markup section) */
    GNODE_TEXT,   // exactly lits[0]; closes on its last byte
    GNODE_SEQ,    // seq[0..n_seq) one after the other (the last one replaces the frame)
    GNODE_TAGS,   // one of keys[] (full tag texts), then its prop_nodes[] value; see tags_once
    GNODE_RAW,    // text up to and including lits[0]; lits[1..] must not occur; valid UTF-8
    GNODE_REPEAT, // items, min_items..max_items times, whitespace before each (the root only)
};

struct gnode {
    enum gnode_kind kind;
    // object
    int n_props;
    char **keys;       // (n_props) JSON-encoded names without quotes
    size_t *key_lens;  // (n_props)
    int *prop_nodes;   // (n_props) value node of each property
    uint64_t required; // bit i: property i is required
    int extra;         // node of additional values when n_props == 0; -1: no keys
    // array
    int items; // node of the items
    uint32_t min_items, max_items;
    // literal
    int n_lits;
    char **lits;      // (n_lits) JSON text of each value
    size_t *lit_lens; // (n_lits)
    // union
    int16_t alt_of_byte[256]; // node starting with that byte; -1: none
    uint64_t alt_bytes[4];    // bit (b & 63) of word b >> 6: alt_of_byte[b] >= 0
    // markup (TEXT, RAW: lits; TAGS: keys, key_lens, prop_nodes, required, lits[0] the end tag)
    int n_seq;
    int *seq;       // (n_seq) SEQ children
    bool tags_once; // TAGS: any one key, then the frame becomes its node (no end tag); else
                    // keys in order, each at most once, required ones always, then lits[0]
};

struct grammar {
    struct gnode *nodes; // (n_nodes)
    int n_nodes, cap_nodes;
    int root;        // the top-level value
    int string_node; // a GNODE_STRING node (object keys without props)
    int any_node;    // any JSON value; -1 until needed
};

/* Compile schema s into g (grammar_compile's rules) and return its node, or -1 with a reason in
 * err; nodes added before a failure stay in g, unreferenced. */
struct cJSON;
int grammar_compile_into(struct grammar *g, const struct cJSON *s, char *err, size_t errlen);
/* A new node of kind in g (fields zeroed, -1 where -1 means none); returns its index. */
int grammar_node_new(struct grammar *g, enum gnode_kind kind);
/* Append a literal (a copy of text) to node id's lits. */
void grammar_node_lit_add(struct grammar *g, int id, const char *text);
/* The compilers' refusal: the formatted reason into err (errlen, when given); returns -1. */
int grammar_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
