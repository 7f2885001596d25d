/* graft: copy the MTP head of one checkpoint into another (see model/graft.h). */
#include "model/graft.h"

#include "common/err.h"
#include "common/errbuf.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "model/config_load.h"
#include "model/model_load.h"
#include "model/safetensors.h"
#include "model/st_write.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GRAFT_INDEX "model.safetensors.index.json"
#define GRAFT_STAGE ".graft-mtp.stage" // in-place grafts are built and checked here first

static int starts(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

/* "qwen3_5_moe_text" -> "qwen3_5_moe"; "Qwen3_5MoeForCausalLM" -> "Qwen3_5Moe" */
static void base_name(char *out, size_t len, const char *s)
{
    static const char *const suffixes[] = {"_text", "ForConditionalGeneration", "ForCausalLM"};
    snprintf(out, len, "%s", s);
    size_t n = strlen(out);
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        size_t k = strlen(suffixes[i]);
        if (n > k && strcmp(out + n - k, suffixes[i]) == 0) {
            out[n - k] = '\0';
            return;
        }
    }
}

int graft_check(const struct model_config *src, const struct model_config *dst, char *err,
                size_t errlen)
{
    char a[128], b[128];
    base_name(a, sizeof(a), src->model_type);
    base_name(b, sizeof(b), dst->model_type);
    if (strcmp(a, b) != 0) {
        errbuf_set(err, errlen, "incompatible model_type: source %s, target %s", src->model_type,
                   dst->model_type);
        return ERR_UNSUPPORTED;
    }
    base_name(a, sizeof(a), src->architecture);
    base_name(b, sizeof(b), dst->architecture);
    if (a[0] && b[0] && strcmp(a, b) != 0) {
        errbuf_set(err, errlen, "incompatible architecture: source %s, target %s",
                   src->architecture, dst->architecture);
        return ERR_UNSUPPORTED;
    }
    const struct {
        const char *name;
        int s, d;
    } f[] = {
        {"hidden_size", src->hidden_size, dst->hidden_size},
        {"vocab_size", src->vocab_size, dst->vocab_size},
        {"num_hidden_layers", src->n_layers, dst->n_layers},
        {"num_attention_heads", src->n_heads, dst->n_heads},
        {"num_key_value_heads", src->n_kv_heads, dst->n_kv_heads},
        {"head_dim", src->head_dim, dst->head_dim},
        {"num_experts", src->n_experts, dst->n_experts},
        {"num_experts_per_tok", src->n_experts_per_tok, dst->n_experts_per_tok},
        {"moe_intermediate_size", src->moe_inter, dst->moe_inter},
        {"shared_expert_intermediate_size", src->shared_inter, dst->shared_inter},
    };
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
        if (f[i].s != f[i].d) {
            errbuf_set(err, errlen, "incompatible %s: source %d, target %d", f[i].name, f[i].s,
                       f[i].d);
            return ERR_UNSUPPORTED;
        }
    return 0;
}

// ---- files ----

static int write_file(const char *path, const char *txt)
{
    char tmp[PATH_MAX * 2];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return -errno;
    const size_t n = strlen(txt);
    int rc = fwrite(txt, 1, n, f) == n ? 0 : ERR_IO;
    if (fclose(f) != 0 && rc == 0)
        rc = ERR_IO;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -errno;
    if (rc < 0)
        unlink(tmp);
    return rc;
}

static int write_json(const char *path, const cJSON *root)
{
    char *txt = cJSON_Print(root);
    if (!txt)
        return ERR_NOMEM;
    int rc = write_file(path, txt);
    cJSON_free(txt);
    return rc;
}

static cJSON *read_json(const char *path, char *err, size_t errlen)
{
    size_t len = 0;
    char *txt = file_read(path, &len);
    if (!txt) {
        errbuf_set(err, errlen, "cannot read %s", path);
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(txt, len);
    free(txt);
    if (!j || !cJSON_IsObject(j)) {
        errbuf_set(err, errlen, "%s: not a JSON object", path);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* out: create (or accept empty) and fill with symlinks to every entry of dst except the files
 * the graft rewrites. */
static int link_tree(const char *dst, const char *out, char *err, size_t errlen)
{
    char adst[PATH_MAX];
    if (!realpath(dst, adst)) {
        errbuf_set(err, errlen, "cannot resolve %s: %s", dst, strerror(errno));
        return -errno;
    }
    if (mkdir(out, 0755) != 0 && errno != EEXIST) {
        errbuf_set(err, errlen, "cannot create %s: %s", out, strerror(errno));
        return -errno;
    }
    DIR *od = opendir(out);
    if (!od) {
        errbuf_set(err, errlen, "cannot open %s: %s", out, strerror(errno));
        return -errno;
    }
    struct dirent *e;
    int busy = 0;
    while ((e = readdir(od)))
        busy |= strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(od);
    if (busy) {
        errbuf_set(err, errlen, "output directory %s is not empty", out);
        return ERR_STATE;
    }
    DIR *d = opendir(adst);
    if (!d) {
        errbuf_set(err, errlen, "cannot open %s: %s", adst, strerror(errno));
        return -errno;
    }
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            strcmp(e->d_name, "config.json") == 0 || strcmp(e->d_name, GRAFT_INDEX) == 0 ||
            strcmp(e->d_name, GRAFT_STAGE) == 0)
            continue;
        char from[PATH_MAX * 2], to[PATH_MAX * 2];
        snprintf(from, sizeof(from), "%s/%s", adst, e->d_name);
        snprintf(to, sizeof(to), "%s/%s", out, e->d_name);
        if (symlink(from, to) != 0) {
            rc = -errno;
            errbuf_set(err, errlen, "cannot link %s -> %s: %s", to, from, strerror(errno));
        }
    }
    closedir(d);
    return rc;
}

/* Remove the directory the graft made: its entries (files or symlinks, never followed), then
 * the directory. Best effort. */
static void remove_made(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char p[PATH_MAX * 2];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

/* Move the staged shard, index and config into dst. */
static int publish(const char *stage, const char *dst, char *err, size_t errlen)
{
    static const char *const files[] = {GRAFT_SHARD, GRAFT_INDEX, "config.json"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char from[PATH_MAX * 2], to[PATH_MAX * 2];
        snprintf(from, sizeof(from), "%s/%s", stage, files[i]);
        snprintf(to, sizeof(to), "%s/%s", dst, files[i]);
        if (rename(from, to) != 0) {
            errbuf_set(err, errlen, "cannot move %s to %s: %s", from, to, strerror(errno));
            return -errno;
        }
    }
    return 0;
}

/* The target's index: dst's index with the mtp entries added, or a new one for every tensor of
 * the dst set plus the mtp entries. */
static int write_index(const char *dst, const char *target, const struct st_set *dset,
                       const struct st_set *sset, char *err, size_t errlen)
{
    char path[PATH_MAX * 2];
    snprintf(path, sizeof(path), "%s/%s", dst, GRAFT_INDEX);
    cJSON *root = NULL;
    int64_t total = 0;
    if (access(path, F_OK) == 0) {
        if (!(root = read_json(path, err, errlen)))
            return ERR_FORMAT;
    } else {
        root = cJSON_CreateObject();
        cJSON *wm = cJSON_AddObjectToObject(root, "weight_map");
        for (int64_t i = 0; i < st_count(dset); i++) {
            const struct st_tensor *t = st_at(dset, i);
            cJSON_AddStringToObject(wm, t->name, t->file);
        }
    }
    cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(wm)) {
        errbuf_set(err, errlen, "%s: no weight_map object", path);
        cJSON_Delete(root);
        return ERR_FORMAT;
    }
    for (int64_t i = 0; i < st_count(dset); i++)
        total += st_at(dset, i)->nbytes > 0 ? st_at(dset, i)->nbytes : 0;
    for (int64_t i = 0; i < st_count(sset); i++) {
        const struct st_tensor *t = st_at(sset, i);
        if (!starts(t->name, "mtp."))
            continue;
        cJSON_AddStringToObject(wm, t->name, GRAFT_SHARD);
        total += t->nbytes;
    }
    cJSON *md = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    if (!cJSON_IsObject(md)) {
        cJSON_DeleteItemFromObjectCaseSensitive(root, "metadata");
        md = cJSON_AddObjectToObject(root, "metadata");
    }
    cJSON_DeleteItemFromObjectCaseSensitive(md, "total_size");
    cJSON_AddNumberToObject(md, "total_size", (double)total);
    snprintf(path, sizeof(path), "%s/%s", target, GRAFT_INDEX);
    int rc = write_json(path, root);
    cJSON_Delete(root);
    if (rc < 0)
        errbuf_set(err, errlen, "cannot write %s: %s", path, err_str(rc));
    return rc;
}

static int write_config(const char *dst, const char *target, int layers, char *err, size_t errlen)
{
    char path[PATH_MAX * 2];
    snprintf(path, sizeof(path), "%s/config.json", dst);
    cJSON *root = read_json(path, err, errlen);
    if (!root)
        return ERR_FORMAT;
    cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    cJSON *obj = cJSON_IsObject(tc) ? tc : root;
    cJSON_DeleteItemFromObjectCaseSensitive(obj, "mtp_num_hidden_layers");
    cJSON_AddNumberToObject(obj, "mtp_num_hidden_layers", layers);
    snprintf(path, sizeof(path), "%s/config.json", target);
    int rc = write_json(path, root);
    cJSON_Delete(root);
    if (rc < 0)
        errbuf_set(err, errlen, "cannot write %s: %s", path, err_str(rc));
    return rc;
}

/* The mtp.* tensors of sset as target/model-mtp.safetensors (through a temp dir). */
static int write_shard(const struct st_set *sset, const char *target, struct graft_result *r,
                       char *err, size_t errlen)
{
    struct st_write *w = st_write_create();
    int rc = 0;
    for (int64_t i = 0; rc == 0 && i < st_count(sset); i++) {
        const struct st_tensor *t = st_at(sset, i);
        if (!starts(t->name, "mtp."))
            continue;
        rc = st_write_add(w, t->name, st_dtype_name(t->dtype), t->ndim, t->shape, t->data,
                          (size_t)t->nbytes);
        if (rc < 0)
            errbuf_set(err, errlen, "cannot copy tensor %s (%s): %s", t->name,
                       st_dtype_name(t->dtype), err_str(rc));
        r->n_tensors++;
        r->bytes += t->nbytes;
    }
    char tmp[PATH_MAX * 2], from[PATH_MAX * 3], to[PATH_MAX * 2];
    snprintf(tmp, sizeof(tmp), "%s/.graft-mtp.tmp", target);
    snprintf(from, sizeof(from), "%s/model.safetensors", tmp);
    snprintf(to, sizeof(to), "%s/%s", target, GRAFT_SHARD);
    if (rc == 0 && mkdir(tmp, 0755) != 0) {
        rc = -errno;
        errbuf_set(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
    }
    if (rc == 0 && (rc = st_write_save(w, tmp, 0)) < 0)
        errbuf_set(err, errlen, "cannot write %s: %s", from, err_str(rc));
    if (rc == 0 && rename(from, to) != 0) {
        rc = -errno;
        errbuf_set(err, errlen, "cannot move %s to %s: %s", from, to, strerror(errno));
    }
    unlink(from);
    rmdir(tmp);
    st_write_destroy(w);
    return rc;
}

int graft_mtp(const char *src, const char *dst, const char *out, struct graft_result *res,
              char *err, size_t errlen)
{
    struct graft_result r;
    memset(&r, 0, sizeof(r));
    struct model_config sc, dc;
    struct st_set *sset = NULL, *dset = NULL;
    struct model *m = NULL;
    char e2[512];
    char stage[PATH_MAX];
    snprintf(stage, sizeof(stage), "%s/%s", dst, GRAFT_STAGE);
    const char *target = out ? out : stage;
    int made = 0;
    int rc = config_load(&sc, src, e2, sizeof(e2));
    if (rc < 0) {
        errbuf_set(err, errlen, "source %s: %s", src, e2);
        return rc;
    }
    if ((rc = config_load(&dc, dst, e2, sizeof(e2))) < 0) {
        errbuf_set(err, errlen, "target %s: %s", dst, e2);
        return rc;
    }
    if ((rc = graft_check(&sc, &dc, err, errlen)) < 0)
        return rc;
    if (!(sset = st_open(src, 0, e2, sizeof(e2)))) {
        errbuf_set(err, errlen, "source %s: %s", src, e2);
        return ERR_FORMAT;
    }
    if (!(dset = st_open(dst, ST_OPEN_HEADER_ONLY, e2, sizeof(e2)))) {
        errbuf_set(err, errlen, "target %s: %s", dst, e2);
        rc = ERR_FORMAT;
        goto out;
    }
    int n_src = 0, n_dst = 0;
    for (int64_t i = 0; i < st_count(sset); i++)
        n_src += starts(st_at(sset, i)->name, "mtp.");
    for (int64_t i = 0; i < st_count(dset); i++)
        n_dst += starts(st_at(dset, i)->name, "mtp.");
    if (n_src == 0) {
        errbuf_set(err, errlen, "source %s has no mtp.* tensors", src);
        rc = ERR_NOTFOUND;
        goto out;
    }
    if (n_dst > 0) {
        errbuf_set(err, errlen, "target %s already has %d mtp.* tensors", dst, n_dst);
        rc = ERR_STATE;
        goto out;
    }
    char shard[PATH_MAX * 2];
    snprintf(shard, sizeof(shard), "%s/%s", dst, GRAFT_SHARD);
    if (access(shard, F_OK) == 0) {
        errbuf_set(err, errlen, "%s already exists", shard);
        rc = ERR_STATE;
        goto out;
    }
    if (!out && access(stage, F_OK) == 0) {
        errbuf_set(err, errlen, "%s exists (an interrupted graft?): remove it first", stage);
        rc = ERR_STATE;
        goto out;
    }
    if (out && access(out, F_OK) != 0)
        made = 1; // a new directory: removed again on failure
    if ((rc = link_tree(dst, target, err, errlen)) < 0)
        goto out;
    made |= !out;
    r.mtp_layers = sc.mtp_n_layers > 0 ? sc.mtp_n_layers : 1;
    if ((rc = write_shard(sset, target, &r, err, errlen)) < 0 ||
        (rc = write_index(dst, target, dset, sset, err, errlen)) < 0 ||
        (rc = write_config(dst, target, r.mtp_layers, err, errlen)) < 0)
        goto out;
    // the loader must now see the head
    struct model_load_opts lo = {.header_only = true};
    if ((rc = model_load(&m, target, &lo, e2, sizeof(e2))) < 0) {
        errbuf_set(err, errlen, "grafted %s does not load: %s", target, e2);
        goto out;
    }
    if (model_load_stats(m)->n_mtp_tensors != n_src || m->cfg.mtp_n_layers != r.mtp_layers) {
        errbuf_set(err, errlen, "grafted %s shows %lld mtp.* tensors (expected %d)", target,
                   (long long)model_load_stats(m)->n_mtp_tensors, n_src);
        rc = ERR_FORMAT;
        goto out;
    }
    if (!out) {
        model_destroy(m);
        m = NULL;
        if ((rc = publish(stage, dst, err, errlen)) < 0)
            goto out;
    }
    snprintf(r.target, sizeof(r.target), "%s", out ? out : dst);
    if (res)
        *res = r;
out:
    if (rc < 0 || !out) {
        if (made)
            remove_made(target);
    }
    model_destroy(m);
    st_close(dset);
    st_close(sset);
    return rc;
}
