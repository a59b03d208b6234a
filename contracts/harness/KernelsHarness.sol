// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Kernels} from "../lib/Kernels.sol";
import {OneStep} from "../lib/OneStep.sol";

/// @title KernelsHarness: the level 3-5 libraries exposed for differential tests against
/// offchain/dispute (tests/onchain/test_kernels_vs_python.py).
contract KernelsHarness {
    function sourceOf(bytes calldata d, uint256 flat) external pure returns (bool, uint256, uint256) {
        return Kernels.sourceOf(d, flat);
    }

    function shape(bytes calldata d) external pure returns (uint64[] memory) {
        return Kernels.shape(d);
    }

    function structureOf(bytes calldata enc) external pure returns (bytes memory, bytes32[] memory, bytes32) {
        Kernels.Kernel memory k = Kernels.parse(enc);
        return (k.structure, k.operands, k.output);
    }

    function opcodeOf(bytes calldata name) external pure returns (uint256) {
        return OneStep.opcodeOf(name);
    }

    function operandIndex(uint64[] calldata out, uint256 flat, uint64[] calldata op) external pure returns (uint256) {
        return OneStep.operandIndex(out, flat, op);
    }

    function outputShape(uint256 opcode, uint64[][] calldata shapes) external pure returns (uint64[] memory) {
        return OneStep.outputShape(opcode, shapes);
    }
}
