// CRC-32C with the CPU's own instructions: the session layer checks every byte it carries, and
// the instructions are several times faster than any table. On x86-64 that is the SSE4.2 crc32
// instruction, three-way interleaved; from FOLD_MIN bytes on, on CPUs with VPCLMULQDQ (and an OS
// that saves the registers), carry-less multiplies fold 256 bytes a step instead
// (ccrc32c_fold_x86.c): on 512-bit registers with AVX-512 (a 16 KiB frame at 59 GB/s against 27
// on a Zen 4), or on 256-bit ones with AVX2 beside three chains of crc32 (33 GB/s against 23 on
// a Zen 3); crc32 finishes. ARMv8 uses its crc32c instructions. The Swift side (CRC32C.swift)
// falls back to slicing-by-8 tables when the CPU has none of these.
#include "ccrc32c.h"
#include "ccrc32c_x86.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>

// Three independent CRCs over three adjacent blocks run at the instruction's throughput rather
// than its latency (3 cycles); they are then combined by "appending zeros" to the first two,
// with tables that apply the CRC of BLOCK zero bytes (Mark Adler's method, as in zlib's
// crc32_combine and his crc32c.c).
#define POLY 0x82f63b78u
#define LONG_BLOCK 4096
#define SHORT_BLOCK 256

static uint32_t zeros_long[4][256];
static uint32_t zeros_short[4][256];
static uint32_t zeros_hybrid[4][256];
static pthread_once_t prepared = PTHREAD_ONCE_INIT;

static uint32_t gf2_matrix_times(const uint32_t *mat, uint32_t vec) {
    uint32_t sum = 0;
    while (vec) {
        if (vec & 1) sum ^= *mat;
        vec >>= 1;
        mat++;
    }
    return sum;
}

static void gf2_matrix_square(uint32_t *square, const uint32_t *mat) {
    for (int n = 0; n < 32; n++) square[n] = gf2_matrix_times(mat, mat[n]);
}

// The operator that appends `len` zero bytes (a power of two) to a CRC.
static void zeros_operator(uint32_t *even, size_t len) {
    uint32_t odd[32];
    odd[0] = POLY;
    uint32_t row = 1;
    for (int n = 1; n < 32; n++) {
        odd[n] = row;
        row <<= 1;
    }
    gf2_matrix_square(even, odd);  // two zero bits
    gf2_matrix_square(odd, even);  // four zero bits
    do {
        gf2_matrix_square(even, odd);  // one zero byte, then 4, 16, ...
        len >>= 1;
        if (len == 0) return;
        gf2_matrix_square(odd, even);  // two zero bytes, then 8, 32, ...
        len >>= 1;
    } while (len);
    for (int n = 0; n < 32; n++) even[n] = odd[n];
}

static void zeros_tables(uint32_t zeros[][256], size_t len) {
    uint32_t op[32];
    zeros_operator(op, len);
    for (uint32_t n = 0; n < 256; n++) {
        zeros[0][n] = gf2_matrix_times(op, n);
        zeros[1][n] = gf2_matrix_times(op, n << 8);
        zeros[2][n] = gf2_matrix_times(op, n << 16);
        zeros[3][n] = gf2_matrix_times(op, n << 24);
    }
}

// Which kernels can run: the instructions (CPUID) and the OS saving the registers they use
// across context switches (XCR0), without which the first such instruction faults. 256-bit
// folding needs AVX2 and VPCLMULQDQ with the SSE and AVX state saved (XCR0 bits 1, 2); 512-bit
// folding needs AVX-512F too, with the opmask and ZMM state saved (bits 5, 6, 7).
static int usable_kernels;
static int fastest_kernel = CCRC32C_KERNEL_CRC32;

static int supported_kernels(void) {
    int kernels = 1 << CCRC32C_KERNEL_CRC32;
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return kernels;
    if ((ecx & bit_PCLMUL) == 0 || (ecx & bit_OSXSAVE) == 0) return kernels;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return kernels;
    if ((ecx & bit_VPCLMULQDQ) == 0) return kernels;
    unsigned int xcr0_low, xcr0_high;
    __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
    if ((ebx & bit_AVX2) != 0 && (xcr0_low & 0x06) == 0x06) kernels |= 1 << CCRC32C_KERNEL_FOLD256;
    if ((ebx & bit_AVX512F) != 0 && (xcr0_low & 0xe6) == 0xe6) kernels |= 1 << CCRC32C_KERNEL_FOLD512;
    return kernels;
}

// Once: the tables, and which kernels can run.
static void prepare(void) {
    zeros_tables(zeros_long, LONG_BLOCK);
    zeros_tables(zeros_short, SHORT_BLOCK);
    zeros_tables(zeros_hybrid, HYBRID_CHAIN);
    usable_kernels = supported_kernels();
    for (int kernel = CCRC32C_KERNEL_FOLD512; kernel >= CCRC32C_KERNEL_CRC32; kernel--) {
        if (usable_kernels & (1 << kernel)) {
            fastest_kernel = kernel;
            break;
        }
    }
}

static uint32_t shift(uint32_t zeros[][256], uint32_t crc) {
    return zeros[0][crc & 0xff] ^ zeros[1][(crc >> 8) & 0xff] ^ zeros[2][(crc >> 16) & 0xff] ^ zeros[3][crc >> 24];
}

int ccrc32c_hardware_available(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    if ((ecx & bit_SSE4_2) == 0) return 0;
    pthread_once(&prepared, prepare);
    return 1;
}

int ccrc32c_kernels(void) { return ccrc32c_hardware_available() ? usable_kernels : 0; }

uint32_t ccrc32c_append_hybrid_chain(uint32_t crc) { return shift(zeros_hybrid, crc); }

__attribute__((target("sse4.2")))
static uint32_t crc32c_3way(uint32_t crc, const unsigned char *next, size_t count) {
    uint64_t crc0 = crc;
    while (count >= 3 * LONG_BLOCK) {
        uint64_t crc1 = 0, crc2 = 0;
        const unsigned char *end = next + LONG_BLOCK;
        do {
            crc0 = _mm_crc32_u64(crc0, load64(next));
            crc1 = _mm_crc32_u64(crc1, load64(next + LONG_BLOCK));
            crc2 = _mm_crc32_u64(crc2, load64(next + 2 * LONG_BLOCK));
            next += 8;
        } while (next < end);
        crc0 = shift(zeros_long, (uint32_t)crc0) ^ crc1;
        crc0 = shift(zeros_long, (uint32_t)crc0) ^ crc2;
        next += 2 * LONG_BLOCK;
        count -= 3 * LONG_BLOCK;
    }
    while (count >= 3 * SHORT_BLOCK) {
        uint64_t crc1 = 0, crc2 = 0;
        const unsigned char *end = next + SHORT_BLOCK;
        do {
            crc0 = _mm_crc32_u64(crc0, load64(next));
            crc1 = _mm_crc32_u64(crc1, load64(next + SHORT_BLOCK));
            crc2 = _mm_crc32_u64(crc2, load64(next + 2 * SHORT_BLOCK));
            next += 8;
        } while (next < end);
        crc0 = shift(zeros_short, (uint32_t)crc0) ^ crc1;
        crc0 = shift(zeros_short, (uint32_t)crc0) ^ crc2;
        next += 2 * SHORT_BLOCK;
        count -= 3 * SHORT_BLOCK;
    }
    while (count >= 8) {
        crc0 = _mm_crc32_u64(crc0, load64(next));
        next += 8;
        count -= 8;
    }
    uint32_t narrow = (uint32_t)crc0;
    while (count > 0) {
        narrow = _mm_crc32_u8(narrow, *next++);
        count--;
    }
    return narrow;
}

uint32_t ccrc32c_kernel_update(int kernel, uint32_t crc, const void *bytes, size_t count) {
    // A kernel this CPU cannot run would fault (SIGILL): the instruction alone instead.
    if (kernel < 0 || kernel > CCRC32C_KERNEL_FOLD512 || ((usable_kernels >> kernel) & 1) == 0) {
        kernel = CCRC32C_KERNEL_CRC32;
    }
    const unsigned char *next = bytes;
    if (count >= FOLD_MIN && kernel == CCRC32C_KERNEL_FOLD512) {
        size_t head = count & ~(size_t)63;
        crc = ccrc32c_fold512(crc, next, head);
        next += head;
        count -= head;
    } else if (count >= FOLD_MIN && kernel == CCRC32C_KERNEL_FOLD256) {
        if (count >= HYBRID_BLOCK) {
            size_t blocks = count - count % HYBRID_BLOCK;
            crc = ccrc32c_hybrid256(crc, next, blocks);
            next += blocks;
            count -= blocks;
        }
        if (count >= FOLD_MIN) {
            size_t head = count & ~(size_t)31;
            crc = ccrc32c_fold256(crc, next, head);
            next += head;
            count -= head;
        }
    }
    return crc32c_3way(crc, next, count);
}

uint32_t ccrc32c_hardware_update(uint32_t crc, const void *bytes, size_t count) {
    return ccrc32c_kernel_update(fastest_kernel, crc, bytes, count);
}

#elif defined(__aarch64__)
#include <arm_acle.h>
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif

int ccrc32c_hardware_available(void) { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }

int ccrc32c_kernels(void) { return ccrc32c_hardware_available() ? 1 << CCRC32C_KERNEL_CRC32 : 0; }

__attribute__((target("+crc")))
uint32_t ccrc32c_hardware_update(uint32_t crc, const void *bytes, size_t count) {
    const unsigned char *p = bytes;
    while (count >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        crc = __crc32cd(crc, word);
        p += 8;
        count -= 8;
    }
    while (count > 0) {
        crc = __crc32cb(crc, *p++);
        count--;
    }
    return crc;
}

uint32_t ccrc32c_kernel_update(int kernel, uint32_t crc, const void *bytes, size_t count) {
    (void)kernel;
    return ccrc32c_hardware_update(crc, bytes, count);
}

#else
int ccrc32c_hardware_available(void) { return 0; }
int ccrc32c_kernels(void) { return 0; }
uint32_t ccrc32c_kernel_update(int kernel, uint32_t crc, const void *bytes, size_t count) {
    (void)kernel;
    (void)bytes;
    (void)count;
    return crc;
}
uint32_t ccrc32c_hardware_update(uint32_t crc, const void *bytes, size_t count) {
    (void)bytes;
    (void)count;
    return crc;
}
#endif
