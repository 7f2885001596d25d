/* Unit: loader inputs found by fuzz_config and fuzz_safetensors (docs/RELIABILITY.md).
 *  1. config.json integer fields holding a number outside int64 (1e300, 1e999 = inf): the
 *     double -> int64 cast was undefined; now ERR_FORMAT naming the field.
 *  2. float fields that are not finite (partial_rotary_factor 1e999 = inf) or whose product
 *     with head_dim leaves int: inf * head_dim was cast to int (undefined); now ERR_FORMAT for
 *     the field, or a rotary dim of -1 that config_validate rejects.
 *  3. a safetensors shape whose element count times 64 bits overflows int64 (F64 [2^40, 2^18]):
 *     the byte size wrapped to 0, so data_offsets [0, 0] was accepted for 2^58 elements. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "model/config_load.h"
#include "model/safetensors.h"
#include "test.h"

static void test_config_huge_ints(void)
{
    static const char *const cases[] = {
        "{\"hidden_size\": 1e300}",
        "{\"hidden_size\": -1e300}",
        "{\"num_hidden_layers\": 1e999}",
        "{\"text_config\": {\"vocab_size\": 9223372036854775808}}",
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct model_config *c = calloc(1, sizeof(*c));
        char err[256] = "";
        int rc = config_parse(c, cases[i], err, sizeof(err));
        CHECK_EQ_INT(rc, ERR_FORMAT);
        CHECK(strstr(err, "must be an integer") != NULL);
        free(c);
    }
    /* the largest exact integers still parse (and are then range-checked elsewhere) */
    struct model_config *c = calloc(1, sizeof(*c));
    char err[256] = "";
    CHECK_EQ_INT(config_parse(c, "{\"hidden_size\": 64, \"vocab_size\": 1e3}", err, sizeof(err)),
                 0);
    CHECK_EQ_INT(c->hidden_size, 64);
    free(c);
}

static void test_config_inf_floats(void)
{
    struct model_config *c = calloc(1, sizeof(*c));
    char err[256] = "";
    CHECK_EQ_INT(config_parse(c, "{\"partial_rotary_factor\": 1.1e30025}", err, sizeof(err)),
                 ERR_FORMAT);
    CHECK(strstr(err, "partial_rotary_factor must be a finite number") != NULL);
    CHECK_EQ_INT(config_parse(c, "{\"rope_parameters\": {\"rope_theta\": -1e39}}", err,
                              sizeof(err)),
                 ERR_FORMAT);
    /* finite factor, product beyond int: parses, then validate refuses it */
    err[0] = '\0';
    CHECK_EQ_INT(config_parse(c, "{\"head_dim\": 2000000000, \"partial_rotary_factor\": 1e30}",
                              err, sizeof(err)),
                 0);
    CHECK_EQ_INT(c->rotary_dim, -1);
    CHECK(config_validate(c, err, sizeof(err)) != 0);
    free(c);
}

/* Write an 8-byte length + header + data file; returns its path (static buffer). */
static const char *write_st(const char *hdr, size_t data_len)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/tern_fuzzfix_XXXXXX");
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    uint64_t n = strlen(hdr);
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)(n >> (8 * i));
    CHECK(write(fd, len, 8) == 8);
    CHECK(write(fd, hdr, n) == (ssize_t)n);
    for (size_t i = 0; i < data_len; i++)
        CHECK(write(fd, "", 1) == 1);
    close(fd);
    return path;
}

static void test_st_nelem_overflow(void)
{
    const char *p = write_st("{\"w\":{\"dtype\":\"F64\",\"shape\":[1099511627776,262144],"
                             "\"data_offsets\":[0,0]}}",
                             0);
    char err[256] = "";
    struct st_set *s = st_open(p, 0, err, sizeof(err));
    CHECK(s == NULL);
    CHECK(strstr(err, "shape too large") != NULL);
    st_close(s);
    unlink(p);
    /* a big but representable shape still gets the ordinary size check */
    p = write_st("{\"w\":{\"dtype\":\"BF16\",\"shape\":[1024,1024],\"data_offsets\":[0,8]}}", 8);
    err[0] = '\0';
    s = st_open(p, 0, err, sizeof(err));
    CHECK(s == NULL);
    CHECK(strstr(err, "data_offsets span") != NULL);
    unlink(p);
    p = write_st("{\"w\":{\"dtype\":\"F64\",\"shape\":[2,3],\"data_offsets\":[0,48]}}", 48);
    s = st_open(p, 0, err, sizeof(err));
    CHECK(s != NULL);
    if (s)
        CHECK_EQ_INT((int)st_find(s, "w")->nelem, 6);
    st_close(s);
    unlink(p);
}

int main(void)
{
    test_config_huge_ints();
    test_config_inf_floats();
    test_st_nelem_overflow();
    return test_result();
}
