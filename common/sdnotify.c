/* sdnotify: thin wrapper over libsystemd's sd_notify (no-op build when TERN_HAVE_SYSTEMD is 0). */
#include "common/sdnotify.h"

#include <stdio.h>

#if TERN_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>

static int notify(const char *s)
{
    int rc = sd_notify(0, s);
    return rc < 0 ? rc : 0;
}

uint64_t sdnotify_watchdog_ms(void)
{
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) <= 0)
        return 0;
    return usec / 1000;
}
#else
static int notify(const char *s)
{
    (void)s;
    return 0;
}

uint64_t sdnotify_watchdog_ms(void)
{
    return 0;
}
#endif

int sdnotify_ready(void)
{
    return notify("READY=1");
}

int sdnotify_stopping(void)
{
    return notify("STOPPING=1");
}

int sdnotify_watchdog(void)
{
    return notify("WATCHDOG=1");
}

int sdnotify_status(const char *status)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "STATUS=%s", status);
    return notify(buf);
}
