/* gw_text: tokenizer (text/tokenizer.h) + chat template (text/chat.h) behind one facade.
 * The template comes from tokenizer_config.json in the tokenizer folder. */
#include "gw_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/err.h"
#include "common/xalloc.h"
#include "gw_req.h"
#include "text/chat.h"
#include "text/tokenizer.h"

struct gw_text {
    struct tokenizer *tok;
    struct chat_template *tmpl;
    int32_t im_end, endoftext;
};

struct gw_text *gw_text_create(const char *dir, char *err, size_t errlen)
{
    char path[1024];
    struct gw_text *t = xcalloc(1, sizeof(*t));
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    t->tok = tokenizer_create_from_file(path, err, errlen);
    if (!t->tok)
        goto out_free;
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    struct jinja_error je = {0};
    t->tmpl = chat_template_load(path, &je);
    if (!t->tmpl) {
        snprintf(err, errlen, "chat template %s: %s", path, je.msg);
        goto out_tok;
    }
    t->im_end = tokenizer_eos_id(t->tok);
    t->endoftext = tokenizer_endoftext_id(t->tok);
    return t;
out_tok:
    tokenizer_destroy(t->tok);
out_free:
    free(t);
    return NULL;
}

void gw_text_destroy(struct gw_text *t)
{
    if (!t)
        return;
    chat_template_destroy(t->tmpl);
    tokenizer_destroy(t->tok);
    free(t);
}

struct tokenizer *gw_text_tokenizer(const struct gw_text *t)
{
    return t->tok;
}

int gw_text_render(const struct gw_text *t, const struct gw_req *r, char **out, size_t *n,
                   char *err, size_t errlen)
{
    /* enable_thinking from reasoning_effort rides in the default kwargs (the request's own
     * chat_template_kwargs still win, as in vLLM) */
    cJSON *defaults = NULL;
    if (r->enable_thinking >= 0) {
        defaults = cJSON_CreateObject();
        cJSON_AddBoolToObject(defaults, "enable_thinking", r->enable_thinking != 0);
    }
    struct jinja_error je = {0};
    int rc = chat_template_render_cjson(t->tmpl, r->root, defaults, out, n, &je);
    cJSON_Delete(defaults);
    if (rc < 0)
        snprintf(err, errlen, "%s", je.msg[0] ? je.msg : "cannot render the chat template");
    return rc;
}

int gw_text_encode(const struct gw_text *t, const char *s, size_t n, int32_t **ids, size_t *n_ids)
{
    return tokenizer_encode(t->tok, s, n, ids, n_ids);
}

int gw_text_decode(const struct gw_text *t, const int32_t *ids, size_t n, bool skip_special,
                   char **out, size_t *out_len)
{
    return tokenizer_decode(t->tok, ids, n, skip_special ? TOKENIZER_DECODE_SKIP_SPECIAL : 0, out,
                            out_len);
}

void gw_text_eos_ids(const struct gw_text *t, int32_t *im_end, int32_t *endoftext)
{
    *im_end = t->im_end;
    *endoftext = t->endoftext;
}

size_t gw_text_vocab_size(const struct gw_text *t)
{
    return tokenizer_vocab_size(t->tok);
}
