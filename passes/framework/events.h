// How passes describe nodes in events (tsfuse/report.h), and where events go: the logs and the
// sink in scope (the pipeline's Report). Passes record events through their Rewriter (driver.h).
#pragma once

#include "tsfuse/report.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace torch::jit {
struct Node;
}

namespace tsfuse {

// Where a node came from: the range that generated it (the user's .py file, for a module loaded
// with its debug info; else the serialized code/__torch__.py), its 1-based line and that line.
struct NodeSource {
  std::string file;
  size_t line = 0;
  std::string code;  // the source line, without its newline
};
std::optional<NodeSource> nodeSource(const torch::jit::Node* n);

// Describes a node for events and logs: its kind and, when known, its source file:line.
std::string describeNode(const torch::jit::Node* n);

// A node's id for events: its first output as printed ("%x.1", "%5"); unique in its graph and
// kept by the rewrites. "" for a node without outputs.
std::string nodeId(const torch::jit::Node* n);

// Emits an event: logs it (debug for rejections, info for rewrites) and hands it to the sink in
// scope on this thread, if any.
void emitEvent(FusionEvent e);

// Collects the events emitted on this thread while alive; nests (the innermost wins).
class ScopedEventSink {
 public:
  using Fn = std::function<void(const FusionEvent&)>;
  explicit ScopedEventSink(Fn fn);
  ~ScopedEventSink();
  ScopedEventSink(const ScopedEventSink&) = delete;
  ScopedEventSink& operator=(const ScopedEventSink&) = delete;

 private:
  Fn fn_;
  ScopedEventSink* prev_;
  friend void emitEvent(FusionEvent e);
};

// The graph name events carry while alive (set by the pipeline per method).
class ScopedGraphName {
 public:
  explicit ScopedGraphName(std::string name);
  ~ScopedGraphName();

 private:
  std::string prev_;
};

}  // namespace tsfuse
