/* The walk of docs/API.md's field list, code side (issue 21): the top-level fields the request
 * parsers read (gw_req.c and gw_responses.c compiled here with every lookup noted, and the keys
 * text/chat.c's chat template reads from the body) are known fields, the known fields of each
 * endpoint are exactly the documented rows, every row's value parses (a `refused` one is a 400
 * naming the field), an effect names tests that exist and mention the field, and unknown keys
 * are listed for the warning line. test_api_walk sends the same rows to a real gateway. */
#include <cjson/cJSON.h>

#include "field_rec.h"

#define cJSON_GetObjectItemCaseSensitive field_rec_get
#include "gw_req.c"
#undef cJSON_GetObjectItemCaseSensitive

#include <ctype.h>

#include "api_fields.h"
#include "gw_responses.h"
#include "test.h"

#define MODEL "qwen3.6-35b-a3b"

static struct api_field g_rows[API_FIELDS_MAX];
static int g_n;

static const char *const BASE[] = {"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                                   "{\"prompt\":\"hi\"}", "{\"input\":\"hi\"}"};

static int ep_index(unsigned ep)
{
    return ep == API_EP_CHAT ? 0 : ep == API_EP_COMPLETIONS ? 1 : 2;
}

/* base + with + name: value, as JSON text (free()) */
static char *body_of(const struct api_field *f, unsigned ep)
{
    cJSON *b = cJSON_Parse(BASE[ep_index(ep)]);
    if (f->with[0]) {
        cJSON *w = cJSON_Parse(f->with), *it;
        cJSON_ArrayForEach(it, w)
        {
            cJSON_DeleteItemFromObjectCaseSensitive(b, it->string);
            cJSON_AddItemToObject(b, it->string, cJSON_Duplicate(it, true));
        }
        cJSON_Delete(w);
    }
    cJSON_DeleteItemFromObjectCaseSensitive(b, f->name);
    cJSON_AddItemToObject(b, f->name, cJSON_Parse(f->value));
    char *s = cJSON_PrintUnformatted(b);
    cJSON_Delete(b);
    return s;
}

static bool documented(const char *name, unsigned ep)
{
    for (int i = 0; i < g_n; i++)
        if ((g_rows[i].eps & ep) && !strcmp(g_rows[i].name, name))
            return true;
    return false;
}

static bool resp_known(const char *name)
{
    const char *k;
    for (size_t i = 0; (k = gw_responses_known_field(i)); i++)
        if (!strcmp(k, name))
            return true;
    return false;
}

static bool known_for(unsigned ep, const char *name)
{
    if (ep == API_EP_RESPONSES)
        return resp_known(name);
    return gw_req_is_known_field(ep == API_EP_CHAT ? GW_REQ_KIND_CHAT : GW_REQ_KIND_COMPLETION,
                                 name);
}

/* every documented row is well formed; effect rows name tests that mention the field */
static void test_rows(void)
{
    for (int i = 0; i < g_n; i++) {
        const struct api_field *f = &g_rows[i];
        cJSON *v = cJSON_Parse(f->value), *w = f->with[0] ? cJSON_Parse(f->with) : NULL;
        if (!v || (f->with[0] && !cJSON_IsObject(w))) {
            fprintf(stderr, "docs/API.md:%d: `%s`: value or with is not JSON\n", f->line, f->name);
            CHECK(0);
        }
        cJSON_Delete(v);
        cJSON_Delete(w);
        if (f->cls == API_CLASS_EFFECT && !f->tested[0][0]) {
            fprintf(stderr, "docs/API.md:%d: `%s` has an effect but names no test\n", f->line,
                    f->name);
            CHECK(0);
        }
        for (int k = 0; k < API_TESTED_MAX && f->tested[k][0]; k++) {
            char *src = test_read_source(f->tested[k]);
            bool found = false;
            size_t n = strlen(f->name);
            for (const char *p = src ? strstr(src, f->name) : NULL; p && !found;
                 p = strstr(p + 1, f->name))
                found = (p == src || !(isalnum((unsigned char)p[-1]) || p[-1] == '_')) &&
                        !(isalnum((unsigned char)p[n]) || p[n] == '_');
            if (!found) {
                fprintf(stderr, "docs/API.md:%d: `%s`: %s %s\n", f->line, f->name, f->tested[k],
                        src ? "does not mention the field" : "does not exist");
                CHECK(0);
            }
            free(src);
        }
        /* one row per (field, endpoint) and class, except a field refused for some values */
        for (int j = 0; j < i; j++)
            if (!strcmp(g_rows[j].name, f->name) && (g_rows[j].eps & f->eps) &&
                g_rows[j].cls != API_CLASS_REFUSED && f->cls != API_CLASS_REFUSED) {
                fprintf(stderr, "docs/API.md:%d: `%s` is listed twice for an endpoint\n", f->line,
                        f->name);
                CHECK(0);
            }
    }
}

/* the known fields of each endpoint == its documented rows */
static void test_known_equals_documented(void)
{
    const char *k;
    unsigned kinds;
    for (size_t i = 0; (k = gw_req_known_field(i, &kinds)); i++) {
        for (unsigned ep = API_EP_CHAT; ep <= API_EP_COMPLETIONS; ep <<= 1) {
            unsigned bit = 1u << (ep == API_EP_CHAT ? GW_REQ_KIND_CHAT : GW_REQ_KIND_COMPLETION);
            if ((kinds & bit) && !documented(k, ep)) {
                fprintf(stderr, "gw_req.c knows `%s` (%s), docs/API.md's field list does not\n", k,
                        api_ep_name(ep));
                CHECK(0);
            }
        }
    }
    for (size_t i = 0; (k = gw_responses_known_field(i)); i++)
        if (!documented(k, API_EP_RESPONSES)) {
            fprintf(stderr, "gw_responses.c knows `%s`, docs/API.md's field list does not\n", k);
            CHECK(0);
        }
    for (int i = 0; i < g_n; i++)
        for (unsigned ep = API_EP_CHAT; ep <= API_EP_RESPONSES; ep <<= 1)
            if ((g_rows[i].eps & ep) && !known_for(ep, g_rows[i].name)) {
                fprintf(stderr, "docs/API.md:%d: `%s` (%s) is not a field the code knows\n",
                        g_rows[i].line, g_rows[i].name, api_ep_name(ep));
                CHECK(0);
            }
}

/* every key the parser read on the body's root is a known field of ep */
static void check_lookups(const cJSON *root, unsigned ep, const char *body)
{
    static char reported[16][64]; /* each unknown name once */
    static int n_reported;
    const char *name;
    for (int i = 0; (name = field_rec_name(root, i)); i++) {
        if (known_for(ep, name))
            continue;
        bool seen = false;
        for (int k = 0; k < n_reported; k++)
            seen |= !strcmp(reported[k], name);
        if (seen)
            continue;
        if (n_reported < 16)
            snprintf(reported[n_reported++], sizeof(reported[0]), "%s", name);
        fprintf(stderr, "the %s parser reads `%s` (body %s), which is not a known field\n",
                api_ep_name(ep), name, body);
        CHECK(0);
    }
}

/* parse body on ep: 0, or ERR_INVAL with *e; root lookups checked */
static int parse_on(unsigned ep, const char *body, struct gw_req_err *e)
{
    struct gw_arena *a = gw_arena_create(0);
    struct gw_req r;
    int rc;
    field_rec_reset();
    if (ep == API_EP_RESPONSES) {
        char *chat = NULL;
        size_t n = 0;
        cJSON *root = NULL;
        rc = gw_responses_map(body, strlen(body), a, &chat, &n, &root, e);
        if (root)
            check_lookups(root, ep, body);
        if (!rc) {
            rc = gw_req_parse(&r, GW_REQ_KIND_CHAT, chat, n, MODEL, a, e);
            if (rc && e->param)
                e->param = gw_responses_param(e->param);
        }
    } else {
        rc = gw_req_parse(&r, ep == API_EP_CHAT ? GW_REQ_KIND_CHAT : GW_REQ_KIND_COMPLETION, body,
                          strlen(body), MODEL, a, e);
        if (r.root)
            check_lookups(r.root, ep, body);
    }
    static char param[128]; /* e->param may live in the arena */
    if (e->param) {
        snprintf(param, sizeof(param), "%s", e->param);
        e->param = param;
    }
    gw_arena_destroy(a);
    return rc;
}

/* each row's value on each of its endpoints: refused = 400 naming the field, else accepted */
static void test_values(void)
{
    for (unsigned ep = API_EP_CHAT; ep <= API_EP_RESPONSES; ep <<= 1) {
        struct gw_req_err e;
        CHECK_EQ_INT(parse_on(ep, BASE[ep_index(ep)], &e), 0);
    }
    for (int i = 0; i < g_n; i++) {
        const struct api_field *f = &g_rows[i];
        for (unsigned ep = API_EP_CHAT; ep <= API_EP_RESPONSES; ep <<= 1) {
            if (!(f->eps & ep))
                continue;
            char *body = body_of(f, ep);
            struct gw_req_err e;
            memset(&e, 0, sizeof(e));
            int rc = parse_on(ep, body, &e);
            size_t n = strlen(f->name);
            bool names = e.param && !strncmp(e.param, f->name, n) &&
                         (e.param[n] == '\0' || e.param[n] == '.');
            bool ok =
                f->cls == API_CLASS_REFUSED ? rc == ERR_INVAL && e.status == 400 && names : rc == 0;
            if (!ok) {
                fprintf(stderr,
                        "docs/API.md:%d: `%s` on %s: %s body %s -> rc=%d status=%d "
                        "param=%s msg=%s\n",
                        f->line, f->name, api_ep_name(ep),
                        f->cls == API_CLASS_REFUSED ? "refused, but" : "accepted, but", body, rc,
                        e.status, e.param ? e.param : "(null)", e.message);
                CHECK(0);
            }
            free(body);
        }
    }
}

/* the chat template reads these keys of the body itself (text/chat.c render_value) */
static void test_template_keys(void)
{
    char *src = test_read_source("text/chat.c");
    CHECK(src != NULL);
    if (!src)
        return;
    int n = 0;
    const char *pat = "jv_dict_get(req.u.dict, \"";
    for (const char *p = strstr(src, pat); p; p = strstr(p + 1, pat)) {
        char name[64];
        const char *s = p + strlen(pat), *q = strchr(s, '"');
        snprintf(name, sizeof(name), "%.*s", (int)(q - s), s);
        n++;
        if (!gw_req_is_known_field(GW_REQ_KIND_CHAT, name)) {
            fprintf(stderr, "text/chat.c reads `%s` from the body; not a known chat field\n", name);
            CHECK(0);
        }
    }
    CHECK(n >= 4); /* messages, tools, add_generation_prompt, chat_template_kwargs */
    free(src);
}

/* unknown keys: listed (sanitised) for the warning; known ones never */
static void test_unknown_list(void)
{
    struct gw_arena *a = gw_arena_create(0);
    struct gw_req r;
    struct gw_req_err e;
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"user\":\"u\","
                       "\"foo\":1,\"top_k\":3,\"b a\\\"r\":2}";
    CHECK_EQ_INT(gw_req_parse(&r, GW_REQ_KIND_CHAT, body, strlen(body), MODEL, a, &e), 0);
    char out[64];
    CHECK_EQ_INT(gw_req_unknown_fields(&r, out, sizeof(out)), 2);
    CHECK_STREQ(out, "foo,b?a?r");
    char tiny[5];
    CHECK_EQ_INT(gw_req_unknown_fields(&r, tiny, sizeof(tiny)), 2);
    CHECK_STREQ(tiny, "foo,");
    const char *cbody = "{\"prompt\":\"hi\",\"tools\":[],\"logprobs\":1}";
    CHECK_EQ_INT(gw_req_parse(&r, GW_REQ_KIND_COMPLETION, cbody, strlen(cbody), MODEL, a, &e), 0);
    CHECK_EQ_INT(gw_req_unknown_fields(&r, out, sizeof(out)), 1);
    CHECK_STREQ(out, "tools");
    cJSON *rb = cJSON_Parse("{\"input\":\"hi\",\"n\":2,\"store\":true,\"top_k\":2}");
    CHECK_EQ_INT(gw_responses_unknown_fields(rb, out, sizeof(out)), 1);
    CHECK_STREQ(out, "n");
    cJSON_Delete(rb);
    gw_arena_destroy(a);
}

int main(void)
{
    char *doc = test_read_source("docs/API.md");
    CHECK(doc != NULL);
    if (!doc)
        return test_result();
    g_n = api_fields_parse(doc, g_rows, API_FIELDS_MAX);
    free(doc);
    CHECK(g_n > 40);
    if (g_n <= 0)
        return test_result();
    test_rows();
    test_known_equals_documented();
    test_values();
    test_template_keys();
    test_unknown_list();
    return test_result();
}
