// What the pipeline did and why: every rewrite and every rejected candidate is an event with a
// reason. tsfuse::optimize returns them as a Report; optimize-ts prints them, writes them as JSON
// (--report) and links them to the graphs in its HTML viewer.
#pragma once

#include <string>
#include <vector>

namespace tsfuse {

struct FusionEvent {
  enum class Kind { Rewrite, Reject };
  Kind kind = Kind::Reject;
  std::string pass;                // e.g. "fuse_pairwise"
  std::string graph;               // method name, when known
  std::string reason;              // why rejected, or what was fused
  std::string expr;                // the fused expression (rewrites)
  std::string fusedOp;             // e.g. "tsfuse::pairwise"
  std::vector<std::string> nodes;  // the candidate's nodes, "aten::sub @ file.py:12"
  // Parallel to `nodes`: each node's id (its first output as printed, "%x.1"), which names the
  // same node in the graph as the pass found it; the viewer links the replaced nodes to `fusedNode`.
  std::vector<std::string> nodeIds;
  std::string fusedNode;  // rewrites: id of the node that replaced them, in the graph after the pass
};

// Candidates, rewrites and rejections of one fusion pass.
struct PassStats {
  std::string name;
  int candidates = 0;
  int rewrites = 0;
  int rejections = 0;
};

struct Report {
  std::vector<FusionEvent> events;
  std::vector<std::string> graphs;       // names of the graphs the pipeline ran on
  std::vector<PassStats> stats() const;  // one entry per fusion pass, in pipeline order
  int rewrites() const;
};

}  // namespace tsfuse
