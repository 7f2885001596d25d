/* jinja: a Jinja2-subset interpreter for chat templates. Output is meant to be byte-identical to
 * Python jinja2 as Hugging Face configures it (ImmutableSandboxedEnvironment, trim_blocks,
 * lstrip_blocks, loopcontrols, `raise_exception`, `strftime_now`, HF's `tojson`).
 * A template is parsed once (jinja_template_create) and is read-only afterwards, so one template
 * may be rendered by several threads, each with its own jinja_ctx. Anything the interpreter does
 * not implement (tag, filter, test, function, method) is reported at parse time with its line. */
#ifndef TEXT_JINJA_H
#define TEXT_JINJA_H

#include <stdbool.h>
#include <stddef.h>

struct jinja_template;
struct jinja_ctx;

struct jinja_error {
    int line;      // template line (1-based) or 0 when not tied to a line
    char msg[512]; // "chat template line 12: unsupported filter 'wordwrap'" style text
};

/* Parse a template. Returns NULL on a syntax error or an unsupported construct (err filled).
 * The caller frees the result with jinja_template_destroy. */
struct jinja_template *jinja_template_create(const char *src, size_t len, struct jinja_error *err);
void jinja_template_destroy(struct jinja_template *t);

/* True when the template has a `for` loop over a variable or attribute called `name`
 * (`for x in content`, `for x in message.content`, `for x in m['content']`). */
bool jinja_template_iterates_over(const struct jinja_template *t, const char *name);

/* vLLM's chat-template content-format detection ("openai" vs "string"): true when a `for` loop
 * iterates over the content of a message, i.e. over `m.content` / `m['content']` (possibly
 * filtered or sliced) where `m` is the target of a loop over `messages` or over a variable set
 * from it (`{% set loop_messages = messages[1:] %}`). */
bool jinja_template_loops_over_message_content(const struct jinja_template *t);

/* The variables of one render, and the arena that holds them and all temporaries. */
struct jinja_ctx *jinja_ctx_create(void);
void jinja_ctx_destroy(struct jinja_ctx *c);

/* Bind name to the JSON value in json[0..len) (parsed like Python json.loads). Returns 0, or
 * ERR_INVAL with err->msg set when the JSON is malformed. */
int jinja_ctx_set_json(struct jinja_ctx *c, const char *name, const char *json, size_t len,
                       struct jinja_error *err);
/* Bind every key of a JSON object as a variable (later bindings of a name win). */
int jinja_ctx_merge_json(struct jinja_ctx *c, const char *json, size_t len,
                         struct jinja_error *err);
void jinja_ctx_set_bool(struct jinja_ctx *c, const char *name, bool v);
void jinja_ctx_set_str(struct jinja_ctx *c, const char *name, const char *s);
void jinja_ctx_set_none(struct jinja_ctx *c, const char *name);

/* Render t with the variables of c. On success *out is a malloc'd NUL-terminated string the
 * caller frees, *out_len its length, and 0 is returned. On failure returns ERR_INVAL
 * (raise_exception, undefined access, type error...) or ERR_TOOBIG (runaway output) with err set.
 * Temporaries stay in c until jinja_ctx_destroy. */
int jinja_template_render(const struct jinja_template *t, struct jinja_ctx *c, char **out,
                          size_t *out_len, struct jinja_error *err);

#endif
