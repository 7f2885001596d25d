/* log: one line of key=value per event on stderr (STYLE.md §5).
 *   ts=... lvl=info comp=scheduler pid=123 ev=batch_formed <fields>
 * comp is set once by log_init(). The macros check the level before evaluating arguments. */
#ifndef COMMON_LOG_H
#define COMMON_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum log_level { LOG_LEVEL_DEBUG = 0, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERR, LOG_LEVEL_OFF };

/* Set the component name (copied) and the minimum level. Safe to call again. */
void log_init(const char *comp, enum log_level level);
/* Parse "debug|info|warn|error|off"; returns -1 for an unknown name. */
int log_level_parse(const char *name);

/* A warning on the hot path, rate-limited (STYLE.md): at most one line per interval, the line
 * carrying how many were suppressed since the last one. */
struct log_limit {
    uint64_t at_ms;      /* when the last line was written; 0 = never */
    uint32_t suppressed; /* calls refused since then */
};
/* true: write the line now, with *suppressed = the count refused before it (then reset). */
bool log_limit_ok(struct log_limit *l, uint64_t now_ms, uint64_t interval_ms, uint32_t *suppressed);
bool log_enabled(enum log_level level);
/* Write one line: ev is the event name, fmt the key=value fields (no newline). Thread-safe. */
void log_write(enum log_level level, const char *ev, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define LOG_AT_(lvl, ev, ...)                    \
    do {                                         \
        if (log_enabled(lvl))                    \
            log_write(lvl, ev, __VA_ARGS__);     \
    } while (0)
#define LOG_DEBUG(ev, ...) LOG_AT_(LOG_LEVEL_DEBUG, ev, __VA_ARGS__)
#define LOG_INFO(ev, ...) LOG_AT_(LOG_LEVEL_INFO, ev, __VA_ARGS__)
#define LOG_WARN(ev, ...) LOG_AT_(LOG_LEVEL_WARN, ev, __VA_ARGS__)
#define LOG_ERR(ev, ...) LOG_AT_(LOG_LEVEL_ERR, ev, __VA_ARGS__)

#endif
