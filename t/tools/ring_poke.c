/*
 * Test tool: corrupt a live engine's ring as a misbehaving peer would, to
 * check that nginx fails the request and not the process.
 *
 *   ring_poke ENGINE_PID head     every RUNNING slot's out_head += 100000,
 *                                 until it stays
 *   ring_poke ENGINE_PID slots    each busy slot: index state priority
 *                                 fair_key (what nginx wrote, t/028)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "ring/ngx_llm_ring.h"


int
main(int argc, char **argv)
{
    int               fd, n;
    char              dir[64], path[320], target[256];
    DIR              *d;
    uint32_t          i;
    struct stat       st;
    struct dirent    *e;
    llm_slot         *sl;
    llm_ring_header  *h;

    if (argc != 3
        || (strcmp(argv[2], "head") != 0 && strcmp(argv[2], "slots") != 0))
    {
        fprintf(stderr, "usage: %s ENGINE_PID head|slots\n", argv[0]);
        return 2;
    }

    snprintf(dir, sizeof(dir), "/proc/%s/fd", argv[1]);
    d = opendir(dir);
    if (d == NULL) {
        perror(dir);
        return 1;
    }

    fd = -1;
    while ((e = readdir(d)) != NULL) {
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        n = readlink(path, target, sizeof(target) - 1);
        if (n > 0) {
            target[n] = '\0';
            if (strncmp(target, "/memfd:ngx_llm_ring", 19) == 0) {
                fd = open(path, O_RDWR);
                break;
            }
        }
    }
    closedir(d);

    if (fd == -1 || fstat(fd, &st) == -1) {
        fprintf(stderr, "no ring memfd in %s\n", dir);
        return 1;
    }

    h = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (h == MAP_FAILED || llm_ring_check(h, st.st_size) != 0) {
        fprintf(stderr, "not a ring\n");
        return 1;
    }

    if (strcmp(argv[2], "slots") == 0) {
        for (i = 0; i < h->n_slots; i++) {
            sl = llm_ring_slot(h, i);
            if (atomic_load(&sl->state) != LLM_SLOT_FREE) {
                printf("%u %u %lld %llu\n", i, atomic_load(&sl->state),
                       (long long) sl->priority,
                       (unsigned long long) sl->fair_key);
            }
        }
        return 0;
    }

    /*
     * The engine stores each slot's out_head from its own load: an add
     * that lands between its load and store is undone (t/030 saw it once
     * under load). Add again until the slot shows it, or has ended.
     */
    n = 0;
    for (i = 0; i < h->n_slots; i++) {
        uint32_t  want;
        int       tries;

        sl = llm_ring_slot(h, i);
        if (atomic_load(&sl->state) != LLM_SLOT_RUNNING) {
            continue;
        }
        want = atomic_fetch_add(&sl->out_head, 100000) + 100000;
        for (tries = 0; tries < 50; tries++) {
            usleep(20000);
            if (atomic_load(&sl->state) != LLM_SLOT_RUNNING
                || atomic_load(&sl->out_head) >= want)
            {
                break;
            }
            want = atomic_fetch_add(&sl->out_head, 100000) + 100000;
        }
        n++;
    }

    printf("%d\n", n);
    return n ? 0 : 1;
}
