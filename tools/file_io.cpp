#include "tools/file_io.h"

#include "tools/tool_error.h"
#include "tsfuse/tsfuse.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <vector>

namespace tsfuse::tool {
namespace {

std::string sysError() { return std::strerror(errno); }

std::string parentDir(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string baseName(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Temp files alive now, for the signal handler (which may only call async-signal-safe functions).
constexpr int kMaxLive = 4;
char gLive[kMaxLive][4096];
volatile sig_atomic_t gLiveUsed[kMaxLive];

int registerLive(const std::string& path) {
  for (int i = 0; i < kMaxLive; ++i) {
    if (gLiveUsed[i] || path.size() >= sizeof(gLive[i])) continue;
    std::memcpy(gLive[i], path.c_str(), path.size() + 1);
    gLiveUsed[i] = 1;
    return i;
  }
  return -1;
}

void unregisterLive(int slot) {
  if (slot >= 0) gLiveUsed[slot] = 0;
}

void onSignal(int sig) {
  for (int i = 0; i < kMaxLive; ++i)
    if (gLiveUsed[i]) ::unlink(gLive[i]);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

void installTempCleanupHandlers() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, onSignal);
}

void checkInputFile(const std::string& path) {
  try {
    tsfuse::checkModuleFile(path);  // the library's check (tsfuse::load uses it too)
  } catch (const std::exception& e) {
    throw ioError(firstLine(e.what()));
  }
}

bool sameFile(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void checkOutputPath(const std::string& path, const std::string& input, const std::string& what) {
  if (path.empty()) throw ioError(what + " path is empty");
  if (path.back() == '/') throw ioError(what + " " + quotedPath(path) + " names a directory, not a file");
  if (path == input || sameFile(path, input))
    throw ioError(what + " " + quotedPath(path) +
                  " is the input file; the input is never overwritten, choose another path");
  std::string dir = parentDir(path);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    throw ioError("folder " + quotedPath(dir) + " of the " + what + " does not exist (" + sysError() + ")");
  if (!S_ISDIR(st.st_mode)) throw ioError(quotedPath(dir) + " (folder of the " + what + ") is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw ioError("cannot write the " + what + " into folder " + quotedPath(dir) + ": " + sysError());
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw ioError(what + " " + quotedPath(path) + " is a directory");
}

AtomicFile::AtomicFile(const std::string& dest) : dest_(dest) {
  // ".NAME.tmp-XXXXXX", where it fits the folder's name limit; else a shortened NAME (a name
  // within 13 bytes of the limit is a valid OUT.pt too).
  std::string base = baseName(dest);
  const long limit = ::pathconf(parentDir(dest).c_str(), _PC_NAME_MAX);
  const size_t fits = limit > 0 ? static_cast<size_t>(limit) : 255;
  const std::string suffix = ".tmp-XXXXXX";
  if (1 + base.size() + suffix.size() > fits)
    base.resize(fits > 1 + suffix.size() + 16 ? fits - 1 - suffix.size() - 16 : 1);
  std::string tmpl = parentDir(dest) + "/." + base + suffix;
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  fd_ = ::mkstemp(buf.data());
  if (fd_ < 0) throw ioError("cannot create a temporary file next to " + quotedPath(dest) + ": " + sysError());
  temp_ = buf.data();
  slot_ = registerLive(temp_);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
  unregisterLive(slot_);
}

void AtomicFile::write(const std::string& data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ioError("cannot write " + quotedPath(temp_) + ": " + sysError());
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) throw ioError("cannot flush " + quotedPath(temp_) + ": " + sysError());
  mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd_, 0666 & ~mask) != 0)
    throw ioError("cannot set the mode of " + quotedPath(temp_) + ": " + sysError());
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) throw ioError("cannot close " + quotedPath(temp_) + ": " + sysError());
  if (::rename(temp_.c_str(), dest_.c_str()) != 0)
    throw ioError("cannot move " + quotedPath(temp_) + " to " + quotedPath(dest_) + ": " + sysError());
  committed_ = true;
  unregisterLive(slot_);
  slot_ = -1;
}

void writeFileAtomic(const std::string& dest, const std::string& data) {
  AtomicFile f(dest);
  f.write(data);
  f.commit();
}

}  // namespace tsfuse::tool
