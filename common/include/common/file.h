/* file: whole-file reads (config files, templates, tokenizer.json, test fixtures and logs), and
 * a temp directory holding a copy of one file. */
#ifndef COMMON_FILE_H
#define COMMON_FILE_H

#include <stddef.h>

/* Read all of path (a regular file, a pipe or a /proc file) into a malloc'd buffer with a NUL
 * after the last byte; *len (may be NULL) gets the byte count. The caller frees the buffer.
 * Returns NULL with errno set on failure: the open/read errno, or ENOMEM (files can be large, so
 * running out of memory is not an abort here). */
char *file_read(const char *path, size_t *len);

/* A fresh directory /tmp/<prefix>-XXXXXX holding a copy of the file src under the name name (for
 * example a config.json, since model_load reads a directory). dir (dlen bytes) gets its path.
 * 0, or -errno (nothing is left behind on failure). */
int file_tmpdir_copy(const char *src, const char *prefix, const char *name, char *dir, size_t dlen);
/* Remove dir/name and dir (what file_tmpdir_copy made). */
void file_tmpdir_remove(const char *dir, const char *name);

#endif
