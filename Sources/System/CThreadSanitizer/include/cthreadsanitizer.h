#ifndef ACCESSORY_CTHREADSANITIZER_H
#define ACCESSORY_CTHREADSANITIZER_H

// ThreadSanitizer's annotation entry points (compiler-rt, sanitizer/tsan_interface.h), declared
// weak: in a build without -sanitize=thread nothing defines them, their addresses are null, and
// the wrappers below do nothing but that one test.
void __tsan_acquire(void *addr) __attribute__((weak));
void __tsan_release(void *addr) __attribute__((weak));

// Tells ThreadSanitizer that this thread now holds the lock identified by `addr`: everything the
// last releaser of `addr` did happens before what this thread does next.
static inline void accessory_tsan_acquire(void *addr) {
    if (__tsan_acquire) __tsan_acquire(addr);
}

// Tells ThreadSanitizer that this thread is about to give up the lock identified by `addr`.
static inline void accessory_tsan_release(void *addr) {
    if (__tsan_release) __tsan_release(addr);
}

#endif
