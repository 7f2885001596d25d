/* tern chat-template: render a chat request (stdin) with a model's chat template and print the
 * prompt (no trailing newline is added). Exit 0 on success, 1 when loading or rendering fails
 * (the template raised or the request is invalid), 2 on a usage error. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"
#include "common/err.h"
#include "common/xalloc.h"
#include "text/chat.h"
#include "text/jinja.h"

int tern_cmd_chat_template(int argc, char **argv);
const char tern_cmd_chat_template_help[] =
    "render a chat request (stdin JSON) with a chat template: --template FILE | "
    "--tokenizer-config FILE | --dir CHECKPOINT [--kwargs JSON] [--vars]";

static char *read_stdin(size_t *len)
{
    size_t cap = 65536, n = 0;
    char *buf = xmalloc(cap);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, stdin)) > 0) {
        n += r;
        if (cap - n - 1 == 0) {
            cap *= 2;
            buf = xrealloc(buf, cap);
        }
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

static char *read_path(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 65536, n = 0, r;
    char *buf = xmalloc(cap);
    while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n - 1 == 0) {
            cap *= 2;
            buf = xrealloc(buf, cap);
        }
    }
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

static int render_vars(const char *tpl_path, const char *in, size_t in_len)
{
    size_t len;
    char *src = read_path(tpl_path, &len);
    if (!src) {
        fprintf(stderr, "tern chat-template: cannot read %s\n", tpl_path);
        return 1;
    }
    struct jinja_error err;
    struct jinja_template *t = jinja_template_create(src, len, &err);
    free(src);
    if (!t) {
        fprintf(stderr, "tern chat-template: %s\n", err.msg);
        return 1;
    }
    struct jinja_ctx *c = jinja_ctx_create();
    char *out = NULL;
    size_t out_len = 0;
    int rc = jinja_ctx_merge_json(c, in, in_len, &err);
    if (rc == 0)
        rc = jinja_template_render(t, c, &out, &out_len, &err);
    if (rc == 0)
        fwrite(out, 1, out_len, stdout);
    else
        fprintf(stderr, "tern chat-template: %s\n", err.msg);
    free(out);
    jinja_ctx_destroy(c);
    jinja_template_destroy(t);
    return rc == 0 ? 0 : 1;
}

int tern_cmd_chat_template(int argc, char **argv)
{
    const char *tpl = NULL, *cfg = NULL, *dir = NULL, *kwargs = NULL;
    bool vars = false;
    const struct args_opt opts[] = {
        ARGS_STR("--template", "FILE", &tpl, "a chat_template.jinja file"),
        ARGS_STR("--tokenizer-config", "FILE", &cfg, "a tokenizer_config.json with chat_template"),
        ARGS_STR("--dir", "DIR", &dir,
                 "a checkpoint: chat_template.jinja, else tokenizer_config.json"),
        ARGS_STR("--kwargs", "JSON", &kwargs, "server default chat_template_kwargs (JSON object)"),
        ARGS_BOOL("--vars", &vars, "stdin is a JSON object of template variables, bound as is "
                                   "(no chat request normalisation; needs --template)"),
    };
    const struct args_spec spec = {
        "tern chat-template",
        "(--template FILE | --tokenizer-config FILE | --dir DIR) [--kwargs JSON] [--vars] "
        "< request.json",
        opts, ARRAY_LEN(opts), NULL};
    int ar = args_parse(&spec, argc, argv);
    if (ar != 0)
        return args_exit(ar);
    if (!!tpl + !!cfg + !!dir != 1)
        return args_fail(&spec, "give one of --template, --tokenizer-config, --dir");
    if (vars && !tpl)
        return args_fail(&spec, "--vars needs --template");
    size_t in_len;
    char *in;
    if (vars) {
        in = read_stdin(&in_len);
        int r = render_vars(tpl, in, in_len);
        free(in);
        return r;
    }
    struct jinja_error err;
    struct chat_template *t = NULL;
    if (tpl) {
        /* a file named *.json given as --template is still a template */
        size_t len;
        char *src = read_path(tpl, &len);
        if (src) {
            t = chat_template_create(src, len, &err);
            free(src);
        } else {
            snprintf(err.msg, sizeof(err.msg), "cannot read %s", tpl);
        }
    } else if (cfg) {
        t = chat_template_load(cfg, &err);
    } else {
        t = chat_template_load_dir(dir, &err);
    }
    if (!t) {
        fprintf(stderr, "tern chat-template: %s\n", err.msg);
        return 1;
    }
    in = read_stdin(&in_len);
    char *out = NULL;
    size_t out_len = 0;
    int rc = chat_template_render(t, in, in_len, kwargs, &out, &out_len, &err);
    if (rc == 0)
        fwrite(out, 1, out_len, stdout);
    else
        fprintf(stderr, "tern chat-template: %s (%s)\n", err.msg, err_str(rc));
    free(out);
    free(in);
    chat_template_destroy(t);
    return rc == 0 ? 0 : 1;
}
