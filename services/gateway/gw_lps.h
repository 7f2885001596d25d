/* gw_lps: one choice's completion-token log probabilities (what the worker sent per token) and
 * their two OpenAI shapes: chat ({"content":[{token, logprob, bytes, top_logprobs}]}) and legacy
 * completions (tokens, token_logprobs, top_logprobs, text_offset in characters). */
#ifndef GW_LPS_H
#define GW_LPS_H

#include <stddef.h>
#include <stdint.h>

#include "gw_req.h"

struct cJSON;
struct gw_text;
struct Tern__TokenLogprob;

/* one completion token's log probability and its best alternatives */
struct gw_lps_entry {
    int32_t id;
    float logprob;
    int n_top;
    int32_t top_ids[GW_REQ_TOP_LOGPROBS_MAX];
    float top_lps[GW_REQ_TOP_LOGPROBS_MAX];
};

struct gw_lps {
    struct gw_lps_entry *v; /* (n) in completion order (malloc'd) */
    size_t n, cap;
    size_t sent;   /* streamed: entries already attached to a chunk */
    size_t offset; /* completions: text_offset of the next entry, characters */
};

/* Append n tokens (ids) with their logprobs (lps, n_lps of them; a missing one reads as
 * logprob 0 without alternatives), keeping at most top_max alternatives each. */
void gw_lps_add(struct gw_lps *l, const uint32_t *ids, size_t n,
                struct Tern__TokenLogprob *const *lps, size_t n_lps, int top_max);
/* Entries [from, to) in the chat shape. Caller frees with cJSON_Delete. */
struct cJSON *gw_lps_chat_json(const struct gw_lps *l, const struct gw_text *text, size_t from,
                               size_t to);
/* Entries [from, to) in the completions shape; advances l->offset (call in order). */
struct cJSON *gw_lps_completion_json(struct gw_lps *l, const struct gw_text *text, size_t from,
                                     size_t to);
/* Free the entries (the struct itself is the caller's); the zeroed struct is empty. */
void gw_lps_deinit(struct gw_lps *l);

#endif
