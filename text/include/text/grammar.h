/* grammar: constrained decoding for JSON. A JSON Schema (supported subset, see grammar_compile) is
 * compiled into an immutable node graph; a grammar_state is a pushdown automaton over bytes that
 * accepts exactly the JSON texts the graph allows: no leading/trailing garbage, at most
 * GRAMMAR_WS_MAX whitespace bytes in a row, numbers of bounded length, object properties in schema
 * order, nesting at most GRAMMAR_DEPTH_MAX. The state is a plain struct: copy it to branch. */
#ifndef TEXT_GRAMMAR_H
#define TEXT_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GRAMMAR_DEPTH_MAX 32        // frames: one per open value (object key strings count one)
#define GRAMMAR_WS_MAX 4            // whitespace bytes in a row
#define GRAMMAR_PROPS_MAX 64        // properties of one object, values of one enum
#define GRAMMAR_DIGITS_MAX 16       // digits of an integer part or a fraction (3 for an exponent)
#define GRAMMAR_SCHEMA_DEPTH_MAX 24 // schema nesting (properties / items / anyOf levels)
#define GRAMMAR_NODES_MAX 8192      // compiled nodes of one schema

struct grammar;

/* Compile a JSON Schema (len bytes of JSON). Supported: type (object, array, string, number,
 * integer, boolean, null, or a list of them), properties, required, additionalProperties
 * (bool or schema), enum and const (strings, numbers, booleans, null), items, minItems, maxItems,
 * anyOf whose alternatives start with different bytes, and the annotations title, description,
 * $schema, default, examples, strict. {} is any JSON value; {"type":"object"} any object (the
 * json_object response format). At most GRAMMAR_SCHEMA_DEPTH_MAX levels of nesting and
 * GRAMMAR_NODES_MAX nodes. Anything else returns NULL with a one-line reason naming the
 * keyword and its JSON pointer in err ("unsupported keyword 'pattern' at /properties/a"). The
 * grammar is freed with grammar_destroy and is read-only afterwards (share it between threads). */
struct grammar *grammar_compile(const char *json, size_t len, char *err, size_t errlen);
void grammar_destroy(struct grammar *g);

struct grammar_frame {
    uint16_t node; // index of the schema node this value follows
    uint8_t st;    // sub-state; 0: value not started yet
    uint8_t aux;   // per kind: object flags, UTF-8 continuation bytes left
    uint16_t off;  // per kind: byte offset in a key / literal, hex digits seen
    uint16_t lim;  // string: allowed range of the next UTF-8 continuation byte (lo | hi << 8)
    uint32_t n;    // per kind: items so far, next property, digits so far
    uint64_t cand; // candidate keys / literals still matching (bit per index)
};

struct grammar_state {
    uint8_t depth;                             // frames in use
    uint8_t ws;                                // whitespace bytes in a row so far
    bool done;                                 // the top-level value is closed
    struct grammar_frame f[GRAMMAR_DEPTH_MAX]; // f[depth - 1] is the innermost value
};

/* Start state: a top-level value of g (whitespace may precede it). */
void grammar_state_init(struct grammar_state *s, const struct grammar *g);
/* Copy the frames in use only (cheaper than a struct copy). */
void grammar_state_copy(struct grammar_state *dst, const struct grammar_state *src);
/* Advance by one byte. false: the byte is not allowed here, and *s is then undefined (feed a copy
 * when that matters). */
bool grammar_feed(struct grammar_state *s, const struct grammar *g, uint8_t b);
/* grammar_feed over n bytes; false at the first byte refused. */
bool grammar_feed_bytes(struct grammar_state *s, const struct grammar *g, const void *p, size_t n);
/* The bytes so far form a complete value: the text may end here (EOS allowed). */
bool grammar_is_accepting(const struct grammar_state *s, const struct grammar *g);
/* Nothing more may follow: the text must end here. */
bool grammar_is_done(const struct grammar_state *s);
/* Inside a string's text, between characters: every byte string made of whole UTF-8 characters
 * without '"', '\\' or control bytes (grammar_is_string_neutral) is accepted here and leaves
 * the state as it is. */
bool grammar_in_string(const struct grammar_state *s, const struct grammar *g);
/* The bytes (n) are such a string-neutral run. */
bool grammar_is_string_neutral(const void *p, size_t n);
/* Inside a raw text value of tool-call markup (text/grammar_tools.h), between characters and
 * outside a possible terminator: every byte string that grammar_is_raw_neutral accepts is accepted
 * here and leads to such a state again. */
bool grammar_in_raw(const struct grammar_state *s, const struct grammar *g);
/* The bytes (n) are whole UTF-8 characters without '<' or control bytes (tab, LF, CR allowed). */
bool grammar_is_raw_neutral(const void *p, size_t n);

/* ---- string text, for token masks (text/tokmask.c) ----
 * While the innermost value is a string, the bytes it accepts up to its closing quote depend on
 * its text state only (between characters, after a backslash, k digits into \u, inside a UTF-8
 * sequence), not on where the string sits. */

#define GRAMMAR_STR_KEY_OPEN 1u // the text state right after an opening quote

enum grammar_str {
    GRAMMAR_STR_REFUSED, // a byte is refused before the string closes
    GRAMMAR_STR_OPEN,    // every byte read, the string still open
    GRAMMAR_STR_CLOSED,  // the string's closing quote was read
};

/* The innermost value is a string being read (its opening quote seen, not yet closed): its text
 * state as a nonzero key (equal keys accept equal bytes); 0 elsewhere. */
uint32_t grammar_str_key(const struct grammar_state *s, const struct grammar *g);
/* Read n bytes as a string's text from text state key. OPEN: all n read, *key_after is the text
 * state then; CLOSED: *used bytes read, the last one the closing quote; REFUSED also for a key
 * that grammar_str_key never returns. */
enum grammar_str grammar_str_scan(uint32_t key, const void *p, size_t n, size_t *used,
                                  uint32_t *key_after);
/* s is inside a string (grammar_str_key != 0): move it past that string's closing quote, as
 * grammar_feed does on the quote in the text state GRAMMAR_STR_KEY_OPEN. */
void grammar_str_close(struct grammar_state *s);
/* A superset of the bytes grammar_feed accepts next from s: bit (b & 63) of set[b >> 6]. Exact
 * enough between values to skip most bytes unfed; every byte where in doubt. */
void grammar_next_bytes(const struct grammar_state *s, const struct grammar *g, uint64_t set[4]);

#endif
