/* gw_responses: the Responses request mapped onto a chat body (checked through gw_req_parse,
 * the parser the chat endpoint uses), the errors in the Responses request's terms, and the
 * output: one Response object, or its SSE events, built from the real gw_out pipeline in byte
 * mode; the streamed events add up to the non-streamed object. */
#include <string.h>

#include <cjson/cJSON.h>

#include "common/buf.h"
#include "gw_arena.h"
#include "gw_out.h"
#include "gw_responses.h"
#include "gw_sse.h"
#include "test.h"

#define MODEL "qwen3.6-35b-a3b"

/* map body, then parse the chat body as the chat endpoint does */
static cJSON *map_ok(struct gw_arena *a, const char *body, struct gw_req *r)
{
    char *chat = NULL;
    size_t n = 0;
    cJSON *root = NULL;
    struct gw_req_err e;
    int rc = gw_responses_map(body, strlen(body), a, &chat, &n, &root, &e);
    if (rc != 0)
        fprintf(stderr, "map failed: %s (param %s)\n", e.message, e.param ? e.param : "-");
    CHECK_EQ_INT(rc, 0);
    if (rc)
        return NULL;
    rc = gw_req_parse(r, GW_REQ_KIND_CHAT, chat, n, MODEL, a, &e);
    if (rc != 0)
        fprintf(stderr, "chat parse failed: %s\n", e.message);
    CHECK_EQ_INT(rc, 0);
    return r->root;
}

static const char *msg_str(const cJSON *msgs, int i, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(msgs, i), key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_map_string(void)
{
    struct gw_arena *a = gw_arena_create(0);
    struct gw_req r;
    cJSON *chat = map_ok(a,
                         "{\"model\":\"" MODEL "\",\"input\":\"Hi\",\"instructions\":\"Be brief.\","
                         "\"max_output_tokens\":64,\"temperature\":0.5,\"top_p\":0.9,"
                         "\"stream\":true,\"parallel_tool_calls\":false,\"store\":true,"
                         "\"metadata\":{\"k\":\"v\"},\"user\":\"u1\",\"reasoning\":{\"effort\":"
                         "\"none\"},\"text\":{\"format\":{\"type\":\"text\"}},\"unknown\":1}",
                         &r);
    CHECK(chat != NULL);
    CHECK_EQ_INT(cJSON_GetArraySize(r.messages), 2);
    CHECK_STREQ(msg_str(r.messages, 0, "role"), "system");
    CHECK_STREQ(msg_str(r.messages, 0, "content"), "Be brief.");
    CHECK_STREQ(msg_str(r.messages, 1, "role"), "user");
    CHECK_STREQ(msg_str(r.messages, 1, "content"), "Hi");
    CHECK_EQ_INT(r.max_tokens, 64);
    CHECK_NEAR(r.temperature, 0.5, 1e-12);
    CHECK_NEAR(r.top_p, 0.9, 1e-12);
    CHECK(r.stream);
    CHECK(!r.parallel_tool_calls);
    CHECK_EQ_INT(r.enable_thinking, 0);                        /* reasoning.effort none */
    CHECK(!cJSON_GetObjectItemCaseSensitive(chat, "unknown")); /* ignored, not passed on */
    CHECK(!cJSON_GetObjectItemCaseSensitive(chat, "metadata"));
    gw_arena_destroy(a);
}

static void test_map_items(void)
{
    struct gw_arena *a = gw_arena_create(0);
    struct gw_req r;
    const char *body =
        "{\"input\":["
        "{\"role\":\"developer\",\"content\":\"sys\"},"
        "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":"
        "\"weather?\"}]},"
        "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[],\"content\":[{\"type\":"
        "\"reasoning_text\",\"text\":\"think\"}]},"
        "{\"type\":\"function_call\",\"call_id\":\"call_a\",\"name\":\"get_weather\","
        "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"},"
        "{\"type\":\"function_call\",\"call_id\":\"call_b\",\"name\":\"get_time\","
        "\"arguments\":\"{}\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"call_a\",\"output\":\"sunny\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"call_b\",\"output\":\"noon\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Sunny.\"}]}],"
        "\"tools\":[{\"type\":\"function\",\"name\":\"get_weather\",\"description\":\"w\","
        "\"parameters\":{\"type\":\"object\"},\"strict\":true},"
        "{\"type\":\"function\",\"name\":\"get_time\"}],"
        "\"tool_choice\":{\"type\":\"function\",\"name\":\"get_time\"}}";
    CHECK(map_ok(a, body, &r) != NULL);
    cJSON *m = r.messages;
    CHECK_EQ_INT(cJSON_GetArraySize(m), 6);
    CHECK_STREQ(msg_str(m, 0, "role"), "system"); /* developer -> system, as chat */
    CHECK_STREQ(msg_str(m, 1, "role"), "user");
    cJSON *parts = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(m, 1), "content");
    CHECK_EQ_INT(cJSON_GetArraySize(parts), 1);
    CHECK_STREQ(msg_str(parts, 0, "type"), "text");
    CHECK_STREQ(msg_str(parts, 0, "text"), "weather?");
    /* both calls in one assistant message, with the reasoning before them */
    CHECK_STREQ(msg_str(m, 2, "role"), "assistant");
    CHECK_STREQ(msg_str(m, 2, "reasoning_content"), "think");
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(m, 2), "tool_calls");
    CHECK_EQ_INT(cJSON_GetArraySize(calls), 2);
    CHECK_STREQ(msg_str(calls, 0, "id"), "call_a");
    cJSON *fn = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(calls, 0), "function");
    CHECK_STREQ(cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring, "get_weather");
    CHECK_STREQ(cJSON_GetObjectItemCaseSensitive(fn, "arguments")->valuestring,
                "{\"city\":\"Paris\"}");
    CHECK_STREQ(msg_str(calls, 1, "id"), "call_b");
    CHECK_STREQ(msg_str(m, 3, "role"), "tool");
    CHECK_STREQ(msg_str(m, 3, "tool_call_id"), "call_a");
    CHECK_STREQ(msg_str(m, 3, "content"), "sunny");
    CHECK_STREQ(msg_str(m, 4, "tool_call_id"), "call_b");
    CHECK_STREQ(msg_str(m, 5, "role"), "assistant");
    /* flat tools -> chat tools; the named tool_choice -> chat's shape */
    CHECK_EQ_INT(cJSON_GetArraySize(r.tools), 2);
    cJSON *t0 = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(r.tools, 0), "function");
    CHECK_STREQ(cJSON_GetObjectItemCaseSensitive(t0, "name")->valuestring, "get_weather");
    CHECK_STREQ(cJSON_GetObjectItemCaseSensitive(t0, "description")->valuestring, "w");
    CHECK(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(t0, "parameters")));
    CHECK_EQ_INT(r.tool_choice, GW_TOOL_CHOICE_NAMED);
    CHECK_STREQ(r.tool_choice_name, "get_time");
    gw_arena_destroy(a);
}

static void test_map_errors(void)
{
    static const struct {
        const char *body;
        const char *param; /* NULL: none */
        const char *msg;   /* a piece of the message */
    } cases[] = {
        {"[1]", NULL, "JSON object"},
        {"{\"input\":", NULL, "not valid JSON"},
        {"{}", "input", "required"},
        {"{\"input\":[]}", "input", "non-empty"},
        {"{\"input\":7}", "input", "string or a non-empty list"},
        {"{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}", "previous_response_id",
         "stateless"},
        {"{\"input\":\"x\",\"conversation\":\"c\"}", "conversation", "stateless"},
        {"{\"input\":\"x\",\"background\":true}", "background", "not supported"},
        {"{\"input\":\"x\",\"instructions\":1}", "instructions", "string"},
        {"{\"input\":[{\"role\":\"tool\",\"content\":\"x\"}]}", "input[0].role", "user"},
        {"{\"input\":[5]}", "input[0]", "object"},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\"}]}]}",
         "input[0].content[0].type", "input_image"},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\"}]}]}",
         "input[0].content[0].text", "string"},
        {"{\"input\":[{\"role\":\"user\",\"content\":3}]}", "input[0].content", "string"},
        {"{\"input\":[{\"type\":\"function_call\",\"name\":\"f\",\"arguments\":\"{}\"}]}",
         "input[0].call_id", "string"},
        {"{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\"}]}", "input[0].output",
         "required"},
        {"{\"input\":[{\"type\":\"item_reference\",\"id\":\"x\"}]}", "input[0].type",
         "item_reference"},
        {"{\"input\":[{\"type\":\"reasoning\",\"summary\":[]}]}", "input", "no message"},
        {"{\"input\":\"x\",\"tools\":{}}", "tools", "list"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}", "tools[0].type", "web_search"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"function\"}]}", "tools[0].name", "non-empty"},
        {"{\"input\":\"x\",\"tool_choice\":{\"type\":\"file_search\"}}", "tool_choice", "function"},
        {"{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\"}}}", "text.format",
         "not supported"},
        {"{\"input\":\"x\",\"text\":{\"format\":{}}}", "text.format", "required"},
        {"{\"input\":\"x\",\"text\":5}", "text", "object"},
        {"{\"input\":\"x\",\"reasoning\":{\"effort\":\"max\"}}", "reasoning.effort", "one of"},
        {"{\"input\":\"x\",\"reasoning\":1}", "reasoning", "object"},
        {"{\"input\":\"x\",\"max_output_tokens\":0}", "max_output_tokens", "[1,"},
        {"{\"input\":\"x\",\"max_output_tokens\":1.5}", "max_output_tokens", "integer"},
        {"{\"input\":\"x\",\"metadata\":{\"k\":1}}", "metadata", "strings"},
        {"{\"input\":\"x\",\"store\":\"yes\"}", "store", "boolean"},
        {"{\"input\":\"x\",\"user\":1}", "user", "string"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_arena *a = gw_arena_create(0);
        char *chat = NULL;
        size_t n = 0;
        cJSON *root = NULL;
        struct gw_req_err e;
        int rc = gw_responses_map(cases[i].body, strlen(cases[i].body), a, &chat, &n, &root, &e);
        if (rc == 0 || e.status != 400 || (cases[i].param && !e.param) ||
            (cases[i].param && strcmp(e.param, cases[i].param) != 0) ||
            (!cases[i].param && e.param) || !strstr(e.message, cases[i].msg))
            fprintf(stderr, "case %zu (%s): rc %d status %d param %s msg %s\n", i, cases[i].body,
                    rc, e.status, e.param ? e.param : "-", e.message);
        CHECK(rc != 0);
        CHECK_EQ_INT(e.status, 400);
        CHECK(cases[i].param ? e.param && strcmp(e.param, cases[i].param) == 0 : !e.param);
        CHECK(strstr(e.message, cases[i].msg) != NULL);
        gw_arena_destroy(a);
    }
    /* chat-path errors name the Responses field */
    CHECK_STREQ(gw_responses_param("messages"), "input");
    CHECK_STREQ(gw_responses_param("max_completion_tokens"), "max_output_tokens");
    CHECK_STREQ(gw_responses_param("reasoning_effort"), "reasoning.effort");
    CHECK_STREQ(gw_responses_param("temperature"), "temperature");
}

// ---- output ----

#define TOOLS                                                                                      \
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"     \
    "\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":"                \
    "\"integer\"}}}}}]"
#define TEXT                                                                                       \
    "<think>\nWeather.\n</think>\n\nLet me check.<tool_call>\n<function=get_weather>\n"            \
    "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n"      \
    "</tool_call>"

/* run text through gw_out (byte mode, chunk bytes a step) into a gw_resp; returns the
 * non-streamed JSON (stream false) or NULL with the events in *events */
static char *build(const char *text, size_t chunk, const char *tools, const char *finish,
                   const cJSON *req, struct buf *events)
{
    struct gw_out o;
    struct gw_out_delta d;
    struct gw_resp r;
    CHECK_EQ_INT(gw_out_init(&o, NULL, NULL, 0, true, false, tools, 7), 0);
    gw_out_delta_init(&d);
    gw_resp_init(&r, req, "abc", MODEL, 1700000000, events != NULL);
    if (events)
        gw_resp_begin(&r, events);
    size_t n = strlen(text);
    for (size_t i = 0; i < n; i += chunk) {
        int32_t ids[256];
        size_t k = 0;
        for (; k < chunk && i + k < n; k++)
            ids[k] = (unsigned char)text[i + k];
        gw_out_feed(&o, ids, k, &d);
        if (!gw_out_delta_is_empty(&d))
            gw_resp_delta(&r, &d, events);
        gw_out_delta_reset(&d);
    }
    gw_out_flush(&o, &d);
    if (!gw_out_delta_is_empty(&d))
        gw_resp_delta(&r, &d, events);
    struct gw_req chat;
    memset(&chat, 0, sizeof(chat));
    chat.temperature = 0.7;
    chat.top_p = 0.8;
    chat.parallel_tool_calls = true;
    char *s = gw_resp_end(&r, finish, 11, 22, &chat, events);
    gw_resp_deinit(&r);
    gw_out_delta_deinit(&d);
    gw_out_deinit(&o);
    return s;
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double jnum(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static void test_output_object(void)
{
    cJSON *req = cJSON_Parse("{\"input\":\"x\",\"instructions\":\"I\",\"metadata\":{\"a\":\"b\"},"
                             "\"tools\":[{\"type\":\"function\",\"name\":\"get_weather\"}],"
                             "\"max_output_tokens\":100,\"user\":\"u\"}");
    char *s = build(TEXT, 1000, TOOLS, "tool_calls", req, NULL);
    cJSON *j = cJSON_Parse(s);
    CHECK(j != NULL);
    CHECK_STREQ(jstr(j, "id"), "resp_abc");
    CHECK_STREQ(jstr(j, "object"), "response");
    CHECK_EQ_INT(jnum(j, "created_at"), 1700000000);
    CHECK_STREQ(jstr(j, "status"), "completed");
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "incomplete_details")));
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "error")));
    CHECK_STREQ(jstr(j, "model"), MODEL);
    CHECK_STREQ(jstr(j, "instructions"), "I");
    CHECK_STREQ(jstr(j, "user"), "u");
    CHECK_EQ_INT(jnum(j, "max_output_tokens"), 100);
    CHECK_NEAR(jnum(j, "temperature"), 0.7, 1e-9);
    CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "store")));
    CHECK_STREQ(jstr(cJSON_GetObjectItemCaseSensitive(j, "metadata"), "a"), "b");
    CHECK_STREQ(jstr(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "tools"), 0), "name"),
                "get_weather");
    cJSON *out = cJSON_GetObjectItemCaseSensitive(j, "output");
    CHECK_EQ_INT(cJSON_GetArraySize(out), 3);
    cJSON *rs = cJSON_GetArrayItem(out, 0), *msg = cJSON_GetArrayItem(out, 1),
          *fc = cJSON_GetArrayItem(out, 2);
    CHECK_STREQ(jstr(rs, "type"), "reasoning");
    CHECK_STREQ(jstr(rs, "id"), "rs_abc_0");
    cJSON *rc = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(rs, "content"), 0);
    CHECK_STREQ(jstr(rc, "type"), "reasoning_text");
    CHECK(strstr(jstr(rc, "text"), "Weather.") != NULL);
    CHECK_STREQ(jstr(msg, "type"), "message");
    CHECK_STREQ(jstr(msg, "role"), "assistant");
    CHECK_STREQ(jstr(msg, "status"), "completed");
    cJSON *part = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(msg, "content"), 0);
    CHECK_STREQ(jstr(part, "type"), "output_text");
    CHECK_STREQ(jstr(part, "text"), "Let me check.");
    CHECK(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(part, "annotations")));
    CHECK_STREQ(jstr(fc, "type"), "function_call");
    CHECK(strncmp(jstr(fc, "call_id"), "call_", 5) == 0);
    CHECK_STREQ(jstr(fc, "name"), "get_weather");
    cJSON *args = cJSON_Parse(jstr(fc, "arguments"));
    CHECK_STREQ(jstr(args, "city"), "Paris");
    CHECK_EQ_INT(jnum(args, "days"), 3);
    cJSON_Delete(args);
    cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
    CHECK_EQ_INT(jnum(u, "input_tokens"), 11);
    CHECK_EQ_INT(jnum(u, "output_tokens"), 22);
    CHECK_EQ_INT(jnum(u, "total_tokens"), 33);
    CHECK_EQ_INT(jnum(cJSON_GetObjectItemCaseSensitive(u, "input_tokens_details"), "cached_tokens"),
                 0);
    CHECK_EQ_INT(
        jnum(cJSON_GetObjectItemCaseSensitive(u, "output_tokens_details"), "reasoning_tokens"), 0);
    cJSON_Delete(j);
    free(s);

    /* cut by max_output_tokens inside the reasoning: incomplete, and an empty message */
    s = build("<think>\nStill thinking", 3, NULL, "length", req, NULL);
    j = cJSON_Parse(s);
    CHECK_STREQ(jstr(j, "status"), "incomplete");
    CHECK_STREQ(jstr(cJSON_GetObjectItemCaseSensitive(j, "incomplete_details"), "reason"),
                "max_output_tokens");
    out = cJSON_GetObjectItemCaseSensitive(j, "output");
    CHECK_EQ_INT(cJSON_GetArraySize(out), 2);
    CHECK_STREQ(jstr(cJSON_GetArrayItem(out, 0), "type"), "reasoning");
    CHECK_STREQ(jstr(cJSON_GetArrayItem(out, 1), "type"), "message");
    CHECK_STREQ(jstr(cJSON_GetArrayItem(out, 1), "status"), "incomplete");
    cJSON_Delete(j);
    free(s);
    cJSON_Delete(req);
}

/* The events, parsed: sequence_number 0, 1, 2 ...; the SSE event name == data.type; the deltas
 * rebuild every item; response.completed carries the non-streamed object. */
static void test_output_stream(void)
{
    cJSON *req = cJSON_Parse("{\"input\":\"x\",\"stream\":true}");
    char *whole = build(TEXT, 1000, TOOLS, "tool_calls", req, NULL);
    size_t chunks[] = {1, 4, 1000};
    for (size_t c = 0; c < 3; c++) {
        struct buf ev, data;
        buf_init(&ev);
        buf_init(&data);
        CHECK(build(TEXT, chunks[c], TOOLS, "tool_calls", req, &ev) == NULL);
        struct buf text[8];
        for (int i = 0; i < 8; i++)
            buf_init(&text[i]);
        int seq = 0, n_added = 0, n_done = 0;
        char last[64] = "";
        cJSON *completed = NULL;
        size_t off = 0, k;
        while ((k = gw_sse_next(ev.data + off, ev.len - off, &data)) > 0) {
            CHECK(strncmp(ev.data + off, "event: ", 7) == 0);
            cJSON *e = cJSON_Parse(data.data);
            CHECK(e != NULL);
            const char *type = jstr(e, "type");
            CHECK(strncmp(ev.data + off + 7, type, strlen(type)) == 0);
            if (seq == 0)
                CHECK_STREQ(type, "response.created");
            if (seq == 1)
                CHECK_STREQ(type, "response.in_progress");
            CHECK_EQ_INT(jnum(e, "sequence_number"), seq);
            seq++;
            int idx = (int)jnum(e, "output_index");
            if (strstr(type, ".delta") && idx >= 0 && idx < 8)
                buf_puts(&text[idx], jstr(e, "delta"));
            n_added += strcmp(type, "response.output_item.added") == 0;
            n_done += strcmp(type, "response.output_item.done") == 0;
            snprintf(last, sizeof(last), "%s", type);
            if (strcmp(type, "response.completed") == 0)
                completed = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(e, "response"), true);
            cJSON_Delete(e);
            off += k;
        }
        CHECK_EQ_INT(off, ev.len);
        CHECK_EQ_INT(n_added, 3);
        CHECK_EQ_INT(n_done, 3);
        CHECK_STREQ(last, "response.completed");
        CHECK(completed != NULL);
        char *s = cJSON_PrintUnformatted(completed);
        CHECK_STREQ(s, whole); /* streamed == non-streamed */
        cJSON *out = cJSON_GetObjectItemCaseSensitive(completed, "output");
        CHECK_STREQ(
            jstr(cJSON_GetArrayItem(
                     cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(out, 1), "content"), 0),
                 "text"),
            text[1].data);
        CHECK_STREQ(jstr(cJSON_GetArrayItem(out, 2), "arguments"), text[2].data);
        free(s);
        cJSON_Delete(completed);
        for (int i = 0; i < 8; i++)
            buf_deinit(&text[i]);
        buf_deinit(&ev);
        buf_deinit(&data);
    }
    free(whole);

    /* an error after the head: one "error" event in the API's shape */
    struct gw_resp r;
    struct buf ev, data;
    buf_init(&ev);
    buf_init(&data);
    gw_resp_init(&r, req, "e", MODEL, 1, true);
    gw_resp_begin(&r, &ev);
    cJSON *err = cJSON_Parse("{\"message\":\"boom\",\"type\":\"server_error\",\"param\":null,"
                             "\"code\":\"engine_dead\"}");
    size_t before = ev.len;
    gw_resp_error_event(&r, err, &ev);
    CHECK(strncmp(ev.data + before, "event: error\n", 13) == 0);
    CHECK(gw_sse_next(ev.data + before, ev.len - before, &data) > 0);
    cJSON *e = cJSON_Parse(data.data);
    CHECK_STREQ(jstr(e, "type"), "error");
    CHECK_STREQ(jstr(e, "code"), "engine_dead");
    CHECK_STREQ(jstr(e, "message"), "boom");
    CHECK_EQ_INT(jnum(e, "sequence_number"), 2);
    cJSON_Delete(e);
    cJSON_Delete(err);
    gw_resp_deinit(&r);
    buf_deinit(&ev);
    buf_deinit(&data);
    cJSON_Delete(req);
}

int main(void)
{
    test_map_string();
    test_map_items();
    test_map_errors();
    test_output_object();
    test_output_stream();
    return test_result();
}
