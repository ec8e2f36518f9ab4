#include "tools/report.h"

#include <torch/headeronly/version.h>

#include <algorithm>
#include <iomanip>
#include <set>
#include <sstream>

#ifndef TSFUSE_VERSION
#define TSFUSE_VERSION "unknown"
#endif

namespace tsfuse::tool {
namespace {

const char* kindName(FusionEvent::Kind k) { return k == FusionEvent::Kind::Rewrite ? "rewrite" : "reject"; }

}  // namespace

std::string tsfuseVersion() { return TSFUSE_VERSION; }
std::string torchVersion() { return TORCH_VERSION; }

namespace {

void printPassTable(std::ostream& os, const Report& report) {
  os << "  " << std::left << std::setw(24) << "pass" << std::right << std::setw(11) << "candidates" << std::setw(10)
     << "rewrites" << std::setw(12) << "rejections"
     << "\n";
  for (const PassStats& s : report.stats())
    os << "  " << std::left << std::setw(24) << s.name << std::right << std::setw(11) << s.candidates << std::setw(10)
       << s.rewrites << std::setw(12) << s.rejections << "\n";
}

// One line per node of an event: kind, id, file:line and the source line itself.
void printEventNodes(std::ostream& os, const FusionEvent& e, const MethodGraphs* m) {
  std::vector<const GraphRow*> rows = m ? eventRows(e, m->before) : std::vector<const GraphRow*>();
  for (size_t i = 0; i < e.nodes.size(); ++i) {
    const GraphRow* r = i < rows.size() ? rows[i] : nullptr;
    if (!r || r->file.empty()) {
      os << "        " << e.nodes[i] << "\n";
      continue;
    }
    std::string code = r->code.substr(std::min(r->code.size(), r->code.find_first_not_of(" \t")));
    // Each column ends in a space, so a kind or id longer than its column still stands apart.
    os << "        " << std::left << std::setw(15) << r->kind << ' ' << std::setw(25) << r->id << ' ' << std::setw(22)
       << (baseName(r->file) + ":" + std::to_string(r->line)) << std::right << "  " << code << "\n";
  }
}

// Milliseconds as text to three significant digits: in ms from one millisecond up, else in us.
std::string ms(double v) {
  bool micro = v < 1;
  double x = micro ? v * 1000 : v;
  std::ostringstream os;
  os << std::fixed << std::setprecision(x < 10 ? 2 : x < 100 ? 1 : 0) << x << (micro ? " us" : " ms");
  return os.str();
}

nlohmann::json timingJson(const CheckResult& c) {
  if (c.timedCalls == 0) return nullptr;
  return {{"warmup_calls", kWarmupCalls},
          {"timed_calls", c.timedCalls},
          {"original_median_ms", c.original.medianMs},
          {"optimized_median_ms", c.optimized.medianMs},
          {"original_first_call_ms", c.original.firstCallMs},
          {"optimized_first_call_ms", c.optimized.firstCallMs}};
}

}  // namespace

void printExplain(std::ostream& os, const Report& report, const GraphRecorder& graphs, const RunInfo& run) {
  os << "optimize-ts --explain: " << run.input << " (nothing written)\n";
  for (const std::string& name : report.graphs) {
    const MethodGraphs* m = graphs.find(name);
    int rewrites = 0, rejections = 0;
    for (const FusionEvent& e : report.events)
      if (e.graph == name) (e.kind == FusionEvent::Kind::Rewrite ? rewrites : rejections)++;
    os << "\n" << name << ": ";
    if (rewrites + rejections == 0) {
      os << "nothing to fuse (no candidate)\n";
      continue;
    }
    os << rewrites << " fusion(s), " << rejections << " rejected candidate(s)";
    if (m) {
      size_t before = 0, after = 0;
      for (const auto& r : m->before.rows) before += !r.kind.empty();
      for (const auto& r : m->after.rows) after += !r.kind.empty();
      os << "; " << before << " nodes -> " << after;
    }
    os << "\n";
    for (const FusionEvent& e : report.events) {
      if (e.graph != name) continue;
      std::string lines = m ? lineSpan(eventRows(e, m->before)) : "";
      if (e.kind == FusionEvent::Kind::Rewrite) {
        os << "  FUSE  " << e.nodes.size() << " nodes -> " << e.fusedOp << " (" << e.pass
           << (lines.empty() ? "" : ", " + lines) << ")\n";
        os << "        why: " << e.reason << "\n        expr: " << e.expr << "\n";
      } else {
        os << "  KEEP  " << e.nodes.size() << " node(s) unfused (" << e.pass << (lines.empty() ? "" : ", " + lines)
           << ")\n        why not: " << e.reason << "\n";
      }
      printEventNodes(os, e, m);
    }
  }
  os << "\n";
  printPassTable(os, report);
}

std::vector<const FusionEvent*> candidateEvents(const Report& report) {
  std::set<std::string> fusionPasses;
  for (const PassStats& s : report.stats()) fusionPasses.insert(s.name);
  std::set<std::pair<std::string, std::string>> candidateNodes;  // (graph, node id)
  for (const FusionEvent& e : report.events)
    if (fusionPasses.count(e.pass))
      for (const std::string& id : e.nodeIds) candidateNodes.insert({e.graph, id});
  std::vector<const FusionEvent*> out;
  for (const FusionEvent& e : report.events) {
    bool blocksCandidate = e.pass == "sink_views" && e.kind == FusionEvent::Kind::Reject &&
                           std::any_of(e.nodeIds.begin(), e.nodeIds.end(), [&](const std::string& id) {
                             return candidateNodes.count({e.graph, id});
                           });
    if (fusionPasses.count(e.pass) || blocksCandidate) out.push_back(&e);
  }
  return out;
}

void printSummary(std::ostream& os, const Report& report, const RunInfo& run, bool verbose) {
  os << "optimize-ts: " << run.input << " -> " << run.output << (run.outputWritten ? "" : " (not written)") << "\n";
  printEvents(os, report, verbose);
}

void printEvents(std::ostream& os, const Report& report, bool verbose) {
  std::vector<const FusionEvent*> candidates = candidateEvents(report);
  std::set<const FusionEvent*> isCandidate(candidates.begin(), candidates.end());
  std::set<std::string> withCandidates, notedPasses;
  for (const FusionEvent* e : candidates) withCandidates.insert(e->graph);
  std::vector<const FusionEvent*> listed;
  size_t notes = 0;  // events not listed
  for (const FusionEvent& e : report.events) {
    if (verbose || isCandidate.count(&e)) {
      listed.push_back(&e);
    } else {
      ++notes;
      notedPasses.insert(e.pass);
    }
  }

  if (!withCandidates.empty() || verbose) printPassTable(os, report);
  for (const FusionEvent* e : listed)
    if (e->kind == FusionEvent::Kind::Rewrite)
      os << "  rewrite  " << e->graph << ": " << e->fusedOp << " <- " << e->nodes.size()
         << " nodes: " << (e->expr.empty() ? e->reason : e->expr) << "\n";
  for (const FusionEvent* e : listed)
    if (e->kind == FusionEvent::Kind::Reject)
      os << "  reject   " << e->graph << " (" << e->pass << "): " << e->reason << " (at "
         << (e->nodes.empty() ? "?" : e->nodes.front()) << ")\n";

  // One line for all the methods without a candidate, however many (a scripted CNN has dozens).
  std::vector<std::string> idle;
  for (const std::string& g : report.graphs)
    if (!withCandidates.count(g)) idle.push_back(g);
  if (withCandidates.empty()) {
    os << "  nothing to fuse: no fusion candidate in "
       << (idle.size() == 1 ? "'" + idle[0] + "'" : std::to_string(idle.size()) + " methods") << "\n";
  } else if (!idle.empty()) {
    constexpr size_t kNamed = 4;
    os << "  nothing to fuse in " << idle.size() << " other method(s): ";
    for (size_t i = 0; i < std::min(idle.size(), kNamed); ++i) os << (i ? ", " : "") << idle[i];
    os << (idle.size() > kNamed ? ", ..." : "") << "\n";
  }
  if (notes > 0) {
    os << "  " << notes << " note(s) from ";
    for (auto it = notedPasses.begin(); it != notedPasses.end(); ++it)
      os << (it == notedPasses.begin() ? "" : ", ") << *it;
    os << " not listed (--verbose or --explain lists them)\n";
  }
}

void printCheck(std::ostream& os, const CheckResult& c, bool summary) {
  if (summary && !c.passed) {
    os << "check: FAILED (" << c.differences.size() << " difference(s), see stderr)\n";
    return;
  }
  if (c.passed) {
    if (!summary) return;
    os << "check: passed (" << c.tensorsCompared << " tensor(s) from " << c.inputs.source << ", max abs diff "
       << c.maxAbsDiff << ")\n";
    if (c.timedCalls > 0)
      os << "  time: original " << ms(c.original.medianMs) << ", optimized " << ms(c.optimized.medianMs)
         << " (median of " << c.timedCalls << " calls after " << kWarmupCalls << " warm-up calls); first call "
         << ms(c.original.firstCallMs) << ", " << ms(c.optimized.firstCallMs) << "\n";
    return;
  }
  for (const Difference& d : c.differences) os << "optimize-ts: check failed: " << d.where << ": " << d.what << "\n";
}

nlohmann::json reportJson(const Report& report, const RunInfo& run, const CheckResult* check) {
  using nlohmann::json;
  json j;
  j["input"] = run.input;
  j["output"] = run.output;
  j["output_written"] = run.outputWritten;
  j["torch_version"] = torchVersion();
  j["tsfuse_version"] = tsfuseVersion();
  j["graphs"] = report.graphs;
  j["passes"] = json::array();
  for (const PassStats& s : report.stats())
    j["passes"].push_back(
        {{"name", s.name}, {"candidates", s.candidates}, {"rewrites", s.rewrites}, {"rejections", s.rejections}});
  j["events"] = json::array();
  for (const FusionEvent& e : report.events)
    j["events"].push_back({{"pass", e.pass},
                           {"graph", e.graph},
                           {"kind", kindName(e.kind)},
                           {"reason", e.reason},
                           {"expr", e.expr},
                           {"fused_op", e.fusedOp},
                           {"nodes", e.nodes},
                           {"node_ids", e.nodeIds},
                           {"fused_node", e.fusedNode}});
  if (!check) {
    j["check"] = nullptr;
  } else {
    json diffs = json::array();
    for (const Difference& d : check->differences) diffs.push_back({{"where", d.where}, {"what", d.what}});
    j["check"] = {{"passed", check->passed},
                  {"inputs_from", check->inputs.source},
                  {"inputs", check->inputs.described},
                  {"rtol", check->rtol},
                  {"atol", check->atol},
                  {"tensors_compared", check->tensorsCompared},
                  {"max_abs_diff", check->maxAbsDiff},
                  {"differences", diffs},
                  {"runs", check->runs},
                  {"device", check->device},
                  {"timing", timingJson(*check)}};
  }
  return j;
}

}  // namespace tsfuse::tool
