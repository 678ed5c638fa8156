#ifndef CCRC32C_H
#define CCRC32C_H

#include <stddef.h>
#include <stdint.h>

/// Whether this CPU has a CRC-32C instruction (x86-64 SSE4.2 `crc32`, ARMv8 `crc32c*`).
int ccrc32c_hardware_available(void);

/// Continues the CRC-32C register `crc` (already inverted: ~0 at the start) over `count` bytes
/// with the fastest kernel this CPU runs (on x86-64 with VPCLMULQDQ, carry-less multiplies for
/// 128 bytes or more). Call only when ccrc32c_hardware_available() returned 1.
uint32_t ccrc32c_hardware_update(uint32_t crc, const void *bytes, size_t count);

/// The kernels: the CRC instruction alone, and folding with carry-less multiplies on 256-bit
/// (AVX2 + VPCLMULQDQ) or 512-bit (AVX-512F + VPCLMULQDQ) registers, which the CRC instruction
/// finishes.
enum {
    CCRC32C_KERNEL_CRC32 = 0,
    CCRC32C_KERNEL_FOLD256 = 1,
    CCRC32C_KERNEL_FOLD512 = 2,
};

/// The kernels this CPU and OS can run, as a mask of `1 << CCRC32C_KERNEL_…`; 0 when
/// ccrc32c_hardware_available() is 0.
int ccrc32c_kernels(void);

/// ccrc32c_hardware_update with one kernel, for tests and benchmarks that check each kernel the
/// machine has; a kernel that ccrc32c_kernels() does not list runs as CCRC32C_KERNEL_CRC32. Call
/// only when ccrc32c_hardware_available() returned 1.
uint32_t ccrc32c_kernel_update(int kernel, uint32_t crc, const void *bytes, size_t count);

#endif
