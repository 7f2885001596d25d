/* msg: ZeroMQ + protobuf-c glue shared by the gateway, the scheduler and the worker.
 * One frame = one packed protobuf message (tern.Envelope, proto/tern.proto). A ROUTER socket
 * (scheduler side) prefixes each frame with the peer's routing id; a DEALER (gateway, worker)
 * does not. Every receive is size-capped (ZMQ_MAXMSGSIZE + a bounded unpack allocator), and
 * checks the envelope's protocol_version. This module knows nothing of the generated types: the
 * caller passes the envelope descriptor (&tern__envelope__descriptor) and casts. It does not log.
 */
#ifndef COMMON_MSG_H
#define COMMON_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#define MSG_PROTOCOL_VERSION 1u          /* Envelope.protocol_version of this build */
#define MSG_MAX_BYTES_DEFAULT (8u << 20) /* default frame cap, bytes */
#define MSG_PEER_ID_MAX 255              /* zmq routing ids are 1..255 bytes */
#define MSG_ENDPOINT_MAX 256             /* endpoint string incl. NUL */
#define MSG_MAX_TOP_LOGPROBS 20          /* bound for SamplingParams.top_logprobs */
#define MSG_MAX_LOGIT_BIAS 1024          /* bound for SamplingParams.bias_ids / bias_values */
/* Bounds on a Register: the scheduler sizes its per-worker pool accounting from these (5 bytes a
 * block), so a worker may not announce more; a worker whose plan is larger announces the bound. */
#define MSG_MAX_KV_BLOCKS (1u << 24)   /* Register.kv_blocks (16.7M blocks, 84 MB of accounting) */
#define MSG_MAX_SEQS 4096u             /* Register.max_seqs and state_slots */
#define MSG_MAX_BLOCK_TOKENS 4096u     /* Register.block_tokens */

struct curve_link;

enum msg_kind {
    MSG_KIND_ROUTER = 0, /* scheduler side: many peers, routing ids */
    MSG_KIND_DEALER,     /* gateway / worker side: one scheduler */
    MSG_KIND_PAIR,       /* inproc:// link between two threads of one process */
};

struct msg_sock_opts {
    size_t max_bytes; /* frame cap, bytes; 0 = MSG_MAX_BYTES_DEFAULT */
    int hwm;          /* send and receive high-water mark, frames; 0 = 10000 */
    int linger_ms;    /* ZMQ_LINGER on close, ms; <0 = 0 */
    bool immediate;   /* ZMQ_IMMEDIATE: no queueing to a peer not connected
                         (send fails ERR_FULL instead) */
    const struct curve_link *curve; /* CURVE on tcp:// endpoints (common/curve.h); NULL = none */
};

struct msg_sock {
    void *zsock; /* the zmq socket, NULL when closed */
    enum msg_kind kind;
    const ProtobufCMessageDescriptor *desc; /* envelope type; needs a uint32 protocol_version */
    const ProtobufCFieldDescriptor *version_field; /* desc's "protocol_version" */
    size_t max_bytes;                              /* frame cap, bytes */
    char endpoint[MSG_ENDPOINT_MAX];               /* as bound / connected */
    bool bound;                                    /* bind (true) or connect (false) */
    uint64_t n_sent, n_recv, n_dropped; /* frames: sent, received ok, received and dropped */
};

/* A ROUTER peer's routing id, as received. */
struct msg_peer {
    uint8_t len; /* 1..MSG_PEER_ID_MAX; 0 = none */
    uint8_t id[MSG_PEER_ID_MAX];
};

/* Create / destroy a zmq context (1 I/O thread, non-blocking term). NULL on failure. */
void *msg_context_create(void);
void msg_context_destroy(void *zctx);

/* Open s as kind, bound to (or connected to) endpoint ("ipc://path" or "tcp://host:port").
 * desc is the envelope descriptor; it must have a uint32 field "protocol_version".
 * A ROUTER also sets ZMQ_ROUTER_MANDATORY so that sends to a gone peer fail.
 * A PAIR socket (threads of one process) is bound / connected to "inproc://name".
 * With opts->curve, a tcp:// socket becomes a CURVE server (bind) or client (connect).
 * Returns 0, ERR_INVAL (bad endpoint or descriptor), ERR_STATE (CURVE server without a
 * running ZAP handler), or -errno from zmq. */
int msg_sock_bind(struct msg_sock *s, void *zctx, enum msg_kind kind, const char *endpoint,
                  const ProtobufCMessageDescriptor *desc, const struct msg_sock_opts *opts);
int msg_sock_connect(struct msg_sock *s, void *zctx, enum msg_kind kind, const char *endpoint,
                     const ProtobufCMessageDescriptor *desc, const struct msg_sock_opts *opts);
/* Close; a bound ipc:// socket also unlinks its file. No-op on a closed socket. */
void msg_sock_close(struct msg_sock *s);

/* The fd to watch for readability in an outside loop (libuv): it is edge-triggered, so after
 * it fires call msg_recv until ERR_AGAIN. Returns 0 or -errno. */
int msg_sock_fd(const struct msg_sock *s, int *fd);

/* Pack msg and send it without blocking (to peer `to` on a ROUTER; `to` is ignored on a
 * DEALER). Returns 0, ERR_FULL (high-water mark: back-pressure, nothing sent), ERR_CLOSED
 * (ROUTER: peer unknown or gone), ERR_TOOBIG (larger than the frame cap), -errno. */
int msg_send(struct msg_sock *s, const struct msg_peer *to, const ProtobufCMessage *msg);

/* Receive one frame without blocking. On 0, *out is the unpacked envelope (free it with
 * msg_free before the handler returns) and `from` (may be NULL) holds the ROUTER peer id.
 * Returns ERR_AGAIN (nothing waiting), ERR_PROTO (malformed: bad framing, does not decode, or
 * too big for the unpack budget; the frame is consumed), ERR_VERSION (decoded, other version;
 * *out is NULL, *from is set so the caller may answer), -errno. *out is NULL on every error. */
int msg_recv(struct msg_sock *s, struct msg_peer *from, ProtobufCMessage **out);
/* Free a message returned by msg_recv. NULL is a no-op. */
void msg_free(ProtobufCMessage *msg);

/* Wait until s is readable or timeout_ms passes (-1 = forever). Returns 1 readable, 0 timeout,
 * -errno (-EINTR when a signal arrived). For loops that poll one socket; others use zmq_poll. */
int msg_sock_wait(struct msg_sock *s, int timeout_ms);

bool msg_peer_equal(const struct msg_peer *a, const struct msg_peer *b);
/* Hex of the id into buf (for logs), truncated to n-1 chars; returns buf. */
const char *msg_peer_str(const struct msg_peer *p, char *buf, size_t n);

/* ---- endpoints ---- */

/* The runtime dir for ipc:// sockets: $XDG_RUNTIME_DIR/tern, else /tmp/tern-<uid>; created
 * with mode 0700 when missing. Returns 0, ERR_TOOBIG, or -errno. */
int msg_runtime_dir(char *buf, size_t n);
/* "ipc://<runtime dir>/<name>.sock". Returns 0, ERR_TOOBIG (longer than a unix socket path),
 * -errno. */
int msg_endpoint_default(char *buf, size_t n, const char *name);
/* true for "ipc://<non-empty path>", "tcp://<host>:<port>" and "inproc://<name>". */
bool msg_endpoint_is_valid(const char *endpoint);

/* ---- heartbeats ---- */

/* Timing of one heartbeat relation with one peer. The caller builds and sends the message. */
struct msg_hb {
    uint32_t interval_ms;   /* send every interval_ms */
    uint32_t dead_after_ms; /* peer silent this long = dead */
    uint64_t last_sent_ms;  /* clock_now_ms() of our last send */
    uint64_t last_seen_ms;  /* clock_now_ms() of the last frame from the peer */
};

void msg_hb_init(struct msg_hb *hb, uint32_t interval_ms, uint32_t dead_after_ms, uint64_t now_ms);
void msg_hb_seen(struct msg_hb *hb, uint64_t now_ms); /* any frame from the peer counts */
void msg_hb_sent(struct msg_hb *hb, uint64_t now_ms);
bool msg_hb_is_due(const struct msg_hb *hb, uint64_t now_ms);
bool msg_hb_is_dead(const struct msg_hb *hb, uint64_t now_ms);
/* ms until the next heartbeat is due (0 if due now), for poll timeouts. */
int msg_hb_wait_ms(const struct msg_hb *hb, uint64_t now_ms);

#endif
