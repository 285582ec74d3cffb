/* CRC-32C (Castagnoli; record batches, magic 2) and CRC-32 (IEEE/zlib; messages, magic 0/1).
 *
 * CRC-32C uses the SSE4.2 crc32 instruction when the CPU has it (checked once at start-up),
 * running three independent streams over 8 KiB / 256-byte blocks and combining them with
 * "append N zero bytes" operators, because one stream is bound by the instruction's 3-cycle
 * latency. Other CPUs, and CRC-32, use slicing-by-8 tables. The zeros-operator construction
 * follows the well-known GF(2) matrix method (square the one-zero-bit operator).
 * Both functions continue a running CRC: crc(a+b) == crc_update(crc_update(0, a), b).
 */
#ifndef KPROTO_CRC_H
#define KPROTO_CRC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KP_CRC32C_POLY 0x82f63b78u
#define KP_CRC32_POLY 0xedb88320u

static uint32_t kp_crc32c_table[8][256];
static uint32_t kp_crc32_table[8][256];
static int kp_have_sse42 = 0;

static void kp_fill_tables(uint32_t t[8][256], uint32_t poly) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ poly : c >> 1;
        t[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = t[0][n];
        for (int k = 1; k < 8; k++) {
            c = t[0][c & 0xff] ^ (c >> 8);
            t[k][n] = c;
        }
    }
}

static uint32_t kp_crc_sw(const uint32_t t[8][256], uint32_t crc, const unsigned char *p,
                          size_t len) {
    crc = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        crc = t[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        len--;
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^
              t[4][(w >> 24) & 0xff] ^ t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^
              t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
        p += 8;
        len -= 8;
    }
#endif
    while (len--) crc = t[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define KP_LONG 8192
#define KP_SHORT 256
static uint32_t kp_crc32c_long[4][256];
static uint32_t kp_crc32c_short[4][256];

static uint32_t kp_gf2_times(const uint32_t *mat, uint32_t vec) {
    uint32_t sum = 0;
    while (vec) {
        if (vec & 1) sum ^= *mat;
        vec >>= 1;
        mat++;
    }
    return sum;
}

static void kp_gf2_square(uint32_t *square, const uint32_t *mat) {
    for (int n = 0; n < 32; n++) square[n] = kp_gf2_times(mat, mat[n]);
}

/* The operator that appends len (a power of two) zero bytes to a CRC-32C. */
static void kp_zeros_op(uint32_t *even, size_t len) {
    uint32_t odd[32], row = 1;
    odd[0] = KP_CRC32C_POLY;
    for (int n = 1; n < 32; n++) {
        odd[n] = row;
        row <<= 1;
    }
    kp_gf2_square(even, odd); /* 2 zero bits */
    kp_gf2_square(odd, even); /* 4 zero bits */
    do {                      /* 8 zero bits = 1 byte, then doubling */
        kp_gf2_square(even, odd);
        len >>= 1;
        if (len == 0) return;
        kp_gf2_square(odd, even);
        len >>= 1;
    } while (len);
    memcpy(even, odd, sizeof(odd));
}

static void kp_zeros_table(uint32_t zeros[4][256], size_t len) {
    uint32_t op[32];
    kp_zeros_op(op, len);
    for (uint32_t n = 0; n < 256; n++) {
        zeros[0][n] = kp_gf2_times(op, n);
        zeros[1][n] = kp_gf2_times(op, n << 8);
        zeros[2][n] = kp_gf2_times(op, n << 16);
        zeros[3][n] = kp_gf2_times(op, n << 24);
    }
}

static inline uint32_t kp_shift(uint32_t zeros[4][256], uint32_t crc) {
    return zeros[0][crc & 0xff] ^ zeros[1][(crc >> 8) & 0xff] ^ zeros[2][(crc >> 16) & 0xff] ^
           zeros[3][crc >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t kp_crc32c_hw(uint32_t crc,
                                                             const unsigned char *next,
                                                             size_t len) {
    uint64_t crc0 = crc ^ 0xffffffffu, crc1, crc2, w0, w1, w2;
    const unsigned char *end;
    while (len && ((uintptr_t)next & 7)) {
        crc0 = _mm_crc32_u8((uint32_t)crc0, *next++);
        len--;
    }
    while (len >= KP_LONG * 3) {
        crc1 = crc2 = 0;
        end = next + KP_LONG;
        do {
            memcpy(&w0, next, 8);
            memcpy(&w1, next + KP_LONG, 8);
            memcpy(&w2, next + 2 * KP_LONG, 8);
            crc0 = _mm_crc32_u64(crc0, w0);
            crc1 = _mm_crc32_u64(crc1, w1);
            crc2 = _mm_crc32_u64(crc2, w2);
            next += 8;
        } while (next < end);
        crc0 = kp_shift(kp_crc32c_long, (uint32_t)crc0) ^ (uint32_t)crc1;
        crc0 = kp_shift(kp_crc32c_long, (uint32_t)crc0) ^ (uint32_t)crc2;
        next += 2 * KP_LONG;
        len -= 3 * KP_LONG;
    }
    while (len >= KP_SHORT * 3) {
        crc1 = crc2 = 0;
        end = next + KP_SHORT;
        do {
            memcpy(&w0, next, 8);
            memcpy(&w1, next + KP_SHORT, 8);
            memcpy(&w2, next + 2 * KP_SHORT, 8);
            crc0 = _mm_crc32_u64(crc0, w0);
            crc1 = _mm_crc32_u64(crc1, w1);
            crc2 = _mm_crc32_u64(crc2, w2);
            next += 8;
        } while (next < end);
        crc0 = kp_shift(kp_crc32c_short, (uint32_t)crc0) ^ (uint32_t)crc1;
        crc0 = kp_shift(kp_crc32c_short, (uint32_t)crc0) ^ (uint32_t)crc2;
        next += 2 * KP_SHORT;
        len -= 3 * KP_SHORT;
    }
    end = next + (len - (len & 7));
    while (next < end) {
        memcpy(&w0, next, 8);
        crc0 = _mm_crc32_u64(crc0, w0);
        next += 8;
    }
    len &= 7;
    while (len--) crc0 = _mm_crc32_u8((uint32_t)crc0, *next++);
    return (uint32_t)crc0 ^ 0xffffffffu;
}
#endif

static void kp_crc_init(void) {
    kp_fill_tables(kp_crc32c_table, KP_CRC32C_POLY);
    kp_fill_tables(kp_crc32_table, KP_CRC32_POLY);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        kp_zeros_table(kp_crc32c_long, KP_LONG);
        kp_zeros_table(kp_crc32c_short, KP_SHORT);
        kp_have_sse42 = 1;
    }
#endif
}

static inline uint32_t crc32c_update(uint32_t crc, const unsigned char *p, size_t len) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (kp_have_sse42) return kp_crc32c_hw(crc, p, len);
#endif
    return kp_crc_sw(kp_crc32c_table, crc, p, len);
}

static inline uint32_t crc32c_update_sw(uint32_t crc, const unsigned char *p, size_t len) {
    return kp_crc_sw(kp_crc32c_table, crc, p, len);
}

static inline uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t len) {
    return kp_crc_sw(kp_crc32_table, crc, p, len);
}

#endif
