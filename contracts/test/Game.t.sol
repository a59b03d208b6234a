// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Test} from "./Cheats.sol";
import {Bisection} from "../lib/Bisection.sol";
import {Merkle} from "../lib/Merkle.sol";
import {OneStep} from "../lib/OneStep.sol";
import {Tensors} from "../lib/Tensors.sol";

/// @dev The bisection engine and the one-step executor.
contract BisectionTest is Test {
    using Bisection for Bisection.Nary;
    using Bisection for Bisection.Descent;

    Bisection.Nary internal nary;
    Bisection.Descent internal desc;

    function test_points_equal_the_python_engine() public view {
        string memory json = vm.readFile("tests/vectors/protocol.json");
        for (uint256 c; c < 6; ++c) {
            string memory k = string.concat(".points[", _s(c), "]");
            uint256[] memory want = vm.parseJsonUintArray(json, string.concat(k, ".points"));
            uint256[] memory got = Bisection.points(
                vm.parseJsonUint(json, string.concat(k, ".lo")),
                vm.parseJsonUint(json, string.concat(k, ".hi")),
                vm.parseJsonUint(json, string.concat(k, ".n"))
            );
            assertEq(got.length, want.length, "point count");
            for (uint256 i; i < got.length; ++i) assertEq(got[i], want[i], "point");
        }
    }

    /// @dev Two sequences equal up to `first` (exclusive), different after: N-ary rounds find it.
    /// forge-config: default.fuzz.runs = 1000
    function testFuzz_nary_finds_the_first_difference(uint256 steps, uint256 first, uint256 n) public {
        steps = bound(steps, 2, 5000);
        first = bound(first, 1, steps);
        n = bound(n, 2, 40);
        nary.lo = 0;
        nary.hi = uint64(steps);
        nary.n = uint16(n);
        uint256 rounds;
        while (!nary.done()) {
            uint256[] memory ps = Bisection.points(nary.lo, nary.hi, n);
            bytes32[] memory a = new bytes32[](ps.length);
            bytes32[] memory b = new bytes32[](ps.length);
            for (uint256 i; i < ps.length; ++i) {
                a[i] = keccak256(abi.encode(ps[i]));
                b[i] = ps[i] < first ? a[i] : keccak256(abi.encode(ps[i], "other"));
            }
            nary.narrow(a, b);
            ++rounds;
        }
        assertEq(nary.hi, first, "the first differing point");
        assertEq(nary.lo, first - 1, "the last agreed point");
        assertTrue(rounds <= 64, "rounds");
    }

    function _tree(bytes32[] memory leaves) internal pure returns (bytes32[][] memory levels) {
        uint256 d = Merkle.depth(leaves.length);
        levels = new bytes32[][](d + 1);
        bytes32[] memory level = new bytes32[](uint256(1) << d);
        for (uint256 i; i < leaves.length; ++i) level[i] = leaves[i];
        levels[0] = level;
        for (uint256 h = 1; h <= d; ++h) {
            bytes32[] memory up = new bytes32[](level.length / 2);
            for (uint256 i; i < up.length; ++i) up[i] = Merkle.inner(level[2 * i], level[2 * i + 1]);
            levels[h] = up;
            level = up;
        }
    }

    /// forge-config: default.fuzz.runs = 400
    function testFuzz_descent_finds_the_first_differing_leaf(uint256 n, uint256 first, uint256 seed) public {
        n = bound(n, 2, 200);
        first = bound(first, 0, n - 1);
        bytes32[] memory la = new bytes32[](n);
        bytes32[] memory lb = new bytes32[](n);
        for (uint256 i; i < n; ++i) {
            la[i] = Merkle.leaf(abi.encode(seed, i));
            lb[i] = i < first ? la[i] : Merkle.leaf(abi.encode(seed, i, "b"));
        }
        bytes32[][] memory ta = _tree(la);
        bytes32[][] memory tb = _tree(lb);
        uint256 d = ta.length - 1;
        desc.start(n, Merkle.seal(n, ta[d][0]), ta[d][0], Merkle.seal(n, tb[d][0]), tb[d][0]);
        uint256 rounds;
        while (!desc.atLeaf()) {
            (bytes32[] memory a, bytes32[] memory b) = (_below(ta), _below(tb));
            assertEq(uint256(this.subtree(a)), uint256(desc.a), "A's nodes hash up to its node");
            assertEq(uint256(this.subtree(b)), uint256(desc.b), "B's nodes hash up to its node");
            this.down(a, b);
            ++rounds;
        }
        assertEq(desc.index, first, "first differing leaf");
        assertEq(uint256(desc.a), uint256(la[first]), "A's leaf");
        assertEq(rounds, (d + Bisection.SPAN - 1) / Bisection.SPAN, "ceil(depth / SPAN) rounds");
    }

    /// @dev A party's nodes width() below its current node, in order.
    function _below(bytes32[][] memory t) internal view returns (bytes32[] memory nodes) {
        uint256 w = desc.width();
        uint256 k;
        while ((uint256(1) << k) < w) ++k;
        nodes = new bytes32[](w);
        for (uint256 j; j < w; ++j) nodes[j] = t[desc.height - k][(uint256(desc.index) << k) + j];
    }

    function test_subtree_hashes_in_order_and_needs_a_power_of_two() public {
        bytes32[] memory la = new bytes32[](4);
        for (uint256 i; i < 4; ++i) la[i] = bytes32(i + 1);
        bytes32[][] memory ta = _tree(la);
        assertEq(uint256(this.subtree(la)), uint256(ta[2][0]), "the top of four nodes");
        (la[1], la[2]) = (la[2], la[1]);
        assertTrue(this.subtree(la) != ta[2][0], "another order, another node");
        vm.expectRevert(abi.encodeWithSelector(Bisection.WrongNodeCount.selector, 3, 0));
        this.subtree(new bytes32[](3));
    }

    function test_down_refuses_the_wrong_width_and_equal_nodes() public {
        bytes32[] memory la = new bytes32[](4);
        bytes32[] memory lb = new bytes32[](4);
        for (uint256 i; i < 4; ++i) (la[i], lb[i]) = (bytes32(i + 1), bytes32(i + 10));
        bytes32[][] memory ta = _tree(la);
        bytes32[][] memory tb = _tree(lb);
        desc.start(4, Merkle.seal(4, ta[2][0]), ta[2][0], Merkle.seal(4, tb[2][0]), tb[2][0]);
        vm.expectRevert(abi.encodeWithSelector(Bisection.WrongNodeCount.selector, 2, 4));
        this.down(ta[1], tb[1]);
        vm.expectRevert(abi.encodeWithSelector(Bisection.NotDisagreeing.selector));
        this.down(la, la);
        this.down(la, lb);
        assertEq(desc.index, 0, "the first differing leaf");
        assertEq(desc.height, 0, "at the leaves in one move");
        vm.expectRevert(abi.encodeWithSelector(Bisection.DescentOver.selector));
        this.down(la, lb);
    }

    function down(bytes32[] calldata a, bytes32[] calldata b) external {
        desc.down(a, b);
    }

    function subtree(bytes32[] calldata nodes) external pure returns (bytes32) {
        return Bisection.subtree(nodes);
    }

    function _s(uint256 v) internal pure returns (string memory) {
        if (v == 0) return "0";
        bytes memory b;
        while (v > 0) {
            b = abi.encodePacked(bytes1(uint8(48 + v % 10)), b);
            v /= 10;
        }
        return string(b);
    }
}

/// @dev The one-step executor against the Python soft-float's vectors: each operand is a
/// one-element tensor proven against its commitment.
contract OneStepTest is Test {
    function _single(uint256 word) internal pure returns (bytes32 commitment, Tensors.ElementProof memory p) {
        bytes memory le = abi.encodePacked(uint8(word), uint8(word >> 8), uint8(word >> 16), uint8(word >> 24));
        uint64[] memory shape = new uint64[](1);
        shape[0] = 1;
        p = Tensors.ElementProof({code: 1, shape: shape, chunk: 1, index: 0, chunkBytes: le, siblings: new bytes32[](0)});
        commitment = sha256(abi.encodePacked(Tensors.header(1, shape), Merkle.seal(1, Merkle.leaf(le))));
    }

    /// @dev Through this.exec: OneStep reads proofs from calldata.
    function test_every_vector_through_proofs() public view {
        string memory json = vm.readFile("tests/vectors/float32.json");
        bytes memory v = vm.parseJsonBytes(json, ".vectors");
        uint256 count = v.length / 20;
        for (uint256 r; r < count; r += 7) {
            uint256 op = _u32(v, 20 * r);
            if (op == 18 || op == 17) continue; // int32 operands: covered by the Primitives tests
            uint256 k = OneStep.arity(op);
            bytes32[] memory cs = new bytes32[](k);
            Tensors.ElementProof[] memory ps = new Tensors.ElementProof[](k);
            for (uint256 i; i < k; ++i) {
                uint256 w = _u32(v, 20 * r + 4 + 4 * i);
                if (op == 13 && i == 0) w = w != 0 ? 1 : 0;
                (cs[i], ps[i]) = _single(w);
            }
            assertEq(this.exec(op, cs, ps), _u32(v, 20 * r + 16), "one step = soft-float");
        }
    }

    function test_an_unproven_operand_is_refused() public {
        bytes32[] memory cs = new bytes32[](2);
        Tensors.ElementProof[] memory ps = new Tensors.ElementProof[](2);
        (cs[0], ps[0]) = _single(0x3f800000);
        (cs[1], ps[1]) = _single(0x40000000);
        cs[1] = cs[0]; // operand 1 does not open this commitment
        vm.expectRevert(abi.encodeWithSelector(OneStep.OperandNotProven.selector, 1));
        this.exec(0, cs, ps);
    }

    function exec(uint256 op, bytes32[] calldata cs, Tensors.ElementProof[] calldata ps) external pure returns (uint256) {
        return OneStep.execute(op, cs, ps);
    }

    function _u32(bytes memory b, uint256 o) internal pure returns (uint256) {
        return uint256(uint8(b[o])) << 24 | uint256(uint8(b[o + 1])) << 16 | uint256(uint8(b[o + 2])) << 8 | uint256(uint8(b[o + 3]));
    }
}
