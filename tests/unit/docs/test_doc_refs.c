/* README.md and every markdown file in docs/ stand alone: no path that leaves the repository
 * ("../", /work/, shared/docs, an absolute path to a .md) and every *.md they name exists in the
 * repository (relative to the root or to the citing file's folder). A failure names file:line
 * and the citation. The checker itself is tested on a fixture first. */
#include "common/file.h"
#include "test.h"

#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const OUTSIDE[] = {"../", "/work/", "shared/docs", "~/"};

static bool path_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '/' || c == '-';
}

static bool exists(const char *root, const char *dir, const char *rel)
{
    char p[2048];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    if (stat(p, &st) == 0)
        return true;
    snprintf(p, sizeof(p), "%s/%s/%s", root, dir, rel);
    return stat(p, &st) == 0;
}

static int line_of(const char *text, const char *at)
{
    int n = 1;
    for (const char *p = text; p < at; p++)
        n += *p == '\n';
    return n;
}

/* Count (and print) the citations in text that leave the repository. name: the file's path
 * relative to root; dir: its folder relative to root ("." for the root). */
static int bad_refs(const char *root, const char *name, const char *dir, const char *text)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof(OUTSIDE) / sizeof(OUTSIDE[0]); i++) {
        for (const char *p = strstr(text, OUTSIDE[i]); p; p = strstr(p + 1, OUTSIDE[i])) {
            fprintf(stderr, "%s:%d: cites a path outside the repository (\"%s\")\n", name,
                    line_of(text, p), OUTSIDE[i]);
            bad++;
        }
    }
    /* every name ending in .md: a file of the repository */
    for (const char *p = strstr(text, ".md"); p; p = strstr(p + 1, ".md")) {
        if (isalnum((unsigned char)p[3]) || p[3] == '_')
            continue; /* ".mdx", ".md_x": not a markdown name */
        const char *s = p;
        while (s > text && path_char(s[-1]))
            s--;
        char ref[512];
        snprintf(ref, sizeof(ref), "%.*s", (int)(p + 3 - s), s);
        if (strncmp(ref, "//", 2) == 0 || s == p)
            continue; /* a URL (https://host/x.md) or a bare ".md" */
        if (ref[0] == '/' || strstr(ref, "..") || !exists(root, dir, ref)) {
            fprintf(stderr, "%s:%d: cites %s, which is not in the repository\n", name,
                    line_of(text, s), ref);
            bad++;
        }
    }
    return bad;
}

static int check_file(const char *root, const char *rel, const char *dir)
{
    char *text = test_read_source(rel);
    CHECK(text != NULL);
    if (!text)
        return 1;
    int bad = bad_refs(root, rel, dir, text);
    free(text);
    return bad;
}

static void test_checker(const char *root)
{
    /* in-repository citations pass; each outside one is one failure */
    CHECK_EQ_INT(bad_refs(root, "fixture", "docs", "see docs/KV.md, KV.md, README.md and "
                          "https://example.org/a/NOTES.md; cd .. && ls; a .md file"), 0);
    CHECK_EQ_INT(bad_refs(root, "fixture", "docs", "per DESIGN.md §2"), 1);
    CHECK_EQ_INT(bad_refs(root, "fixture", "docs", "(CHECKPOINTS.md §3.3)"), 1);
    CHECK_EQ_INT(bad_refs(root, "fixture", ".", "read /work/main/NOTES.md"), 2);
    CHECK_EQ_INT(bad_refs(root, "fixture", ".", "see ../shared/docs/STYLE.md"), 3);
    CHECK_EQ_INT(bad_refs(root, "fixture", ".", "/etc/x.md"), 1);
}

int main(void)
{
    const char *src = getenv("TERN_SOURCE_DIR");
    const char *root = src ? src : ".";
    test_checker(root);
    fprintf(stderr, "-- the fixture's citations above are expected; the repository's follow --\n");
    int bad = check_file(root, "README.md", ".");
    char docs[2048];
    snprintf(docs, sizeof(docs), "%s/docs", root);
    DIR *d = opendir(docs);
    CHECK(d != NULL);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 4 || strcmp(e->d_name + l - 3, ".md") != 0)
            continue;
        char rel[600];
        snprintf(rel, sizeof(rel), "docs/%s", e->d_name);
        bad += check_file(root, rel, "docs");
        n++;
    }
    if (d)
        closedir(d);
    CHECK(n >= 5);
    CHECK_EQ_INT(bad, 0);
    return test_result();
}
