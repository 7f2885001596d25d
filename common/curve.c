/* curve: CURVE key files, allow-lists, socket setup and the link policy (common/curve.h).
 * Files are read with open + fstat on the same fd, so the permission check and the contents
 * refer to one file. Secrets are wiped from stack buffers after use (explicit_bzero). */
#include "common/curve.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "common/err.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "common/zap.h"

#define CURVE_FILE_MAX (1u << 20) /* key and allow-list files are small; refuse larger */
#define CURVE_NAG_S 60            /* --insecure-tcp warning interval, seconds */

// ---- keys ----

bool curve_is_available(void)
{
    return zmq_has("curve") != 0;
}

int curve_key_decode(const char *z85, uint8_t out[CURVE_KEY_BYTES])
{
    if (!z85 || strlen(z85) != CURVE_Z85_LEN)
        return ERR_FORMAT;
    if (!zmq_z85_decode(out, z85))
        return ERR_FORMAT;
    return 0;
}

const char *curve_fingerprint(const uint8_t *key, char *buf, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a 32 */
    for (size_t i = 0; i < CURVE_KEY_BYTES; i++) {
        h ^= key[i];
        h *= 16777619u;
    }
    snprintf(buf, n, "%08x", (unsigned)h);
    return buf;
}

const char *curve_fingerprint_z85(const char *z85, char *buf, size_t n)
{
    uint8_t raw[CURVE_KEY_BYTES];
    if (curve_key_decode(z85, raw) < 0) {
        snprintf(buf, n, "????????");
        return buf;
    }
    return curve_fingerprint(raw, buf, n);
}

int curve_keypair_generate(struct curve_keypair *kp)
{
    memset(kp, 0, sizeof *kp);
    if (zmq_curve_keypair(kp->pub.z85, kp->sec.z85) < 0)
        return errno == ENOTSUP ? ERR_UNSUPPORTED : -errno;
    return 0;
}

// ---- files ----

/* Read a whole small file into a NUL-terminated xmalloc'd buffer, checking its mode:
 * deny_bits are mode bits that must be clear; must_own: owned by the effective uid. */
static int read_checked(const char *path, mode_t deny_bits, bool must_own, char **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto out_close;
    }
    if (!S_ISREG(st.st_mode) || (st.st_mode & deny_bits) || (must_own && st.st_uid != geteuid())) {
        rc = -EACCES;
        goto out_close;
    }
    if (st.st_size > (off_t)CURVE_FILE_MAX) {
        rc = ERR_TOOBIG;
        goto out_close;
    }
    char *buf = xmalloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? -errno : ERR_IO;
            explicit_bzero(buf, got);
            free(buf);
            goto out_close;
        }
        got += (size_t)r;
    }
    buf[got] = '\0';
    *out = buf;
out_close:
    close(fd);
    return rc;
}

static void free_secret(char *buf)
{
    if (buf) {
        explicit_bzero(buf, strlen(buf));
        free(buf);
    }
}

/* Split the next line of *p into up to 3 whitespace-separated words (in place). Returns the
 * number of words, 0 for a blank or '#' line, -1 at the end of the text. */
static int next_line(char **p, char *w[3])
{
    if (!**p)
        return -1;
    char *line = *p;
    char *nl = strchr(line, '\n');
    if (nl) {
        *nl = '\0';
        *p = nl + 1;
    } else {
        *p = line + strlen(line);
    }
    int n = 0;
    char *s = line;
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s == '#' || *s == '\0' || *s == '\r')
        return 0;
    while (*s && n < 3) {
        while (*s == ' ' || *s == '\t' || *s == '\r')
            s++;
        if (!*s)
            break;
        w[n++] = s;
        while (*s && *s != ' ' && *s != '\t' && *s != '\r')
            s++;
        if (*s)
            *s++ = '\0';
    }
    return n;
}

static int write_file(const char *path, const char *text, mode_t mode, bool overwrite)
{
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (overwrite ? O_TRUNC : O_EXCL);
    int fd = open(path, flags, mode);
    if (fd < 0)
        return -errno;
    int rc = 0;
    if (fchmod(fd, mode) < 0) { /* O_TRUNC keeps an old file's mode; umask narrows a new one */
        rc = -errno;
        goto out_close;
    }
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = -errno;
            goto out_close;
        }
        off += (size_t)w;
    }
    if (fsync(fd) < 0)
        rc = -errno;
out_close:
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    return rc;
}

int curve_keypair_write(const struct curve_keypair *kp, const char *prefix, bool overwrite)
{
    char key_path[4096], pub_path[4096], fp[CURVE_FP_LEN + 1];
    int n1 = snprintf(key_path, sizeof key_path, "%s.key", prefix);
    int n2 = snprintf(pub_path, sizeof pub_path, "%s.pub", prefix);
    if (n1 < 0 || n2 < 0 || (size_t)n1 >= sizeof key_path || (size_t)n2 >= sizeof pub_path)
        return ERR_TOOBIG;
    curve_fingerprint_z85(kp->pub.z85, fp, sizeof fp);
    if (!overwrite && (access(key_path, F_OK) == 0 || access(pub_path, F_OK) == 0))
        return -EEXIST;

    char text[512];
    snprintf(text, sizeof text,
             "# tern CURVE key pair, fingerprint %s. SECRET: keep this file mode 0600.\n"
             "curve-public %s\ncurve-secret %s\n",
             fp, kp->pub.z85, kp->sec.z85);
    int rc = write_file(key_path, text, 0600, overwrite);
    explicit_bzero(text, sizeof text);
    if (rc < 0)
        return rc;
    snprintf(text, sizeof text, "# tern CURVE public key, fingerprint %s\ncurve-public %s\n", fp,
             kp->pub.z85);
    rc = write_file(pub_path, text, 0644, overwrite);
    if (rc < 0)
        (void)unlink(key_path); /* best effort: do not leave half a pair */
    return rc;
}

int curve_keypair_load(struct curve_keypair *kp, const char *path)
{
    memset(kp, 0, sizeof *kp);
    char *buf;
    int rc = read_checked(path, S_IRWXG | S_IRWXO, true, &buf);
    if (rc < 0)
        return rc;
    char *p = buf, *w[3];
    bool have_pub = false, have_sec = false;
    int n;
    rc = 0;
    while ((n = next_line(&p, w)) >= 0) {
        if (n == 0)
            continue;
        if (n != 2 || strlen(w[1]) != CURVE_Z85_LEN) {
            rc = ERR_FORMAT;
            break;
        }
        if (strcmp(w[0], "curve-public") == 0) {
            memcpy(kp->pub.z85, w[1], CURVE_Z85_LEN + 1);
            have_pub = true;
        } else if (strcmp(w[0], "curve-secret") == 0) {
            memcpy(kp->sec.z85, w[1], CURVE_Z85_LEN + 1);
            have_sec = true;
        } else {
            rc = ERR_FORMAT;
            break;
        }
    }
    free_secret(buf);
    uint8_t raw[CURVE_KEY_BYTES];
    if (rc == 0 && (!have_sec || curve_key_decode(kp->sec.z85, raw) < 0))
        rc = ERR_FORMAT;
    explicit_bzero(raw, sizeof raw);
    char derived[CURVE_Z85_LEN + 1];
    if (rc == 0 && zmq_curve_public(derived, kp->sec.z85) < 0)
        rc = errno == ENOTSUP ? ERR_UNSUPPORTED : ERR_FORMAT;
    if (rc == 0 && have_pub && strcmp(derived, kp->pub.z85) != 0)
        rc = ERR_FORMAT; /* the public line belongs to another key */
    if (rc == 0)
        memcpy(kp->pub.z85, derived, sizeof derived);
    else
        explicit_bzero(kp, sizeof *kp);
    return rc;
}

int curve_pub_load(struct curve_key *key, const char *path)
{
    memset(key, 0, sizeof *key);
    char *buf;
    int rc = read_checked(path, 0, false, &buf);
    if (rc < 0)
        return rc;
    char *p = buf, *w[3];
    int n;
    rc = ERR_FORMAT;
    while ((n = next_line(&p, w)) >= 0) {
        const char *z = n >= 2 && strcmp(w[0], "curve-public") == 0 ? w[1] : n >= 1 ? w[0] : NULL;
        uint8_t raw[CURVE_KEY_BYTES];
        if (z && curve_key_decode(z, raw) == 0) {
            memcpy(key->z85, z, CURVE_Z85_LEN + 1);
            rc = 0;
            break;
        }
        if (n > 0)
            break; /* the first non-comment line must be the key */
    }
    free(buf);
    return rc;
}

int curve_allow_load(struct curve_allow *a, const char *path, int *bad_line)
{
    if (bad_line)
        *bad_line = 0;
    char *buf;
    int rc = read_checked(path, S_IWGRP | S_IWOTH, false, &buf);
    if (rc < 0)
        return rc;
    size_t cap = 16, n_keys = 0;
    uint8_t(*keys)[CURVE_KEY_BYTES] = xmalloc(cap * sizeof *keys);
    char *p = buf, *w[3];
    int n, line = 0;
    while ((n = next_line(&p, w)) >= 0) {
        line++;
        if (n == 0)
            continue;
        if (n_keys == CURVE_ALLOW_MAX) {
            rc = ERR_TOOBIG;
            break;
        }
        const char *z = strcmp(w[0], "curve-public") == 0 ? (n >= 2 ? w[1] : NULL) : w[0];
        if (!z || curve_key_decode(z, keys[n_keys]) < 0) {
            rc = ERR_FORMAT;
            if (bad_line)
                *bad_line = line;
            break;
        }
        if (++n_keys == cap) {
            cap *= 2;
            keys = xrealloc(keys, cap * sizeof *keys);
        }
    }
    free(buf);
    if (rc == 0 && n_keys == 0)
        rc = ERR_FORMAT;
    if (rc < 0) {
        free(keys);
        return rc;
    }
    curve_allow_deinit(a);
    a->keys = keys;
    a->n = n_keys;
    return 0;
}

void curve_allow_deinit(struct curve_allow *a)
{
    if (!a)
        return;
    free(a->keys);
    a->keys = NULL;
    a->n = 0;
}

bool curve_allow_has(const struct curve_allow *a, const uint8_t *key)
{
    for (size_t i = 0; i < a->n; i++) {
        uint8_t d = 0;
        for (size_t j = 0; j < CURVE_KEY_BYTES; j++)
            d |= (uint8_t)(a->keys[i][j] ^ key[j]);
        if (d == 0)
            return true;
    }
    return false;
}

// ---- sockets ----

int curve_sock_server(void *zsock, const struct curve_keypair *kp, const struct zap *zap)
{
    if (!zap || !zap_is_running(zap))
        return ERR_STATE;
    int one = 1;
    if (zmq_setsockopt(zsock, ZMQ_ZAP_DOMAIN, CURVE_ZAP_DOMAIN, strlen(CURVE_ZAP_DOMAIN)) < 0 ||
        zmq_setsockopt(zsock, ZMQ_CURVE_SERVER, &one, sizeof one) < 0 ||
        zmq_setsockopt(zsock, ZMQ_CURVE_SECRETKEY, kp->sec.z85, CURVE_Z85_LEN) < 0)
        return -errno;
    return 0;
}

int curve_sock_client(void *zsock, const struct curve_keypair *kp, const struct curve_key *server)
{
    if (zmq_setsockopt(zsock, ZMQ_CURVE_SERVERKEY, server->z85, CURVE_Z85_LEN) < 0 ||
        zmq_setsockopt(zsock, ZMQ_CURVE_PUBLICKEY, kp->pub.z85, CURVE_Z85_LEN) < 0 ||
        zmq_setsockopt(zsock, ZMQ_CURVE_SECRETKEY, kp->sec.z85, CURVE_Z85_LEN) < 0)
        return -errno;
    return 0;
}

// ---- link policy ----

bool curve_endpoint_is_local(const char *ep)
{
    if (!ep)
        return false;
    if (strncmp(ep, "ipc://", 6) == 0 || strncmp(ep, "inproc://", 9) == 0)
        return true;
    if (strncmp(ep, "tcp://", 6) != 0)
        return false;
    const char *host = ep + 6;
    const char *colon = strrchr(host, ':');
    if (!colon)
        return false;
    size_t len = (size_t)(colon - host);
    char h[128];
    if (len == 0 || len >= sizeof h)
        return false;
    memcpy(h, host, len);
    h[len] = '\0';
    if (strchr(h, ';'))
        return false; /* "src;dst" form: judge conservatively */
    if (strcmp(h, "localhost") == 0 || strcmp(h, "[::1]") == 0 || strcmp(h, "::1") == 0)
        return true;
    if (strncmp(h, "127.", 4) != 0)
        return false;
    for (const char *c = h + 4; *c; c++) /* 127.x.y.z only, not a host name "127.evil.com" */
        if ((*c < '0' || *c > '9') && *c != '.')
            return false;
    return true;
}

int curve_endpoint_check(const char *endpoint, bool have_keys, bool insecure_tcp)
{
    if (curve_endpoint_is_local(endpoint) || have_keys || insecure_tcp)
        return 0;
    return ERR_INVAL;
}

// ---- the insecure-tcp nag ----

struct curve_nag {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    bool stop;
    char what[512]; /* the endpoints, for the log line */
};

static void *nag_main(void *arg)
{
    struct curve_nag *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += CURVE_NAG_S;
        while (!g->stop && pthread_cond_timedwait(&g->cv, &g->mu, &ts) != ETIMEDOUT) {
        }
        if (!g->stop)
            LOG_WARN("insecure_tcp",
                     "endpoints=%s msg=\"unauthenticated, unencrypted tcp link: "
                     "set --curve-secret and --curve-allow / --curve-server-pub\"",
                     g->what);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

static int nag_start(struct curve_nag **out, const char *what)
{
    struct curve_nag *g = xcalloc(1, sizeof *g);
    snprintf(g->what, sizeof g->what, "%s", what);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&g->mu, NULL);
    sigset_t all, old; /* the thread takes no signals */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&g->thread, NULL, nag_main, g);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        pthread_cond_destroy(&g->cv);
        pthread_mutex_destroy(&g->mu);
        free(g);
        return -e;
    }
    *out = g;
    return 0;
}

static void nag_stop(struct curve_nag *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

// ---- a service's link security ----

int curve_link_init(struct curve_link *l, const struct curve_link_cfg *cfg, void *zctx, bool server,
                    const char *const *endpoints, size_t n_endpoints)
{
    memset(l, 0, sizeof *l);
    l->server = server;
    bool have_secret = cfg->secret_path[0] != '\0';
    bool have_other = server ? cfg->allow_path[0] != '\0' : cfg->server_pub_path[0] != '\0';
    const char *other_flag = server ? "--curve-allow" : "--curve-server-pub";
    if (have_secret != have_other) {
        LOG_ERR("curve_refused", "reason=half_configured msg=\"--curve-secret needs %s\"",
                other_flag);
        return ERR_INVAL;
    }
    if (!server && cfg->allow_path[0])
        LOG_WARN("curve_ignored", "flag=--curve-allow msg=\"only the scheduler uses it\"");
    if (server && cfg->server_pub_path[0])
        LOG_WARN("curve_ignored", "flag=--curve-server-pub msg=\"only clients use it\"");

    char insecure[512] = "";
    size_t off = 0;
    for (size_t i = 0; i < n_endpoints; i++) {
        const char *ep = endpoints[i];
        if (curve_endpoint_is_local(ep))
            continue;
        if (curve_endpoint_check(ep, have_secret, cfg->insecure_tcp) < 0) {
            LOG_ERR("curve_refused",
                    "endpoint=%s reason=no_keys msg=\"a tcp link that is not "
                    "loopback needs --curve-secret and %s, or --insecure-tcp\"",
                    ep, other_flag);
            return ERR_INVAL;
        }
        if (!have_secret && off < sizeof insecure) {
            int w = snprintf(insecure + off, sizeof insecure - off, "%s%s", off ? "," : "", ep);
            off += w > 0 ? (size_t)w : 0;
        }
    }
    if (!have_secret) {
        if (insecure[0]) {
            LOG_WARN("insecure_tcp", "endpoints=%s msg=\"unauthenticated, unencrypted tcp link\"",
                     insecure);
            int rc = nag_start(&l->nag, insecure);
            if (rc < 0)
                return rc;
        }
        return 0;
    }
    if (!curve_is_available()) {
        LOG_ERR("curve_refused", "reason=libzmq_without_curve");
        return ERR_UNSUPPORTED;
    }
    int rc = curve_keypair_load(&l->kp, cfg->secret_path);
    if (rc < 0) {
        LOG_ERR("curve_refused", "file=%s err=%s msg=\"secret key file (must be 0600, ours)\"",
                cfg->secret_path, err_str(rc));
        return rc;
    }
    char fp[CURVE_FP_LEN + 1], fp2[CURVE_FP_LEN + 1];
    curve_fingerprint_z85(l->kp.pub.z85, fp, sizeof fp);
    if (server) {
        l->zap = zap_create(zctx, cfg->allow_path, &rc);
        if (!l->zap) {
            LOG_ERR("curve_refused", "file=%s err=%s msg=\"allow-list or ZAP handler\"",
                    cfg->allow_path, err_str(rc));
            goto out_wipe;
        }
        LOG_INFO("curve_on", "role=server key=%s allow=%s", fp, cfg->allow_path);
    } else {
        rc = curve_pub_load(&l->server_pub, cfg->server_pub_path);
        if (rc < 0) {
            LOG_ERR("curve_refused", "file=%s err=%s msg=\"server public key\"",
                    cfg->server_pub_path, err_str(rc));
            goto out_wipe;
        }
        LOG_INFO("curve_on", "role=client key=%s server_key=%s", fp,
                 curve_fingerprint_z85(l->server_pub.z85, fp2, sizeof fp2));
    }
    l->enabled = true;
    return 0;
out_wipe:
    explicit_bzero(&l->kp, sizeof l->kp);
    return rc;
}

int curve_link_check(const struct curve_link_cfg *cfg, bool server, const char *const *endpoints,
                     size_t n_endpoints)
{
    void *z = zmq_ctx_new();
    if (!z)
        return -errno;
    struct curve_link l;
    int rc = curve_link_init(&l, cfg, z, server, endpoints, n_endpoints);
    if (rc == 0)
        curve_link_deinit(&l);
    (void)zmq_ctx_term(z); /* nothing was sent: returns at once */
    return rc;
}

void curve_link_deinit(struct curve_link *l)
{
    if (!l)
        return;
    zap_destroy(l->zap);
    l->zap = NULL;
    nag_stop(l->nag);
    l->nag = NULL;
    explicit_bzero(&l->kp, sizeof l->kp);
    l->enabled = false;
}

int curve_link_apply(const struct curve_link *l, void *zsock, const char *endpoint)
{
    if (!l || !l->enabled || strncmp(endpoint, "tcp://", 6) != 0)
        return 0;
    if (l->server)
        return curve_sock_server(zsock, &l->kp, l->zap);
    return curve_sock_client(zsock, &l->kp, &l->server_pub);
}
