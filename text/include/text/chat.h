/* chat: render an OpenAI chat request into a prompt with the model's own chat template, the way
 * vLLM + Hugging Face do it (jinja.h does the template work).
 * Variables given to the template, in this order (later ones win): messages, tools (None when
 * absent), documents (None), add_generation_prompt (request field, default true), the special
 * tokens of tokenizer_config.json (bos_token, eos_token, pad_token, unk_token,
 * additional_special_tokens), the server's default kwargs, the request's chat_template_kwargs
 * (keys messages/tools/documents/add_generation_prompt there are ignored).
 * Messages are rebuilt the way vLLM's chat_utils builds its ConversationMessage:
 *  - keys: role, content, then for assistant tool_calls (dropped when empty) and reasoning +
 *    reasoning_content (both, from either input name), for tool tool_call_id, then name; other
 *    keys are dropped;
 *  - content (null, a string, or a list of strings / text, refusal or thinking parts) becomes one
 *    string with the texts joined by "\n" ("string" format), or, when the template has a loop
 *    over a message's content (vLLM's detection, see jinja_template_loops_over_message_content),
 *    a list of {"type": "text", "text": ...} ("openai" format; tool results stay strings).
 *    Non-text parts are rejected (ERR_UNSUPPORTED): the model is text-only;
 *  - tool_calls[].function.arguments given as a JSON string is parsed; invalid JSON or a
 *    non-object becomes {} (as vLLM does).
 * Tools become {"type": "function", "function": {"name", "description", "parameters", ...}, ...}
 * with null for a missing description/parameters (vLLM's pydantic model_dump). */
#ifndef TEXT_CHAT_H
#define TEXT_CHAT_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "text/jinja.h"

struct chat_template;

/* Template from text. NULL on a parse error or an unsupported construct (err set). */
struct chat_template *chat_template_create(const char *src, size_t len, struct jinja_error *err);
/* Template from the text of a tokenizer_config.json: `chat_template` as a string, or the list
 * form [{"name": "default", "template": ...}, ...]; special tokens are taken from it too. */
struct chat_template *chat_template_from_config(const char *json, size_t len,
                                                struct jinja_error *err);
/* Load from a file: *.json is a tokenizer_config.json, anything else (chat_template.jinja) is
 * the template text. NULL with err set when unreadable or invalid. */
struct chat_template *chat_template_load(const char *path, struct jinja_error *err);
/* Load from a checkpoint directory as transformers does: chat_template.jinja when present
 * (it wins), else the chat_template of tokenizer_config.json; special tokens come from
 * tokenizer_config.json when it exists. */
struct chat_template *chat_template_load_dir(const char *dir, struct jinja_error *err);
void chat_template_destroy(struct chat_template *t);

/* Render the request (JSON text of an OpenAI chat completion request: messages, tools,
 * add_generation_prompt, chat_template_kwargs; other fields ignored). default_kwargs is a JSON
 * object text or NULL. On success *out is a malloc'd NUL-terminated prompt (caller frees) and 0
 * is returned; on failure ERR_INVAL (bad request, raise_exception, template error),
 * ERR_UNSUPPORTED (non-text content) or ERR_TOOBIG, with err->msg set. Thread-safe for one t. */
int chat_template_render(const struct chat_template *t, const char *request_json, size_t len,
                         const char *default_kwargs_json, char **out, size_t *out_len,
                         struct jinja_error *err);
/* Same from already parsed cJSON (default_kwargs may be NULL). cJSON does not keep whether a
 * number was written as 1 or 1.0: integral numbers become ints. */
int chat_template_render_cjson(const struct chat_template *t, const cJSON *request,
                               const cJSON *default_kwargs, char **out, size_t *out_len,
                               struct jinja_error *err);

#endif
