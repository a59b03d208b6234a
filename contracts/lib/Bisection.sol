// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Merkle} from "./Merkle.sol";

/// @title The one bisection engine of docs/PROTOCOL.md §7, on chain
/// @dev Two parties committed to sequences that agree at `lo` and differ at `hi`.
/// N-ary rounds (both post the interior points, the first difference narrows the interval)
/// and Merkle descent (both reveal the nodes SPAN levels below the node they disagree on,
/// going to the first that differ) find the first differing index. Pure bookkeeping:
/// the game contract decides who moves and when.
library Bisection {
    error WrongPointCount(uint256 got, uint256 want);
    error NotDisagreeing();
    error WrongNodeCount(uint256 got, uint256 want);
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

    /// @dev Narrow (lo, hi) with both parties' claims at this round's points; returns the
    /// index of the first point they differ at (the new hi), or the number of points when
    /// they agree at every one (the new lo is the last point).
    function narrow(Nary storage s, bytes32[] memory a, bytes32[] memory b) internal returns (uint256 i) {
        uint256[] memory ps = points(s.lo, s.hi, s.n);
        if (a.length != ps.length) revert WrongPointCount(a.length, ps.length);
        if (b.length != ps.length) revert WrongPointCount(b.length, ps.length);
        for (; i < ps.length; ++i) {
            if (a[i] == b[i]) {
                s.lo = uint64(ps[i]);
            } else {
                s.hi = uint64(ps[i]);
                return i;
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

    /// @dev Levels a descent move goes down: a move reveals the 2**SPAN nodes SPAN levels below
    /// the current one (fewer near the leaves), so a tree of depth d takes ceil(d / SPAN)
    /// rounds instead of d: a transaction's base cost and cold storage reads dominate a move.
    uint256 internal constant SPAN = 3;

    /// @dev How many nodes this round's move reveals: 2**min(SPAN, height).
    function width(Descent storage d) internal view returns (uint256) {
        uint256 h = d.height;
        return uint256(1) << (h < SPAN ? h : SPAN);
    }

    /// @dev The node 2**k nodes (k levels down, in order) hash up to; reverts unless their
    /// number is a power of two.
    function subtree(bytes32[] calldata nodes) internal pure returns (bytes32) {
        uint256 w = nodes.length;
        if (w == 0 || w & (w - 1) != 0) revert WrongNodeCount(w, 0);
        bytes32[] memory level = nodes;
        for (; w > 1; w >>= 1) {
            for (uint256 i; i < w / 2; ++i) level[i] = Merkle.inner(level[2 * i], level[2 * i + 1]);
        }
        return level[0];
    }

    /// @dev Down log2(a.length) levels: each party's nodes there (the caller checked that
    /// each array hashes up to that party's current node); follows the first that differ,
    /// which is where as many one-level moves (left when the left children differ) lead.
    function down(Descent storage d, bytes32[] calldata a, bytes32[] calldata b) internal {
        if (d.height == 0) revert DescentOver();
        uint256 w = width(d);
        if (a.length != w) revert WrongNodeCount(a.length, w);
        if (b.length != w) revert WrongNodeCount(b.length, w);
        uint256 j;
        while (a[j] == b[j]) {
            if (++j == w) revert NotDisagreeing();
        }
        uint256 k = d.height < SPAN ? d.height : SPAN;
        d.height -= uint64(k);
        d.index = uint64((uint256(d.index) << k) | j);
        (d.a, d.b) = (a[j], b[j]);
    }

    function atLeaf(Descent storage d) internal view returns (bool) {
        return d.height == 0;
    }
}

/// @title Chess clocks: each party has a time budget that runs only while the game waits
/// for its move. A party whose budget is spent loses on a timeout claim.
library Clock {
    /// @dev One storage slot (a move reads and writes it once: cold reads and writes are
    /// most of a move's gas).
    struct Clocks {
        uint64 left0; // seconds party 0 still has
        uint64 left1; // party 1
        uint64 since; // when the current wait began
        uint8 waiting; // bit 0: waiting for party 0, bit 1: party 1
    }

    error NotYourTurn(uint256 party);
    error NoTimeout();
    error ClockRanOut(uint256 party);

    function init(Clocks storage c, uint64 budget) internal {
        c.left0 = budget;
        c.left1 = budget;
        c.since = uint64(block.timestamp);
        c.waiting = 3;
    }

    function remaining(Clocks storage c) internal view returns (uint64[2] memory) {
        return [c.left0, c.left1];
    }

    function setRemaining(Clocks storage c, uint64[2] memory left) internal {
        (c.left0, c.left1) = (left[0], left[1]);
    }

    /// @dev Party p moved: charge it the time it took (its clock ran since `since`). A move
    /// once its clock has run out is refused: it has lost on time, whoever claims it.
    function moved(Clocks storage c, uint256 p) internal {
        Clocks memory k = c;
        if (k.waiting & (uint8(1) << uint8(p)) == 0) revert NotYourTurn(p);
        uint64 spent = uint64(block.timestamp) - k.since;
        uint64 left = p == 0 ? k.left0 : k.left1;
        if (spent >= left) revert ClockRanOut(p);
        if (p == 0) k.left0 = left - spent;
        else k.left1 = left - spent;
        k.waiting &= ~(uint8(1) << uint8(p));
        c.left0 = k.left0;
        c.left1 = k.left1;
        c.waiting = k.waiting;
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
        Clocks memory k = c;
        uint64 spent = uint64(block.timestamp) - k.since;
        bool out0 = k.waiting & 1 != 0 && spent >= k.left0;
        bool out1 = k.waiting & 2 != 0 && spent >= k.left1;
        if (out0 && out1) return k.left0 < k.left1 ? 0 : k.left1 < k.left0 ? 1 : 3;
        return out0 ? 0 : out1 ? 1 : 2;
    }
}
