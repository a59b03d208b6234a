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
        assembly ("memory-safe") {
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
        assembly ("memory-safe") {
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
    ///      from one or two comparisons; the general bit length costs ~250 gas).
    ///      Nearest-even as one addition before the shift: m + (half - 1) + (the kept lsb)
    ///      carries exactly when the dropped bits exceed half, or equal it with an odd lsb.
    ///      The packing adds q (hidden bit included) to the exponent field minus one, so a
    ///      rounding carry into the next binade, and a subnormal that rounds up to the
    ///      smallest normal, land in the right exponent by themselves; one comparison then
    ///      finds overflow. A shift past 255 bits leaves 0, as rounding must.
    function roundPackN(uint256 sign, uint256 m, int256 e, uint256 n) internal pure returns (uint256 r) {
        assembly ("memory-safe") {
            if m {
                // lsb: exponent of the result's last kept bit (never below the subnormal lsb)
                let lsb := sub(add(e, n), 24)
                if slt(lsb, sub(0, 149)) { lsb := sub(0, 149) }
                let sh := sub(lsb, e)
                let q
                switch sgt(sh, 0)
                case 1 { q := shr(sh, add(m, add(sub(shl(sub(sh, 1), 1), 1), and(shr(sh, m), 1)))) }
                default { q := shl(sub(0, sh), m) }
                r := add(shl(23, add(lsb, 149)), q)
                if gt(r, 0x7f7fffff) { r := 0x7f800000 }
            }
            r := or(r, shl(31, sign))
        }
    }

    // -- arithmetic --------------------------------------------------------------------------
    function add(F32 fa, F32 fb) internal pure returns (F32) {
        return F32.wrap(uint32(addBits(F32.unwrap(fa), F32.unwrap(fb))));
    }

    /// @dev One assembly block, rounding included (no internal call on any path): order by
    ///      magnitude (a NaN, the largest magnitude, lands in x, so one test finds every
    ///      special); two subnormals add exactly (their bit patterns are the sum's); else
    ///      x << d +- y exactly, y beyond 40 bits below x's lsb collapsed into one sticky
    ///      unit 41 bits below it (rounds identically: x has 64 bits there). The bit length
    ///      is one comparison away unless the difference may cancel (opposite signs, d < 2),
    ///      the only case whose result can be subnormal or zero. Rounding as roundPackN.
    function addBits(uint256 a, uint256 b) internal pure returns (uint256 r) {
        assembly ("memory-safe") {
            let ax := and(a, 0x7fffffff)
            let bx := and(b, 0x7fffffff)
            if lt(ax, bx) {
                let t := a
                a := b
                b := t
                t := ax
                ax := bx
                bx := t
            }
            let xa := shr(23, ax)
            switch xa
            case 0xff {
                // x is NaN, or inf: inf - inf is NaN, else x
                r := a
                if or(gt(ax, 0x7f800000), and(eq(bx, 0x7f800000), shr(31, xor(a, b)))) { r := 0x7fc00000 }
            }
            case 0 {
                // two subnormals (or zeros): exact, and the sum's bits are its significand
                let s := and(a, 0x80000000)
                switch shr(31, xor(a, b))
                case 0 { r := add(ax, bx) }
                default { r := sub(ax, bx) }
                if iszero(r) { s := and(s, b) } // +0, or -0 for (-0) + (-0)
                r := or(r, s)
            }
            default {
                let xb := shr(23, bx)
                let mb := or(and(bx, 0x7fffff), shl(23, iszero(iszero(xb))))
                let d := sub(xa, add(xb, iszero(xb)))
                if gt(d, 40) {
                    mb := iszero(iszero(mb))
                    d := 41
                }
                let opp := shr(31, xor(a, b))
                let m := shl(d, or(and(ax, 0x7fffff), 0x800000))
                switch opp
                case 0 { m := add(m, mb) }
                default { m := sub(m, mb) } // |x| >= |y|: never negative
                let e := sub(sub(xa, d), 150) // the exponent of m's lsb
                let lsb
                switch and(opp, lt(d, 2))
                case 1 {
                    // may cancel: m < 2**25, its bit length in five steps; a subnormal result
                    // keeps the subnormal lsb, an exact zero is +0 (signs differ)
                    let n := shl(4, gt(m, 0xffff))
                    n := or(n, shl(3, gt(shr(n, m), 0xff)))
                    n := or(n, shl(2, gt(shr(n, m), 0xf)))
                    n := or(n, shl(1, gt(shr(n, m), 0x3)))
                    n := add(n, add(gt(shr(n, m), 1), iszero(iszero(m))))
                    lsb := sub(add(e, n), 24)
                    if or(slt(lsb, sub(0, 149)), iszero(m)) { lsb := sub(0, 149) }
                    if iszero(m) { a := 0 }
                }
                default {
                    // x << d's bit length is 24 + d: a sum has that or one more, a
                    // difference (d >= 2) that or one less
                    let k := sub(add(24, d), opp)
                    lsb := sub(add(e, add(k, iszero(iszero(shr(k, m))))), 24)
                }
                let sh := sub(lsb, e)
                let q
                switch sgt(sh, 0)
                case 1 { q := shr(sh, add(m, add(sub(shl(sub(sh, 1), 1), 1), and(shr(sh, m), 1)))) }
                default { q := shl(sub(0, sh), m) }
                r := add(shl(23, add(lsb, 149)), q)
                if gt(r, 0x7f7fffff) { r := 0x7f800000 }
                r := or(r, and(a, 0x80000000))
            }
        }
    }

    function sub(F32 a, F32 b) internal pure returns (F32) {
        // a NaN b stays a NaN with its sign flipped: addBits canonicalises it
        return F32.wrap(uint32(addBits(F32.unwrap(a), F32.unwrap(b) ^ SIGN)));
    }

    function mul(F32 fa, F32 fb) internal pure returns (F32) {
        uint256 r;
        uint256 sign;
        uint256 m;
        int256 e;
        uint256 n;
        assembly ("memory-safe") {
            let a := fa
            let b := fb
            sign := shr(31, xor(a, b))
            let xa := and(shr(23, a), 0xff)
            let xb := and(shr(23, b), 0xff)
            switch or(eq(xa, 0xff), eq(xb, 0xff))
            case 1 {
                // NaN, or inf * 0: NaN; else a signed inf
                r := or(shl(31, sign), 0x7f800000)
                let ax := and(a, 0x7fffffff)
                let bx := and(b, 0x7fffffff)
                if or(or(gt(ax, 0x7f800000), gt(bx, 0x7f800000)), or(iszero(ax), iszero(bx))) { r := 0x7fc00000 }
                n := 1
            }
            default {
                m := mul(or(and(a, 0x7fffff), shl(23, iszero(iszero(xa)))),
                         or(and(b, 0x7fffff), shl(23, iszero(iszero(xb)))))
                e := sub(add(add(xa, iszero(xa)), add(xb, iszero(xb))), 300)
                // both normal: m in [2**46, 2**48), its bit length one comparison away
                if gt(m, 0x3fffffffffff) { n := add(47, shr(47, m)) }
            }
        }
        if (n == 1) return F32.wrap(uint32(r));
        return F32.wrap(uint32(n == 0 ? roundPack(sign, m, e) : roundPackN(sign, m, e, n)));
    }

    /// @notice a*b + c with one rounding (C fmaf, CUDA __fmaf_rn).
    function fma(F32 a, F32 b, F32 c) internal pure returns (F32) {
        return F32.wrap(uint32(fmaBits(F32.unwrap(a), F32.unwrap(b), F32.unwrap(c))));
    }

    /// @dev One assembly block, as addBits: specials from the three exponent fields; the
    ///      product exact (48 bits); the exact sum with c, rounded. Its two steps are Yul
    ///      functions called once, which the IR optimizer inlines (a Solidity internal call
    ///      costs ~200 gas there, as much as the arithmetic) and which keep the legacy
    ///      pipeline (forge's tests) within its 16 stack slots.
    function fmaBits(uint256 a, uint256 b, uint256 c) internal pure returns (uint256 r) {
        assembly ("memory-safe") {
            // (-1)**sx * mx * 2**ex + (-1)**sy * my * 2**ey, rounded; mx, my < 2**49
            function sumRound(sx, mx, ex, sy, my, ey) -> q {
                let zs := and(sx, sy) // an exact zero's sign: -0 only for (-0) + (-0)
                if slt(ex, ey) {
                    // x: the addend with the larger lsb exponent
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
                let big := shl(d, mx)
                if gt(d, 100) {
                    // SAFETY (sticky collapse): with mx != 0, my < 2**49 lies more than 2**51
                    // units below mx's lsb; as one sticky unit under mx << 80 it cannot move
                    // the result across a rounding boundary (those are >= 2**56 units apart
                    // here). With mx == 0 the sum is exactly y, so y must not be collapsed.
                    switch iszero(mx)
                    case 1 { big := 0 }
                    default {
                        big := shl(80, mx)
                        my := iszero(iszero(my))
                        ey := sub(ex, 80)
                    }
                }
                switch eq(sx, sy)
                case 1 { big := add(big, my) }
                default {
                    switch gt(big, my)
                    case 1 { big := sub(big, my) }
                    default {
                        sx := sy
                        big := sub(my, big)
                    }
                }
                switch big
                case 0 { q := shl(31, zs) }
                default { q := roundPacked(sx, big, ey) }
            }
            // roundPack (m != 0): the bit length, then as roundPackN
            function roundPacked(s, m, e) -> q {
                let n := shl(7, gt(m, 0xffffffffffffffffffffffffffffffff))
                n := or(n, shl(6, gt(shr(n, m), 0xffffffffffffffff)))
                n := or(n, shl(5, gt(shr(n, m), 0xffffffff)))
                n := or(n, shl(4, gt(shr(n, m), 0xffff)))
                n := or(n, shl(3, gt(shr(n, m), 0xff)))
                n := or(n, shl(2, gt(shr(n, m), 0xf)))
                n := or(n, shl(1, gt(shr(n, m), 0x3)))
                n := add(n, add(gt(shr(n, m), 1), 1))
                let lsb := sub(add(e, n), 24)
                if slt(lsb, sub(0, 149)) { lsb := sub(0, 149) }
                let sh := sub(lsb, e)
                switch sgt(sh, 0)
                case 1 { q := shr(sh, add(m, add(sub(shl(sub(sh, 1), 1), 1), and(shr(sh, m), 1)))) }
                default { q := shl(sub(0, sh), m) }
                q := add(shl(23, add(lsb, 149)), q)
                if gt(q, 0x7f7fffff) { q := 0x7f800000 }
                q := or(q, shl(31, s))
            }
            let xa := and(shr(23, a), 0xff)
            let xb := and(shr(23, b), 0xff)
            let xc := and(shr(23, c), 0xff)
            switch or(or(eq(xa, 0xff), eq(xb, 0xff)), eq(xc, 0xff))
            case 1 {
                let ps := shr(31, xor(a, b))
                let ax := and(a, 0x7fffffff)
                let bx := and(b, 0x7fffffff)
                switch or(or(gt(ax, 0x7f800000), gt(bx, 0x7f800000)), gt(and(c, 0x7fffffff), 0x7f800000))
                case 1 { r := 0x7fc00000 }
                default {
                    switch or(eq(xa, 0xff), eq(xb, 0xff))
                    case 1 {
                        // inf * y (+ c): NaN for inf * 0 and for inf - inf
                        r := or(shl(31, ps), 0x7f800000)
                        if or(or(iszero(ax), iszero(bx)), and(eq(xc, 0xff), xor(shr(31, c), ps))) { r := 0x7fc00000 }
                    }
                    default { r := c } // finite product + inf
                }
            }
            default {
                r := sumRound(shr(31, xor(a, b)),
                              mul(or(and(a, 0x7fffff), shl(23, iszero(iszero(xa)))),
                                  or(and(b, 0x7fffff), shl(23, iszero(iszero(xb))))),
                              sub(add(add(xa, iszero(xa)), add(xb, iszero(xb))), 300),
                              shr(31, c), or(and(c, 0x7fffff), shl(23, iszero(iszero(xc)))),
                              sub(add(xc, iszero(xc)), 150))
            }
        }
    }

    /// @dev Specials and zeros decided in one branch on the exponent fields; two normal
    ///      operands go straight to the division; a subnormal one is normalised first.
    function div(F32 fa, F32 fb) internal pure returns (F32) {
        uint256 r;
        uint256 sign;
        uint256 ma;
        uint256 mb;
        int256 e;
        uint256 path; // 0: both normal, 1: r is the result, 2: a subnormal operand
        assembly ("memory-safe") {
            let a := fa
            let b := fb
            sign := shl(31, shr(31, xor(a, b)))
            let ax := and(a, 0x7fffffff)
            let bx := and(b, 0x7fffffff)
            let xa := shr(23, ax)
            let xb := shr(23, bx)
            switch or(or(eq(xa, 0xff), eq(xb, 0xff)), or(iszero(ax), iszero(bx)))
            case 1 {
                path := 1
                switch or(or(gt(ax, 0x7f800000), gt(bx, 0x7f800000)), or(and(eq(ax, 0x7f800000), eq(bx, 0x7f800000)),
                                                                          and(iszero(ax), iszero(bx))))
                case 1 { r := 0x7fc00000 } // NaN, inf / inf, 0 / 0
                default {
                    r := sign // x / inf, 0 / y
                    if or(eq(ax, 0x7f800000), iszero(bx)) { r := or(sign, 0x7f800000) } // inf / y, x / 0
                }
            }
            default {
                if or(iszero(xa), iszero(xb)) { path := 2 }
                ma := or(and(ax, 0x7fffff), 0x800000)
                mb := or(and(bx, 0x7fffff), 0x800000)
                e := sub(xa, xb)
            }
        }
        if (path == 1) return F32.wrap(uint32(r));
        unchecked {
            if (path == 2) {
                int256 ea;
                int256 eb;
                (ma, ea) = unpackNormalised(F32.unwrap(fa));
                (mb, eb) = unpackNormalised(F32.unwrap(fb));
                e = ea - eb;
            }
            // ma, mb in [2**23, 2**24): the quotient has 28 or 29 bits; remainder -> sticky.
            uint256 m;
            assembly ("memory-safe") {
                let num := shl(28, ma)
                m := or(shl(1, div(num, mb)), iszero(iszero(mod(num, mb)))) // 29 or 30 bits
            }
            return F32.wrap(uint32(roundPackN(sign >> 31, m, e - 29, 29 + (m >> 29))));
        }
    }

    function sqrt(F32 fa) internal pure returns (F32) {
        uint256 a = F32.unwrap(fa);
        uint256 m;
        int256 e;
        uint256 path; // 0: normal, 1: the result is a itself or NaN, 2: subnormal
        assembly ("memory-safe") {
            let xa := and(shr(23, a), 0xff)
            switch or(eq(xa, 0xff), or(gt(a, 0x7fffffff), iszero(a)))
            case 1 {
                // sqrt(+-0) = +-0, sqrt(+inf) = +inf; NaN, negative: NaN
                path := 1
                if and(or(gt(a, 0x7f800000), gt(a, 0x7fffffff)), iszero(eq(a, 0x80000000))) { a := 0x7fc00000 }
            }
            default {
                switch xa
                case 0 { path := 2 }
                default {
                    m := or(and(a, 0x7fffff), 0x800000)
                    e := sub(xa, 150)
                }
            }
        }
        if (path == 1) return F32.wrap(uint32(a));
        unchecked {
            if (path == 2) (m, e) = unpackNormalised(a);
            // m has 24 bits; m << k has 54 or 55 bits with e - k even: isqrt has 27-28 bits.
            uint256 k = ((e - 30) & 1) == 0 ? 30 : 31;
            uint256 x = m << k;
            uint256 r = isqrt(x);
            uint256 rm;
            assembly ("memory-safe") {
                rm := or(shl(1, r), iszero(eq(mul(r, r), x))) // 28 or 29 bits, sticky lsb
            }
            return F32.wrap(uint32(roundPackN(0, rm, (e - int256(k)) / 2 - 1, 28 + (rm >> 28))));
        }
    }

    /// @dev floor(sqrt(x)) for 2**53 <= x < 2**55. The first Newton step from 2**27 is
    ///      the tangent of sqrt at 2**54: at most 6.1% high (AM-GM: never low); three more
    ///      steps bring the error below 2e-12 relative (< 1 unit). Integer Newton from
    ///      above never goes below the floor, so r is floor or floor + 1; r*r > x tells.
    function isqrt(uint256 x) internal pure returns (uint256 r) {
        assembly ("memory-safe") {
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
