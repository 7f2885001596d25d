/* wk_cfg: --load-format and the forced --moe-backend / --linear-backend flags are validated at
 * startup with one-line errors; the dummy format loads a model from config.json alone. */
#include "test.h"

#include "common/err.h"
#include "model/backend.h"
#include "model/model_load.h"
#include "wk_cfg.h"
#include "wk_engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse(struct wk_cfg *c, const char *const *args, int n, char *err, size_t len)
{
    char *argv[32];
    argv[0] = (char *)"tern-worker";
    for (int i = 0; i < n; i++)
        argv[i + 1] = (char *)args[i];
    int rc = wk_cfg_parse(c, n + 1, argv); /* validates too (prints the line) */
    int rv = wk_cfg_validate(c, err, len); /* the same line, into err */
    CHECK_EQ_INT(rc, rv);
    return rv;
}

int main(void)
{
    char dir[] = "/tmp/tern-wkcfg-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/config.json", dir);
    /* a config alone: the dummy format needs no safetensors */
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs("{\"model_type\":\"qwen3_5_moe_text\",\"vocab_size\":256,\"hidden_size\":64,"
          "\"num_hidden_layers\":2,\"layer_types\":[\"linear_attention\",\"full_attention\"],"
          "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":16,"
          "\"linear_num_key_heads\":2,\"linear_num_value_heads\":4,\"linear_key_head_dim\":16,"
          "\"linear_value_head_dim\":16,\"linear_conv_kernel_dim\":4,\"num_experts\":4,"
          "\"num_experts_per_tok\":2,\"moe_intermediate_size\":32,"
          "\"shared_expert_intermediate_size\":32,\"rms_norm_eps\":1e-6,"
          "\"max_position_embeddings\":512,"
          "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000.0,"
          "\"partial_rotary_factor\":0.25}}",
          f);
    fclose(f);
    struct wk_cfg c;
    char err[512];

    const char *ok[] = {"--engine", "cpu", "--model", dir, "--load-format", "dummy"};
    CHECK_EQ_INT(parse(&c, ok, 6, err, sizeof err), 0);
    CHECK_STREQ(c.load_format, "dummy");
    struct model *m = NULL;
    struct model_load_opts lo = {.dummy = true};
    CHECK_EQ_INT(model_load(&m, c.model, &lo, err, sizeof err), 0);
    CHECK(m && m->cfg.n_layers == 2 && m->layers[0].gdn.qkv.data != NULL);
    model_destroy(m);

    const char *bad_fmt[] = {"--engine", "cpu", "--model", dir, "--load-format", "gguf"};
    CHECK_EQ_INT(parse(&c, bad_fmt, 6, err, sizeof err), ERR_INVAL);
    CHECK(strstr(err, "load-format \"gguf\"") != NULL);

    const char *cpu_forced[] = {"--engine", "cpu", "--model", dir, "--moe-backend", "nvfp4_w4a16"};
    CHECK_EQ_INT(parse(&c, cpu_forced, 6, err, sizeof err), ERR_INVAL);
    CHECK(strstr(err, "needs --engine cuda") != NULL);

    const char *unknown[] = {"--engine", "cuda", "--model", dir, "--linear-backend", "marlin"};
    const char *cuda_forced[] = {"--engine",      "cuda",       "--model", dir,
                                 "--moe-backend", "nvfp4-w4a16"};
    if (!wk_engine_cuda_is_built()) { /* refused up front, with the reason */
        CHECK_EQ_INT(parse(&c, cuda_forced, 6, err, sizeof err), ERR_INVAL);
        CHECK(strstr(err, "engine cuda is not in this build") != NULL);
    } else {
        CHECK_EQ_INT(parse(&c, unknown, 6, err, sizeof err), ERR_INVAL);
        CHECK(strstr(err, "linear-backend \"marlin\"") != NULL);
        CHECK_EQ_INT(parse(&c, cuda_forced, 6, err, sizeof err), 0);
        CHECK_EQ_INT(wk_cfg_backend(c.moe_backend), BACKEND_NVFP4_W4A16);
        CHECK_EQ_INT(wk_cfg_backend(c.linear_backend), BACKEND_AUTO);
    }

    remove(path);
    rmdir(dir);
    return test_result();
}
