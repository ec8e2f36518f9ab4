// The small public C++ API (include/tsfuse/tsfuse.h) over the pipeline and the executor hook.
#include "registration/executor_hook.h"
#include "tsfuse/tsfuse.h"

#include <torch/script.h>

namespace tsfuse {

Report optimize(torch::jit::Module& module, const PipelineOptions& options) {
  return optimizeModule(module, options);
}

torch::jit::Module load(const std::string& path, const PipelineOptions& options) {
  torch::jit::Module m = torch::jit::load(path);
  optimizeModule(m, options);
  return m;
}

int initialize() { return loadTimeRegistration() ? 1 : 0; }

}  // namespace tsfuse
