/* zap: a ZAP handler (RFC 27) that lets in only CURVE clients whose public key is listed.
 * It runs in its own thread on a REP socket bound to inproc://zeromq.zap.01 of one zmq context;
 * it must be started before any CURVE socket of that context binds (libzmq skips ZAP, i.e.
 * accepts every client that knows the server key, when no handler is bound). Fail closed:
 *   - any mechanism but CURVE, a domain other than CURVE_ZAP_DOMAIN, an unknown key -> 400,
 *     logged as ev=zap_denied with the peer address and the key fingerprint (rate-limited);
 *   - the allow-list file is re-read when its mtime or size changes; if it cannot be read or
 *     parsed, every request is denied until it can (ev=zap_allow_unreadable);
 *   - if the thread dies on an unexpected error it logs ev=zap_died and calls abort(): the
 *     service must not keep serving without authentication, and systemd restarts it. */
#ifndef COMMON_ZAP_H
#define COMMON_ZAP_H

#include <stdbool.h>
#include <stdint.h>

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"

struct zap;

/* Counters, for tests and /metrics. */
struct zap_stats {
    uint64_t n_allowed; /* 200 replies */
    uint64_t n_denied;  /* 400 replies (any reason) */
    uint64_t n_reloads; /* successful allow-list (re)loads */
};

/* Load allow_path (copied), bind the handler in zctx and start its thread. Returns NULL (and
 * *rc, may be NULL, holds why: a curve_allow_load status, -errno from zmq or pthread) when the
 * list cannot be loaded or the endpoint cannot be bound (another handler already there). */
struct zap *zap_create(void *zctx, const char *allow_path, int *rc);
/* Stop the thread (it is told through an inproc pair, then joined) and close the socket.
 * NULL is a no-op. Call before zmq_ctx_term. */
void zap_destroy(struct zap *z);
/* true while the handler thread serves requests. */
bool zap_is_running(const struct zap *z);
void zap_stats_get(const struct zap *z, struct zap_stats *out);

#endif
