/* gw_req: an OpenAI request body (chat or legacy completions) parsed and validated into a
 * struct, with the exact OpenAI error (status, param, message) for every rejected value.
 * Pure: no I/O, no loop; strings and the kept JSON live in the caller's arena. */
#ifndef GW_REQ_H
#define GW_REQ_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gw_arena;
struct cJSON;

#define GW_REQ_STOP_MAX 16         /* stop strings accepted */
#define GW_REQ_STOP_LEN_MAX 512    /* bytes per stop string */
#define GW_REQ_TOP_LOGPROBS_MAX 20 /* alternatives per token (MSG_MAX_TOP_LOGPROBS) */
#define GW_REQ_LOGIT_BIAS_MAX 1024 /* logit_bias entries (MSG_MAX_LOGIT_BIAS) */
#define GW_REQ_STOP_IDS_MAX 256    /* stop_token_ids entries */
#define GW_REQ_N_MAX 8             /* choices per request (n) */

enum gw_req_kind {
    GW_REQ_KIND_CHAT = 0,   /* POST /v1/chat/completions */
    GW_REQ_KIND_COMPLETION, /* POST /v1/completions */
};

enum gw_req_given {
    GW_REQ_GIVEN_TEMPERATURE = 1u << 0,
    GW_REQ_GIVEN_TOP_P = 1u << 1,
    GW_REQ_GIVEN_TOP_K = 1u << 2,
    GW_REQ_GIVEN_MIN_P = 1u << 3,
    GW_REQ_GIVEN_REPETITION_PENALTY = 1u << 4,
};

enum gw_tool_choice {
    GW_TOOL_CHOICE_AUTO = 0,
    GW_TOOL_CHOICE_NONE,
    GW_TOOL_CHOICE_REQUIRED,
    GW_TOOL_CHOICE_NAMED,
};

/* Sampling defaults for fields a request leaves out (the checkpoint's generation_config.json,
 * as vLLM's --generation-config auto). has_* false: the OpenAI default stays. */
struct gw_req_defaults {
    bool has_temperature, has_top_p, has_top_k, has_min_p, has_repetition_penalty;
    bool has_max_tokens;
    double temperature;
    double top_p;
    int64_t top_k;
    double min_p;
    double repetition_penalty;
    int64_t max_tokens; /* max_new_tokens: cap of the default max_tokens */
};

/* A rejected request: what the HTTP layer answers. */
struct gw_req_err {
    int status;        /* 400, 404 ... */
    const char *type;  /* "invalid_request_error" */
    const char *param; /* field path or NULL (static or arena) */
    const char *code;  /* e.g. "model_not_found" or NULL */
    char message[512];
};

struct gw_req {
    enum gw_req_kind kind;
    const char *model; /* as requested, NULL when absent */
    bool stream;
    bool include_usage;        /* stream_options.include_usage */
    int64_t max_tokens;        /* max_tokens / max_completion_tokens; -1 = not given */
    int64_t max_tokens_cap;    /* when max_tokens is not given: at most this many; -1 = none */
    double temperature;        /* [0, 2], default 1 */
    double top_p;              /* (0, 1], default 1 */
    int64_t top_k;             /* 0 or -1 = off, else >= 1 */
    double min_p;              /* [0, 1], default 0 */
    double presence_penalty;   /* [-2, 2], default 0 */
    double frequency_penalty;  /* [-2, 2], default 0 */
    double repetition_penalty; /* (0, 2], default 1 */
    unsigned given;            /* GW_REQ_GIVEN_* bits: sampling fields the body set */
    bool has_seed;
    uint64_t seed;
    int n;              /* choices, 1..GW_REQ_N_MAX */
    int64_t min_tokens; /* stop ids (EOS included) masked until this many; 0 = off */
    int32_t *bias_ids;  /* logit_bias token ids (arena), n_bias entries */
    float *bias_vals;   /* their biases, clamped to [-100, 100] */
    int n_bias;
    int32_t *stop_ids; /* stop_token_ids (arena) */
    int n_stop_ids;
    bool parallel_tool_calls;          /* false: at most one tool call is returned */
    const char *stop[GW_REQ_STOP_MAX]; /* stop strings (arena) */
    int n_stop;
    bool ignore_eos;
    const char *json_schema;       /* response_format as a JSON Schema, or the tool-call grammar
                                      spec of a forced tool_choice (arena); NULL: free text */
    bool logprobs;                 /* report the sampled tokens' log probabilities */
    int top_logprobs;              /* and this many alternatives per token */
    int enable_thinking;           /* -1 = template default, 0 = off, 1 = on */
    struct cJSON *root;            /* the parsed body (freed with the arena) */
    struct cJSON *messages;        /* chat: the messages array (borrowed from root) */
    struct cJSON *tools;           /* chat: tools array or NULL */
    struct cJSON *template_kwargs; /* chat_template_kwargs object or NULL */
    enum gw_tool_choice tool_choice;
    const char *tool_choice_name; /* GW_TOOL_CHOICE_NAMED */
    const char *prompt;           /* completions: prompt text, or NULL when given as ids */
    int32_t *prompt_ids;          /* completions: prompt as token ids (arena), or NULL */
    size_t n_prompt_ids;
    bool echo; /* completions: echo (not supported: rejected when true) */
};

struct cJSON;
/* obj's member name, or NULL when it is absent or JSON null (the request parsers' reading). */
struct cJSON *gw_req_field(const struct cJSON *obj, const char *name);
/* cJSON_Delete as a gw_arena cleanup. */
void gw_req_free_json(void *p);

/* Fill *err as an invalid_request_error (message from fmt); returns ERR_INVAL. */
int gw_req_err_vset(struct gw_req_err *err, int status, const char *param, const char *code,
                    const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));

/* Parse body[0..len) as kind. 0 on success; ERR_INVAL with *err filled for a client error.
 * served_model: the only accepted "model" value besides absent (404 otherwise). */
int gw_req_parse(struct gw_req *r, enum gw_req_kind kind, const char *body, size_t len,
                 const char *served_model, struct gw_arena *arena, struct gw_req_err *err);

/* The i-th top-level field tern knows (docs/API.md "Field list"), with the endpoints that read
 * it as 1 << GW_REQ_KIND_* bits in *kinds; NULL past the last. */
const char *gw_req_known_field(size_t i, unsigned *kinds);
/* name is a top-level field of kind's body that tern reads (or ignores on purpose). */
bool gw_req_is_known_field(enum gw_req_kind kind, const char *name);
typedef bool (*gw_req_is_known_fn)(const char *name, const void *ctx);
/* The keys of the JSON object obj for which is_known(key, ctx) is false, comma-separated into
 * out (cap bytes, truncated; bytes outside [A-Za-z0-9_.-] as '?'); returns how many. */
int gw_req_unknown_keys(const struct cJSON *obj, gw_req_is_known_fn is_known, const void *ctx,
                        char *out, size_t cap);
/* The top-level keys of the parsed body r that tern does not know, comma-separated into out
 * (cap bytes, truncated); returns how many there are (0: none). */
int gw_req_unknown_fields(const struct gw_req *r, char *out, size_t cap);

/* Fill the sampling fields r left out from d (NULL: nothing). */
void gw_req_apply_defaults(struct gw_req *r, const struct gw_req_defaults *d);

/* Token ids the body named (logit_bias, stop_token_ids) must be < vocab. 0, or ERR_INVAL with
 * the error (param names the field). */
int gw_req_check_vocab(const struct gw_req *r, size_t vocab, struct gw_req_err *err);

/* Context check: prompt_tokens + max_tokens must fit max_model_len. Fills r->max_tokens when
 * it was not given. 0, or ERR_INVAL with the OpenAI "context_length_exceeded" error. */
int gw_req_check_context(struct gw_req *r, int64_t prompt_tokens, int64_t max_model_len,
                         struct gw_req_err *err);

#endif
