// Options of one pipeline run (tsfuse::optimize, tsfuse::load, optimize-ts).
#pragma once

#include <functional>
#include <set>
#include <string>

namespace torch::jit {
struct Graph;
}

namespace tsfuse {

struct PipelineOptions {
  std::set<std::string> disabled;  // pass names to skip (optimize-ts --list-passes lists them)
  // Called with the graph as it enters the pipeline (stage "") and after each pass that ran
  // (stage = the pass name); optimize-ts --diff/--html snapshot graphs with it.
  std::function<void(const std::string& graphName, const std::string& stage, const torch::jit::Graph&)> observe;
  // Throws std::invalid_argument naming the unknown pass, if any.
  void validate() const;
};

}  // namespace tsfuse
