// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Kernel encodings and operand descriptors of docs/PROTOCOL.md §7 (levels 3-5)
/// @dev kernel    = 0x08 || u32 len name || name || u16 #ops || per operand: descriptor || commitment
///                  || output commitment
///      structure = 0x09 || u32 len name || name || u16 #ops || descriptors (what the job commits)
///      descriptor: 0x00 VIEW u16 source || i64 offset || u8 ndim || per dim u64 size, i64 stride
///                  0x01 CONST u8 dtype || u8 ndim || u64 dims || one element's bytes
///                  0x03 CAT u8 axis || CONST background || u16 #pieces || per piece: u64 start,
///                       u64 step, u64 width || VIEW or CONST
///      0x02 MAT: parsed (its size is 1), never followed: `settleable` says a job's kernel has one.
library Kernels {
    error NotAKernel();
    error BadDescriptor(uint256 at);
    error NoSuchOperand(uint256 o, uint256 count);

    uint8 internal constant VIEW = 0;
    uint8 internal constant CONST = 1;
    uint8 internal constant MAT = 2; // parsed so that a job committing one is seen (settleable): never followed
    uint8 internal constant CAT = 3;

    struct Kernel {
        bytes name;
        bytes structure; // 0x09 || name || descriptors
        bytes32[] operands; // commitments
        bytes32 output;
    }

    /// @dev The big-endian unsigned integer in bytes [o, o + n) of b (n <= 32), one load.
    function _u(bytes memory b, uint256 o, uint256 n) private pure returns (uint256 v) {
        if (o + n > b.length) revert BadDescriptor(o);
        assembly ("memory-safe") {
            v := shr(sub(256, shl(3, n)), mload(add(add(b, 32), o)))
        }
    }

    function _i64(bytes memory b, uint256 o) private pure returns (int256) {
        return int256(int64(uint64(_u(b, o, 8))));
    }

    function _word(bytes memory b, uint256 o) private pure returns (bytes32 w) {
        if (o + 32 > b.length) revert NotAKernel();
        assembly ("memory-safe") {
            w := mload(add(add(b, 32), o))
        }
    }

    function _slice(bytes memory b, uint256 from, uint256 to) private pure returns (bytes memory out) {
        if (to > b.length) revert BadDescriptor(to);
        out = new bytes(to - from);
        _copy(out, 0, b, from, to - from);
    }

    /// @dev dst[at, at + n) = src[from, from + n) (bounds are the caller's).
    function _copy(bytes memory dst, uint256 at, bytes memory src, uint256 from, uint256 n) private pure {
        assembly ("memory-safe") {
            mcopy(add(add(dst, 32), at), add(add(src, 32), from), n)
        }
    }

    function itemSize(uint256 code) internal pure returns (uint256) {
        if (code == 1 || code == 4) return 4;
        if (code == 2) return 8;
        if (code == 3) return 1;
        revert BadDescriptor(code);
    }

    /// @dev The byte length of the descriptor at offset o (checked against the buffer).
    function descriptorSize(bytes memory b, uint256 o) internal pure returns (uint256) {
        uint256 kind = _u(b, o, 1);
        if (kind == VIEW) return 12 + 16 * _u(b, o + 11, 1);
        if (kind == MAT) return 1;
        if (kind == CONST) return 3 + 8 * _u(b, o + 2, 1) + itemSize(_u(b, o + 1, 1));
        if (kind == CAT) {
            uint256 p = o + 2 + descriptorSize(b, o + 2);
            uint256 n = _u(b, p, 2);
            p += 2;
            for (uint256 i; i < n; ++i) p += 24 + descriptorSize(b, p + 24);
            return p - o;
        }
        revert BadDescriptor(o);
    }

    /// @dev Parse a kernel encoding; its structure is rebuilt from it (name and descriptors).
    function parse(bytes memory enc) internal pure returns (Kernel memory k) {
        if (enc.length < 7 || enc[0] != 0x08) revert NotAKernel();
        uint256 nl = _u(enc, 1, 4);
        k.name = _slice(enc, 5, 5 + nl);
        uint256 o = 5 + nl;
        uint256 n = _u(enc, o, 2);
        o += 2;
        k.operands = new bytes32[](n);
        // the structure is the encoding less its commitments, tagged 0x09: copied in place
        bytes memory st = new bytes(enc.length);
        _copy(st, 0, enc, 0, o);
        st[0] = 0x09;
        uint256 w = o;
        for (uint256 i; i < n; ++i) {
            uint256 size = descriptorSize(enc, o);
            if (o + size + 32 > enc.length) revert NotAKernel();
            _copy(st, w, enc, o, size);
            w += size;
            k.operands[i] = _word(enc, o + size);
            o += size + 32;
        }
        if (enc.length != o + 32) revert NotAKernel();
        k.output = _word(enc, o);
        assembly ("memory-safe") {
            mstore(st, w) // shorten: the tail past w was allocated, never used
        }
        k.structure = st;
    }

    /// @dev Can the chain follow every operand of a structure (no MAT descriptor, at any depth)?
    function settleable(bytes memory s) internal pure returns (bool) {
        uint256 p = 5 + _u(s, 1, 4);
        uint256 n = _u(s, p, 2);
        p += 2;
        for (uint256 i; i < n; ++i) {
            if (!_followable(s, p)) return false;
            p += descriptorSize(s, p);
        }
        return true;
    }

    function _followable(bytes memory b, uint256 o) private pure returns (bool) {
        uint256 kind = _u(b, o, 1);
        if (kind != CAT) return kind != MAT;
        uint256 p = o + 2 + descriptorSize(b, o + 2);
        uint256 n = _u(b, p, 2);
        p += 2;
        for (uint256 i; i < n; ++i) {
            if (!_followable(b, p + 24)) return false;
            p += 24 + descriptorSize(b, p + 24);
        }
        return true;
    }

    /// @dev Descriptor o of a structure.
    function descriptor(bytes memory s, uint256 o) internal pure returns (bytes memory) {
        uint256 p = 5 + _u(s, 1, 4);
        uint256 n = _u(s, p, 2);
        if (o >= n) revert NoSuchOperand(o, n);
        p += 2;
        for (uint256 i; i < o; ++i) p += descriptorSize(s, p);
        return _slice(s, p, p + descriptorSize(s, p));
    }

    function name(bytes memory s) internal pure returns (bytes memory) {
        return _slice(s, 5, 5 + _u(s, 1, 4));
    }

    /// @dev The operand's shape: a VIEW's or CONST's dims, a CAT's background's.
    function shape(bytes memory d) internal pure returns (uint64[] memory) {
        return _dims(d, 0);
    }

    /// @dev Every operand's shape, in one walk over a structure's descriptors (no slices).
    function shapes(bytes memory s) internal pure returns (uint64[][] memory out) {
        uint256 p = 5 + _u(s, 1, 4);
        uint256 n = _u(s, p, 2);
        p += 2;
        out = new uint64[][](n);
        for (uint256 o; o < n; ++o) {
            out[o] = _dims(s, p);
            p += descriptorSize(s, p);
        }
    }

    /// @dev The dims of the descriptor at offset p of b.
    function _dims(bytes memory b, uint256 p) private pure returns (uint64[] memory dims) {
        uint256 kind = _u(b, p, 1);
        if (kind == CAT) return _dims(b, p + 2);
        uint256 nd = _u(b, p + (kind == VIEW ? 11 : 2), 1);
        (uint256 at, uint256 step) = kind == VIEW ? (p + 12, 16) : (p + 3, 8);
        if (nd > 0) _u(b, at + step * (nd - 1), 8); // the last dim is in b (so is every one)
        dims = new uint64[](nd);
        assembly ("memory-safe") {
            for { let i := 0 } lt(i, nd) { i := add(i, 1) } {
                mstore(add(dims, shl(5, add(i, 1))), shr(192, mload(add(add(b, 32), add(at, mul(step, i))))))
            }
        }
    }

    /// @dev Where element `flat` of an operand comes from: (true, source, index) for a view of
    /// source `source` (the op's input, or m + k: kernel k's output), or (false, 0, word) for a
    /// constant, its value as a little-endian word.
    function sourceOf(bytes memory d, uint256 flat) internal pure returns (bool isView, uint256 source, uint256 at) {
        uint256 kind = _u(d, 0, 1);
        if (kind == CONST) {
            uint256 nd = _u(d, 2, 1);
            uint256 size = itemSize(_u(d, 1, 1));
            for (uint256 i; i < size; ++i) at |= uint256(uint8(d[3 + 8 * nd + i])) << (8 * i);
            return (false, 0, at);
        }
        if (kind == VIEW) {
            uint256 nd = _u(d, 11, 1);
            int256 pos = _i64(d, 3);
            for (uint256 i = nd; i > 0; --i) {
                uint256 size = _u(d, 12 + 16 * (i - 1), 8);
                pos += int256(flat % size) * _i64(d, 20 + 16 * (i - 1));
                flat /= size;
            }
            if (pos < 0) revert BadDescriptor(0);
            return (true, _u(d, 1, 2), uint256(pos));
        }
        return _catSource(d, flat);
    }

    function _catSource(bytes memory d, uint256 flat) private pure returns (bool, uint256, uint256) {
        uint256 bgSize = descriptorSize(d, 2);
        bytes memory bg = _slice(d, 2, 2 + bgSize);
        // x: [the index along axis, the index before it, inner size, the index after it]
        uint256[4] memory x = _split(shape(bg), _u(d, 1, 1), flat);
        uint256 p = 2 + bgSize;
        uint256 n = _u(d, p, 2);
        p += 2;
        for (uint256 i; i < n; ++i) {
            uint256 size = descriptorSize(d, p + 24);
            (bool hit, uint256 sub) = _inPiece(d, p, x);
            if (hit) return sourceOf(_slice(d, p + 24, p + 24 + size), sub);
            p += 24 + size;
        }
        return sourceOf(bg, 0);
    }

    /// @dev Is position x[0] along the axis in the piece at p (start, step, width)? Its flat
    /// index within the piece.
    function _inPiece(bytes memory d, uint256 p, uint256[4] memory x) private pure returns (bool, uint256) {
        uint256 start = _u(d, p, 8);
        uint256 step = _u(d, p + 8, 8);
        uint256 width = _u(d, p + 16, 8);
        if (x[0] < start || step == 0 || (x[0] - start) % step != 0 || (x[0] - start) / step >= width) return (false, 0);
        return (true, (x[1] * width + (x[0] - start) / step) * x[2] + x[3]);
    }

    function _split(uint64[] memory dims, uint256 axis, uint256 flat) private pure returns (uint256[4] memory x) {
        uint256 inner = 1;
        for (uint256 i = axis + 1; i < dims.length; ++i) inner *= dims[i];
        x[0] = (flat / inner) % dims[axis];
        x[1] = flat / (inner * dims[axis]);
        x[2] = inner;
        x[3] = flat % inner;
    }
}
