/* testfile.c: files the unit tests write (testfile.h). */
#include <stdio.h>
#include <sys/stat.h>

#include "testfile.h"

int
testfile_write(const char *path, const void *data, size_t len, mode_t mode)
{
    FILE *f = fopen(path, "wb");
    int rc = 0;

    if (f == NULL)
        return -1;
    if (fwrite(data, 1, len, f) != len)
        rc = -1;
    if (fclose(f) != 0)
        rc = -1;
    if (rc == 0 && chmod(path, mode) != 0)
        rc = -1;
    return rc;
}
