/* The llhttp the gateway links (tern_llhttp): built in strict mode, and the span behaviour
 * gw_conn's own request-line and obs-fold checks rely on (they compare stream offsets of the
 * spans llhttp hands out). A Debian llhttp update that changes any of this fails here. */
#include <stdio.h>
#include <string.h>

#include <llhttp.h>

#include "test.h"

struct spans {
    const char *base;
    long method_end, url_start, url_end, version_start;
    int n_values;   /* on_header_value calls */
    long value_gap; /* bytes between the first two value spans of one field, or -1 */
    long last_value_end;
    int http_major; /* after the call */
};

static int on_method(llhttp_t *p, const char *at, size_t n)
{
    struct spans *s = p->data;
    s->method_end = (at - s->base) + (long)n;
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    struct spans *s = p->data;
    s->url_start = at - s->base;
    s->url_end = s->url_start + (long)n;
    return 0;
}

static int on_version(llhttp_t *p, const char *at, size_t n)
{
    struct spans *s = p->data;
    (void)n;
    s->version_start = at - s->base;
    return 0;
}

static int on_field(llhttp_t *p, const char *at, size_t n)
{
    struct spans *s = p->data;
    (void)at;
    (void)n;
    s->last_value_end = -1;
    return 0;
}

static int on_value(llhttp_t *p, const char *at, size_t n)
{
    struct spans *s = p->data;
    if (s->last_value_end >= 0 && s->value_gap < 0)
        s->value_gap = (at - s->base) - s->last_value_end;
    s->last_value_end = (at - s->base) + (long)n;
    s->n_values++;
    return 0;
}

/* parse req in one call; HPE_OK or the error */
static int run(const char *req, struct spans *s)
{
    llhttp_settings_t st;
    llhttp_settings_init(&st);
    st.on_method = on_method;
    st.on_url = on_url;
    st.on_version = on_version;
    st.on_header_field = on_field;
    st.on_header_value = on_value;
    llhttp_t p;
    llhttp_init(&p, HTTP_REQUEST, &st);
    memset(s, 0, sizeof(*s));
    s->base = req;
    s->value_gap = -1;
    s->last_value_end = -1;
    p.data = s;
    int rc = (int)llhttp_execute(&p, req, strlen(req));
    s->http_major = p.http_major;
    return rc;
}

int main(void)
{
    struct spans s;
    /* strict mode: these are errors (lenient llhttp accepts them) */
    /* HTTP/0.9 (no version) parses even in strict mode, as version 0.9: gw_conn's version
     * check rejects it */
    if (run("GET /health\r\n\r\n", &s) == HPE_OK)
        CHECK_EQ_INT(s.http_major, 0);
    CHECK(run("GET /h HTTP/1.1\r\nHost: t\r\nFoo Bar: x\r\n\r\n", &s) != HPE_OK);
    CHECK(run("GET /h HTTP/1.1\r\nHost: t\r\nFoo : x\r\n\r\n", &s) != HPE_OK);
    CHECK(run("POST /h HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n",
              &s) != HPE_OK);

    /* one SP each side of the target: url starts 1 past the method, version 6 past the url */
    CHECK_EQ_INT(run("GET /h HTTP/1.1\r\nHost: t\r\n\r\n", &s), HPE_OK);
    CHECK_EQ_INT((int)s.method_end, 3);
    CHECK_EQ_INT((int)s.url_start, 4);
    CHECK_EQ_INT((int)(s.version_start - s.url_end), 6);
    /* llhttp skips extra spaces itself: gw_conn must see the gap in the offsets */
    if (run("GET  /h HTTP/1.1\r\nHost: t\r\n\r\n", &s) == HPE_OK)
        CHECK(s.url_start != s.method_end + 1);
    if (run("GET /h  HTTP/1.1\r\nHost: t\r\n\r\n", &s) == HPE_OK)
        CHECK(s.version_start != s.url_end + 6);

    /* obs-fold: either an error, or the continuation is a second value span after a gap */
    if (run("GET /h HTTP/1.1\r\nHost: t\r\nX-A: a\r\n b\r\n\r\n", &s) == HPE_OK) {
        CHECK_EQ_INT(s.n_values, 3); /* Host, then X-A in two pieces */
        CHECK(s.value_gap > 0);
    }
    /* a plain value is one span (one call with the whole buffer) */
    CHECK_EQ_INT(run("GET /h HTTP/1.1\r\nHost: t\r\nX-A: a b\r\n\r\n", &s), HPE_OK);
    CHECK_EQ_INT(s.n_values, 2); /* Host and X-A */
    CHECK(s.value_gap < 0);
    return test_result();
}
