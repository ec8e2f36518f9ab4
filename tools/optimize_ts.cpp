// optimize-ts: load a TorchScript module, run the tsfuse pipeline on every method, save it.
//
//   optimize-ts [options] IN.pt OUT.pt
//
// The output is written atomically (a temp file in OUT's folder, renamed over OUT once complete)
// and IN is only ever read. With --check, the optimized module (as saved, loaded back) and a second
// load of IN run forward on the same inputs; OUT is written only when their outputs agree.
// Exit codes: see kExit* in tools/tool_error.h and docs/optimize-ts.md.
#include "tools/check.h"
#include "tools/file_io.h"
#include "tools/graph_view.h"
#include "tools/html_report.h"
#include "tools/libraries.h"
#include "tools/line_diff.h"
#include "tools/report.h"
#include "tools/tool_error.h"
#include "tsfuse/tsfuse.h"

#include <CLI/CLI.hpp>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/import.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

namespace tsfuse::tool {
namespace {

constexpr const char* kFooter =
    "Examples:\n"
    "  optimize-ts model.pt model.opt.pt                  optimize, print a summary\n"
    "  optimize-ts --check model.pt model.opt.pt          ... and compare outputs (example_inputs())\n"
    "  optimize-ts --check=5 --input-shape x:64,4 --input-shape y:16,4@float64 --atol 1e-5 m.pt m.opt.pt\n"
    "  optimize-ts --explain model.pt                     what would be fused, and why not (writes nothing)\n"
    "  optimize-ts --diff model.pt model.opt.pt           unified diff of each method's graph\n"
    "  optimize-ts --dry-run --html view.html model.pt    side-by-side HTML viewer, no model written\n"
    "  optimize-ts --disable fuse_pairwise m.pt out.pt    skip a pass (see --list-passes)\n"
    "  optimize-ts --library .../site-packages/torchvision/_C.so det.pt det.opt.pt   a model calling torchvision ops\n"
    "\n"
    "Exit codes:\n"
    "  0  success (and --check passed)\n"
    "  1  --check: the optimized module's outputs differ from the original's (OUT is not written)\n"
    "  2  usage error (unknown flag or pass, bad --input-shape or --device, missing input shapes, ...)\n"
    "  3  input/output error (missing, unreadable, empty or non-TorchScript input; a --library that\n"
    "     cannot be loaded; output folder missing or not writable; output is the input)\n"
    "  4  internal error\n"
    "See docs/optimize-ts.md.";

struct Options {
  std::string input, output, report, html, logLevel, device = "cpu", color = "auto";
  std::vector<std::string> disabled, enabled, inputShapes, libraries;
  bool quiet = false, verbose = false, listPasses = false, dryRun = false, explain = false, diff = false;
  int checkRuns = 0;  // 0: no --check
  double rtol = 1e-5, atol = 1e-6;
  uint64_t seed = 0;
};

// Parses argv into `o`; returns an exit code when the tool should stop now (--help, --version).
std::optional<int> parseArgs(int argc, char** argv, Options& o) {
  CLI::App app{
      "Fuses broadcast elementwise and broadcast-then-reduce subgraphs of a TorchScript module into "
      "tsfuse::pairwise / tsfuse::reduce, and saves the result.\n"
      "The optimized model needs libtsfuse.so loaded to run (Python: torch.ops.load_library).\n"
      "  optimize-ts [OPTIONS] IN.pt OUT.pt\n"
      "  optimize-ts --explain|--dry-run [OPTIONS] IN.pt [OUT.pt]",
      "optimize-ts"};
  app.footer(kFooter);
  app.set_version_flag("--version", "optimize-ts (tsfuse) " + tsfuseVersion() + ", torch " + torchVersion());
  app.add_option("IN", o.input, "TorchScript module to optimize (IN.pt; only read)");
  app.add_option("OUT", o.output, "where to save the optimized module (OUT.pt)");
  app.add_flag("-q,--quiet", o.quiet, "print no summary (errors still go to stderr)");
  auto* verbose = app.add_flag("-v,--verbose", o.verbose,
                               "the summary lists every event of every pass (also canonicalize's notes on in-place "
                               "ops), and tsfuse log level debug");
  app.add_option("--log-level", o.logLevel, "tsfuse log level: trace|debug|info|warn|error|off (default warn)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->type_name("LEVEL")
      ->excludes(verbose);
  app.add_option("--library", o.libraries,
                 "load this extension op library (e.g. torchvision/_C.so) before the model (repeatable; "
                 "also TSFUSE_LIBRARIES=PATH:PATH)")
      ->allow_extra_args(false)
      ->type_name("PATH");
  app.add_option("--report", o.report, "also write the summary as JSON to this file")->type_name("FILE");
  app.add_option("--html", o.html, "also write a self-contained HTML viewer of the graphs before/after")
      ->type_name("FILE");
  app.add_flag("--diff", o.diff, "print a unified diff of each changed method's graph (before/after fusion)");
  app.add_option("--color", o.color, "color --diff: auto (on a terminal, unless NO_COLOR is set)|always|never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->type_name("WHEN");
  app.add_flag("--explain", o.explain,
               "print, per method, what would be fused (nodes, source lines, expression) and why each rejected "
               "candidate was not; implies --dry-run");
  app.add_flag("--dry-run", o.dryRun, "run everything (--check too) but write no OUT.pt; OUT.pt is optional");
  auto* disable = app.add_option("--disable", o.disabled, "skip this pass (repeatable; see --list-passes)")
                      ->allow_extra_args(false)
                      ->type_name("PASS");
  app.add_option("--enable", o.enabled, "run only this pass (repeatable; the others are skipped)")
      ->allow_extra_args(false)
      ->type_name("PASS")
      ->excludes(disable);
  app.add_flag("--list-passes", o.listPasses, "list the pipeline's passes and exit");
  auto* check = app.add_flag("--check", o.checkRuns,
                             "run forward of the original and the optimized module on the same inputs and fail "
                             "(exit 1) if the outputs differ; --check=N compares N input sets (the first from "
                             "example_inputs() or --input-shape, the others random of the same shapes)")
                    ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                    ->type_name("N");
  app.add_option("--input-shape", o.inputShapes,
                 "NAME:D1,D2,...[@DTYPE]: random input for forward's argument NAME (repeatable; dtype "
                 "float32 by default). Without it, --check calls the module's example_inputs() method")
      ->allow_extra_args(false)
      ->type_name("SPEC")
      ->needs(check);
  // A tolerance is a finite number >= 0 (CLI::NonNegativeNumber lets nan through, and names its
  // range with a 300-digit bound).
  const CLI::Validator tolerance(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !std::isfinite(v) || v < 0)
          return "expected a finite number >= 0, got '" + text + "'";
        return "";
      },
      "TOLERANCE");
  app.add_option("--rtol", o.rtol, "--check relative tolerance (default 1e-5)")->check(tolerance)->needs(check);
  app.add_option("--atol", o.atol, "--check absolute tolerance (default 1e-6)")->check(tolerance)->needs(check);
  app.add_option("--seed", o.seed, "--check random seed for --input-shape inputs (default 0)")->needs(check);
  app.add_option("--device", o.device, "--check runs both modules on this device: cpu (default), cuda, cuda:N")
      ->type_name("DEV")
      ->needs(check);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    throw usageError(firstLine(e.what()) + " (see --help)");
  }
  if (check->count() > 0 && o.checkRuns < 1) throw usageError("--check=N: N must be at least 1 (see --help)");
  if (check->count() == 0) o.checkRuns = 0;
  o.dryRun |= o.explain;
  return std::nullopt;
}

torch::jit::Module loadModule(const std::string& path) {
  try {
    return tsfuse::loadModuleFile(path);  // its message names the path and says what failed
  } catch (const c10::Error& e) {
    std::string msg = firstLine(e.what_without_backtrace());
    if (std::string hint = unknownOpHint(msg); !hint.empty()) msg += (msg.back() == '.' ? " " : ". ") + hint;
    throw ioError(msg);
  }
}

// The model's extra files (torch.jit.save's _extra_files: the archive's extra/ records: a
// deployment's metadata, labels, versions), for the optimized model to keep.
torch::jit::ExtraFilesMap extraFilesOf(const std::string& path) {
  torch::jit::ExtraFilesMap files;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    const std::string prefix = "extra/";
    for (const std::string& name : reader.getAllRecords()) {
      if (name.rfind(prefix, 0) != 0) continue;
      auto [data, size] = reader.getRecord(name);
      files[name.substr(prefix.size())] = std::string(static_cast<const char*>(data.get()), size);
    }
  } catch (const c10::Error& e) {
    throw ioError("cannot read the extra files of '" + path + "': " + firstLine(e.what_without_backtrace()));
  }
  return files;
}

// The pipeline options for --enable/--disable (usage errors name the unknown pass).
PipelineOptions pipelineOptions(const Options& o) {
  PipelineOptions pipeline;
  pipeline.disabled.insert(o.disabled.begin(), o.disabled.end());
  const std::string flag = o.enabled.empty() ? "--disable" : "--enable";
  for (const auto& name : o.enabled) {
    PipelineOptions probe;
    probe.disabled = {name};
    try {
      probe.validate();
    } catch (const std::invalid_argument& e) {
      throw usageError("--enable: " + std::string(e.what()) + " (see --list-passes)");
    }
  }
  if (!o.enabled.empty())
    for (const PassInfo& p : pipelinePasses())
      if (std::find(o.enabled.begin(), o.enabled.end(), p.name) == o.enabled.end()) pipeline.disabled.insert(p.name);
  try {
    pipeline.validate();
  } catch (const std::invalid_argument& e) {
    throw usageError(flag + ": " + e.what() + " (see --list-passes)");
  }
  return pipeline;
}

// Validates OUT, --report and --html up front: each a writable path, none the input, no two the same.
void checkOutputs(const Options& o) {
  std::vector<std::pair<std::string, std::string>> outs;  // (path, what)
  if (!o.output.empty()) outs.push_back({o.output, "output"});
  if (!o.report.empty()) outs.push_back({o.report, "--report"});
  if (!o.html.empty()) outs.push_back({o.html, "--html"});
  for (size_t i = 0; i < outs.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      if (outs[i].first == outs[j].first || sameFile(outs[i].first, outs[j].first))
        throw usageError(outs[i].second + " '" + outs[i].first + "' is also the " + outs[j].second + " file");
    checkOutputPath(outs[i].first, o.input, outs[i].second == "output" ? "output" : outs[i].second.substr(2));
  }
}

bool useColor(const std::string& when) {
  if (when != "auto") return when == "always";
  const char* term = std::getenv("TERM");
  return isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR") && !(term && std::string(term) == "dumb");
}

int run(int argc, char** argv) {
  // The tool rewrites explicitly. The executor pre-pass that loading libtsfuse registers would
  // also fuse the ORIGINAL module when --check runs it: switch it off for this process.
  if (auto reg = loadTimeRegistration()) clearExecutorPass(*reg);
  setEnabled(false);

  Options o;
  if (auto code = parseArgs(argc, argv, o)) return *code;

  if (o.verbose) log::setLevel(log::Level::debug);
  if (!o.logLevel.empty()) {
    try {
      log::setLevel(log::parseLevel(o.logLevel));
    } catch (const std::invalid_argument& e) {
      throw usageError(std::string("--log-level: ") + e.what());
    }
  }

  if (o.listPasses) {
    for (const PassInfo& p : pipelinePasses()) std::cout << p.name << "\t" << p.description << "\n";
    return kExitOk;
  }
  if (o.input.empty()) throw usageError("expected IN.pt and OUT.pt (see --help)");
  if (o.output.empty() && !o.dryRun)
    throw usageError("expected IN.pt and OUT.pt (OUT.pt may be left out with --dry-run/--explain; see --help)");

  PipelineOptions pipeline = pipelineOptions(o);
  GraphRecorder graphs;
  pipeline.observe = graphs.observer();
  std::vector<InputSpec> specs;
  for (const auto& s : o.inputShapes) specs.push_back(parseInputSpec(s));
  std::optional<c10::Device> device;
  if (o.checkRuns) device = parseCheckDevice(o.device);

  checkInputFile(o.input);
  checkOutputs(o);
  loadLibraries(libraryPaths(o.libraries));  // before any model: their ops must be known to load it

  torch::jit::Module module = loadModule(o.input);
  std::optional<torch::jit::Module> original;
  std::optional<CheckInputs> inputs;
  if (o.checkRuns) {
    original = loadModule(o.input);
    inputs = makeCheckInputs(*original, specs, o.seed);
  }

  Report report = optimizeModule(module, pipeline);

  std::ostringstream saved;
  module.save(saved, extraFilesOf(o.input));
  std::optional<CheckResult> check;
  if (o.checkRuns) {
    // Check what is about to be written: the optimized module loaded back from its bytes.
    torch::jit::Module optimized = [&] {
      std::istringstream in(saved.str());
      try {
        return torch::jit::load(in);
      } catch (const c10::Error& e) {
        throw ToolError(kExitInternal,
                        "the optimized module does not load back: " + firstLine(e.what_without_backtrace()));
      }
    }();
    check = runChecks(*original, optimized, *inputs, o.checkRuns, o.seed, *device, o.rtol, o.atol);
  }

  RunInfo info{o.input, o.output, !o.dryRun && (!check || check->passed)};
  std::vector<std::unique_ptr<AtomicFile>> files;
  auto stage = [&](const std::string& path, const std::string& data) {
    files.push_back(std::make_unique<AtomicFile>(path));
    files.back()->write(data);
  };
  if (info.outputWritten) stage(o.output, saved.str());
  if (!o.report.empty()) stage(o.report, reportJson(report, info, check ? &*check : nullptr).dump(2) + "\n");
  if (!o.html.empty()) stage(o.html, renderHtml(viewerData(report, graphs, info)));
  // Tests reach the internal-error path (exit 4, temp files removed) through this variable.
  if (const char* fault = std::getenv("TSFUSE_OPTIMIZE_TS_FAULT"); fault && std::string(fault) == "internal")
    throw std::logic_error("fault injected by TSFUSE_OPTIMIZE_TS_FAULT");
  for (auto& f : files) f->commit();

  if (o.explain)
    printExplain(std::cout, report, graphs, info);
  else if (!o.quiet)
    printSummary(std::cout, report, info, o.verbose);
  if (check && (!o.quiet || o.explain)) printCheck(std::cout, *check, /*summary=*/true);
  if (o.diff) {
    bool color = useColor(o.color);
    bool any = false;
    for (const MethodGraphs& m : graphs.methods()) {
      if (!m.changed()) continue;
      any = true;
      printUnifiedDiff(std::cout, o.input + ":" + m.name + " (before fusion)",
                       (o.output.empty() ? std::string("optimized") : o.output) + ":" + m.name,
                       splitLines(m.before.text), splitLines(m.after.text), 3, color);
    }
    if (!any && !o.quiet) std::cout << "optimize-ts: --diff: no graph changed\n";
  }
  if (check && !check->passed) {
    printCheck(std::cerr, *check, /*summary=*/false);
    return kExitMismatch;
  }
  return kExitOk;
}

}  // namespace
}  // namespace tsfuse::tool

int main(int argc, char** argv) {
  using namespace tsfuse::tool;
  auto fail = [](int code, const std::string& msg) {
    std::string line = msg;
    for (char& c : line)
      if (c == '\n' || c == '\r') c = ' ';
    std::cerr << "optimize-ts: error: " << line << std::endl;
    return code;
  };
  try {
    installTempCleanupHandlers();
    return run(argc, argv);
  } catch (const ToolError& e) {
    return fail(e.code, e.what());
  } catch (const c10::Error& e) {
    return fail(kExitInternal, "internal error: " + firstLine(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return fail(kExitInternal, std::string("internal error: ") + firstLine(e.what()));
  } catch (...) {
    return fail(kExitInternal, "internal error: unknown exception");
  }
}
