/* safetensors: open, validate and mmap a safetensors file or a sharded set. The set owns the
 * tensor table (sorted by name, hashed for lookup), the file names and the mappings. Every
 * validation failure is one line: "<file>: tensor '<name>': <what>". */
#include "model/safetensors.h"

#include "common/errbuf.h"
#include "common/file.h"
#include "common/xalloc.h"
#include "model/config_load.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER (100ll * 1024 * 1024) /* the format's own limit */
#define ST_INDEX_NAME "model.safetensors.index.json"

struct st_file {
    char *name;   // base name (or the path given for a single file)
    char *path;   // full path
    void *map;    // whole-file mapping (NULL in header-only mode)
    int64_t size; // file size in bytes
};

struct st_set {
    struct st_file *files;
    int n_files;
    struct st_tensor *t; // sorted by name after open
    int64_t n, cap;
    int64_t *hash; // open addressing, -1 = empty
    int64_t hcap;
    bool has_data;
};

struct dtype_desc {
    const char *name;
    enum st_dtype dt;
    int bits;
};

static const struct dtype_desc DTYPES[] = {
    {"BOOL", ST_BOOL, 8},       {"U8", ST_U8, 8},           {"I8", ST_I8, 8},
    {"I16", ST_I16, 16},        {"U16", ST_U16, 16},        {"I32", ST_I32, 32},
    {"U32", ST_U32, 32},        {"I64", ST_I64, 64},        {"U64", ST_U64, 64},
    {"F16", ST_F16, 16},        {"BF16", ST_BF16, 16},      {"F32", ST_F32, 32},
    {"F64", ST_F64, 64},        {"F8_E4M3", ST_F8_E4M3, 8}, {"F8_E5M2", ST_F8_E5M2, 8},
    {"F8_E8M0", ST_F8_E8M0, 8}, {"F4", ST_F4, 4},
};

const char *st_dtype_name(enum st_dtype dt)
{
    for (size_t i = 0; i < ARRAY_LEN(DTYPES); i++)
        if (DTYPES[i].dt == dt)
            return DTYPES[i].name;
    return "?";
}

int st_dtype_bits(enum st_dtype dt)
{
    for (size_t i = 0; i < ARRAY_LEN(DTYPES); i++)
        if (DTYPES[i].dt == dt)
            return DTYPES[i].bits;
    return 0;
}

enum st_dtype st_dtype_parse(const char *s)
{
    for (size_t i = 0; i < ARRAY_LEN(DTYPES); i++)
        if (strcmp(DTYPES[i].name, s) == 0)
            return DTYPES[i].dt;
    return ST_UNKNOWN;
}

const char *st_shape_str(const struct st_tensor *t, char *buf, size_t len)
{
    size_t o = 0;
    if (t->ndim < 0) {
        snprintf(buf, len, "[?]");
        return buf;
    }
    o += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < t->ndim && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (o < len)
        snprintf(buf + o, len - o, "]");
    return buf;
}

// ---- table ----

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static struct st_tensor *push_tensor(struct st_set *set)
{
    if (set->n == set->cap) {
        set->cap = set->cap ? set->cap * 2 : 256;
        set->t = xrealloc(set->t, (size_t)set->cap * sizeof(*set->t));
    }
    struct st_tensor *t = &set->t[set->n++];
    memset(t, 0, sizeof(*t));
    return t;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct st_tensor *)a)->name, ((const struct st_tensor *)b)->name);
}

static int build_index(struct st_set *set, char *err, size_t errlen)
{
    if (set->n > 1)
        qsort(set->t, (size_t)set->n, sizeof(*set->t), cmp_name);
    for (int64_t i = 1; i < set->n; i++) {
        if (strcmp(set->t[i].name, set->t[i - 1].name) == 0) {
            errbuf_set(err, errlen, "%s: tensor '%s': also stored in %s", set->t[i].file,
                       set->t[i].name, set->t[i - 1].file);
            return -1;
        }
    }
    set->hcap = 16;
    while (set->hcap < set->n * 2)
        set->hcap *= 2;
    set->hash = xmalloc((size_t)set->hcap * sizeof(int64_t));
    for (int64_t i = 0; i < set->hcap; i++)
        set->hash[i] = -1;
    for (int64_t i = 0; i < set->n; i++) {
        uint64_t h = hash_str(set->t[i].name) & (uint64_t)(set->hcap - 1);
        while (set->hash[h] >= 0)
            h = (h + 1) & (uint64_t)(set->hcap - 1);
        set->hash[h] = i;
    }
    return 0;
}

const struct st_tensor *st_find(const struct st_set *set, const char *name)
{
    if (!set || !set->hash)
        return NULL;
    uint64_t h = hash_str(name) & (uint64_t)(set->hcap - 1);
    while (set->hash[h] >= 0) {
        const struct st_tensor *t = &set->t[set->hash[h]];
        if (strcmp(t->name, name) == 0)
            return t;
        h = (h + 1) & (uint64_t)(set->hcap - 1);
    }
    return NULL;
}

int64_t st_count(const struct st_set *set)
{
    return set ? set->n : 0;
}

const struct st_tensor *st_at(const struct st_set *set, int64_t i)
{
    return (set && i >= 0 && i < set->n) ? &set->t[i] : NULL;
}

int st_n_files(const struct st_set *set)
{
    return set ? set->n_files : 0;
}

bool st_has_data(const struct st_set *set)
{
    return set && set->has_data;
}

// ---- one file ----

static int json_int(const cJSON *v, int64_t *out)
{
    if (!cJSON_IsNumber(v))
        return -1;
    double d = v->valuedouble;
    if (d < 0 || d > 9007199254740992.0 || d != (double)(int64_t)d)
        return -1;
    *out = (int64_t)d;
    return 0;
}

struct span {
    int64_t begin, end;
    const char *name;
};

static int cmp_span(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

/* Parse one tensor entry of a header into t (name already set). */
static int parse_entry(const struct st_file *f, const cJSON *e, struct st_tensor *t, int64_t *b,
                       int64_t *en, char *err, size_t errlen)
{
    const char *fn = f->name, *nm = t->name;
    if (!cJSON_IsObject(e)) {
        errbuf_set(err, errlen, "%s: tensor '%s': header entry is not an object", fn, nm);
        return -1;
    }
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt)) {
        errbuf_set(err, errlen, "%s: tensor '%s': missing dtype", fn, nm);
        return -1;
    }
    t->dtype = st_dtype_parse(dt->valuestring);
    if (t->dtype == ST_UNKNOWN) {
        errbuf_set(err, errlen, "%s: tensor '%s': unknown dtype '%s'", fn, nm, dt->valuestring);
        return -1;
    }
    if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > ST_MAX_DIMS) {
        errbuf_set(err, errlen, "%s: tensor '%s': shape missing or has more than %d dims", fn, nm,
                   ST_MAX_DIMS);
        return -1;
    }
    t->ndim = cJSON_GetArraySize(sh);
    t->nelem = 1;
    for (int i = 0; i < t->ndim; i++) {
        int64_t d;
        if (json_int(cJSON_GetArrayItem(sh, i), &d) < 0 || d > ((int64_t)1 << 40)) {
            errbuf_set(err, errlen, "%s: tensor '%s': shape[%d] is not a valid size", fn, nm, i);
            return -1;
        }
        t->shape[i] = d;
        /* nelem * 64 (the widest dtype, in bits) must fit in int64 below */
        if (d && t->nelem > INT64_MAX / 64 / d) {
            errbuf_set(err, errlen, "%s: tensor '%s': shape too large", fn, nm);
            return -1;
        }
        t->nelem *= d;
    }
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
        json_int(cJSON_GetArrayItem(off, 0), b) < 0 ||
        json_int(cJSON_GetArrayItem(off, 1), en) < 0 || *b > *en) {
        errbuf_set(err, errlen,
                   "%s: tensor '%s': data_offsets must be [begin, end] with begin <= end", fn, nm);
        return -1;
    }
    int64_t bits = st_dtype_bits(t->dtype);
    int64_t want = (t->nelem * bits + 7) / 8;
    t->nbytes = *en - *b;
    if ((t->nelem * bits) % 8 || want != t->nbytes) {
        char sb[160];
        errbuf_set(err, errlen,
                   "%s: tensor '%s': shape %s x %s = %lld bytes but data_offsets span %lld", fn, nm,
                   st_shape_str(t, sb, sizeof(sb)), dt->valuestring, (long long)want,
                   (long long)t->nbytes);
        return -1;
    }
    return 0;
}

static int read_full(int fd, void *buf, size_t n, off_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, off + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

/* Parse and validate one file, appending its tensors to the set. */
static int load_file(struct st_set *set, struct st_file *f, int flags, char *err, size_t errlen)
{
    bool hdr_only = flags & ST_OPEN_HEADER_ONLY;
    int rc = -1;
    char *hdr = NULL;
    cJSON *root = NULL;
    struct span *spans = NULL;
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        errbuf_set(err, errlen, "%s: cannot open: %s", f->name, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        errbuf_set(err, errlen, "%s: not a regular file", f->name);
        goto out;
    }
    f->size = st.st_size;
    uint8_t lenb[8];
    if (f->size < 8 || read_full(fd, lenb, 8, 0) < 0) {
        errbuf_set(err, errlen, "%s: file too short (%lld bytes) for the 8-byte header length",
                   f->name, (long long)f->size);
        goto out;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | lenb[i];
    if (hlen > (uint64_t)ST_MAX_HEADER || (int64_t)hlen > f->size - 8) {
        errbuf_set(err, errlen, "%s: header length %llu beyond the file (size %lld)", f->name,
                   (unsigned long long)hlen, (long long)f->size);
        goto out;
    }
    hdr = xmalloc(hlen + 1);
    if (read_full(fd, hdr, hlen, 8) < 0) {
        errbuf_set(err, errlen, "%s: cannot read the header", f->name);
        goto out;
    }
    hdr[hlen] = 0;
    root = cJSON_ParseWithLength(hdr, hlen);
    if (!root || !cJSON_IsObject(root)) {
        errbuf_set(err, errlen, "%s: header is not a valid JSON object", f->name);
        goto out;
    }
    int64_t data_start = 8 + (int64_t)hlen;
    int64_t data_size = f->size - data_start;
    if (!hdr_only) {
        f->map = mmap(NULL, (size_t)f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (f->map == MAP_FAILED) {
            f->map = NULL;
            errbuf_set(err, errlen, "%s: mmap failed: %s", f->name, strerror(errno));
            goto out;
        }
    }
    int n_items = cJSON_GetArraySize(root);
    spans = xcalloc((size_t)n_items + 1, sizeof(*spans));
    int ns = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, root)
    {
        if (strcmp(e->string, "__metadata__") == 0)
            continue;
        struct st_tensor *t = push_tensor(set);
        t->name = xstrdup(e->string);
        t->file = f->name;
        int64_t b, en;
        if (parse_entry(f, e, t, &b, &en, err, errlen) < 0)
            goto out;
        t->offset = data_start + b;
        if (!hdr_only && en > data_size) {
            errbuf_set(err, errlen,
                       "%s: tensor '%s': data [%lld, %lld) outside the file (data size %lld)",
                       f->name, t->name, (long long)b, (long long)en, (long long)data_size);
            goto out;
        }
        t->data = hdr_only ? NULL : (const uint8_t *)f->map + t->offset;
        spans[ns++] = (struct span){b, en, t->name};
    }
    qsort(spans, (size_t)ns, sizeof(*spans), cmp_span);
    int far = -1; /* the span with the largest end so far */
    for (int i = 0; i < ns; i++) {
        if (spans[i].begin == spans[i].end)
            continue;
        if (far >= 0 && spans[i].begin < spans[far].end) {
            errbuf_set(err, errlen,
                       "%s: tensor '%s': data [%lld, %lld) overlaps tensor '%s' [%lld, %lld)",
                       f->name, spans[i].name, (long long)spans[i].begin, (long long)spans[i].end,
                       spans[far].name, (long long)spans[far].begin, (long long)spans[far].end);
            goto out;
        }
        if (far < 0 || spans[i].end > spans[far].end)
            far = i;
    }
    rc = 0;
out:
    free(spans);
    cJSON_Delete(root);
    free(hdr);
    close(fd);
    return rc;
}

// ---- sets ----

static char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = xmalloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int add_file(struct st_set *set, const char *dir, const char *name)
{
    for (int i = 0; i < set->n_files; i++)
        if (strcmp(set->files[i].name, name) == 0)
            return i;
    set->files = xrealloc(set->files, (size_t)(set->n_files + 1) * sizeof(*set->files));
    struct st_file *f = &set->files[set->n_files];
    memset(f, 0, sizeof(*f));
    f->name = xstrdup(name);
    f->path = dir ? path_join(dir, name) : xstrdup(name);
    return set->n_files++;
}

static bool bad_shard_name(const char *s)
{
    return s[0] == 0 || s[0] == '/' || strstr(s, "..") != NULL;
}

static int open_index(struct st_set *set, const char *dir, int flags, char *err, size_t errlen)
{
    bool hdr_only = flags & ST_OPEN_HEADER_ONLY;
    char *ipath = path_join(dir, ST_INDEX_NAME);
    size_t len = 0;
    char *text = file_read(ipath, &len);
    free(ipath);
    int rc = -1;
    cJSON *root = NULL;
    bool *present = NULL;
    if (!text) {
        errbuf_set(err, errlen, "%s: cannot read", ST_INDEX_NAME);
        return -1;
    }
    root = cJSON_ParseWithLength(text, len);
    const cJSON *wm = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(wm)) {
        errbuf_set(err, errlen, "%s: not valid JSON with a weight_map object", ST_INDEX_NAME);
        goto out;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, wm)
    {
        if (!cJSON_IsString(e) || bad_shard_name(e->valuestring)) {
            errbuf_set(err, errlen, "%s: tensor '%s': weight_map value is not a shard file name",
                       ST_INDEX_NAME, e->string);
            goto out;
        }
        add_file(set, dir, e->valuestring);
    }
    present = xcalloc((size_t)set->n_files + 1, sizeof(bool));
    for (int i = 0; i < set->n_files; i++) {
        present[i] = file_exists(set->files[i].path);
        if (!present[i] && !hdr_only) {
            errbuf_set(err, errlen, "%s: missing (named by %s)", set->files[i].name, ST_INDEX_NAME);
            goto out;
        }
        if (present[i] && load_file(set, &set->files[i], flags, err, errlen) < 0)
            goto out;
    }
    /* names of absent shards come from the index alone */
    cJSON_ArrayForEach(e, wm)
    {
        int fi = add_file(set, dir, e->valuestring);
        if (present[fi])
            continue;
        struct st_tensor *t = push_tensor(set);
        t->name = xstrdup(e->string);
        t->file = set->files[fi].name;
        t->ndim = -1;
        t->dtype = ST_UNKNOWN;
    }
    if (build_index(set, err, errlen) < 0)
        goto out;
    cJSON_ArrayForEach(e, wm)
    {
        const struct st_tensor *t = st_find(set, e->string);
        if (!t || strcmp(t->file, e->valuestring) != 0) {
            errbuf_set(err, errlen, "%s: tensor '%s': named by %s but not in that file",
                       e->valuestring, e->string, ST_INDEX_NAME);
            goto out;
        }
    }
    rc = 0;
out:
    free(present);
    cJSON_Delete(root);
    free(text);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_st_name(const char *name)
{
    size_t l = strlen(name);
    return l > 12 && strcmp(name + l - 12, ".safetensors") == 0;
}

bool st_dir_has_tensors(const char *dir)
{
    char p[4096];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", dir, ST_INDEX_NAME);
    if (stat(p, &st) == 0)
        return true;
    DIR *d = opendir(dir);
    struct dirent *de;
    bool found = false;
    while (d && !found && (de = readdir(d)) != NULL)
        found = is_st_name(de->d_name);
    if (d)
        closedir(d);
    return found;
}

static int open_dir_glob(struct st_set *set, const char *dir, int flags, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d) {
        errbuf_set(err, errlen, "%s: cannot open directory: %s", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (is_st_name(de->d_name)) {
            names = xrealloc(names, (size_t)(n + 1) * sizeof(char *));
            names[n++] = xstrdup(de->d_name);
        }
    }
    closedir(d);
    int rc = 0;
    if (n == 0) {
        errbuf_set(err, errlen, "%s: no %s and no *.safetensors file", dir, ST_INDEX_NAME);
        rc = -1;
    }
    if (n > 1)
        qsort(names, (size_t)n, sizeof(char *), cmp_str);
    for (int i = 0; i < n && rc == 0; i++) {
        int fi = add_file(set, dir, names[i]);
        rc = load_file(set, &set->files[fi], flags, err, errlen);
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (rc == 0)
        rc = build_index(set, err, errlen);
    return rc;
}

struct st_set *st_open(const char *path, int flags, char *err, size_t errlen)
{
    struct st_set *set = xcalloc(1, sizeof(*set));
    set->has_data = !(flags & ST_OPEN_HEADER_ONLY);
    struct stat st;
    int rc;
    if (stat(path, &st) < 0) {
        errbuf_set(err, errlen, "%s: %s", path, strerror(errno));
        st_close(set);
        return NULL;
    }
    if (S_ISREG(st.st_mode)) {
        int fi = add_file(set, NULL, path);
        rc = load_file(set, &set->files[fi], flags, err, errlen);
        if (rc == 0)
            rc = build_index(set, err, errlen);
    } else {
        char *ip = path_join(path, ST_INDEX_NAME);
        char *sp = path_join(path, "model.safetensors");
        if (file_exists(ip)) {
            rc = open_index(set, path, flags, err, errlen);
        } else if (file_exists(sp)) {
            int fi = add_file(set, path, "model.safetensors");
            rc = load_file(set, &set->files[fi], flags, err, errlen);
            if (rc == 0)
                rc = build_index(set, err, errlen);
        } else {
            rc = open_dir_glob(set, path, flags, err, errlen);
        }
        free(ip);
        free(sp);
    }
    if (rc < 0) {
        st_close(set);
        return NULL;
    }
    return set;
}

void st_close(struct st_set *set)
{
    if (!set)
        return;
    for (int64_t i = 0; i < set->n; i++)
        free((char *)set->t[i].name);
    free(set->t);
    free(set->hash);
    for (int i = 0; i < set->n_files; i++) {
        if (set->files[i].map)
            munmap(set->files[i].map, (size_t)set->files[i].size);
        free(set->files[i].name);
        free(set->files[i].path);
    }
    free(set->files);
    free(set);
}
