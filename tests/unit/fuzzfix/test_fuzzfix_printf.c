/* Unit: the appending printf helpers jbuf_printf (text/jbuf.c) and gw_buf_printf
 * (services/gateway/gw_buf.c). They used a vsnprintf(NULL, 0, ...) size probe that gcc's
 * -Wformat-truncation rejects under -fsanitize=undefined; now they format into a 256-byte stack
 * buffer and redo long results in place. Checks short, boundary (255, 256, 257 bytes) and long
 * results, appended after existing bytes, against strings built byte by byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_buf.h"
#include "jbuf.h"
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

int main(void)
{
    /* total formatted length = n + 3 */
    static const size_t lens[] = {0, 10, 252, 253, 254, 1000, 70000};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        size_t n = lens[i];
        char *p = pattern(n), *want = expected("head:", n);
        struct jbuf jb = {0};
        jbuf_puts(&jb, "head:");
        jbuf_printf(&jb, "<%s>%d", p, 7);
        CHECK(jb.n == strlen(want));
        CHECK_STREQ(jb.p, want);
        jbuf_free(&jb);
        struct gw_buf gb;
        gw_buf_init(&gb);
        gw_buf_puts(&gb, "head:");
        gw_buf_printf(&gb, "<%s>%d", p, 7);
        CHECK(gb.len == strlen(want));
        CHECK_STREQ(gb.data, want);
        gw_buf_deinit(&gb);
        free(p);
        free(want);
    }
    /* an empty result appends nothing */
    struct jbuf jb = {0};
    jbuf_puts(&jb, "x");
    jbuf_printf(&jb, "%s", "");
    CHECK(jb.n == 1 && strcmp(jb.p, "x") == 0);
    jbuf_free(&jb);
    return test_result();
}
