/* kproto/_crc.h: CRC-32C and CRC-32 for kproto._codec (no zlib, no other library).
 *
 * Where Kafka uses them:
 *   CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): record batch v2 (magic 2). The
 *     uint32 at batch byte 17 covers bytes 21..end (attributes to the last record).
 *   CRC-32 (IEEE 802.3, as zlib.crc32; reflected polynomial 0xEDB88320): legacy messages
 *     (magic 0/1). The uint32 at message byte 12 covers magic..end.
 * Both invert before and after, so update(update(0, a), b) == update(0, a || b): the
 * continuation convention of zlib.crc32 and of the crc32c package.
 *
 * Why it is built this way:
 *   - With SSE4.2 (x86), the crc32 instruction eats 8 bytes, but its 3-cycle latency makes
 *     one dependent chain run at a third of the unit's throughput. Big inputs are therefore
 *     split into three adjacent blocks run as independent chains; the three partial CRCs are
 *     joined with "append N zero bytes" tables (the CRC register update is linear over
 *     GF(2): crc(r, A||B) = zeros_B(crc(r, A)) ^ crc(0, B)). The CPU is checked once at
 *     run time (__builtin_cpu_supports), so one binary runs on every x86.
 *   - On 64-bit ARM (ARMv8.0 has CRC32C as an optional extension; every ARMv8.1+ core,
 *     Graviton, Ampere and Apple included, has it), the crc32cx instruction plays the same
 *     role, in the same three-chain loop. Its use is checked once at run time through the
 *     kernel's hwcaps (getauxval(AT_HWCAP) & HWCAP_CRC32), unless the compiler was told the
 *     target has it (-march=armv8-a+crc and newer: __ARM_FEATURE_CRC32).
 *   - On x86 with AVX-512 and VPCLMULQDQ (Ice Lake, Sapphire Rapids, Zen 4 and later), long
 *     inputs are folded instead: carry-less multiplications by x^F mod P move 64-byte blocks
 *     forward by F bits, sixteen 128-bit lanes at a time (four zmm registers), and the
 *     crc32 instruction finishes the last 16 bytes. The fold constants are computed at
 *     import from the polynomial (kp_fold_init), not typed in. About three times the crc32
 *     instruction's 8 bytes a cycle, which the record decoder's CRC pass is bound by.
 *   - Everywhere else, and for CRC-32 (which has no instruction), slicing-by-8 tables. A
 *     table chain is bound by load latency in the same way, so it is run as three chains too.
 *   - Words are assembled from bytes (little-endian order, which is the reflected CRC's
 *     order), so the code is the same on big-endian and strict-alignment CPUs; compilers
 *     turn the assembly into one load on x86 and ARM.
 */
#ifndef KPROTO_CRC_H
#define KPROTO_CRC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define KP_X86_CRC 1
#define KP_HW_CRC 1
#define KP_HW_TARGET __attribute__((target("sse4.2")))
#include <nmmintrin.h> /* the intrinsics are usable in target("sse4.2") functions only */
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__)) &&                    \
    defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define KP_ARM_CRC 1
#define KP_HW_CRC 1
#if defined(__ARM_FEATURE_CRC32)
#define KP_HW_TARGET /* the whole build targets CPUs with the CRC32 extension */
#elif defined(__clang__)
#define KP_HW_TARGET __attribute__((target("crc")))
#else
#define KP_HW_TARGET __attribute__((target("+crc")))
#endif
#include <arm_acle.h> /* __crc32cd/__crc32cb; usable in target("+crc") functions */
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7) /* linux/arch/arm64/include/uapi/asm/hwcap.h */
#endif
#endif
#endif

#define KP_CRC32C_POLY 0x82f63b78u
#define KP_CRC32_POLY 0xedb88320u
#define KP_LONG 8192 /* bytes per chain in the 3-chain loop: joins cost ~10 cycles */
#define KP_SHORT 256 /* ... and for what is left (768 bytes to 24 KiB) */

typedef struct {
    uint32_t slice[8][256]; /* slice[k][b]: byte b followed by k zero bytes */
    uint32_t zlong[4][256]; /* shift a CRC register over KP_LONG zero bytes, byte by byte */
    uint32_t zshort[4][256];
} kp_crc_tables;

static kp_crc_tables kp_crc32c_t, kp_crc32_t;
static int kp_have_sse42 = 0;   /* x86: CRC-32C runs on the SSE4.2 crc32 instruction */
static int kp_have_armcrc = 0;  /* aarch64: ... on the ARMv8 crc32c instructions */
static int kp_have_hwcrc = 0;   /* either */

/* ---------------------------------------------------------------- tables */

/* mat (32 columns) times vec over GF(2). */
static uint32_t kp_gf2_times(const uint32_t *mat, uint32_t vec) {
    uint32_t sum = 0;
    for (; vec; vec >>= 1, mat++)
        if (vec & 1) sum ^= *mat;
    return sum;
}

static void kp_gf2_square(uint32_t *square, const uint32_t *mat) {
    for (int n = 0; n < 32; n++) square[n] = kp_gf2_times(mat, mat[n]);
}

/* Fill z with the operator that appends len zero bytes (len a power of two >= 1). */
static void kp_zeros_table(uint32_t z[4][256], uint32_t poly, size_t len) {
    uint32_t op[32], tmp[32];
    op[0] = poly; /* one zero bit: the register shifts right, the low bit folds in poly */
    for (int n = 1; n < 32; n++) op[n] = 1u << (n - 1);
    for (int bits = 1; bits < 8; bits <<= 1) { /* 2, 4, 8 zero bits = one zero byte */
        kp_gf2_square(tmp, op);
        memcpy(op, tmp, sizeof(op));
    }
    for (; len > 1; len >>= 1) {
        kp_gf2_square(tmp, op);
        memcpy(op, tmp, sizeof(op));
    }
    for (uint32_t n = 0; n < 256; n++) {
        z[0][n] = kp_gf2_times(op, n);
        z[1][n] = kp_gf2_times(op, n << 8);
        z[2][n] = kp_gf2_times(op, n << 16);
        z[3][n] = kp_gf2_times(op, n << 24);
    }
}

static void kp_fill_tables(kp_crc_tables *t, uint32_t poly) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ poly : c >> 1;
        t->slice[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 1; k < 8; k++)
            t->slice[k][n] = t->slice[0][t->slice[k - 1][n] & 0xff] ^ (t->slice[k - 1][n] >> 8);
    kp_zeros_table(t->zlong, poly, KP_LONG);
    kp_zeros_table(t->zshort, poly, KP_SHORT);
}

static inline uint32_t kp_shift(const uint32_t z[4][256], uint32_t crc) {
    return z[0][crc & 0xff] ^ z[1][(crc >> 8) & 0xff] ^ z[2][(crc >> 16) & 0xff] ^ z[3][crc >> 24];
}

static inline uint32_t kp_le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---------------------------------------------------------------- slicing-by-8 */

static inline uint32_t kp_sw8(const kp_crc_tables *t, uint32_t crc, const unsigned char *p) {
    uint32_t lo = kp_le32(p) ^ crc, hi = kp_le32(p + 4);
    return t->slice[7][lo & 0xff] ^ t->slice[6][(lo >> 8) & 0xff] ^
           t->slice[5][(lo >> 16) & 0xff] ^ t->slice[4][lo >> 24] ^ t->slice[3][hi & 0xff] ^
           t->slice[2][(hi >> 8) & 0xff] ^ t->slice[1][(hi >> 16) & 0xff] ^ t->slice[0][hi >> 24];
}

/* Three chains over blocks of n bytes each while at least 3n bytes are left. */
#define KP_SW_3WAY(n, z)                                                                     \
    while (len >= 3 * (size_t)(n)) {                                                         \
        uint32_t c1 = 0, c2 = 0;                                                             \
        for (size_t i = 0; i < (n); i += 8) {                                                \
            c0 = kp_sw8(t, c0, p + i);                                                       \
            c1 = kp_sw8(t, c1, p + (n) + i);                                                 \
            c2 = kp_sw8(t, c2, p + 2 * (n) + i);                                             \
        }                                                                                    \
        c0 = kp_shift(z, kp_shift(z, c0) ^ c1) ^ c2;                                         \
        p += 3 * (size_t)(n);                                                                \
        len -= 3 * (size_t)(n);                                                              \
    }

static uint32_t kp_crc_sw(const kp_crc_tables *t, uint32_t crc, const unsigned char *p,
                          size_t len) {
    uint32_t c0 = ~crc;
    KP_SW_3WAY(KP_LONG, t->zlong)
    KP_SW_3WAY(KP_SHORT, t->zshort)
    for (; len >= 8; p += 8, len -= 8) c0 = kp_sw8(t, c0, p);
    while (len--) c0 = t->slice[0][(c0 ^ *p++) & 0xff] ^ (c0 >> 8);
    return ~c0;
}

/* ---------------------------------------------------------------- SSE4.2 and ARMv8 CRC32 */

#ifdef KP_HW_CRC
#ifdef KP_X86_CRC
/* 8 bytes through the crc32 instruction (x86 is little-endian: memcpy is the wire order). */
KP_HW_TARGET static inline uint32_t kp_hw8(uint32_t crc, const unsigned char *p) {
#if defined(__x86_64__)
    uint64_t w;
    memcpy(&w, p, 8);
    return (uint32_t)_mm_crc32_u64(crc, w);
#else
    uint32_t a, b;
    memcpy(&a, p, 4);
    memcpy(&b, p + 4, 4);
    return _mm_crc32_u32(_mm_crc32_u32(crc, a), b);
#endif
}

KP_HW_TARGET static inline uint32_t kp_hw1(uint32_t crc, unsigned char b) {
    return _mm_crc32_u8(crc, b);
}
#else /* KP_ARM_CRC: little-endian only (see the #if above), so memcpy is the wire order */
KP_HW_TARGET static inline uint32_t kp_hw8(uint32_t crc, const unsigned char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return __crc32cd(crc, w);
}

KP_HW_TARGET static inline uint32_t kp_hw1(uint32_t crc, unsigned char b) {
    return __crc32cb(crc, b);
}
#endif

#define KP_HW_3WAY(n, z)                                                                     \
    while (len >= 3 * (size_t)(n)) {                                                         \
        uint32_t c1 = 0, c2 = 0;                                                             \
        for (size_t i = 0; i < (n); i += 8) {                                                \
            c0 = kp_hw8(c0, p + i);                                                          \
            c1 = kp_hw8(c1, p + (n) + i);                                                    \
            c2 = kp_hw8(c2, p + 2 * (n) + i);                                                \
        }                                                                                    \
        c0 = kp_shift(z, kp_shift(z, c0) ^ c1) ^ c2;                                         \
        p += 3 * (size_t)(n);                                                                \
        len -= 3 * (size_t)(n);                                                              \
    }

KP_HW_TARGET static uint32_t kp_crc32c_hw(uint32_t crc, const unsigned char *p, size_t len) {
    const kp_crc_tables *t = &kp_crc32c_t;
    uint32_t c0 = ~crc;
    /* 8-byte aligned loads never straddle a cache line */
    for (; len && ((uintptr_t)p & 7); len--) c0 = kp_hw1(c0, *p++);
    KP_HW_3WAY(KP_LONG, t->zlong)
    KP_HW_3WAY(KP_SHORT, t->zshort)
    for (; len >= 8; p += 8, len -= 8) c0 = kp_hw8(c0, p);
    while (len--) c0 = kp_hw1(c0, *p++);
    return ~c0;
}
#endif

/* ---------------------------------------------------------------- AVX-512 VPCLMULQDQ folding */

#if defined(KP_X86_CRC) && defined(__x86_64__) && (defined(__clang__) || __GNUC__ >= 9)
#define KP_FOLD_CRC 1
#include <immintrin.h>
#define KP_FOLD_TARGET __attribute__((target("sse4.2,pclmul,avx512f,avx512vl,vpclmulqdq")))
#define KP_FOLD_MIN 1024 /* shorter inputs: the crc32 instruction (and no zmm warm-up) */

/* The state is a 128-bit polynomial R standing for the data read so far: the CRC of the
 * whole input equals the CRC of R's 16 bytes followed by the rest (only R mod P matters,
 * and the CRC is linear). Registers hold polynomials bit-reflected, as the data is: bit 0 of
 * byte 0 is the highest power. For such 64-bit operands, pclmulqdq returns the reflected
 * product times x; so moving R = H x^64 + L forward by F bits (R x^F mod P) is
 *     clmul(H, [x^(F+63) mod P]) ^ clmul(L, [x^(F-1) mod P])
 * with the constants reflected into 64 bits (x^d at bit 63 - d). */
static uint64_t kp_fold_k[7][2]; /* F = 2048, 1536, 1024, 512, 384, 256, 128: {for H, for L} */
static int kp_have_fold = 0;

static uint64_t kp_xpow(unsigned n) { /* x^n mod P, reflected into 64 bits */
    uint32_t v = 1;                   /* normal form: bit d is x^d */
    uint64_t r = 0;
    for (unsigned i = 0; i < n; i++) {
        uint32_t carry = v >> 31;
        v <<= 1;
        if (carry) v ^= 0x1EDC6F41u; /* x^32 = the rest of CRC-32C's polynomial */
    }
    for (int d = 0; d < 32; d++)
        if (v >> d & 1) r |= (uint64_t)1 << (63 - d);
    return r;
}

static void kp_fold_init(void) {
    static const unsigned dist[7] = {2048, 1536, 1024, 512, 384, 256, 128};
    for (int i = 0; i < 7; i++) {
        kp_fold_k[i][0] = kp_xpow(dist[i] + 63);
        kp_fold_k[i][1] = kp_xpow(dist[i] - 1);
    }
}

KP_FOLD_TARGET static inline __m512i kp_fold512(__m512i a, __m512i k, __m512i next) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00),
                                     _mm512_clmulepi64_epi128(a, k, 0x11), next, 0x96);
}

KP_FOLD_TARGET static inline __m128i kp_fold128(__m128i a, int k, __m128i next) {
    __m128i kk = _mm_set_epi64x((long long)kp_fold_k[k][1], (long long)kp_fold_k[k][0]);
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, kk, 0x00),
                                       _mm_clmulepi64_si128(a, kk, 0x11)), next);
}

KP_FOLD_TARGET static inline __m512i kp_fold_bcast(int k) {
    return _mm512_broadcast_i32x4(
        _mm_set_epi64x((long long)kp_fold_k[k][1], (long long)kp_fold_k[k][0]));
}

/* len >= KP_FOLD_MIN (at least the 256 bytes of the first load) */
KP_FOLD_TARGET static uint32_t kp_crc32c_fold(uint32_t crc, const unsigned char *p, size_t len) {
    __m512i a0, a1, a2, a3, k;
    __m128i r, lane[4];
    uint64_t w;
    uint32_t c;
    /* the register's start value goes into the first 32 bits of the data */
    a0 = _mm512_xor_si512(_mm512_loadu_si512((const void *)p),
                          _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                           (int)~crc));
    a1 = _mm512_loadu_si512((const void *)(p + 64));
    a2 = _mm512_loadu_si512((const void *)(p + 128));
    a3 = _mm512_loadu_si512((const void *)(p + 192));
    p += 256;
    len -= 256;
    k = kp_fold_bcast(0); /* four independent chains, each 2048 bits ahead per step */
    for (; len >= 256; p += 256, len -= 256) {
        a0 = kp_fold512(a0, k, _mm512_loadu_si512((const void *)p));
        a1 = kp_fold512(a1, k, _mm512_loadu_si512((const void *)(p + 64)));
        a2 = kp_fold512(a2, k, _mm512_loadu_si512((const void *)(p + 128)));
        a3 = kp_fold512(a3, k, _mm512_loadu_si512((const void *)(p + 192)));
    }
    a0 = kp_fold512(a0, kp_fold_bcast(1), kp_fold512(a1, kp_fold_bcast(2),
                                                     kp_fold512(a2, kp_fold_bcast(3), a3)));
    for (k = kp_fold_bcast(3); len >= 64; p += 64, len -= 64)
        a0 = kp_fold512(a0, k, _mm512_loadu_si512((const void *)p));
    lane[0] = _mm512_extracti32x4_epi32(a0, 0);
    lane[1] = _mm512_extracti32x4_epi32(a0, 1);
    lane[2] = _mm512_extracti32x4_epi32(a0, 2);
    lane[3] = _mm512_extracti32x4_epi32(a0, 3);
    r = kp_fold128(lane[0], 4, kp_fold128(lane[1], 5, kp_fold128(lane[2], 6, lane[3])));
    for (; len >= 16; p += 16, len -= 16)
        r = kp_fold128(r, 6, _mm_loadu_si128((const __m128i *)p));
    c = (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(r));
    c = (uint32_t)_mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(r, 1));
    if (len >= 8) {
        memcpy(&w, p, 8);
        c = (uint32_t)_mm_crc32_u64(c, w);
        p += 8;
        len -= 8;
    }
    while (len--) c = _mm_crc32_u8(c, *p++);
    return ~c;
}
#endif

/* ---------------------------------------------------------------- entry points */

/* Call once before any update (the module's import does). */
static void kp_crc_init(void) {
    kp_fill_tables(&kp_crc32c_t, KP_CRC32C_POLY);
    kp_fill_tables(&kp_crc32_t, KP_CRC32_POLY);
#if defined(KP_X86_CRC)
    __builtin_cpu_init();
    kp_have_sse42 = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#if defined(KP_FOLD_CRC)
    kp_fold_init();
    kp_have_fold = kp_have_sse42 && __builtin_cpu_supports("pclmul") &&
                   __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                   __builtin_cpu_supports("vpclmulqdq");
#endif
#elif defined(KP_ARM_CRC) && defined(__ARM_FEATURE_CRC32)
    kp_have_armcrc = 1;
#elif defined(KP_ARM_CRC) && defined(__linux__)
    kp_have_armcrc = (getauxval(AT_HWCAP) & HWCAP_CRC32) ? 1 : 0;
#endif
    kp_have_hwcrc = kp_have_sse42 | kp_have_armcrc;
}

static inline uint32_t crc32c_update(uint32_t crc, const unsigned char *p, size_t len) {
#ifdef KP_FOLD_CRC
    if (kp_have_fold && len >= KP_FOLD_MIN) return kp_crc32c_fold(crc, p, len);
#endif
#ifdef KP_HW_CRC
    if (kp_have_hwcrc) return kp_crc32c_hw(crc, p, len);
#endif
    return kp_crc_sw(&kp_crc32c_t, crc, p, len);
}

/* The crc32 instruction path even where folding runs (for the tests); the tables without. */
static inline uint32_t crc32c_update_nofold(uint32_t crc, const unsigned char *p, size_t len) {
#ifdef KP_HW_CRC
    if (kp_have_hwcrc) return kp_crc32c_hw(crc, p, len);
#endif
    return kp_crc_sw(&kp_crc32c_t, crc, p, len);
}

#ifndef KP_FOLD_CRC
static int kp_have_fold = 0;
#endif

/* The table path even when the CPU has the instruction: what other CPUs run, for the tests. */
static inline uint32_t crc32c_update_sw(uint32_t crc, const unsigned char *p, size_t len) {
    return kp_crc_sw(&kp_crc32c_t, crc, p, len);
}

static inline uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t len) {
    return kp_crc_sw(&kp_crc32_t, crc, p, len);
}

#endif /* KPROTO_CRC_H */
