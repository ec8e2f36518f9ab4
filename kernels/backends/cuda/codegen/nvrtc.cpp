// NVRTC through dlopen (no link-time dependency: a CPU-only install never needs the library) and
// the kernel cache (kernels/backends/cuda/codegen/nvrtc.h).
#include "kernels/backends/cuda/codegen/nvrtc.h"

#include "kernels/backends/cuda/codegen/emit.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

namespace tsfuse::cuda {

// The few entry points used, declared here (the wheel's libnvrtc ships without nvrtc.h).
struct Nvrtc::Api {
  using Prog = void*;
  void* lib = nullptr;
  int (*version)(int*, int*) = nullptr;
  int (*numArchs)(int*) = nullptr;
  int (*getArchs)(int*) = nullptr;
  int (*create)(Prog*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*compile)(Prog, int, const char* const*) = nullptr;
  int (*logSize)(Prog, size_t*) = nullptr;
  int (*log)(Prog, char*) = nullptr;
  int (*ptxSize)(Prog, size_t*) = nullptr;
  int (*ptx)(Prog, char*) = nullptr;
  int (*cubinSize)(Prog, size_t*) = nullptr;
  int (*cubin)(Prog, char*) = nullptr;
  int (*destroy)(Prog*) = nullptr;
  const char* (*errorString)(int) = nullptr;
};

namespace {

template <typename F>
bool sym(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

std::unique_ptr<Nvrtc> load(std::string& why) {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("TSFUSE_NVRTC")) candidates.push_back(p);
  candidates.push_back("libnvrtc.so.13");
  candidates.push_back("/usr/local/cuda/lib64/libnvrtc.so.13");
  void* lib = nullptr;
  for (const std::string& c : candidates)
    if ((lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
  if (!lib) {
    why = "NVRTC not found (libnvrtc.so.13; set TSFUSE_NVRTC to its path): " + std::string(dlerror());
    return nullptr;
  }
  auto api = std::make_shared<Nvrtc::Api>();
  api->lib = lib;
  const bool ok = sym(lib, "nvrtcVersion", api->version) && sym(lib, "nvrtcGetNumSupportedArchs", api->numArchs) &&
                  sym(lib, "nvrtcGetSupportedArchs", api->getArchs) && sym(lib, "nvrtcCreateProgram", api->create) &&
                  sym(lib, "nvrtcCompileProgram", api->compile) && sym(lib, "nvrtcGetProgramLogSize", api->logSize) &&
                  sym(lib, "nvrtcGetProgramLog", api->log) && sym(lib, "nvrtcGetPTXSize", api->ptxSize) &&
                  sym(lib, "nvrtcGetPTX", api->ptx) && sym(lib, "nvrtcGetCUBINSize", api->cubinSize) &&
                  sym(lib, "nvrtcGetCUBIN", api->cubin) && sym(lib, "nvrtcDestroyProgram", api->destroy) &&
                  sym(lib, "nvrtcGetErrorString", api->errorString);
  if (!ok) {
    why = "NVRTC lacks an entry point tsfuse needs (NVRTC 12 or newer is required)";
    return nullptr;
  }
  auto n = std::make_unique<Nvrtc>();
  api->version(&n->major, &n->minor);
  int count = 0;
  api->numArchs(&count);
  n->archs.resize(count);
  if (count) api->getArchs(n->archs.data());
  n->api = std::move(api);
  return n;
}

}  // namespace

const Nvrtc* Nvrtc::get(std::string* why) {
  static std::string reason;
  static const std::unique_ptr<Nvrtc> instance = load(reason);  // thread-safe, once per process
  if (!instance && why) *why = reason;
  return instance.get();
}

NvrtcOutput Nvrtc::compile(const std::string& text, const std::string& name,
                           const std::vector<std::string>& options) const {
  NvrtcOutput out;
  Api::Prog prog = nullptr;
  if (int rc = api->create(&prog, text.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr)) {
    out.log = std::string("nvrtcCreateProgram: ") + api->errorString(rc);
    return out;
  }
  std::vector<const char*> opts;
  for (const std::string& o : options) opts.push_back(o.c_str());
  const int rc = api->compile(prog, static_cast<int>(opts.size()), opts.data());
  size_t n = 0;
  api->logSize(prog, &n);
  out.log.assign(n, '\0');
  if (n) api->log(prog, out.log.data());
  while (!out.log.empty() && out.log.back() == '\0') out.log.pop_back();
  if (rc == 0) {
    out.ok = true;
    if (api->ptxSize(prog, &n) == 0 && n) {
      out.ptx.assign(n, '\0');
      api->ptx(prog, out.ptx.data());
      while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
    }
    if (api->cubinSize(prog, &n) == 0 && n) {
      out.cubin.resize(n);
      api->cubin(prog, out.cubin.data());
    }
  } else if (out.log.empty()) {
    out.log = std::string("nvrtcCompileProgram: ") + api->errorString(rc);
  }
  api->destroy(&prog);
  return out;
}

std::vector<std::string> kernelOptions(int arch, bool ptxOnly, bool verbose) {
  std::vector<std::string> o = {(ptxOnly ? "-arch=compute_" : "-arch=sm_") + std::to_string(arch), "-fmad=false",
                                "-prec-div=true", "-prec-sqrt=true", "-ftz=false"};
  if (verbose) o.push_back("--ptxas-options=-v");
  return o;
}

PtxasReport parsePtxas(const std::string& log, const std::string& kernelName) {
  PtxasReport r;
  const size_t at = log.find("Function properties for " + kernelName);
  if (at == std::string::npos) return r;
  // The function's lines run to the next "Compiling entry function" (or the end).
  const size_t end = log.find("Compiling entry function", at);
  const std::string s = log.substr(at, end == std::string::npos ? std::string::npos : end - at);
  std::smatch m;
  if (std::regex_search(s, m,
                        std::regex(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)"))) {
    r.stackBytes = std::stoi(m[1]);
    r.spillStores = std::stoi(m[2]);
    r.spillLoads = std::stoi(m[3]);
  }
  if (std::regex_search(s, m, std::regex(R"(Used (\d+) registers)"))) r.registers = std::stoi(m[1]);
  if (std::regex_search(s, m, std::regex(R"((\d+) bytes smem)"))) r.sharedBytes = std::stoi(m[1]);
  r.found = r.registers >= 0 && r.stackBytes >= 0;
  return r;
}

// --- the cache

KernelCache::KernelCache(std::string dir) : dir_(std::move(dir)) {}

KernelCache& KernelCache::global() {
  static KernelCache cache([] {
    const char* off = std::getenv("TSFUSE_KERNEL_CACHE");
    if (off && std::strcmp(off, "0") == 0) return std::string();
    if (const char* p = std::getenv("TSFUSE_KERNEL_CACHE_PATH")) return std::string(p);
    const char* home = std::getenv("HOME");
    return home ? std::string(home) + "/.cache/tsfuse/kernels" : std::string();
  }());
  return cache;
}

namespace {

constexpr const char* kMagic = "tsfuse-kernel-cache 1\n";

std::string hex(uint64_t h) {
  char b[20];
  std::snprintf(b, sizeof b, "%016" PRIx64, h);
  return b;
}

// File layout: magic, key line, "<textBytes> <codeBytes> <isPtx>\n", text, code.
std::shared_ptr<KernelCache::Entry> readEntry(const std::string& path, const std::string& key,
                                              const std::string& text) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return nullptr;
  std::string magic(std::strlen(kMagic), '\0'), keyLine;
  f.read(magic.data(), static_cast<std::streamsize>(magic.size()));
  if (magic != kMagic || !std::getline(f, keyLine) || keyLine != key) return nullptr;
  size_t textBytes = 0, codeBytes = 0;
  int isPtx = 0;
  std::string sizes;
  if (!std::getline(f, sizes) || std::sscanf(sizes.c_str(), "%zu %zu %d", &textBytes, &codeBytes, &isPtx) != 3)
    return nullptr;
  if (textBytes != text.size()) return nullptr;
  std::string stored(textBytes, '\0');
  auto e = std::make_shared<KernelCache::Entry>();
  e->code.resize(codeBytes);
  f.read(stored.data(), static_cast<std::streamsize>(textBytes));
  f.read(e->code.data(), static_cast<std::streamsize>(codeBytes));
  if (!f || stored != text) return nullptr;  // truncated, or another text with this hash
  e->isPtx = isPtx != 0;
  return e;
}

// mkdir -p. (No std::filesystem: libtorch.so exports its own copies of some of its symbols.)
void makeDirs(const std::string& dir) {
  for (size_t at = 1; at <= dir.size(); ++at)
    if (at == dir.size() || dir[at] == '/') ::mkdir(dir.substr(0, at).c_str(), 0755);
}

void writeEntry(const std::string& dir, const std::string& path, const std::string& key, const std::string& text,
                const KernelCache::Entry& e) {
  makeDirs(dir);
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return;  // an unwritable cache only costs compile time
    f << kMagic << key << "\n" << text.size() << " " << e.code.size() << " " << (e.isPtx ? 1 : 0) << "\n";
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    f.write(e.code.data(), static_cast<std::streamsize>(e.code.size()));
    if (!f) {
      ::unlink(tmp.c_str());
      return;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) ::unlink(tmp.c_str());
}

}  // namespace

std::shared_ptr<const KernelCache::Entry> KernelCache::get(const Nvrtc& nvrtc, const std::string& text,
                                                           const std::string& name, int arch, std::string* why) {
  // An arch NVRTC does not know: PTX for the newest one it does, which the driver compiles.
  const bool known = std::find(nvrtc.archs.begin(), nvrtc.archs.end(), arch) != nvrtc.archs.end();
  const int target = known || nvrtc.archs.empty() ? arch : nvrtc.archs.back();
  const std::vector<std::string> options = kernelOptions(target, !known, false);
  std::string key = "nvrtc " + std::to_string(nvrtc.major) + "." + std::to_string(nvrtc.minor) + " arch " +
                    std::to_string(arch) + " text " + hex(fnv1a(text)) + " name " + name + " options";
  for (const std::string& o : options) key += " " + o;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = mem_.find(key); it != mem_.end()) {
      ++memoryHits;
      return it->second;
    }
  }
  const std::string path = dir_.empty() ? "" : dir_ + "/" + hex(fnv1a(key)) + ".bin";
  std::shared_ptr<Entry> e = path.empty() ? nullptr : readEntry(path, key, text);
  if (e) {
    std::lock_guard<std::mutex> lock(mu_);
    ++diskHits;
  } else {
    NvrtcOutput o = nvrtc.compile(text, name, options);
    if (!o.ok || (known && o.cubin.empty()) || (!known && o.ptx.empty())) {
      if (why) *why = "NVRTC failed to compile " + name + ": " + o.log;
      return nullptr;
    }
    e = std::make_shared<Entry>();
    e->isPtx = !known;
    if (known) {
      e->code = std::move(o.cubin);
    } else {
      e->code.assign(o.ptx.begin(), o.ptx.end());
      e->code.push_back('\0');  // the loader takes PTX as a C string
    }
    e->log = std::move(o.log);
    if (!path.empty()) writeEntry(dir_, path, key, text, *e);
    std::lock_guard<std::mutex> lock(mu_);
    ++compiles;
  }
  std::lock_guard<std::mutex> lock(mu_);
  return mem_.emplace(key, std::move(e)).first->second;
}

}  // namespace tsfuse::cuda
