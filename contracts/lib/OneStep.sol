// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Integers} from "./Integers.sol";
import {Primitives} from "./Primitives.sol";
import {Tensors} from "./Tensors.sol";

/// @title The one-step rules of docs/PROTOCOL.md §7 that are not arithmetic: which operand
/// element an output element reads (broadcasting), the dtype of each operand and result, and
/// the word of a proven element. The arithmetic itself is Executor.exec (Float32.sol).
library OneStep {
    error UnknownKernel(bytes name);
    error ArityMismatch(uint256 got, uint256 want);
    error OperandNotProven(uint256 operand);
    error ShapesDoNotBroadcast();

    uint256 internal constant GATHER = 100;
    uint256 internal constant ONEHOT = 101;
    uint256 internal constant PHILOX = 102;
    uint256 internal constant RESULT = 200;
    /// @dev An integer kernel `op.dtype` (Integers.sol) is INT + 8 * op + its dtype code.
    uint256 internal constant INT = 1000;

    /// @dev The integer kernels' ops in opcode order (offchain/softfloat/integers.py OPS).
    bytes internal constant INT_NAMES = "\x03add\x03sub\x03mul\x09div_floor\x09div_trunc\x09rem_floor\x09rem_trunc\x03and\x02or\x03xor\x03not\x03neg\x03abs\x03min\x03max\x02eq\x02lt\x02le\x06select\x04copy\x06to_i64\x06to_i32\x07to_bool\x06to_f32\x05fault\x06gather";

    /// @dev The primitive names in opcode order, each after its length byte.
    bytes internal constant NAMES = "\x03add\x03sub\x03mul\x03fma\x03div\x04sqrt\x03neg\x03abs\x03min\x03max\x02eq\x02lt\x02le\x06select\x04rint\x05floor\x05trunc\x05ldexp\x0afrom_int32\x0eto_int32_trunc\x0cto_int32_rne\x04copy";

    /// @dev The primitive's opcode (offchain/softfloat.py PRIMITIVES), or GATHER/ONEHOT/PHILOX/RESULT.
    function opcodeOf(bytes memory name) internal pure returns (uint256) {
        bytes32 h = keccak256(name);
        uint256 i = _indexOf(NAMES, 22, h);
        if (i < 22) return i;
        if (h == keccak256("gather")) return GATHER;
        if (h == keccak256("onehot")) return ONEHOT;
        if (h == keccak256("philox")) return PHILOX;
        if (h == keccak256("result")) return RESULT;
        uint256 opcode = _integerOpcode(name);
        if (opcode == 0) revert UnknownKernel(name);
        return opcode;
    }

    /// @dev `op.dtype` (dtype i64, bool or i32) -> INT + 8 * op + the dtype's code, else 0.
    function _integerOpcode(bytes memory name) private pure returns (uint256) {
        uint256 dot = name.length;
        while (dot > 0 && name[dot - 1] != ".") --dot;
        if (dot < 2) return 0;
        bytes32 hop;
        bytes32 hdt;
        assembly ("memory-safe") {
            hop := keccak256(add(name, 32), sub(dot, 1))
            hdt := keccak256(add(add(name, 32), dot), sub(mload(name), dot))
        }
        uint256 code = hdt == keccak256("i64") ? 2 : hdt == keccak256("bool") ? 3 : hdt == keccak256("i32") ? 4 : 0;
        if (code == 0) return 0;
        uint256 i = _indexOf(INT_NAMES, 26, hop);
        return i < 26 ? INT + 8 * i + code : 0;
    }

    /// @dev The index of the name hashing to h in `names` (count names, each after its length
    /// byte), or count.
    function _indexOf(bytes memory names, uint256 count, bytes32 h) private pure returns (uint256 i) {
        uint256 p;
        for (; i < count; ++i) {
            uint256 len = uint8(names[p]);
            bytes32 hi;
            // (memory-safe, but so marked the optimizer inlines more into Executor: +3 KB)
            assembly {
                hi := keccak256(add(add(names, 33), p), len)
            }
            if (hi == h) return i;
            p += 1 + len;
        }
    }

    /// @dev An integer kernel's (op index, dtype code).
    function integer(uint256 opcode) internal pure returns (uint256 op, uint256 code) {
        return ((opcode - INT) / 8, opcode % 8);
    }

    function isGather(uint256 opcode) internal pure returns (bool) {
        return opcode == GATHER || (opcode >= INT && (opcode - INT) / 8 == Integers.GATHER);
    }

    /// @dev A binary32 primitive's (or an index move's) operand count.
    function arity(uint256 opcode) internal pure returns (uint256) {
        if (opcode == 3 || opcode == 13 || opcode == GATHER || opcode == ONEHOT) return 3;
        if (opcode <= 4 || (opcode >= 8 && opcode <= 12) || opcode == 17) return 2;
        return 1;
    }

    /// @dev dtype codes (1 float32, 2 int64, 3 bool, 4 int32), as kernels.operand_code.
    function operandCode(uint256 opcode, uint256 i) internal pure returns (uint8) {
        if (opcode >= INT) {
            (uint256 op, uint256 code) = integer(opcode);
            if (op == Integers.SELECT && i == 0) return 3;
            return op == Integers.GATHER && i == 1 ? 2 : uint8(code);
        }
        if (opcode == PHILOX) return 4;
        if (opcode == 13 && i == 0) return 3;
        if ((opcode == GATHER && i == 1) || (opcode == ONEHOT && i == 0)) return 2;
        if ((opcode == 17 && i == 1) || (opcode == 18 && i == 0)) return 4;
        return 1;
    }

    function resultCode(uint256 opcode) internal pure returns (uint8) {
        if (opcode >= INT) {
            (uint256 op, uint256 code) = integer(opcode);
            return uint8(Integers.resultCode(op, code));
        }
        if ((opcode >= 10 && opcode <= 12) || opcode == PHILOX) return 3;
        if (opcode == 19 || opcode == 20) return 4;
        return 1;
    }

    /// @dev gather: data [R, N, D], index [R, M] -> [R, M, D]; onehot: index [R], fill [N] ->
    /// [R, N]; a primitive and philox: their operands broadcast (numpy's rule).
    function outputShape(uint256 opcode, uint64[][] memory shapes) internal pure returns (uint64[] memory out) {
        if (isGather(opcode)) {
            out = new uint64[](3);
            (out[0], out[1], out[2]) = (shapes[0][0], shapes[1][1], shapes[0][2]);
            return out;
        }
        if (opcode == ONEHOT) {
            out = new uint64[](2);
            (out[0], out[1]) = (shapes[0][0], shapes[2][0]);
            return out;
        }
        uint256 nd;
        for (uint256 i; i < shapes.length; ++i) if (shapes[i].length > nd) nd = shapes[i].length;
        out = new uint64[](nd);
        bool bad;
        // (assembly: bounds are the arrays' own lengths; checked indexing cost ~250 gas a dim)
        assembly ("memory-safe") {
            let o := add(out, 32)
            for { let d := 0 } lt(d, nd) { d := add(d, 1) } { mstore(add(o, shl(5, d)), 1) }
            for { let i := 0 } lt(i, mload(shapes)) { i := add(i, 1) } {
                let sh := mload(add(add(shapes, 32), shl(5, i)))
                let len := mload(sh)
                let at := add(o, shl(5, sub(nd, len))) // right-aligned (numpy's rule)
                for { let d := 0 } lt(d, len) { d := add(d, 1) } {
                    let v := mload(add(add(sh, 32), shl(5, d)))
                    let q := add(at, shl(5, d))
                    let cur := mload(q)
                    switch eq(cur, 1)
                    case 1 { mstore(q, v) }
                    default { if iszero(or(eq(v, 1), eq(v, cur))) { bad := 1 } }
                }
            }
        }
        if (bad) revert ShapesDoNotBroadcast();
    }

    /// @dev Broadcasting: the operand element that output element `flat` reads. (opShape no
    /// longer than outShape: outputShape made it so; a zero dim reads nothing: reverts.)
    function operandIndex(uint64[] memory outShape, uint256 flat, uint64[] memory opShape)
        internal
        pure
        returns (uint256 idx)
    {
        uint256 nd = outShape.length;
        uint256 off = nd - opShape.length;
        bool zero;
        // (unchecked: the shapes are the job's, checked by every trainer against its own
        // decomposition before it joined: real tensors, nowhere near 2^256 elements)
        assembly ("memory-safe") {
            let mult := 1
            for { let d := nd } gt(d, 0) { d := sub(d, 1) } {
                let size := mload(add(outShape, shl(5, d)))
                if iszero(size) { zero := 1 }
                let c := mod(flat, size)
                flat := div(flat, size)
                if iszero(lt(sub(d, 1), off)) {
                    let s := mload(add(opShape, shl(5, sub(d, off))))
                    if iszero(eq(s, 1)) { idx := add(idx, mul(c, mult)) }
                    mult := mul(mult, s)
                }
            }
        }
        if (zero) revert ShapesDoNotBroadcast();
    }

    /// @dev A proven element as the primitive table's word: an int64 (ldexp's exponent)
    /// clamped to [-400, 400] and taken as int32.
    function word(Tensors.ElementProof calldata p) internal pure returns (uint256 v) {
        v = Tensors.word(p);
        if (p.code == 2) {
            int256 s = int256(int64(uint64(v)));
            s = s < -400 ? -400 : (s > 400 ? int256(400) : s);
            v = uint256(uint32(int32(s)));
        }
    }

    /// @dev A primitive on operands proven against their commitments (each operand's element
    /// 0: for one-element operands, as the forge vectors use it).
    function execute(uint256 opcode, bytes32[] calldata commitments, Tensors.ElementProof[] calldata operands)
        internal
        pure
        returns (uint256)
    {
        uint256 k = arity(opcode);
        if (operands.length != k || commitments.length != k) revert ArityMismatch(operands.length, k);
        uint256[3] memory w;
        for (uint256 i; i < k; ++i) {
            if (!Tensors.verify(commitments[i], operands[i])) revert OperandNotProven(i);
            w[i] = word(operands[i]);
        }
        return Primitives.exec(opcode, w[0], w[1], w[2]);
    }
}
