/* gpu_table: one static table of GPUs plus local detection through nvidia-smi or
 * /proc/driver/nvidia, with no CUDA linkage. Bandwidth: the spec sheet's figure for every GPU,
 * plus the copy bandwidth tern measured (tests/gpu/gpu_bench, bench_kernels: cudaMemcpy
 * device-to-device of 1 GiB, read + write counted; docs/PERF.md) where it had the GPU. Memory
 * totals are nvidia-smi's memory.total (MiB) where known: H200 143771 MiB was read on a real
 * H200; the GB10 figure is the 128 GB LPDDR5x shared with the CPU (nvidia-smi reports no total). */
#include "model/gpu_table.h"

#include "common/err.h"
#include "common/xalloc.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024LL * 1024LL)

/* The lowest of the H200 measurements, the one docs/PERF.md's roofline fractions divide by. */
#define H200_COPY_NOTE                                                                             \
    "4,161 GB/s (2026-11-29), 4,194-4,217 GB/s (2026-12-01): cudaMemcpy device-to-device of "     \
    "1 GiB, read + write counted (docs/PERF.md)"

static const struct gpu_info GPUS[] = {
    {"a100", "NVIDIA A100 SXM 80GB", "a100-80gb,a100-sxm", "a100", 81920 * MIB, 2039.0, 0, "", 80,
     false, false, false, false},
    {"l40s", "NVIDIA L40S 48GB", "", "l40s", 46068 * MIB, 864.0, 0, "", 89, true, false, false,
     false},
    {"h100", "NVIDIA H100 SXM 80GB", "h100-sxm,h100-sxm5", "h100", 81559 * MIB, 3350.0, 0, "", 90,
     true, false, false, false},
    {"h100-pcie", "NVIDIA H100 PCIe 80GB", "", "h100 pcie", 81559 * MIB, 2000.0, 0, "", 90, true,
     false, false, false},
    {"h200", "NVIDIA H200 SXM 141GB", "h200-sxm", "h200", 143771 * MIB, 4800.0, 4161.0,
     H200_COPY_NOTE, 90, true, false, false, false},
    {"b200", "NVIDIA B200 180GB", "hgx-b200", "b200", 183359 * MIB, 8000.0, 0, "", 100, true,
     false, true, false},
    {"gb10", "NVIDIA GB10 (DGX Spark) 128GB unified", "dgx-spark,spark", "gb10",
     128000000000LL, 273.0, 0, "", 121, true, true, false, true},
    {"rtx5090", "NVIDIA GeForce RTX 5090 32GB", "rtx-5090,5090", "rtx 5090", 32607 * MIB, 1792.0,
     0, "", 120, true, true, false, false},
    {"rtx-pro-6000", "NVIDIA RTX PRO 6000 Blackwell 96GB", "rtx-pro-6000-blackwell,rtxpro6000",
     "rtx pro 6000 blackwell", 97887 * MIB, 1792.0, 0, "", 120, true, true, false, false},
};

double gpu_table_roofline_gbps(const struct gpu_info *g, const char **source)
{
    bool measured = g->mem_gbps_measured > 0;
    if (source)
        *source = measured ? "measured copy" : "spec sheet";
    return measured ? g->mem_gbps_measured : g->mem_gbps_spec;
}

int gpu_table_count(void)
{
    return (int)ARRAY_LEN(GPUS);
}

const struct gpu_info *gpu_table_at(int i)
{
    return i >= 0 && i < (int)ARRAY_LEN(GPUS) ? &GPUS[i] : NULL;
}

/* lower-case, '_' and ' ' -> '-' */
static void norm_name(const char *in, char *out, size_t len)
{
    size_t o = 0;
    for (; *in && o + 1 < len; in++) {
        char c = (char)tolower((unsigned char)*in);
        out[o++] = (c == '_' || c == ' ') ? '-' : c;
    }
    out[o] = '\0';
}

/* Is want one of the comma-separated entries of list? */
static bool in_list(const char *list, const char *want)
{
    size_t n = strlen(want);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && strncmp(p, want, n) == 0)
            return true;
        p += l + (e ? 1 : 0);
    }
    return false;
}

const struct gpu_info *gpu_table_find(const char *name)
{
    char n[64];
    if (!name)
        return NULL;
    norm_name(name, n, sizeof(n));
    for (size_t i = 0; i < ARRAY_LEN(GPUS); i++)
        if (strcmp(GPUS[i].name, n) == 0 || in_list(GPUS[i].aliases, n))
            return &GPUS[i];
    return NULL;
}

const struct gpu_info *gpu_table_match_device(const char *device_name)
{
    char low[256];
    size_t o = 0;
    for (const char *p = device_name; *p && o + 1 < sizeof(low); p++)
        low[o++] = (char)tolower((unsigned char)*p);
    low[o] = '\0';
    const struct gpu_info *best = NULL;
    size_t best_len = 0;
    for (size_t i = 0; i < ARRAY_LEN(GPUS); i++) {
        for (const char *p = GPUS[i].smi_names; *p;) {
            const char *e = strchr(p, ',');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            char sub[64];
            snprintf(sub, sizeof(sub), "%.*s", (int)l, p);
            if (l > best_len && strstr(low, sub)) {
                best = &GPUS[i];
                best_len = l;
            }
            p += l + (e ? 1 : 0);
        }
    }
    return best;
}

const char *gpu_table_names(char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < ARRAY_LEN(GPUS) && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? ", " : "", GPUS[i].name);
    return buf;
}

// ---- detection ----

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    size_t i = 0;
    while (s[i] && isspace((unsigned char)s[i]))
        i++;
    memmove(s, s + i, n - i + 1);
}

static int unknown_device(const char *dev, const char *src, char *err, size_t errlen)
{
    char names[256];
    snprintf(err, errlen, "%s reports GPU '%s', which is not in tern's GPU table; pass --gpu NAME "
             "with the closest of: %s", src, dev, gpu_table_names(names, sizeof(names)));
    return ERR_NOTFOUND;
}

int gpu_table_parse_smi(const char *text, const struct gpu_info **out, char *name_out,
                        size_t name_len, int64_t *mem_mib, int *sm, char *err, size_t errlen)
{
    char line[512], *fields[4] = {0};
    *out = NULL;
    const char *nl = strchr(text, '\n');
    snprintf(line, sizeof(line), "%.*s", (int)(nl ? nl - text : (long)strlen(text)), text);
    int nf = 0;
    for (char *p = line; p && nf < 4;) {
        fields[nf++] = p;
        char *c = strchr(p, ',');
        if (c)
            *c++ = '\0';
        p = c;
    }
    for (int i = 0; i < nf; i++)
        trim(fields[i]);
    if (nf < 1 || fields[0][0] == '\0' || strncmp(fields[0], "NVIDIA-SMI has failed", 21) == 0 ||
        strstr(fields[0], "No devices")) {
        snprintf(err, errlen, "nvidia-smi printed no GPU ('%s')", line);
        return ERR_FORMAT;
    }
    if (name_out)
        snprintf(name_out, name_len, "%s", fields[0]);
    if (mem_mib)
        *mem_mib = nf > 1 ? strtoll(fields[1], NULL, 10) : 0;
    if (sm)
        *sm = nf > 2 ? (int)(strtod(fields[2], NULL) * 10.0 + 0.5) : 0;
    *out = gpu_table_match_device(fields[0]);
    if (!*out)
        return unknown_device(fields[0], "nvidia-smi", err, errlen);
    return 0;
}

int gpu_table_parse_proc(const char *text, const struct gpu_info **out, char *name_out,
                         size_t name_len, char *err, size_t errlen)
{
    *out = NULL;
    const char *m = strstr(text, "Model:");
    if (!m) {
        snprintf(err, errlen, "/proc/driver/nvidia/gpus/*/information has no 'Model:' line");
        return ERR_FORMAT;
    }
    m += 6;
    char model[256];
    const char *nl = strchr(m, '\n');
    snprintf(model, sizeof(model), "%.*s", (int)(nl ? nl - m : (long)strlen(m)), m);
    trim(model);
    if (name_out)
        snprintf(name_out, name_len, "%s", model);
    *out = gpu_table_match_device(model);
    if (!*out)
        return unknown_device(model, "/proc/driver/nvidia", err, errlen);
    return 0;
}

static int read_small(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return 0;
}

static int detect_proc(const struct gpu_info **out, char *err, size_t errlen)
{
    const char *root = "/proc/driver/nvidia/gpus";
    DIR *d = opendir(root);
    if (!d)
        return ERR_NOTFOUND;
    char first[256] = "", path[512], text[4096];
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (first[0] == '\0' || strcmp(e->d_name, first) < 0)
            snprintf(first, sizeof(first), "%s", e->d_name);
    }
    closedir(d);
    if (first[0] == '\0')
        return ERR_NOTFOUND;
    snprintf(path, sizeof(path), "%s/%s/information", root, first);
    if (read_small(path, text, sizeof(text)) < 0)
        return ERR_NOTFOUND;
    return gpu_table_parse_proc(text, out, NULL, 0, err, errlen);
}

int gpu_table_detect(const struct gpu_info **out, char *err, size_t errlen)
{
    *out = NULL;
    if (errlen > 0)
        err[0] = '\0';
    char text[4096] = "", cmd[256], sel[80] = "";
    /* the first device of CUDA_VISIBLE_DEVICES (an index or a UUID), as the worker sees it */
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (cvd && *cvd) {
        size_t n = strcspn(cvd, ",");
        bool ok = n > 0 && n < 64;
        for (size_t i = 0; ok && i < n; i++)
            ok = isalnum((unsigned char)cvd[i]) || cvd[i] == '-';
        if (ok)
            snprintf(sel, sizeof(sel), " -i %.*s", (int)n, cvd);
    }
    snprintf(cmd, sizeof(cmd), "nvidia-smi%s --query-gpu=name,memory.total,compute_cap "
             "--format=csv,noheader,nounits 2>/dev/null", sel);
    FILE *p = popen(cmd, "r");
    if (p) {
        size_t n = fread(text, 1, sizeof(text) - 1, p);
        text[n] = '\0';
        int st = pclose(p);
        if (st == 0 && n > 0)
            return gpu_table_parse_smi(text, out, NULL, 0, NULL, NULL, err, errlen);
    }
    int rc = detect_proc(out, err, errlen);
    if (rc == ERR_NOTFOUND && !*out && err[0] == '\0') {
        char names[256];
        snprintf(err, errlen, "--gpu auto: no NVIDIA GPU found (nvidia-smi did not run and "
                 "/proc/driver/nvidia/gpus is absent); pass --gpu NAME, one of: %s",
                 gpu_table_names(names, sizeof(names)));
    }
    return rc;
}
