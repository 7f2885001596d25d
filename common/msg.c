/* msg: ZeroMQ + protobuf-c glue (see common/include/common/msg.h).
 * Frames are single-part on a DEALER and [routing id][payload] on a ROUTER. Unpacking uses a
 * byte-budgeted allocator so that a small frame cannot make protobuf-c allocate without bound;
 * allocations are plain malloc, so messages are freed with protobuf-c's default allocator. */
#include "common/msg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include <zmq.h>

#include "common/curve.h"
#include "common/err.h"

#define MSG_HWM_DEFAULT 10000
#define MSG_UNPACK_FACTOR 64         /* unpack budget: bytes allocated per byte of frame */
#define MSG_UNPACK_SLACK (64u << 10) /* plus this much */

// ---- context ----

void *msg_context_create(void)
{
    void *z = zmq_ctx_new();
    if (!z)
        return NULL;
    (void)zmq_ctx_set(z, ZMQ_IO_THREADS, 1); /* best effort: the default is already 1 */
    (void)zmq_ctx_set(z, ZMQ_BLOCKY, 0);     /* best effort: term must not hang on linger */
    return z;
}

void msg_context_destroy(void *zctx)
{
    if (!zctx)
        return;
    while (zmq_ctx_term(zctx) < 0 && errno == EINTR) {
    }
}

// ---- endpoints ----

bool msg_endpoint_is_valid(const char *ep)
{
    if (!ep || strlen(ep) >= MSG_ENDPOINT_MAX)
        return false;
    if (strncmp(ep, "ipc://", 6) == 0) {
        size_t n = strlen(ep + 6);
        return n > 0 && n < sizeof(((struct sockaddr_un *)0)->sun_path);
    }
    if (strncmp(ep, "inproc://", 9) == 0)
        return ep[9] != '\0';
    if (strncmp(ep, "tcp://", 6) == 0) {
        const char *colon = strrchr(ep + 6, ':');
        if (!colon || colon == ep + 6 || colon[1] == '\0')
            return false;
        if (strcmp(colon + 1, "*") == 0)
            return true;
        for (const char *p = colon + 1; *p; p++)
            if (*p < '0' || *p > '9')
                return false;
        return atoi(colon + 1) <= 65535;
    }
    return false;
}

int msg_runtime_dir(char *buf, size_t n)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    int len;
    if (xdg && xdg[0])
        len = snprintf(buf, n, "%s/tern", xdg);
    else
        len = snprintf(buf, n, "/tmp/tern-%u", (unsigned)getuid());
    if (len < 0 || (size_t)len >= n)
        return ERR_TOOBIG;
    if (mkdir(buf, 0700) < 0 && errno != EEXIST)
        return -errno;
    struct stat st;
    if (stat(buf, &st) < 0)
        return -errno;
    if (!S_ISDIR(st.st_mode))
        return -ENOTDIR;
    return 0;
}

int msg_endpoint_default(char *buf, size_t n, const char *name)
{
    char dir[MSG_ENDPOINT_MAX];
    int rc = msg_runtime_dir(dir, sizeof dir);
    if (rc < 0)
        return rc;
    int len = snprintf(buf, n, "ipc://%s/%s.sock", dir, name);
    if (len < 0 || (size_t)len >= n || !msg_endpoint_is_valid(buf))
        return ERR_TOOBIG;
    return 0;
}

// ---- sockets ----

static int sock_open(struct msg_sock *s, void *zctx, enum msg_kind kind, const char *endpoint,
                     const ProtobufCMessageDescriptor *desc, const struct msg_sock_opts *opts)
{
    memset(s, 0, sizeof *s);
    if (!zctx || !desc || !msg_endpoint_is_valid(endpoint))
        return ERR_INVAL;
    const ProtobufCFieldDescriptor *vf =
        protobuf_c_message_descriptor_get_field_by_name(desc, "protocol_version");
    if (!vf || vf->type != PROTOBUF_C_TYPE_UINT32 || vf->label == PROTOBUF_C_LABEL_REPEATED)
        return ERR_INVAL;
    s->kind = kind;
    s->desc = desc;
    s->version_field = vf;
    s->max_bytes = opts && opts->max_bytes ? opts->max_bytes : MSG_MAX_BYTES_DEFAULT;
    snprintf(s->endpoint, sizeof s->endpoint, "%s", endpoint);

    int type = kind == MSG_KIND_ROUTER ? ZMQ_ROUTER : kind == MSG_KIND_PAIR ? ZMQ_PAIR : ZMQ_DEALER;
    s->zsock = zmq_socket(zctx, type);
    if (!s->zsock)
        return -errno;
    int hwm = opts && opts->hwm > 0 ? opts->hwm : MSG_HWM_DEFAULT;
    int linger = opts && opts->linger_ms > 0 ? opts->linger_ms : 0;
    int64_t maxsz = (int64_t)s->max_bytes; /* per frame: zmq drops the peer beyond it */
    int one = 1;
    if (zmq_setsockopt(s->zsock, ZMQ_SNDHWM, &hwm, sizeof hwm) < 0 ||
        zmq_setsockopt(s->zsock, ZMQ_RCVHWM, &hwm, sizeof hwm) < 0 ||
        zmq_setsockopt(s->zsock, ZMQ_LINGER, &linger, sizeof linger) < 0 ||
        zmq_setsockopt(s->zsock, ZMQ_MAXMSGSIZE, &maxsz, sizeof maxsz) < 0)
        goto fail;
    if (kind == MSG_KIND_ROUTER &&
        zmq_setsockopt(s->zsock, ZMQ_ROUTER_MANDATORY, &one, sizeof one) < 0)
        goto fail;
    if (opts && opts->immediate && zmq_setsockopt(s->zsock, ZMQ_IMMEDIATE, &one, sizeof one) < 0)
        goto fail;
    if (opts && opts->curve) {
        int rc = curve_link_apply(opts->curve, s->zsock, endpoint);
        if (rc < 0) {
            zmq_close(s->zsock);
            s->zsock = NULL;
            return rc;
        }
    }
    return 0;
fail:;
    int err = -errno;
    zmq_close(s->zsock);
    s->zsock = NULL;
    return err;
}

int msg_sock_bind(struct msg_sock *s, void *zctx, enum msg_kind kind, const char *endpoint,
                  const ProtobufCMessageDescriptor *desc, const struct msg_sock_opts *opts)
{
    int rc = sock_open(s, zctx, kind, endpoint, desc, opts);
    if (rc < 0)
        return rc;
    if (zmq_bind(s->zsock, endpoint) < 0) {
        rc = -errno;
        zmq_close(s->zsock);
        s->zsock = NULL;
        return rc;
    }
    s->bound = true;
    return 0;
}

int msg_sock_connect(struct msg_sock *s, void *zctx, enum msg_kind kind, const char *endpoint,
                     const ProtobufCMessageDescriptor *desc, const struct msg_sock_opts *opts)
{
    int rc = sock_open(s, zctx, kind, endpoint, desc, opts);
    if (rc < 0)
        return rc;
    int ivl = 100, ivl_max = 1000;
    /* best effort: reconnect quickly after a peer restart (defaults are 100 ms / no max) */
    (void)zmq_setsockopt(s->zsock, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl);
    (void)zmq_setsockopt(s->zsock, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof ivl_max);
    if (zmq_connect(s->zsock, endpoint) < 0) {
        rc = -errno;
        zmq_close(s->zsock);
        s->zsock = NULL;
        return rc;
    }
    return 0;
}

void msg_sock_close(struct msg_sock *s)
{
    if (!s || !s->zsock)
        return;
    zmq_close(s->zsock);
    s->zsock = NULL;
    if (s->bound && strncmp(s->endpoint, "ipc://", 6) == 0)
        (void)unlink(s->endpoint + 6); /* best effort: a stale file is replaced on next bind */
}

int msg_sock_fd(const struct msg_sock *s, int *fd)
{
    size_t len = sizeof *fd;
    if (zmq_getsockopt(s->zsock, ZMQ_FD, fd, &len) < 0)
        return -errno;
    return 0;
}

int msg_sock_wait(struct msg_sock *s, int timeout_ms)
{
    zmq_pollitem_t it = {.socket = s->zsock, .events = ZMQ_POLLIN};
    int rc = zmq_poll(&it, 1, timeout_ms);
    if (rc < 0)
        return -errno;
    return rc > 0 ? 1 : 0;
}

// ---- send ----

int msg_send(struct msg_sock *s, const struct msg_peer *to, const ProtobufCMessage *msg)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    if (len > s->max_bytes)
        return ERR_TOOBIG;
    zmq_msg_t part;
    if (zmq_msg_init_size(&part, len) < 0)
        return -errno;
    protobuf_c_message_pack(msg, zmq_msg_data(&part));
    if (s->kind == MSG_KIND_ROUTER) {
        if (!to || to->len == 0) {
            zmq_msg_close(&part);
            return ERR_INVAL;
        }
        if (zmq_send(s->zsock, to->id, to->len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
            int e = errno;
            zmq_msg_close(&part);
            return e == EAGAIN ? ERR_FULL : e == EHOSTUNREACH ? ERR_CLOSED : -e;
        }
    }
    if (zmq_msg_send(&part, s->zsock, ZMQ_DONTWAIT) < 0) {
        int e = errno;
        zmq_msg_close(&part);
        return e == EAGAIN ? ERR_FULL : e == EHOSTUNREACH ? ERR_CLOSED : -e;
    }
    s->n_sent++;
    return 0;
}

// ---- receive ----

struct budget {
    size_t left; /* bytes the unpacker may still allocate */
};

static void *budget_alloc(void *data, size_t n)
{
    struct budget *b = data;
    if (n > b->left)
        return NULL;
    b->left -= n;
    return malloc(n);
}

static void budget_free(void *data, void *p)
{
    (void)data;
    free(p);
}

/* Discard the rest of a multipart message. */
static void drain_more(void *zsock)
{
    int more = 1;
    size_t ml = sizeof more;
    while (zmq_getsockopt(zsock, ZMQ_RCVMORE, &more, &ml) == 0 && more) {
        zmq_msg_t junk;
        zmq_msg_init(&junk);
        int rc = zmq_msg_recv(&junk, zsock, ZMQ_DONTWAIT);
        zmq_msg_close(&junk);
        if (rc < 0)
            break;
        ml = sizeof more;
    }
}

static bool has_more(void *zsock)
{
    int more = 0;
    size_t ml = sizeof more;
    return zmq_getsockopt(zsock, ZMQ_RCVMORE, &more, &ml) == 0 && more;
}

int msg_recv(struct msg_sock *s, struct msg_peer *from, ProtobufCMessage **out)
{
    *out = NULL;
    if (from)
        from->len = 0;
    zmq_msg_t part;
    zmq_msg_init(&part);
    if (zmq_msg_recv(&part, s->zsock, ZMQ_DONTWAIT) < 0) {
        int e = errno;
        zmq_msg_close(&part);
        return e == EAGAIN ? ERR_AGAIN : -e;
    }
    if (s->kind == MSG_KIND_ROUTER) {
        size_t idl = zmq_msg_size(&part);
        if (!has_more(s->zsock) || idl == 0 || idl > MSG_PEER_ID_MAX) {
            zmq_msg_close(&part);
            drain_more(s->zsock);
            s->n_dropped++;
            return ERR_PROTO;
        }
        if (from) {
            from->len = (uint8_t)idl;
            memcpy(from->id, zmq_msg_data(&part), idl);
        }
        zmq_msg_close(&part);
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, s->zsock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&part);
            s->n_dropped++;
            return ERR_PROTO; /* multipart messages arrive whole: a missing part is framing */
        }
    }
    size_t len = zmq_msg_size(&part);
    if (has_more(s->zsock) || len > s->max_bytes) {
        zmq_msg_close(&part);
        drain_more(s->zsock);
        s->n_dropped++;
        return ERR_PROTO;
    }
    struct budget b = {.left = len * MSG_UNPACK_FACTOR + MSG_UNPACK_SLACK};
    ProtobufCAllocator alloc = {.alloc = budget_alloc, .free = budget_free, .allocator_data = &b};
    ProtobufCMessage *m = protobuf_c_message_unpack(s->desc, &alloc, len, zmq_msg_data(&part));
    zmq_msg_close(&part);
    if (!m) {
        s->n_dropped++;
        return ERR_PROTO;
    }
    uint32_t ver = *(const uint32_t *)((const char *)m + s->version_field->offset);
    if (ver != MSG_PROTOCOL_VERSION) {
        protobuf_c_message_free_unpacked(m, NULL);
        s->n_dropped++;
        return ERR_VERSION;
    }
    s->n_recv++;
    *out = m;
    return 0;
}

void msg_free(ProtobufCMessage *msg)
{
    if (msg)
        protobuf_c_message_free_unpacked(msg, NULL); /* budget_alloc used plain malloc */
}

// ---- peers ----

bool msg_peer_equal(const struct msg_peer *a, const struct msg_peer *b)
{
    return a->len == b->len && memcmp(a->id, b->id, a->len) == 0;
}

const char *msg_peer_str(const struct msg_peer *p, char *buf, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < p->len && o + 2 < n; i++) {
        buf[o++] = hex[p->id[i] >> 4];
        buf[o++] = hex[p->id[i] & 15];
    }
    if (n)
        buf[o < n ? o : n - 1] = '\0';
    return buf;
}

// ---- heartbeats ----

void msg_hb_init(struct msg_hb *hb, uint32_t interval_ms, uint32_t dead_after_ms, uint64_t now_ms)
{
    hb->interval_ms = interval_ms;
    hb->dead_after_ms = dead_after_ms;
    hb->last_sent_ms = 0;
    hb->last_seen_ms = now_ms;
}

void msg_hb_seen(struct msg_hb *hb, uint64_t now_ms)
{
    hb->last_seen_ms = now_ms;
}

void msg_hb_sent(struct msg_hb *hb, uint64_t now_ms)
{
    hb->last_sent_ms = now_ms;
}

bool msg_hb_is_due(const struct msg_hb *hb, uint64_t now_ms)
{
    return hb->last_sent_ms == 0 || now_ms >= hb->last_sent_ms + hb->interval_ms;
}

bool msg_hb_is_dead(const struct msg_hb *hb, uint64_t now_ms)
{
    return now_ms > hb->last_seen_ms + hb->dead_after_ms;
}

int msg_hb_wait_ms(const struct msg_hb *hb, uint64_t now_ms)
{
    if (msg_hb_is_due(hb, now_ms))
        return 0;
    return (int)(hb->last_sent_ms + hb->interval_ms - now_ms);
}
