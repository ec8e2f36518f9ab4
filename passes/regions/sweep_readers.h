// The readers of a fused reduction's value that one tsfuse::reduce_sweep computes together, the
// value never stored: plain reductions of it (Chamfer's row and column minima) and fused
// reductions over it (kernel regression's numerator beside its denominator):
//
//   %w = tsfuse::reduce(%l, "v1: sub($0, $1); pow(%0, 2)", "sum", [-1], ..., "v1: div($0, $1); exp(%0)")
//   %u = aten::unsqueeze(%w, 2)
//   %d = aten::sum(%w, [1], True)
//   %l2 = prim::ListConstruct(%u, %y3, %d)
//   %n = tsfuse::reduce(%l2, "v1: mul($0, $1)", "sum", [1], False, None, "v1: div($0, $1)", [])
// =>
//   %s = tsfuse::reduce_sweep([..., %y3], "v1: sub($0, $1); pow(%0, 2)",
//          ["sum(dim=[-1], keepdim=False) |> ...",
//           "fused(v1: mul($0, $1); $0 = value.unsqueeze(2)) |> sum(dim=[1], keepdim=False)",
//           "sum(dim=[1], keepdim=True)"])
//   %s1, %d = prim::ListUnpack(%s)
//   %n = tsfuse::pairwise([%s1, %d], "v1: div($0, $1)", [])
//
// A fused reader's epilogue that reads another reader's result (or a value computed after the
// readers begin) runs after the sweep, as its own elementwise op over the small result.
#pragma once

#include "passes/framework/driver.h"
#include "passes/regions/fused_values.h"

#include <optional>
#include <string>
#include <vector>

namespace tsfuse {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

struct SweepBranch {
  Node* reader = nullptr;    // a plain reduction of the value, or a fused reduction over it
  std::vector<Node*> views;  // a fused reader's unsqueezes of the value (replaced with it)
  bool fused = false;
  ReduceSpec spec;                   // a fused reader's reduction, its epilogue included
  std::string text;                  // the branch's stage text
  std::vector<Value*> operands;      // its operands in the sweep
  std::string peeled;                // a fused reader's epilogue run after the sweep ("": none)
  std::vector<Value*> peeledExtras;  // that epilogue's operands after the branch's result
};

struct SweepPlan {
  Node* inner = nullptr;  // the tsfuse::reduce computing the value
  Stages stages;
  std::vector<SweepBranch> branches;  // in graph order
  Node* at = nullptr;                 // the sweep goes before this reader
  // Readers of the value's metadata alone (the sizes of a triangle's mask): they read a stand-in
  // (readReducedMetadataFromStandIn). Only where `inner` is a tsfuse::reduce.
  std::vector<Node*> metadataReaders;
};

// Whether `value` is read by a fused reduction (through unsqueezes), as planSweep would take it.
bool hasFusedReader(Value* value);

// The sweep of every reader of `value` (a tsfuse::reduce's, `inner`), or nullopt with *why.
std::optional<SweepPlan> planSweep(Value* value, Node* inner, const Stages& stages, Rewriter& rw, std::string* why);

// Replaces the value's producer and readers with the sweep (and the peeled epilogues), records
// the rewrite, and returns the sweep.
Node* rewriteSweep(Rewriter& rw, const SweepPlan& plan);

}  // namespace tsfuse
