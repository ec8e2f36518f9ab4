// Logging facade: one spdlog logger per component, quiet (warn) by default.
//
// spdlog lives in one translation unit (common/logging.cpp) that never sees torch's headers: the
// torch wheel bundles a newer fmt than Debian's spdlog is built against. Callers build messages
// with c10::str-style streaming; the level check happens first, so a disabled log costs nothing.
#pragma once
#include <sstream>
#include <string>

namespace tsfuse::log {

enum class Level { trace = 0, debug = 1, info = 2, warn = 3, error = 4, off = 5 };
enum class Component { pass = 0, kernel = 1, tool = 2, registration = 3 };

bool enabled(Component c, Level l);
void write(Component c, Level l, const std::string& msg);
// Sets every component's level; "TSFUSE_LOG_LEVEL" (trace|debug|info|warn|error|off) sets it at load.
void setLevel(Level l);
Level parseLevel(const std::string& name);  // throws std::invalid_argument

template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace tsfuse::log

#define TSFUSE_LOG(component, level, ...)                                                         \
  do {                                                                                            \
    if (::tsfuse::log::enabled(::tsfuse::log::Component::component, ::tsfuse::log::Level::level)) \
      ::tsfuse::log::write(::tsfuse::log::Component::component, ::tsfuse::log::Level::level,      \
                           ::tsfuse::log::concat(__VA_ARGS__));                                   \
  } while (0)
