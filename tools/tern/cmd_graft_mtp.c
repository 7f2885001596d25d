/* tern graft-mtp --from SRC --into DST [--out DIR]: copy the mtp.* head of checkpoint SRC into
 * DST (in place, or into a new directory DIR of symlinks to DST's files plus the new shard,
 * index and config), after checking that the two models are compatible (model/graft.h).
 * Errors: one line on stderr, exit 1 (2 for usage). */
#include "common/err.h"
#include "model/graft.h"

#include <stdio.h>
#include <string.h>

int tern_cmd_graft_mtp(int argc, char **argv);
const char tern_cmd_graft_mtp_help[] =
    "copy the MTP head of a compatible checkpoint: graft-mtp --from SRC --into DST [--out DIR]";

static const char USAGE[] =
    "usage: tern graft-mtp --from SRC --into DST [--out DIR]\n"
    "  copies SRC's mtp.* tensors (bytes as they are) into DST/" GRAFT_SHARD ", adds them to\n"
    "  DST's index (writes one when DST is a single model.safetensors) and sets\n"
    "  mtp_num_hidden_layers in config.json; with --out DIR, DST is left untouched and DIR\n"
    "  gets symlinks to DST's files plus the new shard, index and config\n";

int tern_cmd_graft_mtp(int argc, char **argv)
{
    const char *src = NULL, *dst = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(USAGE, stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fputs(USAGE, stderr);
            return 2;
        }
        if (strcmp(a, "--from") == 0)
            src = argv[++i];
        else if (strcmp(a, "--into") == 0)
            dst = argv[++i];
        else if (strcmp(a, "--out") == 0)
            out = argv[++i];
        else {
            fputs(USAGE, stderr);
            return 2;
        }
    }
    if (!src || !dst) {
        fputs(USAGE, stderr);
        return 2;
    }
    char err[1024] = "";
    struct graft_result r;
    int rc = graft_mtp(src, dst, out, &r, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "tern graft-mtp: %s (%s)\n", err, err_str(rc));
        return 1;
    }
    printf("grafted %d mtp.* tensors (%lld bytes) from %s into %s/%s; "
           "mtp_num_hidden_layers=%d\n",
           r.n_tensors, (long long)r.bytes, src, r.target, GRAFT_SHARD, r.mtp_layers);
    return 0;
}
