/* gw_req_parse's strict JSON check (RFC 8259): grammar cases cJSON alone accepts, escapes,
 * numbers, trailing bytes, and UTF-8 in strings against an independent decoder. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "gw_arena.h"
#include "gw_req.h"
#include "test.h"

#define MODEL "qwen-test"

/* rc of parsing body[0..n) as kind; *param gets the error's param ("" for null) */
static int parse_n(enum gw_req_kind kind, const char *body, size_t n, char *param, size_t cap,
                   int *status)
{
    struct gw_arena *a = gw_arena_create(0);
    struct gw_req r;
    struct gw_req_err e;
    int rc = gw_req_parse(&r, kind, body, n, MODEL, a, &e);
    snprintf(param, cap, "%s", rc && e.param ? e.param : "");
    *status = rc ? e.status : 200;
    gw_arena_destroy(a);
    return rc;
}

static void expect(const char *body, size_t n, int want_status, const char *want_param)
{
    char param[96];
    int status;
    parse_n(GW_REQ_KIND_CHAT, body, n, param, sizeof(param), &status);
    if (status != want_status || (want_param && strcmp(param, want_param) != 0)) {
        fprintf(stderr, "body [%.*s]: status %d param '%s', want %d '%s'\n", (int)n, body, status,
                param, want_status, want_param ? want_param : "*");
        CHECK(0);
    }
}

#define EXPECT(s, status, param) expect(s, strlen(s), status, param)
#define OK(s) expect(s, strlen(s), 200, NULL)
#define BAD(s) expect(s, strlen(s), 400, "")

#define M "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static void test_grammar(void)
{
    OK("{" M "}");
    OK(" \t\r\n{" M "} \t\r\n");
    OK("{" M ",\"max_tokens\":1e0,\"temperature\":1.5E+0,\"top_p\":0.25e-0,\"seed\":-0}");
    OK("{" M ",\"x\":[true,false,null,{},[],\"\",-1.0e-10,0,10]}");
    /* trailing data after the value */
    BAD("{" M "} // c");
    BAD("{" M "}{\"a\":1}");
    BAD("{" M "}xyz");
    BAD("{" M "},");
    expect("{" M "}\0", strlen("{" M "}") + 1, 400, "");
    expect("{" M "\0}", strlen("{" M "}") + 1, 400, "");
    /* numbers */
    static const char *const bad_nums[] = {"02",   "-02", "00",       "1.",        "-",     ".5",
                                           "1e",   "1e+", "+1",       "0x2",       "1.2.3", "--1",
                                           "1..2", "NaN", "Infinity", "-Infinity", "1_000", "1 2"};
    for (size_t i = 0; i < sizeof(bad_nums) / sizeof(bad_nums[0]); i++) {
        char b[256];
        snprintf(b, sizeof(b), "{" M ",\"x\":%s}", bad_nums[i]);
        BAD(b);
    }
    /* literals, structure */
    BAD("{" M ",\"x\":tru}");
    BAD("{" M ",\"x\":nulll}");
    BAD("{" M ",\"x\":True}");
    BAD("{" M ",}");
    BAD("{" M ",\"x\":[1,]}");
    BAD("{" M ",\"x\":[,1]}");
    BAD("{" M ",'x':1}");
    BAD("{" M ",x:1}");
    BAD("{" M ",\"x\" 1}");
    BAD("{" M ",\"x\":1 \"y\":2}");
    BAD("{" M ",\"x\":[1}");
    BAD("{" M ",\"x\":{]}");
    BAD("");
    BAD("   ");
    BAD("\xef\xbb\xbf{" M "}"); /* a BOM is not JSON text */
    BAD("/*c*/{" M "}");
}

static void test_strings(void)
{
    OK("{\"messages\":[{\"role\":\"user\",\"content\":\"\\\"\\\\\\/"
       "\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\"}]}");
    BAD("{\"messages\":[{\"role\":\"user\",\"content\":\"\\q\"}]}");
    BAD("{\"messages\":[{\"role\":\"user\",\"content\":\"\\x41\"}]}");
    BAD("{\"messages\":[{\"role\":\"user\",\"content\":\"\\u12\"}]}");
    BAD("{\"messages\":[{\"role\":\"user\",\"content\":\"\\uzzzz\"}]}");
    BAD("{\"messages\":[{\"role\":\"user\",\"content\":\"\\u00G0\"}]}");
    BAD("{\"messages\":[{\"role\":\"user\",\"content\":\"a\x01"
        "b\"}]}");
    BAD("{\"messages\":[{\"role\":\"user\",\"content\":\"a\nb\"}]}");
    BAD("{\"messages\":[{\"role\":\"user\",\"content\":\"a\tb\"}]}");
    BAD("{\"messages\":[{\"role\":\"user\",\"content\":\"a\x1f"
        "b\"}]}");
    BAD("{\"messages\":[{\"role\":\"user\",\"content\":\"unterminated}]}");
    BAD("{\"messages\":[{\"role\":\"user\",\"content\":\"ends in a backslash\\");
    /* DEL and a raw '/' are fine */
    OK("{\"messages\":[{\"role\":\"user\",\"content\":\"a\x7f/b\"}]}");
    /* lone surrogate escapes cannot be UTF-8: 400 naming the param */
    EXPECT("{\"messages\":[{\"role\":\"user\",\"content\":\"a\\ud800b\"}]}", 400, "messages");
    EXPECT("{\"messages\":[{\"role\":\"user\",\"content\":\"a\\udc00b\"}]}", 400, "messages");
    EXPECT("{\"messages\":[{\"role\":\"user\",\"content\":\"\\udc00\\ud800\"}]}", 400, "messages");
    EXPECT("{\"messages\":[{\"role\":\"user\",\"content\":\"\\ud800\\u0041\"}]}", 400, "messages");
}

/* independent UTF-8 oracle: decode, then reject overlongs, surrogates, > U+10FFFF */
static bool oracle_utf8(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (len == 0 || i + (size_t)len > n)
            return false;
        uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
        for (int k = 1; k < len; k++) {
            if ((s[i + (size_t)k] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + (size_t)k] & 0x3f);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += (size_t)len;
    }
    return true;
}

/* content bytes inside a chat and a completions body; returns mismatches */
static int check_bytes(const unsigned char *bytes, size_t nb)
{
    int bad = 0;
    bool valid = oracle_utf8(bytes, nb);
    for (int kind = 0; kind < 2; kind++) {
        char body[256];
        const char *pre =
            kind == 0 ? "{\"messages\":[{\"role\":\"user\",\"content\":\"x" : "{\"prompt\":\"x";
        const char *post = kind == 0 ? "\"}]}" : "\"}";
        size_t n = strlen(pre);
        memcpy(body, pre, n);
        memcpy(body + n, bytes, nb);
        n += nb;
        memcpy(body + n, post, strlen(post));
        n += strlen(post);
        char param[96];
        int status;
        parse_n(kind == 0 ? GW_REQ_KIND_CHAT : GW_REQ_KIND_COMPLETION, body, n, param,
                sizeof(param), &status);
        const char *want_param = kind == 0 ? "messages" : "prompt";
        bool got_ok = status == 200;
        if (got_ok != valid || (!valid && strcmp(param, want_param) != 0)) {
            if (bad++ < 5) {
                fprintf(stderr, "bytes");
                for (size_t i = 0; i < nb; i++)
                    fprintf(stderr, " %02x", bytes[i]);
                fprintf(stderr, ": status %d param '%s', oracle says %s\n", status, param,
                        valid ? "valid" : "invalid");
            }
        }
    }
    return bad;
}

static void test_utf8(void)
{
    int bad = 0;
    unsigned char b[4];
    /* every 1- and 2-byte string of non-ASCII-or-printable bytes */
    for (unsigned x = 0x20; x < 0x100; x++) {
        if (x == '"' || x == '\\')
            continue;
        b[0] = (unsigned char)x;
        bad += check_bytes(b, 1);
        for (unsigned y = 0x20; y < 0x100; y++) {
            if (y == '"' || y == '\\' || (x < 0x80 && y < 0x80))
                continue;
            b[1] = (unsigned char)y;
            bad += check_bytes(b, 2);
        }
    }
    /* 3- and 4-byte leads against the boundary continuation bytes */
    static const unsigned char conts[] = {0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0};
    for (unsigned x = 0xe0; x < 0x100; x++)
        for (size_t i = 0; i < sizeof(conts); i++)
            for (size_t k = 0; k < sizeof(conts); k++) {
                b[0] = (unsigned char)x;
                b[1] = conts[i];
                b[2] = conts[k];
                bad += check_bytes(b, 3);
                b[3] = 0x80;
                bad += check_bytes(b, 4);
                b[3] = 0xbf;
                bad += check_bytes(b, 4);
            }
    CHECK_EQ_INT(bad, 0);
    /* the param names the top-level field holding the bad string */
    EXPECT("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stop\":[\"a\xff\"]}", 400,
           "stop");
    EXPECT("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"x\":{\"y\":[\"\xc0\xaf\"]}}",
           400, "x");
    /* an invalid key at the top level: no param */
    expect("{\"\xff\":1," M "}", strlen("{\"\xff\":1," M "}"), 400, "");
}

static void test_nesting(void)
{
    static char b[8192];
    /* 200 deep in an ignored field is fine; past cJSON's limit of 1000 is a 400 */
    for (int depth = 200; depth <= 1200; depth += 1000) {
        size_t n = (size_t)snprintf(b, sizeof(b), "{" M ",\"deep\":");
        for (int i = 0; i < depth; i++)
            b[n++] = '[';
        for (int i = 0; i < depth; i++)
            b[n++] = ']';
        b[n++] = '}';
        expect(b, n, depth < 1000 ? 200 : 400, depth < 1000 ? NULL : "");
    }
}

int main(void)
{
    test_grammar();
    test_strings();
    test_utf8();
    test_nesting();
    return test_result();
}
