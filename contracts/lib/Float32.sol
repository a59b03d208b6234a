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

    /// @dev |a| == m * 2**e exactly, for finite a. Branchless: a subnormal (or zero) has
    ///      no hidden bit and the exponent of the smallest normal.
    function unpack(uint256 a) internal pure returns (uint256 m, int256 e) {
        assembly {
            let ex := and(shr(23, a), 0xff)
            m := or(and(a, 0x7fffff), shl(23, iszero(iszero(ex))))
            e := sub(add(ex, iszero(ex)), 150)
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
    ///      bit in its lsb provided it has >= 26 significant bits. m < 2**255.
    function roundPack(uint256 sign, uint256 m, int256 e) internal pure returns (uint256) {
        return roundPackN(sign, m, e, bitLength(m));
    }

    /// @dev roundPack for a caller that knows n == bitLength(m) (the fast paths know it
    ///      from one comparison; the general bit length costs ~200 gas).
    function roundPackN(uint256 sign, uint256 m, int256 e, uint256 n) internal pure returns (uint256 r) {
        assembly {
            r := shl(31, sign)
            if m {
                // lsb: exponent of the result's last kept bit (never below the subnormal lsb)
                let lsb := sub(add(e, n), 24)
                if slt(lsb, sub(0, 149)) { lsb := sub(0, 149) }
                let q
                switch sgt(lsb, e)
                case 1 {
                    let shift := sub(lsb, e)
                    if iszero(gt(shift, n)) {
                        q := shr(shift, m)
                        let rem := and(m, sub(shl(shift, 1), 1))
                        let half := shl(sub(shift, 1), 1)
                        q := add(q, or(gt(rem, half), and(eq(rem, half), and(q, 1))))
                    }
                }
                default { q := shl(sub(e, lsb), m) }
                if eq(q, 0x1000000) {
                    // rounding carried into a new binade
                    q := 0x800000
                    lsb := add(lsb, 1)
                }
                switch lt(q, 0x800000)
                case 1 { r := or(r, q) } // subnormal, or rounded to zero
                default {
                    let biased := add(lsb, 150)
                    switch sgt(biased, 254)
                    case 1 { r := or(r, 0x7f800000) }
                    default { r := or(r, or(shl(23, biased), and(q, 0x7fffff))) }
                }
            }
        }
    }

    // -- exact sums ------------------------------------------------------------------------
    /// @dev (-1)**sx * big + (-1)**sy * small as sign and magnitude; an exact zero gets
    ///      zeroSign (IEEE: +0 unless both addends were -0).
    function combine(uint256 sx, uint256 big, uint256 sy, uint256 small, uint256 zeroSign)
        internal
        pure
        returns (uint256 s, uint256 m)
    {
        assembly {
            switch eq(sx, sy)
            case 1 {
                s := sx
                m := add(big, small)
            }
            default {
                switch gt(big, small)
                case 1 {
                    s := sx
                    m := sub(big, small)
                }
                default {
                    s := sy
                    m := sub(small, big)
                }
            }
            if iszero(m) { s := zeroSign }
        }
    }

    /// @dev Round sx*mx*2**ex + sy*my*2**ey (s = 1 means negative); an exact zero gets
    ///      zeroSign. Requires mx, my < 2**49.
    function sumPack(uint256 sx, uint256 mx, int256 ex, uint256 sy, uint256 my, int256 ey, uint256 zeroSign)
        internal
        pure
        returns (uint256)
    {
        uint256 s;
        uint256 m;
        int256 e;
        uint256 big;
        assembly {
            // Order so that x has the larger lsb exponent.
            if slt(ex, ey) {
                let t := sx
                sx := sy
                sy := t
                t := mx
                mx := my
                my := t
                t := ex
                ex := ey
                ey := t
            }
            let d := sub(ex, ey)
            big := shl(d, mx)
            e := ey
            if gt(d, 100) {
                // SAFETY: with mx != 0, my < 2**49 lies more than 2**51 units below mx's
                // lsb; as one sticky unit under mx << 80 it cannot move the result across
                // a rounding boundary (those are >= 2**56 units apart here). With mx == 0
                // the sum is exactly y, so y must not be collapsed.
                switch iszero(mx)
                case 1 { big := 0 }
                default {
                    big := shl(80, mx)
                    my := iszero(iszero(my))
                    e := sub(ex, 80)
                }
            }
        }
        (s, m) = combine(sx, big, sy, my, zeroSign);
        return roundPack(s, m, e);
    }

    // -- arithmetic --------------------------------------------------------------------------
    function add(F32 fa, F32 fb) internal pure returns (F32) {
        return F32.wrap(uint32(addBits(F32.unwrap(fa), F32.unwrap(fb))));
    }

    /// @dev True when the exponent field of a or of b is all ones (inf or NaN).
    function anySpecial(uint256 a, uint256 b) private pure returns (bool r) {
        assembly {
            r := or(eq(and(a, 0x7f800000), 0x7f800000), eq(and(b, 0x7f800000), 0x7f800000))
        }
    }

    function addBits(uint256 a, uint256 b) internal pure returns (uint256) {
        if (anySpecial(a, b)) {
            if (isNaN(a) || isNaN(b)) return CANONICAL_NAN;
            if (isInf(a) && isInf(b) && (a ^ b) >= SIGN) return CANONICAL_NAN;
            return isInf(a) ? a : b;
        }
        uint256 s;
        uint256 m;
        int256 e;
        uint256 n;
        uint256 sx;
        uint256 sy;
        uint256 big;
        uint256 small;
        assembly {
            // unpack both (branchless; zeros and subnormals included)
            let xa := and(shr(23, a), 0xff)
            let ma := or(and(a, 0x7fffff), shl(23, iszero(iszero(xa))))
            xa := add(xa, iszero(xa))
            let xb := and(shr(23, b), 0xff)
            let mb := or(and(b, 0x7fffff), shl(23, iszero(iszero(xb))))
            xb := add(xb, iszero(xb))
            let sa := shr(31, a)
            let sb := shr(31, b)
            if lt(xa, xb) {
                let t := xa
                xa := xb
                xb := t
                t := ma
                ma := mb
                mb := t
                t := sa
                sa := sb
                sb := t
            }
            // x at bit 40; y aligned below it, bits shifted out folded into a sticky lsb.
            // SAFETY: when d > 40, x is normal, the sum has >= 63 bits and rounding drops
            // >= 39 of them, so the sticky lsb only breaks ties the right way.
            let d := sub(xa, xb)
            big := shl(40, ma)
            switch gt(d, 40)
            case 0 { small := shl(sub(40, d), mb) }
            default {
                switch gt(d, 64)
                case 1 { small := iszero(iszero(mb)) }
                default {
                    let k := sub(d, 40)
                    small := or(shr(k, mb), iszero(iszero(and(mb, sub(shl(k, 1), 1)))))
                }
            }
            e := sub(xa, 190)
            sx := sa
            sy := sb
        }
        (s, m) = combine(sx, big, sy, small, sx & sy);
        assembly {
            // bit length: one comparison unless the sum cancelled (or is subnormal)
            switch gt(m, 0x7fffffffffffffff)
            case 1 { n := add(64, gt(m, 0xffffffffffffffff)) }
            default { if gt(m, 0x3fffffffffffffff) { n := 63 } }
        }
        return n == 0 ? roundPack(s, m, e) : roundPackN(s, m, e, n);
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
            uint256 sign = (a ^ b) >> 31;
            if (anySpecial(a, b)) {
                if (isNaN(a) || isNaN(b)) return F32.wrap(uint32(CANONICAL_NAN));
                if (isZero(a) || isZero(b)) return F32.wrap(uint32(CANONICAL_NAN));
                return F32.wrap(uint32((sign << 31) | POS_INF));
            }
            (uint256 ma, int256 ea) = unpack(a);
            (uint256 mb, int256 eb) = unpack(b);
            uint256 m = ma * mb;
            // both normal: m in [2**46, 2**48), so its bit length is one comparison away
            if (m >= 1 << 46) return F32.wrap(uint32(roundPackN(sign, m, ea + eb, 47 + (m >> 47))));
            return F32.wrap(uint32(roundPack(sign, m, ea + eb)));
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
            uint256 m = (q << 1) | sticky; // 29 or 30 bits
            return F32.wrap(uint32(roundPackN(sign, m, ea - eb - 29, 29 + (m >> 29))));
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
            uint256 rm = (r << 1) | sticky; // 28 or 29 bits
            return F32.wrap(uint32(roundPackN(0, rm, (e - int256(k)) / 2 - 1, 28 + (rm >> 28))));
        }
    }

    /// @dev floor(sqrt(x)) for 2**53 <= x < 2**55. The first Newton step from 2**27 is
    ///      the tangent of sqrt at 2**54: at most 6.1% high (AM-GM: never low); three more
    ///      steps bring the error below 2e-12 relative (< 1 unit). Integer Newton from
    ///      above never goes below the floor, so r is floor or floor + 1; r*r > x tells.
    function isqrt(uint256 x) internal pure returns (uint256 r) {
        assembly {
            r := add(0x4000000, shr(28, x))
            r := shr(1, add(r, div(x, r)))
            r := shr(1, add(r, div(x, r)))
            r := shr(1, add(r, div(x, r)))
            if gt(mul(r, r), x) { r := sub(r, 1) }
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
