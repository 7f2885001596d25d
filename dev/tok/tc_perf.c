/* dev: toolcall + reasoning throughput on a long streamed string parameter, fed in 4-byte deltas */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "text/reasoning.h"
#include "text/toolcall.h"
int main(void)
{
    size_t vl = 400000;
    char *t = malloc(vl + 200);
    size_t n = (size_t)sprintf(t, "<tool_call>\n<function=write>\n<parameter=content>\n");
    for (size_t i = 0; i < vl; i++)
        t[n++] = "abc def\n<x>"[i % 11];
    n += (size_t)sprintf(t + n, "\n</parameter>\n</function>\n</tool_call>");
    for (int typed = 0; typed < 2; typed++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        struct reasoning *r = reasoning_create(false);
        struct toolcall *tc = toolcall_create(typed ? "[{\"name\":\"write\",\"parameters\":{\"properties\":{\"content\":{\"type\":\"object\"}}}}]" : NULL, 1);
        size_t args = 0;
        for (size_t i = 0; i < n; i += 4) {
            struct reasoning_out ro;
            reasoning_feed(r, t + i, i + 4 <= n ? 4 : n - i, &ro);
            const struct toolcall_event *ev;
            size_t ne;
            toolcall_feed(tc, ro.content, ro.content_len, &ev, &ne);
            for (size_t k = 0; k < ne; k++)
                if (ev[k].type == TOOLCALL_EVENT_ARGS)
                    args += ev[k].len;
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        printf("typed=%d bytes=%zu args=%zu seconds=%.3f\n", typed, n, args,
               (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9);
        reasoning_destroy(r);
        toolcall_destroy(tc);
    }
    free(t);
    return 0;
}
