"""IEEE-754 binary32 on Python ints: the referee's arithmetic (no Python floats inside).

Values are uint32 bit patterns. Rounding is round-to-nearest-even, subnormals are kept,
and every NaN result is the canonical 0x7FC00000 (docs/NUMERICS.md, "NaN policy").

Structure (after Berkeley SoftFloat): `unpack` splits a pattern into sign, exponent and
integer significand; each op computes its result EXACTLY as `m * 2**e` (Python ints have
no width limit, so add/mul/fma need no sticky bookkeeping; div and sqrt fold their
remainder into a sticky bit); `round_pack` is the one place that rounds, handles
subnormals and overflow. contracts/lib/Float32.sol mirrors these names.

Kept to Python 3.9 syntax so the soak test can run it under PyPy.
"""
from __future__ import annotations

from math import isqrt

SIGN = 0x80000000
EXP_MASK = 0x7F800000
FRAC_MASK = 0x007FFFFF
CANONICAL_NAN = 0x7FC00000
POS_INF = 0x7F800000
NEG_INF = 0xFF800000
BIAS = 127
EMIN_LSB = -149          # exponent of the smallest subnormal's lsb
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


# -- classification ---------------------------------------------------------------------
def is_nan(a: int) -> bool:
    return (a & 0x7FFFFFFF) > POS_INF


def is_inf(a: int) -> bool:
    return (a & 0x7FFFFFFF) == POS_INF


def is_zero(a: int) -> bool:
    return (a & 0x7FFFFFFF) == 0


def sign_of(a: int) -> int:
    return a >> 31


def unpack(a: int):
    """Finite a -> (sign, m, e) with |a| == m * 2**e exactly (m < 2**24)."""
    exp = (a >> 23) & 0xFF
    frac = a & FRAC_MASK
    if exp == 0:
        return a >> 31, frac, EMIN_LSB
    return a >> 31, frac | 0x800000, exp - BIAS - 23


# -- the one rounding point ---------------------------------------------------------------
def round_pack(sign: int, m: int, e: int) -> int:
    """Round (-1)**sign * m * 2**e to binary32, nearest-even.

    m may carry a sticky bit in its lsb (div, sqrt) provided it has >= 26 significant
    bits, so the sticky bit always lies strictly below the rounding position.
    """
    if m == 0:
        return sign << 31
    n = m.bit_length()
    lsb = max(e + n - 24, EMIN_LSB)        # exponent of the result's last kept bit
    shift = lsb - e
    if shift > n:                          # below half the smallest subnormal: 0
        q = 0
    elif shift > 0:
        q = m >> shift
        rem = m & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and (q & 1)):
            q += 1
    else:
        q = m << -shift
    if q == 1 << 24:                       # rounding carried into a new binade
        q >>= 1
        lsb += 1
    if q < 0x800000:                       # subnormal (or rounded to zero)
        return (sign << 31) | q
    biased = lsb + 23 + BIAS
    if biased >= 0xFF:
        return (sign << 31) | POS_INF
    return (sign << 31) | (biased << 23) | (q & FRAC_MASK)


# -- NaN policy: the only place NaN results are made --------------------------------------
def nan_result() -> int:
    return CANONICAL_NAN


def _any_nan(*xs: int) -> bool:
    return any(is_nan(x) for x in xs)


# -- arithmetic ---------------------------------------------------------------------------
def _signed(a: int):
    s, m, e = unpack(a)
    return (-m if s else m), e


def _sum_exact(terms, zero_sign: int) -> int:
    """Round the exact sum of signed m*2**e terms; an exact zero gets zero_sign."""
    e0 = min(e for _, e in terms)
    total = sum(m << (e - e0) for m, e in terms)
    if total == 0:
        return zero_sign << 31
    return round_pack(1 if total < 0 else 0, abs(total), e0)


def add(a: int, b: int) -> int:
    if _any_nan(a, b):
        return nan_result()
    if is_inf(a) or is_inf(b):
        if is_inf(a) and is_inf(b) and sign_of(a) != sign_of(b):
            return nan_result()                         # inf - inf
        return a if is_inf(a) else b
    # IEEE: an exact zero sum is +0 in round-to-nearest, except (-0) + (-0) = -0.
    return _sum_exact([_signed(a), _signed(b)], sign_of(a) & sign_of(b))


def sub(a: int, b: int) -> int:
    return add(a, b ^ SIGN) if not is_nan(b) else nan_result()


def mul(a: int, b: int) -> int:
    if _any_nan(a, b):
        return nan_result()
    sign = sign_of(a) ^ sign_of(b)
    if is_inf(a) or is_inf(b):
        if is_zero(a) or is_zero(b):
            return nan_result()                         # inf * 0
        return (sign << 31) | POS_INF
    _, ma, ea = unpack(a)
    _, mb, eb = unpack(b)
    return round_pack(sign, ma * mb, ea + eb)


def fma(a: int, b: int, c: int) -> int:
    """a*b + c with ONE rounding (C fmaf, CUDA __fmaf_rn)."""
    if _any_nan(a, b, c):
        return nan_result()
    psign = sign_of(a) ^ sign_of(b)
    if is_inf(a) or is_inf(b):
        if is_zero(a) or is_zero(b):
            return nan_result()                         # inf * 0 (+ anything)
        if is_inf(c) and sign_of(c) != psign:
            return nan_result()                         # inf - inf
        return (psign << 31) | POS_INF
    if is_inf(c):
        return c
    _, ma, ea = unpack(a)
    _, mb, eb = unpack(b)
    mp = ma * mb
    return _sum_exact([(-mp if psign else mp, ea + eb), _signed(c)], psign & sign_of(c))


def div(a: int, b: int) -> int:
    if _any_nan(a, b):
        return nan_result()
    sign = sign_of(a) ^ sign_of(b)
    if is_inf(a):
        return nan_result() if is_inf(b) else (sign << 31) | POS_INF
    if is_inf(b):
        return sign << 31
    if is_zero(b):
        return nan_result() if is_zero(a) else (sign << 31) | POS_INF
    if is_zero(a):
        return sign << 31
    _, ma, ea = unpack(a)
    _, mb, eb = unpack(b)
    # Scale so the quotient has >= 27 bits, then fold the remainder into a sticky lsb.
    k = 27 + mb.bit_length() - ma.bit_length() + 1
    q, r = divmod(ma << k, mb)
    return round_pack(sign, (q << 1) | (r != 0), ea - eb - k - 1)


def sqrt(a: int) -> int:
    if is_nan(a):
        return nan_result()
    if is_zero(a):
        return a                                        # sqrt(-0) = -0
    if sign_of(a):
        return nan_result()
    if is_inf(a):
        return a
    _, m, e = unpack(a)
    # Make the radicand m*2**k have >= 54 bits and an even exponent, so its integer
    # square root has >= 27 bits; the remainder becomes the sticky lsb.
    k = 54 - m.bit_length()
    if (e - k) & 1:
        k += 1
    r = isqrt(m << k)
    exact = r * r == (m << k)
    return round_pack(0, (r << 1) | (not exact), (e - k) // 2 - 1)


# -- sign, magnitude, min/max, comparisons ---------------------------------------------------
def neg(a: int) -> int:
    return nan_result() if is_nan(a) else a ^ SIGN


def abs_(a: int) -> int:
    return nan_result() if is_nan(a) else a & 0x7FFFFFFF


def _key(a: int) -> int:
    """Order-preserving integer of a non-NaN pattern (-0 < +0, as IEEE `maximum` wants)."""
    return -(a & 0x7FFFFFFF) - 1 if a & SIGN else a


def max_(a: int, b: int) -> int:
    """IEEE 754-2019 maximum: NaN propagates; +0 > -0 (torch.maximum semantics)."""
    if _any_nan(a, b):
        return nan_result()
    return a if _key(a) >= _key(b) else b


def min_(a: int, b: int) -> int:
    """IEEE 754-2019 minimum: NaN propagates; -0 < +0 (torch.minimum semantics)."""
    if _any_nan(a, b):
        return nan_result()
    return a if _key(a) <= _key(b) else b


def eq(a: int, b: int) -> bool:
    if _any_nan(a, b):
        return False
    return a == b or (is_zero(a) and is_zero(b))


def lt(a: int, b: int) -> bool:
    if _any_nan(a, b):
        return False
    if is_zero(a) and is_zero(b):
        return False
    return _key(a) < _key(b)


def le(a: int, b: int) -> bool:
    return eq(a, b) or lt(a, b)


def select(cond: bool, a: int, b: int) -> int:
    """cond ? a : b; an exact copy except that a NaN is canonicalised."""
    x = a if cond else b
    return nan_result() if is_nan(x) else x


# -- integral rounding and scaling --------------------------------------------------------------
def _round_integral(a: int, up_if) -> int:
    """Shared body of rint/floor: drop the fraction bits of a finite a, then add one
    unit (away from zero) when up_if(sign, dropped, half, kept_lsb) says so."""
    if is_nan(a):
        return nan_result()
    if is_inf(a) or is_zero(a):
        return a
    s, m, e = unpack(a)
    if e >= 0:
        return a                                        # already an integer
    shift = -e
    q = m >> shift
    dropped = m & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    if dropped and up_if(s, dropped, half, q & 1):
        q += 1
    return round_pack(s, q, 0)                          # q == 0 keeps the sign (-0)


def rint(a: int) -> int:
    """Round to integral, ties to even (C rintf in the default mode, torch.round)."""
    return _round_integral(a, lambda s, d, h, odd: d > h or (d == h and odd))


def floor(a: int) -> int:
    return _round_integral(a, lambda s, d, h, odd: s == 1)


def trunc(a: int) -> int:
    return _round_integral(a, lambda s, d, h, odd: False)


def ldexp(a: int, n: int) -> int:
    """a * 2**n, correctly rounded (only subnormal results and overflow can round)."""
    if is_nan(a):
        return nan_result()
    if is_inf(a) or is_zero(a):
        return a
    s, m, e = unpack(a)
    n = max(-400, min(400, n))  # beyond +-400 every finite input already over/underflows
    return round_pack(s, m, e + n)


# -- conversions ---------------------------------------------------------------------------
def from_int32(i: int) -> int:
    if not INT32_MIN <= i <= INT32_MAX:
        raise ValueError(f"from_int32: {i} is outside the int32 range")
    return round_pack(1 if i < 0 else 0, abs(i), 0)


def _to_int32(a: int, rounded: int) -> int:
    """Saturating conversion (CUDA's __float2int_*, Rust's `as`): NaN -> 0, out of range
    -> INT32_MIN/INT32_MAX. x86's cvt would give INT32_MIN for both; we pin one answer."""
    if is_nan(rounded):
        return 0
    if is_inf(rounded):
        return INT32_MIN if sign_of(rounded) else INT32_MAX
    s, m, e = unpack(rounded)
    v = m << e if e >= 0 else m >> -e                   # exact: rounded is integral
    v = -v if s else v
    return max(INT32_MIN, min(INT32_MAX, v))


def to_int32_trunc(a: int) -> int:
    return _to_int32(a, trunc(a))


def to_int32_rne(a: int) -> int:
    return _to_int32(a, rint(a))


# -- the primitive table ------------------------------------------------------------------------
# Opcode ids are part of the wire format (docs/NUMERICS.md, "Primitive table"): the one-step
# executor in contracts/ uses the same numbers. Every operand and result is a uint32 word:
# floats as their bits, int32 as two's complement, booleans as 0/1.
def _i32(word: int) -> int:
    return word - (1 << 32) if word & SIGN else word


def _u32(i: int) -> int:
    return i & 0xFFFFFFFF


PRIMITIVES = {
    # name: (opcode, arity, word-level function)
    "add": (0, 2, add),
    "sub": (1, 2, sub),
    "mul": (2, 2, mul),
    "fma": (3, 3, fma),
    "div": (4, 2, div),
    "sqrt": (5, 1, sqrt),
    "neg": (6, 1, neg),
    "abs": (7, 1, abs_),
    "min": (8, 2, min_),
    "max": (9, 2, max_),
    "eq": (10, 2, lambda a, b: int(eq(a, b))),
    "lt": (11, 2, lambda a, b: int(lt(a, b))),
    "le": (12, 2, lambda a, b: int(le(a, b))),
    "select": (13, 3, lambda c, a, b: select(c != 0, a, b)),
    "rint": (14, 1, rint),
    "floor": (15, 1, floor),
    "trunc": (16, 1, trunc),
    "ldexp": (17, 2, lambda a, n: ldexp(a, _i32(n))),
    "from_int32": (18, 1, lambda i: from_int32(_i32(i))),
    "to_int32_trunc": (19, 1, lambda a: _u32(to_int32_trunc(a))),
    "to_int32_rne": (20, 1, lambda a: _u32(to_int32_rne(a))),
    "copy": (21, 1, lambda a: a),  # data movement: the exact bits, NaN payload included
}
BY_OPCODE = {code: (name, arity, fn) for name, (code, arity, fn) in PRIMITIVES.items()}
# Operands that are int32 words rather than binary32 (select's first operand is a 0/1 word).
INT32_OPERANDS = {("ldexp", 1), ("from_int32", 0)}


def apply(opcode: int, a: int, b: int = 0, c: int = 0) -> int:
    """Execute one primitive on uint32 words, as the one-step executor does on chain."""
    if opcode not in BY_OPCODE:
        raise ValueError(f"unknown primitive opcode {opcode}; known: 0..{max(BY_OPCODE)}")
    for w in (a, b, c):
        if not 0 <= w <= 0xFFFFFFFF:
            raise ValueError(f"operand {w} is not a uint32 word")
    _, arity, fn = BY_OPCODE[opcode]
    return fn(*(a, b, c)[:arity])
