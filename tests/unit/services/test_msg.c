/* Unit: common/msg. Round trip over inproc PAIR and ROUTER/DEALER on ipc://, version mismatch,
 * malformed and oversize frames, multipart junk, sends to gone peers, endpoint checks, and the
 * heartbeat arithmetic. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <zmq.h>

#include "common/err.h"
#include "common/msg.h"
#include "proto/tern.pb-c.h"
#include "test.h"

static void env_init(Tern__Envelope *env, uint32_t ver, uint64_t req)
{
    tern__envelope__init(env);
    env->protocol_version = ver;
    env->req_id = req;
}

static int recv_wait(struct msg_sock *s, struct msg_peer *from, ProtobufCMessage **out)
{
    for (int i = 0; i < 200; i++) {
        int rc = msg_recv(s, from, out);
        if (rc != ERR_AGAIN)
            return rc;
        msg_sock_wait(s, 10);
    }
    return ERR_AGAIN;
}

static void test_pair(void *z)
{
    struct msg_sock a, b;
    struct msg_sock_opts o = {.max_bytes = 4096};
    CHECK_EQ_INT(
        msg_sock_bind(&a, z, MSG_KIND_PAIR, "inproc://t1", &tern__envelope__descriptor, &o), 0);
    CHECK_EQ_INT(
        msg_sock_connect(&b, z, MSG_KIND_PAIR, "inproc://t1", &tern__envelope__descriptor, &o), 0);
    ProtobufCMessage *m = NULL;
    CHECK_EQ_INT(msg_recv(&a, NULL, &m), ERR_AGAIN);

    /* round trip with a body */
    Tern__Envelope env;
    Tern__Submit sub = TERN__SUBMIT__INIT;
    uint32_t ids[3] = {5, 6, 70000};
    env_init(&env, MSG_PROTOCOL_VERSION, 42);
    sub.n_prompt_ids = 3;
    sub.prompt_ids = ids;
    env.body_case = TERN__ENVELOPE__BODY_SUBMIT;
    env.submit = &sub;
    CHECK_EQ_INT(msg_send(&b, NULL, &env.base), 0);
    CHECK_EQ_INT(recv_wait(&a, NULL, &m), 0);
    Tern__Envelope *got = (Tern__Envelope *)m;
    CHECK(got && got->req_id == 42 && got->body_case == TERN__ENVELOPE__BODY_SUBMIT);
    CHECK(got && got->submit->n_prompt_ids == 3 && got->submit->prompt_ids[2] == 70000);
    msg_free(m);

    /* another version: decoded, refused */
    env_init(&env, MSG_PROTOCOL_VERSION + 1, 7);
    CHECK_EQ_INT(msg_send(&b, NULL, &env.base), 0);
    CHECK_EQ_INT(recv_wait(&a, NULL, &m), ERR_VERSION);
    CHECK(m == NULL);

    /* garbage bytes: does not decode */
    const char junk[] = "\xff\xff\xff\xff\xff\x01\x02";
    CHECK(zmq_send(b.zsock, junk, sizeof junk, 0) >= 0);
    CHECK_EQ_INT(recv_wait(&a, NULL, &m), ERR_PROTO);
    /* a required field missing: an empty frame decodes to nothing valid */
    CHECK(zmq_send(b.zsock, "", 0, 0) >= 0);
    CHECK_EQ_INT(recv_wait(&a, NULL, &m), ERR_PROTO);
    /* multipart junk is consumed whole */
    CHECK(zmq_send(b.zsock, "a", 1, ZMQ_SNDMORE) >= 0);
    CHECK(zmq_send(b.zsock, "b", 1, ZMQ_SNDMORE) >= 0);
    CHECK(zmq_send(b.zsock, "c", 1, 0) >= 0);
    CHECK_EQ_INT(recv_wait(&a, NULL, &m), ERR_PROTO);
    CHECK_EQ_INT(msg_recv(&a, NULL, &m), ERR_AGAIN);
    /* oversize (inproc does not enforce ZMQ_MAXMSGSIZE: our own cap must) */
    static char big[5000];
    memset(big, 0x08, sizeof big);
    CHECK(zmq_send(b.zsock, big, sizeof big, 0) >= 0);
    CHECK_EQ_INT(recv_wait(&a, NULL, &m), ERR_PROTO);
    CHECK(a.n_dropped == 5);
    /* and a message too big to send */
    static uint32_t many[3000];
    sub.n_prompt_ids = 3000;
    sub.prompt_ids = many;
    for (int i = 0; i < 3000; i++)
        many[i] = 1u << 30;
    env_init(&env, MSG_PROTOCOL_VERSION, 1);
    env.body_case = TERN__ENVELOPE__BODY_SUBMIT;
    env.submit = &sub;
    CHECK_EQ_INT(msg_send(&b, NULL, &env.base), ERR_TOOBIG);
    /* still works afterwards */
    env_init(&env, MSG_PROTOCOL_VERSION, 9);
    CHECK_EQ_INT(msg_send(&b, NULL, &env.base), 0);
    CHECK_EQ_INT(recv_wait(&a, NULL, &m), 0);
    CHECK(m && ((Tern__Envelope *)m)->req_id == 9);
    msg_free(m);
    msg_sock_close(&b);
    msg_sock_close(&a);
}

static void test_router(void *z)
{
    char dir[] = "/tmp/tern-msg-XXXXXX", ep[128];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(ep, sizeof ep, "ipc://%s/r.sock", dir);
    struct msg_sock r, d;
    CHECK_EQ_INT(msg_sock_bind(&r, z, MSG_KIND_ROUTER, ep, &tern__envelope__descriptor, NULL), 0);
    CHECK_EQ_INT(msg_sock_connect(&d, z, MSG_KIND_DEALER, ep, &tern__envelope__descriptor, NULL),
                 0);
    Tern__Envelope env;
    env_init(&env, MSG_PROTOCOL_VERSION, 77);
    CHECK_EQ_INT(msg_send(&d, NULL, &env.base), 0);
    struct msg_peer from;
    ProtobufCMessage *m;
    CHECK_EQ_INT(recv_wait(&r, &from, &m), 0);
    CHECK(from.len > 0);
    msg_free(m);
    /* reply to the peer */
    env_init(&env, MSG_PROTOCOL_VERSION, 78);
    CHECK_EQ_INT(msg_send(&r, &from, &env.base), 0);
    CHECK_EQ_INT(recv_wait(&d, NULL, &m), 0);
    CHECK(m && ((Tern__Envelope *)m)->req_id == 78);
    msg_free(m);
    /* unknown peer: ERR_CLOSED (ROUTER_MANDATORY) */
    struct msg_peer nobody = {.len = 3, .id = {1, 2, 3}};
    CHECK_EQ_INT(msg_send(&r, &nobody, &env.base), ERR_CLOSED);
    CHECK_EQ_INT(msg_send(&r, NULL, &env.base), ERR_INVAL);
    char hex[16];
    CHECK_STREQ(msg_peer_str(&nobody, hex, sizeof hex), "010203");
    CHECK(msg_peer_equal(&from, &from) && !msg_peer_equal(&from, &nobody));
    /* the peer goes away: sends to it fail once the pipe is gone */
    msg_sock_close(&d);
    int rc = 0;
    for (int i = 0; i < 100 && rc == 0; i++) {
        rc = msg_send(&r, &from, &env.base);
        usleep(10000);
    }
    CHECK_EQ_INT(rc, ERR_CLOSED);
    char path[160];
    snprintf(path, sizeof path, "%s/r.sock", dir);
    msg_sock_close(&r);
    CHECK(access(path, F_OK) != 0); /* the ipc file is removed on close */
    rmdir(dir);
}

static void test_endpoints(void)
{
    CHECK(msg_endpoint_is_valid("ipc:///tmp/x.sock"));
    CHECK(msg_endpoint_is_valid("tcp://127.0.0.1:5555"));
    CHECK(msg_endpoint_is_valid("tcp://*:5555"));
    CHECK(msg_endpoint_is_valid("inproc://x"));
    CHECK(!msg_endpoint_is_valid("ipc://"));
    CHECK(!msg_endpoint_is_valid("tcp://127.0.0.1"));
    CHECK(!msg_endpoint_is_valid("tcp://127.0.0.1:99999"));
    CHECK(!msg_endpoint_is_valid("tcp://host:12a"));
    CHECK(!msg_endpoint_is_valid("http://x:1"));
    CHECK(!msg_endpoint_is_valid(NULL));
    char longp[200], ep[300];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    snprintf(ep, sizeof ep, "ipc:///%s", longp);
    CHECK(!msg_endpoint_is_valid(ep)); /* beyond sun_path */
    char buf[256];
    CHECK_EQ_INT(msg_endpoint_default(buf, sizeof buf, "x"), 0);
    CHECK(strncmp(buf, "ipc://", 6) == 0 && strstr(buf, "/x.sock") != NULL);
    CHECK_EQ_INT(msg_endpoint_default(buf, 10, "x"), ERR_TOOBIG);
}

static void test_hb(void)
{
    struct msg_hb hb;
    msg_hb_init(&hb, 100, 300, 1000);
    CHECK(msg_hb_is_due(&hb, 1000)); /* never sent */
    msg_hb_sent(&hb, 1000);
    CHECK(!msg_hb_is_due(&hb, 1099));
    CHECK(msg_hb_is_due(&hb, 1100));
    CHECK_EQ_INT(msg_hb_wait_ms(&hb, 1040), 60);
    CHECK(!msg_hb_is_dead(&hb, 1300));
    CHECK(msg_hb_is_dead(&hb, 1301));
    msg_hb_seen(&hb, 1290);
    CHECK(!msg_hb_is_dead(&hb, 1500));
}

int main(void)
{
    void *z = msg_context_create();
    CHECK(z != NULL);
    test_pair(z);
    test_router(z);
    test_endpoints();
    test_hb();
    msg_context_destroy(z);
    return test_result();
}
