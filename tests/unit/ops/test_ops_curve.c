/* test_ops_curve: CURVE key files (format, 0600 on write, permission checks on load), public
 * key files, allow-lists, fingerprints, the tcp link policy, curve_link_init's refusals, and
 * `tern keygen` when the CLI is built. Keys are checked against libzmq (zmq_curve_public). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.h>

#include "common/curve.h"
#include "common/err.h"
#include "common/zap.h"
#include "test.h"

static char g_dir[64];

static void path_in(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", g_dir, name);
}

static void write_text(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
    CHECK_EQ_INT(chmod(path, mode), 0);
}

static int file_mode(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return -1;
    return (int)(st.st_mode & 07777);
}

static char *read_text(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_keypair_files(void)
{
    CHECK(curve_is_available());
    struct curve_keypair kp, back;
    CHECK_EQ_INT(curve_keypair_generate(&kp), 0);
    CHECK_EQ_INT((int)strlen(kp.pub.z85), CURVE_Z85_LEN);
    CHECK_EQ_INT((int)strlen(kp.sec.z85), CURVE_Z85_LEN);
    char derived[41];
    CHECK_EQ_INT(zmq_curve_public(derived, kp.sec.z85), 0); /* libzmq agrees on the pair */
    CHECK_STREQ(derived, kp.pub.z85);

    char prefix[128], key[160], pub[160];
    path_in(prefix, sizeof prefix, "node1");
    snprintf(key, sizeof key, "%s.key", prefix);
    snprintf(pub, sizeof pub, "%s.pub", prefix);
    mode_t old = umask(0); /* the secret must still come out 0600 */
    CHECK_EQ_INT(curve_keypair_write(&kp, prefix, false), 0);
    umask(old);
    CHECK_EQ_INT(file_mode(key), 0600);
    CHECK_EQ_INT(file_mode(pub), 0644);
    char line[128];
    snprintf(line, sizeof line, "curve-secret %s\n", kp.sec.z85);
    CHECK(strstr(read_text(key), line) != NULL);
    snprintf(line, sizeof line, "curve-public %s\n", kp.pub.z85);
    CHECK(strstr(read_text(pub), line) != NULL);
    CHECK(strstr(read_text(pub), "curve-secret") == NULL);

    CHECK_EQ_INT(curve_keypair_load(&back, key), 0);
    CHECK_STREQ(back.pub.z85, kp.pub.z85);
    CHECK_STREQ(back.sec.z85, kp.sec.z85);
    struct curve_key pk;
    CHECK_EQ_INT(curve_pub_load(&pk, pub), 0);
    CHECK_STREQ(pk.z85, kp.pub.z85);

    /* no silent overwrite; --force replaces */
    CHECK_EQ_INT(curve_keypair_write(&kp, prefix, false), -EEXIST);
    CHECK_EQ_INT(curve_keypair_write(&kp, prefix, true), 0);
    CHECK_EQ_INT(file_mode(key), 0600);

    /* permissions: group/other bits refuse the secret; 0400 is fine */
    CHECK_EQ_INT(chmod(key, 0640), 0);
    CHECK_EQ_INT(curve_keypair_load(&back, key), -EACCES);
    CHECK_EQ_INT(chmod(key, 0604), 0);
    CHECK_EQ_INT(curve_keypair_load(&back, key), -EACCES);
    CHECK_EQ_INT(chmod(key, 0400), 0);
    CHECK_EQ_INT(curve_keypair_load(&back, key), 0);
    CHECK_EQ_INT(chmod(key, 0600), 0);
    /* a symlink is not followed */
    char link[160];
    path_in(link, sizeof link, "link.key");
    CHECK_EQ_INT(symlink(key, link), 0);
    CHECK(curve_keypair_load(&back, link) < 0);
    char missing[160];
    path_in(missing, sizeof missing, "missing.key");
    CHECK_EQ_INT(curve_keypair_load(&back, missing), -ENOENT);

    /* a public line that belongs to another key, a bad Z85, an unknown line */
    struct curve_keypair other;
    CHECK_EQ_INT(curve_keypair_generate(&other), 0);
    char text[512], bad[160];
    path_in(bad, sizeof bad, "bad.key");
    snprintf(text, sizeof text, "curve-public %s\ncurve-secret %s\n", other.pub.z85, kp.sec.z85);
    write_text(bad, text, 0600);
    CHECK_EQ_INT(curve_keypair_load(&back, bad), ERR_FORMAT);
    snprintf(text, sizeof text, "curve-secret %.39s~\n", kp.sec.z85); /* '~' is not Z85 */
    write_text(bad, text, 0600);
    CHECK_EQ_INT(curve_keypair_load(&back, bad), ERR_FORMAT);
    snprintf(text, sizeof text, "secret %s\n", kp.sec.z85);
    write_text(bad, text, 0600);
    CHECK_EQ_INT(curve_keypair_load(&back, bad), ERR_FORMAT);
    /* secret only (no public line): the public key is derived */
    snprintf(text, sizeof text, "# comment\n\ncurve-secret %s\n", kp.sec.z85);
    write_text(bad, text, 0600);
    CHECK_EQ_INT(curve_keypair_load(&back, bad), 0);
    CHECK_STREQ(back.pub.z85, kp.pub.z85);

    /* bare key line as a public key file; garbage refused */
    snprintf(text, sizeof text, "%s\n", other.pub.z85);
    write_text(bad, text, 0644);
    CHECK_EQ_INT(curve_pub_load(&pk, bad), 0);
    CHECK_STREQ(pk.z85, other.pub.z85);
    write_text(bad, "hello world\n", 0644);
    CHECK_EQ_INT(curve_pub_load(&pk, bad), ERR_FORMAT);
}

static void test_allow_list(void)
{
    struct curve_keypair k[4];
    for (int i = 0; i < 4; i++)
        CHECK_EQ_INT(curve_keypair_generate(&k[i]), 0);
    char path[160], text[1024];
    path_in(path, sizeof path, "allow");
    snprintf(text, sizeof text,
             "# workers\n\ncurve-public %s worker-a\n  %s gateway\n"
             "# tern CURVE public key, fingerprint xxx\ncurve-public %s\n",
             k[0].pub.z85, k[1].pub.z85, k[2].pub.z85);
    write_text(path, text, 0644);
    struct curve_allow a = {0};
    int bad = -1;
    CHECK_EQ_INT(curve_allow_load(&a, path, &bad), 0);
    CHECK_EQ_INT((int)a.n, 3);
    CHECK_EQ_INT(bad, 0);
    uint8_t raw[CURVE_KEY_BYTES];
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(zmq_z85_decode(raw, k[i].pub.z85) != NULL, 1);
        CHECK_EQ_INT(curve_allow_has(&a, raw), i < 3);
    }
    /* a secret key is not a public key: not in the list */
    CHECK_EQ_INT(zmq_z85_decode(raw, k[0].sec.z85) != NULL, 1);
    CHECK(!curve_allow_has(&a, raw));

    /* group-writable: refused; a bad line: refused with its number; empty: refused */
    CHECK_EQ_INT(chmod(path, 0664), 0);
    CHECK_EQ_INT(curve_allow_load(&a, path, &bad), -EACCES);
    CHECK_EQ_INT((int)a.n, 3); /* a failed reload keeps the old list */
    snprintf(text, sizeof text, "%s\n# ok\nnot-a-key\n", k[0].pub.z85);
    write_text(path, text, 0644);
    CHECK_EQ_INT(curve_allow_load(&a, path, &bad), ERR_FORMAT);
    CHECK_EQ_INT(bad, 3);
    write_text(path, "# nobody\n\n", 0644);
    CHECK_EQ_INT(curve_allow_load(&a, path, &bad), ERR_FORMAT);
    char missing[160];
    path_in(missing, sizeof missing, "no-such-allow");
    CHECK_EQ_INT(curve_allow_load(&a, missing, &bad), -ENOENT);
    curve_allow_deinit(&a);
    CHECK(a.keys == NULL && a.n == 0);
}

static void test_fingerprint(void)
{
    /* FNV-1a-32 over the key bytes; expected values computed independently (Python). */
    uint8_t key[CURVE_KEY_BYTES];
    char fp[CURVE_FP_LEN + 1];
    for (int i = 0; i < CURVE_KEY_BYTES; i++)
        key[i] = (uint8_t)i;
    CHECK_STREQ(curve_fingerprint(key, fp, sizeof fp), "0913ad65");
    memset(key, 0, sizeof key);
    CHECK_STREQ(curve_fingerprint(key, fp, sizeof fp), "0b2ae445");
    char z85[41];
    CHECK(zmq_z85_encode(z85, key, sizeof key) != NULL);
    CHECK_STREQ(curve_fingerprint_z85(z85, fp, sizeof fp), "0b2ae445");
    CHECK_STREQ(curve_fingerprint_z85("short", fp, sizeof fp), "????????");
}

static void test_policy(void)
{
    static const struct {
        const char *ep;
        bool local;
    } cases[] = {
        {"ipc:///run/tern/scheduler-wk.sock", true},
        {"inproc://x", true},
        {"tcp://127.0.0.1:5555", true},
        {"tcp://127.1.2.3:1", true},
        {"tcp://localhost:7000", true},
        {"tcp://[::1]:7000", true},
        {"tcp://*:5555", false},
        {"tcp://0.0.0.0:5555", false},
        {"tcp://10.0.0.7:5555", false},
        {"tcp://127.evil.example:1", false},
        {"tcp://sched.lan:5555", false},
        {"tcp://[::]:5555", false},
        {"tcp://eth0;127.0.0.1:5555", false},
        {"udp://127.0.0.1:1", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool got = curve_endpoint_is_local(cases[i].ep);
        if (got != cases[i].local)
            fprintf(stderr, "endpoint %s: local=%d expected %d\n", cases[i].ep, got,
                    cases[i].local);
        CHECK(got == cases[i].local);
    }
    CHECK_EQ_INT(curve_endpoint_check("tcp://10.0.0.7:5555", false, false), ERR_INVAL);
    CHECK_EQ_INT(curve_endpoint_check("tcp://10.0.0.7:5555", true, false), 0);
    CHECK_EQ_INT(curve_endpoint_check("tcp://10.0.0.7:5555", false, true), 0);
    CHECK_EQ_INT(curve_endpoint_check("tcp://127.0.0.1:5555", false, false), 0);
    CHECK_EQ_INT(curve_endpoint_check("ipc:///tmp/x.sock", false, false), 0);
}

static void test_link_init(void)
{
    void *zctx = zmq_ctx_new();
    struct curve_keypair srv, cli;
    CHECK_EQ_INT(curve_keypair_generate(&srv), 0);
    CHECK_EQ_INT(curve_keypair_generate(&cli), 0);
    char sp[160], cp[160], allow[160], text[256];
    path_in(sp, sizeof sp, "sched");
    path_in(cp, sizeof cp, "wk");
    CHECK_EQ_INT(curve_keypair_write(&srv, sp, false), 0);
    CHECK_EQ_INT(curve_keypair_write(&cli, cp, false), 0);
    path_in(allow, sizeof allow, "link-allow");
    snprintf(text, sizeof text, "%s\n", cli.pub.z85);
    write_text(allow, text, 0644);

    const char *remote[] = {"tcp://10.1.2.3:5555"};
    const char *local[] = {"ipc:///tmp/x.sock", "tcp://127.0.0.1:5"};
    struct curve_link_cfg c;
    struct curve_link l;
    memset(&c, 0, sizeof c);
    /* no keys: local fine, remote refused, remote + insecure allowed (with the nag thread) */
    CHECK_EQ_INT(curve_link_init(&l, &c, zctx, false, local, 2), 0);
    CHECK(!l.enabled && l.nag == NULL);
    curve_link_deinit(&l);
    CHECK_EQ_INT(curve_link_init(&l, &c, zctx, false, remote, 1), ERR_INVAL);
    c.insecure_tcp = true;
    CHECK_EQ_INT(curve_link_init(&l, &c, zctx, false, remote, 1), 0);
    CHECK(!l.enabled && l.nag != NULL);
    curve_link_deinit(&l);
    c.insecure_tcp = false;

    /* half-configured */
    snprintf(c.secret_path, sizeof c.secret_path, "%s.key", cp);
    CHECK_EQ_INT(curve_link_init(&l, &c, zctx, false, remote, 1), ERR_INVAL);
    CHECK_EQ_INT(curve_link_init(&l, &c, zctx, true, remote, 1), ERR_INVAL);
    /* client with keys */
    snprintf(c.server_pub_path, sizeof c.server_pub_path, "%s.pub", sp);
    CHECK_EQ_INT(curve_link_init(&l, &c, zctx, false, remote, 1), 0);
    CHECK(l.enabled && !l.server && l.zap == NULL);
    CHECK_STREQ(l.server_pub.z85, srv.pub.z85);
    CHECK_STREQ(l.kp.pub.z85, cli.pub.z85);
    curve_link_deinit(&l);
    /* server with keys: the ZAP handler runs; a missing allow-list refuses to start */
    memset(&c, 0, sizeof c);
    snprintf(c.secret_path, sizeof c.secret_path, "%s.key", sp);
    path_in(c.allow_path, sizeof c.allow_path, "no-such-allow");
    CHECK_EQ_INT(curve_link_init(&l, &c, zctx, true, remote, 1), -ENOENT);
    snprintf(c.allow_path, sizeof c.allow_path, "%s", allow);
    CHECK_EQ_INT(curve_link_init(&l, &c, zctx, true, remote, 1), 0);
    CHECK(l.enabled && l.server && zap_is_running(l.zap));
    curve_link_deinit(&l);
    /* a secret key readable by others refuses to start */
    snprintf(text, sizeof text, "%s.key", sp);
    CHECK_EQ_INT(chmod(text, 0644), 0);
    CHECK_EQ_INT(curve_link_init(&l, &c, zctx, true, remote, 1), -EACCES);
    zmq_ctx_term(zctx);
}

/* `tern keygen` end to end, when the CLI has been built. */
static void test_cli(void)
{
    const char *bd = getenv("TERN_BUILD_DIR");
    char bin[512];
    snprintf(bin, sizeof bin, "%s/bin/tern", bd ? bd : ".");
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "note: %s not built, skipping the CLI part\n", bin);
        return;
    }
    char prefix[160], out[160], cmd[1024];
    path_in(prefix, sizeof prefix, "cli");
    path_in(out, sizeof out, "cli.out");
    snprintf(cmd, sizeof cmd, "umask 0; '%s' keygen --out '%s' > '%s' 2>&1", bin, prefix, out);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char key[200], pub[200];
    snprintf(key, sizeof key, "%s.key", prefix);
    snprintf(pub, sizeof pub, "%s.pub", prefix);
    CHECK_EQ_INT(file_mode(key), 0600);
    CHECK_EQ_INT(file_mode(pub), 0644);
    struct curve_keypair kp;
    CHECK_EQ_INT(curve_keypair_load(&kp, key), 0);
    struct curve_key pk;
    CHECK_EQ_INT(curve_pub_load(&pk, pub), 0);
    CHECK_STREQ(pk.z85, kp.pub.z85);
    char fp[CURVE_FP_LEN + 1], want[64];
    snprintf(want, sizeof want, "fingerprint=%s", curve_fingerprint_z85(kp.pub.z85, fp, sizeof fp));
    const char *txt = read_text(out);
    CHECK(txt && strstr(txt, want) != NULL);
    /* a second run refuses to overwrite; --force replaces with a new key */
    st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    snprintf(cmd, sizeof cmd, "'%s' keygen --out '%s' --force > /dev/null 2>&1", bin, prefix);
    st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    struct curve_keypair kp2;
    CHECK_EQ_INT(curve_keypair_load(&kp2, key), 0);
    CHECK(strcmp(kp2.sec.z85, kp.sec.z85) != 0);
    snprintf(cmd, sizeof cmd, "'%s' keygen > /dev/null 2>&1", bin);
    st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/tern-ops-curve-XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_keypair_files();
    test_allow_list();
    test_fingerprint();
    test_policy();
    test_link_init();
    test_cli();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (test_result() == 0 && system(cmd) != 0)
        fprintf(stderr, "note: could not remove %s\n", g_dir);
    return test_result();
}
