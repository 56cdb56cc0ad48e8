/*
 * The arena of the Jinja interpreter: the parser builds a template's tree in
 * one, each render allocates every value in its own, and both are freed in
 * one go. Chunks of 32 KiB; a render's arena has a byte limit (max_memory).
 *
 * defines: jarena_alloc, jarena_free
 */
#include <stdlib.h>

#include "jinja/internal.h"


struct jarena_chunk {
    jarena_chunk  *next;
    size_t         size;
    size_t         used;
    max_align_t    data[];
};

void *
jarena_alloc(jarena *a, size_t n)
{
    jarena_chunk  *c;
    size_t         size;
    void          *p;

    n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
    c = a->head;
    if (c == NULL || c->size - c->used < n) {
        size = n > 32768 ? n : 32768;
        if (a->limit && a->used + size + sizeof(*c) > a->limit) {
            return NULL;
        }
        c = malloc(sizeof(*c) + size);
        if (c == NULL) {
            return NULL;
        }
        c->size = size;
        c->used = 0;
        a->used += size + sizeof(*c);
        /* a big block goes behind the current chunk so its tail stays usable */
        if (a->head != NULL && n > 32768) {
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    p = (char *) c->data + c->used;
    c->used += n;
    return p;
}


void
jarena_free(jarena *a)
{
    jarena_chunk  *c, *next;

    for (c = a->head; c != NULL; c = next) {
        next = c->next;
        free(c);
    }
    a->head = NULL;
    a->used = 0;
}
