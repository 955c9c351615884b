/* ff1.h: FF1 format-preserving encryption (NIST SP 800-38G Rev. 1) on
 * OpenSSL 3's AES: a bijection of the numeral strings of one length in one
 * radix onto themselves, chosen by a key and a tweak. leafd conceals
 * counters with it (docs/id-kinds.md, "FF1").
 *
 * Domains: radix 2..FF1_RADIX_MAX, length 2..FF1_LEN_MAX digits, and
 * radix^length >= FF1_DOMAIN_MIN (1,000,000, as Rev. 1 requires). Keys of
 * 16, 24 or 32 bytes (AES-128, -192, -256); tweaks of 0..FF1_TWEAK_MAX
 * bytes. A numeral string is an array of digits, each 0..radix-1, most
 * significant first (NUM_radix of the standard); the uint64 functions take
 * and give the number whose radix-`radix`, `length`-digit string (with
 * leading zeros) that is.
 *
 * Two objects:
 *   struct ff1_key     the AES key schedule, computed once by ff1_key_new.
 *                      Opaque; ff1_key_free frees it (NULL is a no-op).
 *   struct ff1_domain  radix, length and tweak prepared under one key: the
 *                      PRF's state over the block P and the tweak's whole
 *                      blocks, so that an encipherment computes only what
 *                      depends on the input. Plain data that the caller
 *                      owns (no pointer in it, nothing to free); it works
 *                      with the key it was prepared under and the copies
 *                      of that key (ff1_key_dup), and asserts so.
 *
 * Failure values: constructors return NULL (and ff1_domain_init -1) with
 * *cause, a malloc'd reason, unless cause is NULL. The encipher and
 * decipher calls return 0, or -1 when the input is outside the domain (a
 * digit >= radix, a number >= radix^length, a domain too large for
 * uint64): then out is untouched. AES itself failing on a set-up context
 * would be a broken libcrypto: abort.
 *
 * Thread-safety: a struct ff1_key is used by one thread at a time (it holds
 * an OpenSSL cipher context). Give each thread its own, made once with
 * ff1_key_dup, which copies the key schedule rather than computing it
 * again. A struct ff1_domain is read-only after ff1_domain_init: any
 * number of threads may use one at once, each with its own copy of the
 * key. No call allocates or locks after set-up; an encipherment makes 10
 * AES block calls when radix^ceil(length/2) <= 2^64, whatever the tweak's
 * length (the tweak's whole blocks are MACed once, at set-up); longer
 * strings take more.
 */
#ifndef LEAFD_FF1_H
#define LEAFD_FF1_H

#include <stddef.h>
#include <stdint.h>

#define FF1_RADIX_MAX  36
#define FF1_LEN_MAX    256          /* digits of a numeral string */
#define FF1_TWEAK_MAX  1024         /* bytes */
#define FF1_DOMAIN_MIN 1000000      /* radix^length at least (Rev. 1) */

struct ff1_key;

/* 16 bytes as two 64-bit lanes (a GCC/Clang vector): one 16-byte store */
typedef uint64_t ff1_v2 __attribute__((vector_size(16)));

struct ff1_domain {
    uint64_t key_id;        /* the key (and its copies) this was made under */
    unsigned radix;
    unsigned len, u, v;     /* n, u = floor(n/2), v = n - u */
    unsigned b, d;          /* bytes of NUM_radix(B) in Q; bytes of S */
    unsigned tail_len;      /* constant bytes of Q's first varying block */
    unsigned fast;          /* radix^v <= 2^64: rounds on integers */
    unsigned fits_u64;      /* radix^len - 1 fits in uint64 */
    unsigned __int128 pow_u, pow_v;   /* radix^u, radix^v when fast */
    uint8_t mac[16];        /* CBC-MAC state after P and Q's whole constant blocks */
    uint8_t tail[16];       /* those constant bytes (tweak end, zero pad) */
    ff1_v2 round_in[10];    /* fast: mac xor (tail || [i]^1 || 0...) per round */
    uint64_t recip_u, recip_v;  /* floor((2^64 - 1) / radix^u or ^v) */
};

/* A key of key_len 16, 24 or 32 bytes. NULL with *cause otherwise. */
struct ff1_key *ff1_key_new(const void *key, size_t key_len, char **cause);

/* A copy for another thread: the same key schedule, not recomputed, and
 * the same identity (domains prepared under k work with it). Aborts on
 * out-of-memory. */
struct ff1_key *ff1_key_dup(const struct ff1_key *k);

void ff1_key_free(struct ff1_key *k);

/* 16 bytes that identify the key without revealing it: AES_K(0^128), a
 * block cipher key check value. For records of which key made a value. */
void ff1_key_check_value(struct ff1_key *k, uint8_t out[16]);

/* Whether radix^len is a domain FF1 accepts here (0), or -1 with *cause. */
int ff1_domain_check(unsigned radix, unsigned len, char **cause);

/* Prepare *dom for radix, len and the tweak under k. 0, or -1 with *cause
 * (a domain ff1_domain_check refuses, a tweak over FF1_TWEAK_MAX). */
int ff1_domain_init(struct ff1_domain *dom, struct ff1_key *k, unsigned radix,
                    unsigned len, const void *tweak, size_t tweak_len,
                    char **cause);

/* FF1.Encrypt / FF1.Decrypt of dom->len digits from in to out (which may
 * be the same array). 0, or -1 if a digit is >= radix. */
int ff1_encrypt(struct ff1_key *k, const struct ff1_domain *dom,
                const uint8_t *in, uint8_t *out);
int ff1_decrypt(struct ff1_key *k, const struct ff1_domain *dom,
                const uint8_t *in, uint8_t *out);

/* The same on the number x < radix^len (its len-digit string, leading
 * zeros included). -1 if x is outside the domain or the domain does not
 * fit in uint64 (dom->fits_u64 == 0). */
int ff1_encrypt_u64(struct ff1_key *k, const struct ff1_domain *dom,
                    uint64_t x, uint64_t *out);
int ff1_decrypt_u64(struct ff1_key *k, const struct ff1_domain *dom,
                    uint64_t x, uint64_t *out);

/* ff1_encrypt_u64 of n numbers at once, x[i] into out[i] (which may be
 * the same array): the same values, faster for many, since each round's
 * AES blocks of up to 32 numbers go through AES together. 0, or -1 (out
 * untouched) when one x is outside the domain or the domain does not fit
 * in uint64. */
int ff1_encrypt_u64_many(struct ff1_key *k, const struct ff1_domain *dom,
                         const uint64_t *x, uint64_t *out, size_t n);

/* For tests and the fuzzer: with on != 0, this thread's calls take the
 * general (digit array) path even where the integer one applies, so that
 * the two can be compared. Off by default. */
void ff1_force_general_path(int on);

#endif
