// optimize-ts --html: one self-contained HTML page (inline CSS and JS, no network) showing, per
// method, the graph before and after fusion side by side. The nodes a rewrite replaced and the
// fused op that replaced them share a color and link to each other; every node shows its source
// file:line; rejected candidates are listed with their reasons. Layout and behaviour live in
// tools/html_assets.cpp; this file turns the run into the page's JSON data.
#pragma once

#include "tools/graph_view.h"
#include "tools/report.h"

#include <nlohmann/json.hpp>

#include <string>

namespace tsfuse::tool {

// The page's data: summary, and per method the aligned rows, fusions and rejections.
nlohmann::json viewerData(const Report& report, const GraphRecorder& graphs, const RunInfo& run);

// The complete page for `data`.
std::string renderHtml(const nlohmann::json& data);

// The page's stylesheet and script (tools/html_assets.cpp).
extern const char* const kViewerCss;
extern const char* const kViewerJs;

}  // namespace tsfuse::tool
