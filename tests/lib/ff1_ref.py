#!/usr/bin/env python3
"""ff1_ref.py: a second FF1 (NIST SP 800-38G Rev. 1, Algorithms 7 and 8),
written apart from src/core/ff1.c to check it: Python integers for
NUM/STR, the `cryptography` package's AES-ECB for CIPH, the standard's steps
one for one, no shortcut. It made tests/unit/ff1_vectors.h:

    python3 tests/lib/ff1_ref.py --selftest    # the 9 NIST samples
    python3 tests/lib/ff1_ref.py --vectors > tests/unit/ff1_vectors.h

The vectors are fixed by a seed (random.Random(30)), so running it again
gives the same file.
"""
import math
import random
import sys

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


def ciph(key, block):
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc.update(block) + enc.finalize()


def prf(key, x):
    """CBC-MAC with a zero IV (section 4.3, Algorithm 6)."""
    assert len(x) % 16 == 0
    y = bytes(16)
    for j in range(0, len(x), 16):
        y = ciph(key, bytes(a ^ b for a, b in zip(y, x[j:j + 16])))
    return y


def num_radix(digits, radix):
    x = 0
    for d in digits:
        x = x * radix + d
    return x


def str_radix(x, radix, m):
    out = []
    for _ in range(m):
        out.append(x % radix)
        x //= radix
    assert x == 0
    return out[::-1]


def be(x, s):
    return x.to_bytes(s, "big")


def ff1(key, tweak, radix, x, encrypt):
    n, t = len(x), len(tweak)
    assert radix ** n >= 1000000 and all(0 <= d < radix for d in x)
    u = n // 2
    v = n - u
    a, b = list(x[:u]), list(x[u:])
    # ceil(v * log2(radix)), exactly: the bit length of radix^v - 1
    beta = math.ceil((radix ** v - 1).bit_length() / 8)
    d = 4 * math.ceil(beta / 4) + 4
    p = bytes([1, 2, 1]) + be(radix, 3) + bytes([10, u % 256]) + be(n, 4) + be(t, 4)
    rounds = range(10) if encrypt else range(9, -1, -1)
    for i in rounds:
        src = b if encrypt else a
        q = tweak + bytes((-t - beta - 1) % 16) + bytes([i]) + be(num_radix(src, radix), beta)
        r = prf(key, p + q)
        s = r
        for j in range(1, math.ceil(d / 16)):
            s += ciph(key, bytes(a ^ b for a, b in zip(r, be(j, 16))))
        y = int.from_bytes(s[:d], "big")
        m = u if i % 2 == 0 else v
        if encrypt:
            c = (num_radix(a, radix) + y) % radix ** m
            a, b = b, str_radix(c, radix, m)
        else:
            c = (num_radix(b, radix) - y) % radix ** m
            b, a = a, str_radix(c, radix, m)
    return a + b


ALPHA = "0123456789abcdefghijklmnopqrstuvwxyz"
K128 = bytes.fromhex("2B7E151628AED2A6ABF7158809CF4F3C")
K192 = bytes.fromhex("2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F")
K256 = bytes.fromhex("2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F7F036D6F04FC6A94")
T1 = bytes.fromhex("39383736353433323130")
T2 = bytes.fromhex("3737373770717273373737")
SAMPLES = [
    (K128, b"", 10, "0123456789", "2433477484"),
    (K128, T1, 10, "0123456789", "6124200773"),
    (K128, T2, 36, "0123456789abcdefghi", "a9tv40mll9kdu509eum"),
    (K192, b"", 10, "0123456789", "2830668132"),
    (K192, T1, 10, "0123456789", "2496655549"),
    (K192, T2, 36, "0123456789abcdefghi", "xbj3kv35jrawxv32ysr"),
    (K256, b"", 10, "0123456789", "6657667009"),
    (K256, T1, 10, "0123456789", "1001623463"),
    (K256, T2, 36, "0123456789abcdefghi", "xs8a0azh2avyalyzuwd"),
]


def selftest():
    for key, tw, radix, pt, ct in SAMPLES:
        x = [ALPHA.index(c) for c in pt]
        got = "".join(ALPHA[d] for d in ff1(key, tw, radix, x, True))
        assert got == ct, (pt, got, ct)
        back = "".join(ALPHA[d] for d in ff1(key, tw, radix, [ALPHA.index(c) for c in ct], False))
        assert back == pt
    print("ff1_ref: the 9 NIST samples pass")


def c_bytes(b):
    return '"' + "".join("\\x%02x" % c for c in b) + '"'


def vectors():
    """Cases whose S is over 16 bytes (d > 16: radix^v >= 2^96 or so),
    long tweaks, and a spread of radixes and key sizes."""
    rnd = random.Random(30)
    cases = []
    # (radix, length, tweak length): d > 16 needs b > 12, i.e. v log2 radix > 96
    shapes = [(10, 60, 0), (10, 61, 7), (2, 200, 3), (36, 40, 11), (36, 256, 0),
              (16, 100, 30), (7, 120, 100), (3, 150, 16), (2, 256, 255), (35, 77, 13),
              (10, 6, 5), (2, 20, 0), (36, 19, 1), (10, 19, 8), (10, 20, 8), (26, 15, 40)]
    for radix, n, tl in shapes:
        key = bytes(rnd.randrange(256) for _ in range(rnd.choice([16, 24, 32])))
        tweak = bytes(rnd.randrange(256) for _ in range(tl))
        x = [rnd.randrange(radix) for _ in range(n)]
        y = ff1(key, tweak, radix, x, True)
        assert ff1(key, tweak, radix, y, False) == x
        v = n - n // 2
        d = 4 * math.ceil(math.ceil((radix ** v - 1).bit_length() / 8) / 4) + 4
        cases.append((key, tweak, radix, x, y, d))
    out = ["/* ff1_vectors.h: FF1 vectors made by tests/lib/ff1_ref.py --vectors, an",
           " * independent FF1 in Python (integers, the cryptography package's AES);",
           " * regenerate with: python3 tests/lib/ff1_ref.py --vectors > tests/unit/ff1_vectors.h",
           " * Digits as strings of 0-9a-z; d is the PRF output length (step 4). */",
           "struct ff1_vector {",
           "    const char *key; unsigned key_len;",
           "    const char *tweak; unsigned tweak_len;",
           "    unsigned radix, d;",
           "    const char *pt, *ct;",
           "};",
           "static const struct ff1_vector ff1_vectors[] = {"]
    for key, tweak, radix, x, y, d in cases:
        out.append("    {%s, %d,\n     %s, %d,\n     %d, %d,\n     \"%s\",\n     \"%s\"}," % (
            c_bytes(key), len(key), c_bytes(tweak), len(tweak), radix, d,
            "".join(ALPHA[c] for c in x), "".join(ALPHA[c] for c in y)))
    out.append("};")
    print("\n".join(out))


if __name__ == "__main__":
    selftest() if "--selftest" in sys.argv else None
    if "--vectors" in sys.argv:
        vectors()
