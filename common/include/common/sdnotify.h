/* sdnotify: systemd readiness and watchdog notifications (Type=notify units).
 * Without libsystemd at build time, or outside systemd (NOTIFY_SOCKET unset), every call is a no-op
 * that returns 0. */
#ifndef COMMON_SDNOTIFY_H
#define COMMON_SDNOTIFY_H

#include <stdint.h>

int sdnotify_ready(void);                 /* READY=1 */
int sdnotify_stopping(void);              /* STOPPING=1 */
int sdnotify_watchdog(void);              /* WATCHDOG=1 */
int sdnotify_status(const char *status);  /* STATUS=... */
/* Watchdog interval the service manager asked for (WATCHDOG_USEC), in ms; 0 when none.
 * Services send WATCHDOG=1 at half this interval from their main loop. */
uint64_t sdnotify_watchdog_ms(void);

#endif
