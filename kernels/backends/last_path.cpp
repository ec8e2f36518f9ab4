#include "kernels/backends/last_path.h"

#include "tsfuse/ops.h"

namespace tsfuse {
namespace {

thread_local const char* tlsLastPath = "none";

}  // namespace

void setLastPath(const char* path) { tlsLastPath = path; }
const char* lastPath() { return tlsLastPath; }

}  // namespace tsfuse
