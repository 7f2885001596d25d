/* tern graft-mtp --from SRC --into DST [--out DIR]: copy the mtp.* head of checkpoint SRC into
 * DST (in place, or into a new directory DIR of symlinks to DST's files plus the new shard,
 * index and config), after checking that the two models are compatible (model/graft.h).
 * Errors: one line on stderr, exit 1 (2 for usage). */
#include "common/args.h"
#include "common/err.h"
#include "common/xalloc.h"
#include "model/graft.h"

#include <stdio.h>
#include <string.h>

int tern_cmd_graft_mtp(int argc, char **argv);
const char tern_cmd_graft_mtp_help[] =
    "copy the MTP head of a compatible checkpoint: graft-mtp --from SRC --into DST [--out DIR]";

static const char NOTES[] =
    "  copies SRC's mtp.* tensors (bytes as they are) into DST/" GRAFT_SHARD ", adds them to\n"
    "  DST's index (writes one when DST is a single model.safetensors) and sets\n"
    "  mtp_num_hidden_layers in config.json; with --out DIR, DST is left untouched and DIR\n"
    "  gets symlinks to DST's files plus the new shard, index and config\n";

int tern_cmd_graft_mtp(int argc, char **argv)
{
    const char *src = NULL, *dst = NULL, *out = NULL;
    const struct args_opt opts[] = {
        ARGS_STR("--from", "SRC", &src, "checkpoint with the mtp.* tensors (required)"),
        ARGS_STR("--into", "DST", &dst, "checkpoint that gets them (required)"),
        ARGS_STR("--out", "DIR", &out, "leave DST untouched, write DIR instead"),
    };
    const struct args_spec spec = {"tern graft-mtp", "--from SRC --into DST [--out DIR]", opts,
                                   ARRAY_LEN(opts), NOTES};
    int ar = args_parse(&spec, argc, argv);
    if (ar != 0)
        return args_exit(ar);
    if (!src || !dst)
        return args_fail(&spec, "--from SRC and --into DST are required");
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
