// The record of which path (native, chunked, eager, ...) the current call on this thread took,
// read back by tsfuse::lastPath() (include/tsfuse/ops.h).
#pragma once

namespace tsfuse {

// Records the path of the current call on this thread.
void setLastPath(const char* path);

}  // namespace tsfuse
