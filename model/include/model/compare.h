/* compare: `tern compare` as a library. Loads each checkpoint header-only (config.json,
 * quantization config, index, safetensors headers; shard data not needed), or from config.json
 * alone when there are no tensors (a directory without safetensors, or a .json path: estimated
 * the way `--load-format dummy` builds the model, marked "source": "config_only"), and derives,
 * side by side: served or not, scheme per module class, tensor counts, MTP declared/present, vision
 * tower, resident bytes per group, KV/state sizes, and per GPU of the table: kernel path per
 * layer class (backend.h), the longest single-sequence context (kv_plan.h), bytes read per
 * decoded token, the bandwidth roofline and the expected MTP speed-up, plus one recommendation
 * line per GPU. The result is one cJSON object with a fixed key order (no timestamps); the
 * text form is printed from that object. */
#ifndef MODEL_COMPARE_H
#define MODEL_COMPARE_H

#include "model/backend.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct cJSON;
struct gpu_info;

#define COMPARE_MAX_GPUS 16
#define COMPARE_MAX_DIRS 8
#define COMPARE_MAX_DRAFTS 4   // MTP draft counts K tried: 1..4

/* The text form's note on a checkpoint of source "config_only". */
#define COMPARE_CONFIG_ONLY_NOTE                                                                   \
    "estimated from config.json (no tensor headers): bytes per group as the quantization config "  \
    "describes them (--load-format dummy), an MTP head wherever the config declares one, vision " \
    "tower not counted"

struct compare_opts {
    const struct gpu_info *gpus[COMPARE_MAX_GPUS]; // GPUs to evaluate; n_gpus == 0: every GPU
    int n_gpus;
    enum backend_id force_moe;          // BACKEND_AUTO or a forced experts backend
    enum backend_id force_linear;       // BACKEND_AUTO or a forced dense-linear backend
    int64_t context_tokens;             // context for KV reads per decoded token (8192)
    int64_t reserve_bytes;              // activations / workspaces kept off the KV pool (2 GiB)
    double gpu_memory_utilization;      // fraction of device memory tern may use (0.9)
    int64_t fit_tokens;                 // a checkpoint "fits" when one sequence this long fits
                                        // (32768, capped at max_position_embeddings)
};

void compare_opts_default(struct compare_opts *o);

/* Compare n (1..COMPARE_MAX_DIRS) checkpoints (directories, or config .json files). Returns the
 * object (caller frees with cJSON_Delete), or NULL with one line in err (a checkpoint that does
 * not load, missing shard headers, a forced backend that cannot run). */
struct cJSON *compare_build(const char *const *dirs, int n, const struct compare_opts *o,
                            char *err, size_t errlen);
/* Print the object from compare_build as side-by-side text. */
void compare_print_text(FILE *f, const struct cJSON *cmp);
/* compare_build then print as text or as one JSON line. 0, or a negative status with err. */
int compare_run(const char *const *dirs, int n, const struct compare_opts *o, bool json, FILE *f,
                char *err, size_t errlen);

/* Expected distinct experts selected by n tokens under uniform top-k routing over E experts:
 * E * (1 - (1 - k/E)^n). */
double compare_expected_experts(int n_experts, int top_k, int n_tokens);
/* Expected tokens emitted per speculative round with K drafts and per-draft acceptance a
 * (independent): 1 + a + ... + a^K. */
double compare_expected_tokens(double accept, int k_drafts);

#endif
