/*
 * A whole file into memory (file.h).
 *
 * defines: llm_read_file
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "format/file.h"


char *
llm_read_file(const char *path, size_t max, size_t *len)
{
    FILE  *f;
    char  *buf = NULL;
    long   n;
    int    e = 0;

    errno = 0;
    if ((f = fopen(path, "rb")) == NULL) {
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0
        || fseek(f, 0, SEEK_SET) != 0)
    {
        e = errno;
    } else if (max != 0 && (size_t) n >= max) {
        e = EFBIG;
    } else if ((buf = malloc((size_t) n + 1)) == NULL) {
        e = ENOMEM;
    } else if (fread(buf, 1, (size_t) n, f) != (size_t) n) {
        e = errno;              /* a directory: EISDIR */
        free(buf);
        buf = NULL;
    } else {
        buf[n] = '\0';
        if (len != NULL) {
            *len = (size_t) n;
        }
    }
    fclose(f);
    if (buf == NULL) {
        errno = e ? e : EIO;
    }
    return buf;
}
