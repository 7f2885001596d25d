/* zap: the ZAP handler thread (common/zap.h). One REP socket on inproc://zeromq.zap.01 answers
 * libzmq's authentication requests; one inproc PAIR carries the stop request from zap_destroy.
 * Both sockets are created by zap_create and used only by the thread until it is joined. */
#include "common/zap.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zmq.h>

#include "common/clock.h"
#include "common/curve.h"
#include "common/err.h"
#include "common/log.h"
#include "common/xalloc.h"

#define ZAP_FRAMES_MAX 8    /* version, id, domain, address, identity, mechanism, creds.. */
#define ZAP_FRAME_BYTES 256 /* longer frames are cut (only the key matters, 32 bytes) */
#define ZAP_LOG_PER_S 10    /* denial lines per second before suppressing */

struct zap {
    void *rep;        /* REP on ZAP_ENDPOINT */
    void *ctl_main;   /* PAIR, zap_destroy's end */
    void *ctl_thread; /* PAIR, the thread's end */
    pthread_t thread;
    bool started;
    char *allow_path;         /* owned */
    struct curve_allow allow; /* thread only after start */
    bool allow_ok;            /* the last (re)load worked */
    struct stat allow_st;     /* identity of the file last loaded */
    uint64_t log_window_ms;   /* start of the current 1 s log window */
    int log_in_window;        /* denial lines logged in it */
    uint64_t log_suppressed;  /* denial lines not logged since the last one */
    atomic_bool running;
    atomic_uint_fast64_t n_allowed, n_denied, n_reloads;
};

struct zap_req {
    int n;                                       /* frames received */
    size_t len[ZAP_FRAMES_MAX];                  /* their full sizes */
    char f[ZAP_FRAMES_MAX][ZAP_FRAME_BYTES + 1]; /* contents, cut and NUL-terminated */
};

// ---- allow-list ----

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Reload the list when the file changed. Any failure denies everyone until a good reload. */
static void allow_refresh(struct zap *z)
{
    struct stat st;
    if (stat(z->allow_path, &st) < 0) {
        if (z->allow_ok)
            LOG_ERR("zap_allow_unreadable", "file=%s err=%s msg=\"denying every client\"",
                    z->allow_path, err_str(-errno));
        z->allow_ok = false;
        memset(&z->allow_st, 0, sizeof z->allow_st);
        return;
    }
    if (z->allow_ok && same_file(&st, &z->allow_st))
        return;
    if (!z->allow_ok && same_file(&st, &z->allow_st))
        return; /* the same bad file: already logged */
    int bad_line = 0;
    int rc = curve_allow_load(&z->allow, z->allow_path, &bad_line);
    z->allow_st = st;
    if (rc < 0) {
        LOG_ERR("zap_allow_unreadable", "file=%s err=%s line=%d msg=\"denying every client\"",
                z->allow_path, err_str(rc), bad_line);
        z->allow_ok = false;
        curve_allow_deinit(&z->allow);
        return;
    }
    if (atomic_load(&z->n_reloads) > 0 || !z->allow_ok)
        LOG_INFO("zap_allow_loaded", "file=%s keys=%zu", z->allow_path, z->allow.n);
    z->allow_ok = true;
    atomic_fetch_add(&z->n_reloads, 1);
}

// ---- one request ----

static int send_frame(void *sock, const void *data, size_t len, bool more)
{
    int rc = zmq_send(sock, data, len, more ? ZMQ_SNDMORE : 0);
    return rc < 0 ? -errno : 0;
}

static int reply(void *rep, const struct zap_req *r, const char *code, const char *text,
                 const char *user_id)
{
    const char *id = r->n > 1 ? r->f[1] : "";
    size_t id_len = r->n > 1 && r->len[1] <= ZAP_FRAME_BYTES ? r->len[1] : 0;
    int rc;
    if ((rc = send_frame(rep, "1.0", 3, true)) < 0 ||
        (rc = send_frame(rep, id, id_len, true)) < 0 ||
        (rc = send_frame(rep, code, strlen(code), true)) < 0 ||
        (rc = send_frame(rep, text, strlen(text), true)) < 0 ||
        (rc = send_frame(rep, user_id, strlen(user_id), true)) < 0 ||
        (rc = send_frame(rep, "", 0, false)) < 0)
        return rc;
    return 0;
}

/* Printable copy of a frame for a log line (no spaces, quotes or '=' from the wire). */
static const char *printable(const char *s, char *buf, size_t n)
{
    size_t o = 0;
    for (; *s && o + 1 < n; s++)
        buf[o++] = (*s > ' ' && *s < 127 && *s != '"' && *s != '=') ? *s : '_';
    buf[o] = '\0';
    if (o == 0 && n > 1)
        snprintf(buf, n, "-");
    return buf;
}

static void log_denied(struct zap *z, const struct zap_req *r, const char *reason, const char *fp)
{
    uint64_t now = clock_now_ms();
    if (now - z->log_window_ms >= 1000) {
        z->log_window_ms = now;
        z->log_in_window = 0;
    }
    if (z->log_in_window >= ZAP_LOG_PER_S) {
        z->log_suppressed++;
        return;
    }
    z->log_in_window++;
    char addr[64], mech[32], dom[64];
    LOG_WARN("zap_denied", "peer=%s key=%s reason=%s mechanism=%s domain=%s suppressed=%llu",
             printable(r->n > 3 ? r->f[3] : "", addr, sizeof addr), fp, reason,
             printable(r->n > 5 ? r->f[5] : "", mech, sizeof mech),
             printable(r->n > 2 ? r->f[2] : "", dom, sizeof dom),
             (unsigned long long)z->log_suppressed);
    z->log_suppressed = 0;
}

/* Decide and answer one request already received into r. Returns 0 or -errno of the send. */
static int handle(struct zap *z, const struct zap_req *r)
{
    const char *reason = NULL;
    char fp[CURVE_FP_LEN + 1] = "-";
    if (r->n < 6 || r->len[0] != 3 || memcmp(r->f[0], "1.0", 3) != 0)
        reason = "malformed";
    else if (r->len[5] != 5 || memcmp(r->f[5], "CURVE", 5) != 0)
        reason = "mechanism";
    else if (r->n != 7 || r->len[6] != CURVE_KEY_BYTES)
        reason = "malformed";
    else {
        const uint8_t *key = (const uint8_t *)r->f[6];
        curve_fingerprint(key, fp, sizeof fp);
        if (strcmp(r->f[2], CURVE_ZAP_DOMAIN) != 0 || r->len[2] != strlen(CURVE_ZAP_DOMAIN))
            reason = "domain";
        else {
            allow_refresh(z);
            if (!z->allow_ok)
                reason = "allow_list_unreadable";
            else if (!curve_allow_has(&z->allow, key))
                reason = "unknown_key";
        }
    }
    if (reason) {
        atomic_fetch_add(&z->n_denied, 1);
        log_denied(z, r, reason, fp);
        return reply(z->rep, r, "400", "not allowed", "");
    }
    atomic_fetch_add(&z->n_allowed, 1);
    char addr[64];
    LOG_DEBUG("zap_allowed", "peer=%s key=%s", printable(r->f[3], addr, sizeof addr), fp);
    return reply(z->rep, r, "200", "OK", fp); /* User-Id of the peer's messages = fingerprint */
}

/* Receive every frame of one request (the first is known to be waiting). */
static int recv_req(void *rep, struct zap_req *r)
{
    memset(r, 0, sizeof *r);
    int more = 1;
    while (more) {
        char buf[ZAP_FRAME_BYTES];
        int got = zmq_recv(rep, buf, sizeof buf, 0);
        if (got < 0)
            return -errno;
        if (r->n < ZAP_FRAMES_MAX) {
            size_t keep = (size_t)got < sizeof buf ? (size_t)got : sizeof buf;
            memcpy(r->f[r->n], buf, keep);
            r->f[r->n][keep] = '\0';
            r->len[r->n] = (size_t)got;
        }
        r->n++;
        size_t ml = sizeof more;
        if (zmq_getsockopt(rep, ZMQ_RCVMORE, &more, &ml) < 0)
            return -errno;
    }
    if (r->n > ZAP_FRAMES_MAX)
        r->n = ZAP_FRAMES_MAX; /* more frames than any mechanism sends: handle() refuses it */
    return 0;
}

// ---- the thread ----

static void *zap_main(void *arg)
{
    struct zap *z = arg;
    int rc = 0;
    for (;;) {
        zmq_pollitem_t it[2] = {
            {.socket = z->rep, .events = ZMQ_POLLIN},
            {.socket = z->ctl_thread, .events = ZMQ_POLLIN},
        };
        if (zmq_poll(it, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            break;
        }
        if (it[1].revents & ZMQ_POLLIN)
            break; /* zap_destroy */
        if (!(it[0].revents & ZMQ_POLLIN))
            continue;
        struct zap_req r;
        rc = recv_req(z->rep, &r);
        if (rc == 0)
            rc = handle(z, &r);
        if (rc == -EINTR) {
            rc = 0;
            continue;
        }
        if (rc < 0)
            break;
    }
    atomic_store(&z->running, false);
    if (rc < 0 && rc != -ETERM) {
        /* Without the handler libzmq would let in any client that knows the server key. */
        LOG_ERR("zap_died", "err=%s msg=\"authentication handler stopped: aborting\"", err_str(rc));
        abort();
    }
    return NULL;
}

// ---- lifecycle ----

struct zap *zap_create(void *zctx, const char *allow_path, int *rc_out)
{
    int rc = 0;
    struct zap *z = xcalloc(1, sizeof *z);
    z->allow_path = xstrdup(allow_path);
    atomic_init(&z->running, false);
    atomic_init(&z->n_allowed, 0);
    atomic_init(&z->n_denied, 0);
    atomic_init(&z->n_reloads, 0);

    int bad_line = 0;
    rc = curve_allow_load(&z->allow, allow_path, &bad_line);
    if (rc < 0)
        goto out_free;
    if (stat(allow_path, &z->allow_st) < 0) {
        rc = -errno;
        goto out_free;
    }
    z->allow_ok = true;
    atomic_store(&z->n_reloads, 1);
    LOG_INFO("zap_allow_loaded", "file=%s keys=%zu", allow_path, z->allow.n);

    int zero = 0;
    z->rep = zmq_socket(zctx, ZMQ_REP);
    if (!z->rep) {
        rc = -errno;
        goto out_free;
    }
    (void)zmq_setsockopt(z->rep, ZMQ_LINGER, &zero, sizeof zero); /* best effort */
    if (zmq_bind(z->rep, ZAP_ENDPOINT) < 0) {
        rc = -errno; /* EADDRINUSE: another handler in this context */
        goto out_close_rep;
    }
    char ctl_ep[64];
    snprintf(ctl_ep, sizeof ctl_ep, "inproc://tern-zap-ctl-%p", (void *)z);
    z->ctl_main = zmq_socket(zctx, ZMQ_PAIR);
    z->ctl_thread = zmq_socket(zctx, ZMQ_PAIR);
    if (!z->ctl_main || !z->ctl_thread || zmq_bind(z->ctl_main, ctl_ep) < 0 ||
        zmq_connect(z->ctl_thread, ctl_ep) < 0) {
        rc = -errno;
        goto out_close_ctl;
    }
    (void)zmq_setsockopt(z->ctl_main, ZMQ_LINGER, &zero, sizeof zero); /* best effort */
    (void)zmq_setsockopt(z->ctl_thread, ZMQ_LINGER, &zero, sizeof zero);
    atomic_store(&z->running, true);
    /* the thread takes no signals: the service's handlers run on its own threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&z->thread, NULL, zap_main, z);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        atomic_store(&z->running, false);
        rc = -e;
        goto out_close_ctl;
    }
    z->started = true;
    if (rc_out)
        *rc_out = 0;
    return z;

out_close_ctl:
    if (z->ctl_main)
        zmq_close(z->ctl_main);
    if (z->ctl_thread)
        zmq_close(z->ctl_thread);
out_close_rep:
    zmq_close(z->rep);
out_free:
    curve_allow_deinit(&z->allow);
    free(z->allow_path);
    free(z);
    if (rc_out)
        *rc_out = rc;
    return NULL;
}

void zap_destroy(struct zap *z)
{
    if (!z)
        return;
    if (z->started) {
        /* best effort: if the send fails the thread is already gone (running == false) */
        (void)zmq_send(z->ctl_main, "", 0, ZMQ_DONTWAIT);
        pthread_join(z->thread, NULL);
    }
    zmq_close(z->ctl_main);
    zmq_close(z->ctl_thread);
    zmq_close(z->rep);
    curve_allow_deinit(&z->allow);
    free(z->allow_path);
    free(z);
}

bool zap_is_running(const struct zap *z)
{
    return z && atomic_load(&((struct zap *)z)->running);
}

void zap_stats_get(const struct zap *z, struct zap_stats *out)
{
    struct zap *m = (struct zap *)z;
    out->n_allowed = atomic_load(&m->n_allowed);
    out->n_denied = atomic_load(&m->n_denied);
    out->n_reloads = atomic_load(&m->n_reloads);
}
