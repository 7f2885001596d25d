/* Scratch bench: single-sequence decode speed through scheduler + fake worker, to measure the
 * per-plan round trip cost. Usage: bench_decode STEP_US DECODE_STEPS TOKENS */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"
#include "svc_harness.h"

int main(int argc, char **argv)
{
    const char *step_us = argc > 1 ? argv[1] : "1000";
    const char *k = argc > 2 ? argv[2] : "4";
    uint32_t n = argc > 3 ? (uint32_t)atoi(argv[3]) : 2000;
    char dir[64], gw[128], wk[128];
    svc_tmpdir(dir, sizeof dir);
    snprintf(gw, sizeof gw, "ipc://%s/gw.sock", dir);
    snprintf(wk, sizeof wk, "ipc://%s/wk.sock", dir);
    struct svc_proc s, w;
    const char *sa[] = {"--gateway-endpoint", gw, "--worker-endpoint", wk, "--decode-steps", k,
                        "--log-level", "info", NULL};
    const char *wa[] = {"--engine", "fake", "--scheduler-endpoint", wk, "--fake-step-us", step_us,
                        "--max-model-len", "8192", "--log-level", "debug", NULL};
    svc_spawn(&s, dir, "s", "tern-scheduler", sa);
    svc_spawn(&w, dir, "w", "tern-worker", wa);
    struct svc_client c;
    svc_client_open(&c, gw);
    svc_client_hello(&c, 3000);
    svc_client_wait_workers(&c, 1, 5000);
    uint32_t prompt[1] = {1};
    struct svc_submit sub = {.prompt = prompt, .n_prompt = 1, .max_tokens = n, .temperature = 0};
    uint64_t id = 1;
    uint64_t t0 = clock_now_ns();
    svc_client_submit(&c, id, &sub);
    svc_client_wait_done(&c, &id, 1, 600000);
    double s_el = (double)(clock_now_ns() - t0) / 1e9;
    struct svc_req *r = svc_client_req(&c, id);
    printf("log=%s/s.log ", dir);
    printf("step_us=%s decode_steps=%s tokens=%u s=%.3f tok_s=%.1f us_per_tok=%.1f\n", step_us, k,
           r->n_tokens, s_el, r->n_tokens / s_el, s_el * 1e6 / r->n_tokens);
    svc_client_close(&c);
    svc_stop(&w, SIGTERM, 2000);
    svc_stop(&s, SIGTERM, 2000);
    return 0;
}
