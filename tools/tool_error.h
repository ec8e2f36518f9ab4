// Errors of the optimize-ts tool and the exit codes they map to (see docs/optimize-ts.md).
#pragma once

#include <stdexcept>
#include <string>

namespace tsfuse::tool {

enum ExitCode : int {
  kExitOk = 0,        // success (and --check passed, when asked)
  kExitMismatch = 1,  // --check: the optimized module's outputs differ from the original's
  kExitUsage = 2,     // bad command line (unknown flag, unknown pass, missing --input-shape, ...)
  kExitIO = 3,        // input/output problem: missing/unreadable/corrupt input, bad output path
  kExitInternal = 4,  // anything else (a bug: please report it)
};

// An error with a one-line message and the exit code it ends the tool with.
struct ToolError : std::runtime_error {
  ToolError(int code, const std::string& message) : std::runtime_error(message), code(code) {}
  int code;
};

inline ToolError usageError(const std::string& m) { return ToolError(kExitUsage, m); }
inline ToolError ioError(const std::string& m) { return ToolError(kExitIO, m); }

// The first line of an exception message (c10::Error messages carry backtraces and context).
inline std::string firstLine(const std::string& s) {
  auto end = s.find('\n');
  std::string line = s.substr(0, end);
  // PyTorch's zip reader appends a paragraph of speculation to its errors; keep the fact.
  auto boilerplate = line.find(" This is an internal miniz error.");
  if (boilerplate != std::string::npos) line.resize(boilerplate);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line;
}

}  // namespace tsfuse::tool
