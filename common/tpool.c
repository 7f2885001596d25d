/* tpool: fork-join thread pool. Workers sleep on a condition variable between jobs; a job is
 * split into at most n_threads contiguous ranges, range 0 runs on the caller. */
#include "common/tpool.h"

#include "common/xalloc.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

struct tpool {
    int n;                     // total threads including the caller
    pthread_t *th;             // n-1 worker threads
    pthread_mutex_t mu;
    pthread_cond_t cv_job;
    pthread_cond_t cv_done;
    uint64_t gen;              // job generation, bumped per tpool_for
    int pending;               // workers still running the current job
    bool stop;
    tpool_range_fn fn;
    void *ctx;
    int64_t total, chunk;
};

struct worker_arg {
    struct tpool *tp;
    int idx;
};

static void run_part(struct tpool *tp, int idx)
{
    int64_t b = (int64_t)idx * tp->chunk;
    int64_t e = b + tp->chunk;
    if (e > tp->total)
        e = tp->total;
    if (b < e)
        tp->fn(tp->ctx, b, e);
}

static void *worker_main(void *p)
{
    struct worker_arg *wa = p;
    struct tpool *tp = wa->tp;
    int idx = wa->idx;
    free(wa);
    uint64_t seen = 0;
    pthread_mutex_lock(&tp->mu);
    for (;;) {
        while (!tp->stop && tp->gen == seen)
            pthread_cond_wait(&tp->cv_job, &tp->mu);
        if (tp->stop)
            break;
        seen = tp->gen;
        pthread_mutex_unlock(&tp->mu);
        run_part(tp, idx);
        pthread_mutex_lock(&tp->mu);
        if (--tp->pending == 0)
            pthread_cond_signal(&tp->cv_done);
    }
    pthread_mutex_unlock(&tp->mu);
    return NULL;
}

struct tpool *tpool_create(int n_threads)
{
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    struct tpool *tp = xcalloc(1, sizeof(*tp));
    tp->n = n_threads;
    pthread_mutex_init(&tp->mu, NULL);
    pthread_cond_init(&tp->cv_job, NULL);
    pthread_cond_init(&tp->cv_done, NULL);
    tp->th = xcalloc((size_t)n_threads, sizeof(pthread_t));
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *wa = xmalloc(sizeof(*wa));
        wa->tp = tp;
        wa->idx = i;
        if (pthread_create(&tp->th[i], NULL, worker_main, wa) != 0) {
            free(wa);
            tp->n = i;
            break;
        }
    }
    return tp;
}

void tpool_destroy(struct tpool *tp)
{
    if (!tp)
        return;
    pthread_mutex_lock(&tp->mu);
    tp->stop = true;
    pthread_cond_broadcast(&tp->cv_job);
    pthread_mutex_unlock(&tp->mu);
    for (int i = 1; i < tp->n; i++)
        pthread_join(tp->th[i], NULL);
    pthread_mutex_destroy(&tp->mu);
    pthread_cond_destroy(&tp->cv_job);
    pthread_cond_destroy(&tp->cv_done);
    free(tp->th);
    free(tp);
}

int tpool_size(const struct tpool *tp)
{
    return tp ? tp->n : 1;
}

void tpool_for(struct tpool *tp, int64_t n, int64_t min_chunk, tpool_range_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (min_chunk < 1)
        min_chunk = 1;
    if (!tp || tp->n == 1 || n <= min_chunk) {
        fn(ctx, 0, n);
        return;
    }
    int64_t parts = n / min_chunk;
    if (parts > tp->n)
        parts = tp->n;
    pthread_mutex_lock(&tp->mu);
    tp->fn = fn;
    tp->ctx = ctx;
    tp->total = n;
    tp->chunk = (n + parts - 1) / parts;
    tp->pending = tp->n - 1;
    tp->gen++;
    pthread_cond_broadcast(&tp->cv_job);
    pthread_mutex_unlock(&tp->mu);
    run_part(tp, 0);
    pthread_mutex_lock(&tp->mu);
    while (tp->pending > 0)
        pthread_cond_wait(&tp->cv_done, &tp->mu);
    pthread_mutex_unlock(&tp->mu);
}
