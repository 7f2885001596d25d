/* loadgen pieces without a server: percentiles against hand-computed values (linear
 * interpolation between closest ranks) and SSE splitting at every byte boundary. */
#include <string.h>

#include "loadgen/lg_sse.h"
#include "loadgen/lg_stats.h"
#include "test.h"

static void test_percentiles(void)
{
    /* 1..4: rank = q/100 * 3 -> p50 = 2.5, p90 = 3.7, p99 = 3.97 */
    double v[] = {4, 1, 3, 2};
    struct stats_dist d;
    stats_dist(v, 4, &d);
    CHECK_EQ_INT(d.n, 4);
    CHECK_NEAR(d.mean, 2.5, 1e-12);
    CHECK_NEAR(d.p50, 2.5, 1e-12);
    CHECK_NEAR(d.p90, 3.7, 1e-12);
    CHECK_NEAR(d.p99, 3.97, 1e-12);
    CHECK_NEAR(d.min, 1, 0);
    CHECK_NEAR(d.max, 4, 0);
    CHECK_NEAR(v[0], 4, 0); /* input untouched */
    double one = 7;
    stats_dist(&one, 1, &d);
    CHECK_NEAR(d.p99, 7, 0);
    stats_dist(NULL, 0, &d);
    CHECK_EQ_INT(d.n, 0);
    /* 0..100: pN == N exactly */
    struct lg_vec x;
    lg_vec_init(&x);
    for (int i = 100; i >= 0; i--)
        lg_vec_push(&x, i);
    stats_dist(x.v, x.n, &d);
    CHECK_NEAR(d.p50, 50, 1e-9);
    CHECK_NEAR(d.p90, 90, 1e-9);
    CHECK_NEAR(d.p99, 99, 1e-9);
    lg_vec_deinit(&x);
}

struct events {
    char got[8][64];
    int n;
};

static void on_ev(void *ud, const char *data, size_t n)
{
    struct events *e = ud;
    CHECK_EQ_INT(strlen(data), n);
    if (e->n < 8)
        snprintf(e->got[e->n], sizeof(e->got[0]), "%s", data);
    e->n++;
}

static void test_sse_split(void)
{
    const char *s = "data: {\"a\":1}\n\n"
                    ": ping\n\n"
                    "data:two\r\ndata: lines\r\n\r\n"
                    "event: x\nid: 3\ndata: [DONE]\n\n"
                    "data: partial";
    size_t n = strlen(s);
    for (size_t cut = 0; cut <= n; cut++) {
        struct lg_sse p;
        struct events e = {0};
        lg_sse_init(&p);
        lg_sse_feed(&p, s, cut, on_ev, &e);
        lg_sse_feed(&p, s + cut, n - cut, on_ev, &e);
        CHECK_EQ_INT(e.n, 3);
        CHECK_STREQ(e.got[0], "{\"a\":1}");
        CHECK_STREQ(e.got[1], "two\nlines");
        CHECK_STREQ(e.got[2], "[DONE]");
        lg_sse_deinit(&p);
    }
}

int main(void)
{
    test_percentiles();
    test_sse_split();
    return test_result();
}
