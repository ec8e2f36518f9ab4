// Hostile inputs to the library's load/optimize API (include/tsfuse/tsfuse.h): every bad file
// gives a c10::Error with ONE line naming the path, and the file is left unchanged. Fixtures are
// generated here (a scripted module saved, then damaged), not committed.
#include "test_util.h"

#include "tsfuse/tsfuse.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/jit.h>
#include <torch/library.h>
#include <torch/script.h>
#include <torch/serialize.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>

namespace reliability_api_load_test {

namespace {

using namespace tsfuse_test;

// NB: no std::filesystem: libtorch.so exports its own copies of some of its symbols, and calls
// resolved there crash (observed: remove_all). POSIX calls and a small path type instead.
struct Path {
  std::string s;
  Path operator/(const std::string& n) const { return {s + "/" + n}; }
  const std::string& string() const { return s; }
  const char* c_str() const { return s.c_str(); }
};
bool isRegularFile(const Path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string readAll(const Path& p) {
  std::ifstream in(p.s, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void writeAll(const Path& p, const std::string& data) {
  std::ofstream out(p.s, std::ios::binary);
  out << data;
}

constexpr const char* kSource = R"(
def forward(self, x, y):
    d = (x.unsqueeze(1) - y.unsqueeze(0)).abs()
    return d.lt(1.0).sum(0)
)";

struct ApiLoad : ::testing::Test {
  Path dir;
  std::string model;  // bytes of a valid saved module
  void SetUp() override {
    char tmpl[] = "/tmp/tsfuse-api-load-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir = Path{tmpl};
    torch::jit::Module m("M");
    m.define(kSource);
    std::ostringstream buf;
    m.save(buf);
    model = buf.str();
  }
  void TearDown() override { ASSERT_EQ(std::system(("rm -rf '" + dir.s + "'").c_str()), 0); }

  // tsfuse::load(path) raises one line containing every fragment; the file is unchanged.
  void expectLoadFails(const Path& path, std::initializer_list<const char*> fragments) {
    SCOPED_TRACE(path.string());
    std::string before = isRegularFile(path) ? readAll(path) : "";
    std::string err;
    try {
      tsfuse::load(path.string());
      ADD_FAILURE() << "loaded";
    } catch (const c10::Error& e) {
      err = e.what_without_backtrace();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a c10::Error: " << e.what();
    }
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    EXPECT_NE(err.find(path.string()), std::string::npos) << err;
    for (const char* f : fragments) EXPECT_NE(err.find(f), std::string::npos) << err;
    if (isRegularFile(path)) EXPECT_EQ(readAll(path), before);
  }

  // The saved model with one archive entry (code/__torch__.py) passed through `edit`.
  std::string rewritten(const std::function<void(std::string& name, std::string& data)>& edit) {
    std::istringstream in(model);
    caffe2::serialize::PyTorchStreamReader reader(&in);
    std::ostringstream out;
    {
      caffe2::serialize::PyTorchStreamWriter writer([&](const void* p, size_t n) {
        out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
        return n;
      });
      for (const std::string& rec : reader.getAllRecords()) {
        auto [ptr, size] = reader.getRecord(rec);
        std::string name = rec, data(static_cast<const char*>(ptr.get()), size);
        edit(name, data);
        if (!name.empty()) writer.writeRecord(name, data.data(), data.size());
      }
      writer.writeEndOfFile();
    }
    return out.str();
  }
};

TEST_F(ApiLoad, ValidModuleLoadsAndIsOptimized) {
  writeAll(dir / "ok.pt", model);
  torch::jit::Module m = tsfuse::load((dir / "ok.pt").string());
  EXPECT_NE(m.get_method("forward").graph()->toString().find("tsfuse::reduce"), std::string::npos);
}

TEST_F(ApiLoad, MissingDirectoryEmpty) {
  expectLoadFails(dir / "nope.pt", {"No such file"});
  expectLoadFails(dir / "missing" / "nope.pt", {"No such file"});
  ::mkdir((dir / "folder.pt").c_str(), 0755);
  expectLoadFails(dir / "folder.pt", {"is a directory"});
  writeAll(dir / "empty.pt", "");
  expectLoadFails(dir / "empty.pt", {"is empty"});
  expectLoadFails(Path{"/dev/null"}, {"not a regular file"});
}

TEST_F(ApiLoad, UnreadableFile) {
  writeAll(dir / "secret.pt", model);
  ::chmod((dir / "secret.pt").c_str(), 0);
  if (::access((dir / "secret.pt").c_str(), R_OK) == 0) GTEST_SKIP() << "running as root: permissions do not apply";
  expectLoadFails(dir / "secret.pt", {"cannot read"});
}

TEST_F(ApiLoad, RandomBytesAndTruncations) {
  std::mt19937_64 rng(8);
  int tried = 0;
  for (size_t n : {1, 2, 22, 100, 4096, 100000}) {
    std::string bytes(n, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    writeAll(dir / "random.pt", bytes);
    expectLoadFails(dir / "random.pt", {"as a TorchScript module"});
    ++tried;
  }
  for (size_t n :
       {size_t(1), size_t(4), size_t(30), model.size() / 4, model.size() / 2, model.size() - 22, model.size() - 1}) {
    writeAll(dir / "truncated.pt", model.substr(0, n));
    expectLoadFails(dir / "truncated.pt", {"as a TorchScript module"});
    ++tried;
  }
  EXPECT_EQ(tried, 13);
}

TEST_F(ApiLoad, ZipsThatAreNotTorchScript) {
  // A zip archive with one unrelated entry.
  std::ostringstream out;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* p, size_t n) {
      out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
      return n;
    });
    std::string text = "not a model";
    writer.writeRecord("hello.txt", text.data(), text.size());
    writer.writeEndOfFile();
  }
  writeAll(dir / "plain.pt", out.str());
  expectLoadFails(dir / "plain.pt", {"as a TorchScript module"});
  // The module without its code, or with its code garbled.
  writeAll(dir / "nocode.pt", rewritten([](std::string& name, std::string&) {
             if (name.find("code/") == 0) name.clear();
           }));
  expectLoadFails(dir / "nocode.pt", {"as a TorchScript module"});
  writeAll(dir / "garbled.pt", rewritten([](std::string& name, std::string& data) {
             if (name == "code/__torch__.py") data = "def forward(self, x, y):\n    return (((\n";
           }));
  expectLoadFails(dir / "garbled.pt", {"as a TorchScript module"});
}

TEST_F(ApiLoad, TorchScriptWithAnUnknownOp) {
  // The module's code calls an op this process does not have (as a model saved by a process
  // with another extension loaded would).
  std::string bytes = rewritten([](std::string& name, std::string& data) {
    if (name != "code/__torch__.py") return;
    auto at = data.find("torch.abs(");
    ASSERT_NE(at, std::string::npos) << data;
    data.replace(at, std::string("torch.abs(").size(), "ops.tsfuse_nosuch.frobnicate(");
  });
  writeAll(dir / "unknown_op.pt", bytes);
  expectLoadFails(dir / "unknown_op.pt", {"as a TorchScript module", "tsfuse_nosuch::frobnicate"});
}

TEST_F(ApiLoad, OptimizeLeavesAFailingModelRunnable) {
  // optimize() on a module whose forward raises for the given inputs: eager's error at run time.
  torch::jit::Module m("M");
  m.define(kSource);
  tsfuse::optimize(m);
  std::string err = errorOf([&] { m.forward({at::ones({3}), at::ones({3, 2, 2})}); });
  EXPECT_FALSE(err.empty());
}

// torchvision's box_iou, its area a second scripted function it calls.
constexpr const char* kBoxIou = R"(
def area(b):
    return (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])

def box_iou(boxes1, boxes2):
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area(boxes1)[:, None] + area(boxes2) - inter
    return inter / union
)";

at::Tensor randomBoxes(int64_t n) {
  at::Tensor b = at::rand({n, 4}) * 100;
  b.slice(1, 2) += b.slice(1, 0, 2);
  return b;
}

TEST(ApiOptimizeFunction, ScriptedFunctionIsRewrittenInPlaceAndExact) {
  std::shared_ptr<torch::jit::CompilationUnit> cu = torch::jit::compile(kBoxIou);
  torch::jit::Function& fn = cu->get_function("box_iou");
  tsfuse::Report report = tsfuse::optimize(fn);
  EXPECT_GE(report.rewrites(), 1);
  EXPECT_EQ(report.graphs, std::vector<std::string>{"box_iou"});
  std::string graph = torch::jit::toGraphFunction(fn).graph()->toString();
  EXPECT_NE(graph.find("tsfuse::"), std::string::npos) << graph;
  EXPECT_EQ(graph.find("prim::CallFunction"), std::string::npos) << graph;  // area inlined
  // The callee itself is not rewritten: only the function passed in is.
  std::string callee = torch::jit::toGraphFunction(cu->get_function("area")).graph()->toString();
  EXPECT_EQ(callee.find("tsfuse::"), std::string::npos) << callee;

  torch::manual_seed(0);
  at::Tensor a = randomBoxes(300), b = randomBoxes(17);
  auto area = [](const at::Tensor& t) { return (t.select(1, 2) - t.select(1, 0)) * (t.select(1, 3) - t.select(1, 1)); };
  at::Tensor lt = at::max(a.unsqueeze(1).slice(2, 0, 2), b.slice(1, 0, 2));
  at::Tensor rb = at::min(a.unsqueeze(1).slice(2, 2), b.slice(1, 2));
  at::Tensor wh = (rb - lt).clamp_min(0);
  at::Tensor inter = wh.select(2, 0) * wh.select(2, 1);
  at::Tensor expected = inter / (area(a).unsqueeze(1) + area(b) - inter);
  for (int call = 0; call < 3; ++call) EXPECT_TRUE(at::equal(fn({a, b}).toTensor(), expected)) << call;
}

}  // namespace

}  // namespace reliability_api_load_test
