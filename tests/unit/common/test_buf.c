/* Unit: common/buf.c, the growable byte buffer of the text library and the gateway. Appends,
 * NUL termination, reset, consume and the held-back tail of a streaming parser; buf_printf at the
 * sizes around its 256-byte stack buffer (a fuzzer finding: it used a vsnprintf(NULL, 0, ...)
 * size probe that gcc's -Wformat-truncation rejects under -fsanitize=undefined; now long results
 * are formatted again in place), checked against strings built byte by byte. */
#include "common/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

/* 'a'..'z' repeated, n bytes, NUL-terminated (caller frees) */
static char *pattern(size_t n)
{
    char *s = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        s[i] = (char)('a' + i % 26);
    s[n] = '\0';
    return s;
}

/* expected: prefix, then "<" pat(n) ">" and the decimal 7 */
static char *expected(const char *prefix, size_t n)
{
    size_t pl = strlen(prefix);
    char *p = pattern(n);
    char *e = malloc(pl + n + 4);
    memcpy(e, prefix, pl);
    e[pl] = '<';
    memcpy(e + pl + 1, p, n);
    e[pl + 1 + n] = '>';
    e[pl + 2 + n] = '7';
    e[pl + 3 + n] = '\0';
    free(p);
    return e;
}

static void test_printf_sizes(void)
{
    /* total formatted length = n + 3: 3, 13, 255, 256, 257 bytes, and long ones */
    static const size_t lens[] = {0, 10, 252, 253, 254, 1000, 70000};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        size_t n = lens[i];
        char *p = pattern(n), *want = expected("head:", n);
        struct buf b;
        buf_init(&b);
        buf_puts(&b, "head:");
        buf_printf(&b, "<%s>%d", p, 7);
        CHECK_EQ_INT(b.len, strlen(want));
        CHECK_STREQ(b.data, want);
        CHECK(b.cap > b.len);
        buf_deinit(&b);
        free(p);
        free(want);
    }
    /* an empty result appends nothing */
    struct buf b = {0};
    buf_puts(&b, "x");
    buf_printf(&b, "%s", "");
    CHECK(b.len == 1 && strcmp(b.data, "x") == 0);
    buf_deinit(&b);
}

static void test_append(void)
{
    struct buf b = {0}; /* a zeroed struct is empty */
    CHECK(b.data == NULL && b.len == 0);
    buf_append(&b, "", 0); /* allocates and terminates */
    CHECK(b.data != NULL && b.len == 0 && b.data[0] == '\0');
    buf_append(&b, "ab\0cd", 5); /* bytes, NUL included */
    buf_putc(&b, 'e');
    CHECK_EQ_INT(b.len, 6);
    CHECK(memcmp(b.data, "ab\0cde", 7) == 0);
    /* growth past the first 256 bytes keeps the old bytes and the terminator */
    for (int i = 0; i < 1000; i++)
        buf_putc(&b, (char)('0' + i % 10));
    CHECK_EQ_INT(b.len, 1006);
    CHECK(b.data[6] == '0' && b.data[1005] == '9' && b.data[1006] == '\0');
    size_t cap = b.cap;
    buf_reset(&b); /* empties, keeps the allocation */
    CHECK(b.len == 0 && b.cap == cap && b.data[0] == '\0');
    buf_puts(&b, "again");
    CHECK_STREQ(b.data, "again");
    buf_deinit(&b);
    CHECK(b.data == NULL && b.len == 0 && b.cap == 0);
    buf_deinit(&b); /* twice is harmless */
    buf_reset(&b);  /* on an empty buffer too */
    CHECK(b.data == NULL);
}

static void test_consume_tail(void)
{
    struct buf b = {0};
    buf_puts(&b, "hello <thi");
    CHECK_EQ_INT(buf_match_tail(&b, "<think>"), 4); /* "<thi" may start the tag */
    CHECK_EQ_INT(buf_match_tail(&b, "</think>"), 0);
    CHECK_EQ_INT(buf_match_tail(&b, "i"), 0); /* only proper prefixes are held back */
    buf_consume(&b, 0);
    CHECK_STREQ(b.data, "hello <thi");
    buf_consume(&b, 6);
    CHECK_STREQ(b.data, "<thi");
    CHECK_EQ_INT(b.len, 4);
    buf_puts(&b, "nk>x<");
    CHECK_EQ_INT(buf_match_tail(&b, "<think>"), 1);
    buf_consume(&b, b.len);
    CHECK(b.len == 0 && b.data[0] == '\0');
    CHECK_EQ_INT(buf_match_tail(&b, "<think>"), 0);
    buf_deinit(&b);
}

int main(void)
{
    test_printf_sizes();
    test_append();
    test_consume_tail();
    return test_result();
}
