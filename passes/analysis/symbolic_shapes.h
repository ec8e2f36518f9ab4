// A tensor value's sizes as the graph's own int values, proven from how the value was computed
// (x[:, None].expand(n, k, d): [n, k, d] with n, k, d the ints the code passed), so a rewrite
// can tell two shapes equal, or a reshape undone, without knowing any size's number. Each answer
// is "provably so" or "not known"; never a guess.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace tsfuse {

// One size: a constant, dim `dim` of tensor `of` (aten::size and the ways code spells it), or
// another int value of the graph.
struct SymSize {
  enum class Kind { Constant, DimOf, Value } kind = Kind::Constant;
  int64_t c = 0;                   // Constant: the size; DimOf: the dim (>= 0)
  torch::jit::Value* v = nullptr;  // DimOf: the tensor; Value: the int
  bool operator==(const SymSize& o) const { return kind == o.kind && c == o.c && v == o.v; }
};

// The value of an int constant, or nullopt.
std::optional<int64_t> constantInt(torch::jit::Value* v);

// The size an int value stands for, seeing through int(tensor(x)) round trips (traces),
// x.size(d) / x.shape[d] / unpacked x.shape; nullopt unless it is provably >= 0 (an int that
// may be -1 means "keep this dim" to expand and "infer it" to reshape).
std::optional<SymSize> symbolicSize(torch::jit::Value* v);

// The sizes of an int[] argument (prim::ListConstruct or a constant), each as symbolicSize.
std::optional<std::vector<SymSize>> symbolicSizes(torch::jit::Value* list);

// The sizes of tensor `t`, where what made it proves them: expand to sizes (each >= 0), reshape
// to sizes (no -1), an elementwise op over tensors of one proven shape (numbers broadcast
// nothing), a reduction over its last dim, tsfuse::check_reshape (its input's). nullopt otherwise.
std::optional<std::vector<SymSize>> symbolicShape(torch::jit::Value* t);

}  // namespace tsfuse
