#include "tools/html_report.h"

#include "tools/line_diff.h"

#include <map>
#include <set>

namespace tsfuse::tool {
namespace {

using nlohmann::json;

json rowJson(const GraphRow& r) {
  json j = {{"t", r.text}, {"d", r.depth}};
  if (!r.id.empty()) j["id"] = r.id;
  if (!r.kind.empty()) j["k"] = r.kind;
  if (!r.file.empty())
    j["src"] = {{"file", r.file},
                {"short", baseName(r.file) + ":" + std::to_string(r.line)},
                {"line", r.line},
                {"code", r.code}};
  return j;
}

std::map<std::string, size_t> rowsById(const GraphSnapshot& s) {
  std::map<std::string, size_t> out;
  for (size_t i = 0; i < s.rows.size(); ++i)
    if (!s.rows[i].id.empty()) out.emplace(s.rows[i].id, i);
  return out;
}

// Rows side by side: equal rows share a line; each run of changes pairs its deletions with its
// insertions. Returns [[beforeRow|null, afterRow|null, unchanged], ...].
json alignRows(const GraphSnapshot& before, const GraphSnapshot& after) {
  std::vector<std::string> a, b;
  for (const auto& r : before.rows) a.push_back(r.text);
  for (const auto& r : after.rows) b.push_back(r.text);
  std::vector<Edit> edits = diffLines(a, b);
  json rows = json::array();
  for (size_t i = 0; i < edits.size();) {
    if (edits[i].op == Edit::Equal) {
      rows.push_back({edits[i].a, edits[i].b, true});
      ++i;
      continue;
    }
    std::vector<size_t> dels, ins;
    for (; i < edits.size() && edits[i].op != Edit::Equal; ++i)
      (edits[i].op == Edit::Delete ? dels : ins).push_back(edits[i].op == Edit::Delete ? edits[i].a : edits[i].b);
    for (size_t k = 0; k < std::max(dels.size(), ins.size()); ++k)
      rows.push_back(
          {k < dels.size() ? json(dels[k]) : json(nullptr), k < ins.size() ? json(ins[k]) : json(nullptr), false});
  }
  return rows;
}

json methodJson(const MethodGraphs& m, const Report& report, int& fusionCount) {
  json before = json::array(), after = json::array();
  for (const auto& r : m.before.rows) before.push_back(rowJson(r));
  for (const auto& r : m.after.rows) after.push_back(rowJson(r));
  for (auto& r : before) r["role"] = "same";
  for (auto& r : after) r["role"] = "same";
  json rows = alignRows(m.before, m.after);
  for (const auto& pair : rows) {
    if (pair[2].get<bool>()) continue;
    if (!pair[0].is_null()) before[pair[0].get<size_t>()]["role"] = "removed";
    if (!pair[1].is_null()) after[pair[1].get<size_t>()]["role"] = "added";
  }
  auto afterIds = rowsById(m.after);
  json fusions = json::array(), rejections = json::array();
  std::map<std::string, std::string> replacedBy;  // before id -> fusion id
  for (const FusionEvent& e : report.events) {
    if (e.graph != m.name) continue;
    json nodes = json::array();
    std::vector<const GraphRow*> srcRows = eventRows(e, m.before);
    for (size_t i = 0; i < e.nodes.size(); ++i) {
      const GraphRow* r = srcRows[i];
      nodes.push_back(
          {{"id", r ? r->id : ""}, {"desc", e.nodes[i]}, {"row", r ? json(r - m.before.rows.data()) : json(nullptr)}});
    }
    if (e.kind == FusionEvent::Kind::Reject) {
      rejections.push_back({{"pass", e.pass}, {"reason", e.reason}, {"nodes", nodes}, {"lines", lineSpan(srcRows)}});
      continue;
    }
    std::string fid = "F" + std::to_string(++fusionCount);
    auto fused = afterIds.find(e.fusedNode);
    json f = {{"id", fid},
              {"pass", e.pass},
              {"op", e.fusedOp},
              {"expr", e.expr},
              {"reason", e.reason},
              {"nodes", nodes},
              {"lines", lineSpan(srcRows)},
              {"fused", e.fusedNode},
              {"row", fused == afterIds.end() ? json(nullptr) : json(fused->second)}};
    for (const auto& n : nodes)
      if (!n["row"].is_null()) {
        before[n["row"].get<size_t>()]["role"] = "replaced";
        before[n["row"].get<size_t>()]["fu"] = fid;
        replacedBy[n["id"].get<std::string>()] = fid;
      }
    if (fused != afterIds.end()) {
      const GraphRow& fr = m.after.rows[fused->second];
      after[fused->second]["role"] = "fused";
      after[fused->second]["fu"] = fid;
      // The operand list and expression constant the rewrite inserted for the fused op.
      for (const auto& in : fr.inputs) {
        auto p = afterIds.find(in);
        if (p != afterIds.end() && after[p->second]["role"] == "added") {
          after[p->second]["role"] = "part";
          after[p->second]["fu"] = fid;
        }
      }
    }
    fusions.push_back(std::move(f));
  }
  // A removed node all of whose users a fusion replaced died with it (e.g. a folded constant).
  std::map<std::string, std::set<std::string>> usersFusions;
  for (const auto& r : m.before.rows)
    for (const auto& in : r.inputs) {
      auto it = replacedBy.find(r.id);
      usersFusions[in].insert(it == replacedBy.end() ? "" : it->second);
    }
  for (size_t i = 0; i < m.before.rows.size(); ++i) {
    if (before[i]["role"] != "removed") continue;
    const auto& users = usersFusions[m.before.rows[i].id];
    if (users.size() == 1 && !users.begin()->empty()) before[i]["fu"] = *users.begin();
  }
  size_t nodesBefore = 0, nodesAfter = 0;
  for (const auto& r : m.before.rows) nodesBefore += !r.kind.empty();
  for (const auto& r : m.after.rows) nodesAfter += !r.kind.empty();
  return {{"name", m.name},
          {"changed", m.changed()},
          {"before", before},
          {"after", after},
          {"rows", rows},
          {"fusions", fusions},
          {"rejections", rejections},
          {"nodes_before", nodesBefore},
          {"nodes_after", nodesAfter}};
}

}  // namespace

json viewerData(const Report& report, const GraphRecorder& graphs, const RunInfo& run) {
  json methods = json::array();
  int fusionCount = 0;
  for (const MethodGraphs& m : graphs.methods()) methods.push_back(methodJson(m, report, fusionCount));
  json passes = json::array();
  for (const PassStats& s : report.stats())
    passes.push_back(
        {{"name", s.name}, {"candidates", s.candidates}, {"rewrites", s.rewrites}, {"rejections", s.rejections}});
  return {{"input", run.input},
          {"output", run.output},
          {"output_written", run.outputWritten},
          {"tool", "optimize-ts (tsfuse) " + tsfuseVersion() + ", torch " + torchVersion()},
          {"passes", passes},
          {"methods", methods}};
}

std::string renderHtml(const json& data) {
  std::string payload = data.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string safe;  // inside <script>: no "</" (ends the element) and no "<!--"
  safe.reserve(payload.size());
  for (char c : payload) {
    if (c == '<')
      safe += "\\u003c";
    else
      safe += c;
  }
  std::string title = "optimize-ts: " + baseName(data["input"].get<std::string>());
  std::string escTitle;
  for (char c : title) escTitle += c == '<' ? "&lt;" : c == '&' ? "&amp;" : std::string(1, c);
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + escTitle +
         "</title>\n<style>\n" + kViewerCss +
         "</style>\n</head>\n<body>\n<div id=\"app\"><noscript>This report "
         "needs JavaScript.</noscript></div>\n<script type=\"application/json\" id=\"tsfuse-data\">" +
         safe + "</script>\n<script>\n" + kViewerJs + "</script>\n</body>\n</html>\n";
}

}  // namespace tsfuse::tool
