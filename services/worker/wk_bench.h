/* wk_bench: `tern-worker --bench`: time the configured engine's steps without a scheduler or HTTP
 * (issue 9's worker-level mode, for kernel work). B sequences each prefill a prompt of random
 * token ids in chunks, then decode greedily for a fixed number of steps (EOS ignored); prints one
 * result line (prefill tok/s, time to the first tokens, decode tok/s, step time p50/p90/p99, and
 * the decode roofline of the checkpoint: model/roofline.h) and optionally writes it as JSON. */
#ifndef WK_BENCH_H
#define WK_BENCH_H

struct wk_cfg;

/* Run the benchmark described by cfg->bench_*; 0, or a negative status (printed on stderr). */
int wk_bench_run(const struct wk_cfg *cfg);

#endif
