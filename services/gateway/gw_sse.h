/* gw_sse: Server-Sent Events framing (one event = "data: <line>\n" per line + "\n"), the
 * [DONE] terminator, and a parser for tests and tools that splits a stream back into events. */
#ifndef GW_SSE_H
#define GW_SSE_H

#include <stddef.h>

struct buf;

/* Append one event carrying data[0..n) (split on \n into several data: lines). */
void gw_sse_event(struct buf *out, const char *data, size_t n);
/* Append "data: [DONE]\n\n". */
void gw_sse_done(struct buf *out);
/* Append a comment line (keep-alive ping): ": text\n\n". */
void gw_sse_comment(struct buf *out, const char *text);

/* Parse the next event from s[0..n): on success returns the bytes consumed (> 0) and writes the
 * event's data (data: lines joined with \n) into data; 0 when no complete event is there yet.
 * Comment-only events yield an empty data and are still consumed. */
size_t gw_sse_next(const char *s, size_t n, struct buf *data);

#endif
