#include "clinuxaio.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int result_or_errno(long result) { return result < 0 ? -errno : (int)result; }

int clinuxaio_setup(unsigned depth, aio_context_t *context) {
    *context = 0;
    return result_or_errno(syscall(__NR_io_setup, depth, context));
}

int clinuxaio_eventfd(void) { return result_or_errno(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)); }

int clinuxaio_destroy(aio_context_t context) { return result_or_errno(syscall(__NR_io_destroy, context)); }

void clinuxaio_prepare(struct iocb *block, int is_write, int descriptor, void *buffer, size_t length,
                       int event_descriptor, uint64_t tag) {
    memset(block, 0, sizeof *block);
    block->aio_data = tag;
    block->aio_lio_opcode = is_write ? IOCB_CMD_PWRITE : IOCB_CMD_PREAD;
    block->aio_fildes = (uint32_t)descriptor;
    block->aio_buf = (uint64_t)(uintptr_t)buffer;
    block->aio_nbytes = length;
    block->aio_offset = 0;
    block->aio_flags = IOCB_FLAG_RESFD;
    block->aio_resfd = (uint32_t)event_descriptor;
}

int clinuxaio_submit(aio_context_t context, struct iocb *block) {
    struct iocb *blocks[1] = {block};
    return result_or_errno(syscall(__NR_io_submit, context, 1L, blocks));
}

int clinuxaio_cancel(aio_context_t context, struct iocb *block) {
    struct io_event event;
    return result_or_errno(syscall(__NR_io_cancel, context, block, &event));
}

int clinuxaio_reap(aio_context_t context, long maximum, struct io_event *events) {
    struct timespec none = {0, 0};
    return result_or_errno(syscall(__NR_io_getevents, context, 0L, maximum, events, &none));
}
