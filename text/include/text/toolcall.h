/* toolcall: turns tool-call markup in a content stream into OpenAI tool_calls deltas.
 *
 * Formats, detected per <tool_call> block (no option needed; "\n" = newline):
 *   qwen3_coder  <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n...
 *                </function>\n</tool_call>
 *   hermes       <tool_call>{"name": "NAME", "arguments": {...}}</tool_call>
 * Several blocks per turn become tool calls 0, 1, 2 ... each with an id "call_" + 24 hex digits
 * derived from the seed given at create (so a request can reproduce its ids).
 * qwen3_coder parameter values (one leading and one trailing newline removed) are typed by the
 * tool's JSON schema from the request's "tools" array: integer/number/boolean/null/object/array
 * values that parse as that type are emitted as JSON values, everything else as a JSON string.
 * Arguments stream per parameter: '{"k": v', ', "k2": v2', ..., '}'. Values of plain-string
 * parameters (schema type "string", or no schema) stream as they arrive ('"k": "' first, then
 * escaped chunks, then '"'); a truncated string value is closed at the end of the stream, a
 * truncated typed value is dropped. Hermes arguments come in one piece when the block closes.
 * Partial tags are held back until they resolve; text that only looked like a tag prefix is
 * released as content. Whitespace just before a <tool_call>, right after a </tool_call> and at the
 * end of a turn that made tool calls is dropped. A block that cannot be parsed (bad JSON, no
 * function name) is dropped; raw markup never reaches content. The events for a given text do not
 * depend on how the text is split into deltas. */
#ifndef TEXT_TOOLCALL_H
#define TEXT_TOOLCALL_H

#include <stddef.h>
#include <stdint.h>

struct toolcall;

enum toolcall_event_type {
    TOOLCALL_EVENT_CONTENT, /* text: plain content */
    TOOLCALL_EVENT_START,   /* index, id, name: a new tool call */
    TOOLCALL_EVENT_ARGS,    /* index, text: the next piece of the arguments JSON string */
    TOOLCALL_EVENT_END,     /* index: arguments complete */
};

struct toolcall_event {
    enum toolcall_event_type type;
    int index;        /* tool call index (START/ARGS/END) */
    const char *text; /* CONTENT/ARGS: not NUL-terminated, see len */
    size_t len;
    const char *id;   /* START: NUL-terminated */
    const char *name; /* START: NUL-terminated */
};

/* tools_json: the request's "tools" array as JSON text (OpenAI shape, or bare {name, parameters}
 * objects); may be NULL (every value is then a string). Returns NULL if tools_json is not valid
 * JSON. seed: id derivation. */
struct toolcall *toolcall_create(const char *tools_json, uint64_t seed);
void toolcall_destroy(struct toolcall *tc);

/* Feed a content delta. *ev receives an array of *n_ev events (owned by tc, valid until the next
 * call). Consecutive CONTENT events may occur. */
void toolcall_feed(struct toolcall *tc, const char *text, size_t len,
                   const struct toolcall_event **ev, size_t *n_ev);
/* End of stream: releases held-back content and closes an unterminated qwen3_coder call. */
void toolcall_flush(struct toolcall *tc, const struct toolcall_event **ev, size_t *n_ev);

/* Completed calls so far (for non-streamed responses): count, and the i-th call's fields
 * (NUL-terminated, owned by tc). Returns -1 for a bad index. */
int toolcall_count(const struct toolcall *tc);
int toolcall_get(const struct toolcall *tc, int i, const char **id, const char **name,
                 const char **arguments);

#endif
