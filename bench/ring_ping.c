/*
 * Ring round-trip latency: what a health check or a request submission
 * costs between a worker and the engine, without HTTP.
 *
 *   build/bench/ring_ping ENGINE MODEL [N]
 *
 * Starts the engine as nginx would (its own socket name, this process as
 * its "master"), connects, maps the ring, and times N PING round trips:
 * claim a slot, submit, KICK, wait for the WAKE, see DONE, free the slot.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "ring/ring_client.h"


static double
now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}


static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;

    return x < y ? -1 : x > y;
}


int
main(int argc, char **argv)
{
    int               fd, i, n, warm;
    char              name[64], pidbuf[32];
    pid_t             pid;
    double           *rtt, t0, sum;
    uint32_t          client_id, expected;
    llm_msg           kick, wake;
    llm_slot         *sl;
    llm_ring_header  *ring;

    if (argc < 3) {
        fprintf(stderr, "usage: %s ENGINE MODEL [N]\n", argv[0]);
        return 2;
    }
    n = argc > 3 ? atoi(argv[3]) : 20000;

    snprintf(name, sizeof(name), "ngx_llm_bench/%d", (int) getpid());
    snprintf(pidbuf, sizeof(pidbuf), "%d", (int) getpid());

    pid = fork();
    if (pid == 0) {
        execl(argv[1], "ngx_llm_engine", "serve", "--name", "bench",
              "--socket", name, "--master-pid", pidbuf, "--model", argv[2],
              (char *) NULL);
        _exit(127);
    }

    fd = llm_ring_connect(name, 200);
    if (fd == -1 || (ring = llm_ring_hello(fd, &client_id)) == NULL) {
        fprintf(stderr, "cannot connect to the engine\n");
        return 1;
    }

    rtt = calloc(n, sizeof(double));
    memset(&kick, 0, sizeof(kick));
    kick.type = LLM_MSG_KICK;
    sl = llm_ring_slot(ring, 0);
    warm = n / 10;

    for (i = 0; i < n + warm; i++) {
        expected = LLM_SLOT_FREE;
        if (!atomic_compare_exchange_strong(&sl->state, &expected,
                                            LLM_SLOT_CLAIMED))
        {
            fprintf(stderr, "slot 0 busy\n");
            return 1;
        }
        sl->owner = client_id;
        sl->kind = LLM_KIND_PING;

        t0 = now_us();
        atomic_store(&sl->state, LLM_SLOT_SUBMITTED);
        send(fd, &kick, sizeof(kick), 0);

        while (atomic_load(&sl->state) != LLM_SLOT_DONE) {
            if (recv(fd, &wake, sizeof(wake), 0) <= 0) {
                fprintf(stderr, "engine gone\n");
                return 1;
            }
        }
        if (i >= warm) {
            rtt[i - warm] = now_us() - t0;
        }

        sl->owner = 0;
        atomic_store(&sl->state, LLM_SLOT_FREE);
    }

    qsort(rtt, n, sizeof(double), cmp_double);
    for (sum = 0, i = 0; i < n; i++) {
        sum += rtt[i];
    }

    printf("ring round trip (PING over the ring + unix-socket doorbell), "
           "%d trips:\n  mean %.1f us  p50 %.1f us  p99 %.1f us  "
           "max %.1f us\n", n, sum / n, rtt[n / 2], rtt[n * 99 / 100],
           rtt[n - 1]);

    close(fd);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    return 0;
}
