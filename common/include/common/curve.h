/* curve: CURVE (RFC 26) keys and socket setup for tern's ZeroMQ links that leave the host.
 * Key files are small text files of "name value" lines ('#' starts a comment line):
 *   PREFIX.key (secret, mode 0600):  curve-public <40 Z85 chars>  and  curve-secret <40 Z85 chars>
 *   PREFIX.pub:                      curve-public <40 Z85 chars>
 * An allow-list file holds one client public key per line, "[curve-public] <Z85> [name]", so
 * `cat worker1.pub >> allow` works. Logs name a key by its fingerprint: 8 hex chars of FNV-1a-32
 * over the 32 key bytes (Z85 itself contains '=' and would break key=value log lines).
 * Server sockets need a running ZAP handler (common/zap.h), which is what makes CURVE fail closed.
 * Link policy: a tcp:// endpoint that is not loopback needs keys, or an explicit --insecure-tcp. */
#ifndef COMMON_CURVE_H
#define COMMON_CURVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CURVE_Z85_LEN 40 /* a 32-byte key in Z85, without the NUL */
#define CURVE_KEY_BYTES 32
#define CURVE_FP_LEN 8          /* fingerprint: hex chars, without the NUL */
#define CURVE_ZAP_DOMAIN "tern" /* ZMQ_ZAP_DOMAIN set on every CURVE server socket */
#define CURVE_ALLOW_MAX 4096    /* keys in one allow-list file */

struct zap;
struct curve_nag;

/* One key, Z85-encoded and NUL-terminated. */
struct curve_key {
    char z85[CURVE_Z85_LEN + 1];
};

/* A key pair; pub is always the public key of sec (checked on load). */
struct curve_keypair {
    struct curve_key pub;
    struct curve_key sec;
};

/* Allowed client public keys (raw bytes, for the ZAP handler). */
struct curve_allow {
    size_t n;                         /* keys in use */
    uint8_t (*keys)[CURVE_KEY_BYTES]; /* n keys, owned, xmalloc'd */
};

/* true when this libzmq was built with CURVE (zmq_has("curve")). */
bool curve_is_available(void);

/* New random key pair (zmq_curve_keypair). Returns 0, ERR_UNSUPPORTED (no CURVE in libzmq). */
int curve_keypair_generate(struct curve_keypair *kp);

/* Write PREFIX.key (created 0600, O_EXCL unless overwrite) and PREFIX.pub (0644).
 * Returns 0, ERR_TOOBIG (prefix too long), -EEXIST (a file exists and !overwrite), -errno. */
int curve_keypair_write(const struct curve_keypair *kp, const char *prefix, bool overwrite);

/* Load a secret key file. It must be a regular file owned by the effective uid with no group
 * or other permission bits (0600 or 0400). Returns 0, -EACCES (permissions or owner),
 * ERR_FORMAT (no valid curve-secret line, or curve-public does not match it), -errno. */
int curve_keypair_load(struct curve_keypair *kp, const char *path);

/* Load a public key file (the first valid curve-public line, or a bare Z85 key line).
 * Returns 0, ERR_FORMAT, -errno. */
int curve_pub_load(struct curve_key *key, const char *path);

/* Load an allow-list file into a (replaced on success; curve_allow_deinit frees it). The file
 * must not be writable by group or other. An empty list is an error: it would refuse everyone.
 * On ERR_FORMAT, *bad_line (may be NULL) is the first bad line (1-based).
 * Returns 0, -EACCES, ERR_FORMAT, ERR_TOOBIG (more than CURVE_ALLOW_MAX keys), -errno. */
int curve_allow_load(struct curve_allow *a, const char *path, int *bad_line);
void curve_allow_deinit(struct curve_allow *a);
/* true when key (32 raw bytes) is in the list. Constant-time per entry. */
bool curve_allow_has(const struct curve_allow *a, const uint8_t *key);

/* Decode / check one Z85 key. Returns 0 or ERR_FORMAT. */
int curve_key_decode(const char *z85, uint8_t out[CURVE_KEY_BYTES]);
/* Fingerprint of 32 raw key bytes as CURVE_FP_LEN hex chars into buf (n >= CURVE_FP_LEN + 1). */
const char *curve_fingerprint(const uint8_t *key, char *buf, size_t n);
/* Same, from a Z85 key; "????????" if it does not decode. */
const char *curve_fingerprint_z85(const char *z85, char *buf, size_t n);

/* Make zsock (not yet bound) a CURVE server with kp's secret key and ZAP domain
 * CURVE_ZAP_DOMAIN. zap must be a running handler in the socket's context: without one libzmq
 * accepts any client that knows the server key. Returns 0, ERR_STATE (zap NULL or dead), -errno. */
int curve_sock_server(void *zsock, const struct curve_keypair *kp, const struct zap *zap);
/* Make zsock (not yet connected) a CURVE client with its own key pair and the server's public
 * key. Returns 0 or -errno. */
int curve_sock_client(void *zsock, const struct curve_keypair *kp, const struct curve_key *server);

/* ---- link policy ---- */

/* true for ipc://, inproc://, and tcp:// on 127.0.0.0/8, ::1 or "localhost" (not "*"). */
bool curve_endpoint_is_local(const char *endpoint);
/* Decide whether a link may use endpoint: 0 when it is local or keys are set (have_keys), or
 * when insecure_tcp is true (the caller then warns); ERR_INVAL (refuse to start) otherwise. */
int curve_endpoint_check(const char *endpoint, bool have_keys, bool insecure_tcp);

/* ---- a service's link security, from its flags ---- */

/* The flags every service takes (empty string = unset). */
struct curve_link_cfg {
    char secret_path[256];     /* --curve-secret FILE: own key pair (PREFIX.key) */
    char server_pub_path[256]; /* --curve-server-pub FILE: the scheduler's PREFIX.pub (clients) */
    char allow_path[256];      /* --curve-allow FILE: client public keys (server) */
    bool insecure_tcp;         /* --insecure-tcp: allow a non-loopback tcp:// link without keys */
};

/* common/cfg.h table entries for a struct curve_link_cfg that is field `member` of `type`:
 * --curve-secret, --curve-server-pub, --curve-allow, --insecure-tcp (env TERN_CURVE_SECRET,
 * TERN_CURVE_SERVER_PUB, TERN_CURVE_ALLOW, TERN_INSECURE_TCP). Needs common/cfg.h and stddef.h. */
// clang-format off
#define CURVE_CFG_OPTS(type, member)                                                            \
    {"curve-secret", "TERN_CURVE_SECRET", CFG_TYPE_STR, offsetof(type, member.secret_path),     \
     sizeof(((type *)0)->member.secret_path), 0, 0,                                             \
     "own CURVE key pair file (PREFIX.key, mode 0600) for tcp:// links (none)"},                \
    {"curve-server-pub", "TERN_CURVE_SERVER_PUB", CFG_TYPE_STR,                                 \
     offsetof(type, member.server_pub_path), sizeof(((type *)0)->member.server_pub_path), 0, 0, \
     "the scheduler's CURVE public key file (PREFIX.pub), clients (none)"},                     \
    {"curve-allow", "TERN_CURVE_ALLOW", CFG_TYPE_STR, offsetof(type, member.allow_path),        \
     sizeof(((type *)0)->member.allow_path), 0, 0,                                              \
     "allowed client public keys, one per line, scheduler (none)"},                             \
    {"insecure-tcp", "TERN_INSECURE_TCP", CFG_TYPE_BOOL, offsetof(type, member.insecure_tcp),   \
     0, 0, 0, "allow a non-loopback tcp:// link without CURVE (false)"}
// clang-format on

/* A service's loaded security state: what msg_sock_bind / msg_sock_connect need. */
struct curve_link {
    bool enabled;                /* keys loaded: CURVE on for tcp:// sockets */
    bool server;                 /* bind side (scheduler) */
    struct curve_keypair kp;     /* own keys (enabled) */
    struct curve_key server_pub; /* the server's public key (enabled && !server) */
    struct zap *zap;             /* ZAP handler (enabled && server), owned */
    struct curve_nag *nag;       /* --insecure-tcp warning thread, owned; NULL when unused */
};

/* Check the endpoints against the policy, load keys and (server) start the ZAP handler in
 * zctx, which must happen before any CURVE socket binds. A server needs secret + allow, a
 * client secret + server-pub; a half-configured set is ERR_INVAL. With insecure_tcp and a
 * non-local endpoint without keys, a thread logs ev=insecure_tcp every 60 s.
 * Logs what it refuses (ev=curve_refused) and what it loaded (ev=curve_on).
 * Returns 0, ERR_INVAL, or the failing load's status. */
int curve_link_init(struct curve_link *l, const struct curve_link_cfg *cfg, void *zctx, bool server,
                    const char *const *endpoints, size_t n_endpoints);
/* --check-config: what curve_link_init would load at startup (keys, allow-list, the endpoint
 * policy), in a context of its own, then let go. Returns its status (it logs refusals). */
int curve_link_check(const struct curve_link_cfg *cfg, bool server, const char *const *endpoints,
                     size_t n_endpoints);
/* Stop the ZAP handler and the nag thread. Call before the zmq context is terminated. */
void curve_link_deinit(struct curve_link *l);
/* Apply CURVE to a socket about to bind (server) or connect (client) to endpoint: every tcp://
 * endpoint (loopback too, so both ends agree) when keys are on; nothing for ipc:// / inproc://
 * or when keys are off. Returns 0 or the curve_sock_* status. */
int curve_link_apply(const struct curve_link *l, void *zsock, const char *endpoint);

#endif
