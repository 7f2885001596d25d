/* file: whole-file reads. The buffer starts at the file's size when stat knows it and doubles
 * otherwise, so pipes and /proc files (size 0) read whole too. */
#include "common/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

char *file_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct stat st;
    size_t cap = 65536, n = 0;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        cap = (size_t)st.st_size + 2; /* +1 for the NUL, +1 so that EOF shows without a grow */
    char *buf = NULL;
    int rc = 0;
    for (;;) {
        if (!buf || n + 1 >= cap) {
            if (buf)
                cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                rc = ENOMEM;
                break;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    if (!rc && ferror(f))
        rc = errno ? errno : EIO;
    fclose(f);
    if (rc) {
        free(buf);
        errno = rc;
        return NULL;
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

int file_tmpdir_copy(const char *src, const char *prefix, const char *name, char *dir, size_t dlen)
{
    size_t n = 0;
    char *data = file_read(src, &n);
    if (!data)
        return -errno;
    int rc = 0;
    if (snprintf(dir, dlen, "/tmp/%s-XXXXXX", prefix) >= (int)dlen) {
        rc = -ENAMETOOLONG;
        goto out_data;
    }
    if (!mkdtemp(dir)) {
        rc = -errno;
        goto out_data;
    }
    char dst[4096];
    if (snprintf(dst, sizeof dst, "%s/%s", dir, name) >= (int)sizeof dst) {
        rc = -ENAMETOOLONG;
        goto out_dir;
    }
    FILE *f = fopen(dst, "wb");
    if (!f) {
        rc = -errno;
        goto out_dir;
    }
    if (fwrite(data, 1, n, f) != n)
        rc = -(errno ? errno : EIO);
    if (fclose(f) != 0 && rc == 0)
        rc = -(errno ? errno : EIO);
    if (rc == 0)
        goto out_data;
    unlink(dst);
out_dir:
    rmdir(dir);
out_data:
    free(data);
    return rc;
}

void file_tmpdir_remove(const char *dir, const char *name)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s/%s", dir, name) < (int)sizeof p)
        unlink(p);
    rmdir(dir);
}
