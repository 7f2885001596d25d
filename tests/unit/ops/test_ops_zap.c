/* test_ops_zap: a CURVE ROUTER on 127.0.0.1 behind the ZAP handler. An allowed client exchanges
 * a message (and its User-Id is its fingerprint); an unknown key, a client without CURVE, a
 * client with a wrong server key and a server socket in another ZAP domain get nothing through;
 * the unknown key is logged (stderr captured) with peer address and fingerprint; the handler
 * fails closed when its allow-list file goes away, and lets the client in again once it is back;
 * a missing allow-list or a second handler in one context fail at create time. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zmq.h>

#include "common/clock.h"
#include "common/curve.h"
#include "common/err.h"
#include "common/file.h"
#include "common/log.h"
#include "common/zap.h"
#include "test.h"

#define WAIT_MS 3000 /* upper bound for something that should happen */
#define QUIET_MS 300 /* how long "nothing arrives" is watched */

static char g_dir[64];
static int g_saved_stderr = -1;

static void capture_begin(const char *path)
{
    fflush(stderr);
    g_saved_stderr = dup(2);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && g_saved_stderr >= 0);
    dup2(fd, 2);
    close(fd);
}

static void capture_end(void)
{
    fflush(stderr);
    dup2(g_saved_stderr, 2);
    close(g_saved_stderr);
    g_saved_stderr = -1;
}

static void *client_open(void *zctx, const struct curve_keypair *kp, const struct curve_key *srv,
                         const char *ep)
{
    void *s = zmq_socket(zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (kp)
        CHECK_EQ_INT(curve_sock_client(s, kp, srv), 0);
    CHECK_EQ_INT(zmq_connect(s, ep), 0);
    return s;
}

static void sock_close(void *s)
{
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(s);
}

/* Receive one message (the last frame) within ms; returns its size or -1. user_id (may be
 * NULL) gets the "User-Id" property of that frame. */
static int recv_within(void *s, int ms, char *buf, size_t n, char *user_id, size_t uid_n)
{
    zmq_pollitem_t it = {.socket = s, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, ms) <= 0)
        return -1;
    int len = -1, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s, 0) < 0) {
            zmq_msg_close(&m);
            return -1;
        }
        more = zmq_msg_more(&m);
        if (!more) {
            len = (int)zmq_msg_size(&m);
            size_t c = (size_t)len < n - 1 ? (size_t)len : n - 1;
            memcpy(buf, zmq_msg_data(&m), c);
            buf[c] = '\0';
            if (user_id) {
                const char *u = zmq_msg_gets(&m, "User-Id");
                snprintf(user_id, uid_n, "%s", u ? u : "");
            }
        } else if (buf && n) {
            /* the routing id frame of a ROUTER: keep it for the reply */
            size_t c = zmq_msg_size(&m) < n ? zmq_msg_size(&m) : n;
            memcpy(buf, zmq_msg_data(&m), c);
        }
        zmq_msg_close(&m);
    }
    return len;
}

/* Wait until the monitor reports one of the events in mask. */
static bool wait_event(void *mon, int mask, int ms)
{
    uint64_t end = clock_now_ms() + (uint64_t)ms;
    while (clock_now_ms() < end) {
        zmq_pollitem_t it = {.socket = mon, .events = ZMQ_POLLIN};
        if (zmq_poll(&it, 1, 50) <= 0)
            continue;
        zmq_msg_t a, b;
        zmq_msg_init(&a);
        zmq_msg_init(&b);
        int ok = zmq_msg_recv(&a, mon, 0) >= 0 && zmq_msg_recv(&b, mon, 0) >= 0;
        uint16_t ev = 0;
        if (ok && zmq_msg_size(&a) >= 2)
            memcpy(&ev, zmq_msg_data(&a), 2);
        zmq_msg_close(&a);
        zmq_msg_close(&b);
        if (ok && (ev & mask))
            return true;
    }
    return false;
}

static bool wait_denied(const struct zap *z, uint64_t before, int ms)
{
    uint64_t end = clock_now_ms() + (uint64_t)ms;
    struct zap_stats st;
    do {
        zap_stats_get(z, &st);
        if (st.n_denied > before)
            return true;
        usleep(10000);
    } while (clock_now_ms() < end);
    return false;
}

static void write_allow(const char *path, const struct curve_keypair *kp)
{
    char tmp[200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fprintf(f, "# test allow-list\ncurve-public %s allowed-client\n", kp->pub.z85);
    fclose(f);
    CHECK_EQ_INT(rename(tmp, path), 0);
}

int main(void)
{
    log_init("test_ops_zap", LOG_LEVEL_INFO);
    snprintf(g_dir, sizeof g_dir, "/tmp/tern-ops-zap-XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    if (!curve_is_available())
        TEST_SKIP("libzmq built without CURVE");
    struct curve_keypair srv, good, unknown;
    CHECK_EQ_INT(curve_keypair_generate(&srv), 0);
    CHECK_EQ_INT(curve_keypair_generate(&good), 0);
    CHECK_EQ_INT(curve_keypair_generate(&unknown), 0);
    char allow[128], logf[128], fp_good[CURVE_FP_LEN + 1], fp_unknown[CURVE_FP_LEN + 1];
    snprintf(allow, sizeof allow, "%s/allow", g_dir);
    snprintf(logf, sizeof logf, "%s/stderr.log", g_dir);
    curve_fingerprint_z85(good.pub.z85, fp_good, sizeof fp_good);
    curve_fingerprint_z85(unknown.pub.z85, fp_unknown, sizeof fp_unknown);

    void *zctx = zmq_ctx_new();
    int rc = 0;
    /* fail closed at start: no allow-list, no handler */
    CHECK(zap_create(zctx, allow, &rc) == NULL);
    CHECK_EQ_INT(rc, -ENOENT);
    write_allow(allow, &good);
    /* a CURVE server socket refuses to be set up without a running handler */
    void *server = zmq_socket(zctx, ZMQ_ROUTER);
    CHECK_EQ_INT(curve_sock_server(server, &srv, NULL), ERR_STATE);

    struct zap *zap = zap_create(zctx, allow, &rc);
    CHECK(zap != NULL && rc == 0);
    if (!zap)
        return test_result();
    CHECK(zap_is_running(zap));
    CHECK(zap_create(zctx, allow, &rc) == NULL); /* one handler per context */
    CHECK_EQ_INT(rc, -EADDRINUSE);

    int zero = 0;
    zmq_setsockopt(server, ZMQ_LINGER, &zero, sizeof zero);
    CHECK_EQ_INT(curve_sock_server(server, &srv, zap), 0);
    CHECK_EQ_INT(zmq_socket_monitor(server, "inproc://ops-mon",
                                    ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                                        ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                        ZMQ_EVENT_HANDSHAKE_SUCCEEDED),
                 0);
    void *mon = zmq_socket(zctx, ZMQ_PAIR);
    CHECK_EQ_INT(zmq_connect(mon, "inproc://ops-mon"), 0);
    CHECK_EQ_INT(zmq_bind(server, "tcp://127.0.0.1:*"), 0);
    char ep[128];
    size_t epl = sizeof ep;
    CHECK_EQ_INT(zmq_getsockopt(server, ZMQ_LAST_ENDPOINT, ep, &epl), 0);

    /* 1. the allowed client: message both ways, User-Id = its fingerprint */
    char buf[256], rid[256], uid[64];
    void *c1 = client_open(zctx, &good, &srv.pub, ep);
    CHECK_EQ_INT(zmq_send(c1, "ping", 4, 0), 4);
    memset(rid, 0, sizeof rid);
    int n = recv_within(server, WAIT_MS, rid, sizeof rid, uid, sizeof uid);
    CHECK_EQ_INT(n, 4);
    CHECK_STREQ(rid, "ping");
    CHECK_STREQ(uid, fp_good);
    /* reply: the routing id is needed; receive again with a frame-aware read */
    CHECK_EQ_INT(zmq_send(c1, "again", 5, 0), 5);
    zmq_pollitem_t it = {.socket = server, .events = ZMQ_POLLIN};
    CHECK_EQ_INT(zmq_poll(&it, 1, WAIT_MS), 1);
    int idl = zmq_recv(server, rid, sizeof rid, 0);
    CHECK(idl > 0);
    CHECK_EQ_INT(zmq_recv(server, buf, sizeof buf, 0), 5);
    if (idl > 0) {
        CHECK_EQ_INT(zmq_send(server, rid, (size_t)idl, ZMQ_SNDMORE), idl);
        CHECK_EQ_INT(zmq_send(server, "pong", 4, 0), 4);
    }
    CHECK_EQ_INT(recv_within(c1, WAIT_MS, buf, sizeof buf, NULL, 0), 4);
    CHECK_STREQ(buf, "pong");
    CHECK(wait_event(mon, ZMQ_EVENT_HANDSHAKE_SUCCEEDED, WAIT_MS));

    capture_begin(logf);
    /* 2. an unknown key: denied by ZAP, logged, nothing arrives */
    struct zap_stats st;
    zap_stats_get(zap, &st);
    void *c2 = client_open(zctx, &unknown, &srv.pub, ep);
    zmq_send(c2, "intruder", 8, ZMQ_DONTWAIT); /* queued until a handshake that never ends */
    bool denied = wait_denied(zap, st.n_denied, WAIT_MS);
    bool auth_failed = wait_event(mon, ZMQ_EVENT_HANDSHAKE_FAILED_AUTH, WAIT_MS);
    int got_unknown = recv_within(server, QUIET_MS, buf, sizeof buf, NULL, 0);
    sock_close(c2);

    /* 3. no CURVE at all: the handshake fails on the mechanism, ZAP is not even asked */
    zap_stats_get(zap, &st);
    void *c3 = client_open(zctx, NULL, NULL, ep);
    zmq_send(c3, "plain", 5, ZMQ_DONTWAIT);
    bool proto_failed = wait_event(mon, ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL, WAIT_MS);
    int got_plain = recv_within(server, QUIET_MS, buf, sizeof buf, NULL, 0);
    sock_close(c3);

    /* 4. an allowed key that trusts a wrong server key: the handshake cannot complete */
    struct curve_keypair fake;
    CHECK_EQ_INT(curve_keypair_generate(&fake), 0);
    void *c4 = client_open(zctx, &good, &fake.pub, ep);
    zmq_send(c4, "wrongsrv", 8, ZMQ_DONTWAIT);
    int got_wrongsrv = recv_within(server, 2 * QUIET_MS, buf, sizeof buf, NULL, 0);
    sock_close(c4);

    /* 5. the allow-list disappears: fail closed, even for the listed key */
    char moved[160];
    snprintf(moved, sizeof moved, "%s.moved", allow);
    CHECK_EQ_INT(rename(allow, moved), 0);
    zap_stats_get(zap, &st);
    void *c5 = client_open(zctx, &good, &srv.pub, ep);
    zmq_send(c5, "nolist", 6, ZMQ_DONTWAIT);
    bool denied_nolist = wait_denied(zap, st.n_denied, WAIT_MS);
    int got_nolist = recv_within(server, QUIET_MS, buf, sizeof buf, NULL, 0);
    sock_close(c5);
    capture_end();

    CHECK(denied);
    CHECK(auth_failed);
    CHECK_EQ_INT(got_unknown, -1);
    CHECK(proto_failed);
    CHECK_EQ_INT(got_plain, -1);
    CHECK_EQ_INT(got_wrongsrv, -1);
    CHECK(denied_nolist);
    CHECK_EQ_INT(got_nolist, -1);

    char *log = file_read(logf, NULL);
    CHECK(log != NULL);
    if (log) {
        char want[128];
        snprintf(want, sizeof want, "key=%s reason=unknown_key", fp_unknown);
        const char *line = strstr(log, want);
        CHECK(line != NULL);
        /* that line: level, event, peer address */
        const char *bol = line;
        while (bol > log && bol[-1] != '\n')
            bol--;
        CHECK(strncmp(bol, "ts=", 3) == 0);
        CHECK(strstr(bol, "lvl=warn") != NULL && strstr(bol, "lvl=warn") < line);
        CHECK(strstr(bol, "ev=zap_denied peer=127.0.0.1 ") != NULL &&
              strstr(bol, "ev=zap_denied") < line);
        snprintf(want, sizeof want, "key=%s reason=allow_list_unreadable", fp_good);
        CHECK(strstr(log, want) != NULL);
        CHECK(strstr(log, "ev=zap_allow_unreadable") != NULL);
        snprintf(want, sizeof want, "key=%s reason=unknown_key", fp_good);
        CHECK(strstr(log, want) == NULL); /* the listed key was never called unknown */
        if (test_result() != 0)
            fprintf(stderr, "---- captured log ----\n%s----\n", log);
    }
    free(log);

    /* 6. the list comes back: the next connection is let in again (reload) */
    zap_stats_get(zap, &st);
    write_allow(allow, &good);
    void *c6 = client_open(zctx, &good, &srv.pub, ep);
    CHECK_EQ_INT(zmq_send(c6, "back", 4, 0), 4);
    n = recv_within(server, WAIT_MS, buf, sizeof buf, uid, sizeof uid);
    CHECK_EQ_INT(n, 4);
    CHECK_STREQ(buf, "back");
    struct zap_stats st6;
    zap_stats_get(zap, &st6);
    CHECK(st6.n_reloads > st.n_reloads);
    CHECK(st6.n_allowed >= 2);
    sock_close(c6);

    /* 7. a server socket in another ZAP domain: refused by the handler */
    void *other = zmq_socket(zctx, ZMQ_ROUTER);
    zmq_setsockopt(other, ZMQ_LINGER, &zero, sizeof zero);
    CHECK_EQ_INT(curve_sock_server(other, &srv, zap), 0);
    CHECK_EQ_INT(zmq_setsockopt(other, ZMQ_ZAP_DOMAIN, "other", 5), 0);
    CHECK_EQ_INT(zmq_bind(other, "tcp://127.0.0.1:*"), 0);
    char ep2[128];
    epl = sizeof ep2;
    zmq_getsockopt(other, ZMQ_LAST_ENDPOINT, ep2, &epl);
    capture_begin(logf);
    zap_stats_get(zap, &st);
    void *c7 = client_open(zctx, &good, &srv.pub, ep2);
    zmq_send(c7, "domain", 6, ZMQ_DONTWAIT);
    bool denied_domain = wait_denied(zap, st.n_denied, WAIT_MS);
    int got_domain = recv_within(other, QUIET_MS, buf, sizeof buf, NULL, 0);
    sock_close(c7);
    capture_end();
    CHECK(denied_domain);
    CHECK_EQ_INT(got_domain, -1);
    log = file_read(logf, NULL);
    CHECK(log && strstr(log, "reason=domain") != NULL);
    free(log);

    sock_close(c1);
    sock_close(other);
    sock_close(mon);
    sock_close(server);
    zap_destroy(zap);
    zmq_ctx_term(zctx);

    /* 8. a handler whose context shuts down stops running, and a stopped handler cannot
     * be used to make a CURVE server (the service would refuse to start) */
    void *ctx2 = zmq_ctx_new();
    struct zap *z2 = zap_create(ctx2, allow, &rc);
    CHECK(z2 != NULL);
    if (z2) {
        zmq_ctx_shutdown(ctx2);
        uint64_t end = clock_now_ms() + WAIT_MS;
        while (zap_is_running(z2) && clock_now_ms() < end)
            usleep(10000);
        CHECK(!zap_is_running(z2));
        void *ctx3 = zmq_ctx_new();
        void *s3 = zmq_socket(ctx3, ZMQ_ROUTER);
        CHECK_EQ_INT(curve_sock_server(s3, &srv, z2), ERR_STATE);
        sock_close(s3);
        zmq_ctx_term(ctx3);
        zap_destroy(z2);
    }
    zmq_ctx_term(ctx2);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (test_result() == 0 && system(cmd) != 0)
        fprintf(stderr, "note: could not remove %s\n", g_dir);
    return test_result();
}
