/* test_file_errbuf: file_read on a regular file (small, empty, larger than the first chunk), a
 * /proc file whose stat size is 0, a missing path and a directory; errbuf_set truncation and its
 * NULL / zero-length no-ops. Expected bytes are generated here, not read back from the code. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errbuf.h"
#include "common/file.h"
#include "test.h"

static char g_dir[64];

static int write_bytes(const char *path, const char *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

static void test_regular(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/small.txt", g_dir);
    CHECK_EQ_INT(write_bytes(path, "ab\0cd\n", 6), 0);
    size_t n = 99;
    char *s = file_read(path, &n);
    CHECK(s != NULL);
    CHECK_EQ_INT(n, 6);
    CHECK(s && memcmp(s, "ab\0cd\n", 6) == 0 && s[6] == '\0');
    free(s);
    s = file_read(path, NULL); /* len is optional */
    CHECK(s && strcmp(s, "ab") == 0);
    free(s);

    snprintf(path, sizeof path, "%s/empty.txt", g_dir);
    CHECK_EQ_INT(write_bytes(path, "", 0), 0);
    n = 99;
    s = file_read(path, &n);
    CHECK(s != NULL && s[0] == '\0');
    CHECK_EQ_INT(n, 0);
    free(s);

    /* 300 KB of a pseudo-random pattern: past the initial 64 KiB chunk and not a power of 2 */
    size_t big = 300 * 1000 + 7;
    char *want = malloc(big);
    uint32_t x = 12345;
    for (size_t i = 0; i < big; i++) {
        x = x * 1103515245u + 12345u;
        want[i] = (char)(x >> 16);
    }
    snprintf(path, sizeof path, "%s/big.bin", g_dir);
    CHECK_EQ_INT(write_bytes(path, want, big), 0);
    s = file_read(path, &n);
    CHECK(s != NULL);
    CHECK_EQ_INT(n, big);
    CHECK(s && memcmp(s, want, big) == 0 && s[big] == '\0');
    free(s);
    free(want);
    unlink(path);
}

static void test_special(void)
{
    /* /proc files report size 0: the read must still get all of it */
    size_t n = 0;
    char *s = file_read("/proc/self/status", &n);
    CHECK(s != NULL);
    CHECK(n > 0 && s && strlen(s) == n);
    CHECK(s && strstr(s, "Name:") == s);
    free(s);

    errno = 0;
    s = file_read("/nonexistent/tern/file", &n);
    CHECK(s == NULL);
    CHECK_EQ_INT(errno, ENOENT);

    errno = 0;
    s = file_read(g_dir, &n); /* a directory opens but does not read */
    CHECK(s == NULL);
    CHECK(errno != 0);
    free(s);
}

static void test_errbuf(void)
{
    char err[16];
    errbuf_set(err, sizeof err, "%s=%d", "key", 42);
    CHECK_STREQ(err, "key=42");
    errbuf_set(err, sizeof err, "%s", "0123456789abcdefghij"); /* truncated, terminated */
    CHECK_STREQ(err, "0123456789abcde");
    memcpy(err, "untouched", 10);
    errbuf_set(err, 0, "%s", "x"); /* zero length: no write */
    CHECK_STREQ(err, "untouched");
    errbuf_set(NULL, 16, "%s", "x"); /* NULL: no crash */
}

/* file_tmpdir_copy: a fresh dir with the copy under the given name, byte-equal; a missing source
 * fails with -ENOENT and leaves nothing; file_tmpdir_remove takes both away. */
static void test_tmpdir_copy(void)
{
    char src[128], dir[256], copy[300];
    snprintf(src, sizeof src, "%s/small.txt", g_dir);
    CHECK_EQ_INT(file_tmpdir_copy(src, "tern-fileut-copy", "config.json", dir, sizeof dir), 0);
    CHECK(strncmp(dir, "/tmp/tern-fileut-copy-", 22) == 0);
    snprintf(copy, sizeof copy, "%s/config.json", dir);
    size_t na = 0, nb = 0;
    char *a = file_read(src, &na), *b = file_read(copy, &nb);
    CHECK(a && b && na == nb && memcmp(a, b, na) == 0);
    free(a);
    free(b);
    file_tmpdir_remove(dir, "config.json");
    CHECK(access(copy, F_OK) != 0 && access(dir, F_OK) != 0);
    char missing[160];
    snprintf(missing, sizeof missing, "%s/no-such-file", g_dir);
    CHECK_EQ_INT(file_tmpdir_copy(missing, "tern-fileut-copy", "x", dir, sizeof dir), -ENOENT);
    char tiny[8];
    CHECK(file_tmpdir_copy(src, "tern-fileut-copy", "x", tiny, sizeof tiny) < 0);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/tern-fileut-XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_regular();
    test_special();
    test_errbuf();
    test_tmpdir_copy();
    char path[128];
    snprintf(path, sizeof path, "%s/small.txt", g_dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/empty.txt", g_dir);
    unlink(path);
    rmdir(g_dir);
    return test_result();
}
