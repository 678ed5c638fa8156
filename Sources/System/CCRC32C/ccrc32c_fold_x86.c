// The folding kernels of ccrc32c.c (x86-64): carry-less multiplies on 512-bit registers
// (AVX-512F + VPCLMULQDQ) or 256-bit ones (AVX2 + VPCLMULQDQ). ccrc32c.c chooses among them and
// the crc32 instruction alone, and finishes what they leave.
#if defined(__x86_64__)
#include <immintrin.h>

#include "ccrc32c_x86.h"

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
// A Python model of ccrc32c_fold512 with them (in the commit message that added it) matched the
// bitwise CRC for every length 64-1099 and three longer ones; CRC32CTests in
// AccessorySessionTests checks this code against the tables and the bitwise definition.
//
// Below 128 bytes the fixed cost (the final folds, two crc32 of latency 3) loses to crc32 alone:
// 112 bytes take 12.9 ns against 11.4 (each call's CRC feeding the next), 128 bytes 10.0 against
// 13.0. From 128 to 255 bytes one register folds 64 bytes a step.
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
uint32_t ccrc32c_fold512(uint32_t crc, const unsigned char *next, size_t count) {
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

// The same folding on 256-bit registers, for CPUs with VPCLMULQDQ but no AVX-512 (AMD Zen 3,
// Intel Alder Lake's cores): eight registers of two lanes each fold 256 bytes a step (sixteen
// independent multiplies, as above), then fold into the last register one by one (the
// multiplies independent, only the xors chain), its low lane 16 bytes on onto its high lane, and
// two crc32 reduce what is left. Without AVX-512VL there is no three-way xor: two xors instead.
#define FOLD256_TARGET __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.2")))

FOLD256_TARGET
static inline __m256i fold256_into(__m256i lanes, __m256i k, __m256i into) {
    return _mm256_xor_si256(
        _mm256_xor_si256(_mm256_clmulepi64_epi128(lanes, k, 0x00), _mm256_clmulepi64_epi128(lanes, k, 0x11)), into);
}

FOLD256_TARGET
static inline __m256i fold256_constants(uint32_t low, uint32_t high) {
    return _mm256_broadcastsi128_si256(_mm_set_epi64x(high, low));
}

FOLD256_TARGET
static inline __m256i load256(const unsigned char *p) { return _mm256_loadu_si256((const __m256i *)p); }

// Eight registers (256 bytes) at `p`, the CRC so far xored into the first bytes.
FOLD256_TARGET
static inline __attribute__((always_inline)) void fold256_load8(__m256i x[8], const unsigned char *p, uint32_t crc) {
    for (int i = 0; i < 8; i++) x[i] = load256(p + 32 * i);
    x[0] = _mm256_xor_si256(x[0], _mm256_zextsi128_si256(_mm_cvtsi32_si128((int)crc)));
}

// Each register folded 256 bytes on, into the next 256 bytes at `p`.
FOLD256_TARGET
static inline __attribute__((always_inline)) void fold256_step8(__m256i x[8], __m256i k256, const unsigned char *p) {
    for (int i = 0; i < 8; i++) x[i] = fold256_into(x[i], k256, load256(p + 32 * i));
}

// The eight registers folded into one (the multiplies independent, only the xors chain).
FOLD256_TARGET
static inline __attribute__((always_inline)) __m256i fold256_merge8(const __m256i x[8]) {
    __m256i last = x[7];
    last = fold256_into(x[0], fold256_constants(0x71d111a8, 0x83348832), last);  // 224 bytes on
    last = fold256_into(x[1], fold256_constants(0xa87ab8a8, 0xab7aff2a), last);  // 192
    last = fold256_into(x[2], fold256_constants(0x1b3d8f29, 0x878a92a7), last);  // 160
    last = fold256_into(x[3], fold256_constants(0x6992cea2, 0x0d3b6092), last);  // 128
    last = fold256_into(x[4], fold256_constants(0xc49f4f67, 0x0715ce53), last);  // 96
    last = fold256_into(x[5], fold256_constants(0x740eef02, 0x9e4addf8), last);  // 64
    return fold256_into(x[6], fold256_constants(0x3da6d0cb, 0xba4fc28e), last);  // 32
}

// One register's low lane folded 16 bytes on onto its high lane, and two crc32 reduce that to
// the CRC register.
FOLD256_TARGET
static inline __attribute__((always_inline)) uint32_t fold256_reduce(__m256i x) {
    const __m128i k16 = _mm_set_epi64x(0x493c7d27, 0xf20c0dfe);
    __m128i low = _mm256_castsi256_si128(x);
    __m128i lane = _mm_xor_si128(
        _mm_xor_si128(_mm_clmulepi64_si128(low, k16, 0x00), _mm_clmulepi64_si128(low, k16, 0x11)),
        _mm256_extracti128_si256(x, 1));
    uint64_t reduced = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(lane));
    return (uint32_t)_mm_crc32_u64(reduced, (uint64_t)_mm_extract_epi64(lane, 1));
}

// The register after `count` bytes, a multiple of 32 (at least 32).
FOLD256_TARGET
uint32_t ccrc32c_fold256(uint32_t crc, const unsigned char *next, size_t count) {
    const __m256i k32 = fold256_constants(0x3da6d0cb, 0xba4fc28e);
    __m256i x0;
    if (count >= 256) {
        const __m256i k256 = fold256_constants(0xdcb17aa4, 0xb9e02b86);
        __m256i x[8];
        fold256_load8(x, next, crc);
        for (next += 256, count -= 256; count >= 256; next += 256, count -= 256) fold256_step8(x, k256, next);
        x0 = fold256_merge8(x);
    } else {
        x0 = _mm256_xor_si256(load256(next), _mm256_zextsi128_si256(_mm_cvtsi32_si128((int)crc)));
        next += 32;
        count -= 32;
    }
    for (; count >= 32; next += 32, count -= 32) x0 = fold256_into(x0, k32, load256(next));
    return fold256_reduce(x0);
}

// Folding on 256-bit registers runs at about the crc32 instruction's 8 bytes a cycle on a Zen 3
// (VPCLMULQDQ on 256 bits issues every other cycle there), but on other execution units: so
// both run at once. Each 7 KiB block is 4 KiB folded (16 steps of 256 bytes) while three crc32
// chains, from 0, take 1 KiB each (8 words each per step); the fold's register, reduced, is the
// CRC after the first 4 KiB, and each chain's CRC is appended to it by "appending zeros" (the
// 1 KiB tables) and an xor, as ccrc32c.c's crc32c_3way combines its blocks.
FOLD256_TARGET
static inline __attribute__((always_inline)) void crc32_step3(uint64_t c[3], const unsigned char *p) {
    for (int word = 0; word < HYBRID_STEP; word += 8) {
        c[0] = _mm_crc32_u64(c[0], load64(p + word));
        c[1] = _mm_crc32_u64(c[1], load64(p + HYBRID_CHAIN + word));
        c[2] = _mm_crc32_u64(c[2], load64(p + 2 * HYBRID_CHAIN + word));
    }
}

FOLD256_TARGET
uint32_t ccrc32c_hybrid256(uint32_t crc, const unsigned char *next, size_t count) {
    const __m256i k256 = fold256_constants(0xdcb17aa4, 0xb9e02b86);
    for (; count >= HYBRID_BLOCK; next += HYBRID_BLOCK, count -= HYBRID_BLOCK) {
        const unsigned char *chain = next + HYBRID_FOLD;
        uint64_t c[3] = {0, 0, 0};
        __m256i x[8];
        fold256_load8(x, next, crc);
        crc32_step3(c, chain);
        for (int step = 1; step < HYBRID_FOLD / 256; step++) {
            fold256_step8(x, k256, next + 256 * step);
            crc32_step3(c, chain + HYBRID_STEP * step);
        }
        crc = fold256_reduce(fold256_merge8(x));
        crc = ccrc32c_append_hybrid_chain(crc) ^ (uint32_t)c[0];
        crc = ccrc32c_append_hybrid_chain(crc) ^ (uint32_t)c[1];
        crc = ccrc32c_append_hybrid_chain(crc) ^ (uint32_t)c[2];
    }
    return crc;
}

#endif
