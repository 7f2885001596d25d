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
    cJSON *default_kwargs;   /* server-wide template kwargs or NULL (read-only after startup) */
    bool exclude_tools_none; /* tool_choice "none" renders without tools */
};

struct gw_text *gw_text_create(const char *dir, char *err, size_t errlen)
{
    char path[1024];
    struct gw_text *t = xcalloc(1, sizeof(*t));
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    t->tok = tokenizer_create_from_file(path, err, errlen);
    if (!t->tok)
        goto out_free;
    /* chat_template.jinja wins over tokenizer_config.json's chat_template, as in transformers */
    struct jinja_error je = {0};
    t->tmpl = chat_template_load_dir(dir, &je);
    if (!t->tmpl) {
        snprintf(err, errlen, "chat template in %s: %s", dir, je.msg);
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
    cJSON_Delete(t->default_kwargs);
    free(t);
}

void gw_text_set_exclude_tools_when_none(struct gw_text *t, bool exclude)
{
    t->exclude_tools_none = exclude;
}

int gw_text_set_default_kwargs(struct gw_text *t, const char *json)
{
    cJSON_Delete(t->default_kwargs);
    t->default_kwargs = NULL;
    if (!json || !json[0])
        return 0;
    t->default_kwargs = cJSON_Parse(json);
    if (!t->default_kwargs || !cJSON_IsObject(t->default_kwargs)) {
        cJSON_Delete(t->default_kwargs);
        t->default_kwargs = NULL;
        return ERR_INVAL;
    }
    return 0;
}

struct tokenizer *gw_text_tokenizer(const struct gw_text *t)
{
    return t->tok;
}

int gw_text_render(const struct gw_text *t, const struct gw_req *r, char **out, size_t *n,
                   char *err, size_t errlen)
{
    /* defaults = the server's --default-chat-template-kwargs, then enable_thinking from
     * reasoning_effort; the request's own chat_template_kwargs still win (as in vLLM) */
    cJSON *defaults = t->default_kwargs ? cJSON_Duplicate(t->default_kwargs, true) : NULL;
    if (r->enable_thinking >= 0) {
        if (!defaults)
            defaults = cJSON_CreateObject();
        cJSON_DeleteItemFromObjectCaseSensitive(defaults, "enable_thinking");
        cJSON_AddBoolToObject(defaults, "enable_thinking", r->enable_thinking != 0);
    }
    struct jinja_error je = {0};
    cJSON *body = NULL; /* the request without "tools", when they are left out */
    if (t->exclude_tools_none && r->tools && r->tool_choice == GW_TOOL_CHOICE_NONE) {
        body = cJSON_Duplicate(r->root, true);
        cJSON_DeleteItemFromObjectCaseSensitive(body, "tools");
    }
    int rc = chat_template_render_cjson(t->tmpl, body ? body : r->root, defaults, out, n, &je);
    cJSON_Delete(body);
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
