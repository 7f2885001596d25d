/* gw_text: the gateway's one call site for the text library: tokenizer, chat template, and
 * the well-known special ids. Created once at startup; every function is thread-safe (the
 * threadpool renders and tokenizes while the loop thread detokenizes). */
#ifndef GW_TEXT_H
#define GW_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gw_text;
struct gw_req;
struct tokenizer;

/* dir holds tokenizer.json and tokenizer_config.json (chat_template). NULL on failure with a
 * reason in err. */
struct gw_text *gw_text_create(const char *dir, char *err, size_t errlen);
void gw_text_destroy(struct gw_text *t);
/* Server-wide template kwargs (a JSON object, e.g. {"enable_thinking":false}); a request's own
 * chat_template_kwargs win over them. NULL/"" clears. 0 or ERR_INVAL (not a JSON object). */
int gw_text_set_default_kwargs(struct gw_text *t, const char *json);
/* tool_choice "none": true = render without the tools; false (default) = render them anyway and
 * only skip tool-call parsing, as vLLM does by default. */
void gw_text_set_exclude_tools_when_none(struct gw_text *t, bool exclude);
struct tokenizer *gw_text_tokenizer(const struct gw_text *t);

/* Render a chat request (messages, tools, template kwargs, enable_thinking) to prompt text with
 * the generation prompt appended. *out is malloc'd. 0, or ERR_INVAL with a reason in err
 * (client error: bad messages for this template). */
int gw_text_render(const struct gw_text *t, const struct gw_req *r, char **out, size_t *n,
                   char *err, size_t errlen);
/* Text -> ids (malloc'd, free()). 0 or ERR_NOMEM. */
int gw_text_encode(const struct gw_text *t, const char *s, size_t n, int32_t **ids, size_t *n_ids);
/* Ids -> text (malloc'd). 0, ERR_RANGE (id outside the vocabulary), ERR_NOMEM. */
int gw_text_decode(const struct gw_text *t, const int32_t *ids, size_t n, bool skip_special,
                   char **out, size_t *out_len);
/* Number of ids in the vocabulary (added tokens included). */
size_t gw_text_vocab_size(const struct gw_text *t);
/* The ids that end a turn (<|im_end|>, <|endoftext|>), -1 when absent. */
void gw_text_eos_ids(const struct gw_text *t, int32_t *im_end, int32_t *endoftext);

#endif
