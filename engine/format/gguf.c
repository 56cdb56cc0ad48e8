/*
 * GGUF reader (see gguf.h for the contract).
 *
 * The file is read through a bounds-checked cursor: every read says how
 * many bytes it needs and fails with a message instead of reading past the
 * end. Counts (key/values, tensors, array elements) are bounded by the bytes
 * left before anything is allocated for them, so a hostile header cannot make
 * us allocate more than a small multiple of the file size.
 *
 * defines: gguf_open, gguf_open_fd, gguf_parse, gguf_close, gguf_find_kv,
 *          gguf_get_*, gguf_arr_str, gguf_find_tensor, gguf_kv_raw
 */
#include "format/gguf.h"
#include "format/fail.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC              0x46554747u     /* "GGUF" little-endian */
#define GGUF_DEFAULT_ALIGNMENT  32
#define GGUF_MAX_ALIGNMENT      (1u << 20)

/* smallest encodings, used to bound counts by the bytes left */
#define GGUF_MIN_KV_BYTES      (8 + 1 + 4 + 1)     /* key len, key, type, u8 */
#define GGUF_MIN_TENSOR_BYTES  (8 + 1 + 4 + 8 + 4 + 8)


/* ---------------------------------------------------------------------------
 * bounds-checked cursor
 */

typedef struct {
    gguf_file      *g;
    size_t          pos;
} gguf_cursor;


/* g->err = "<path>: <fault>"; -1 */
#define gguf_fail(g, ...)                                                     \
    llm_fail((g)->err, sizeof((g)->err), (g)->path, "(gguf)", __VA_ARGS__)


static int
cur_need(gguf_cursor *c, uint64_t n, const char *what)
{
    if (n > c->g->size - c->pos) {
        return gguf_fail(c->g, "truncated at byte %zu reading %s "
                         "(need %llu bytes, %zu left)", c->pos, what,
                         (unsigned long long) n, c->g->size - c->pos);
    }
    return 0;
}


static int
cur_read(gguf_cursor *c, void *out, size_t n, const char *what)
{
    if (cur_need(c, n, what) != 0) {
        return -1;
    }
    memcpy(out, c->g->base + c->pos, n);
    c->pos += n;
    return 0;
}


static int
cur_u32(gguf_cursor *c, uint32_t *v, const char *what)
{
    return cur_read(c, v, 4, what);
}


static int
cur_u64(gguf_cursor *c, uint64_t *v, const char *what)
{
    return cur_read(c, v, 8, what);
}


/* a length-prefixed string, copied and NUL-terminated */
static int
cur_string_copy(gguf_cursor *c, char **out, const char *what)
{
    uint64_t  len;

    if (cur_u64(c, &len, what) != 0 || cur_need(c, len, what) != 0) {
        return -1;
    }
    if (memchr(c->g->base + c->pos, '\0', len) != NULL) {
        return gguf_fail(c->g, "%s at byte %zu contains a NUL byte",
                         what, c->pos);
    }
    *out = malloc(len + 1);
    if (*out == NULL) {
        return gguf_fail(c->g, "out of memory reading %s", what);
    }
    memcpy(*out, c->g->base + c->pos, len);
    (*out)[len] = '\0';
    c->pos += len;
    return 0;
}


/* bytes of one scalar of a fixed-size metadata type; 0 for string/array */
static uint32_t
gguf_scalar_size(uint32_t type)
{
    switch (type) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_BOOL:
        return 1;
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_INT16:
        return 2;
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_FLOAT32:
        return 4;
    case GGUF_TYPE_UINT64:
    case GGUF_TYPE_INT64:
    case GGUF_TYPE_FLOAT64:
        return 8;
    default:
        return 0;
    }
}


/* ---------------------------------------------------------------------------
 * header parsing
 */

static int
gguf_parse_array(gguf_cursor *c, gguf_kv *kv)
{
    uint64_t  i, len, left;
    uint32_t  esize;

    if (cur_u32(c, &kv->arr_type, "array element type") != 0
        || cur_u64(c, &kv->n, "array length") != 0)
    {
        return -1;
    }
    kv->data = c->g->base + c->pos;
    left = c->g->size - c->pos;

    if (kv->arr_type == GGUF_TYPE_STRING) {
        if (kv->n > left / 8) {
            return gguf_fail(c->g, "key '%s': string array of %llu elements "
                             "does not fit in the %llu bytes left", kv->key,
                             (unsigned long long) kv->n,
                             (unsigned long long) left);
        }
        kv->str_off = malloc((kv->n ? kv->n : 1) * sizeof(uint64_t));
        if (kv->str_off == NULL) {
            return gguf_fail(c->g, "out of memory for key '%s'", kv->key);
        }
        for (i = 0; i < kv->n; i++) {
            kv->str_off[i] = (uint64_t) (c->g->base + c->pos - kv->data);
            if (cur_u64(c, &len, "string array element length") != 0
                || cur_need(c, len, "string array element") != 0)
            {
                return -1;
            }
            c->pos += len;
        }
        return 0;
    }

    esize = gguf_scalar_size(kv->arr_type);
    if (esize == 0) {
        return gguf_fail(c->g, "key '%s': array element type %u is not "
                         "supported", kv->key, kv->arr_type);
    }
    if (kv->n > left / esize) {
        return gguf_fail(c->g, "key '%s': array of %llu elements of %u bytes "
                         "does not fit in the %llu bytes left", kv->key,
                         (unsigned long long) kv->n, esize,
                         (unsigned long long) left);
    }
    c->pos += kv->n * esize;
    return 0;
}


static int
gguf_parse_kv(gguf_cursor *c, gguf_kv *kv)
{
    uint64_t  len;
    uint32_t  size;

    if (cur_string_copy(c, &kv->key, "metadata key") != 0
        || cur_u32(c, &kv->type, "metadata value type") != 0)
    {
        return -1;
    }

    if (kv->type == GGUF_TYPE_ARRAY) {
        return gguf_parse_array(c, kv);
    }

    if (kv->type == GGUF_TYPE_STRING) {
        if (cur_u64(c, &len, "string length") != 0
            || cur_need(c, len, "string value") != 0)
        {
            return -1;
        }
        kv->n = len;
        kv->data = c->g->base + c->pos;
        c->pos += len;
        return 0;
    }

    size = gguf_scalar_size(kv->type);
    if (size == 0) {
        return gguf_fail(c->g, "key '%s': value type %u is not a GGUF type",
                         kv->key, kv->type);
    }
    if (cur_need(c, size, "metadata value") != 0) {
        return -1;
    }
    kv->n = 1;
    kv->data = c->g->base + c->pos;
    c->pos += size;
    return 0;
}


static int
gguf_parse_tensor_info(gguf_cursor *c, gguf_tensor *t)
{
    uint32_t  i;

    if (cur_string_copy(c, &t->name, "tensor name") != 0
        || cur_u32(c, &t->n_dims, "tensor dimension count") != 0)
    {
        return -1;
    }
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS) {
        return gguf_fail(c->g, "tensor '%s': %u dimensions (1..%d allowed)",
                         t->name, t->n_dims, GGUF_MAX_DIMS);
    }
    for (i = 0; i < GGUF_MAX_DIMS; i++) {
        t->ne[i] = 1;
    }
    for (i = 0; i < t->n_dims; i++) {
        if (cur_u64(c, &t->ne[i], "tensor dimension") != 0) {
            return -1;
        }
    }
    if (cur_u32(c, &t->type, "tensor type") != 0
        || cur_u64(c, &t->offset, "tensor data offset") != 0)
    {
        return -1;
    }
    return 0;
}


/* type, shape and size checks that need no other tensor */
static int
gguf_check_tensor_shape(gguf_file *g, gguf_tensor *t)
{
    uint64_t  row, nbytes;
    uint32_t  i;

    if (ggml_type_block(t->type) == 0) {
        return gguf_fail(g, "tensor '%s' has type %s (%u), which is not "
                         "supported (" GGML_TYPES_SUPPORTED " are)", t->name, ggml_type_name(t->type),
                         t->type);
    }
    for (i = 0; i < t->n_dims; i++) {
        if (t->ne[i] == 0 || t->ne[i] > INT32_MAX) {
            return gguf_fail(g, "tensor '%s': dimension %u is %llu "
                             "(1..%d allowed)", t->name, i,
                             (unsigned long long) t->ne[i], INT32_MAX);
        }
    }
    row = ggml_row_size(t->type, t->ne[0]);
    if (row == 0) {
        return gguf_fail(g, "tensor '%s': row length %llu is not a multiple "
                         "of the %s block size %u", t->name,
                         (unsigned long long) t->ne[0],
                         ggml_type_name(t->type), ggml_type_block(t->type));
    }
    nbytes = row;
    for (i = 1; i < GGUF_MAX_DIMS; i++) {
        if (__builtin_mul_overflow(nbytes, t->ne[i], &nbytes)) {
            return gguf_fail(g, "tensor '%s': size overflows", t->name);
        }
    }
    t->nbytes = nbytes;
    if (t->offset % g->alignment != 0) {
        return gguf_fail(g, "tensor '%s': data offset %llu is not a multiple "
                         "of the alignment %llu", t->name,
                         (unsigned long long) t->offset,
                         (unsigned long long) g->alignment);
    }
    return 0;
}


static int
gguf_read_alignment(gguf_file *g)
{
    const gguf_kv  *kv = gguf_find_kv(g, "general.alignment");
    uint32_t        a;

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (kv == NULL) {
        return 0;
    }
    if (kv->type != GGUF_TYPE_UINT32) {
        return gguf_fail(g, "general.alignment has type %u, not uint32",
                         kv->type);
    }
    memcpy(&a, kv->data, 4);
    if (a == 0 || (a & (a - 1)) != 0 || a > GGUF_MAX_ALIGNMENT) {
        return gguf_fail(g, "general.alignment %u is not a power of two "
                         "up to %u", a, GGUF_MAX_ALIGNMENT);
    }
    g->alignment = a;
    return 0;
}


static int
gguf_check_duplicates(gguf_file *g)
{
    uint64_t  i, j;

    for (i = 0; i < g->n_kv; i++) {
        for (j = i + 1; j < g->n_kv; j++) {
            if (strcmp(g->kv[i].key, g->kv[j].key) == 0) {
                return gguf_fail(g, "metadata key '%s' appears twice",
                                 g->kv[i].key);
            }
        }
    }
    for (i = 0; i < g->n_tensors; i++) {
        for (j = i + 1; j < g->n_tensors; j++) {
            if (strcmp(g->tensors[i].name, g->tensors[j].name) == 0) {
                return gguf_fail(g, "tensor '%s' appears twice",
                                 g->tensors[i].name);
            }
        }
    }
    return 0;
}


/* with the data section located: every tensor's bytes must lie inside it */
static int
gguf_place_tensors(gguf_file *g, size_t header_end)
{
    uint64_t  i, start, data_size;

    start = (header_end + g->alignment - 1) / g->alignment * g->alignment;
    if (start > g->size) {
        start = g->size;
    }
    g->data_start = g->base + start;
    data_size = g->size - start;

    for (i = 0; i < g->n_tensors; i++) {
        gguf_tensor *t = &g->tensors[i];

        if (t->offset > data_size || t->nbytes > data_size - t->offset) {
            return gguf_fail(g, "tensor '%s': data [%llu, +%llu) lies outside "
                             "the %llu-byte data section (file truncated?)",
                             t->name, (unsigned long long) t->offset,
                             (unsigned long long) t->nbytes,
                             (unsigned long long) data_size);
        }
        t->data = g->data_start + t->offset;
    }
    return 0;
}


static int
gguf_parse_header(gguf_file *g)
{
    gguf_cursor  c = { g, 0 };
    uint32_t     magic;
    uint64_t     i, left;

    if (cur_u32(&c, &magic, "magic") != 0) {
        return -1;
    }
    if (magic != GGUF_MAGIC) {
        return gguf_fail(g, "not a GGUF file (magic 0x%08x, want \"GGUF\")",
                         magic);
    }
    if (cur_u32(&c, &g->version, "version") != 0) {
        return -1;
    }
    /* v2 differs from v3 only in byte order rules for big-endian files */
    if (g->version != 3 && g->version != 2) {
        return gguf_fail(g, "GGUF version %u is not supported (2 and 3 are)",
                         g->version);
    }
    if (cur_u64(&c, &g->n_tensors, "tensor count") != 0
        || cur_u64(&c, &g->n_kv, "metadata count") != 0)
    {
        return -1;
    }
    left = g->size - c.pos;
    if (g->n_kv > left / GGUF_MIN_KV_BYTES) {
        return gguf_fail(g, "metadata count %llu cannot fit in %llu bytes",
                         (unsigned long long) g->n_kv,
                         (unsigned long long) left);
    }
    if (g->n_tensors > left / GGUF_MIN_TENSOR_BYTES) {
        return gguf_fail(g, "tensor count %llu cannot fit in %llu bytes",
                         (unsigned long long) g->n_tensors,
                         (unsigned long long) left);
    }

    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof(gguf_kv));
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof(gguf_tensor));
    if (g->kv == NULL || g->tensors == NULL) {
        return gguf_fail(g, "out of memory for the header");
    }

    for (i = 0; i < g->n_kv; i++) {
        if (gguf_parse_kv(&c, &g->kv[i]) != 0) {
            return -1;
        }
    }
    if (gguf_read_alignment(g) != 0) {
        return -1;
    }
    for (i = 0; i < g->n_tensors; i++) {
        if (gguf_parse_tensor_info(&c, &g->tensors[i]) != 0
            || gguf_check_tensor_shape(g, &g->tensors[i]) != 0)
        {
            return -1;
        }
    }
    if (gguf_check_duplicates(g) != 0) {
        return -1;
    }
    return gguf_place_tensors(g, c.pos);
}


/* ---------------------------------------------------------------------------
 * open / close
 */

static int
gguf_set_path(gguf_file *g, const char *path)
{
    memset(g, 0, sizeof(*g));
    g->fd = -1;
    g->path = strdup(path ? path : "(gguf)");
    if (g->path == NULL) {
        snprintf(g->err, sizeof(g->err), "%s: out of memory",
                 path ? path : "(gguf)");
        return -1;
    }
    return 0;
}


int
gguf_parse(gguf_file *g, const uint8_t *buf, size_t len,
    const char *name_for_messages)
{
    if (gguf_set_path(g, name_for_messages) != 0) {
        return -1;
    }
    g->base = buf;
    g->size = len;
    return gguf_parse_header(g);
}


/* the caller keeps ownership of fd; the mapping outlives it */
int
gguf_open_fd(gguf_file *g, int fd, const char *path_for_messages)
{
    struct stat  st;
    void        *p;

    if (gguf_set_path(g, path_for_messages) != 0) {
        return -1;
    }
    g->fd = fd;
    if (fstat(fd, &st) != 0) {
        return gguf_fail(g, "fstat: %s", strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
        return gguf_fail(g, "not a regular file");
    }
    if (st.st_size < 24) {
        return gguf_fail(g, "file of %lld bytes is too small for a GGUF "
                         "header", (long long) st.st_size);
    }
    p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        return gguf_fail(g, "mmap: %s", strerror(errno));
    }
    g->base = p;
    g->size = st.st_size;
    g->mapped = 1;
    return gguf_parse_header(g);
}


int
gguf_open(gguf_file *g, const char *path)
{
    int  fd, rc;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (gguf_set_path(g, path) == 0) {
            gguf_fail(g, "cannot open: %s", strerror(errno));
        }
        return -1;
    }
    rc = gguf_open_fd(g, fd, path);
    close(fd);
    g->fd = -1;
    return rc;
}


void
gguf_close(gguf_file *g)
{
    uint64_t  i;

    if (g->kv != NULL) {
        for (i = 0; i < g->n_kv; i++) {
            free(g->kv[i].key);
            free(g->kv[i].str_off);
        }
        free(g->kv);
    }
    if (g->tensors != NULL) {
        for (i = 0; i < g->n_tensors; i++) {
            free(g->tensors[i].name);
        }
        free(g->tensors);
    }
    if (g->mapped && g->base != NULL) {
        munmap((void *) g->base, g->size);
    }
    free(g->path);
    g->kv = NULL;
    g->tensors = NULL;
    g->path = NULL;
    g->base = NULL;
    g->mapped = 0;
    g->n_kv = 0;
    g->n_tensors = 0;
}


/* ---------------------------------------------------------------------------
 * lookups and typed getters
 */

const gguf_kv *
gguf_find_kv(const gguf_file *g, const char *key)
{
    uint64_t  i;

    for (i = 0; i < g->n_kv && g->kv != NULL; i++) {
        if (g->kv[i].key != NULL && strcmp(g->kv[i].key, key) == 0) {
            return &g->kv[i];
        }
    }
    return NULL;
}


const gguf_tensor *
gguf_find_tensor(const gguf_file *g, const char *name)
{
    uint64_t  i;

    for (i = 0; i < g->n_tensors && g->tensors != NULL; i++) {
        if (g->tensors[i].name != NULL
            && strcmp(g->tensors[i].name, name) == 0)
        {
            return &g->tensors[i];
        }
    }
    return NULL;
}


/* any integer scalar, as a sign flag plus magnitude-preserving 64-bit value */
static int
gguf_kv_int(const gguf_kv *kv, int *negative, uint64_t *u)
{
    const uint8_t  *d = kv->data;
    int64_t         s;

    *negative = 0;
    switch (kv->type) {
    case GGUF_TYPE_UINT8:  { uint8_t v;  memcpy(&v, d, 1); *u = v; return 0; }
    case GGUF_TYPE_UINT16: { uint16_t v; memcpy(&v, d, 2); *u = v; return 0; }
    case GGUF_TYPE_UINT32: { uint32_t v; memcpy(&v, d, 4); *u = v; return 0; }
    case GGUF_TYPE_UINT64: { memcpy(u, d, 8); return 0; }
    case GGUF_TYPE_INT8:   { int8_t v;  memcpy(&v, d, 1); s = v; break; }
    case GGUF_TYPE_INT16:  { int16_t v; memcpy(&v, d, 2); s = v; break; }
    case GGUF_TYPE_INT32:  { int32_t v; memcpy(&v, d, 4); s = v; break; }
    case GGUF_TYPE_INT64:  { memcpy(&s, d, 8); break; }
    default:
        return -1;
    }
    *negative = s < 0;
    *u = (uint64_t) s;
    return 0;
}


int
gguf_get_u64(const gguf_file *g, const char *key, uint64_t *out)
{
    const gguf_kv  *kv = gguf_find_kv(g, key);
    uint64_t        u = 0;  /* gcc -O (nginx's) cannot see gguf_kv_int set it */
    int             neg;

    if (kv == NULL || gguf_kv_int(kv, &neg, &u) != 0 || neg) {
        return -1;
    }
    *out = u;
    return 0;
}


int
gguf_get_u32(const gguf_file *g, const char *key, uint32_t *out)
{
    uint64_t  u;

    if (gguf_get_u64(g, key, &u) != 0 || u > UINT32_MAX) {
        return -1;
    }
    *out = (uint32_t) u;
    return 0;
}


int
gguf_get_f32(const gguf_file *g, const char *key, float *out)
{
    const gguf_kv  *kv = gguf_find_kv(g, key);
    double          d;

    if (kv == NULL) {
        return -1;
    }
    if (kv->type == GGUF_TYPE_FLOAT32) {
        memcpy(out, kv->data, 4);
        return 0;
    }
    if (kv->type == GGUF_TYPE_FLOAT64) {
        memcpy(&d, kv->data, 8);
        *out = (float) d;
        return 0;
    }
    return -1;
}


int
gguf_get_bool(const gguf_file *g, const char *key, int *out)
{
    const gguf_kv  *kv = gguf_find_kv(g, key);

    if (kv == NULL || kv->type != GGUF_TYPE_BOOL) {
        return -1;
    }
    *out = kv->data[0] != 0;
    return 0;
}


int
gguf_get_str(const gguf_file *g, const char *key, const char **s,
    uint64_t *len)
{
    const gguf_kv  *kv = gguf_find_kv(g, key);

    if (kv == NULL || kv->type != GGUF_TYPE_STRING) {
        return -1;
    }
    *s = (const char *) kv->data;
    *len = kv->n;
    return 0;
}


int
gguf_get_arr(const gguf_file *g, const char *key, uint32_t *elem_type,
    uint64_t *n, const void **data)
{
    const gguf_kv  *kv = gguf_find_kv(g, key);

    if (kv == NULL || kv->type != GGUF_TYPE_ARRAY) {
        return -1;
    }
    *elem_type = kv->arr_type;
    *n = kv->n;
    *data = kv->data;
    return 0;
}


int
gguf_arr_str(const gguf_kv *kv, uint64_t i, const char **s, uint64_t *len)
{
    if (kv == NULL || kv->type != GGUF_TYPE_ARRAY
        || kv->arr_type != GGUF_TYPE_STRING || i >= kv->n)
    {
        return -1;
    }
    memcpy(len, kv->data + kv->str_off[i], 8);
    *s = (const char *) kv->data + kv->str_off[i] + 8;
    return 0;
}


void
gguf_kv_raw(const gguf_kv *kv, const uint8_t **start, uint64_t *len)
{
    uint64_t  last;

    if (kv->type == GGUF_TYPE_STRING) {
        *start = kv->data - 8;
        *len = 8 + kv->n;
    } else if (kv->type != GGUF_TYPE_ARRAY) {
        *start = kv->data;
        *len = gguf_scalar_size(kv->type);
    } else if (kv->arr_type != GGUF_TYPE_STRING) {
        *start = kv->data - 12;
        *len = 12 + kv->n * gguf_scalar_size(kv->arr_type);
    } else {
        *start = kv->data - 12;
        *len = 12;
        if (kv->n > 0) {
            memcpy(&last, kv->data + kv->str_off[kv->n - 1], 8);
            *len += kv->str_off[kv->n - 1] + 8 + last;
        }
    }
}
