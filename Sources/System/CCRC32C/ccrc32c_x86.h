// What ccrc32c.c and ccrc32c_fold_x86.c share on x86-64 (not part of the module's interface).
#ifndef CCRC32C_X86_H
#define CCRC32C_X86_H
#if defined(__x86_64__)

#include <stddef.h>
#include <stdint.h>
#include <string.h>

// Where folding starts to pay (the measurements are in ccrc32c_fold_x86.c).
#define FOLD_MIN 128

// The 256-bit kernel's hybrid block (see ccrc32c_hybrid256): 4 KiB folded while three crc32
// chains take 1 KiB each.
#define HYBRID_FOLD 4096
#define HYBRID_CHAIN 1024
#define HYBRID_BLOCK (HYBRID_FOLD + 3 * HYBRID_CHAIN)
#define HYBRID_STEP (HYBRID_CHAIN / (HYBRID_FOLD / 256))

static inline uint64_t load64(const unsigned char *p) {
    uint64_t word;
    memcpy(&word, p, 8);
    return word;
}

// The CRC register after `count` bytes from `crc`; `count` a multiple of 64 (at least 64).
uint32_t ccrc32c_fold512(uint32_t crc, const unsigned char *next, size_t count);
// The same, `count` a multiple of 32 (at least 32).
uint32_t ccrc32c_fold256(uint32_t crc, const unsigned char *next, size_t count);
// The same, `count` a multiple of HYBRID_BLOCK.
uint32_t ccrc32c_hybrid256(uint32_t crc, const unsigned char *next, size_t count);
// `crc` followed by HYBRID_CHAIN zero bytes (ccrc32c.c's tables).
uint32_t ccrc32c_append_hybrid_chain(uint32_t crc);

#endif
#endif
