/* gw_sse: framing of events (multi-line data), [DONE], and the parser round trip, including
 * CRLF / CR line ends, comments and events split at every byte. */
#include <string.h>

#include "common/buf.h"
#include "gw_sse.h"
#include "test.h"

static void test_frame(void)
{
    struct buf b, d;
    buf_init(&b);
    buf_init(&d);
    gw_sse_event(&b, "{\"a\":1}", 7);
    CHECK_STREQ(b.data, "data: {\"a\":1}\n\n");
    buf_reset(&b);
    gw_sse_event(&b, "x\ny\r\nz", 6);
    CHECK_STREQ(b.data, "data: x\ndata: y\ndata: z\n\n");
    buf_reset(&b);
    gw_sse_done(&b);
    CHECK_STREQ(b.data, "data: [DONE]\n\n");
    buf_reset(&b);
    gw_sse_event(&b, "", 0);
    CHECK_STREQ(b.data, "data: \n\n");
    buf_deinit(&b);
    buf_deinit(&d);
}

static void test_roundtrip(void)
{
    static const char *const payloads[] = {"{\"k\":\"v\"}", "multi\nline\n", "", "a\n\nb",
                                           "[DONE]"};
    struct buf b, d;
    buf_init(&b);
    buf_init(&d);
    gw_sse_comment(&b, "ping");
    for (size_t i = 0; i < sizeof(payloads) / sizeof(payloads[0]); i++)
        gw_sse_event(&b, payloads[i], strlen(payloads[i]));
    /* whole buffer */
    size_t off = 0, used;
    used = gw_sse_next(b.data, b.len, &d); /* the comment */
    CHECK(used > 0);
    CHECK_EQ_INT(d.len, 0);
    off += used;
    for (size_t i = 0; i < sizeof(payloads) / sizeof(payloads[0]); i++) {
        used = gw_sse_next(b.data + off, b.len - off, &d);
        CHECK(used > 0);
        CHECK_STREQ(d.data ? d.data : "", payloads[i]);
        off += used;
    }
    CHECK_EQ_INT(off, b.len);
    /* every prefix of the first event is incomplete */
    size_t first = gw_sse_next(b.data, b.len, &d);
    for (size_t k = 0; k < first; k++)
        CHECK_EQ_INT(gw_sse_next(b.data, k, &d), 0);
    buf_deinit(&b);
    buf_deinit(&d);
}

static void test_line_ends(void)
{
    struct buf d;
    buf_init(&d);
    const char *crlf = "data: a\r\ndata: b\r\n\r\n";
    CHECK_EQ_INT(gw_sse_next(crlf, strlen(crlf), &d), strlen(crlf));
    CHECK_STREQ(d.data, "a\nb");
    const char *cr = "data:x\r\rdata: y\n\n";
    CHECK_EQ_INT(gw_sse_next(cr, strlen(cr), &d), 8);
    CHECK_STREQ(d.data, "x");
    CHECK_EQ_INT(gw_sse_next(cr + 8, strlen(cr) - 8, &d), strlen(cr) - 8);
    CHECK_STREQ(d.data, "y");
    const char *partial = "data: a\r"; /* could still become \r\n */
    CHECK_EQ_INT(gw_sse_next(partial, strlen(partial), &d), 0);
    buf_deinit(&d);
}

int main(void)
{
    test_frame();
    test_roundtrip();
    test_line_ends();
    return test_result();
}
