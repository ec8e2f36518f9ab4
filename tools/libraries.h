// Extension op libraries for optimize-ts: models that call another library's TorchScript ops
// (torchvision::nms, mmcv::..., detectron2::...) load only once that library has registered them.
#pragma once

#include <string>
#include <vector>

namespace tsfuse::tool {

// The environment variable with more libraries to load: paths separated by ':'.
inline constexpr const char* kLibrariesEnv = "TSFUSE_LIBRARIES";

// The libraries of $TSFUSE_LIBRARIES (in order, empty entries skipped), then `flags` (--library).
std::vector<std::string> libraryPaths(const std::vector<std::string>& flags);

// dlopen()s each library (RTLD_NOW | RTLD_GLOBAL, as torch.ops.load_library does in Python, so
// that ops and symbols it defines are visible to the libraries after it). A library built as a
// Python extension (pip's torchvision/_C.so links libtorch_python.so) needs libpython's symbols:
// that runtime is loaded first, uninitialized, when the library asks for it. Throws
// ToolError(kExitIO) with a one-line message naming the library that cannot be loaded.
void loadLibraries(const std::vector<std::string>& paths);

// For a model that failed to load with "Unknown builtin op: NS::OP" (NS not aten/prim): a sentence
// saying to load NS's library with --library (for torchvision, where pip puts it); else "".
std::string unknownOpHint(const std::string& loadError);

}  // namespace tsfuse::tool
