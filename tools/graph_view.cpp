#include "tools/graph_view.h"

#include "passes/framework/events.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace tsfuse::tool {
namespace {

std::string valueList(torch::jit::ArrayRef<const torch::jit::Value*> values) {
  std::string s;
  for (const torch::jit::Value* v : values) s += (s.empty() ? "%" : ", %") + v->debugName();
  return s;
}

void addBlock(const torch::jit::Block* block, int depth, std::vector<GraphRow>& rows) {
  for (const torch::jit::Node* n : block->nodes()) {
    GraphRow r;
    r.id = nodeId(n);
    std::ostringstream os;
    n->print(os, 0, nullptr, /*print_source_locations=*/false, true, true, /*print_body=*/false);
    r.text = os.str();
    while (!r.text.empty() && (r.text.back() == '\n' || r.text.back() == ' ')) r.text.pop_back();
    r.kind = n->kind().toQualString();
    if (auto src = nodeSource(n)) {
      r.file = src->file;
      r.line = src->line;
      r.code = src->code;
    }
    for (const torch::jit::Value* v : n->inputs()) r.inputs.push_back("%" + v->debugName());
    r.depth = depth;
    rows.push_back(std::move(r));
    for (size_t i = 0; i < n->blocks().size(); ++i) {
      const torch::jit::Block* b = n->blocks()[i];
      GraphRow head;
      head.text = "block" + std::to_string(i) + "(" + valueList(b->inputs()) + "):";
      head.depth = depth + 1;
      rows.push_back(std::move(head));
      addBlock(b, depth + 2, rows);
      GraphRow tail;
      tail.text = "-> (" + valueList(b->outputs()) + ")";
      tail.depth = depth + 2;
      rows.push_back(std::move(tail));
    }
  }
}

}  // namespace

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream is(text);
  for (std::string line; std::getline(is, line);) lines.push_back(line);
  return lines;
}

GraphSnapshot snapshotGraph(const torch::jit::Graph& g) {
  GraphSnapshot s;
  s.text = g.toString(/*print_source_locations=*/true);
  GraphRow head;
  head.text = "graph(" + valueList(g.inputs()) + "):";
  s.rows.push_back(std::move(head));
  addBlock(g.block(), 1, s.rows);
  GraphRow ret;
  ret.text = "return (" + valueList(g.outputs()) + ")";
  ret.depth = 1;
  for (const torch::jit::Value* v : g.outputs()) ret.inputs.push_back("%" + v->debugName());
  s.rows.push_back(std::move(ret));
  return s;
}

std::string baseName(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

std::vector<const GraphRow*> eventRows(const FusionEvent& e, const GraphSnapshot& before) {
  std::vector<const GraphRow*> out(e.nodes.size(), nullptr);
  for (size_t i = 0; i < e.nodes.size() && i < e.nodeIds.size(); ++i)
    for (const GraphRow& r : before.rows)
      if (!e.nodeIds[i].empty() && r.id == e.nodeIds[i]) out[i] = &r;
  return out;
}

std::string lineSpan(const std::vector<const GraphRow*>& rows) {
  std::map<std::string, std::pair<size_t, size_t>> span;  // file -> first, last line
  for (const GraphRow* r : rows) {
    if (!r || r->file.empty()) continue;
    auto [it, fresh] = span.emplace(baseName(r->file), std::make_pair(r->line, r->line));
    it->second.first = std::min(it->second.first, r->line);
    it->second.second = std::max(it->second.second, r->line);
  }
  std::string s;
  for (const auto& [file, lines] : span) {
    s += (s.empty() ? "" : ", ") + file + ":" + std::to_string(lines.first);
    if (lines.second != lines.first) s += "-" + std::to_string(lines.second);
  }
  return s;
}

std::function<void(const std::string&, const std::string&, const torch::jit::Graph&)> GraphRecorder::observer() {
  return [this](const std::string& name, const std::string& stage, const torch::jit::Graph& g) {
    if (stage.empty()) methods_.push_back({name, {}, {}});
    MethodGraphs& m = methods_.back();
    m.after = snapshotGraph(g);
    if (stage.empty() || stage == "inline") m.before = m.after;
  };
}

const MethodGraphs* GraphRecorder::find(const std::string& name) const {
  for (const auto& m : methods_)
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace tsfuse::tool
