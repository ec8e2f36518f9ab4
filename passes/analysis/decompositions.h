// The decomposition table: composite ATen ops written as primitives the fusion passes fuse. One
// entry per op and case: its schema, the condition under which the decomposition applies, an
// optional run time guard, and the graph that computes it. An unguarded entry is the ATen calls
// the op's own kernel makes, or (a factory: eye) ops whose values are its values exactly (results,
// dtypes and errors: checked against ATen by tests/ir/decompose_test.cpp);
// a guarded one is the op only where its guard holds, and the graph keeps the op for the inputs
// where it does not. passes/decompose.cpp applies it.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>
#include <vector>

namespace tsfuse {

struct Decomposition {
  const char* schema;  // the op decomposed, as its schema reads
  // Whether to decompose `n` (its constant arguments allow it); else false, the reason in *why,
  // left empty where `n` is no candidate at all (nothing to report).
  bool (*applies)(torch::jit::Node* n, std::string* why);
  // A JIT operator over the op's tensor arguments returning whether the graph computes the op for
  // those inputs, or nullptr (always).
  const char* guard;
  std::shared_ptr<torch::jit::Graph> graph;  // inputs: the op's arguments, in order; outputs: its results
  // The result has the first argument's dtype and shape (triu): its in-place form on a fresh tensor
  // is the op (passes/canonicalize.cpp).
  bool keepsSelf = false;
};

// Every entry, parsed once.
const std::vector<Decomposition>& decompositions();

// The first entry for `n`'s schema that applies to it, if any; else nullptr, and in *why the
// first reason an entry gave (empty where `n` is no candidate).
const Decomposition* decompositionOf(torch::jit::Node* n, std::string* why = nullptr);

}  // namespace tsfuse
