/* gpu_table: the GPUs tern plans for, as data: memory, memory bandwidth (the spec sheet's, and
 * the copy bandwidth tern measured where it did), compute capability and which low-precision
 * tensor-core paths the silicon has. The one bandwidth table of `tern compare` and `tern roofline`
 * (docs/ROOFLINE.md renders it) and of backend selection when no device is attached.
 * gpu_table_detect() finds the local GPU without CUDA: it parses `nvidia-smi --query-gpu` output,
 * else /proc/driver/nvidia/gpus/<bus>/information. Memory is what nvidia-smi reports as
 * memory.total where known (GB10: the 128 GB shared LPDDR5x). */
#ifndef MODEL_GPU_TABLE_H
#define MODEL_GPU_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gpu_info {
    const char *name;          // canonical id for --gpu: "h200", "gb10", ...
    const char *display;       // marketing name, e.g. "NVIDIA H200 SXM 141GB"
    const char *aliases;       // comma-separated lower-case alternatives ("dgx-spark,spark")
    const char *smi_names;     // comma-separated lower-case substrings of the nvidia-smi name
    int64_t mem_bytes;         // device memory total, bytes
    double mem_gbps_spec;      // memory bandwidth on the vendor's spec sheet, GB/s (1e9 B/s)
    double mem_gbps_measured;  // device-to-device copy of 1 GiB, read + write counted, GB/s,
                               // as measured by tern; 0 where not measured
    const char *measured_note; // when and how mem_gbps_measured was taken ("" when not)
    int sm;                    // compute capability x10: 80, 89, 90, 100, 120, 121
    bool fp8_mma;              // FP8 (e4m3) tensor cores: sm_89+
    bool fp4_mma_sync;         // mma.sync kind::mxf4nvf4 block-scaled FP4: sm_120 / sm_121
    bool fp4_tcgen05;          // tcgen05.mma kind::mxf4nvf4 (Tensor Memory): sm_100 / sm_103
    bool unified_memory;       // memory shared with the CPU and the OS (GB10)
};

/* The bandwidth a roofline divides by: the measured copy bandwidth where there is one, else the
 * spec sheet's. *source (may be NULL) gets "measured copy" or "spec sheet" (static). */
double gpu_table_roofline_gbps(const struct gpu_info *g, const char **source);

/* Number of entries and entry i (0 <= i < gpu_table_count()); static storage. */
int gpu_table_count(void);
const struct gpu_info *gpu_table_at(int i);
/* Look up by canonical name or alias, case-insensitive, '_' and ' ' equal to '-'.
 * NULL when unknown. */
const struct gpu_info *gpu_table_find(const char *name);
/* Match a device name as nvidia-smi or /proc print it ("NVIDIA H200", "NVIDIA GB10"). The
 * longest matching smi_names substring wins. NULL when no entry matches. */
const struct gpu_info *gpu_table_match_device(const char *device_name);
/* Writes "h100, h200, ..." (every canonical name) into buf; returns buf. */
const char *gpu_table_names(char *buf, size_t len);

/* Parse the first line of `nvidia-smi --query-gpu=name,memory.total,compute_cap
 * --format=csv,noheader,nounits` (further columns ignored). Fills *out, the device name
 * (when name_out != NULL), mem_mib and sm (compute cap x10). 0, or ERR_FORMAT / ERR_NOTFOUND
 * with one line in err naming the device and the known GPUs. */
int gpu_table_parse_smi(const char *text, const struct gpu_info **out, char *name_out,
                        size_t name_len, int64_t *mem_mib, int *sm, char *err, size_t errlen);
/* Parse the text of /proc/driver/nvidia/gpus/<bus>/information ("Model: \t\t NVIDIA H200").
 * 0, or ERR_FORMAT / ERR_NOTFOUND with one line in err. */
int gpu_table_parse_proc(const char *text, const struct gpu_info **out, char *name_out,
                         size_t name_len, char *err, size_t errlen);
/* Find the local GPU (--gpu auto): nvidia-smi's first device of CUDA_VISIBLE_DEVICES (index
 * or UUID; device 0 when unset), else the first /proc/driver/nvidia/gpus entry. 0, or ERR_NOTFOUND (no NVIDIA driver or an unknown model)
 * with one line in err that says what was found and how to pass --gpu NAME. */
int gpu_table_detect(const struct gpu_info **out, char *err, size_t errlen);

#endif
