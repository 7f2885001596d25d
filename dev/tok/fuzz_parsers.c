/* dev: random bytes and tag soup through reasoning + toolcall + stop under ASan; checks no crash
 * and split invariance of the concatenated outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "text/reasoning.h"
#include "text/stop.h"
#include "text/toolcall.h"
static uint64_t st = 88172645463325252ull;
static uint64_t rnd(void) { st ^= st << 13; st ^= st >> 7; st ^= st << 17; return st; }
static size_t run(const char *t, size_t n, size_t chunk, char *out, bool thinking)
{
    struct reasoning *r = reasoning_create(thinking);
    struct toolcall *tc = toolcall_create("[{\"name\":\"f\",\"parameters\":{\"properties\":{\"a\":{\"type\":\"integer\"}}}}]", 3);
    const char *stops[] = {"ZZ"};
    struct stop *s = stop_create(stops, 1);
    size_t o = 0;
    for (size_t i = 0; i <= n; i += chunk) {
        size_t l = i + chunk <= n ? chunk : n - i;
        const char *so; size_t sl;
        struct reasoning_out ro;
        const struct toolcall_event *ev; size_t ne;
        bool fin = i + chunk > n;
        stop_feed(s, t + i, l, &so, &sl);
        reasoning_feed(r, so, sl, &ro);
        memcpy(out + o, ro.reasoning, ro.reasoning_len); o += ro.reasoning_len; out[o++] = 1;
        toolcall_feed(tc, ro.content, ro.content_len, &ev, &ne);
        for (size_t k = 0; k < ne; k++) { memcpy(out + o, ev[k].text, ev[k].len); o += ev[k].len; out[o++] = (char)(2 + ev[k].type); }
        if (fin) {
            stop_flush(s, &so, &sl);
            reasoning_feed(r, so, sl, &ro);
            memcpy(out + o, ro.reasoning, ro.reasoning_len); o += ro.reasoning_len;
            toolcall_feed(tc, ro.content, ro.content_len, &ev, &ne);
            for (size_t k = 0; k < ne; k++) { memcpy(out + o, ev[k].text, ev[k].len); o += ev[k].len; }
            reasoning_flush(r, &ro);
            memcpy(out + o, ro.reasoning, ro.reasoning_len); o += ro.reasoning_len;
            toolcall_feed(tc, ro.content, ro.content_len, &ev, &ne);
            for (size_t k = 0; k < ne; k++) { memcpy(out + o, ev[k].text, ev[k].len); o += ev[k].len; }
            toolcall_flush(tc, &ev, &ne);
            for (size_t k = 0; k < ne; k++) { memcpy(out + o, ev[k].text, ev[k].len); o += ev[k].len; }
            break;
        }
    }
    stop_destroy(s); reasoning_destroy(r); toolcall_destroy(tc);
    return o;
}
/* strip the separator bytes 1..5 so that only the concatenated text is compared */
static size_t strip(char *b, size_t n) { size_t o = 0; for (size_t i = 0; i < n; i++) if ((unsigned char)b[i] > 5 || b[i] == 0) b[o++] = b[i]; return o; }
int main(void)
{
    static const char *frags[] = {"<tool_call>", "</tool_call>", "<function=f>", "<parameter=a>", "</parameter>",
        "</function>", "<think>", "</think>", "{\"name\":\"f\",\"arguments\":{\"a\":1}}", "<", ">", "\n", " ", "Z", "ZZ", "x", "\x00", "\xff", "12"};
    static char text[4096], a[1 << 16], b[1 << 16];
    int bad = 0;
    for (int it = 0; it < 20000; it++) {
        size_t n = 0, k = rnd() % 40;
        for (size_t i = 0; i < k; i++) {
            if (rnd() % 4 == 0) { text[n++] = (char)(rnd() & 0xff); continue; }
            const char *f = frags[rnd() % (sizeof(frags) / sizeof(frags[0]))];
            size_t l = f[0] ? strlen(f) : 1;
            memcpy(text + n, f, l); n += l;
        }
        bool th = rnd() & 1;
        size_t la = strip(a, run(text, n, n + 1, a, th));
        size_t lb = strip(b, run(text, n, 1 + rnd() % 7, b, th));
        if (la != lb || memcmp(a, b, la) != 0) { if (bad++ < 3) fprintf(stderr, "mismatch it=%d n=%zu\n", it, n); }
    }
    printf("bad=%d\n", bad);
    return bad != 0;
}
