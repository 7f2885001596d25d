/* gw_req: every M parameter's range and type errors, defaults, aliases, and the context check. */
#include <string.h>

#include <cjson/cJSON.h>

#include "common/err.h"
#include "gw_arena.h"
#include "gw_req.h"
#include "test.h"

#define MODEL "qwen-test"
#define MSGS "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static int parse(enum gw_req_kind kind, const char *body, struct gw_req *r, struct gw_req_err *e,
                 struct gw_arena *a)
{
    return gw_req_parse(r, kind, body, strlen(body), MODEL, a, e);
}

/* a chat body with one extra field must fail with status 400 naming param */
static void expect_chat_bad(const char *extra, const char *param)
{
    char body[1024];
    snprintf(body, sizeof(body), "{" MSGS ",%s}", extra);
    struct gw_arena *a = gw_arena_create(0);
    struct gw_req r;
    struct gw_req_err e;
    int rc = parse(GW_REQ_KIND_CHAT, body, &r, &e, a);
    if (rc != ERR_INVAL || e.status != 400 || !e.param || strcmp(e.param, param) != 0 ||
        !e.message[0]) {
        fprintf(stderr, "body %s: rc=%d status=%d param=%s msg=%s\n", body, rc, e.status,
                e.param ? e.param : "(null)", e.message);
        CHECK(0);
    }
    gw_arena_destroy(a);
}

static void expect_chat_ok(const char *extra)
{
    char body[1024];
    snprintf(body, sizeof(body), "{" MSGS "%s%s}", extra[0] ? "," : "", extra);
    struct gw_arena *a = gw_arena_create(0);
    struct gw_req r;
    struct gw_req_err e;
    int rc = parse(GW_REQ_KIND_CHAT, body, &r, &e, a);
    if (rc != 0) {
        fprintf(stderr, "body %s: rc=%d msg=%s\n", body, rc, e.message);
        CHECK(0);
    }
    gw_arena_destroy(a);
}

/* response_format -> the schema text sent to the worker */
/* the schema sent to the worker, and enable_thinking: constrained output turns thinking off
 * (0) unless the request turns it on (1); -1 = the template's default */
static void test_response_format(void)
{
    static const struct {
        const char *body, *schema;
        int thinking;
    } cases[] = {
        {"", NULL, -1},
        {",\"response_format\":{\"type\":\"text\"}", NULL, -1},
        {",\"response_format\":{\"type\":\"json_object\"}", "{\"type\":\"object\"}", 0},
        {",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\","
         "\"schema\":{ \"type\" : \"array\", \"maxItems\": 2 }}}",
         "{\"type\":\"array\",\"maxItems\":2}", 0},
        {",\"response_format\":{\"type\":\"json_object\"},\"chat_template_kwargs\":{"
         "\"enable_thinking\":true}",
         "{\"type\":\"object\"}", 1},
        {",\"response_format\":{\"type\":\"json_object\"},\"reasoning_effort\":\"high\"",
         "{\"type\":\"object\"}", 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[512];
        snprintf(body, sizeof(body), "{" MSGS "%s}", cases[i].body);
        struct gw_arena *a = gw_arena_create(0);
        struct gw_req r;
        struct gw_req_err e;
        CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, body, &r, &e, a), 0);
        if (cases[i].schema)
            CHECK_STREQ(r.json_schema, cases[i].schema);
        else
            CHECK(r.json_schema == NULL);
        CHECK_EQ_INT(r.enable_thinking, cases[i].thinking);
        gw_arena_destroy(a);
    }
}

#define TOOL_F "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]"

/* tool_choice required / named -> the tool-call spec sent in place of a schema */
static void test_forced_tools(void)
{
    static const char *const cases[][2] = {
        {"," TOOL_F, NULL},
        {"," TOOL_F ",\"tool_choice\":\"auto\"", NULL},
        {"," TOOL_F ",\"tool_choice\":\"none\"", NULL},
        {"," TOOL_F ",\"tool_choice\":\"required\"", "\"parallel\":true"},
        {"," TOOL_F ",\"tool_choice\":\"required\",\"parallel_tool_calls\":false",
         "\"parallel\":false"},
        {"," TOOL_F ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}",
         "\"name\":\"f\""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[512];
        snprintf(body, sizeof(body), "{" MSGS "%s}", cases[i][0]);
        struct gw_arena *a = gw_arena_create(0);
        struct gw_req r;
        struct gw_req_err e;
        CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, body, &r, &e, a), 0);
        if (cases[i][1]) {
            CHECK(r.json_schema && strstr(r.json_schema, "{\"tern_tool_calls\":") == r.json_schema);
            CHECK(r.json_schema && strstr(r.json_schema, cases[i][1]));
        } else {
            CHECK(r.json_schema == NULL);
        }
        gw_arena_destroy(a);
    }
    expect_chat_bad(TOOL_F ",\"tool_choice\":\"required\",\"response_format\":{\"type\":"
                    "\"json_object\"}",
                    "tool_choice");
    expect_chat_bad(TOOL_F ",\"tool_choice\":\"required\",\"ignore_eos\":true", "ignore_eos");
    expect_chat_bad(TOOL_F ",\"tool_choice\":\"required\",\"min_tokens\":2", "min_tokens");
    expect_chat_bad("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a<b\"}}],"
                    "\"tool_choice\":\"required\"",
                    "tools");
    /* a keyword outside the JSON subset in a tool schema is not a refusal */
    expect_chat_ok("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
                   "\"parameters\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":"
                   "\"integer\",\"minimum\":1},\"s\":{\"type\":\"string\",\"format\":\"date\"}},"
                   "\"$defs\":{}}}}],\"tool_choice\":\"required\"");
    /* auto with a response_format stays allowed */
    expect_chat_ok(TOOL_F ",\"tool_choice\":\"auto\",\"response_format\":{\"type\":"
                   "\"json_object\"}");
}

static void test_defaults(void)
{
    struct gw_arena *a = gw_arena_create(0);
    struct gw_req r;
    struct gw_req_err e;
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, "{" MSGS "}", &r, &e, a), 0);
    CHECK_EQ_INT(r.max_tokens, -1);
    CHECK_NEAR(r.temperature, 1.0, 0);
    CHECK_NEAR(r.top_p, 1.0, 0);
    CHECK_EQ_INT(r.top_k, 0);
    CHECK_NEAR(r.min_p, 0.0, 0);
    CHECK_NEAR(r.repetition_penalty, 1.0, 0);
    CHECK(!r.stream);
    CHECK(!r.include_usage);
    CHECK(!r.has_seed);
    CHECK_EQ_INT(r.n_stop, 0);
    CHECK_EQ_INT(r.enable_thinking, -1);
    CHECK(r.messages && cJSON_GetArraySize(r.messages) == 1);
    CHECK(r.model == NULL);
    gw_arena_destroy(a);
}

static void test_values(void)
{
    struct gw_arena *a = gw_arena_create(0);
    struct gw_req r;
    struct gw_req_err e;
    const char *body =
        "{\"model\":\"" MODEL "\"," MSGS ",\"max_tokens\":7,\"temperature\":0,\"top_p\":0.5,"
        "\"top_k\":20,\"min_p\":0.1,\"presence_penalty\":-2,\"frequency_penalty\":2,"
        "\"repetition_penalty\":1.5,\"seed\":-3,\"stop\":[\"a\",\"bc\",\"\"],\"stream\":true,"
        "\"stream_options\":{\"include_usage\":true},\"chat_template_kwargs\":{\"enable_thinking\":"
        "false},\"unknown_field\":{\"x\":[1,2]},\"user\":\"u\",\"n\":1,\"logprobs\":false}";
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, body, &r, &e, a), 0);
    CHECK_STREQ(r.model, MODEL);
    CHECK_EQ_INT(r.max_tokens, 7);
    CHECK_NEAR(r.temperature, 0, 0);
    CHECK_NEAR(r.top_p, 0.5, 0);
    CHECK_EQ_INT(r.top_k, 20);
    CHECK_NEAR(r.min_p, 0.1, 1e-12);
    CHECK_NEAR(r.presence_penalty, -2, 0);
    CHECK_NEAR(r.frequency_penalty, 2, 0);
    CHECK_NEAR(r.repetition_penalty, 1.5, 0);
    CHECK(r.has_seed);
    CHECK_EQ_INT((int64_t)r.seed, -3);
    CHECK_EQ_INT(r.n_stop, 2); /* empty strings are dropped */
    CHECK_STREQ(r.stop[0], "a");
    CHECK_STREQ(r.stop[1], "bc");
    CHECK(r.stream);
    CHECK(r.include_usage);
    CHECK_EQ_INT(r.enable_thinking, 0);
    gw_arena_destroy(a);

    /* max_completion_tokens wins over max_tokens; stop as one string; reasoning_effort none */
    a = gw_arena_create(0);
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT,
                       "{" MSGS ",\"max_tokens\":5,\"max_completion_tokens\":9,\"stop\":\"x\","
                       "\"reasoning_effort\":\"none\",\"top_k\":-1,\"temperature\":null}",
                       &r, &e, a),
                 0);
    CHECK_EQ_INT(r.max_tokens, 9);
    CHECK_EQ_INT(r.n_stop, 1);
    CHECK_STREQ(r.stop[0], "x");
    CHECK_EQ_INT(r.enable_thinking, 0);
    CHECK_EQ_INT(r.top_k, 0);
    CHECK_NEAR(r.temperature, 1.0, 0); /* null = absent */
    gw_arena_destroy(a);

    /* reasoning_effort high turns thinking on; explicit kwargs false is kept */
    a = gw_arena_create(0);
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, "{" MSGS ",\"reasoning_effort\":\"high\"}", &r, &e, a), 0);
    CHECK_EQ_INT(r.enable_thinking, 1);
    gw_arena_destroy(a);
}

static void test_ranges(void)
{
    expect_chat_bad("\"temperature\":2.01", "temperature");
    expect_chat_bad("\"temperature\":-0.1", "temperature");
    expect_chat_bad("\"temperature\":\"hot\"", "temperature");
    expect_chat_ok("\"temperature\":2");
    expect_chat_bad("\"top_p\":0", "top_p");
    expect_chat_bad("\"top_p\":1.0001", "top_p");
    expect_chat_ok("\"top_p\":1");
    expect_chat_bad("\"top_k\":-2", "top_k");
    expect_chat_bad("\"top_k\":1.5", "top_k");
    expect_chat_bad("\"min_p\":1.5", "min_p");
    expect_chat_bad("\"min_p\":-0.5", "min_p");
    expect_chat_bad("\"presence_penalty\":2.5", "presence_penalty");
    expect_chat_bad("\"presence_penalty\":-3", "presence_penalty");
    expect_chat_bad("\"frequency_penalty\":-2.1", "frequency_penalty");
    expect_chat_bad("\"repetition_penalty\":0", "repetition_penalty");
    expect_chat_bad("\"repetition_penalty\":2.5", "repetition_penalty");
    expect_chat_bad("\"max_tokens\":0", "max_tokens");
    expect_chat_bad("\"max_tokens\":1.5", "max_tokens");
    expect_chat_bad("\"max_tokens\":\"10\"", "max_tokens");
    expect_chat_bad("\"max_completion_tokens\":-1", "max_completion_tokens");
    expect_chat_bad("\"seed\":0.5", "seed");
    expect_chat_bad("\"seed\":\"1\"", "seed");
    expect_chat_bad("\"n\":9", "n"); /* GW_REQ_N_MAX 8 */
    expect_chat_ok("\"n\":8");
    expect_chat_bad("\"n\":0", "n");
    expect_chat_ok("\"n\":1");
    expect_chat_bad("\"stop\":5", "stop");
    expect_chat_bad("\"stop\":[\"a\",1]", "stop");
    expect_chat_bad("\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\","
                    "\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]",
                    "stop");
    expect_chat_bad("\"stream\":\"yes\"", "stream");
    expect_chat_bad("\"stream_options\":{\"include_usage\":1}", "stream_options.include_usage");
    expect_chat_bad("\"stream_options\":[]", "stream_options");
    expect_chat_ok("\"logprobs\":true,\"top_logprobs\":20");
    expect_chat_bad("\"logprobs\":1", "logprobs");
    expect_chat_bad("\"logprobs\":true,\"top_logprobs\":21", "top_logprobs");
    expect_chat_bad("\"logprobs\":true,\"top_logprobs\":-1", "top_logprobs");
    expect_chat_bad("\"top_logprobs\":3", "top_logprobs"); /* needs logprobs: true */
    expect_chat_ok("\"response_format\":{\"type\":\"text\"}");
    expect_chat_ok("\"response_format\":{\"type\":\"json_object\"}");
    expect_chat_ok("\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\","
                   "\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{\"a\":"
                   "{\"enum\":[1,2]}},\"required\":[\"a\"]}}}");
    expect_chat_bad("\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\","
                    "\"schema\":{\"type\":\"string\",\"maxLength\":3}}}", "response_format");
    expect_chat_bad("\"response_format\":{\"type\":\"json_schema\"}", "response_format");
    expect_chat_bad("\"response_format\":{\"type\":\"yaml\"}", "response_format");
    expect_chat_bad("\"response_format\":{\"type\":\"json_object\"},\"ignore_eos\":true", "ignore_eos");
    expect_chat_bad("\"response_format\":{\"type\":\"json_object\"},\"min_tokens\":1", "min_tokens");
    expect_chat_bad("\"chat_template_kwargs\":[]", "chat_template_kwargs");
    expect_chat_bad("\"chat_template_kwargs\":{\"enable_thinking\":\"no\"}",
                    "chat_template_kwargs.enable_thinking");
    expect_chat_bad("\"reasoning_effort\":\"extreme\"", "reasoning_effort");
    expect_chat_bad("\"tools\":{}", "tools");
    expect_chat_bad("\"tools\":[{\"type\":\"function\"}]", "tools");
    expect_chat_bad("\"tool_choice\":\"sometimes\"", "tool_choice");
    expect_chat_bad("\"tool_choice\":\"required\"", "tool_choice");
    expect_chat_bad("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                    "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}",
                    "tool_choice");
    expect_chat_ok("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                   "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}");
    expect_chat_ok("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                   "\"tool_choice\":\"required\"");
    expect_chat_bad("\"model\":5", "model");
}

static void test_shapes(void)
{
    struct gw_arena *a = gw_arena_create(0);
    struct gw_req r;
    struct gw_req_err e;
    /* not JSON, not an object */
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, "{\"messages\":", &r, &e, a), ERR_INVAL);
    CHECK_EQ_INT(e.status, 400);
    CHECK(e.param == NULL);
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, "[1,2]", &r, &e, a), ERR_INVAL);
    CHECK_EQ_INT(e.status, 400);
    /* messages */
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, "{}", &r, &e, a), ERR_INVAL);
    CHECK_STREQ(e.param, "messages");
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, "{\"messages\":[]}", &r, &e, a), ERR_INVAL);
    CHECK_STREQ(e.param, "messages");
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, "{\"messages\":[{\"content\":\"x\"}]}", &r, &e, a),
                 ERR_INVAL);
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}",
                       &r, &e, a),
                 ERR_INVAL);
    CHECK_EQ_INT(
        parse(GW_REQ_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":3}]}", &r, &e, a),
        ERR_INVAL);
    /* unknown model: 404 model_not_found */
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, "{\"model\":\"gpt-9\"," MSGS "}", &r, &e, a), ERR_INVAL);
    CHECK_EQ_INT(e.status, 404);
    CHECK_STREQ(e.code, "model_not_found");
    CHECK(strstr(e.message, "gpt-9") != NULL);
    /* completions: prompt forms */
    CHECK_EQ_INT(parse(GW_REQ_KIND_COMPLETION, "{\"prompt\":\"abc\"}", &r, &e, a), 0);
    CHECK_STREQ(r.prompt, "abc");
    CHECK_EQ_INT(parse(GW_REQ_KIND_COMPLETION, "{\"prompt\":[\"abc\"]}", &r, &e, a), 0);
    CHECK_STREQ(r.prompt, "abc");
    CHECK_EQ_INT(parse(GW_REQ_KIND_COMPLETION, "{\"prompt\":[1,2,3]}", &r, &e, a), 0);
    CHECK(r.prompt == NULL);
    CHECK_EQ_INT(r.n_prompt_ids, 3);
    CHECK_EQ_INT(r.prompt_ids[2], 3);
    CHECK_EQ_INT(parse(GW_REQ_KIND_COMPLETION, "{\"prompt\":[1,-2]}", &r, &e, a), ERR_INVAL);
    CHECK_STREQ(e.param, "prompt");
    CHECK_EQ_INT(parse(GW_REQ_KIND_COMPLETION, "{\"prompt\":[\"a\",\"b\"]}", &r, &e, a), ERR_INVAL);
    CHECK_EQ_INT(parse(GW_REQ_KIND_COMPLETION, "{}", &r, &e, a), ERR_INVAL);
    CHECK_STREQ(e.param, "prompt");
    CHECK_EQ_INT(parse(GW_REQ_KIND_COMPLETION, "{\"prompt\":\"a\",\"echo\":true}", &r, &e, a),
                 ERR_INVAL);
    CHECK_STREQ(e.param, "echo");
    CHECK_EQ_INT(parse(GW_REQ_KIND_COMPLETION, "{\"prompt\":\"a\",\"logprobs\":3}", &r, &e, a), 0);
    CHECK(r.logprobs);
    CHECK_EQ_INT(r.top_logprobs, 3);
    CHECK_EQ_INT(parse(GW_REQ_KIND_COMPLETION, "{\"prompt\":\"a\",\"logprobs\":6}", &r, &e, a),
                 ERR_INVAL);
    CHECK_STREQ(e.param, "logprobs");
    CHECK_EQ_INT(parse(GW_REQ_KIND_COMPLETION, "{\"prompt\":\"a\",\"temperature\":9}", &r, &e, a),
                 ERR_INVAL);
    CHECK_STREQ(e.param, "temperature");
    gw_arena_destroy(a);
}

static void test_context(void)
{
    struct gw_arena *a = gw_arena_create(0);
    struct gw_req r;
    struct gw_req_err e;
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, "{" MSGS ",\"max_tokens\":100}", &r, &e, a), 0);
    CHECK_EQ_INT(gw_req_check_context(&r, 924, 1024, &e), 0); /* exactly full: ok */
    CHECK_EQ_INT(gw_req_check_context(&r, 925, 1024, &e), ERR_INVAL);
    CHECK_EQ_INT(e.status, 400);
    CHECK_STREQ(e.code, "context_length_exceeded");
    CHECK_STREQ(e.param, "messages");
    CHECK(strstr(e.message, "maximum context length is 1024 tokens") != NULL);
    CHECK(strstr(e.message, "925") != NULL);
    CHECK(strstr(e.message, "1025") != NULL);
    /* no max_tokens: filled with what is left */
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, "{" MSGS "}", &r, &e, a), 0);
    CHECK_EQ_INT(gw_req_check_context(&r, 1000, 1024, &e), 0);
    CHECK_EQ_INT(r.max_tokens, 24);
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, "{" MSGS "}", &r, &e, a), 0);
    CHECK_EQ_INT(gw_req_check_context(&r, 1024, 1024, &e), ERR_INVAL);
    CHECK_STREQ(e.code, "context_length_exceeded");
    gw_arena_destroy(a);
}

/* logit_bias, stop_token_ids, min_tokens, parallel_tool_calls: values, clamps and errors */
static void test_request_surface(void)
{
    struct gw_arena *a = gw_arena_create(0);
    struct gw_req r;
    struct gw_req_err e;
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT,
                       "{" MSGS ",\"logit_bias\":{\"5809\":-100,\"7\":250.5,\"0\":-1e9},"
                       "\"stop_token_ids\":[3,9],\"min_tokens\":4,\"max_tokens\":4,"
                       "\"parallel_tool_calls\":false}",
                       &r, &e, a),
                 0);
    CHECK_EQ_INT(r.n_bias, 3);
    CHECK_EQ_INT(r.bias_ids[0], 5809);
    CHECK_NEAR(r.bias_vals[0], -100.0, 0);
    CHECK_NEAR(r.bias_vals[1], 100.0, 0); /* clamped, as vLLM */
    CHECK_NEAR(r.bias_vals[2], -100.0, 0);
    CHECK_EQ_INT(r.n_stop_ids, 2);
    CHECK_EQ_INT(r.stop_ids[1], 9);
    CHECK_EQ_INT(r.min_tokens, 4);
    CHECK(!r.parallel_tool_calls);
    CHECK_EQ_INT(gw_req_check_vocab(&r, 6000, &e), 0);
    CHECK_EQ_INT(gw_req_check_vocab(&r, 5809, &e), ERR_INVAL);
    CHECK_STREQ(e.param, "logit_bias");
    CHECK_EQ_INT(
        parse(GW_REQ_KIND_COMPLETION, "{\"prompt\":\"x\",\"stop_token_ids\":[70]}", &r, &e, a), 0);
    CHECK_EQ_INT(gw_req_check_vocab(&r, 70, &e), ERR_INVAL);
    CHECK_STREQ(e.param, "stop_token_ids");
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, "{" MSGS "}", &r, &e, a), 0);
    CHECK(r.parallel_tool_calls);
    CHECK_EQ_INT(r.n_bias + r.n_stop_ids + (int)r.min_tokens, 0);
    /* min_tokens above the max_tokens left by the context: 400 */
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, "{" MSGS ",\"min_tokens\":30}", &r, &e, a), 0);
    CHECK_EQ_INT(gw_req_check_context(&r, 1000, 1024, &e), ERR_INVAL);
    CHECK_STREQ(e.param, "min_tokens");
    expect_chat_bad("\"logit_bias\":[1]", "logit_bias");
    expect_chat_bad("\"logit_bias\":\"x\"", "logit_bias");
    expect_chat_bad("\"logit_bias\":{\"abc\":1}", "logit_bias");
    expect_chat_bad("\"logit_bias\":{\"-1\":1}", "logit_bias");
    expect_chat_bad("\"logit_bias\":{\"1.5\":1}", "logit_bias");
    expect_chat_bad("\"logit_bias\":{\"99999999999\":1}", "logit_bias");
    expect_chat_bad("\"logit_bias\":{\"1\":\"x\"}", "logit_bias");
    expect_chat_bad("\"logit_bias\":{\"\":1}", "logit_bias");
    expect_chat_bad("\"stop_token_ids\":5", "stop_token_ids");
    expect_chat_bad("\"stop_token_ids\":[-1]", "stop_token_ids");
    expect_chat_bad("\"stop_token_ids\":[1.5]", "stop_token_ids");
    expect_chat_bad("\"stop_token_ids\":[\"1\"]", "stop_token_ids");
    expect_chat_bad("\"min_tokens\":-1", "min_tokens");
    expect_chat_bad("\"min_tokens\":1.5", "min_tokens");
    expect_chat_bad("\"min_tokens\":5,\"max_tokens\":4", "min_tokens");
    expect_chat_bad("\"parallel_tool_calls\":1", "parallel_tool_calls");
    expect_chat_ok("\"logit_bias\":{},\"stop_token_ids\":[],\"min_tokens\":0");
    expect_chat_ok("\"logit_bias\":null,\"stop_token_ids\":null,\"parallel_tool_calls\":true");
    gw_arena_destroy(a);
}

/* generation_config defaults fill only what the request left out */
static void test_apply_defaults(void)
{
    struct gw_arena *a = gw_arena_create(0);
    struct gw_req r;
    struct gw_req_err e;
    struct gw_req_defaults d = {.has_temperature = true,
                                .has_top_p = true,
                                .has_top_k = true,
                                .has_max_tokens = true,
                                .temperature = 0.7,
                                .top_p = 0.8,
                                .top_k = 20,
                                .max_tokens = 50};
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, "{" MSGS ",\"top_p\":0.5}", &r, &e, a), 0);
    gw_req_apply_defaults(&r, &d);
    CHECK_NEAR(r.temperature, 0.7, 1e-12);
    CHECK_NEAR(r.top_p, 0.5, 0);
    CHECK_EQ_INT(r.top_k, 20);
    CHECK_NEAR(r.min_p, 0.0, 0);
    CHECK_NEAR(r.repetition_penalty, 1.0, 0);
    CHECK_EQ_INT(gw_req_check_context(&r, 10, 1024, &e), 0);
    CHECK_EQ_INT(r.max_tokens, 50); /* max_new_tokens caps the default */
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT, "{" MSGS ",\"temperature\":0,\"top_k\":-1}", &r, &e, a),
                 0);
    gw_req_apply_defaults(&r, &d);
    CHECK_NEAR(r.temperature, 0.0, 0);
    CHECK_EQ_INT(r.top_k, 0);
    CHECK_EQ_INT(gw_req_check_context(&r, 1000, 1024, &e), 0);
    CHECK_EQ_INT(r.max_tokens, 24);
    gw_req_apply_defaults(&r, NULL);
    gw_arena_destroy(a);
}

/* the developer role reaches the template as system (OpenAI's newer name for it) */
static void test_developer_role(void)
{
    struct gw_arena *a = gw_arena_create(0);
    struct gw_req r;
    struct gw_req_err e;
    CHECK_EQ_INT(parse(GW_REQ_KIND_CHAT,
                       "{\"messages\":[{\"role\":\"developer\",\"content\":\"Be brief.\"},"
                       "{\"role\":\"user\",\"content\":\"hi\"}]}",
                       &r, &e, a),
                 0);
    cJSON *m0 = cJSON_GetArrayItem(r.messages, 0);
    cJSON *role = cJSON_GetObjectItemCaseSensitive(m0, "role");
    CHECK(role && cJSON_IsString(role) && strcmp(role->valuestring, "system") == 0);
    cJSON *content = cJSON_GetObjectItemCaseSensitive(m0, "content");
    CHECK(content && strcmp(content->valuestring, "Be brief.") == 0);
    gw_arena_destroy(a);
}

int main(void)
{
    test_developer_role();
    test_request_surface();
    test_apply_defaults();
    test_defaults();
    test_response_format();
    test_forced_tools();
    test_values();
    test_ranges();
    test_shapes();
    test_context();
    return test_result();
}
