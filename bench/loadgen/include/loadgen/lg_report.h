/* lg_report: a point's results as text, as JSON, and a sweep as a gnuplot PNG. */
#ifndef LOADGEN_LG_REPORT_H
#define LOADGEN_LG_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "loadgen/lg_run.h"

/* Human-readable block, vLLM "bench serve" style. */
void lg_report_print(FILE *f, const struct lg_cfg *c, const struct lg_result *r);
/* {"config": {...}, "requests": .., ..., "ttft_ms": {"mean","p50","p90","p99",...}, ...};
 * caller owns the returned object (cJSON_Delete). */
cJSON *lg_report_point_json(const struct lg_cfg *c, const struct lg_result *r);
/* PNG through gnuplot: output tok/s (left axis) and ITL p50 ms (right axis) against x[i].
 * logx: x axis on a log2 scale. Returns 0, or a negative status with err set. */
int lg_report_plot(const char *png, const char *xlabel, const double *x, const struct lg_result *r,
                   size_t n, int logx, char *err, size_t errlen);

#endif
