// tsfuse public C++ API.
//
// Linking libtsfuse (find_package(tsfuse) + target_link_libraries(app tsfuse::tsfuse)) registers
// the fused ops and the executor pass at load: every TorchScript model the app runs is optimized,
// first call included (tsfuse/executor.h switches it; docs/registration.md has the mechanism and
// its trade-offs). The functions below are for explicit use.
#pragma once

#include "tsfuse/executor.h"
#include "tsfuse/log.h"
#include "tsfuse/ops.h"
#include "tsfuse/options.h"
#include "tsfuse/report.h"

#include <torch/csrc/jit/api/module.h>

#include <string>

namespace tsfuse {

// Rewrites every method of `module` in place (what optimize-ts does before saving).
Report optimize(torch::jit::Module& module, const PipelineOptions& options = {});

// Rewrites the graph of one scripted function in place (calls inlined), e.g. cu->get_function("box_iou")
// of a torch::jit::compile'd CompilationUnit; the report names its graph after the function. Its
// executor builds its plan from the graph at the first call, so optimize before calling it. Throws
// c10::Error for a function without a graph (a builtin).
Report optimize(torch::jit::Function& function, const PipelineOptions& options = {});

// torch::jit::load followed by optimize(). Throws c10::Error with a one-line message naming the
// path when it is missing, a directory, empty, unreadable, or not a loadable TorchScript module
// (corrupt, truncated, not TorchScript, or calling an op this process does not have).
torch::jit::Module load(const std::string& path, const PipelineOptions& options = {});

// Throws c10::Error (one line, naming the path) unless `path` is an existing, readable, non-empty
// regular file. load() checks this first; optimize-ts too.
void checkModuleFile(const std::string& path);

// torch::jit::load, plus what it leaves for later: the debug info (source ranges, read lazily on
// the first graph print or source lookup) of every function is resolved now, so a corrupt file
// fails here rather than in a pass. Throws c10::Error "cannot load '<path>' as a TorchScript
// module: ..." (one line). load() and optimize-ts use it.
torch::jit::Module loadModuleFile(const std::string& path);

// Keeps the library linked (an app that calls it cannot lose the load-time registration to
// --as-needed) and reports whether the executor pass was registered at load (1) or not (0).
int initialize();

}  // namespace tsfuse
