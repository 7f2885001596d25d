/* tern keygen: make a CURVE key pair for one process: PREFIX.key (secret, 0600) and PREFIX.pub.
 * Prints the fingerprint that logs use for this key (ev=zap_denied key=..., ev=curve_on). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/args.h"
#include "common/curve.h"
#include "common/xalloc.h"
#include "common/err.h"

int tern_cmd_keygen(int argc, char **argv);
const char tern_cmd_keygen_help[] =
    "make a CURVE key pair: --out PREFIX (writes PREFIX.key 0600 and PREFIX.pub) [--force]";

int tern_cmd_keygen(int argc, char **argv)
{
    const char *prefix = NULL;
    bool force = false;
    const struct args_opt opts[] = {
        ARGS_STR("--out", "PREFIX", &prefix, "write PREFIX.key (secret, 0600) and PREFIX.pub"),
        ARGS_BOOL("--force", &force, "replace existing files"),
    };
    const struct args_spec spec = {"tern keygen", "--out PREFIX [--force]", opts,
                                   ARRAY_LEN(opts), NULL};
    int ar = args_parse(&spec, argc, argv);
    if (ar != 0)
        return args_exit(ar);
    if (!prefix || !prefix[0])
        return args_fail(&spec, "--out PREFIX is required");
    struct curve_keypair kp;
    int rc = curve_keypair_generate(&kp);
    if (rc < 0) {
        fprintf(stderr, "tern keygen: %s (libzmq without CURVE?)\n", err_str(rc));
        return 1;
    }
    rc = curve_keypair_write(&kp, prefix, force);
    if (rc < 0) {
        fprintf(stderr, "tern keygen: writing %s.key / %s.pub: %s%s\n", prefix, prefix, err_str(rc),
                rc == -EEXIST ? " (use --force to replace)" : "");
        return 1;
    }
    char fp[CURVE_FP_LEN + 1];
    printf("wrote %s.key (secret, mode 0600) and %s.pub fingerprint=%s\n", prefix, prefix,
           curve_fingerprint_z85(kp.pub.z85, fp, sizeof fp));
    memset(&kp, 0, sizeof kp);
    return 0;
}
