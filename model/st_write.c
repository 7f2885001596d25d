/* st_write: safetensors writer (see st_write.h). Tensors are held in memory until
 * st_write_save(); the tiny checkpoints it is made for are a few MB. */
#include "model/st_write.h"

#include "common/err.h"
#include "common/xalloc.h"
#include "model/dtype.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct stw_tensor {
    char *name;
    char dtype[16];
    int ndim;
    int64_t shape[ST_WRITE_MAX_DIMS];
    void *data;
    size_t nbytes;
    int shard;     // assigned at save time
    int64_t begin; // data offset within its shard
};

struct st_write {
    struct stw_tensor *t;
    int n;
    int cap;
};

static const struct {
    const char *name;
    int size;
} dtypes[] = {
    {"F64", 8}, {"I64", 8}, {"U64", 8},  {"F32", 4},     {"I32", 4},
    {"U32", 4}, {"F16", 2}, {"BF16", 2}, {"I16", 2},     {"U16", 2},
    {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
};

int st_write_dtype_size(const char *dtype)
{
    for (size_t i = 0; i < ARRAY_LEN(dtypes); i++)
        if (strcmp(dtypes[i].name, dtype) == 0)
            return dtypes[i].size;
    return 0;
}

struct st_write *st_write_create(void)
{
    return xcalloc(1, sizeof(struct st_write));
}

void st_write_destroy(struct st_write *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->n; i++) {
        free(w->t[i].name);
        free(w->t[i].data);
    }
    free(w->t);
    free(w);
}

int st_write_add(struct st_write *w, const char *name, const char *dtype, int ndim,
                 const int64_t *shape, const void *data, size_t nbytes)
{
    int esize = st_write_dtype_size(dtype);
    if (!name || !*name || esize == 0 || ndim < 0 || ndim > ST_WRITE_MAX_DIMS)
        return ERR_INVAL;
    if (strcmp(name, "__metadata__") == 0)
        return ERR_INVAL;
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return ERR_INVAL;
        numel *= shape[i];
    }
    if ((size_t)(numel * esize) != nbytes)
        return ERR_INVAL;
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return ERR_STATE;
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 64;
        w->t = xrealloc(w->t, (size_t)w->cap * sizeof(*w->t));
    }
    struct stw_tensor *t = &w->t[w->n];
    memset(t, 0, sizeof(*t));
    t->name = xstrdup(name);
    snprintf(t->dtype, sizeof(t->dtype), "%s", dtype);
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    t->data = xmalloc(nbytes ? nbytes : 1);
    if (nbytes)
        memcpy(t->data, data, nbytes);
    t->nbytes = nbytes;
    w->n++;
    return 0;
}

int st_write_add_f32(struct st_write *w, const char *name, const char *dtype, int ndim,
                     const int64_t *shape, const float *data)
{
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++)
        numel *= shape[i];
    if (strcmp(dtype, "F32") == 0)
        return st_write_add(w, name, dtype, ndim, shape, data, (size_t)numel * 4);
    if (strcmp(dtype, "BF16") != 0 && strcmp(dtype, "F16") != 0)
        return ERR_INVAL;
    uint16_t *buf = xmalloc((size_t)(numel ? numel : 1) * 2);
    bool bf = strcmp(dtype, "BF16") == 0;
    for (int64_t i = 0; i < numel; i++)
        buf[i] = bf ? dtype_f32_to_bf16(data[i]) : dtype_f32_to_f16(data[i]);
    int rc = st_write_add(w, name, dtype, ndim, shape, buf, (size_t)numel * 2);
    free(buf);
    return rc;
}

int st_write_count(const struct st_write *w)
{
    return w->n;
}

int64_t st_write_bytes(const struct st_write *w)
{
    int64_t s = 0;
    for (int i = 0; i < w->n; i++)
        s += (int64_t)w->t[i].nbytes;
    return s;
}

// ---- ordering ----

static int cmp_name(const void *a, const void *b)
{
    const struct stw_tensor *x = *(const struct stw_tensor *const *)a;
    const struct stw_tensor *y = *(const struct stw_tensor *const *)b;
    return strcmp(x->name, y->name);
}

static int cmp_layout(const void *a, const void *b)
{
    const struct stw_tensor *x = *(const struct stw_tensor *const *)a;
    const struct stw_tensor *y = *(const struct stw_tensor *const *)b;
    int sx = st_write_dtype_size(x->dtype), sy = st_write_dtype_size(y->dtype);
    if (sx != sy)
        return sy - sx;
    return strcmp(x->name, y->name);
}

// ---- one file ----

static int write_all(FILE *f, const void *p, size_t n)
{
    return n == 0 || fwrite(p, 1, n, f) == n ? 0 : ERR_IO;
}

/* Write the tensors of shard `shard` (layout-ordered list `lay`, n entries) to path. */
static int write_shard(struct stw_tensor **lay, int n, int shard, const char *path)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    /* offsets in layout order */
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        if (lay[i]->shard != shard)
            continue;
        lay[i]->begin = off;
        off += (int64_t)lay[i]->nbytes;
    }
    /* keys in name order */
    struct stw_tensor **byname = xmalloc((size_t)(n ? n : 1) * sizeof(*byname));
    int m = 0;
    for (int i = 0; i < n; i++)
        if (lay[i]->shard == shard)
            byname[m++] = lay[i];
    qsort(byname, (size_t)m, sizeof(*byname), cmp_name);
    for (int i = 0; i < m; i++) {
        struct stw_tensor *t = byname[i];
        cJSON *o = cJSON_AddObjectToObject(root, t->name);
        cJSON_AddStringToObject(o, "dtype", t->dtype);
        cJSON *sh = cJSON_AddArrayToObject(o, "shape");
        for (int d = 0; d < t->ndim; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
        cJSON *offs = cJSON_AddArrayToObject(o, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)t->begin));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(t->begin + (int64_t)t->nbytes)));
    }
    free(byname);
    char *hdr = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!hdr)
        return ERR_NOMEM;
    size_t hlen = strlen(hdr);
    size_t padded = (hlen + 7) & ~(size_t)7;

    int rc = 0;
    FILE *f = fopen(path, "wb");
    if (!f) {
        rc = -errno;
        goto out_free;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    rc = write_all(f, len8, 8);
    if (rc == 0)
        rc = write_all(f, hdr, hlen);
    for (size_t i = hlen; rc == 0 && i < padded; i++)
        rc = fputc(' ', f) == EOF ? ERR_IO : 0;
    for (int i = 0; rc == 0 && i < n; i++)
        if (lay[i]->shard == shard)
            rc = write_all(f, lay[i]->data, lay[i]->nbytes);
    if (fclose(f) != 0 && rc == 0)
        rc = ERR_IO;
out_free:
    free(hdr);
    return rc;
}

static void shard_name(char *buf, size_t n, const char *dir, int i, int n_shards)
{
    if (n_shards == 1)
        snprintf(buf, n, "%s/model.safetensors", dir);
    else
        snprintf(buf, n, "%s/model-%05d-of-%05d.safetensors", dir, i + 1, n_shards);
}

static int write_index(struct st_write *w, const char *dir, int n_shards)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON_AddNumberToObject(meta, "total_size", (double)st_write_bytes(w));
    cJSON *map = cJSON_AddObjectToObject(root, "weight_map");
    struct stw_tensor **byname = xmalloc((size_t)w->n * sizeof(*byname));
    for (int i = 0; i < w->n; i++)
        byname[i] = &w->t[i];
    qsort(byname, (size_t)w->n, sizeof(*byname), cmp_name);
    for (int i = 0; i < w->n; i++) {
        char file[64];
        snprintf(file, sizeof(file), "model-%05d-of-%05d.safetensors", byname[i]->shard + 1,
                 n_shards);
        cJSON_AddStringToObject(map, byname[i]->name, file);
    }
    free(byname);
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    if (!txt)
        return ERR_NOMEM;
    char path[4096];
    snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
    int rc = 0;
    FILE *f = fopen(path, "w");
    if (!f) {
        rc = -errno;
    } else {
        rc = write_all(f, txt, strlen(txt));
        if (rc == 0)
            rc = write_all(f, "\n", 1);
        if (fclose(f) != 0 && rc == 0)
            rc = ERR_IO;
    }
    free(txt);
    return rc;
}

int st_write_save(struct st_write *w, const char *dir, int64_t shard_bytes)
{
    struct stw_tensor **lay = xmalloc((size_t)(w->n ? w->n : 1) * sizeof(*lay));
    for (int i = 0; i < w->n; i++)
        lay[i] = &w->t[i];
    /* shards are filled in name order so that each layer's tensors stay together */
    qsort(lay, (size_t)w->n, sizeof(*lay), cmp_name);
    int n_shards = 1;
    if (shard_bytes > 0 && st_write_bytes(w) > shard_bytes) {
        int cur = 0;
        int64_t fill = 0;
        for (int i = 0; i < w->n; i++) {
            if (fill > 0 && fill + (int64_t)lay[i]->nbytes > shard_bytes) {
                cur++;
                fill = 0;
            }
            lay[i]->shard = cur;
            fill += (int64_t)lay[i]->nbytes;
        }
        n_shards = cur + 1;
    } else {
        for (int i = 0; i < w->n; i++)
            lay[i]->shard = 0;
    }
    qsort(lay, (size_t)w->n, sizeof(*lay), cmp_layout);
    int rc = 0;
    for (int s = 0; rc == 0 && s < n_shards; s++) {
        char path[4096];
        shard_name(path, sizeof(path), dir, s, n_shards);
        rc = write_shard(lay, w->n, s, path);
    }
    if (rc == 0 && n_shards > 1)
        rc = write_index(w, dir, n_shards);
    free(lay);
    return rc;
}
