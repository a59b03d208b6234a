// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Merkle} from "./Merkle.sol";

/// @title The one bisection engine of docs/PROTOCOL.md §7, on chain
/// @dev Two parties committed to sequences that agree at `lo` and differ at `hi`.
/// N-ary rounds (both post the interior points, the first difference narrows the interval)
/// and Merkle descent (both reveal the two children of the node they disagree on, going
/// left when the left children differ) find the first differing index. Pure bookkeeping:
/// the game contract decides who moves and when.
library Bisection {
    error WrongPointCount(uint256 got, uint256 want);
    error NotDisagreeing();
    error ChildrenDoNotHash(uint256 party);
    error RootDoesNotSeal(uint256 party, uint256 n);
    error DescentOver();

    // -- N-ary ---------------------------------------------------------------------------------
    struct Nary {
        uint64 lo;
        uint64 hi;
        uint16 n;
    }

    /// @dev The interior points of a round over (lo, hi): lo + (hi - lo) * i / n for
    /// i = 1..n-1, strictly between lo and hi, without repeats (as offchain engine.points).
    function points(uint256 lo, uint256 hi, uint256 n) internal pure returns (uint256[] memory out) {
        uint256[] memory tmp = new uint256[](n);
        uint256 k;
        uint256 last = lo;
        for (uint256 i = 1; i < n; ++i) {
            uint256 p = lo + ((hi - lo) * i) / n;
            if (p > last && p < hi) {
                tmp[k++] = p;
                last = p;
            }
        }
        out = new uint256[](k);
        for (uint256 i; i < k; ++i) out[i] = tmp[i];
    }

    function done(Nary storage s) internal view returns (bool) {
        return s.hi - s.lo <= 1;
    }

    /// @dev Narrow (lo, hi) with both parties' claims at this round's points.
    function narrow(Nary storage s, bytes32[] memory a, bytes32[] memory b) internal {
        uint256[] memory ps = points(s.lo, s.hi, s.n);
        if (a.length != ps.length) revert WrongPointCount(a.length, ps.length);
        if (b.length != ps.length) revert WrongPointCount(b.length, ps.length);
        for (uint256 i; i < ps.length; ++i) {
            if (a[i] == b[i]) {
                s.lo = uint64(ps[i]);
            } else {
                s.hi = uint64(ps[i]);
                return;
            }
        }
    }

    // -- Merkle descent ------------------------------------------------------------------------
    struct Descent {
        uint64 n; // leaves
        uint64 height; // of the current nodes (depth(n) at the top, 0 at the leaves)
        uint64 index; // of the current nodes at that height
        bytes32 a; // party A's node there
        bytes32 b; // party B's
    }

    /// @dev Start from the two roots: each party's top must seal n to its root.
    function start(Descent storage d, uint256 n, bytes32 rootA, bytes32 topA, bytes32 rootB, bytes32 topB) internal {
        if (Merkle.seal(n, topA) != rootA) revert RootDoesNotSeal(0, n);
        if (Merkle.seal(n, topB) != rootB) revert RootDoesNotSeal(1, n);
        if (topA == topB) revert NotDisagreeing();
        d.n = uint64(n);
        d.height = uint64(Merkle.depth(n));
        d.index = 0;
        d.a = topA;
        d.b = topB;
    }

    /// @dev One level down; the children must hash to each party's current node.
    function down(Descent storage d, bytes32 la, bytes32 ra, bytes32 lb, bytes32 rb) internal {
        if (d.height == 0) revert DescentOver();
        if (Merkle.inner(la, ra) != d.a) revert ChildrenDoNotHash(0);
        if (Merkle.inner(lb, rb) != d.b) revert ChildrenDoNotHash(1);
        d.height -= 1;
        if (la != lb) {
            d.index = 2 * d.index;
            (d.a, d.b) = (la, lb);
        } else {
            d.index = 2 * d.index + 1;
            (d.a, d.b) = (ra, rb);
        }
    }

    function atLeaf(Descent storage d) internal view returns (bool) {
        return d.height == 0;
    }
}

/// @title Chess clocks: each party has a time budget that runs only while the game waits
/// for its move. A party whose budget is spent loses on a timeout claim.
library Clock {
    struct Clocks {
        uint64[2] left; // seconds each party still has
        uint64 since; // when the current wait began
        uint8 waiting; // bit 0: waiting for party 0, bit 1: party 1
    }

    error NotYourTurn(uint256 party);
    error NoTimeout();
    error ClockRanOut(uint256 party);

    function init(Clocks storage c, uint64 budget) internal {
        c.left = [budget, budget];
        c.since = uint64(block.timestamp);
        c.waiting = 3;
    }

    /// @dev Party p moved: charge it the time it took (its clock ran since `since`). A move
    /// once its clock has run out is refused: it has lost on time, whoever claims it.
    function moved(Clocks storage c, uint256 p) internal {
        if (c.waiting & (uint8(1) << uint8(p)) == 0) revert NotYourTurn(p);
        uint64 spent = uint64(block.timestamp) - c.since;
        if (spent >= c.left[p]) revert ClockRanOut(p);
        c.left[p] -= spent;
        c.waiting &= ~(uint8(1) << uint8(p));
    }

    /// @dev Both (or one) must move next; the wait starts now. Time already spent by a party
    /// that still owes a move keeps counting from its own last charge.
    function await_(Clocks storage c, uint8 parties) internal {
        c.since = uint64(block.timestamp);
        c.waiting = parties;
    }

    /// @dev Who let its clock run out: 0, 1, 2 (nobody) or 3 (both, at the same instant: a
    /// draw). Both owe a move in a simultaneous round and their clocks run from the same
    /// instant, so when both are out, the one with less time left ran out first and loses:
    /// the seat (which whoever opened the match chose) decides nothing.
    function expired(Clocks storage c) internal view returns (uint256) {
        uint64 spent = uint64(block.timestamp) - c.since;
        bool out0 = c.waiting & 1 != 0 && spent >= c.left[0];
        bool out1 = c.waiting & 2 != 0 && spent >= c.left[1];
        if (out0 && out1) return c.left[0] < c.left[1] ? 0 : c.left[1] < c.left[0] ? 1 : 3;
        return out0 ? 0 : out1 ? 1 : 2;
    }
}
