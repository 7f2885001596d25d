/* safetensors: hand-written files load; every malformed variant is rejected with one line that
 * names the file and the tensor; sharded sets via the index; header-only mode with absent and
 * truncated shards. */
#include "model/safetensors.h"
#include "st_fixture.h"
#include "test.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static void path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

/* Open path and expect failure whose message contains every given substring. */
static void expect_fail(const char *p, int flags, const char *sub1, const char *sub2)
{
    char err[512] = "";
    struct st_set *s = st_open(p, flags, err, sizeof(err));
    CHECK(s == NULL);
    st_close(s);
    if (!strstr(err, sub1) || (sub2 && !strstr(err, sub2))) {
        fprintf(stderr, "error '%s' lacks '%s' / '%s'\n", err, sub1, sub2 ? sub2 : "");
        CHECK(0);
    }
    CHECK(strchr(err, '\n') == NULL);
}

static void test_valid(void)
{
    char p[512];
    path(p, sizeof(p), "ok.safetensors");
    struct stf *f = stf_create();
    float a[6] = {1, 2, 3, 4, 5, 6};
    uint16_t b[4] = {0x3f80, 0x4000, 0x4040, 0x4080};
    uint8_t c[3] = {7, 8, 9};
    int64_t sa[2] = {2, 3}, sb[1] = {4}, sc[1] = {3};
    stf_add(f, "w.a", "F32", 2, sa, a, sizeof(a));
    stf_add(f, "w.b", "BF16", 1, sb, b, sizeof(b));
    stf_add(f, "w.c", "F8_E4M3", 1, sc, c, sizeof(c));
    stf_add(f, "scalar", "F32", 0, NULL, a, 4);
    CHECK(stf_write(f, p) == 0);
    stf_free(f);
    char err[512] = "";
    struct st_set *s = st_open(p, 0, err, sizeof(err));
    CHECK(s != NULL);
    if (!s) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    CHECK_EQ_INT(st_count(s), 4);
    const struct st_tensor *t = st_find(s, "w.a");
    CHECK(t && t->dtype == ST_F32 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3);
    CHECK(t && t->nbytes == 24 && memcmp(t->data, a, 24) == 0);
    t = st_find(s, "w.b");
    CHECK(t && t->dtype == ST_BF16 && memcmp(t->data, b, 8) == 0);
    t = st_find(s, "w.c");
    CHECK(t && t->dtype == ST_F8_E4M3 && ((const uint8_t *)t->data)[2] == 9);
    t = st_find(s, "scalar");
    CHECK(t && t->ndim == 0 && t->nelem == 1 && t->nbytes == 4);
    CHECK(st_find(s, "nope") == NULL);
    CHECK_STREQ(st_at(s, 0)->name, "scalar"); /* name order */
    CHECK_STREQ(st_at(s, 3)->name, "w.c");
    CHECK(st_has_data(s));
    char sh[64];
    CHECK_STREQ(st_shape_str(st_find(s, "w.a"), sh, sizeof(sh)), "[2, 3]");
    st_close(s);
    /* a directory holding only model.safetensors */
    char d2[512];
    path(d2, sizeof(d2), "single");
    mkdir(d2, 0700);
    char p2[600];
    snprintf(p2, sizeof(p2), "%s/model.safetensors", d2);
    CHECK(rename(p, p2) == 0);
    s = st_open(d2, 0, err, sizeof(err));
    CHECK(s && st_count(s) == 4 && strcmp(st_find(s, "w.a")->file, "model.safetensors") == 0);
    st_close(s);
    unlink(p2);
    rmdir(d2);
}

static void test_malformed(void)
{
    char p[512];
    uint8_t data[64] = {0};
    path(p, sizeof(p), "bad.safetensors");

    /* truncated: shorter than the 8-byte length */
    FILE *fp = fopen(p, "wb");
    fwrite("abc", 1, 3, fp);
    fclose(fp);
    expect_fail(p, 0, "bad.safetensors", "too short");

    /* header length beyond the file */
    const char *h = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    stf_write_raw(p, 4096, h, data, 8);
    expect_fail(p, 0, "bad.safetensors", "header length 4096 beyond the file");

    /* absurd header length */
    stf_write_raw(p, 1ull << 40, h, data, 8);
    expect_fail(p, 0, "bad.safetensors", "header length");

    /* bad JSON */
    const char *bad = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
    stf_write_raw(p, strlen(bad), bad, data, 8);
    expect_fail(p, 0, "bad.safetensors", "not a valid JSON");

    /* shape x dtype != byte span */
    h = "{\"model.layers.3.mlp.gate.weight\":{\"dtype\":\"BF16\",\"shape\":[2,3],"
        "\"data_offsets\":[0,8]}}";
    stf_write_raw(p, strlen(h), h, data, 8);
    expect_fail(p, 0, "tensor 'model.layers.3.mlp.gate.weight'",
                "= 12 bytes but data_offsets span 8");

    /* unknown dtype */
    h = "{\"w\":{\"dtype\":\"Q8_K\",\"shape\":[2],\"data_offsets\":[0,2]}}";
    stf_write_raw(p, strlen(h), h, data, 2);
    expect_fail(p, 0, "tensor 'w'", "unknown dtype 'Q8_K'");

    /* data outside the file */
    h = "{\"model.layers.3.mlp.gate.weight\":{\"dtype\":\"U8\",\"shape\":[512],"
        "\"data_offsets\":[100,612]}}";
    stf_write_raw(p, strlen(h), h, data, 64);
    expect_fail(p, 0, "bad.safetensors: tensor 'model.layers.3.mlp.gate.weight'",
                "data [100, 612) outside the file");

    /* overlapping tensors (not adjacent in offset order either) */
    h = "{\"a\":{\"dtype\":\"U8\",\"shape\":[32],\"data_offsets\":[0,32]},"
        "\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,8]},"
        "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[16,24]}}";
    stf_write_raw(p, strlen(h), h, data, 64);
    expect_fail(p, 0, "tensor 'b'", "overlaps tensor 'a'");

    /* negative / non-integer shape, begin > end */
    h = "{\"w\":{\"dtype\":\"U8\",\"shape\":[-2],\"data_offsets\":[0,2]}}";
    stf_write_raw(p, strlen(h), h, data, 2);
    expect_fail(p, 0, "tensor 'w'", "shape[0]");
    h = "{\"w\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,2]}}";
    stf_write_raw(p, strlen(h), h, data, 8);
    expect_fail(p, 0, "tensor 'w'", "data_offsets");

    /* header-only accepts a file truncated right after the header */
    h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[4,4],\"data_offsets\":[0,64]}}";
    stf_write_raw(p, strlen(h), h, NULL, 0);
    expect_fail(p, 0, "tensor 'w'", "outside the file");
    char err[256];
    struct st_set *s = st_open(p, ST_OPEN_HEADER_ONLY, err, sizeof(err));
    CHECK(s != NULL);
    const struct st_tensor *t = s ? st_find(s, "w") : NULL;
    CHECK(t && t->data == NULL && t->shape[0] == 4 && t->nbytes == 64);
    CHECK(s && !st_has_data(s));
    st_close(s);
    unlink(p);
}

static void write_shard(const char *name, const char *t1, const char *t2)
{
    char p[512];
    path(p, sizeof(p), name);
    struct stf *f = stf_create();
    int64_t sh[1] = {4};
    float v[4] = {1, 2, 3, 4};
    stf_add(f, t1, "F32", 1, sh, v, sizeof(v));
    if (t2)
        stf_add(f, t2, "F32", 1, sh, v, sizeof(v));
    stf_write(f, p);
    stf_free(f);
}

static void test_sharded(void)
{
    char sd[512];
    path(sd, sizeof(sd), "");
    write_shard("model-00001-of-00002.safetensors", "a", "b");
    write_shard("model-00002-of-00002.safetensors", "c", NULL);
    const char *idx = "{\"metadata\":{\"total_size\":48},\"weight_map\":{"
                      "\"a\":\"model-00001-of-00002.safetensors\","
                      "\"b\":\"model-00001-of-00002.safetensors\","
                      "\"c\":\"model-00002-of-00002.safetensors\"}}";
    stf_write_text(dir, "model.safetensors.index.json", idx);
    char err[512] = "";
    struct st_set *s = st_open(dir, 0, err, sizeof(err));
    CHECK(s != NULL);
    if (!s)
        fprintf(stderr, "%s\n", err);
    CHECK(s && st_count(s) == 3 && st_n_files(s) == 2);
    CHECK(s && strcmp(st_find(s, "c")->file, "model-00002-of-00002.safetensors") == 0);
    CHECK(s && ((const float *)st_find(s, "c")->data)[3] == 4.0f);
    st_close(s);

    /* index names a tensor that its shard lacks */
    const char *idx2 = "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                       "\"d\":\"model-00002-of-00002.safetensors\"}}";
    stf_write_text(dir, "model.safetensors.index.json", idx2);
    expect_fail(dir, 0, "model-00002-of-00002.safetensors: tensor 'd'", "not in that file");

    /* the same tensor in two shards */
    write_shard("model-00002-of-00002.safetensors", "c", "a");
    stf_write_text(dir, "model.safetensors.index.json", idx);
    expect_fail(dir, 0, "tensor 'a'", "also stored in");

    /* missing shard: an error for a full open, names only for header-only */
    char p[512];
    path(p, sizeof(p), "model-00002-of-00002.safetensors");
    unlink(p);
    expect_fail(dir, 0, "model-00002-of-00002.safetensors", "missing");
    s = st_open(dir, ST_OPEN_HEADER_ONLY, err, sizeof(err));
    CHECK(s != NULL);
    if (s) {
        CHECK_EQ_INT(st_count(s), 3);
        const struct st_tensor *t = st_find(s, "c");
        CHECK(t && t->ndim == -1 && t->dtype == ST_UNKNOWN && t->data == NULL);
        t = st_find(s, "a");
        CHECK(t && t->ndim == 1 && t->data == NULL);
    }
    st_close(s);

    /* index pointing outside the directory */
    stf_write_text(dir, "model.safetensors.index.json",
                   "{\"weight_map\":{\"a\":\"../etc/passwd\"}}");
    expect_fail(dir, 0, "tensor 'a'", "not a shard file name");
    stf_write_text(dir, "model.safetensors.index.json", "{\"weight_map\":[1,2]");
    expect_fail(dir, 0, "model.safetensors.index.json", "weight_map");
    path(p, sizeof(p), "model-00001-of-00002.safetensors");
    unlink(p);
    path(p, sizeof(p), "model.safetensors.index.json");
    unlink(p);
    expect_fail(dir, 0, "no model.safetensors.index.json", NULL);
    expect_fail("/nonexistent/dir", 0, "/nonexistent/dir", NULL);
}

/* Mutated headers and lengths must fail cleanly (or load consistently), never crash. */
static void test_mutations(void)
{
    char p[512];
    path(p, sizeof(p), "mut.safetensors");
    struct stf *f = stf_create();
    float a[12] = {0};
    int64_t sa[2] = {3, 4}, sb[1] = {4};
    stf_add(f, "x.weight", "F32", 2, sa, a, sizeof(a));
    stf_add(f, "y.bias", "BF16", 1, sb, a, 8);
    CHECK(stf_write(f, p) == 0);
    stf_free(f);
    FILE *fp = fopen(p, "rb");
    unsigned char buf[1024];
    size_t n = fread(buf, 1, sizeof(buf), fp);
    fclose(fp);
    const char *chars = "{}[]\",:0123456789-eE. azF";
    uint32_t seed = 99;
    int opened = 0;
    for (int it = 0; it < 600; it++) {
        unsigned char m[1024];
        memcpy(m, buf, n);
        size_t len = n;
        for (int k = 0; k < 1 + it % 3; k++) {
            seed = seed * 1664525u + 1013904223u;
            size_t pos = 8 + (seed >> 8) % (n - 8);
            m[pos] = (unsigned char)chars[(seed >> 20) % strlen(chars)];
        }
        if (it % 7 == 0)
            len = (seed >> 4) % n; /* truncate somewhere */
        if (it % 11 == 0)
            m[(seed >> 3) % 8] ^= (unsigned char)(1u << ((seed >> 12) % 8)); /* header length */
        fp = fopen(p, "wb");
        fwrite(m, 1, len, fp);
        fclose(fp);
        char err[512] = "";
        struct st_set *s = st_open(p, it % 2 ? ST_OPEN_HEADER_ONLY : 0, err, sizeof(err));
        if (s) {
            opened++;
            for (int64_t i = 0; i < st_count(s); i++) {
                const struct st_tensor *t = st_at(s, i);
                CHECK(t->nbytes == (t->nelem * st_dtype_bits(t->dtype) + 7) / 8);
                if (t->data) /* every byte of it lies inside the mapping */
                    CHECK(t->offset + t->nbytes <= (int64_t)len);
            }
        } else {
            CHECK(err[0] != 0 && strchr(err, '\n') == NULL);
        }
        st_close(s);
    }
    CHECK(opened > 0);
    unlink(p);
}

int main(void)
{
    if (stf_mkdtemp(dir, sizeof(dir)) < 0)
        TEST_SKIP("no temp dir");
    test_valid();
    test_malformed();
    test_sharded();
    test_mutations();
    stf_rmdir(dir);
    return test_result();
}
