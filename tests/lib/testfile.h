/* testfile.h: files the unit tests write (key files, configs). */
#ifndef LEAFD_TESTFILE_H
#define LEAFD_TESTFILE_H

#include <stddef.h>
#include <sys/types.h>

/* Write len bytes of data to path (created or truncated), then set its
 * mode. 0, or -1 (errno set). */
int testfile_write(const char *path, const void *data, size_t len, mode_t mode);

#endif
