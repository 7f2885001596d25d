/* Unit: the worker sizes its pool from the model's KV plan when given --kv-cache-memory-bytes
 * (engines fake and cpu, the built-in tiny geometry written by tiny_write() into a temp dir), and
 * refuses when one max_model_len sequence does not fit. These are the capacities it registers with
 * the scheduler.
 *
 * the default tiny model by hand: 1 full-attention layer of 2 KV heads x 32: K+V = 2 x 2 x 32 x 2 B
 * = 256 B/token, 4,096 B per 16-token block; 3 GDN layers: conv dim 2 x 2 x 16 + 4 x 16 = 128,
 * window 128 x 3 x 2 B = 768 B, S = 4 x 16 x 16 x 4 B = 4,096 B -> 4,864 B/layer, 14,592 B/seq.
 * max_model_len 4096 = 256 blocks = 1,048,576 B. Both engines keep the GDN state in the pool
 * (docs/KV.md): a state takes ceil(14,592 / 4,096) = 4 blocks.
 *   8 MiB, 16 seqs: 8,388,608 / 4,096 = 2,048 blocks, state_blocks 4, 16 slots (a batch limit).
 *   1 MiB: refused (one sequence: (256 + 4) x 4,096 = 1,064,960 > 1,048,576).
 * With speculation on (the tiny model has an MTP head; the cpu engine's default K is 3), the MTP
 * layer's own K/V doubles the attention KV: 8,192 B per block, 1,024 blocks, a state
 * ceil(14,592 / 8,192) = 2 blocks. The other cases run with --speculative-tokens 0.
 * Without a byte budget the cpu engine takes room for --max-seqs sequences of max_model_len with
 * their states: 16 x (256 + 4) = 4,160 blocks; --kv-blocks 4 cannot hold a state and a block.
 * --gdn-state slots: the slot plan instead, 16 slots = 233,472 B; (8,388,608 - 233,472) / 4,096
 * = 1,991 blocks and no state blocks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "model/tiny.h"
#include "test.h"
#include "wk_cfg.h"
#include "wk_engine.h"

static char model_dir[64] = "/tmp/tern-wkkv-XXXXXX";

static int create_blocks(const char *engine, const char *budget, const char *spec,
                         const char *blocks, struct wk_engine **e)
{
    char *argv[] = {(char *)"tern-worker", (char *)"--engine",
                    (char *)engine,        (char *)"--model",
                    (char *)model_dir,     (char *)"--max-model-len",
                    (char *)"4096",        (char *)"--max-seqs",
                    (char *)"16",          (char *)"--kv-cache-memory-bytes",
                    (char *)budget,        (char *)"--threads",
                    (char *)"1",           (char *)"--speculative-tokens",
                    (char *)spec,          (char *)"--kv-blocks",
                    (char *)blocks,        NULL};
    struct wk_cfg cfg;
    int rc = wk_cfg_parse(&cfg, 17, argv);
    CHECK_EQ_INT(rc, 0);
    if (rc != 0)
        return rc;
    *e = NULL;
    return wk_engine_create(&cfg, NULL, NULL, e);
}

static int create(const char *engine, const char *budget, const char *spec, struct wk_engine **e)
{
    return create_blocks(engine, budget, spec, "0", e);
}

/* engine cpu, 8 MiB, no speculation, --gdn-state mode */
static int create_state(const char *mode, struct wk_engine **e)
{
    char *argv[] = {(char *)"tern-worker", (char *)"--engine",
                    (char *)"cpu",         (char *)"--model",
                    (char *)model_dir,     (char *)"--max-model-len",
                    (char *)"4096",        (char *)"--max-seqs",
                    (char *)"16",          (char *)"--kv-cache-memory-bytes",
                    (char *)"8388608",     (char *)"--speculative-tokens",
                    (char *)"0",           (char *)"--gdn-state",
                    (char *)mode,          NULL};
    struct wk_cfg cfg;
    *e = NULL;
    int rc = wk_cfg_parse(&cfg, 15, argv);
    if (rc != 0)
        return rc;
    return wk_engine_create(&cfg, NULL, NULL, e);
}

int main(void)
{
    log_init("test", LOG_LEVEL_OFF);
    CHECK(mkdtemp(model_dir) != NULL);
    struct tiny_opts to;
    tiny_opts_default(&to);
    CHECK_EQ_INT(tiny_write(&to, model_dir), 0);
    const char *engines[] = {"fake", "cpu"};
    for (int i = 0; i < 2; i++) {
        struct wk_engine *e = NULL;
        CHECK_EQ_INT(create(engines[i], "8388608", "0", &e), 0);
        if (e) {
            CHECK_EQ_INT(e->info.max_model_len, 4096);
            CHECK_EQ_INT(e->info.n_slots, 16);
            CHECK_EQ_INT(e->info.block_tokens, 16);
            CHECK_EQ_INT(e->info.kv_blocks, 2048);
            CHECK_EQ_INT(e->info.state_blocks, 4);
            CHECK_EQ_INT(e->info.kv_bytes, 8388608);
            wk_engine_destroy(e);
        }
        e = NULL;
        CHECK_EQ_INT(create(engines[i], "1048576", "0", &e), ERR_FULL);
        CHECK(e == NULL);
    }
    /* cpu engine, speculation on by default: the MTP layer's KV is in the plan */
    struct wk_engine *e = NULL;
    CHECK_EQ_INT(create("cpu", "8388608", "-1", &e), 0);
    if (e) {
        CHECK_EQ_INT(e->info.spec_k, 3);
        CHECK_EQ_INT(e->info.n_slots, 16);
        CHECK_EQ_INT(e->info.kv_blocks, 1024);
        CHECK_EQ_INT(e->info.state_blocks, 2);
        wk_engine_destroy(e);
    }
    /* no byte budget: room for 16 max-length sequences and their states */
    e = NULL;
    CHECK_EQ_INT(create("cpu", "0", "0", &e), 0);
    if (e) {
        CHECK_EQ_INT(e->info.state_blocks, 4);
        CHECK_EQ_INT(e->info.kv_blocks, 4160);
        wk_engine_destroy(e);
    }
    e = NULL;
    CHECK_EQ_INT(create_blocks("cpu", "0", "0", "4", &e), ERR_INVAL); /* 4 blocks: only a state */
    CHECK(e == NULL);
    CHECK_EQ_INT(create_blocks("cpu", "0", "0", "5", &e), 0);
    if (e) {
        CHECK_EQ_INT(e->info.kv_blocks, 5);
        wk_engine_destroy(e);
    }
    /* --gdn-state slots: the slot plan; a bad value is refused by the flags */
    e = NULL;
    CHECK_EQ_INT(create_state("slots", &e), 0);
    if (e) {
        CHECK_EQ_INT(e->info.state_blocks, 0);
        CHECK_EQ_INT(e->info.kv_blocks, 1991);
        CHECK_EQ_INT(e->info.n_slots, 16);
        wk_engine_destroy(e);
    }
    e = NULL;
    CHECK_EQ_INT(create_state("pool", &e), 0);
    if (e) {
        CHECK_EQ_INT(e->info.state_blocks, 4);
        wk_engine_destroy(e);
    }
    CHECK(create_state("heap", &e) < 0);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", model_dir);
    CHECK_EQ_INT(system(cmd), 0);
    return test_result();
}
