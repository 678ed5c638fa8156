#ifndef ACCESSORY_CEPOLL_H
#define ACCESSORY_CEPOLL_H

#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

// Whether epoll accepts `fd`: 0 only when epoll_ctl refuses it with EPERM (a file that is
// always ready: a regular file, /dev/null, /dev/zero); 1 when it accepts it or when the
// question cannot be asked. Asked on an epoll instance of its own, closed before returning.
// (Glibc's Swift module does not include <sys/epoll.h>.)
static inline int accessory_epoll_accepts(int fd) {
    int epoll = epoll_create1(EPOLL_CLOEXEC);
    if (epoll < 0) return 1;
    struct epoll_event event = {.events = EPOLLIN};
    int added = epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event);
    int refused = added != 0 && errno == EPERM;
    close(epoll);
    return !refused;
}

#endif
