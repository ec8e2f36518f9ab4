#include "tsfuse/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <array>
#include <cstdlib>
#include <memory>
#include <stdexcept>

namespace tsfuse::log {
namespace {

constexpr std::array<const char*, 4> kNames = {"tsfuse.pass", "tsfuse.kernel", "tsfuse.tool", "tsfuse.registration"};

spdlog::level::level_enum toSpd(Level l) {
  return static_cast<spdlog::level::level_enum>(static_cast<int>(l) == 5 ? 6 : static_cast<int>(l));
}

struct Loggers {
  std::array<std::shared_ptr<spdlog::logger>, kNames.size()> byComponent;
  Loggers() {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    Level initial = Level::warn;
    if (const char* env = std::getenv("TSFUSE_LOG_LEVEL")) {
      try {
        initial = parseLevel(env);
      } catch (const std::invalid_argument&) {}
    }
    for (size_t i = 0; i < kNames.size(); ++i) {
      byComponent[i] = std::make_shared<spdlog::logger>(kNames[i], sink);
      byComponent[i]->set_pattern("[%n] [%l] %v");
      byComponent[i]->set_level(toSpd(initial));
    }
  }
};

Loggers& loggers() {
  static Loggers instance;
  return instance;
}

}  // namespace

bool enabled(Component c, Level l) { return loggers().byComponent[static_cast<size_t>(c)]->should_log(toSpd(l)); }

void write(Component c, Level l, const std::string& msg) {
  loggers().byComponent[static_cast<size_t>(c)]->log(toSpd(l), msg);
}

void setLevel(Level l) {
  for (auto& lg : loggers().byComponent) lg->set_level(toSpd(l));
}

Level parseLevel(const std::string& name) {
  static const std::array<const char*, 6> names = {"trace", "debug", "info", "warn", "error", "off"};
  for (size_t i = 0; i < names.size(); ++i)
    if (name == names[i]) return static_cast<Level>(i);
  throw std::invalid_argument("unknown log level '" + name + "' (trace|debug|info|warn|error|off)");
}

}  // namespace tsfuse::log
