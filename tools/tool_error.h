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

// A path as the tool's messages quote it: 'path'. (Not `quoted`: with torch's headers in the same
// file, argument-dependent lookup also finds std::quoted.)
inline std::string quotedPath(const std::string& p) { return "'" + p + "'"; }

inline ToolError usageError(const std::string& m) { return ToolError(kExitUsage, m); }
inline ToolError ioError(const std::string& m) { return ToolError(kExitIO, m); }

// The line of an exception message that says what went wrong (c10::Error messages carry
// backtraces and context): the first line, or for an error raised inside the TorchScript
// interpreter (a preamble, then the TorchScript traceback) the last one, "RuntimeError: ...".
inline std::string firstLine(const std::string& text) {
  // Some messages start with blank lines (TorchScript's "\nUnknown builtin op: ...").
  size_t start = text.find_first_not_of("\n\r ");
  const std::string s = start == std::string::npos ? std::string() : text.substr(start);
  std::string line = s.substr(0, s.find('\n'));
  if (line.rfind("The following operation failed in the TorchScript interpreter", 0) == 0) {
    size_t end = s.find_last_not_of("\n ");
    size_t begin = s.rfind('\n', end);
    begin = begin == std::string::npos ? 0 : begin + 1;
    line = s.substr(begin, end + 1 - begin);
  }
  // PyTorch's zip reader appends a paragraph of speculation to its errors; keep the fact.
  auto boilerplate = line.find(" This is an internal miniz error.");
  if (boilerplate != std::string::npos) line.resize(boilerplate);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line;
}

}  // namespace tsfuse::tool
