// What optimize-ts tells the user: the human summary (stdout) and the --report JSON document.
// Both read the pipeline's events (tsfuse::Report) and the --check result.
#pragma once

#include "registration/pipeline.h"
#include "tools/check.h"
#include "tools/graph_view.h"

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>

namespace tsfuse::tool {

struct RunInfo {
  std::string input, output;
  bool outputWritten = false;
};

// The events the default summary lists: everything the fusion passes did with their candidates,
// and the sink_views rejections that name a candidate's node. The rest (canonicalize's notes on
// in-place ops, sink_views' rewrites and other rejections) prepare the graph for the fusion passes;
// the summary lists them with verbose=true, and --explain always does.
std::vector<const FusionEvent*> candidateEvents(const Report& report);

// The pass table, the events (candidateEvents, or all with `verbose`), and one line for the
// methods with nothing to fuse.
void printSummary(std::ostream& os, const Report& report, const RunInfo& run, bool verbose);
// The summary without its first line (the files): what tsfuse.optimize reports in Python.
void printEvents(std::ostream& os, const Report& report, bool verbose);
// summary=true: one line for the summary (passed, or FAILED with the count); summary=false: one
// "optimize-ts: check failed: WHERE: WHAT" line per difference (for stderr), nothing if it passed.
void printCheck(std::ostream& os, const CheckResult& check, bool summary);

// --explain: per method, each candidate the fusion passes considered: what it would become (the
// nodes with their source lines, the expression) or why it was left alone; then the pass table.
void printExplain(std::ostream& os, const Report& report, const GraphRecorder& graphs, const RunInfo& run);

nlohmann::json reportJson(const Report& report, const RunInfo& run, const CheckResult* check);

std::string tsfuseVersion();
std::string torchVersion();

}  // namespace tsfuse::tool
