/* gw_conn: one TCP connection: libuv reads/writes, llhttp parsing with limits and deadlines,
 * keep-alive and pipelining (one exchange at a time; later requests wait in the input buffer).
 * A connection is freed only in its handles' close callbacks. */
#ifndef GW_CONN_H
#define GW_CONN_H

#include <stdbool.h>
#include <stddef.h>

struct gw;
struct gw_conn;
struct gw_exch;

/* Accepts one pending connection on gw->listener (closes it at once over the cap). */
void gw_conn_accept(struct gw *gw);
/* Starts closing (idempotent); an unfinished exchange gets its on_abort. */
void gw_conn_close(struct gw_conn *c);
/* Queues bytes (copied). Ignored once closing. */
void gw_conn_write(struct gw_conn *c, const char *data, size_t n);
/* The current exchange is finished: close or move to the next pipelined request. */
void gw_conn_exch_done(struct gw_conn *c, struct gw_exch *x);
/* Close connections that are idle between requests (drain). */
void gw_conn_close_idle(struct gw *gw);
/* Close every connection (end of drain). flush: a connection with queued writes closes once
 * they are sent (a lingering one finishes its linger); else close at once. */
void gw_conn_close_all(struct gw *gw, bool flush);

#endif
