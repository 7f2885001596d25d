/* fuzz_chat: the model's real chat template (tests/unit/jinja/templates/qwen3.5.jinja, loaded
 * once) rendering a fuzzed OpenAI chat request (messages, tools, chat_template_kwargs) the way
 * the gateway does. Input: request JSON, 0xFF, default kwargs JSON (optional). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "text/chat.h"
#include "text/jinja.h"

static struct chat_template *g_tpl[2]; /* qwen3.5 and qwen3-coder */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static const char *const rel[2] = {"tests/unit/jinja/templates/qwen3.5.jinja",
                                       "tests/unit/jinja/templates/qwen3-coder.jinja"};
    for (int i = 0; i < 2; i++) {
        char *path = fz_source_path(rel[i]);
        struct jinja_error err;
        memset(&err, 0, sizeof(err));
        g_tpl[i] = chat_template_load(path, &err);
        if (!g_tpl[i]) {
            fprintf(stderr, "fuzz_chat: cannot load %s: %s\n", path, err.msg);
            free(path);
            exit(1);
        }
        free(path);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    size_t nr, nk;
    const uint8_t *rp = fz_piece(&f, &nr);
    const uint8_t *kp = fz_piece(&f, &nk);
    char *kw = nk ? fz_strndup(kp, nk) : NULL;
    int which = (int)(nr & 1); /* the request's length picks the template: no extra byte */
    struct jinja_error err;
    memset(&err, 0, sizeof(err));
    char *out = NULL;
    size_t out_len = 0;
    int rc = chat_template_render(g_tpl[which], (const char *)rp, nr, kw, &out, &out_len, &err);
    if (rc == 0) {
        /* NUL-terminated; "\u0000" in a message may put NULs inside, so out_len is the length */
        if (!out || out[out_len] != '\0')
            __builtin_trap();
        free(out);
    } else if (!err.msg[0]) {
        __builtin_trap(); /* every refusal must say why: it becomes the 400 message */
    }
    free(kw);
    return 0;
}
