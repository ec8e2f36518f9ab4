// The first extremum of each contiguous float32 row, with ATen's CPU min/max(dim) rule: the first
// index holding the row's minimum (maximum), equal values (-0.0 and 0.0 included) keeping the
// first, and the first NaN where there is one (aten/src/ATen/native/cpu/ReduceOpsKernel.cpp:
// `!(value >= best)` replaces, a NaN stops the walk). ATen walks each row one value at a time; an
// outer stage of a chain (nearest neighbour: argmin over the candidates) spends most of its time
// there. Here two vector passes give the same index: the row's extremum value (or whether it has a
// NaN), then the first index holding it (IEEE equality) or the first NaN; short rows go eight at a
// time, one a vector lane, through ATen's own step.
#pragma once

#include <cstdint>

namespace tsfuse::cpu {

// index[r] for rows r < rows of n > 0 values each, row r at data + r * n. False, with nothing
// written, where the CPU lacks AVX2 (callers then use ATen's kernel).
bool firstExtremumOfRows(const float* data, int64_t rows, int64_t n, bool isMax, int64_t* index);

// The value at that index of one row of n > 0 values (max/min(dim)'s values, amax/amin's where the
// first of equal values is kept): one vector pass, a second only where the extremum is a zero (the
// first zero's sign) or a NaN. False, with nothing written, where the CPU lacks AVX2.
bool firstExtremumValue(const float* data, int64_t n, bool isMax, float* value);

}  // namespace tsfuse::cpu
