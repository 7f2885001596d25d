/* cli: value parsers (args_value_fn, common/args.h) that several `tern` commands share. */
#ifndef TERN_CLI_H
#define TERN_CLI_H

#include <stddef.h>

/* --load-format auto|dummy into a bool (true = dummy) */
int cli_load_format_parse(void *dst, const char *v, char *err, size_t errlen);
/* --kv-cache-dtype auto|bf16|fp8 into an int: bytes per KV element (2 or 1) */
int cli_kv_elem_parse(void *dst, const char *v, char *err, size_t errlen);

#endif
