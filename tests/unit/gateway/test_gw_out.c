/* gw_out: the output pipeline in byte mode (each id is one byte of text): stop strings never
 * leak, the <think> split, tool calls, and the same result whether the text arrives at once
 * or byte by byte (the streamed == non-streamed guarantee). */
#include <string.h>

#include <cjson/cJSON.h>

#include "gw_out.h"
#include "test.h"

struct result {
    struct buf reasoning, content, args;
    char name[256];
    int n_tools;
    bool stopped;
};

static int g_tools_max;  /* gw_out.tools_max for run() */
static int g_stop_after; /* gw_out.stop_after for run() */

static void run(const char *text, size_t chunk, const char *const *stop, int n_stop, bool reasoning,
                bool thinking, const char *tools, struct result *res)
{
    struct gw_out o;
    struct gw_out_delta d;
    memset(res, 0, sizeof(*res));
    buf_init(&res->reasoning);
    buf_init(&res->content);
    buf_init(&res->args);
    CHECK_EQ_INT(gw_out_init(&o, NULL, stop, n_stop, reasoning, thinking, tools, 42), 0);
    o.tools_max = g_tools_max;
    o.stop_after = g_stop_after;
    gw_out_delta_init(&d);
    size_t n = strlen(text);
    for (size_t i = 0; i < n && !res->stopped; i += chunk) {
        int32_t ids[64];
        size_t k = 0;
        for (; k < chunk && i + k < n; k++)
            ids[k] = (unsigned char)text[i + k];
        res->stopped = gw_out_feed(&o, ids, k, &d);
        buf_append(&res->reasoning, d.reasoning.data ? d.reasoning.data : "", d.reasoning.len);
        buf_append(&res->content, d.content.data ? d.content.data : "", d.content.len);
        for (int t = 0; t < d.n_tools; t++) {
            if (d.tools[t].name[0])
                snprintf(res->name, sizeof(res->name), "%s", d.tools[t].name);
            buf_append(&res->args, d.tools[t].args.data ? d.tools[t].args.data : "",
                          d.tools[t].args.len);
        }
        gw_out_delta_reset(&d);
    }
    gw_out_flush(&o, &d);
    buf_append(&res->reasoning, d.reasoning.data ? d.reasoning.data : "", d.reasoning.len);
    buf_append(&res->content, d.content.data ? d.content.data : "", d.content.len);
    for (int t = 0; t < d.n_tools; t++) {
        if (d.tools[t].name[0])
            snprintf(res->name, sizeof(res->name), "%s", d.tools[t].name);
        buf_append(&res->args, d.tools[t].args.data ? d.tools[t].args.data : "",
                      d.tools[t].args.len);
    }
    res->n_tools = gw_out_tool_count(&o);
    if (res->n_tools == 1) { /* one call: its streamed pieces add up to it */
        const char *id, *name, *args;
        CHECK_EQ_INT(gw_out_tool_get(&o, 0, &id, &name, &args), 0);
        CHECK(strncmp(id, "call_", 5) == 0);
        CHECK_STREQ(name, res->name);
        CHECK_STREQ(args, res->args.data ? res->args.data : ""); /* streamed pieces == whole */
    }
    gw_out_delta_deinit(&d);
    gw_out_deinit(&o);
}

static void result_free(struct result *r)
{
    buf_deinit(&r->reasoning);
    buf_deinit(&r->content);
    buf_deinit(&r->args);
}

static const char *s(const struct buf *b)
{
    return b->data ? b->data : "";
}

static void test_stop(void)
{
    const char *stop[] = {"STOP", "xyz"};
    size_t chunks[] = {1, 2, 3, 64};
    for (size_t c = 0; c < 4; c++) {
        struct result r;
        run("hello STOP world", chunks[c], stop, 2, false, false, NULL, &r);
        CHECK(r.stopped);
        CHECK_STREQ(s(&r.content), "hello ");
        result_free(&r);
        /* a prefix of a stop string that never completes is released at the end */
        run("abc STO", chunks[c], stop, 2, false, false, NULL, &r);
        CHECK(!r.stopped);
        CHECK_STREQ(s(&r.content), "abc STO");
        result_free(&r);
        /* min_tokens 9: the first STOP (tokens 2..5) is text, the one at tokens 11..14 stops */
        g_stop_after = 9;
        run("aSTOPbcdefSTOPgh", chunks[c], stop, 2, false, false, NULL, &r);
        CHECK(r.stopped);
        CHECK_STREQ(s(&r.content), "aSTOPbcdef");
        result_free(&r);
        g_stop_after = 0;
    }
}

static void test_reasoning(void)
{
    size_t chunks[] = {1, 5, 64};
    for (size_t c = 0; c < 3; c++) {
        struct result r;
        run("let me think</think>\n\nThe answer is 4.", chunks[c], NULL, 0, true, true, NULL, &r);
        CHECK_STREQ(s(&r.reasoning), "let me think");
        CHECK_STREQ(s(&r.content), "The answer is 4.");
        result_free(&r);
        /* thinking off: everything is content */
        run("plain answer", chunks[c], NULL, 0, true, false, NULL, &r);
        CHECK_EQ_INT(r.reasoning.len, 0);
        CHECK_STREQ(s(&r.content), "plain answer");
        result_free(&r);
        /* stop string inside the answer, after reasoning */
        const char *stop[] = {"is"};
        run("hmm</think>The answer is 4.", chunks[c], stop, 1, true, true, NULL, &r);
        CHECK_STREQ(s(&r.reasoning), "hmm");
        CHECK_STREQ(s(&r.content), "The answer ");
        CHECK(r.stopped);
        result_free(&r);
    }
}

static void test_tools(void)
{
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                        "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"
                        "\"string\"},\"days\":{\"type\":\"integer\"}}}}}]";
    const char *text =
        "ok</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
        "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
    size_t chunks[] = {1, 7, 64};
    for (size_t c = 0; c < 3; c++) {
        struct result r;
        run(text, chunks[c], NULL, 0, true, true, tools, &r);
        CHECK_STREQ(s(&r.reasoning), "ok");
        CHECK(strstr(s(&r.content), "<tool_call>") == NULL); /* markup never leaks */
        CHECK_EQ_INT(r.n_tools, 1);
        CHECK_STREQ(r.name, "get_weather");
        cJSON *args = cJSON_Parse(s(&r.args));
        CHECK(args != NULL);
        cJSON *city = cJSON_GetObjectItemCaseSensitive(args, "city");
        cJSON *days = cJSON_GetObjectItemCaseSensitive(args, "days");
        CHECK(city && cJSON_IsString(city) && strcmp(city->valuestring, "Paris") == 0);
        CHECK(days && cJSON_IsNumber(days) && days->valuedouble == 3);
        cJSON_Delete(args);
        result_free(&r);
    }
    /* hermes JSON form */
    struct result r;
    run("<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>",
        3, NULL, 0, true, false, tools, &r);
    CHECK_EQ_INT(r.n_tools, 1);
    CHECK_STREQ(r.name, "get_weather");
    cJSON *args = cJSON_Parse(s(&r.args));
    CHECK(args && strcmp(cJSON_GetObjectItemCaseSensitive(args, "city")->valuestring, "Oslo") == 0);
    cJSON_Delete(args);
    result_free(&r);
    /* two calls; parallel_tool_calls false (tools_max 1) passes on only the first, streamed
     * and whole */
    const char *two = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                      "\"Oslo\"}}</tool_call>\n<tool_call>{\"name\": \"get_weather\", "
                      "\"arguments\": {\"city\": \"Rome\"}}</tool_call>";
    run(two, 5, NULL, 0, true, false, tools, &r);
    CHECK_EQ_INT(r.n_tools, 2);
    result_free(&r);
    g_tools_max = 1;
    for (size_t c = 1; c < 64; c += 34) {
        run(two, c, NULL, 0, true, false, tools, &r);
        CHECK_EQ_INT(r.n_tools, 1);
        CHECK(strstr(s(&r.args), "Oslo") != NULL);
        CHECK(strstr(s(&r.args), "Rome") == NULL);
        result_free(&r);
    }
    g_tools_max = 0;
}

int main(void)
{
    test_stop();
    test_reasoning();
    test_tools();
    return test_result();
}
