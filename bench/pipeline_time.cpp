// The pass pipeline's own time on one saved TorchScript model: bench/pipeline_time.py loads this
// library with ctypes in a Python process that has imported torchvision (the scripted detection
// models call torchvision's ops, which must be registered before torch::jit::load can resolve them).
//
//   const char* tsfuse_pipeline_time(const char* model, int runs, const char* dumpPath)
//
// Each run loads the model afresh (not timed) and times tsfuse::optimize on it; the time each
// pipeline pass took is taken between the pipeline's observe() calls. Returns a JSON document
// (valid until the next call): {"runs_ms": [...], "passes_ms": {pass: [...]}, "nodes", "events",
// "rewrites"} or {"error": "..."}. With dumpPath, the first run's events and final graphs are
// written there, so two builds can be compared for identical rewrites.
#include "passes/framework/driver.h"
#include "tsfuse/tsfuse.h"

#include <nlohmann/json.hpp>
#include <torch/script.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <unordered_set>

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Every method's graph of the module and its submodules, once each, in optimize()'s order.
std::vector<std::pair<std::string, std::shared_ptr<torch::jit::Graph>>> methodGraphs(const torch::jit::Module& m) {
  std::vector<std::pair<std::string, std::shared_ptr<torch::jit::Graph>>> out;
  std::unordered_set<torch::jit::Function*> done;
  auto visit = [&](const torch::jit::Module& mod, const std::string& prefix) {
    for (const auto& method : mod.get_methods()) {
      torch::jit::Function& fn = method.function();
      auto* graphFn = torch::jit::tryToGraphFunction(fn);
      if (graphFn && done.insert(&fn).second) out.emplace_back(prefix + method.name(), graphFn->graph());
    }
  };
  visit(m, "");
  for (const auto& child : m.named_modules())
    if (!child.name.empty()) visit(child.value, child.name + ".");
  return out;
}

void dump(const std::string& path, const tsfuse::Report& report, const torch::jit::Module& m) {
  std::ofstream os(path);
  for (const tsfuse::FusionEvent& e : report.events) {
    os << (e.kind == tsfuse::FusionEvent::Kind::Rewrite ? "REWRITE " : "REJECT ") << e.pass << " in " << e.graph << ": "
       << e.reason << "\n  expr: " << e.expr << "\n  op: " << e.fusedOp << " " << e.fusedNode << "\n";
    for (size_t i = 0; i < e.nodes.size(); ++i)
      os << "  node " << e.nodes[i] << " " << (i < e.nodeIds.size() ? e.nodeIds[i] : "?") << "\n";
  }
  for (const auto& [name, g] : methodGraphs(m)) os << "=== " << name << "\n" << g->toString(false);
}

std::string run(const char* model, int runs, const char* dumpPath) {
  nlohmann::json out;
  out["runs_ms"] = nlohmann::json::array();
  std::map<std::string, std::vector<double>> passes;
  for (int r = 0; r < runs; ++r) {
    torch::jit::Module m = torch::jit::load(model);
    std::map<std::string, double> passMs;
    Clock::time_point last;
    tsfuse::PipelineOptions opts;
    opts.observe = [&](const std::string&, const std::string& stage, const torch::jit::Graph&) {
      if (!stage.empty()) passMs[stage] += msSince(last);
      last = Clock::now();
    };
    Clock::time_point start = Clock::now();
    tsfuse::Report report = tsfuse::optimize(m, opts);
    out["runs_ms"].push_back(msSince(start));
    for (const auto& [name, ms] : passMs) passes[name].push_back(ms);
    if (r == 0) {
      size_t nodes = 0;
      for (const auto& [name, g] : methodGraphs(m)) nodes += tsfuse::countNodes(g->block());
      out["nodes_after"] = nodes;
      out["events"] = report.events.size();
      out["rewrites"] = report.rewrites();
      if (dumpPath && *dumpPath) dump(dumpPath, report, m);
    }
  }
  out["passes_ms"] = passes;
  return out.dump();
}

}  // namespace

extern "C" const char* tsfuse_pipeline_time(const char* model, int runs, const char* dumpPath) {
  static thread_local std::string result;
  try {
    result = run(model, runs, dumpPath);
  } catch (const std::exception& e) {
    result = nlohmann::json{{"error", e.what()}}.dump();
  }
  return result.c_str();
}
