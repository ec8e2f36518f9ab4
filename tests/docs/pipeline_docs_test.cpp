// The pipeline's pass list lives once, in pipelinePasses() (registration/pipeline.cpp). The docs
// show it as a table generated from there into docs/architecture.md; this test fails when that
// table is out of date or when another page writes the list out again. Regenerate with
//   TSFUSE_UPDATE_DOCS=1 build/bin/tsfuse_tests --gtest_filter=PipelineDocs.*
#include "registration/pipeline.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace docs_pipeline_docs_test {

namespace {

const std::string kBegin = "<!-- generated from pipelinePasses(): do not edit -->\n";
const std::string kEnd = "<!-- end of generated pass list -->\n";

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string renderPassTable() {
  std::ostringstream os;
  os << "| # | pass | rewrites |\n| ---: | --- | --- |\n";
  int i = 0;
  for (const auto& p : tsfuse::pipelinePasses())
    os << "| " << ++i << " | `" << p.name << "` | " << p.description << " |\n";
  return os.str();
}

// How many of the pipeline's pass names a line of prose names, as words.
int passNamesIn(const std::string& line) {
  int n = 0;
  for (const auto& p : tsfuse::pipelinePasses()) {
    if (p.name == "inline" || p.name == "cleanup") continue;  // ordinary words too
    n += line.find(p.name) != std::string::npos;
  }
  return n;
}

TEST(PipelineDocs, ArchitecturePassTableIsCurrent) {
  const auto path = std::filesystem::path(TSFUSE_SOURCE_DIR) / "docs" / "architecture.md";
  std::string page = read(path);
  const size_t b = page.find(kBegin), e = page.find(kEnd);
  ASSERT_NE(b, std::string::npos) << path << " has no generated pass list (" << kBegin << ")";
  ASSERT_NE(e, std::string::npos) << path << " has no end of the generated pass list";
  ASSERT_LT(b, e);
  const std::string have = page.substr(b + kBegin.size(), e - b - kBegin.size());
  const std::string want = renderPassTable();
  if (const char* u = std::getenv("TSFUSE_UPDATE_DOCS"); u && std::string(u) == "1") {
    std::ofstream(path) << page.replace(b + kBegin.size(), have.size(), want);
    GTEST_SKIP() << "wrote " << path;
  }
  EXPECT_EQ(have, want) << path << "'s pass list is out of date: regenerate it with TSFUSE_UPDATE_DOCS=1";
}

// A page that spells the order out (four pass names on one line) goes stale with the next pass.
TEST(PipelineDocs, NoOtherPageWritesThePassListOut) {
  const auto root = std::filesystem::path(TSFUSE_SOURCE_DIR);
  std::vector<std::filesystem::path> pages = {root / "README.md"};
  for (const auto& f : std::filesystem::directory_iterator(root / "docs"))
    if (f.path().extension() == ".md") pages.push_back(f.path());
  for (const auto& page : pages) {
    std::string text = read(page);
    if (const size_t b = text.find(kBegin); b != std::string::npos) text.erase(b, text.find(kEnd) - b);
    std::istringstream lines(text);
    std::string line;
    for (int n = 1; std::getline(lines, line); ++n)
      EXPECT_LT(passNamesIn(line), 4) << page.filename() << ":" << n
                                      << " writes the pass order out; point to pipelinePasses() instead: " << line;
  }
}

}  // namespace

}  // namespace docs_pipeline_docs_test
