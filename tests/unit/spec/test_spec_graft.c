/* spec_configure's one line for the three cases (head present, declared but missing, not
 * declared), and graft_mtp: the head of a tiny checkpoint grafted onto the same seed's --no-mtp
 * checkpoint (into a new directory, in place on a single file, into a sharded one) restores
 * speculation with the same drafts and the same greedy output; incompatible targets, sources
 * without a head and targets that already have one are refused with nothing written. */
#include "common/err.h"
#include "model/graft.h"
#include "model/model_load.h"
#include "model/safetensors.h"
#include "model/spec.h"
#include "model/tiny.h"
#include "spec_util.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { NP = 8, NG = 100 };

static char root[1024];

static const char *path(char *buf, const char *name)
{
    snprintf(buf, 1200, "%s/%s", root, name);
    return buf;
}

static int write_tiny_inter(const char *dir, uint64_t seed, int mtp, int hidden, int64_t shard,
                            int inter)
{
    struct tiny_opts o;
    tiny_opts_default(&o);
    o.seed = seed;
    o.mtp = mtp != 0;
    snprintf(o.layers, sizeof(o.layers), "LFLLF");
    if (hidden)
        o.hidden = hidden;
    if (inter)
        o.moe_inter = inter;
    o.shard_bytes = shard;
    return tiny_write(&o, dir);
}

static int write_tiny(const char *dir, uint64_t seed, int mtp, int hidden, int64_t shard)
{
    return write_tiny_inter(dir, seed, mtp, hidden, shard, 0);
}

static int file_equal(const char *x, const char *y)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "cmp -s '%s' '%s'", x, y);
    return system(cmd) == 0;
}

static int exists(const char *dir, const char *file)
{
    char p[1400];
    snprintf(p, sizeof(p), "%s/%s", dir, file);
    return access(p, F_OK) == 0;
}

static void configure_cases(const struct model *with, const struct model *without)
{
    char msg[512];
    int k = -1;
    // head present
    CHECK_EQ_INT(spec_configure(with, -1, &k, msg, sizeof(msg)), 0);
    fprintf(stderr, "with head, default: k=%d \"%s\"\n", k, msg);
    CHECK_EQ_INT(k, SPEC_DEFAULT_K);
    CHECK(strstr(msg, "K=3") != NULL && strstr(msg, "bytes resident") != NULL);
    const struct model_load_stats *s = model_load_stats(with);
    const int H = with->cfg.hidden_size, D = with->cfg.head_dim;
    // bf16 on disk; the loader keeps matrices as they are and the 7 norm vectors as fp32
    const int64_t want = s->mtp_bytes + 2 * (5 * (int64_t)H + 2 * (int64_t)D);
    fprintf(stderr, "head bytes %lld, disk %lld, expected resident %lld\n",
            (long long)spec_head_bytes(with), (long long)s->mtp_bytes, (long long)want);
    CHECK_EQ_INT(spec_head_bytes(with), want);
    char num[64];
    snprintf(num, sizeof(num), "(%lld bytes resident)", (long long)want);
    CHECK(strstr(msg, num) != NULL);
    CHECK_EQ_INT(spec_configure(with, 2, &k, msg, sizeof(msg)), 0);
    CHECK_EQ_INT(k, 2);
    CHECK_EQ_INT(spec_configure(with, 0, &k, msg, sizeof(msg)), 0);
    CHECK_EQ_INT(k, 0);
    CHECK(strstr(msg, "off") != NULL);
    CHECK_EQ_INT(spec_configure(with, FORWARD_SPEC_MAX + 1, &k, msg, sizeof(msg)), ERR_INVAL);

    // declared, no tensors
    CHECK_EQ_INT(without->cfg.mtp_n_layers, 1);
    CHECK(!without->has_mtp);
    CHECK_EQ_INT(spec_configure(without, -1, &k, msg, sizeof(msg)), 0);
    fprintf(stderr, "declared, missing, default: k=%d \"%s\"\n", k, msg);
    CHECK_EQ_INT(k, 0);
    CHECK(strstr(msg, "config declares 1 MTP layer") != NULL);
    CHECK(strstr(msg, "no mtp.* tensors") != NULL);
    CHECK(strstr(msg, "speculative decoding is off") != NULL);
    int rc = spec_configure(without, 3, &k, msg, sizeof(msg));
    fprintf(stderr, "declared, missing, K=3: rc=%d \"%s\"\n", rc, msg);
    CHECK(rc < 0);
    CHECK_EQ_INT(k, 0);
    CHECK(strstr(msg, "no mtp.* tensors") != NULL);

    // not declared
    struct model z = *without;
    z.cfg.mtp_n_layers = 0;
    CHECK_EQ_INT(spec_configure(&z, -1, &k, msg, sizeof(msg)), 0);
    fprintf(stderr, "not declared, default: k=%d \"%s\"\n", k, msg);
    CHECK_EQ_INT(k, 0);
    CHECK(strstr(msg, "off") != NULL);
    rc = spec_configure(&z, 2, &k, msg, sizeof(msg));
    fprintf(stderr, "not declared, K=2: rc=%d \"%s\"\n", rc, msg);
    CHECK(rc < 0);
    CHECK(strstr(msg, "declares no MTP") != NULL);
}

/* greedy speculative output of the model in dir with K=3 and its stats */
static void spec_greedy(const char *dir, const int32_t *prompt, int32_t *gen, struct spec_stats *s)
{
    struct model *m = su_load(dir);
    CHECK(m != NULL && m->has_mtp);
    if (!m || !m->has_mtp) {
        model_destroy(m);
        return;
    }
    struct spec_dec_opts o;
    spec_dec_opts_default(&o);
    o.sp.temperature = 0.0f;
    o.prefill_chunk = NP;
    CHECK_EQ_INT(su_spec(m, NULL, prompt, NP, &o, 1, NG, gen, s), 0);
    model_destroy(m);
}

int main(void)
{
    if (su_tmpdir(root, sizeof(root)) < 0)
        TEST_SKIP("no temp dir");
    char a[1200], b[1200], c[1200], b2[1200], sh[1200], shout[1200], wide[1200], bad[1200];
    char err[1024], cmd[16384];
    CHECK_EQ_INT(write_tiny(path(a, "a"), 31, 1, 0, 0), 0);
    CHECK_EQ_INT(write_tiny(path(b, "b"), 31, 0, 0, 0), 0);
    CHECK_EQ_INT(write_tiny(path(b2, "b2"), 31, 0, 0, 0), 0);
    CHECK_EQ_INT(write_tiny(path(sh, "sharded"), 31, 0, 0, 40000), 0);
    CHECK_EQ_INT(write_tiny(path(wide, "wide"), 31, 0, 128, 0), 0);
    path(c, "c");
    path(shout, "sharded-out");
    path(bad, "bad-out");

    struct model *ma = su_load(a), *mb = su_load(b);
    CHECK(ma && mb);
    if (!ma || !mb)
        return test_result();
    configure_cases(ma, mb);

    // reference: plain greedy on A and speculative greedy on A
    int32_t prompt[NP], ref[NG], gen[NG], ga[NG];
    for (int i = 0; i < NP; i++)
        prompt[i] = (int32_t)((i * 53 + 7) % ma->cfg.vocab_size);
    struct sample_params sp;
    sample_params_default(&sp);
    sp.temperature = 0.0f;
    CHECK_EQ_INT(su_plain(ma, NULL, prompt, NP, NP, &sp, 1, NG, ref), 0);
    struct spec_stats sa, sc;
    spec_greedy(a, prompt, ga, &sa);
    CHECK(memcmp(ga, ref, sizeof(ref)) == 0);
    model_destroy(ma);
    model_destroy(mb);

    // into a new directory
    struct graft_result r;
    int rc = graft_mtp(a, b, c, &r, err, sizeof(err));
    fprintf(stderr, "graft a -> b (out c): rc=%d %s tensors=%d bytes=%lld\n", rc, rc < 0 ? err : "",
            r.n_tensors, (long long)r.bytes);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(r.n_tensors, 19);
    CHECK(exists(c, GRAFT_SHARD) && exists(c, "model.safetensors.index.json"));
    CHECK(!exists(b, GRAFT_SHARD) && !exists(b, "model.safetensors.index.json"));
    struct stat lst;
    char p[1400];
    snprintf(p, sizeof(p), "%s/model.safetensors", c);
    CHECK(lstat(p, &lst) == 0 && S_ISLNK(lst.st_mode));
    memset(gen, 0xff, sizeof(gen));
    spec_greedy(c, prompt, gen, &sc);
    CHECK(memcmp(gen, ref, sizeof(ref)) == 0);
    CHECK_EQ_INT(sc.accepted, sa.accepted); // the grafted head drafts what A's head drafts
    CHECK_EQ_INT(sc.rounds, sa.rounds);
    // the new index covers the model's tensors and the head
    struct st_set *sa_set = st_open(a, ST_OPEN_HEADER_ONLY, err, sizeof(err));
    struct st_set *sc_set = st_open(c, ST_OPEN_HEADER_ONLY, err, sizeof(err));
    CHECK(sa_set && sc_set);
    if (sa_set && sc_set) {
        CHECK_EQ_INT(st_count(sc_set), st_count(sa_set));
        CHECK_EQ_INT(st_n_files(sc_set), 2);
        const struct st_tensor *t = st_find(sc_set, "mtp.fc.weight");
        const struct st_tensor *u = st_find(sa_set, "mtp.fc.weight");
        CHECK(t && u && t->dtype == u->dtype && t->nbytes == u->nbytes);
        CHECK(t && strcmp(t->file, GRAFT_SHARD) == 0);
    }
    st_close(sa_set);
    st_close(sc_set);

    // in place on a single model.safetensors
    rc = graft_mtp(a, b2, NULL, &r, err, sizeof(err));
    CHECK_EQ_INT(rc, 0);
    CHECK(exists(b2, GRAFT_SHARD) && exists(b2, "model.safetensors.index.json"));
    memset(gen, 0xff, sizeof(gen));
    spec_greedy(b2, prompt, gen, NULL);
    CHECK(memcmp(gen, ref, sizeof(ref)) == 0);
    // a second graft is refused
    rc = graft_mtp(a, b2, NULL, &r, err, sizeof(err));
    fprintf(stderr, "graft again: rc=%d %s\n", rc, err);
    CHECK_EQ_INT(rc, ERR_STATE);

    // into a sharded checkpoint with an index
    rc = graft_mtp(a, sh, shout, &r, err, sizeof(err));
    CHECK_EQ_INT(rc, 0);
    memset(gen, 0xff, sizeof(gen));
    spec_greedy(shout, prompt, gen, NULL);
    CHECK(memcmp(gen, ref, sizeof(ref)) == 0);

    // refusals: incompatible target, source without a head
    rc = graft_mtp(a, wide, bad, &r, err, sizeof(err));
    fprintf(stderr, "graft into hidden 128: rc=%d %s\n", rc, err);
    CHECK_EQ_INT(rc, ERR_UNSUPPORTED);
    CHECK(strstr(err, "hidden_size") && strstr(err, "64") && strstr(err, "128"));
    CHECK(access(bad, F_OK) != 0); // nothing written
    rc = graft_mtp(b, wide, bad, &r, err, sizeof(err));
    CHECK(rc < 0);
    path(bad, "bad-out2");
    rc = graft_mtp(b, b, bad, &r, err, sizeof(err));
    fprintf(stderr, "graft from a source without a head: rc=%d %s\n", rc, err);
    CHECK_EQ_INT(rc, ERR_NOTFOUND);
    CHECK(access(bad, F_OK) != 0);

    // a source whose config lies about its head (expert size 16 on disk, 32 in config.json):
    // the in-place graft is staged, fails the load check and leaves the target as it was
    char liar[1200], b3[1200], cfg_a[1300], cfg_l[1300], cfg_b3[1300], saved[1300];
    CHECK_EQ_INT(write_tiny_inter(path(liar, "liar"), 31, 1, 0, 0, 16), 0);
    CHECK_EQ_INT(write_tiny(path(b3, "b3"), 31, 0, 0, 0), 0);
    snprintf(cfg_a, sizeof(cfg_a), "%s/config.json", a);
    snprintf(cfg_l, sizeof(cfg_l), "%s/config.json", liar);
    snprintf(cfg_b3, sizeof(cfg_b3), "%s/config.json", b3);
    snprintf(saved, sizeof(saved), "%s/config.saved", root);
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && cp '%s' '%s'", cfg_a, cfg_l, cfg_b3, saved);
    CHECK_EQ_INT(system(cmd), 0);
    rc = graft_mtp(liar, b3, NULL, &r, err, sizeof(err));
    fprintf(stderr, "in-place graft of a bad head: rc=%d %s\n", rc, err);
    CHECK(rc < 0);
    CHECK(!exists(b3, GRAFT_SHARD) && !exists(b3, "model.safetensors.index.json"));
    CHECK(!exists(b3, ".graft-mtp.stage"));
    CHECK(file_equal(cfg_b3, saved));

    // the command line, when built
    const char *bld = getenv("TERN_BUILD_DIR");
    char tern[1100];
    snprintf(tern, sizeof(tern), "%s/bin/tern", bld ? bld : "build");
    if (access(tern, X_OK) == 0) {
        char d[1200];
        path(d, "cli-out");
        snprintf(cmd, sizeof(cmd), "%s graft-mtp --from %s --into %s --out %s", tern, a, b, d);
        CHECK_EQ_INT(system(cmd), 0);
        snprintf(cmd, sizeof(cmd), "%s graft-mtp --from %s --into %s --out %s/x 2>/dev/null", tern,
                 a, wide, root);
        CHECK(system(cmd) != 0);
        snprintf(cmd, sizeof(cmd),
                 "%s generate --model %s --ids 1,2,3 --max-tokens 12 --ignore-eos > %s/p.out "
                 "2>/dev/null && %s generate --model %s --ids 1,2,3 --max-tokens 12 "
                 "--ignore-eos --speculative-tokens 3 > %s/s.out 2>/dev/null && "
                 "cmp %s/p.out %s/s.out",
                 tern, b, root, tern, d, root, root, root);
        CHECK_EQ_INT(system(cmd), 0);
    }
    su_rmdir(root);
    return test_result();
}
