/* inspect: a summary of a checkpoint for `tern inspect` and the worker's load log: config,
 * tensor counts and bytes per group, quantization scheme per module class, MTP declared vs
 * present. Built as one cJSON object; the text form is printed from that object. */
#ifndef MODEL_INSPECT_H
#define MODEL_INSPECT_H

#include "model/model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct cJSON;
struct model_load_opts;

/* Summary object of a loaded model (header-only loads are fine). Caller frees with
 * cJSON_Delete. Never NULL. */
struct cJSON *inspect_summary(const struct model *m);
/* Print the summary as readable text lines. */
void inspect_print_text(FILE *f, const struct cJSON *summary);
/* Load dir with opts (NULL = header-only) and print its summary as text or one JSON object.
 * 0, or a negative status with one line in err. */
int inspect_dir(const char *dir, const struct model_load_opts *opts, bool json, FILE *f, char *err,
                size_t errlen);
/* The MTP warning line, or NULL when there is nothing to warn about. Static storage in buf. */
const char *inspect_mtp_warning(const struct model *m, char *buf, size_t len);

#endif
