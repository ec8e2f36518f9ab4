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

void printSummary(std::ostream& os, const Report& report, const RunInfo& run);
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
