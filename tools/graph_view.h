// Snapshots of the graphs optimize-ts rewrites, for --diff, --html and --explain: each method's
// graph as the fusion passes got it (after `inline`) and as they left it, node by node.
#pragma once

#include "registration/pipeline.h"

#include <map>
#include <string>
#include <vector>

namespace tsfuse::tool {

// One line of a printed graph: a node, a block header ("block0():"), a block's "-> (...)", the
// graph's signature or its return.
struct GraphRow {
  std::string id;          // nodeId() of a node ("%x.1"); "" for other rows
  std::string text;        // as printed, without the source comment
  std::string kind;        // "aten::sub"; "" for non-node rows
  std::string file, code;  // where the node came from (nodeSource), if known
  size_t line = 0;
  std::vector<std::string> inputs;  // "%a", ... (nodes)
  int depth = 0;                    // block nesting
};

struct GraphSnapshot {
  std::string text;  // Graph::toString() (with source comments)
  std::vector<GraphRow> rows;
};

GraphSnapshot snapshotGraph(const torch::jit::Graph& g);

// Lines of `text` (without their newlines).
std::vector<std::string> splitLines(const std::string& text);

struct MethodGraphs {
  std::string name;
  GraphSnapshot before, after;
  bool changed() const { return before.text != after.text; }
};

// The file name of a path ("seed_models.py").
std::string baseName(const std::string& path);

// The rows of `before` an event's nodes are (parallel to e.nodes; nullptr where not found).
std::vector<const GraphRow*> eventRows(const FusionEvent& e, const GraphSnapshot& before);

// "seed_models.py:35-42": the source lines of the rows that have one ("" when none do).
std::string lineSpan(const std::vector<const GraphRow*>& rows);

// Records, per graph the pipeline runs on, the graph the fusion passes start from (after
// `inline`, when it runs) and the final one. Install with `options.observe = recorder.observer()`.
class GraphRecorder {
 public:
  std::function<void(const std::string&, const std::string&, const torch::jit::Graph&)> observer();
  const std::vector<MethodGraphs>& methods() const { return methods_; }
  const MethodGraphs* find(const std::string& name) const;

 private:
  std::vector<MethodGraphs> methods_;
};

}  // namespace tsfuse::tool
