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
};

struct grammar {
    struct gnode *nodes; // (n_nodes)
    int n_nodes, cap_nodes;
    int root;        // the top-level value
    int string_node; // a GNODE_STRING node (object keys without props)
    int any_node;    // any JSON value; -1 until needed
};

#endif
