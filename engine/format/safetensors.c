/*
 * safetensors reader (see safetensors.h for the format and the rules).
 *
 * The header is JSON, parsed with cJSON from a bounded, length-delimited
 * slice of the buffer. Each entry is then checked the way the reference
 * implementation checks it: a known dtype, a shape whose element count
 * fits, data_offsets with begin <= end and end - begin equal to the bytes
 * the shape needs, and, over all tensors sorted by offset, a data section
 * covered exactly once (no overlap, no hole, nothing past its end).
 *
 * defines: st_open, st_open_at, st_parse, st_close, st_find
 */
#include "format/safetensors.h"
#include "format/fail.h"
#include "format/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#define ST_MAX_EXACT  9007199254740992.0   /* 2^53: doubles stay integers */


/* f->err = "<path>: <fault>"; -1 */
#define st_fail(f, ...)                                                       \
    llm_fail((f)->err, sizeof((f)->err), (f)->path, "(safetensors)",          \
             __VA_ARGS__)


static int
st_set_path(st_file *f, const char *path)
{
    memset(f, 0, sizeof(*f));
    f->path = strdup(path ? path : "(safetensors)");
    if (f->path == NULL) {
        snprintf(f->err, sizeof(f->err), "%s: out of memory",
                 path ? path : "(safetensors)");
        return -1;
    }
    return 0;
}


/* dtype name -> ggml type and element size; 0 size = not accepted */
static uint32_t
st_dtype(const char *name, uint32_t *type)
{
    if (strcmp(name, "F32") == 0) {
        *type = GGML_TYPE_F32;
        return 4;
    }
    if (strcmp(name, "F16") == 0) {
        *type = GGML_TYPE_F16;
        return 2;
    }
    if (strcmp(name, "BF16") == 0) {
        *type = GGML_TYPE_BF16;
        return 2;
    }
    if (strcmp(name, "U8") == 0) {
        *type = ST_TYPE_U8;     /* raw bytes: gpt-oss's MXFP4 blocks */
        return 1;
    }
    return 0;
}


/* a JSON number that is a non-negative integer below 2^53 */
static int
st_uint(const cJSON *v, uint64_t *out)
{
    double  d;

    if (!cJSON_IsNumber(v)) {
        return -1;
    }
    d = v->valuedouble;
    if (!(d >= 0.0) || d >= ST_MAX_EXACT || d != (double) (uint64_t) d) {
        return -1;
    }
    *out = (uint64_t) d;
    return 0;
}


/* one header entry into t; data_len is the size of the data section */
static int
st_entry(st_file *f, const cJSON *e, st_tensor *t, uint64_t data_len,
    uint64_t *begin)
{
    const cJSON  *dtype, *shape, *offs, *v;
    uint64_t      n, elems = 1, end;
    uint32_t      esize;
    int           i;

    if (!cJSON_IsObject(e)) {
        return st_fail(f, "tensor '%s': header entry is not an object",
                       t->name);
    }
    dtype = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dtype) || !cJSON_IsArray(shape)
        || !cJSON_IsArray(offs))
    {
        return st_fail(f, "tensor '%s': needs \"dtype\" (string), \"shape\" "
                       "and \"data_offsets\" (arrays)", t->name);
    }
    esize = st_dtype(dtype->valuestring, &t->type);
    if (esize == 0) {
        return st_fail(f, "tensor '%s': dtype %.16s is not supported (F32, "
                       "F16, BF16, U8 are)", t->name, dtype->valuestring);
    }
    if (cJSON_GetArraySize(shape) > ST_MAX_DIMS) {
        return st_fail(f, "tensor '%s': %d dimensions (at most %d)",
                       t->name, cJSON_GetArraySize(shape), ST_MAX_DIMS);
    }
    i = 0;
    cJSON_ArrayForEach(v, shape) {
        if (st_uint(v, &n) != 0) {
            return st_fail(f, "tensor '%s': shape[%d] is not a non-negative "
                           "integer", t->name, i);
        }
        if (n != 0 && elems > UINT64_MAX / esize / n) {
            return st_fail(f, "tensor '%s': shape overflows", t->name);
        }
        elems *= n;
        t->shape[i++] = n;
    }
    t->n_dims = (uint32_t) i;
    if (cJSON_GetArraySize(offs) != 2
        || st_uint(cJSON_GetArrayItem(offs, 0), begin) != 0
        || st_uint(cJSON_GetArrayItem(offs, 1), &end) != 0 || end < *begin)
    {
        return st_fail(f, "tensor '%s': data_offsets must be [begin, end] "
                       "with 0 <= begin <= end", t->name);
    }
    if (end > data_len) {
        return st_fail(f, "tensor '%s': data_offsets end %llu is past the "
                       "data section of %llu bytes", t->name,
                       (unsigned long long) end,
                       (unsigned long long) data_len);
    }
    t->nbytes = end - *begin;
    if (t->nbytes != elems * esize) {
        return st_fail(f, "tensor '%s': %llu bytes of data for a %s shape "
                       "of %llu elements (%llu bytes)", t->name,
                       (unsigned long long) t->nbytes, dtype->valuestring,
                       (unsigned long long) elems,
                       (unsigned long long) (elems * esize));
    }
    return 0;
}


static int
cmp_name(const void *a, const void *b)
{
    return strcmp(((const st_tensor *) a)->name,
                  ((const st_tensor *) b)->name);
}


typedef struct {
    uint64_t  begin;
    uint64_t  end;
    uint64_t  index;
} st_range;


static int
cmp_range(const void *a, const void *b)
{
    const st_range *x = a, *y = b;

    if (x->begin != y->begin) {
        return x->begin < y->begin ? -1 : 1;
    }
    return x->end < y->end ? -1 : (x->end > y->end);
}


/* the data section is covered exactly once, in offset order */
static int
st_check_cover(st_file *f, st_range *r, uint64_t n, uint64_t data_len)
{
    uint64_t  i, at = 0;

    qsort(r, n, sizeof(st_range), cmp_range);
    for (i = 0; i < n; i++) {
        if (r[i].begin != at) {
            return st_fail(f, "tensor '%s': data_offsets begin %llu, but "
                           "the previous tensor ends at %llu (%s)",
                           f->tensors[r[i].index].name,
                           (unsigned long long) r[i].begin,
                           (unsigned long long) at,
                           r[i].begin < at ? "overlap" : "hole");
        }
        at = r[i].end;
    }
    if (at != data_len) {
        return st_fail(f, "tensors cover %llu of the %llu data bytes",
                       (unsigned long long) at,
                       (unsigned long long) data_len);
    }
    return 0;
}


static int
st_parse_header(st_file *f)
{
    const uint8_t  *p = f->base;
    const char     *json, *end = NULL;
    uint64_t        hlen = 0, data_len, n, i, begin = 0;
    cJSON          *root;
    const cJSON    *e;
    st_range       *ranges = NULL;
    int             rc = -1, k;

    if (f->size < 8) {
        return st_fail(f, "file of %zu bytes is too small for a safetensors "
                       "header", f->size);
    }
    for (k = 7; k >= 0; k--) {
        hlen = hlen << 8 | p[k];
    }
    if (hlen < 2 || hlen > ST_MAX_HEADER || hlen > f->size - 8) {
        return st_fail(f, "header length %llu is not in 2..%u bytes or past "
                       "the end of the %zu-byte file",
                       (unsigned long long) hlen, ST_MAX_HEADER, f->size);
    }
    json = (const char *) p + 8;
    data_len = f->size - 8 - hlen;
    if (json[0] != '{') {
        return st_fail(f, "header does not start with '{'");
    }
    root = cJSON_ParseWithLengthOpts(json, hlen, &end, 0);
    if (root == NULL || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return st_fail(f, "header is not a JSON object");
    }
    for (; end < json + hlen; end++) {
        if (*end != ' ' && *end != '\t' && *end != '\n' && *end != '\r') {
            cJSON_Delete(root);
            return st_fail(f, "bytes after the header's JSON object");
        }
    }

    n = 0;
    cJSON_ArrayForEach(e, root) {
        n += strcmp(e->string, "__metadata__") != 0;
    }
    if (n > ST_MAX_TENSORS) {
        st_fail(f, "%llu tensors is more than %u", (unsigned long long) n,
                ST_MAX_TENSORS);
        goto done;
    }
    f->tensors = calloc(n ? n : 1, sizeof(st_tensor));
    ranges = calloc(n ? n : 1, sizeof(st_range));
    if (f->tensors == NULL || ranges == NULL) {
        st_fail(f, "out of memory for %llu tensors", (unsigned long long) n);
        goto done;
    }

    i = 0;
    cJSON_ArrayForEach(e, root) {
        st_tensor *t = &f->tensors[i];

        if (strcmp(e->string, "__metadata__") == 0) {
            if (!cJSON_IsObject(e)) {
                st_fail(f, "__metadata__ is not an object");
                goto done;
            }
            continue;
        }
        t->name = strdup(e->string);
        f->n_tensors = ++i;
        if (t->name == NULL) {
            st_fail(f, "out of memory");
            goto done;
        }
        if (st_entry(f, e, t, data_len, &begin) != 0) {
            goto done;
        }
        t->data = p + 8 + hlen + begin;
        if ((8 + hlen + begin) % (t->type == GGML_TYPE_F32 ? 4 : 2) != 0) {
            st_fail(f, "tensor '%s': data at file offset %llu is not aligned "
                    "to its element size", t->name,
                    (unsigned long long) (8 + hlen + begin));
            goto done;
        }
        ranges[i - 1].begin = begin;
        ranges[i - 1].end = begin + t->nbytes;
        ranges[i - 1].index = i - 1;
    }
    if (st_check_cover(f, ranges, n, data_len) != 0) {
        goto done;
    }
    qsort(f->tensors, n, sizeof(st_tensor), cmp_name);
    for (i = 1; i < n; i++) {
        if (strcmp(f->tensors[i - 1].name, f->tensors[i].name) == 0) {
            st_fail(f, "tensor '%s' is listed twice", f->tensors[i].name);
            goto done;
        }
    }
    rc = 0;

done:
    free(ranges);
    cJSON_Delete(root);
    return rc;
}


int
st_parse(st_file *f, const uint8_t *buf, size_t len,
    const char *name_for_messages)
{
    if (st_set_path(f, name_for_messages) != 0) {
        return -1;
    }
    f->base = buf;
    f->size = len;
    return st_parse_header(f);
}


int
st_open_at(st_file *f, int dirfd, const char *name,
    const char *path_for_messages)
{
    struct stat  st;
    void        *p;
    int          fd, rc;

    if (st_set_path(f, path_for_messages ? path_for_messages : name) != 0) {
        return -1;
    }
    fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return st_fail(f, "cannot open: %s", strerror(errno));
    }
    if (fstat(fd, &st) != 0) {
        rc = st_fail(f, "fstat: %s", strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        rc = st_fail(f, "not a regular file");
    } else if (st.st_size < 8) {
        rc = st_fail(f, "file of %lld bytes is too small for a safetensors "
                     "header", (long long) st.st_size);
    } else if ((p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0))
               == MAP_FAILED)
    {
        rc = st_fail(f, "mmap: %s", strerror(errno));
    } else {
        f->base = p;
        f->size = st.st_size;
        f->mapped = 1;
        rc = st_parse_header(f);
    }
    close(fd);
    return rc;
}


int
st_open(st_file *f, const char *path)
{
    return st_open_at(f, AT_FDCWD, path, path);
}


void
st_close(st_file *f)
{
    uint64_t  i;

    for (i = 0; i < f->n_tensors; i++) {
        free(f->tensors[i].name);
    }
    free(f->tensors);
    if (f->mapped) {
        munmap((void *) f->base, f->size);
    }
    free(f->path);
    f->tensors = NULL;
    f->n_tensors = 0;
    f->path = NULL;
    f->base = NULL;
    f->mapped = 0;
}


const st_tensor *
st_find(const st_file *f, const char *name)
{
    st_tensor  key;

    if (f->n_tensors == 0) {
        return NULL;
    }
    key.name = (char *) name;
    return bsearch(&key, f->tensors, f->n_tensors, sizeof(st_tensor),
                   cmp_name);
}
