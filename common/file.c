/* file: whole-file reads. The buffer starts at the file's size when stat knows it and doubles
 * otherwise, so pipes and /proc files (size 0) read whole too. */
#include "common/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

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
