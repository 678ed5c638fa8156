#ifndef CLINUXAIO_H
#define CLINUXAIO_H

// Linux native AIO (io_setup(2) and friends) for FunctionFS endpoint files, which accept it so
// that several USB requests can be queued on an endpoint and each abandoned with io_cancel(2).
// glibc has no wrappers for these system calls and Swift cannot call the variadic syscall(2),
// hence these few functions. Each returns what the system call does, or -errno on failure.

#include <linux/aio_abi.h>
#include <stddef.h>
#include <stdint.h>

/// io_setup(2): a context for up to `depth` operations in flight. 0 or -errno.
int clinuxaio_setup(unsigned depth, aio_context_t *context);

/// A non-blocking, close-on-exec eventfd(2) for completions to signal: its descriptor or -errno.
int clinuxaio_eventfd(void);

/// io_destroy(2): cancels what is in flight, waits for it, frees the context. 0 or -errno.
int clinuxaio_destroy(aio_context_t context);

/// Fills `block` for one read (`is_write` 0) or write (1) of `length` bytes at offset 0 of
/// `descriptor`; its completion adds 1 to the eventfd `event_descriptor` and carries `tag`.
void clinuxaio_prepare(struct iocb *block, int is_write, int descriptor, void *buffer, size_t length,
                       int event_descriptor, uint64_t tag);

/// io_submit(2) of one prepared block: 1 or -errno.
int clinuxaio_submit(aio_context_t context, struct iocb *block);

/// io_cancel(2): 0 (cancelled, no event follows), -EINPROGRESS (cancelling: its event follows,
/// usually with -ECONNRESET), or another -errno (already complete, say).
int clinuxaio_cancel(aio_context_t context, struct iocb *block);

/// io_getevents(2) without waiting: up to `maximum` completions into `events`. Count or -errno.
int clinuxaio_reap(aio_context_t context, long maximum, struct io_event *events);

#endif
