/* file: whole-file reads (config files, templates, tokenizer.json, test fixtures and logs). */
#ifndef COMMON_FILE_H
#define COMMON_FILE_H

#include <stddef.h>

/* Read all of path (a regular file, a pipe or a /proc file) into a malloc'd buffer with a NUL
 * after the last byte; *len (may be NULL) gets the byte count. The caller frees the buffer.
 * Returns NULL with errno set on failure: the open/read errno, or ENOMEM (files can be large, so
 * running out of memory is not an abort here). */
char *file_read(const char *path, size_t *len);

#endif
