/* How fast can a scalar loop parse the records of magic 2 batches at all?
 *
 * The floor under kproto's record loop (kproto/_record_loop.pxi), for BENCHMARKS.md's
 * issue 17 section: two stand-alone loops over the same uncompressed batches, each
 * filling the columns records.decode(binary_view=True) fills (offset, timestamp,
 * timestamp type, header offsets, 16-byte key and value views, header keys and values
 * copied with their offsets), no CRC, no Python:
 *
 *   minimal: no checks at all (trusts every length; one-or-two-byte varints);
 *   checked: every check the decoder's fast path needs to never read past a record or
 *            its batch (it stops at the first record it cannot take).
 *
 *     .venv/bin/python tools/parse_floor.py         # writes the corpus, builds, runs
 *
 * Input: a file of record batches (argv[1]); argv[2]: bytes of it to use (a prefix
 * that stays in cache; 0: all); argv[3]: passes over it. Prints ns a record. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNLIKELY(x) __builtin_expect(!!(x), 0)

static uint32_t be32(const unsigned char *p) {
    uint32_t x;
    memcpy(&x, p, 4);
    return __builtin_bswap32(x);
}

static int64_t zigzag(uint32_t u) { return (int64_t)(u >> 1) ^ -(int64_t)(u & 1); }

/* One or two bytes (anything longer: NULL); lim: where the record ends. */
static inline __attribute__((always_inline)) const unsigned char *
varint12(const unsigned char *q, const unsigned char *lim, uint32_t *out) {
    uint32_t u = q[0];
    if (u >= 0x80) {
        if (q + 1 >= lim || q[1] >= 0x80) return NULL;
        u = (u & 0x7F) | ((uint32_t)q[1] << 7);
        q++;
    }
    *out = u;
    return q + 1;
}

/* The Arrow view of n bytes at p (the decoder's kp_view, little-endian). */
static inline __attribute__((always_inline)) void
view(uint64_t *v, const unsigned char *p, int64_t n, int32_t at) {
    if (n > 12) {
        uint32_t prefix;
        memcpy(&prefix, p, 4);
        v[0] = (uint32_t)n | ((uint64_t)prefix << 32);
        v[1] = (uint64_t)(uint32_t)at << 32;
        return;
    }
    uint64_t lo, hi;
    memcpy(&lo, p, 8);
    memcpy(&hi, p + 8, 8);
    hi = (lo >> 32) | (hi << 32);
    lo = (lo & 0xFFFFFFFFu) << 32;
    if (n < 4) lo &= (((uint64_t)1 << (8 * n)) - 1) << 32;
    hi = n <= 4 ? 0 : n < 12 ? hi & (((uint64_t)1 << (8 * (n - 4))) - 1) : hi;
    v[0] = lo | (uint32_t)n;
    v[1] = hi;
}

typedef struct {
    int64_t *offset, *timestamp;
    int32_t *ts_type, *header_offsets, *hk_offsets, *hv_offsets;
    uint64_t *key_views, *value_views;
    char *hk, *hv;
    int64_t n, headers, hk_len, hv_len;
} Columns;

/* The records of one batch, no checks. */
static void minimal(Columns *c, const unsigned char *p, int32_t count, int64_t base_offset,
                    int64_t base_ts, const unsigned char *base) {
    for (int32_t i = 0; i < count; i++) {
        uint32_t u;
        const unsigned char *q = varint12(p, p + 3, &u), *end;
        end = q + (u >> 1);
        q = varint12(q + 1, end, &u);
        int64_t ts = zigzag(u);
        q = varint12(q, end, &u);
        int64_t od = zigzag(u);
        q = varint12(q, end, &u);
        const unsigned char *k = q;
        int64_t kl = u >> 1;
        q = varint12(q + kl, end, &u);
        const unsigned char *v = q;
        int64_t vl = u >> 1;
        q += vl;
        uint32_t hc = q[0] >> 1;
        q++;
        for (uint32_t h = 0; h < hc; h++) {
            q = varint12(q, end, &u);
            memcpy(c->hk + c->hk_len, q, 16);
            c->hk_len += u >> 1;
            q += u >> 1;
            c->hk_offsets[c->headers] = (int32_t)c->hk_len;
            q = varint12(q, end, &u);
            memcpy(c->hv + c->hv_len, q, 16);
            c->hv_len += u >> 1;
            q += u >> 1;
            c->hv_offsets[c->headers++] = (int32_t)c->hv_len;
        }
        int64_t n = c->n++;
        c->offset[n] = base_offset + od;
        c->timestamp[n] = base_ts + ts;
        c->ts_type[n] = 0;
        c->header_offsets[n] = (int32_t)c->headers;
        view(c->key_views + 2 * n, k, kl, (int32_t)(k - base));
        view(c->value_views + 2 * n, v, vl, (int32_t)(v - base));
        p = end;
    }
}

/* The records of one batch, checked as the decoder's fast path checks them; returns the
 * records taken (a record it cannot take ends the batch: the decoder's checked path). */
static int32_t checked(Columns *c, const unsigned char *p, const unsigned char *stop,
                       int32_t count, int64_t base_offset, int64_t base_ts,
                       int64_t start_offset, const unsigned char *base) {
    int32_t i;
    for (i = 0; i < count; i++) {
        uint32_t u, h, hc;
        const unsigned char *q, *end, *k, *v;
        int64_t kl, vl, ts, od, offset, headers = c->headers;
        if (UNLIKELY(stop - p < 9)) break;
        q = varint12(p, stop, &u);
        if (UNLIKELY(!q || (u & 1) || (u >> 1) < 8 || (u >> 1) > stop - q)) break;
        end = q + (u >> 1);
        if (UNLIKELY(!(q = varint12(q + 1, end, &u)))) break;
        ts = zigzag(u);
        if (UNLIKELY(!(q = varint12(q, end, &u)))) break;
        od = zigzag(u);
        if (UNLIKELY(!(q = varint12(q, end, &u)) || (u & 1))) break;    /* (null: elsewhere) */
        k = q;
        kl = u >> 1;
        if (UNLIKELY(kl >= end - q)) break;
        if (UNLIKELY(!(q = varint12(q + kl, end, &u)) || (u & 1))) break;
        v = q;
        vl = u >> 1;
        if (UNLIKELY(vl >= end - q)) break;
        q += vl;
        hc = q[0];
        if (UNLIKELY(hc & 0x81)) break;
        hc >>= 1;
        q++;
        offset = base_offset + od;      /* (the decoder checks the sum's overflow too) */
        if (UNLIKELY(offset < start_offset)) break;
        for (h = 0; h < hc; h++) {
            if (UNLIKELY(q >= end || !(q = varint12(q, end, &u)) || (u & 1)
                         || (u >> 1) >= end - q)) break;
            memcpy(c->hk + c->hk_len, q, 16);
            c->hk_len += u >> 1;
            q += u >> 1;
            c->hk_offsets[headers] = (int32_t)c->hk_len;
            if (UNLIKELY(!(q = varint12(q, end, &u)) || (u & 1) || (u >> 1) > end - q)) break;
            memcpy(c->hv + c->hv_len, q, 16);
            c->hv_len += u >> 1;
            q += u >> 1;
            c->hv_offsets[headers++] = (int32_t)c->hv_len;
        }
        if (UNLIKELY(h != hc || q != end)) break;
        c->headers = headers;
        int64_t n = c->n++;
        c->offset[n] = offset;
        c->timestamp[n] = base_ts + ts;
        c->ts_type[n] = 0;
        c->header_offsets[n] = (int32_t)headers;
        view(c->key_views + 2 * n, k, kl, (int32_t)(k - base));
        view(c->value_views + 2 * n, v, vl, (int32_t)(v - base));
        p = end;
    }
    return i;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s BATCHES BYTES PASSES\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) return perror(argv[1]), 1;
    fseek(f, 0, SEEK_END);
    long size = ftell(f), want = atol(argv[2]), pos = 0;
    int passes = atoi(argv[3]);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(size + 64);
    if (fread(buf, 1, size, f) != (size_t)size) return perror("read"), 1;
    if (want > 0 && want < size) size = want;
    while (pos + 12 <= size && pos + 12 + (long)be32(buf + pos + 8) <= size)
        pos += 12 + be32(buf + pos + 8);
    size = pos;                                 /* whole batches only */
    long rows = size / 7 + 1;
    Columns c = {
        malloc(8 * rows), malloc(8 * rows), malloc(4 * rows), malloc(4 * rows),
        malloc(4 * rows), malloc(4 * rows), malloc(16 * rows), malloc(16 * rows),
        malloc(size + 16), malloc(size + 16), 0, 0, 0, 0};
    for (int mode = 0; mode < 2; mode++) {
        double best = 1e9;
        long records = 0, taken = 0;
        for (int round = 0; round < 5; round++) {
            double t0 = now();
            for (int k = 0; k < passes; k++) {
                c.n = c.headers = c.hk_len = c.hv_len = 0;
                for (pos = 0; pos < size; pos += 12 + be32(buf + pos + 8)) {
                    const unsigned char *b = buf + pos;
                    int32_t count = (int32_t)be32(b + 57);
                    int64_t base_offset = 0, base_ts = 1700000000000LL;
                    if (mode == 0) minimal(&c, b + 61, count, base_offset, base_ts, buf);
                    else taken += checked(&c, b + 61, b + 12 + be32(b + 8), count,
                                          base_offset, base_ts, 0, buf);
                }
            }
            double ns = (now() - t0) / ((double)c.n * passes) * 1e9;
            if (ns < best) best = ns;
            records = c.n;
        }
        printf("%s: %.2f ns a record (%ld records, %ld bytes, best of 5 x %d passes)%s\n",
               mode ? "checked" : "minimal", best, records, size, passes,
               mode && taken != records * passes * 5 ? " NOT ALL TAKEN" : "");
    }
    return 0;
}
