// The decomposition table: composite ATen ops written as the ATen calls their own kernels make,
// so that the fusion passes see primitives they fuse. One entry per op: its schema, the condition
// under which the decomposition is the op (results, dtypes and errors: checked against ATen by
// tests/ir/decompose_test.cpp), and the graph that computes it. passes/decompose.cpp applies it.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>
#include <vector>

namespace tsfuse {

struct Decomposition {
  const char* schema;  // the op decomposed, as its schema reads
  // Whether the decomposition is exactly `n` (its constant arguments allow it); else false, the
  // reason in *why.
  bool (*applies)(torch::jit::Node* n, std::string* why);
  std::shared_ptr<torch::jit::Graph> graph;  // inputs: the op's arguments, in order; outputs: its results
};

// Every entry, parsed once.
const std::vector<Decomposition>& decompositions();

// The entry for `n`'s schema, if any.
const Decomposition* decompositionOf(torch::jit::Node* n);

}  // namespace tsfuse
