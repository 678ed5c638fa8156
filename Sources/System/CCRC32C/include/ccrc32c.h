#ifndef CCRC32C_H
#define CCRC32C_H

#include <stddef.h>
#include <stdint.h>

/// Whether this CPU has a CRC-32C instruction (x86-64 SSE4.2 `crc32`, ARMv8 `crc32c*`).
int ccrc32c_hardware_available(void);

/// Continues the CRC-32C register `crc` (already inverted: ~0 at the start) over `count` bytes
/// with the CPU's instructions (on x86-64 with AVX-512 and VPCLMULQDQ, carry-less multiplies for
/// 128 bytes or more). Call only when ccrc32c_hardware_available() returned 1.
uint32_t ccrc32c_hardware_update(uint32_t crc, const void *bytes, size_t count);

#endif
