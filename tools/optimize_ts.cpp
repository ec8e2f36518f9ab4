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
#include "tools/report.h"
#include "tools/tool_error.h"
#include "tsfuse/tsfuse.h"

#include <CLI/CLI.hpp>
#include <torch/csrc/jit/serialization/import.h>

#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

namespace tsfuse::tool {
namespace {

constexpr const char* kExitCodesHelp =
    "Exit codes:\n"
    "  0  success (and --check passed)\n"
    "  1  --check: the optimized module's outputs differ from the original's (OUT is not written)\n"
    "  2  usage error (unknown flag or pass, bad --input-shape, missing input shapes, ...)\n"
    "  3  input/output error (missing, unreadable, empty or non-TorchScript input; output folder\n"
    "     missing or not writable; output is the input)\n"
    "  4  internal error\n"
    "See docs/optimize-ts.md.";

struct Options {
  std::string input, output, report, logLevel;
  std::vector<std::string> disabled, inputShapes;
  bool quiet = false, verbose = false, listPasses = false, check = false;
  double rtol = 1e-5, atol = 1e-6;
  uint64_t seed = 0;
};

// Parses argv into `o`; returns an exit code when the tool should stop now (--help, --version).
std::optional<int> parseArgs(int argc, char** argv, Options& o) {
  CLI::App app{"Fuses broadcast elementwise and broadcast-then-reduce subgraphs of a TorchScript module into "
               "tsfuse::pairwise / tsfuse::reduce, and saves the result.\n"
               "The optimized model needs libtsfuse.so loaded to run (Python: torch.ops.load_library).",
               "optimize-ts"};
  app.footer(kExitCodesHelp);
  app.set_version_flag("--version", "optimize-ts (tsfuse) " + tsfuseVersion() + ", torch " + torchVersion());
  app.add_option("IN", o.input, "TorchScript module to optimize (IN.pt; only read)");
  app.add_option("OUT", o.output, "where to save the optimized module (OUT.pt)");
  app.add_flag("-q,--quiet", o.quiet, "print no summary (errors still go to stderr)");
  auto* verbose = app.add_flag("-v,--verbose", o.verbose, "tsfuse log level debug (every rewrite and rejection)");
  app.add_option("--log-level", o.logLevel, "tsfuse log level: trace|debug|info|warn|error|off (default warn)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->type_name("LEVEL")
      ->excludes(verbose);
  app.add_option("--report", o.report, "also write the summary as JSON to this file")->type_name("FILE");
  app.add_option("--disable", o.disabled, "skip this pass (repeatable; see --list-passes)")
      ->allow_extra_args(false)
      ->type_name("PASS");
  app.add_flag("--list-passes", o.listPasses, "list the pipeline's passes and exit");
  auto* check = app.add_flag("--check", o.check,
                             "run forward of the original and the optimized module on the same inputs and fail "
                             "(exit 1) if the outputs differ");
  app.add_option("--input-shape", o.inputShapes,
                 "NAME:D1,D2,...[@DTYPE]: random input for forward's argument NAME (repeatable; dtype "
                 "float32 by default). Without it, --check calls the module's example_inputs() method")
      ->allow_extra_args(false)
      ->type_name("SPEC")
      ->needs(check);
  app.add_option("--rtol", o.rtol, "--check relative tolerance (default 1e-5)")->check(CLI::NonNegativeNumber)->needs(check);
  app.add_option("--atol", o.atol, "--check absolute tolerance (default 1e-6)")->check(CLI::NonNegativeNumber)->needs(check);
  app.add_option("--seed", o.seed, "--check random seed for --input-shape inputs (default 0)")->needs(check);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    throw usageError(firstLine(e.what()) + " (see --help)");
  }
  return std::nullopt;
}

torch::jit::Module loadModule(const std::string& path) {
  try {
    return torch::jit::load(path);
  } catch (const c10::Error& e) {
    throw ioError("cannot load '" + path + "' as a TorchScript module: " + firstLine(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    throw ioError("cannot load '" + path + "' as a TorchScript module: " + firstLine(e.what()));
  }
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
  if (o.input.empty() || o.output.empty()) throw usageError("expected IN.pt and OUT.pt (see --help)");

  PipelineOptions pipeline;
  pipeline.disabled.insert(o.disabled.begin(), o.disabled.end());
  try {
    pipeline.validate();
  } catch (const std::invalid_argument& e) {
    throw usageError(std::string("--disable: ") + e.what() + " (see --list-passes)");
  }
  std::vector<InputSpec> specs;
  for (const auto& s : o.inputShapes) specs.push_back(parseInputSpec(s));

  checkInputFile(o.input);
  checkOutputPath(o.output, o.input, "output");
  if (!o.report.empty()) {
    if (o.report == o.output || sameFile(o.report, o.output))
      throw usageError("--report '" + o.report + "' is the output file");
    checkOutputPath(o.report, o.input, "report");
  }

  torch::jit::Module module = loadModule(o.input);
  std::optional<torch::jit::Module> original;
  std::optional<CheckInputs> inputs;
  if (o.check) {
    original = loadModule(o.input);
    inputs = makeCheckInputs(*original, specs, o.seed);
  }

  Report report = optimizeModule(module, pipeline);

  AtomicFile out(o.output);
  {
    std::ostringstream buf;
    module.save(buf);
    out.write(buf.str());
  }
  std::optional<CheckResult> check;
  if (o.check) {
    // Check what was saved: the optimized module as a fresh load of the temp file.
    torch::jit::Module optimized = [&] {
      try {
        return torch::jit::load(out.tempPath());
      } catch (const c10::Error& e) {
        throw ToolError(kExitInternal,
                        "the optimized module does not load back: " + firstLine(e.what_without_backtrace()));
      }
    }();
    check = runCheck(*original, optimized, std::move(*inputs), o.rtol, o.atol);
  }

  RunInfo info{o.input, o.output, !check || check->passed};
  std::unique_ptr<AtomicFile> reportFile;
  if (!o.report.empty()) {
    reportFile = std::make_unique<AtomicFile>(o.report);
    reportFile->write(reportJson(report, info, check ? &*check : nullptr).dump(2) + "\n");
  }
  if (info.outputWritten) out.commit();
  if (reportFile) reportFile->commit();

  if (!o.quiet) {
    printSummary(std::cout, report, info);
    if (check) printCheck(std::cout, *check, /*summary=*/true);
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
