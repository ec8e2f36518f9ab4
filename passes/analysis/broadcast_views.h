// Recognizes sink_views' broadcast views in a graph: a prim::ListUnpack of a tsfuse::broadcast_*
// op, which views each of a value's leaves as the view of the value would.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <string>

namespace tsfuse {

// The tsfuse::broadcast_* op whose views `unpack` unpacks (sink_views' views of a value's leaves),
// or nullptr when `unpack` is not a prim::ListUnpack of one.
inline torch::jit::Node* broadcastViews(torch::jit::Node* unpack) {
  if (unpack->kind() != c10::prim::ListUnpack) return nullptr;
  torch::jit::Node* views = unpack->input()->node();
  return std::string(views->kind().toQualString()).rfind("tsfuse::broadcast_", 0) == 0 ? views : nullptr;
}

}  // namespace tsfuse
