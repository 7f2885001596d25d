/* log: the one process-wide logger (one of the two allowed file-scope globals). */
#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
    char comp[32];
    enum log_level level;
    pthread_mutex_t mu;
} g_log = { "tern", LOG_LEVEL_INFO, PTHREAD_MUTEX_INITIALIZER };

static const char *const level_names[] = { "debug", "info", "warn", "error", "off" };

void log_init(const char *comp, enum log_level level)
{
    snprintf(g_log.comp, sizeof(g_log.comp), "%s", comp ? comp : "tern");
    g_log.level = level;
}

int log_level_parse(const char *name)
{
    for (int i = 0; i <= LOG_LEVEL_OFF; i++)
        if (name && strcmp(name, level_names[i]) == 0)
            return i;
    if (name && strcmp(name, "err") == 0)
        return LOG_LEVEL_ERR;
    return -1;
}

bool log_enabled(enum log_level level)
{
    return level >= g_log.level && level < LOG_LEVEL_OFF;
}

void log_write(enum log_level level, const char *ev, const char *fmt, ...)
{
    char buf[4096];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(buf, sizeof(buf), "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ lvl=%s comp=%s pid=%d ev=%s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, level_names[level], g_log.comp, (int)getpid(), ev);
    if (n < 0)
        return;
    if ((size_t)n < sizeof(buf)) {
        va_list ap;
        va_start(ap, fmt);
        int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
        va_end(ap);
        if (m > 0)
            n += m;
    }
    if ((size_t)n >= sizeof(buf) - 1)
        n = (int)sizeof(buf) - 2;
    /* one event is one line: fold any newline a field carried */
    for (int i = 0; i < n; i++)
        if (buf[i] == '\n' || buf[i] == '\r')
            buf[i] = ' ';
    buf[n++] = '\n';
    pthread_mutex_lock(&g_log.mu);
    fwrite(buf, 1, (size_t)n, stderr);
    fflush(stderr);
    pthread_mutex_unlock(&g_log.mu);
}

bool log_limit_ok(struct log_limit *l, uint64_t now_ms, uint64_t interval_ms, uint32_t *suppressed)
{
    if (l->at_ms && now_ms - l->at_ms < interval_ms) {
        l->suppressed++;
        return false;
    }
    *suppressed = l->suppressed;
    l->suppressed = 0;
    l->at_ms = now_ms ? now_ms : 1;
    return true;
}
