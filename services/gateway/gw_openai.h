/* gw_openai: the generation endpoints (POST /v1/chat/completions, /v1/completions; through a
 * sink, POST /v1/responses) and POST /tokenize, POST /detokenize. Rendering and tokenization
 * run on the libuv threadpool; everything else on the loop thread. */
#ifndef GW_OPENAI_H
#define GW_OPENAI_H

#include "gw_req.h"

struct gw;
struct gw_exch;
struct gw_out;
struct gw_out_delta;

/* The finished output of a request run through a sink. */
struct gw_openai_result {
    const struct gw_req *req; /* as parsed, defaults applied, max_tokens filled */
    const char *finish;       /* "stop", "length", "tool_calls" or "abort" */
    uint32_t prompt_tokens;
    uint32_t completion_tokens;
    const struct gw_out *out; /* the output pipeline: gw_out_tool_count/get */
};

/* Another response shape over the chat generation path (POST /v1/responses): the request is
 * parsed, rendered, submitted and parsed for reasoning and tool calls as chat, and what it
 * produced goes to the sink instead of chat.completion JSON. Errors stay OpenAI error bodies
 * (x->on_stream_error shapes them after the stream head). */
struct gw_openai_sink {
    void *ctx;
    /* streamed: the head was sent, before the first delta */
    void (*begin)(void *ctx, struct gw_exch *x);
    /* every piece of output in order, streamed or not */
    void (*delta)(void *ctx, struct gw_exch *x, const struct gw_out_delta *d);
    /* the output is complete: respond, or send the last events and end the stream */
    void (*end)(void *ctx, struct gw_exch *x, const struct gw_openai_result *r);
    /* the request's name of a chat parameter named in an error (NULL: as is) */
    const char *(*param)(const char *chat_param);
};

void gw_openai_generate(struct gw *gw, struct gw_exch *x, enum gw_req_kind kind);
/* Generate for the chat body body[0..len) (arena), handing the output to sink (borrowed for
 * the exchange's life). */
void gw_openai_generate_sink(struct gw *gw, struct gw_exch *x, const char *body, size_t len,
                             const struct gw_openai_sink *sink);
void gw_openai_tokenize(struct gw *gw, struct gw_exch *x);
void gw_openai_detokenize(struct gw *gw, struct gw_exch *x);
/* The max_model_len in force: the scheduler's when known, else the configured one. */
int64_t gw_openai_max_model_len(const struct gw *gw);
/* The served model id: the configured name. */
const char *gw_openai_model(const struct gw *gw);

#endif
