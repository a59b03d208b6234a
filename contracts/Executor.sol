// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Integers} from "./lib/Integers.sol";
import {Kernels} from "./lib/Kernels.sol";
import {OneStep} from "./lib/OneStep.sol";
import {Philox} from "./lib/Philox.sol";
import {Primitives} from "./lib/Primitives.sol";
import {Tensors} from "./lib/Tensors.sol";

/// @title The one-step executor (level 5, docs/PROTOCOL.md §7): one binary32 primitive of
/// docs/NUMERICS.md with Float32.sol, or one element of a philox mask, and the rules around it
/// that need no match state: a kernel tensor's dtype and shape, which operand element an output
/// element reads, the proven operands' words.
/// @dev Its own contract so that this code does not count against OperatorGame's size limit
/// (EIP-170); view and pure, so calling it changes nothing.
contract Executor {
    error WrongProofCount(uint256 got, uint256 want);
    error OperandNotProven(uint256 operand, uint256 index);

    /// @notice One primitive, or one integer kernel (opcode >= OneStep.INT), on operand words.
    function exec(uint256 opcode, uint256 a, uint256 b, uint256 c) external pure returns (uint256) {
        if (opcode >= OneStep.INT) {
            (uint256 op, uint256 code) = OneStep.integer(opcode);
            return Integers.exec(op, code, a, b, c);
        }
        return Primitives.exec(opcode, a, b, c);
    }

    /// @notice The dtype code and shape of kernel `structure`'s operand `operand`, or of its
    /// output when `operand` < 0.
    function tensorType(bytes calldata structure, int256 operand) external pure returns (uint8, uint64[] memory) {
        bytes memory s = structure;
        uint256 opcode = OneStep.opcodeOf(Kernels.name(s));
        if (operand >= 0) {
            return (OneStep.operandCode(opcode, uint256(operand)), Kernels.shape(Kernels.descriptor(s, uint256(operand))));
        }
        return (OneStep.resultCode(opcode), OneStep.outputShape(opcode, Kernels.shapes(s)));
    }

    /// @notice Output element `flat` of kernel `structure`, computed from its operand elements
    /// proven against `operands` (one proof per operand of a primitive; for gather/onehot the
    /// index element, then the element it picks).
    function truth(bytes calldata structure, uint256 flat, bytes32[] calldata operands,
                   Tensors.ElementProof[] calldata proofs) external pure returns (uint256) {
        uint256 opcode = OneStep.opcodeOf(Kernels.name(structure));
        uint64[][] memory shapes = Kernels.shapes(structure);
        if (OneStep.isGather(opcode) || opcode == OneStep.ONEHOT) return _indexMove(opcode, flat, shapes, operands, proofs);
        return _primitive(opcode, flat, shapes, operands, proofs);
    }

    function _primitive(uint256 opcode, uint256 flat, uint64[][] memory shapes, bytes32[] calldata operands,
                        Tensors.ElementProof[] calldata proofs) internal pure returns (uint256) {
        uint64[] memory out = OneStep.outputShape(opcode, shapes);
        // an element the kernel does not have (a fault claimed past its output: the fault node's
        // element is the claimant's u64) holds nothing, so no fault: 0, with no proof to read
        if (flat >= Tensors.numel(out)) return 0;
        // (no local for opcode == PHILOX: the legacy pipeline of the forge tests runs out of stack)
        if (proofs.length != shapes.length || (opcode == OneStep.PHILOX ? shapes.length != 4 : shapes.length > 3)) {
            revert WrongProofCount(proofs.length, opcode == OneStep.PHILOX ? 4 : shapes.length);
        }
        uint256[4] memory w;
        for (uint256 o; o < shapes.length; ++o) {
            _proven(operands, o, OneStep.operandIndex(out, flat, shapes[o]), proofs[o]);
            w[o] = opcode >= OneStep.INT ? Tensors.word(proofs[o]) : OneStep.word(proofs[o]);
        }
        if (opcode == OneStep.PHILOX) return Philox.keep(flat, w[0], w[1], w[2], w[3]) ? 1 : 0;
        if (opcode >= OneStep.INT) return Integers.exec((opcode - OneStep.INT) / 8, opcode % 8, w[0], w[1], w[2]);
        return Primitives.exec(opcode, w[0], w[1], w[2]);
    }

    function _proven(bytes32[] calldata operands, uint256 o, uint256 index, Tensors.ElementProof calldata p)
        internal
        pure
    {
        if (p.index != index || !Tensors.verify(operands[o], p)) revert OperandNotProven(o, index);
    }

    /// @dev gather: out[r, m, d] = data[r, I, d] (0 <= I < N) else fill, I = index[r, m];
    /// onehot: out[r, c] = value[r] if c == index[r] else fill[c].
    function _indexMove(uint256 opcode, uint256 f, uint64[][] memory shapes, bytes32[] calldata operands,
                        Tensors.ElementProof[] calldata proofs) internal pure returns (uint256) {
        if (proofs.length != 2) revert WrongProofCount(proofs.length, 2);
        if (opcode != OneStep.ONEHOT) {
            (uint256 mm, uint256 n, uint256 dd) = (shapes[1][1], shapes[0][1], shapes[0][2]);
            (uint256 r, uint256 j, uint256 d) = (f / (mm * dd), (f / dd) % mm, f % dd);
            _proven(operands, 1, r * mm + j, proofs[0]);
            int256 idx = int256(int64(uint64(Tensors.word(proofs[0]))));
            if (idx >= 0 && uint256(idx) < n) _proven(operands, 0, (r * n + uint256(idx)) * dd + d, proofs[1]);
            else _proven(operands, 2, 0, proofs[1]);
        } else {
            uint256 cols = shapes[2][0];
            (uint256 r, uint256 c) = (f / cols, f % cols);
            _proven(operands, 0, r, proofs[0]);
            int256 idx = int256(int64(uint64(Tensors.word(proofs[0]))));
            if (idx == int256(c)) _proven(operands, 1, r, proofs[1]);
            else _proven(operands, 2, c, proofs[1]);
        }
        return Tensors.word(proofs[1]);
    }
}
