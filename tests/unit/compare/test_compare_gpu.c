/* gpu_table and backend: the table's internal consistency (tensor-core flags follow the compute
 * capability), name lookup, the nvidia-smi and /proc parsers on text captured from a real H200
 * (tests/unit/compare/data), and the backend rules of CHECKPOINTS.md §3.3 restated for tern's
 * kernels, including the forced-backend refusals. The MTP arithmetic is checked against a
 * Monte-Carlo simulation of uniform top-k routing. */
#include "common/err.h"
#include "common/file.h"
#include "model/backend.h"
#include "model/compare.h"
#include "model/gpu_table.h"
#include "test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *rel)
{
    const char *src = getenv("TERN_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof(path), "%s/tests/unit/compare/data/%s", src ? src : ".", rel);
    return file_read(path, NULL);
}

static void test_table(void)
{
    CHECK(gpu_table_count() >= 6);
    static const char *const required[] = {"h100", "h200", "b200", "gb10", "rtx5090",
                                           "rtx-pro-6000"};
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
        CHECK(gpu_table_find(required[i]) != NULL);
    for (int i = 0; i < gpu_table_count(); i++) {
        const struct gpu_info *g = gpu_table_at(i);
        CHECK(g->mem_bytes > (16LL << 30));
        CHECK(g->mem_gbps_spec > 100.0);
        /* a measurement is below the spec sheet and says when and how it was taken */
        CHECK(g->mem_gbps_measured >= 0 && g->mem_gbps_measured < g->mem_gbps_spec);
        CHECK((g->mem_gbps_measured > 0) == (g->measured_note[0] != '\0'));
        const char *src;
        double bw = gpu_table_roofline_gbps(g, &src);
        CHECK(bw == (g->mem_gbps_measured > 0 ? g->mem_gbps_measured : g->mem_gbps_spec));
        CHECK_STREQ(src, g->mem_gbps_measured > 0 ? "measured copy" : "spec sheet");
        CHECK(g->fp8_mma == (g->sm >= 89));
        CHECK(g->fp4_mma_sync == (g->sm == 120 || g->sm == 121));
        CHECK(g->fp4_tcgen05 == (g->sm >= 100 && g->sm < 110));
        CHECK(gpu_table_find(g->name) == g);
        CHECK(gpu_table_match_device(g->display) == g);
    }
    CHECK(gpu_table_at(-1) == NULL && gpu_table_at(gpu_table_count()) == NULL);
    CHECK(gpu_table_find("H200") == gpu_table_find("h200"));
    CHECK(gpu_table_find("dgx_spark") == gpu_table_find("gb10"));
    CHECK(gpu_table_find("RTX PRO 6000") == gpu_table_find("rtx-pro-6000"));
    CHECK(gpu_table_find("tpu-v5") == NULL);
    /* the H200: 4,800 GB/s spec sheet; 4,161 GB/s device-to-device copy measured (PERF.md) */
    CHECK(gpu_table_find("h200")->mem_gbps_spec == 4800.0);
    CHECK(gpu_table_find("h200")->mem_gbps_measured == 4161.0);
    CHECK_EQ_INT(gpu_table_find("gb10")->sm, 121);
    CHECK_EQ_INT(gpu_table_find("b200")->sm, 100);
    CHECK_EQ_INT(gpu_table_find("h100")->sm, 90);
    /* device names as the driver prints them */
    CHECK(gpu_table_match_device("NVIDIA GeForce RTX 5090") == gpu_table_find("rtx5090"));
    CHECK(gpu_table_match_device("NVIDIA H100 PCIe") == gpu_table_find("h100-pcie"));
    CHECK(gpu_table_match_device("NVIDIA H100 80GB HBM3") == gpu_table_find("h100"));
    CHECK(gpu_table_match_device("NVIDIA RTX PRO 6000 Blackwell Workstation Edition") ==
          gpu_table_find("rtx-pro-6000"));
    CHECK(gpu_table_match_device("NVIDIA GB10") == gpu_table_find("gb10"));
    CHECK(gpu_table_match_device("NVIDIA B200") == gpu_table_find("b200"));
    CHECK(gpu_table_match_device("Tesla T4") == NULL);
}

/* 4800 -> "4,800" */
static const char *grouped(double v, char *buf, size_t len)
{
    long n = (long)(v + 0.5);
    if (n >= 1000)
        snprintf(buf, len, "%ld,%03ld", n / 1000, n % 1000);
    else
        snprintf(buf, len, "%ld", n);
    return buf;
}

/* docs/ROOFLINE.md renders the table: one row per GPU with the same figures and labels. */
static void test_table_doc(void)
{
    char *doc = test_read_source("docs/ROOFLINE.md");
    CHECK(doc != NULL);
    if (!doc)
        return;
    int rows = 0;
    for (const char *p = strstr(doc, "\n| `"); p; p = strstr(p + 1, "\n| `"))
        rows += strncmp(p, "\n| `--", 5) != 0; /* not the header row */
    CHECK_EQ_INT(rows, gpu_table_count());
    for (int i = 0; i < gpu_table_count(); i++) {
        const struct gpu_info *g = gpu_table_at(i);
        char key[64], line[512], spec[32], meas[32], want[256];
        snprintf(key, sizeof(key), "\n| `%s` |", g->name);
        const char *p = strstr(doc, key);
        CHECK(p != NULL);
        if (!p)
            continue;
        const char *e = strchr(p + 1, '\n');
        snprintf(line, sizeof(line), "%.*s", (int)(e ? e - p - 1 : (long)strlen(p + 1)), p + 1);
        grouped(g->mem_gbps_spec, spec, sizeof(spec));
        if (g->mem_gbps_measured > 0)
            snprintf(want, sizeof(want), "| `%s` | %s | %s | %s ", g->name, g->display, spec,
                     grouped(g->mem_gbps_measured, meas, sizeof(meas)));
        else
            snprintf(want, sizeof(want), "| `%s` | %s | %s | not measured | spec sheet |",
                     g->name, g->display, spec);
        if (strncmp(line, want, strlen(want)) != 0)
            fprintf(stderr, "docs/ROOFLINE.md row '%s', want it to start '%s'\n", line, want);
        CHECK(strncmp(line, want, strlen(want)) == 0);
        if (g->mem_gbps_measured > 0) {
            snprintf(want, sizeof(want), "| measured, %s |", meas);
            CHECK(strstr(line, want) != NULL);
        }
    }
    free(doc);
}

static void test_parsers(void)
{
    char *smi = slurp("nvidia_smi_h200.txt");
    char *proc = slurp("proc_info_h200.txt");
    CHECK(smi && proc);
    if (!smi || !proc)
        goto out;
    const struct gpu_info *g = NULL;
    char name[128], err[512];
    int64_t mib = 0;
    int sm = 0;
    CHECK_EQ_INT(gpu_table_parse_smi(smi, &g, name, sizeof(name), &mib, &sm, err, sizeof(err)), 0);
    CHECK(g == gpu_table_find("h200"));
    CHECK_STREQ(name, "NVIDIA H200");
    CHECK_EQ_INT(sm, 90);
    /* the table's memory is what the real device reported */
    CHECK_EQ_INT(g->mem_bytes, mib * 1024 * 1024);
    CHECK_EQ_INT(g->sm, sm);
    g = NULL;
    CHECK_EQ_INT(gpu_table_parse_proc(proc, &g, name, sizeof(name), err, sizeof(err)), 0);
    CHECK(g == gpu_table_find("h200"));
    CHECK_STREQ(name, "NVIDIA H200");
    /* unknown device: one line naming it and the way out */
    CHECK_EQ_INT(gpu_table_parse_smi("Tesla T4, 15360, 7.5\n", &g, NULL, 0, NULL, NULL, err,
                                     sizeof(err)), ERR_NOTFOUND);
    CHECK(g == NULL && strstr(err, "Tesla T4") && strstr(err, "--gpu") && !strchr(err, '\n'));
    CHECK_EQ_INT(gpu_table_parse_smi("", &g, NULL, 0, NULL, NULL, err, sizeof(err)), ERR_FORMAT);
    CHECK_EQ_INT(gpu_table_parse_proc("IRQ: 41\n", &g, NULL, 0, err, sizeof(err)), ERR_FORMAT);
    /* detect either finds a table GPU or explains itself in one line */
    int rc = gpu_table_detect(&g, err, sizeof(err));
    CHECK((rc == 0 && g != NULL) || (rc < 0 && g == NULL && strstr(err, "--gpu")));
out:
    free(smi);
    free(proc);
}

static struct backend_scheme sch_of(enum quant_kind k, bool act)
{
    struct backend_scheme s = {.present = true, .kind = k, .act_fp4 = act, .n_modules = 1};
    return s;
}

/* A checkpoint laid out like the published NVFP4 builds: quantized experts / shared / attention,
 * bf16 GDN and lm_head. */
static void layout(struct backend_scheme sch[BACKEND_CLASS_COUNT], enum quant_kind k, bool act,
                   bool mtp)
{
    memset(sch, 0, sizeof(*sch) * BACKEND_CLASS_COUNT);
    sch[BACKEND_CLASS_MOE] = sch_of(k, act);
    sch[BACKEND_CLASS_SHARED] = sch_of(k, act);
    sch[BACKEND_CLASS_ATTN] = sch_of(k, act);
    sch[BACKEND_CLASS_LINEAR_ATTN] = sch_of(QUANT_KIND_NONE, false);
    sch[BACKEND_CLASS_LM_HEAD] = sch_of(QUANT_KIND_NONE, false);
    if (mtp)
        sch[BACKEND_CLASS_MTP] = sch_of(QUANT_KIND_NONE, false);
}

static void test_backend_rules(void)
{
    struct backend_scheme sch[BACKEND_CLASS_COUNT];
    struct backend_plan p;
    char err[600];
    /* names round-trip */
    for (int b = 0; b < BACKEND_NONE; b++)
        CHECK_EQ_INT(backend_parse(backend_name((enum backend_id)b)), b);
    CHECK_EQ_INT(backend_parse("nvfp4-w4a16"), BACKEND_NVFP4_W4A16);
    CHECK_EQ_INT(backend_parse("marlin"), -1);

    /* W4A16 on sm_90 -> nvfp4_w4a16; the reason names the missing activation quantization */
    layout(sch, QUANT_KIND_NVFP4, false, false);
    CHECK_EQ_INT(backend_plan_compute(sch, 90, "h200", BACKEND_AUTO, BACKEND_AUTO, &p, err,
                                      sizeof(err)), 0);
    CHECK_EQ_INT(p.cls[BACKEND_CLASS_MOE].id, BACKEND_NVFP4_W4A16);
    CHECK(strstr(p.cls[BACKEND_CLASS_MOE].reason, "no activation quantization"));
    char line[400];
    /* the startup line, as the issue asked for it */
    CHECK_STREQ(backend_choice_str(BACKEND_CLASS_MOE, &p.cls[BACKEND_CLASS_MOE], line, sizeof(line)),
                "moe_backend=nvfp4_w4a16 reason=\"checkpoint has no activation quantization; fp4 "
                "tensor cores need W4A4 and sm_100+\"");
    CHECK_EQ_INT(p.cls[BACKEND_CLASS_LINEAR_ATTN].id, BACKEND_BF16);
    CHECK_EQ_INT(p.cls[BACKEND_CLASS_MTP].id, BACKEND_AUTO); /* absent */
    CHECK(!p.cls[BACKEND_CLASS_MOE].w4a4 && !backend_plan_w4a4_weight_only(&p));
    /* W4A16 on sm_121 stays weight-only: the fp4 mma needs fp4 activations */
    CHECK_EQ_INT(backend_plan_compute(sch, 121, "gb10", BACKEND_AUTO, BACKEND_AUTO, &p, err,
                                      sizeof(err)), 0);
    CHECK_EQ_INT(p.cls[BACKEND_CLASS_MOE].id, BACKEND_NVFP4_W4A16);

    /* W4A4 on sm_120 / sm_121 -> the mma.sync path */
    layout(sch, QUANT_KIND_NVFP4, true, true);
    for (int sm = 120; sm <= 121; sm++) {
        CHECK_EQ_INT(backend_plan_compute(sch, sm, "x", BACKEND_AUTO, BACKEND_AUTO, &p, err,
                                          sizeof(err)), 0);
        CHECK_EQ_INT(p.cls[BACKEND_CLASS_MOE].id, BACKEND_NVFP4_W4A4_MMA);
        CHECK_EQ_INT(p.cls[BACKEND_CLASS_ATTN].id, BACKEND_NVFP4_W4A4_MMA);
        CHECK_EQ_INT(p.cls[BACKEND_CLASS_MTP].id, BACKEND_BF16);
    }
    /* W4A4 on sm_90 -> weight-only with the reason */
    CHECK_EQ_INT(backend_plan_compute(sch, 90, "h200", BACKEND_AUTO, BACKEND_AUTO, &p, err,
                                      sizeof(err)), 0);
    CHECK_EQ_INT(p.cls[BACKEND_CLASS_MOE].id, BACKEND_NVFP4_W4A16);
    CHECK(strstr(p.cls[BACKEND_CLASS_MOE].reason, "sm_100+"));
    CHECK(strstr(p.cls[BACKEND_CLASS_MOE].reason, "activation scales unused"));
    /* ... and the semantics that run are data: weight-only, in the startup line too */
    CHECK(p.cls[BACKEND_CLASS_MOE].w4a4 && !p.cls[BACKEND_CLASS_MOE].act_quant);
    CHECK(!p.cls[BACKEND_CLASS_MTP].w4a4); /* bf16 */
    CHECK(backend_plan_w4a4_weight_only(&p));
    CHECK(strstr(backend_choice_str(BACKEND_CLASS_MOE, &p.cls[BACKEND_CLASS_MOE], line,
                                    sizeof(line)),
                 "moe_backend=nvfp4_w4a16 w4a4=weight_only reason=\"fp4 tensor cores need"));
    CHECK_EQ_INT(backend_plan_without_w4a4_mma(&p, err, sizeof(err)), 0); /* nothing to change */
    CHECK_EQ_INT(p.cls[BACKEND_CLASS_MOE].id, BACKEND_NVFP4_W4A16);
    /* sm_121 plans the fp4 mma (activations quantized); a runner without it runs weight-only */
    CHECK_EQ_INT(backend_plan_compute(sch, 121, "gb10", BACKEND_AUTO, BACKEND_AUTO, &p, err,
                                      sizeof(err)), 0);
    CHECK(p.cls[BACKEND_CLASS_MOE].act_quant && !backend_plan_w4a4_weight_only(&p));
    CHECK(strstr(backend_choice_str(BACKEND_CLASS_ATTN, &p.cls[BACKEND_CLASS_ATTN], line,
                                    sizeof(line)), " w4a4=act_quant "));
    CHECK_EQ_INT(backend_plan_without_w4a4_mma(&p, err, sizeof(err)), 0);
    for (int c = 0; c < BACKEND_CLASS_COUNT; c++)
        CHECK(p.cls[c].id != BACKEND_NVFP4_W4A4_MMA && !p.cls[c].act_quant);
    CHECK_EQ_INT(p.cls[BACKEND_CLASS_MOE].id, BACKEND_NVFP4_W4A16);
    CHECK(strstr(p.cls[BACKEND_CLASS_MOE].reason, "sm_121") &&
          strstr(p.cls[BACKEND_CLASS_MOE].reason, "does not dispatch") &&
          strstr(p.cls[BACKEND_CLASS_MOE].reason, "activations unquantized"));
    CHECK(backend_plan_w4a4_weight_only(&p));
    /* forced there: refused, not silently downgraded */
    CHECK_EQ_INT(backend_plan_compute(sch, 121, "gb10", BACKEND_NVFP4_W4A4_MMA, BACKEND_AUTO, &p,
                                      err, sizeof(err)), 0);
    CHECK(p.cls[BACKEND_CLASS_MOE].forced && !p.cls[BACKEND_CLASS_ATTN].forced);
    CHECK_EQ_INT(backend_plan_without_w4a4_mma(&p, err, sizeof(err)), ERR_UNSUPPORTED);
    CHECK(strstr(err, "--moe-backend nvfp4_w4a4_mma") && !strchr(err, '\n'));
    /* the CPU reference quantizes activations */
    CHECK_EQ_INT(backend_plan_compute(sch, 0, NULL, BACKEND_AUTO, BACKEND_AUTO, &p, err,
                                      sizeof(err)), 0);
    CHECK(p.cls[BACKEND_CLASS_MOE].act_quant && !backend_plan_w4a4_weight_only(&p));
    /* W4A4 on sm_100: tcgen05 not written -> falls back */
    CHECK_EQ_INT(backend_plan_compute(sch, 100, "b200", BACKEND_AUTO, BACKEND_AUTO, &p, err,
                                      sizeof(err)), 0);
    CHECK_EQ_INT(p.cls[BACKEND_CLASS_MOE].id, BACKEND_NVFP4_W4A16);
    CHECK(strstr(p.cls[BACKEND_CLASS_MOE].reason, "tcgen05"));
    /* no GPU -> CPU reference everywhere */
    CHECK_EQ_INT(backend_plan_compute(sch, 0, NULL, BACKEND_AUTO, BACKEND_AUTO, &p, err,
                                      sizeof(err)), 0);
    for (int c = 0; c < BACKEND_CLASS_COUNT; c++)
        CHECK(!sch[c].present || p.cls[c].id == BACKEND_CPU_REF);

    /* forced, possible: W4A4 experts on sm_121 forced to weight-only */
    CHECK_EQ_INT(backend_plan_compute(sch, 121, "gb10", BACKEND_NVFP4_W4A16, BACKEND_AUTO, &p,
                                      err, sizeof(err)), 0);
    CHECK_EQ_INT(p.cls[BACKEND_CLASS_MOE].id, BACKEND_NVFP4_W4A16);
    CHECK(strstr(p.cls[BACKEND_CLASS_MOE].reason, "forced"));
    /* forced linear fp4 mma: quantized dense classes take it, bf16 ones stay bf16 */
    CHECK_EQ_INT(backend_plan_compute(sch, 121, "gb10", BACKEND_AUTO, BACKEND_NVFP4_W4A4_MMA, &p,
                                      err, sizeof(err)), 0);
    CHECK_EQ_INT(p.cls[BACKEND_CLASS_SHARED].id, BACKEND_NVFP4_W4A4_MMA);
    CHECK_EQ_INT(p.cls[BACKEND_CLASS_LM_HEAD].id, BACKEND_BF16);
    /* forced, impossible: fp4 mma on sm_90 names need vs have */
    CHECK_EQ_INT(backend_plan_compute(sch, 90, "h200", BACKEND_NVFP4_W4A4_MMA, BACKEND_AUTO, &p,
                                      err, sizeof(err)), ERR_UNSUPPORTED);
    CHECK(strstr(err, "--moe-backend nvfp4_w4a4_mma") && strstr(err, "sm_120") &&
          strstr(err, "sm_90") && strstr(err, "h200") && !strchr(err, '\n'));
    /* forced fp4 mma on a weight-only checkpoint, even on sm_121 */
    layout(sch, QUANT_KIND_NVFP4, false, false);
    CHECK_EQ_INT(backend_plan_compute(sch, 121, "gb10", BACKEND_NVFP4_W4A4_MMA, BACKEND_AUTO, &p,
                                      err, sizeof(err)), ERR_UNSUPPORTED);
    CHECK(strstr(err, "W4A4") && strstr(err, "NVFP4 W4A16") &&
          strstr(err, "no activation quantization"));
    /* forced bf16 on NVFP4 dense layers */
    CHECK_EQ_INT(backend_plan_compute(sch, 90, "h200", BACKEND_AUTO, BACKEND_BF16, &p, err,
                                      sizeof(err)), ERR_UNSUPPORTED);
    CHECK(strstr(err, "--linear-backend bf16"));
    /* a forced quantized linear backend on an all-bf16 checkpoint applies to nothing */
    layout(sch, QUANT_KIND_NONE, false, false);
    CHECK_EQ_INT(backend_plan_compute(sch, 90, "h200", BACKEND_AUTO, BACKEND_FP8, &p, err,
                                      sizeof(err)), ERR_UNSUPPORTED);
    CHECK(strstr(err, "--linear-backend fp8"));
    /* FP8 weights: tensor cores from sm_89; none on sm_80 */
    layout(sch, QUANT_KIND_FP8, false, false);
    CHECK_EQ_INT(backend_plan_compute(sch, 89, "l40s", BACKEND_AUTO, BACKEND_AUTO, &p, err,
                                      sizeof(err)), 0);
    CHECK_EQ_INT(p.cls[BACKEND_CLASS_MOE].id, BACKEND_FP8);
    CHECK_EQ_INT(backend_plan_compute(sch, 80, "a100", BACKEND_AUTO, BACKEND_AUTO, &p, err,
                                      sizeof(err)), ERR_UNSUPPORTED);
    CHECK(strstr(err, "sm_89"));
}

/* E*(1-(1-k/E)^n) against a simulation of n tokens each routed to k distinct uniform experts. */
static void test_mtp_math(void)
{
    CHECK_NEAR(compare_expected_experts(256, 8, 1), 8.0, 1e-9);
    CHECK_NEAR(compare_expected_tokens(0.5, 2), 1.75, 1e-12);
    CHECK_NEAR(compare_expected_tokens(0.8, 0), 1.0, 1e-12);
    uint64_t s = 88172645463325252ULL;
    const int E = 256, k = 8, trials = 4000;
    for (int n = 2; n <= 5; n++) {
        double sum = 0;
        for (int t = 0; t < trials; t++) {
            unsigned char used[256] = {0};
            int distinct = 0;
            for (int tok = 0; tok < n; tok++) {
                unsigned char mine[256] = {0};
                for (int j = 0; j < k;) {
                    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                    int e = (int)(s % (uint64_t)E);
                    if (mine[e])
                        continue;
                    mine[e] = 1;
                    j++;
                    if (!used[e]++)
                        distinct++;
                }
            }
            sum += distinct;
        }
        double sim = sum / trials, f = compare_expected_experts(E, k, n);
        CHECK_NEAR(sim, f, 0.01 * f);
    }
}

int main(void)
{
    test_table();
    test_table_doc();
    test_parsers();
    test_backend_rules();
    test_mtp_math();
    return test_result();
}
