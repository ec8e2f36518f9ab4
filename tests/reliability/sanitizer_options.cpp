// Default options of the sanitizers for the test binary (make test-asan / make test-tsan; see
// docs/reliability.md). Compiled into tsfuse_tests so it behaves the same under ctest, gtest
// discovery and by hand; ASAN_OPTIONS / UBSAN_OPTIONS / TSAN_OPTIONS still override. In a build
// without sanitizers these functions are never called.
#define TSFUSE_SANITIZER_HOOK extern "C" __attribute__((visibility("default"), used))

// allocator_may_return_null: the huge-output tests ask for petabytes; the allocator must fail
// like glibc's (c10 then raises "can't allocate memory") instead of aborting the process.
TSFUSE_SANITIZER_HOOK const char* __asan_default_options() {
  return "allocator_may_return_null=1:detect_leaks=1:abort_on_error=0:strict_string_checks=1:"
         "detect_stack_use_after_return=1:check_initialization_order=1";
}

TSFUSE_SANITIZER_HOOK const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }

// Leak suppressions: none. (Each one must be proven to be inside libtorch and documented here.)
TSFUSE_SANITIZER_HOOK const char* __lsan_default_suppressions() { return ""; }

// allocator_may_return_null as for ASan: TSan's allocator also refuses requests above 1 TiB, and
// without it the first huge-output test (HostileArgs.OutputsWhoseSizeOverflowsRaise, 2^62 bytes
// through c10::alloc_cpu) aborted the run with "allocation-size-too-big" instead of letting c10
// raise its "can't allocate memory" error like an uninstrumented build does.
TSFUSE_SANITIZER_HOOK const char* __tsan_default_options() {
  return "halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1";
}

// ThreadSanitizer suppressions: none yet (each must be proven to be inside libtorch, documented).
TSFUSE_SANITIZER_HOOK const char* __tsan_default_suppressions() { return ""; }
