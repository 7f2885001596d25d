/* gw_out: one request's output pipeline, token ids -> OpenAI deltas, built from the text
 * library: detok (incremental, UTF-8 safe) -> stop (stop strings never leak) -> reasoning
 * (<think> split) -> toolcall (<tool_call> blocks -> tool_calls). Streaming and non-streaming
 * responses both run through it, so they cannot differ. */
#ifndef GW_OUT_H
#define GW_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

struct gw_text;
struct detok;
struct stop;
struct reasoning;
struct toolcall;

#define GW_OUT_TOOL_EVS_MAX 32

/* One tool call's part of a delta: a start (id + name) and/or a piece of arguments. */
struct gw_out_tool_ev {
    int index;
    char id[64];        /* "" when not the start */
    char name[256];     /* "" when not the start */
    struct buf args; /* arguments JSON piece (may be empty) */
};

/* What one step produced (appended; the caller resets it after sending). */
struct gw_out_delta {
    struct buf reasoning;
    struct buf content;
    struct gw_out_tool_ev tools[GW_OUT_TOOL_EVS_MAX];
    int n_tools;
};

struct gw_out {
    const struct gw_text *text; /* NULL: each id is one byte of text (tests) */
    struct detok *detok;
    struct stop *stop;
    struct reasoning *rs; /* NULL: no reasoning split (completions) */
    struct toolcall *tc;  /* NULL: no tool parsing */
    bool stopped;         /* a stop string matched: no more output */
    int n_tokens;         /* completion tokens seen */
    int tools_max;        /* tool calls passed on (later ones are dropped); 0 = all. Set after
                             init: 1 for parallel_tool_calls false */
    int stop_after;       /* stop strings are looked for only from token stop_after + 1 on
                             (min_tokens, as vLLM); 0 = from the first. Set after init */
};

/* tools_json: the request's tools array as JSON text, or NULL for no tool parsing.
 * reasoning: split <think>; thinking: the prompt already opened <think>. 0 or ERR_INVAL. */
int gw_out_init(struct gw_out *o, const struct gw_text *text, const char *const *stop, int n_stop,
                bool reasoning, bool thinking, const char *tools_json, uint64_t seed);
void gw_out_deinit(struct gw_out *o);
void gw_out_delta_init(struct gw_out_delta *d);
void gw_out_delta_reset(struct gw_out_delta *d);
void gw_out_delta_deinit(struct gw_out_delta *d);
bool gw_out_delta_is_empty(const struct gw_out_delta *d);
/* Feed generated ids; appends what became final to d. Returns true when a stop string matched
 * (the caller aborts the request and finishes with "stop"). */
bool gw_out_feed(struct gw_out *o, const int32_t *ids, size_t n, struct gw_out_delta *d);
/* End of output: flush everything held back. */
void gw_out_flush(struct gw_out *o, struct gw_out_delta *d);
/* Index (in the stop array given to init) of the stop string that matched, or -1. */
int gw_out_stop_index(const struct gw_out *o);
/* Completed tool calls (after flush, at most tools_max), for non-streamed responses. */
int gw_out_tool_count(const struct gw_out *o);
int gw_out_tool_get(const struct gw_out *o, int i, const char **id, const char **name,
                    const char **arguments);

#endif
