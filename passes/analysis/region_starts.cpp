// Where fusion may start (passes/analysis/region_starts.h).
#include "passes/analysis/region_starts.h"

#include "passes/analysis/decompositions.h"
#include "passes/analysis/op_table.h"

#include <unordered_set>

namespace tsfuse {

using torch::jit::Node;
using torch::jit::Value;

namespace {

bool isMatchedElementwise(Node* n) {
  ElementwiseMatch m;
  return matchElementwise(n, m, nullptr);
}

}  // namespace

bool mayFuse(torch::jit::Block* block) {
  for (Node* n : block->nodes()) {
    if (n->kind() == c10::prim::CallFunction || n->kind() == c10::prim::CallMethod) return true;
    if (isMatchedElementwise(n) || decompositionOf(n)) return true;
    for (torch::jit::Block* sub : n->blocks())
      if (mayFuse(sub)) return true;
  }
  return false;
}

namespace {

bool isReducer(Node* n) {
  ReductionMatch r;
  return n->kind() == c10::aten::softmax || n->kind() == c10::aten::log_softmax || matchReduction(n, r, nullptr);
}

// An in-place op (x.op_(...), index_put_, x &= y): canonicalize may make it a functional
// elementwise op and point the value's later readers at its result.
bool isInPlace(const Node* n) { return !outOfPlaceName(n->kind().toUnqualString()).empty(); }

// A node that hands its input on as it is: a view (its schema says its result aliases an input),
// or a structural node canonicalize lowers or the executor inserted (tuples, lists, profiles).
bool handsOn(Node* n) {
  switch (n->kind()) {
    case c10::prim::TupleConstruct:
    case c10::prim::TupleUnpack:
    case c10::prim::TupleIndex:
    case c10::prim::ListConstruct:
    case c10::prim::ListUnpack:
    case c10::prim::profile:
      return true;
    default:
      break;
  }
  const c10::FunctionSchema* s = n->maybeSchema();
  if (!s || s->returns().empty()) return false;
  const c10::AliasInfo* a = s->returns()[0].alias_info();
  return a && !a->isWrite();
}

// What the readers of an elementwise op's value (seen through nodes that hand it on) do with it.
struct Readers {
  bool elementwise = false;  // another elementwise op reads it
  bool reduced = false;      // a reduction or softmax reads it
  bool written = false;      // an in-place op writes it
  bool escapes = false;      // something a fused region cannot hold reads it (it is stored anyway)
};

void collectReaders(Value* v, Readers& r, std::unordered_set<Value*>& seen, size_t& steps) {
  constexpr size_t kMaxSteps = 64;  // past this, assume the value may join a region
  if (!seen.insert(v).second) return;
  for (const torch::jit::Use& use : v->uses()) {
    Node* u = use.user;
    if (++steps > kMaxSteps) {
      r.reduced = true;
      return;
    }
    if (isMetadataRead(u)) continue;  // its sizes, rank, dtype or device: read from tsfuse::shape_of, not the value
    if (isInPlace(u))
      r.written = true;
    else if (isReducer(u))
      r.reduced = true;
    else if (isMatchedElementwise(u))
      r.elementwise = true;
    else if (handsOn(u))
      for (Value* out : u->outputs()) collectReaders(out, r, seen, steps);
    else
      r.escapes = true;
  }
}

}  // namespace

bool startsRegion(Node* n) {
  if (!isMatchedElementwise(n)) return false;
  Readers r;
  std::unordered_set<Value*> seen;
  size_t steps = 0;
  for (Value* out : n->outputs()) collectReaders(out, r, seen, steps);
  return r.written || (!r.escapes && (r.reduced || r.elementwise));
}

Node* firstFusionCandidate(torch::jit::Block* block) {
  for (Node* n : block->nodes()) {
    if (n->kind() == c10::prim::CallFunction || n->kind() == c10::prim::CallMethod) return n;
    if (startsRegion(n)) return n;
    for (torch::jit::Block* sub : n->blocks())
      if (Node* c = firstFusionCandidate(sub)) return c;
  }
  return nullptr;
}

}  // namespace tsfuse
