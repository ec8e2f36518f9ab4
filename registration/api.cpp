// The small public C++ API (include/tsfuse/tsfuse.h) over the pipeline and the executor hook.
#include "registration/executor_hook.h"
#include "registration/first_call.h"
#include "registration/pipeline.h"
#include "tsfuse/tsfuse.h"

#include <sys/stat.h>
#include <unistd.h>

#include <torch/library.h>
#include <torch/script.h>

#include <cerrno>
#include <cstring>

namespace tsfuse {
namespace {

// The first non-blank line (TorchScript's "Unknown builtin op" message starts with a newline).
std::string firstLine(const std::string& s) {
  size_t start = s.find_first_not_of("\n\r ");
  if (start == std::string::npos) return "";
  return s.substr(start, s.find('\n', start) - start);
}

}  // namespace

void checkModuleFile(const std::string& path) {
  const std::string q = "'" + path + "'";
  struct stat st {};
  TORCH_CHECK(::stat(path.c_str(), &st) == 0, "cannot read input ", q, ": ", std::strerror(errno));
  TORCH_CHECK(!S_ISDIR(st.st_mode), "input ", q, " is a directory, not a TorchScript file");
  TORCH_CHECK(S_ISREG(st.st_mode), "input ", q, " is not a regular file");
  TORCH_CHECK(st.st_size != 0, "input ", q, " is empty, not a TorchScript file");
  TORCH_CHECK(::access(path.c_str(), R_OK) == 0, "cannot read input ", q, ": ", std::strerror(errno));
}

Report optimize(torch::jit::Module& module, const PipelineOptions& options) { return optimizeModule(module, options); }

Report optimize(torch::jit::Function& function, const PipelineOptions& options) {
  return optimizeFunction(function, options, function.name());
}

torch::jit::Module loadModuleFile(const std::string& path) {
  auto fail = [&](const std::string& why) {
    TORCH_CHECK(false, "cannot load '", path, "' as a TorchScript module: ", firstLine(why));
  };
  try {
    torch::jit::Module m = torch::jit::load(path);
    // NB: a damaged .debug_pkl loads fine; its ranges are unpickled at the first lookup.
    for (torch::jit::Function* fn : m.type()->compilation_unit()->get_functions()) {
      auto* graphFn = tryToGraphFunction(*fn);
      if (!graphFn) continue;
      std::vector<torch::jit::Block*> blocks{graphFn->graph()->block()};
      while (!blocks.empty()) {
        torch::jit::Block* b = blocks.back();
        blocks.pop_back();
        for (torch::jit::Node* n : b->nodes()) {
          (void)n->sourceRange().findSourceRangeThatGenerated();
          for (torch::jit::Block* sub : n->blocks()) blocks.push_back(sub);
        }
      }
    }
    return m;
  } catch (const c10::Error& e) {
    fail(e.what_without_backtrace());
  } catch (const std::exception& e) {
    fail(e.what());
  }
  return {};
}

torch::jit::Module load(const std::string& path, const PipelineOptions& options) {
  checkModuleFile(path);
  torch::jit::Module m = loadModuleFile(path);
  optimizeModule(m, options);
  return m;
}

int initialize() { return loadTimeRegistration() ? 1 : 0; }

}  // namespace tsfuse

// The executor switch for Python (torch.ops.tsfuse.set_enabled; the package's tsfuse.enabled):
// set_enabled returns the previous state, so a caller can restore it.
TORCH_LIBRARY_FRAGMENT(tsfuse, m) {
  m.def("set_enabled(bool on) -> bool", [](bool on) {
    bool was = tsfuse::isEnabled();
    tsfuse::setEnabled(on);
    return was;
  });
  m.def("is_enabled() -> bool", [] { return tsfuse::isEnabled(); });
  // The package's first-call hook (python/tsfuse/_first_call.py; registration/first_call.h); private:
  // a begin without its end leaves PyTorch's count lent.
  m.def("_first_call_begin(Any self, str method, Any? args=None) -> bool",
        [](const c10::IValue& self, const std::string& method, const std::optional<c10::IValue>& args) {
          return tsfuse::beginFirstCall(self, method, args);
        });
  m.def("_first_call_end() -> ()", [] { tsfuse::endFirstCall(); });
  // For the differential fuzzer (tests/fuzz/run.py); private.
  m.def("_pipeline_failures() -> int", [] { return tsfuse::executorPipelineFailures(); });
}
