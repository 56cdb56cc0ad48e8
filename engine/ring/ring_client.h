/*
 * A worker's side of the ring without nginx, for tools and tests
 * (bench/ring_ping.c, t/unit/test_ring.c): connect to an engine's socket,
 * take the HELLO and map the ring it carries.
 *
 * defines: llm_ring_connect, llm_ring_hello
 */
#ifndef NGX_LLM_RING_CLIENT_H
#define NGX_LLM_RING_CLIENT_H

#include <stddef.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "ring/ngx_llm_ring.h"


/* the engine's abstract socket; retried every 10 ms up to tries times */
static inline int
llm_ring_connect(const char *name, int tries)
{
    int                 fd, i;
    socklen_t           alen;
    struct sockaddr_un  sa;

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path + 1, name, strlen(name));
    alen = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name);

    for (i = 0; i < tries; i++) {
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (connect(fd, (struct sockaddr *) &sa, alen) == 0) {
            return fd;
        }
        close(fd);
        usleep(10000);
    }
    return -1;
}


/* the HELLO: the ring mapped and checked, our client id; NULL on failure */
static inline llm_ring_header *
llm_ring_hello(int fd, uint32_t *client_id)
{
    int              rfd;
    char             cbuf[CMSG_SPACE(sizeof(int))];
    void            *p;
    llm_msg          m;
    struct iovec     iov = { &m, sizeof(m) };
    struct msghdr    mh;
    struct cmsghdr  *cm;

    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof(cbuf);

    if (recvmsg(fd, &mh, 0) != sizeof(m) || m.type != LLM_MSG_HELLO
        || (cm = CMSG_FIRSTHDR(&mh)) == NULL || cm->cmsg_type != SCM_RIGHTS)
    {
        return NULL;
    }
    memcpy(&rfd, CMSG_DATA(cm), sizeof(int));

    p = mmap(NULL, m.ring_size, PROT_READ | PROT_WRITE, MAP_SHARED, rfd, 0);
    close(rfd);
    if (p == MAP_FAILED || llm_ring_check(p, m.ring_size) != 0) {
        return NULL;
    }

    *client_id = m.client_id;
    return p;
}

#endif
