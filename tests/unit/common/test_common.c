/* Unit tests for common/: err table, log level parsing, tpool coverage of a range. */
#include "test.h"

#include "common/err.h"
#include "common/log.h"
#include "common/tpool.h"

#include <stdatomic.h>
#include <string.h>

struct sum_ctx {
    int *marks;
    atomic_long sum;
};

static void mark(void *p, int64_t b, int64_t e)
{
    struct sum_ctx *c = p;
    for (int64_t i = b; i < e; i++) {
        c->marks[i]++;
        atomic_fetch_add(&c->sum, (long)i);
    }
}

int main(void)
{
    CHECK_STREQ(err_str(0), "ok");
    CHECK_STREQ(err_str(ERR_FULL), "full");
    CHECK(strlen(err_str(-2)) > 0);
    CHECK_EQ_INT(log_level_parse("warn"), LOG_LEVEL_WARN);
    CHECK_EQ_INT(log_level_parse("nope"), -1);
    /* a rate-limited warning: the first call writes, calls within the interval are counted,
     * the next one after it writes with that count */
    {
        struct log_limit l = {0};
        uint32_t sup = 99;
        CHECK(log_limit_ok(&l, 5000, 1000, &sup) && sup == 0);
        CHECK(!log_limit_ok(&l, 5100, 1000, &sup));
        CHECK(!log_limit_ok(&l, 5999, 1000, &sup));
        CHECK(log_limit_ok(&l, 6000, 1000, &sup) && sup == 2);
        CHECK(!log_limit_ok(&l, 6500, 1000, &sup));
        CHECK(log_limit_ok(&l, 9000, 1000, &sup) && sup == 1);
    }

    struct tpool *tp = tpool_create(3);
    CHECK(tp != NULL);
    for (int n = 0; n < 200; n += 7) {
        int marks[200] = { 0 };
        struct sum_ctx c = { marks, 0 };
        tpool_for(tp, n, 2, mark, &c);
        long want = (long)n * (n - 1) / 2;
        CHECK_EQ_INT(atomic_load(&c.sum), want);
        for (int i = 0; i < n; i++)
            CHECK_EQ_INT(marks[i], 1);
    }
    tpool_destroy(tp);
    tpool_destroy(NULL);
    return test_result();
}
