/* gw_gencfg: generation_config.json parsing and the auto / vllm / folder modes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "gw_gencfg.h"
#include "test.h"

static int parse(struct gw_req_defaults *d, const char *json)
{
    char err[256] = "";
    return gw_gencfg_parse(d, json, strlen(json), err, sizeof(err));
}

int main(void)
{
    struct gw_req_defaults d;
    /* the family's file: eos ids and do_sample are not sampling defaults */
    CHECK_EQ_INT(parse(&d, "{\"bos_token_id\":1,\"eos_token_id\":[2,3],\"do_sample\":true,"
                           "\"temperature\":0.7,\"top_p\":0.8,\"top_k\":20,"
                           "\"repetition_penalty\":1.05,\"transformers_version\":\"5\"}"),
                 0);
    CHECK(d.has_temperature && d.has_top_p && d.has_top_k && d.has_repetition_penalty);
    CHECK(!d.has_min_p && !d.has_max_tokens);
    CHECK_NEAR(d.temperature, 0.7, 1e-12);
    CHECK_NEAR(d.top_p, 0.8, 1e-12);
    CHECK_EQ_INT(d.top_k, 20);
    CHECK_NEAR(d.repetition_penalty, 1.05, 1e-12);
    CHECK_EQ_INT(parse(&d, "{\"top_k\":-1,\"min_p\":0.1,\"max_new_tokens\":64}"), 0);
    CHECK(d.has_top_k && d.top_k == 0 && d.has_min_p && d.has_max_tokens && d.max_tokens == 64);
    CHECK_EQ_INT(parse(&d, "{}"), 0);
    CHECK(!d.has_temperature && !d.has_top_k);
    CHECK_EQ_INT(parse(&d, "[]"), ERR_INVAL);
    CHECK_EQ_INT(parse(&d, "{\"temperature\":\"hot\"}"), ERR_INVAL);
    CHECK_EQ_INT(parse(&d, "{\"top_p\":0}"), ERR_INVAL);
    CHECK_EQ_INT(parse(&d, "{\"temperature\":3}"), ERR_INVAL);

    /* modes */
    char dir[] = "/tmp/tern-gencfg-XXXXXX", path[128], src[256], err[256];
    CHECK(mkdtemp(dir) != NULL);
    bool found = true;
    CHECK_EQ_INT(gw_gencfg_load(&d, "auto", dir, &found, src, sizeof(src), err, sizeof(err)), 0);
    CHECK(!found);
    CHECK_STREQ(src, "none");
    CHECK(gw_gencfg_load(&d, dir, "/nonexistent", &found, src, sizeof(src), err, sizeof(err)) < 0);
    snprintf(path, sizeof(path), "%s/generation_config.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("{\"temperature\":0.6}", f);
        fclose(f);
    }
    CHECK_EQ_INT(gw_gencfg_load(&d, "auto", dir, &found, src, sizeof(src), err, sizeof(err)), 0);
    CHECK(found && d.has_temperature);
    CHECK_STREQ(src, path);
    CHECK_EQ_INT(
        gw_gencfg_load(&d, dir, "/nonexistent", &found, src, sizeof(src), err, sizeof(err)), 0);
    CHECK(found && d.has_temperature);
    CHECK_EQ_INT(gw_gencfg_load(&d, "vllm", dir, &found, src, sizeof(src), err, sizeof(err)), 0);
    CHECK(!found && !d.has_temperature);
    CHECK_STREQ(src, "off");
    gw_gencfg_log(&d, src);
    unlink(path);
    rmdir(dir);
    return test_result();
}
