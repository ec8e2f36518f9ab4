// Eager's sum of whole contiguous rows, of any length: ATen's CPU cascade sum along the innermost
// dim (SumKernel.cpp's vectorized_inner_sum / scalar_inner_sum over multi_row_sum), which
// InnerSumOrder (inner_sum.h) models only below 16 groups. A row is summed whole by one thread
// wherever eager's sum has more than one output (ATen splits only kept dims among threads); a
// single output of at least 32768 values may be split (two_pass_reduction): callers keep those
// rows to ATen. eagerSumsRowsInCascade() checks this build against at::sum once per process.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>

namespace tsfuse::cpu {

// The order: with L the values of one 32-byte vector (8 float32, 4 float64; L = 1 for rows shorter
// than that), V = n / L vectors and G = V / 4 groups of four vectors:
//  * four partial vectors p0..p3 take the groups' vectors in turn, through a cascade of four
//    levels: level 0 adds 2^P groups (P = max(4, ceil_log2(G) / 4)), then is added into level 1
//    and cleared; level 1 moves on into level 2 only when the groups done are a multiple of
//    2^(2P), level 2 into level 3 at multiples of 2^(3P); after the last whole 2^P, the groups
//    left go into level 0, and the levels are added into it in order (0 + 1, + 2, + 3);
//  * the V % 4 vectors after the groups are added into p0;
//  * each lane's sum is ((p0 + p1) + p2) + p3;
//  * the row's sum starts from 0, adds the n % L values after the vectors in order, then the
//    lane sums in lane order; the output, filled with 0 first, then adds that sum.
// The sum of v[0, n) as at::sum computes it along a contiguous innermost dim (its loops compiled
// per instruction set with the tile ops: kernels/backends/cpu/tile_program.cpp, row_sum.inc).
float eagerRowSum(const float* v, int64_t n);
double eagerRowSum(const double* v, int64_t n);

// Whether at::sum of this process follows eagerRowSum (checked once, on probe rows of lengths
// that take each branch of the cascade up to its third level).
bool eagerSumsRowsInCascade();

// Whether at::sum of `count` values of `type` along `dimsAboveOne` reduced dims of size > 1 (the one
// there is `innermost` in eager's value) into `outputs` outputs sums each output's row whole, as
// eagerRowSum does: float32 or float64 rows of one dim, more than one output or fewer than 32768
// values (ATen may split a single long row among threads), on a build that follows the cascade.
bool eagerSumsWholeRows(c10::ScalarType type, int64_t count, int64_t outputs, int dimsAboveOne, bool innermost);

}  // namespace tsfuse::cpu
