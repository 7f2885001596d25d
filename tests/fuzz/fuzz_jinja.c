/* fuzz_jinja: the Jinja subset on arbitrary template text (lexer, parser, evaluator, filters),
 * rendered against a fixed chat-like context plus a context JSON taken from the input.
 * Input: template text, 0xFF, context JSON object (merged over the fixed one). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "text/jinja.h"

static const char MESSAGES[] =
    "[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hi <b>\"},"
    "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"type\":\"function\",\"function\":"
    "{\"name\":\"f\",\"arguments\":{\"a\":1,\"b\":[true,null,2.5]}}}]},{\"role\":\"tool\","
    "\"content\":\"42\"}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    size_t nt, nc;
    const uint8_t *tp = fz_piece(&f, &nt);
    const uint8_t *cp = fz_piece(&f, &nc);
    struct jinja_error err;
    memset(&err, 0, sizeof(err));
    struct jinja_template *t = jinja_template_create((const char *)tp, nt, &err);
    if (!t) {
        if (!err.msg[0])
            __builtin_trap(); /* a rejected template must say why */
        return 0;
    }
    (void)jinja_template_iterates_over(t, "content");
    struct jinja_ctx *c = jinja_ctx_create();
    (void)jinja_ctx_set_json(c, "messages", MESSAGES, sizeof(MESSAGES) - 1, &err);
    jinja_ctx_set_bool(c, "add_generation_prompt", true);
    jinja_ctx_set_str(c, "bos_token", "<|endoftext|>");
    jinja_ctx_set_none(c, "tools");
    if (nc > 0)
        (void)jinja_ctx_merge_json(c, (const char *)cp, nc, &err);
    char *out = NULL;
    size_t out_len = 0;
    if (jinja_template_render(t, c, &out, &out_len, &err) == 0)
        free(out);
    jinja_ctx_destroy(c);
    jinja_template_destroy(t);
    return 0;
}
