/* clock: monotonic time for intervals and wall time for stamps. */
#ifndef COMMON_CLOCK_H
#define COMMON_CLOCK_H

#include <stdint.h>

uint64_t clock_now_ns(void);   /* CLOCK_MONOTONIC, ns */
uint64_t clock_now_ms(void);   /* CLOCK_MONOTONIC, ms */
double clock_wall_s(void);     /* CLOCK_REALTIME, seconds since the epoch */

#endif
