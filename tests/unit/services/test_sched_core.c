/* Unit: the scheduler's pool accounting (sched_pool), request table (sched_reqs) and the
 * table-driven config (common/cfg through sched_cfg): invariants under random alloc/free,
 * exhaustion, growth, hash table add/find/remove, precedence file < env < flags. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cfg.h"
#include "common/err.h"
#include "sched_internal.h"
#include "test.h"

static void test_pool_basic(void)
{
    CHECK(sched_pool_create(0, 16, 4, 0) == NULL);
    struct sched_pool *p = sched_pool_create(10, 16, 3, 0);
    CHECK(p != NULL);
    CHECK_EQ_INT(sched_pool_blocks_for(p, 0), 0);
    CHECK_EQ_INT(sched_pool_blocks_for(p, 1), 1);
    CHECK_EQ_INT(sched_pool_blocks_for(p, 16), 1);
    CHECK_EQ_INT(sched_pool_blocks_for(p, 17), 2);
    struct sched_pool_seq a, b, c, d;
    sched_pool_seq_init(&a);
    sched_pool_seq_init(&b);
    sched_pool_seq_init(&c);
    sched_pool_seq_init(&d);
    CHECK_EQ_INT(sched_pool_seq_alloc(p, 40, &a), 0); /* 3 blocks */
    CHECK_EQ_INT(a.n_blocks, 3);
    CHECK(a.slot >= 0);
    CHECK_EQ_INT(sched_pool_seq_alloc(p, 40, &a), ERR_STATE); /* not empty */
    CHECK_EQ_INT(sched_pool_seq_alloc(p, 100, &b), 0);        /* 7 blocks: pool full */
    CHECK_EQ_INT(sched_pool_blocks_used(p), 10);
    CHECK(!sched_pool_can_fit(p, 1));
    CHECK_EQ_INT(sched_pool_seq_alloc(p, 1, &c), ERR_FULL);
    CHECK_EQ_INT(sched_pool_slots_used(p), 2); /* the refused alloc left no slot */
    CHECK(sched_pool_can_ever_fit(p, 160));
    CHECK(!sched_pool_can_ever_fit(p, 161));
    /* every block id distinct */
    int seen[10] = {0};
    for (uint32_t i = 0; i < a.n_blocks; i++)
        seen[a.blocks[i]]++;
    for (uint32_t i = 0; i < b.n_blocks; i++)
        seen[b.blocks[i]]++;
    for (int i = 0; i < 10; i++)
        CHECK_EQ_INT(seen[i], 1);
    CHECK_EQ_INT(sched_pool_check(p), 0);
    sched_pool_seq_free(p, &b);
    CHECK_EQ_INT(b.n_blocks, 0);
    CHECK_EQ_INT(b.slot, -1);
    sched_pool_seq_free(p, &b);                      /* empty: no-op */
    CHECK_EQ_INT(sched_pool_seq_grow(p, &a, 48), 0); /* still 3 blocks */
    CHECK_EQ_INT(a.n_blocks, 3);
    CHECK_EQ_INT(sched_pool_seq_grow(p, &a, 49), 0); /* 4 */
    CHECK_EQ_INT(a.n_blocks, 4);
    CHECK_EQ_INT(sched_pool_seq_grow(p, &a, 1000), ERR_FULL);
    CHECK_EQ_INT(a.n_blocks, 4);
    /* slots run out before blocks */
    CHECK_EQ_INT(sched_pool_seq_alloc(p, 1, &b), 0);
    CHECK_EQ_INT(sched_pool_seq_alloc(p, 1, &c), 0);
    CHECK_EQ_INT(sched_pool_seq_alloc(p, 1, &d), ERR_FULL);
    CHECK_EQ_INT(sched_pool_check(p), 0);
    sched_pool_seq_free(p, &a);
    sched_pool_seq_free(p, &b);
    sched_pool_seq_free(p, &c);
    CHECK_EQ_INT(sched_pool_blocks_used(p), 0);
    CHECK_EQ_INT(sched_pool_slots_used(p), 0);
    CHECK_EQ_INT(sched_pool_check(p), 0);
    sched_pool_destroy(p);
    sched_pool_destroy(NULL);
}

static void test_pool_random(void)
{
    struct sched_pool *p = sched_pool_create(257, 16, 32, 0);
    struct sched_pool_seq s[32];
    for (int i = 0; i < 32; i++)
        sched_pool_seq_init(&s[i]);
    srand(7);
    uint32_t held = 0;
    for (int it = 0; it < 20000; it++) {
        int i = rand() % 32;
        if (s[i].slot < 0) {
            uint32_t n = (uint32_t)(rand() % 200) + 1;
            bool fit = sched_pool_can_fit(p, n);
            int rc = sched_pool_seq_alloc(p, n, &s[i]);
            CHECK_EQ_INT(rc, fit ? 0 : ERR_FULL);
            if (rc == 0)
                held += s[i].n_blocks;
        } else if (rand() % 3 == 0) {
            uint32_t before = s[i].n_blocks;
            if (sched_pool_seq_grow(p, &s[i], s[i].n_tokens + (uint32_t)(rand() % 64)) == 0)
                held += s[i].n_blocks - before;
        } else {
            held -= s[i].n_blocks;
            sched_pool_seq_free(p, &s[i]);
        }
        if (it % 997 == 0)
            CHECK_EQ_INT(sched_pool_check(p), 0);
        CHECK_EQ_INT(sched_pool_blocks_used(p), held);
    }
    for (int i = 0; i < 32; i++)
        sched_pool_seq_free(p, &s[i]);
    CHECK_EQ_INT(sched_pool_blocks_used(p), 0);
    CHECK_EQ_INT(sched_pool_check(p), 0);
    sched_pool_destroy(p);
}

static void test_reqs(void)
{
    struct sched_reqs *t = sched_reqs_create();
    enum { N = 1000 };
    for (uint64_t i = 1; i <= N; i++) {
        struct sched_req *r = calloc(1, sizeof *r);
        r->id = i * 0x9e3779b97f4a7c15ull;
        CHECK_EQ_INT(sched_reqs_add(t, r), 0);
    }
    struct sched_req dup = {.id = 5 * 0x9e3779b97f4a7c15ull};
    CHECK_EQ_INT(sched_reqs_add(t, &dup), ERR_STATE);
    CHECK_EQ_INT(sched_reqs_count(t), N);
    for (uint64_t i = 1; i <= N; i += 2) {
        struct sched_req *r = sched_reqs_find(t, i * 0x9e3779b97f4a7c15ull);
        CHECK(r != NULL);
        if (r) {
            sched_reqs_remove(t, r);
            sched_req_destroy(r);
        }
    }
    CHECK_EQ_INT(sched_reqs_count(t), N / 2);
    for (uint64_t i = 1; i <= N; i++) {
        struct sched_req *r = sched_reqs_find(t, i * 0x9e3779b97f4a7c15ull);
        CHECK((r != NULL) == (i % 2 == 0));
    }
    CHECK(sched_reqs_find(t, 12345) == NULL);
    sched_reqs_destroy(t); /* frees the rest */
}

static void test_cfg(void)
{
    char path[] = "/tmp/tern-cfg-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "# comment\nheartbeat-ms = 200\nqueue-cap=7\ndead-after-ms=\"900\"\n");
    fclose(f);
    struct sched_cfg c;
    char cfgflag[64];
    snprintf(cfgflag, sizeof cfgflag, "--config=%s", path);
    setenv("TERN_SCHED_QUEUE_CAP", "9", 1);
    char *argv1[] = {"x", cfgflag, "--dead-after-ms", "1000", "--check-pool", NULL};
    CHECK_EQ_INT(sched_cfg_parse(&c, 5, argv1), 0);
    CHECK_EQ_INT(c.heartbeat_ms, 200);   /* file */
    CHECK_EQ_INT(c.queue_cap, 9);        /* env over file */
    CHECK_EQ_INT(c.dead_after_ms, 1000); /* flag over file */
    CHECK(c.check_pool);
    CHECK_EQ_INT(c.decode_steps, 4); /* default */
    unsetenv("TERN_SCHED_QUEUE_CAP");
    char *argv2[] = {"x", "--queue-cap", "0", NULL}; /* below the range */
    CHECK_EQ_INT(sched_cfg_parse(&c, 3, argv2), ERR_INVAL);
    char *argv3[] = {"x", "--no-such-flag", NULL};
    CHECK_EQ_INT(sched_cfg_parse(&c, 2, argv3), ERR_INVAL);
    char *argv4[] = {"x", "--heartbeat-ms", "500", "--dead-after-ms", "600", NULL};
    CHECK_EQ_INT(sched_cfg_parse(&c, 5, argv4), ERR_INVAL); /* relation */
    char *argv5[] = {"x", "--worker-endpoint", "http://nope", NULL};
    CHECK_EQ_INT(sched_cfg_parse(&c, 3, argv5), ERR_INVAL);
    char *argv6[] = {"x", "--check-config", NULL};
    CHECK_EQ_INT(sched_cfg_parse(&c, 2, argv6), 1);
    char *argv7[] = {"x", "--queue-cap", NULL};
    CHECK_EQ_INT(sched_cfg_parse(&c, 2, argv7), ERR_INVAL); /* missing value */
    unlink(path);
    char *argv8[] = {"x", "--config", "/nonexistent/tern.conf", NULL};
    CHECK_EQ_INT(sched_cfg_parse(&c, 3, argv8), ERR_INVAL);
    /* format: one line of name=value */
    static const struct cfg_opt opts[] = {
        {"a", NULL, CFG_TYPE_INT, offsetof(struct sched_cfg, queue_cap), 0, 0, 0, ""},
        {"b", NULL, CFG_TYPE_STR, offsetof(struct sched_cfg, log_level), 16, 0, 0, ""},
    };
    char line[128];
    c.queue_cap = 3;
    snprintf(c.log_level, sizeof c.log_level, "debug");
    cfg_format(&c, opts, 2, line, sizeof line);
    CHECK_STREQ(line, "a=3 b=debug");
}

int main(void)
{
    test_pool_basic();
    test_pool_random();
    test_reqs();
    test_cfg();
    return test_result();
}
