#include "tools/libraries.h"

#include "tools/tool_error.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <sstream>

#ifndef TSFUSE_LIBPYTHON
#define TSFUSE_LIBPYTHON ""
#endif

namespace tsfuse::tool {
namespace {

// The Python runtime of the interpreter whose torch this build links (found at configure time):
// its symbols are the ones libtorch_python.so was built against.
constexpr const char* kLibPython = TSFUSE_LIBPYTHON;

std::string dlopenError(const std::string& path) {
  if (::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) return "";
  const char* e = ::dlerror();
  return e ? e : "unknown dlopen error";
}

// Python extension modules leave the interpreter's symbols to the process that imports them.
bool needsPython(const std::string& dlError) {
  return dlError.find("undefined symbol: Py") != std::string::npos ||
         dlError.find("undefined symbol: _Py") != std::string::npos;
}

// torch's library folder (that of the libc10.so this process runs), or "".
std::string torchLibDir() {
  void* h = ::dlopen("libc10.so", RTLD_NOW | RTLD_NOLOAD);
  link_map* lm = nullptr;
  if (!h || ::dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name) return "";
  std::string path = lm->l_name;
  return path.substr(0, path.find_last_of('/') + 1);
}

// The torch library a dlopen error says is missing ("libtorch_python.so: cannot open shared object
// file: ..."), if torch's folder has it: a wheel's RPATH points at its build machine, and the
// process only has the torch libraries it links by itself.
std::string missingTorchLibrary(const std::string& dlError) {
  size_t end = dlError.find(": cannot open shared object file");
  if (end == std::string::npos) return "";
  std::string name = dlError.substr(0, end), dir = torchLibDir();
  struct stat st {};
  if (name.find('/') != std::string::npos || dir.empty() || ::stat((dir + name).c_str(), &st) != 0) return "";
  return dir + name;
}

// dlopen()s `target`, first loading what it lacks: torch libraries it links but this process did not
// load, and the Python runtime. Returns "" or the error that remains.
std::string loadWithDependencies(const std::string& target, int depth = 0) {
  for (bool triedPython = false;;) {
    std::string error = dlopenError(target);
    if (error.empty() || depth > 4) return error;
    if (needsPython(error) && !triedPython && *kLibPython) {
      triedPython = true;
      if (dlopenError(kLibPython).empty()) continue;
    } else if (std::string dep = missingTorchLibrary(error); !dep.empty()) {
      if (loadWithDependencies(dep, depth + 1).empty()) continue;
    }
    return error;
  }
}

void loadLibrary(const std::string& path) {
  // A name with a '/' (or an existing file) is a path and must be a regular file; a bare name such
  // as libpython3.11.so.1.0 is looked up on the dynamic loader's search path.
  struct stat st {};
  bool exists = ::stat(path.c_str(), &st) == 0, bare = path.find('/') == std::string::npos;
  if (!bare && !exists) throw ioError("--library " + quotedPath(path) + ": no such file");
  if (exists && !S_ISREG(st.st_mode)) throw ioError("--library " + quotedPath(path) + ": not a regular file");
  // dlopen never looks in the current folder for a bare name.
  std::string error = loadWithDependencies(bare && exists ? "./" + path : path);
  if (error.empty()) return;
  std::string msg = "cannot load library " + quotedPath(path) + ": " + firstLine(error);
  if (needsPython(error))
    msg +=
        " (a Python extension module: it needs the Python runtime torch was built for; give that first, "
        "e.g. --library /path/to/libpython3.X.so.1.0)";
  throw ioError(msg);
}

}  // namespace

std::vector<std::string> libraryPaths(const std::vector<std::string>& flags) {
  std::vector<std::string> paths;
  if (const char* env = std::getenv(kLibrariesEnv)) {
    std::stringstream list(env);
    std::string p;
    while (std::getline(list, p, ':'))
      if (!p.empty()) paths.push_back(p);
  }
  paths.insert(paths.end(), flags.begin(), flags.end());
  return paths;
}

void loadLibraries(const std::vector<std::string>& paths) {
  for (const std::string& p : paths) loadLibrary(p);
}

std::string unknownOpHint(const std::string& loadError) {
  const std::string marker = "Unknown builtin op: ";
  size_t at = loadError.find(marker);
  if (at == std::string::npos) return "";
  size_t begin = at + marker.size(), end = begin;
  while (end < loadError.size() && (std::isalnum(static_cast<unsigned char>(loadError[end])) || loadError[end] == '_'))
    ++end;
  std::string ns = loadError.substr(begin, end - begin);
  if (ns.empty() || loadError.compare(end, 2, "::") != 0 || ns == "aten" || ns == "prim") return "";
  std::string hint = "The " + quotedPath(ns) + " ops come from an extension library: load it with --library PATH (or " +
                     kLibrariesEnv + ")";
  if (ns == "torchvision") hint += "; pip installs torchvision's at <site-packages>/torchvision/_C.so";
  return hint;
}

}  // namespace tsfuse::tool
