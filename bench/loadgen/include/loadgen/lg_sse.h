/* lg_sse: incremental Server-Sent Events splitter. Feed bytes as they arrive; each complete
 * event's data (its data: lines joined with '\n') is handed to the callback. */
#ifndef LOADGEN_LG_SSE_H
#define LOADGEN_LG_SSE_H

#include <stddef.h>

/* data is NUL-terminated and only valid during the call; comment-only events are skipped */
typedef void (*lg_sse_event_cb)(void *ud, const char *data, size_t n);

struct lg_sse {
    char *buf; /* bytes of the event being received */
    size_t len, cap;
    char *data; /* data: lines of the current event */
    size_t data_len, data_cap;
    int has_data;
};

void lg_sse_init(struct lg_sse *s);
void lg_sse_deinit(struct lg_sse *s);
/* Split p[0..n) into lines and events; calls cb for each finished event. */
void lg_sse_feed(struct lg_sse *s, const char *p, size_t n, lg_sse_event_cb cb, void *ud);

#endif
