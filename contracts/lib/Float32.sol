// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @dev An IEEE-754 binary32 value, as its bit pattern.
type F32 is uint32;

/// @title Float32: binary32 soft-float for the one-step referee
/// @notice Round-to-nearest-even, subnormals kept, every NaN result is 0x7FC00000
///         (docs/NUMERICS.md). Bit-exact twin of offchain/softfloat.py, same names.
/// @dev Structure after Berkeley SoftFloat: `unpack` -> exact integer arithmetic in one
///      256-bit word -> `roundPack`, the single rounding point. Where an exact sum would
///      not fit in 256 bits (addends 2^60+ apart) the smaller addend collapses into a
///      sticky unit, which rounds identically (see docs/NUMERICS.md, "Sticky collapse").
library Float32 {
    uint256 internal constant SIGN = 0x80000000;
    uint256 internal constant FRAC_MASK = 0x007FFFFF;
    uint256 internal constant HIDDEN = 0x00800000;
    uint256 internal constant POS_INF = 0x7F800000;
    uint256 internal constant CANONICAL_NAN = 0x7FC00000;
    int256 internal constant EMIN_LSB = -149;

    /// @notice A word that is not a 32-bit pattern was given where a binary32 is expected.
    error NotBinary32(uint256 word);
    /// @notice A word that is not an int32 (two's complement in 32 bits) was given.
    error NotInt32(uint256 word);

    // -- construction ------------------------------------------------------------------
    function fromBits(uint256 word) internal pure returns (F32) {
        if (word > 0xFFFFFFFF) revert NotBinary32(word);
        return F32.wrap(uint32(word));
    }

    function bits(F32 a) internal pure returns (uint256) {
        return F32.unwrap(a);
    }

    // -- classification ------------------------------------------------------------------
    function isNaN(uint256 a) internal pure returns (bool) {
        return (a & 0x7FFFFFFF) > POS_INF;
    }

    function isInf(uint256 a) internal pure returns (bool) {
        return (a & 0x7FFFFFFF) == POS_INF;
    }

    function isZero(uint256 a) internal pure returns (bool) {
        return (a & 0x7FFFFFFF) == 0;
    }

    /// @dev |a| == m * 2**e exactly, for finite a.
    function unpack(uint256 a) internal pure returns (uint256 m, int256 e) {
        unchecked {
            uint256 ex = (a >> 23) & 0xFF;
            if (ex == 0) return (a & FRAC_MASK, EMIN_LSB);
            return ((a & FRAC_MASK) | HIDDEN, int256(ex) - 150);
        }
    }

    /// @dev As unpack, with subnormals shifted up to a 24-bit significand (e below -149).
    function unpackNormalised(uint256 a) internal pure returns (uint256 m, int256 e) {
        unchecked {
            (m, e) = unpack(a);
            if (m < HIDDEN) {
                uint256 s = 24 - bitLength(m);
                m <<= s;
                e -= int256(s);
            }
        }
    }

    /// @dev Number of significant bits of x (0 for 0).
    function bitLength(uint256 x) internal pure returns (uint256 r) {
        assembly {
            r := shl(7, lt(0xffffffffffffffffffffffffffffffff, x))
            r := or(r, shl(6, lt(0xffffffffffffffff, shr(r, x))))
            r := or(r, shl(5, lt(0xffffffff, shr(r, x))))
            r := or(r, shl(4, lt(0xffff, shr(r, x))))
            r := or(r, shl(3, lt(0xff, shr(r, x))))
            r := or(r, shl(2, lt(0xf, shr(r, x))))
            r := or(r, shl(1, lt(0x3, shr(r, x))))
            r := or(r, lt(0x1, shr(r, x)))
            r := add(r, iszero(iszero(x)))
        }
    }

    // -- the one rounding point ------------------------------------------------------------
    /// @dev Round (-1)**sign * m * 2**e to binary32, nearest-even. m may carry a sticky
    ///      bit in its lsb provided it has >= 26 significant bits.
    function roundPack(uint256 sign, uint256 m, int256 e) internal pure returns (uint256) {
        unchecked {
            if (m == 0) return sign << 31;
            uint256 n = bitLength(m);
            int256 lsb = e + int256(n) - 24;
            if (lsb < EMIN_LSB) lsb = EMIN_LSB;
            uint256 q;
            if (lsb > e) {
                uint256 shift = uint256(lsb - e);
                if (shift > n) {
                    q = 0;
                } else {
                    q = m >> shift;
                    uint256 rem = m & ((1 << shift) - 1);
                    uint256 half = 1 << (shift - 1);
                    if (rem > half || (rem == half && (q & 1) == 1)) q += 1;
                }
            } else {
                q = m << uint256(e - lsb);
            }
            if (q == 1 << 24) {
                q >>= 1;
                lsb += 1;
            }
            if (q < HIDDEN) return (sign << 31) | q;
            int256 biased = lsb + 150;
            if (biased >= 0xFF) return (sign << 31) | POS_INF;
            return (sign << 31) | (uint256(biased) << 23) | (q & FRAC_MASK);
        }
    }

    // -- exact sums ------------------------------------------------------------------------
    /// @dev Round sx*mx*2**ex + sy*my*2**ey (s = 1 means negative); an exact zero gets
    ///      zeroSign. Requires mx, my < 2**49.
    function sumPack(uint256 sx, uint256 mx, int256 ex, uint256 sy, uint256 my, int256 ey, uint256 zeroSign)
        internal
        pure
        returns (uint256)
    {
        unchecked {
            if (mx == 0) return my == 0 ? zeroSign << 31 : roundPack(sy, my, ey);
            if (my == 0) return roundPack(sx, mx, ex);
            // Order so that x has the larger lsb exponent.
            if (ex < ey) (sx, mx, ex, sy, my, ey) = (sy, my, ey, sx, mx, ex);
            uint256 d = uint256(ex - ey);
            uint256 big;
            uint256 small;
            int256 e;
            if (d <= 100) {
                (big, small, e) = (mx << d, my, ey);          // exact: < 2**150
            } else {
                // SAFETY: my < 2**49 lies more than 2**51 units below mx's lsb; as one
                // sticky unit under mx << 80 it cannot move the result across a rounding
                // boundary (those are >= 2**56 units apart here).
                (big, small, e) = (mx << 80, 1, ex - 80);
            }
            if (sx == sy) return roundPack(sx, big + small, e);
            if (big > small) return roundPack(sx, big - small, e);
            if (small > big) return roundPack(sy, small - big, e);
            return zeroSign << 31;                            // exact cancellation: +0
        }
    }

    // -- arithmetic --------------------------------------------------------------------------
    function add(F32 fa, F32 fb) internal pure returns (F32) {
        return F32.wrap(uint32(addBits(F32.unwrap(fa), F32.unwrap(fb))));
    }

    function addBits(uint256 a, uint256 b) internal pure returns (uint256) {
        unchecked {
            if (isNaN(a) || isNaN(b)) return CANONICAL_NAN;
            if (isInf(a) || isInf(b)) {
                if (isInf(a) && isInf(b) && (a ^ b) >= SIGN) return CANONICAL_NAN;
                return isInf(a) ? a : b;
            }
            (uint256 ma, int256 ea) = unpack(a);
            (uint256 mb, int256 eb) = unpack(b);
            return sumPack(a >> 31, ma, ea, b >> 31, mb, eb, (a & b) >> 31);
        }
    }

    function sub(F32 a, F32 b) internal pure returns (F32) {
        uint256 bb = F32.unwrap(b);
        if (isNaN(bb)) return F32.wrap(uint32(CANONICAL_NAN));
        return F32.wrap(uint32(addBits(F32.unwrap(a), bb ^ SIGN)));
    }

    function mul(F32 fa, F32 fb) internal pure returns (F32) {
        unchecked {
            uint256 a = F32.unwrap(fa);
            uint256 b = F32.unwrap(fb);
            if (isNaN(a) || isNaN(b)) return F32.wrap(uint32(CANONICAL_NAN));
            uint256 sign = (a ^ b) >> 31;
            if (isInf(a) || isInf(b)) {
                if (isZero(a) || isZero(b)) return F32.wrap(uint32(CANONICAL_NAN));
                return F32.wrap(uint32((sign << 31) | POS_INF));
            }
            (uint256 ma, int256 ea) = unpack(a);
            (uint256 mb, int256 eb) = unpack(b);
            return F32.wrap(uint32(roundPack(sign, ma * mb, ea + eb)));
        }
    }

    /// @notice a*b + c with one rounding (C fmaf, CUDA __fmaf_rn).
    function fma(F32 fa, F32 fb, F32 fc) internal pure returns (F32) {
        unchecked {
            uint256 a = F32.unwrap(fa);
            uint256 b = F32.unwrap(fb);
            uint256 c = F32.unwrap(fc);
            if (isNaN(a) || isNaN(b) || isNaN(c)) return F32.wrap(uint32(CANONICAL_NAN));
            uint256 ps = (a ^ b) >> 31;
            if (isInf(a) || isInf(b)) {
                if (isZero(a) || isZero(b)) return F32.wrap(uint32(CANONICAL_NAN));
                if (isInf(c) && (c >> 31) != ps) return F32.wrap(uint32(CANONICAL_NAN));
                return F32.wrap(uint32((ps << 31) | POS_INF));
            }
            if (isInf(c)) return fc;
            (uint256 ma, int256 ea) = unpack(a);
            (uint256 mb, int256 eb) = unpack(b);
            (uint256 mc, int256 ec) = unpack(c);
            return F32.wrap(uint32(sumPack(ps, ma * mb, ea + eb, c >> 31, mc, ec, ps & (c >> 31))));
        }
    }

    function div(F32 fa, F32 fb) internal pure returns (F32) {
        unchecked {
            uint256 a = F32.unwrap(fa);
            uint256 b = F32.unwrap(fb);
            if (isNaN(a) || isNaN(b)) return F32.wrap(uint32(CANONICAL_NAN));
            uint256 sign = (a ^ b) >> 31;
            if (isInf(a)) return F32.wrap(uint32(isInf(b) ? CANONICAL_NAN : (sign << 31) | POS_INF));
            if (isInf(b)) return F32.wrap(uint32(sign << 31));
            if (isZero(b)) return F32.wrap(uint32(isZero(a) ? CANONICAL_NAN : (sign << 31) | POS_INF));
            if (isZero(a)) return F32.wrap(uint32(sign << 31));
            (uint256 ma, int256 ea) = unpackNormalised(a);
            (uint256 mb, int256 eb) = unpackNormalised(b);
            // ma, mb in [2**23, 2**24): the quotient has 28 or 29 bits; remainder -> sticky.
            uint256 num = ma << 28;
            uint256 q = num / mb;
            uint256 sticky = num - q * mb == 0 ? 0 : 1;
            return F32.wrap(uint32(roundPack(sign, (q << 1) | sticky, ea - eb - 29)));
        }
    }

    function sqrt(F32 fa) internal pure returns (F32) {
        unchecked {
            uint256 a = F32.unwrap(fa);
            if (isNaN(a)) return F32.wrap(uint32(CANONICAL_NAN));
            if (isZero(a)) return fa; // sqrt(-0) = -0
            if (a >= SIGN) return F32.wrap(uint32(CANONICAL_NAN));
            if (isInf(a)) return fa;
            (uint256 m, int256 e) = unpackNormalised(a);
            // m has 24 bits; m << k has 54 or 55 bits with e - k even: isqrt has 27-28 bits.
            uint256 k = ((e - 30) & 1) == 0 ? 30 : 31;
            uint256 x = m << k;
            uint256 r = isqrt(x);
            uint256 sticky = r * r == x ? 0 : 1;
            return F32.wrap(uint32(roundPack(0, (r << 1) | sticky, (e - int256(k)) / 2 - 1)));
        }
    }

    /// @dev floor(sqrt(x)) for 2**53 <= x < 2**56, by Newton's method from above.
    function isqrt(uint256 x) internal pure returns (uint256 r) {
        unchecked {
            r = 1 << 28; // >= sqrt(2**56) > sqrt(x): the iteration decreases monotonically
            r = (r + x / r) >> 1;
            r = (r + x / r) >> 1;
            r = (r + x / r) >> 1;
            r = (r + x / r) >> 1;
            r = (r + x / r) >> 1;
            r = (r + x / r) >> 1;
            uint256 next = (r + x / r) >> 1;
            while (next < r) {
                r = next;
                next = (r + x / r) >> 1;
            }
        }
    }

    // -- sign, order ---------------------------------------------------------------------------
    function neg(F32 a) internal pure returns (F32) {
        uint256 x = F32.unwrap(a);
        return F32.wrap(uint32(isNaN(x) ? CANONICAL_NAN : x ^ SIGN));
    }

    function abs(F32 a) internal pure returns (F32) {
        uint256 x = F32.unwrap(a);
        return F32.wrap(uint32(isNaN(x) ? CANONICAL_NAN : x & 0x7FFFFFFF));
    }

    /// @dev Order-preserving key of a non-NaN pattern, with -0 < +0.
    function key(uint256 a) internal pure returns (int256) {
        unchecked {
            return a >= SIGN ? -int256(a & 0x7FFFFFFF) - 1 : int256(a);
        }
    }

    /// @notice IEEE 754-2019 maximum: NaN propagates, +0 > -0.
    function max(F32 a, F32 b) internal pure returns (F32) {
        uint256 x = F32.unwrap(a);
        uint256 y = F32.unwrap(b);
        if (isNaN(x) || isNaN(y)) return F32.wrap(uint32(CANONICAL_NAN));
        return key(x) >= key(y) ? a : b;
    }

    /// @notice IEEE 754-2019 minimum: NaN propagates, -0 < +0.
    function min(F32 a, F32 b) internal pure returns (F32) {
        uint256 x = F32.unwrap(a);
        uint256 y = F32.unwrap(b);
        if (isNaN(x) || isNaN(y)) return F32.wrap(uint32(CANONICAL_NAN));
        return key(x) <= key(y) ? a : b;
    }

    function eq(F32 a, F32 b) internal pure returns (bool) {
        uint256 x = F32.unwrap(a);
        uint256 y = F32.unwrap(b);
        if (isNaN(x) || isNaN(y)) return false;
        return x == y || (isZero(x) && isZero(y));
    }

    function lt(F32 a, F32 b) internal pure returns (bool) {
        uint256 x = F32.unwrap(a);
        uint256 y = F32.unwrap(b);
        if (isNaN(x) || isNaN(y)) return false;
        if (isZero(x) && isZero(y)) return false;
        return key(x) < key(y);
    }

    function le(F32 a, F32 b) internal pure returns (bool) {
        return eq(a, b) || lt(a, b);
    }

    /// @notice cond ? a : b, canonicalising a NaN.
    function select(bool cond, F32 a, F32 b) internal pure returns (F32) {
        uint256 x = F32.unwrap(cond ? a : b);
        return F32.wrap(uint32(isNaN(x) ? CANONICAL_NAN : x));
    }

    // -- integral rounding and scaling -------------------------------------------------------------
    uint256 private constant MODE_RINT = 0;
    uint256 private constant MODE_FLOOR = 1;
    uint256 private constant MODE_TRUNC = 2;

    /// @dev Shared body of rint/floor/trunc: drop the fraction bits, then add one unit
    ///      away from zero when the mode says so.
    function roundIntegral(uint256 a, uint256 mode) internal pure returns (uint256) {
        unchecked {
            if (isNaN(a)) return CANONICAL_NAN;
            if (isInf(a) || isZero(a)) return a;
            (uint256 m, int256 e) = unpack(a);
            if (e >= 0) return a;
            uint256 shift = uint256(-e);
            uint256 q = m >> shift;
            uint256 dropped = m & ((1 << shift) - 1);
            if (dropped != 0) {
                uint256 half = 1 << (shift - 1);
                bool up = mode == MODE_RINT
                    ? (dropped > half || (dropped == half && (q & 1) == 1))
                    : (mode == MODE_FLOOR && a >= SIGN);
                if (up) q += 1;
            }
            return roundPack(a >> 31, q, 0);
        }
    }

    /// @notice Round to integral, ties to even (rintf, torch.round).
    function rint(F32 a) internal pure returns (F32) {
        return F32.wrap(uint32(roundIntegral(F32.unwrap(a), MODE_RINT)));
    }

    function floor(F32 a) internal pure returns (F32) {
        return F32.wrap(uint32(roundIntegral(F32.unwrap(a), MODE_FLOOR)));
    }

    function trunc(F32 a) internal pure returns (F32) {
        return F32.wrap(uint32(roundIntegral(F32.unwrap(a), MODE_TRUNC)));
    }

    /// @notice a * 2**n, correctly rounded.
    function ldexp(F32 fa, int256 n) internal pure returns (F32) {
        unchecked {
            uint256 a = F32.unwrap(fa);
            if (isNaN(a)) return F32.wrap(uint32(CANONICAL_NAN));
            if (isInf(a) || isZero(a)) return fa;
            if (n > 400) n = 400; // beyond +-400 every finite input over/underflows already
            if (n < -400) n = -400;
            (uint256 m, int256 e) = unpack(a);
            return F32.wrap(uint32(roundPack(a >> 31, m, e + n)));
        }
    }

    // -- conversions -------------------------------------------------------------------------------
    function fromInt32(int256 i) internal pure returns (F32) {
        unchecked {
            if (i < type(int32).min || i > type(int32).max) revert NotInt32(uint256(i));
            return i < 0
                ? F32.wrap(uint32(roundPack(1, uint256(-i), 0)))
                : F32.wrap(uint32(roundPack(0, uint256(i), 0)));
        }
    }

    /// @dev Saturating: NaN -> 0, out of range -> int32 min/max (CUDA __float2int_*).
    function toInt32(uint256 r) private pure returns (int256) {
        unchecked {
            if (isNaN(r)) return 0;
            if (isInf(r)) return r >= SIGN ? type(int32).min : type(int32).max;
            (uint256 m, int256 e) = unpack(r);
            uint256 v = e >= 0 ? (e > 40 ? 1 << 40 : m << uint256(e)) : m >> uint256(-e);
            int256 s = r >= SIGN ? -int256(v) : int256(v);
            if (s < type(int32).min) return type(int32).min;
            if (s > type(int32).max) return type(int32).max;
            return s;
        }
    }

    function toInt32Trunc(F32 a) internal pure returns (int256) {
        return toInt32(roundIntegral(F32.unwrap(a), MODE_TRUNC));
    }

    function toInt32Rne(F32 a) internal pure returns (int256) {
        return toInt32(roundIntegral(F32.unwrap(a), MODE_RINT));
    }
}
