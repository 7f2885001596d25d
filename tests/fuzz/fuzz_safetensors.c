/* fuzz_safetensors: st_open on an arbitrary file (header length, JSON header, dtypes, shapes,
 * offsets, overlaps), once with data mapped and once header-only. The input is written to a
 * memfd and opened through /proc/self/fd, so no disk I/O per input. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "model/safetensors.h"

static void walk(const struct st_set *set)
{
    char buf[200];
    int64_t n = st_count(set);
    for (int64_t i = 0; i < n; i++) {
        const struct st_tensor *t = st_at(set, i);
        if (st_find(set, t->name) != t)
            __builtin_trap(); /* the index must find every tensor it lists */
        st_shape_str(t, buf, sizeof(buf));
        (void)st_dtype_name(t->dtype);
        /* touch the first and last data byte: they must be mapped */
        if (t->data && t->nbytes > 0) {
            volatile uint8_t a = ((const uint8_t *)t->data)[0];
            volatile uint8_t b = ((const uint8_t *)t->data)[t->nbytes - 1];
            (void)a;
            (void)b;
        }
    }
    (void)st_n_files(set);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("st", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    char err[256];
    for (int flags = 0; flags <= ST_OPEN_HEADER_ONLY; flags += ST_OPEN_HEADER_ONLY) {
        err[0] = '\0';
        struct st_set *set = st_open(path, flags, err, sizeof(err));
        if (set) {
            walk(set);
            st_close(set);
        } else if (!err[0]) {
            __builtin_trap(); /* every failure must say why */
        }
    }
    close(fd);
    return 0;
}
