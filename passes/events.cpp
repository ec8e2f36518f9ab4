#include "passes/events.h"

#include "tsfuse/log.h"

#include <torch/csrc/jit/ir/ir.h>

namespace tsfuse {
namespace {
thread_local ScopedEventSink* tlsSink = nullptr;
thread_local std::string tlsGraphName;
}  // namespace

std::string describeNode(const torch::jit::Node* n) {
  std::string s = n->kind().toQualString();
  if (auto loc = n->sourceRange().file_line_col()) {
    const auto& [file, line, col] = *loc;
    s += " @ " + file + ":" + std::to_string(line);
  }
  return s;
}

void emitEvent(FusionEvent e) {
  if (e.graph.empty()) e.graph = tlsGraphName;
  if (e.kind == FusionEvent::Kind::Rewrite) {
    TSFUSE_LOG(pass, info, e.pass, ": fused ", e.nodes.size(), " nodes of '", e.graph, "' into ",
               e.fusedOp, " [", e.expr, "]");
  } else {
    TSFUSE_LOG(pass, debug, e.pass, ": rejected candidate at ", e.nodes.empty() ? "?" : e.nodes.front(),
               " in '", e.graph, "': ", e.reason);
  }
  if (tlsSink) tlsSink->fn_(e);
}

ScopedEventSink::ScopedEventSink(Fn fn) : fn_(std::move(fn)), prev_(tlsSink) { tlsSink = this; }
ScopedEventSink::~ScopedEventSink() { tlsSink = prev_; }

ScopedGraphName::ScopedGraphName(std::string name) : prev_(std::move(tlsGraphName)) {
  tlsGraphName = std::move(name);
}
ScopedGraphName::~ScopedGraphName() { tlsGraphName = std::move(prev_); }

}  // namespace tsfuse
