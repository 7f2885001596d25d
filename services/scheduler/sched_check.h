/* sched_check: the KV-pool plan of docs/KV.md for the scheduler's flags: computed from the model
 * config alone (common/kv_plan + model/kv_geom), refused in the reference engine's style when one
 * max_model_len sequence does not fit. Used at startup (sched_check_startup) and by
 * `tern-scheduler --check` (sched_check_main), which prints the plan as text or JSON and starts
 * nothing. */
#ifndef SCHED_CHECK_H
#define SCHED_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "common/kv_plan.h"
#include "sched_cfg.h"

/* Load cfg->model (dir) or cfg->model_config (file), build the kv options from cfg and compute
 * the plan. Returns 0, ERR_FULL (refused: the one-line reason in err, plan filled as far as
 * kv_plan_compute goes), ERR_INVAL (bad input) or a load error; err always set on failure.
 * geom may be NULL. */
int sched_check_plan(const struct sched_cfg *cfg, struct kv_geom *geom, struct kv_plan *plan,
                     char *err, size_t errlen);
/* Print a plan (or the refusal err when rc < 0) as text or as one JSON object. */
void sched_check_print(FILE *out, const struct sched_cfg *cfg, const struct kv_geom *geom,
                       const struct kv_plan *plan, int rc, const char *err, bool json);
/* The one log line of a plan that fits: "kv_pool tokens=... max_concurrency=2.41x at
 * max_model_len=262144" (as key=value fields after ev=kv_pool). */
void sched_check_log(const struct kv_plan *plan);
/* At startup: nothing to do (0) when no model is configured; otherwise log the plan (0) or print
 * the refusal to stderr and return ERR_FULL / the error. */
int sched_check_startup(const struct sched_cfg *cfg);
/* `tern-scheduler --check [--json] --model DIR | --config FILE [flags]`: --config names the
 * model config here (not a key=value file). Returns the exit code: 0 fits, 1 refused, 2 usage. */
int sched_check_main(int argc, char **argv);
/* Whether argv asks for --check. */
bool sched_check_wanted(int argc, char **argv);

#endif
