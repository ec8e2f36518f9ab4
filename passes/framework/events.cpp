#include "passes/framework/events.h"

#include "tsfuse/log.h"

#include <torch/csrc/jit/ir/ir.h>

namespace tsfuse {
namespace {
thread_local ScopedEventSink* tlsSink = nullptr;
thread_local std::string tlsGraphName;
}  // namespace

std::optional<NodeSource> nodeSource(const torch::jit::Node* n) {
  torch::jit::SourceRange range = n->sourceRange();
  if (auto original = range.findSourceRangeThatGenerated()) range = *original;
  auto loc = range.file_line_col();
  if (!loc) return std::nullopt;
  NodeSource s{std::get<0>(*loc), std::get<1>(*loc), ""};
  const auto& src = range.source();
  std::string code = src->get_line(src->lineno_for_offset(range.start())).str();
  while (!code.empty() && (code.back() == '\n' || code.back() == '\r')) code.pop_back();
  s.code = std::move(code);
  return s;
}

std::string describeNode(const torch::jit::Node* n) {
  std::string s = n->kind().toQualString();
  if (auto loc = nodeSource(n)) s += " @ " + loc->file + ":" + std::to_string(loc->line);
  return s;
}

std::string nodeId(const torch::jit::Node* n) {
  return n->outputs().empty() ? std::string() : "%" + n->output(0)->debugName();
}

void emitEvent(FusionEvent e) {
  if (e.graph.empty()) e.graph = tlsGraphName;
  if (e.kind == FusionEvent::Kind::Rewrite) {
    TSFUSE_LOG(pass, info, e.pass, ": fused ", e.nodes.size(), " nodes of '", e.graph, "' into ", e.fusedOp, " [",
               e.expr, "]");
  } else {
    TSFUSE_LOG(pass, debug, e.pass, ": rejected candidate at ", e.nodes.empty() ? "?" : e.nodes.front(), " in '",
               e.graph, "': ", e.reason);
  }
  if (tlsSink) tlsSink->fn_(e);
}

ScopedEventSink::ScopedEventSink(Fn fn) : fn_(std::move(fn)), prev_(tlsSink) { tlsSink = this; }
ScopedEventSink::~ScopedEventSink() { tlsSink = prev_; }

ScopedGraphName::ScopedGraphName(std::string name) : prev_(std::move(tlsGraphName)) { tlsGraphName = std::move(name); }
ScopedGraphName::~ScopedGraphName() { tlsGraphName = std::move(prev_); }

}  // namespace tsfuse
