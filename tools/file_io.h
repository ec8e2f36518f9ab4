// File-system side of optimize-ts: validating the paths up front, and replacing a file
// atomically (temp file from mkstemp in the destination's folder, then rename()).
#pragma once

#include <functional>
#include <string>

namespace tsfuse::tool {

// Throws ToolError(kExitIO) unless `path` is an existing, readable, non-empty regular file.
void checkInputFile(const std::string& path);

// Throws ToolError(kExitIO) unless a file can be created at `path`: its folder exists, is a
// folder and is writable, `path` is not a folder, and `path` is not the same file as `input`
// (same name, or the same inode through a link). `what` names the file in messages.
void checkOutputPath(const std::string& path, const std::string& input, const std::string& what);

// True when both paths name the same existing file (same device and inode).
bool sameFile(const std::string& a, const std::string& b);

// A temp file next to `dest`, removed on destruction unless commit() renamed it over `dest`.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& dest);  // throws ToolError(kExitIO)
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::string& tempPath() const { return temp_; }
  // Writes `data` to the temp file (through its descriptor).
  void write(const std::string& data);
  // fsyncs, gives the file the usual 0666 & ~umask mode, and renames it over the destination.
  void commit();

 private:
  std::string dest_, temp_;
  int fd_ = -1;
  int slot_ = -1;  // in the signal handler's list
  bool committed_ = false;
};

// On SIGINT/SIGTERM/SIGHUP, removes the live AtomicFile temp files, then dies of the signal.
void installTempCleanupHandlers();

// Writes `data` to `dest` atomically.
void writeFileAtomic(const std::string& dest, const std::string& data);

}  // namespace tsfuse::tool
