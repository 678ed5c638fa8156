// CRC-32C with the CPU's own instructions: the session layer checks every byte it carries, and
// the instructions are several times faster than any table. On x86-64 that is the SSE4.2 crc32
// instruction, three-way interleaved; from FOLD_MIN bytes on, on CPUs with AVX-512 and VPCLMULQDQ
// (and an OS that saves ZMM state), carry-less multiplies fold 256 bytes a step instead (a 16 KiB
// frame at 59 GB/s against 27 on a Zen 4) and crc32 finishes. ARMv8 uses its crc32c
// instructions. The Swift side (CRC32C.swift) falls back to slicing-by-8 tables when the CPU has
// none of these.
#include "ccrc32c.h"

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

// Whether the folding path can run: the instructions (CPUID) and the OS saving the opmask and
// ZMM registers across context switches (XCR0 bits 1, 2, 5, 6, 7: SSE, AVX, opmask, ZMM0-15
// upper halves, ZMM16-31), without which the first AVX-512 instruction faults.
static int fold_usable;

static int fold_supported(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    if ((ecx & bit_PCLMUL) == 0 || (ecx & bit_OSXSAVE) == 0) return 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return 0;
    if ((ebx & bit_AVX512F) == 0 || (ecx & bit_VPCLMULQDQ) == 0) return 0;
    unsigned int xcr0_low, xcr0_high;
    __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
    return (xcr0_low & 0xe6) == 0xe6;
}

// Once: the tables, and whether the folding path can run.
static void prepare(void) {
    zeros_tables(zeros_long, LONG_BLOCK);
    zeros_tables(zeros_short, SHORT_BLOCK);
    fold_usable = fold_supported();
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

static inline uint64_t load64(const unsigned char *p) {
    uint64_t word;
    memcpy(&word, p, 8);
    return word;
}

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

// From FOLD_MIN bytes on, carry-less multiplication (Intel's "Fast CRC Computation for Generic
// Polynomials Using PCLMULQDQ", on 512-bit registers as in ISA-L's crc32_iscsi_by16_10). A
// 16-byte lane L is the bit-reflected image of a 128-bit polynomial; moved d bytes on, it is
// congruent mod P to clmul(L.lo, K(8d + 31)) ^ clmul(L.hi, K(8d - 33)), a 96-bit value to xor
// into the lane found d bytes on. K(n) is x^n mod P bit-reflected in 32 bits; the odd exponents
// absorb the x^33 that multiplying a reflected 64-bit by a reflected 32-bit value adds. Four
// registers folding 256 bytes on keep four VPCLMULQDQ chains in flight, so that the
// instruction's throughput bounds the loop rather than its latency (eight registers, 512 bytes a
// step, measured no faster on Zen 4: 16 bytes a cycle either way). At the end the four registers
// fold into one and its four lanes into one; what is left is congruent to the bytes it stands
// for, so two crc32 instructions over it (from 0) reduce it to the 32-bit register, with no
// Barrett step.
// The constants, from Python:
//   P = 0x11EDC6F41  # x^32 + ..., whose bit reflection is 0x82F63B78
//   def K(n):  # x^n mod P, bit-reflected
//       r = 1
//       for _ in range(n): r = (r << 1) ^ (P if r >> 31 else 0)
//       return int(f"{r:032b}"[::-1], 2)
//   for d in (256, 192, 128, 64, 48, 32, 16): print(d, hex(K(8*d + 31)), hex(K(8*d - 33)))
// A Python model of crc32c_fold with them (in the commit message that added it) matched the
// bitwise CRC for every length 64-1099 and three longer ones; CRC32CTests in
// AccessorySessionTests checks this code against the tables and the bitwise definition.
//
// Below 128 bytes the fixed cost (the final folds, two crc32 of latency 3) loses to crc32 alone:
// 112 bytes take 12.9 ns against 11.4 (each call's CRC feeding the next), 128 bytes 10.0 against
// 13.0. From 128 to 255 bytes one register folds 64 bytes a step.
#define FOLD_MIN 128

#define FOLD_TARGET __attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2")))

FOLD_TARGET
static inline __m512i fold_into(__m512i lanes, __m512i k, __m512i into) {
    return _mm512_ternarylogic_epi64(
        _mm512_clmulepi64_epi128(lanes, k, 0x00), _mm512_clmulepi64_epi128(lanes, k, 0x11), into, 0x96);
}

FOLD_TARGET
static inline __m512i fold_constants(uint32_t low, uint32_t high) {
    return _mm512_broadcast_i32x4(_mm_set_epi64x(high, low));
}

// The register after `count` bytes, a multiple of 64 (at least 64).
FOLD_TARGET
static uint32_t crc32c_fold(uint32_t crc, const unsigned char *next, size_t count) {
    const __m512i k64 = fold_constants(0x740eef02, 0x9e4addf8);
    __m512i x0 = _mm512_xor_si512(_mm512_loadu_si512(next), _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc)));
    if (count >= 256) {
        const __m512i k256 = fold_constants(0xdcb17aa4, 0xb9e02b86);
        __m512i x1 = _mm512_loadu_si512(next + 64);
        __m512i x2 = _mm512_loadu_si512(next + 128);
        __m512i x3 = _mm512_loadu_si512(next + 192);
        next += 256;
        count -= 256;
        while (count >= 256) {
            x0 = fold_into(x0, k256, _mm512_loadu_si512(next));
            x1 = fold_into(x1, k256, _mm512_loadu_si512(next + 64));
            x2 = fold_into(x2, k256, _mm512_loadu_si512(next + 128));
            x3 = fold_into(x3, k256, _mm512_loadu_si512(next + 192));
            next += 256;
            count -= 256;
        }
        // The multiplies are independent; only the xors chain.
        x3 = fold_into(x0, fold_constants(0xa87ab8a8, 0xab7aff2a), x3);
        x3 = fold_into(x1, fold_constants(0x6992cea2, 0x0d3b6092), x3);
        x0 = fold_into(x2, k64, x3);
    } else {
        next += 64;
        count -= 64;
    }
    while (count >= 64) {
        x0 = fold_into(x0, k64, _mm512_loadu_si512(next));
        next += 64;
        count -= 64;
    }
    // Lanes 0-2 move 48, 32 and 16 bytes on onto lane 3 (whose constants, 0, drop it from the
    // products; it comes in through the mask).
    const __m512i k_lanes =
        _mm512_set_epi64(0, 0, 0x493c7d27, 0xf20c0dfe, 0xba4fc28e, 0x3da6d0cb, 0xddc0152b, 0x1c291d04);
    __m512i folded = fold_into(x0, k_lanes, _mm512_maskz_mov_epi64(0xc0, x0));
    __m256i half = _mm256_xor_si256(_mm512_castsi512_si256(folded), _mm512_extracti64x4_epi64(folded, 1));
    __m128i lane = _mm_xor_si128(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
    uint64_t reduced = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(lane));
    return (uint32_t)_mm_crc32_u64(reduced, (uint64_t)_mm_extract_epi64(lane, 1));
}

__attribute__((target("sse4.2")))
uint32_t ccrc32c_hardware_update(uint32_t crc, const void *bytes, size_t count) {
    const unsigned char *next = bytes;
    if (count >= FOLD_MIN && fold_usable) {
        size_t head = count & ~(size_t)63;
        crc = crc32c_fold(crc, next, head);
        next += head;
        count -= head;
    }
    return crc32c_3way(crc, next, count);
}

#elif defined(__aarch64__)
#include <arm_acle.h>
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif

int ccrc32c_hardware_available(void) { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }

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

#else
int ccrc32c_hardware_available(void) { return 0; }
uint32_t ccrc32c_hardware_update(uint32_t crc, const void *bytes, size_t count) {
    (void)bytes;
    (void)count;
    return crc;
}
#endif
