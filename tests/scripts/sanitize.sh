#!/usr/bin/env bash
# The sanitizer side of the bad-input tests (issue 35), in build trees of their own made with
# clang and AddressSanitizer + UndefinedBehaviorSanitizer:
#
#   sanitize.sh fuzz-build SRC DIR        the libFuzzer targets of tests/fuzz (one per parser) in DIR
#   sanitize.sh fuzz DIR TARGET SECONDS   run DIR/fuzz_TARGET on a copy of its seed corpus for SECONDS
#   sanitize.sh build SRC DIR             the whole CPU binary and the core, io and data unit tests
#                                         (tokenizer included) in DIR, at -O0 (HEADWISE_SANITIZE=0
#                                         skips it: about 4 min of CPU)
#   sanitize.sh cli DIR TEST_CLI          TEST_CLI's [hostile] cases against DIR/headwise
#   sanitize.sh unit DIR TEST             DIR/TEST (test_core, test_io, test_data) under the sanitizers
#
# Each skips with exit 77 where clang++ or libFuzzer's runtime is missing (Debian: clang,
# libclang-rt-14-dev, libomp-dev; scripts/setup.sh installs them), or the sanitizer build is
# turned off (HEADWISE_SANITIZE=0); in CI mode (HEADWISE_REQUIRE_REFERENCES=1) each such skip is a
# failure (scripts/references.sh). ctest runs them as fixtures
# (fuzz:build, fuzz:*, sanitize:build, sanitize:hostile_cli, sanitize:test_*). By hand, longer fuzzing:
#   bash tests/scripts/sanitize.sh fuzz-build . build-fuzz
#   bash tests/scripts/sanitize.sh fuzz build-fuzz tokenizer_json 3600
set -euo pipefail
mode=${1:?usage: sanitize.sh fuzz-build SRC DIR | fuzz DIR TARGET SECONDS | build SRC DIR | cli DIR TEST_CLI | unit DIR TEST}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../scripts/references.sh"

# ASan: stop at the first report (the test fails); leaks are not this test's subject (the CLI exits
# through exceptions on purpose); an allocation above 4 GiB is a report (a huge allocation is a bug
# here, and a sanitizer's operator new aborts instead of throwing bad_alloc). UBSan: every report
# is an error, with a stack.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=0:malloc_limit_mb=4096}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=passive

# clang++ that links libFuzzer with both sanitizers, or exit as reference_unavailable says.
find_clang() {
  cxx=$(command -v clang++ || command -v clang++-14 || true)
  if [ -z "$cxx" ]; then
    reference_unavailable "sanitize: clang++ not found (apt-get install clang libclang-rt-14-dev libomp-dev)"
  fi
  local probe
  probe=$(mktemp -d)
  printf '#include <cstdint>\n#include <cstddef>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n' \
    >"$probe/p.cpp"
  if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" 2>"$probe/err"; then
    head -3 "$probe/err"
    rm -rf "$probe"
    reference_unavailable "sanitize: $cxx cannot link libFuzzer with ASan/UBSan (apt-get install libclang-rt-14-dev)"
  fi
  rm -rf "$probe"
}

# configure_tree SRC DIR OPT EXTRA_FLAGS [cmake args]: a clang tree with the sanitizers (plus
# EXTRA_FLAGS: libFuzzer's coverage for the fuzz tree) at optimisation OPT, line tables for the
# reports (5% of the compile time).
configure_tree() {
  local src=$1 dir=$2 opt=$3 extra=$4
  shift 4
  cmake -S "$src" -B "$dir" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Sanitize \
    -DCMAKE_CXX_FLAGS_SANITIZE="$opt -gline-tables-only" \
    -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined $extra -fno-omit-frame-pointer -Wno-pass-failed" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DHEADWISE_CUDA=OFF -DHEADWISE_MPI=OFF "$@" >/dev/null
}

case "$mode" in
fuzz-build)
  src=$(cd "${2:?SRC}" && pwd) dir=${3:?DIR}
  find_clang
  configure_tree "$src" "$dir" -O1 -fsanitize=fuzzer-no-link -DHEADWISE_TESTS=OFF -DHEADWISE_FUZZ=ON
  start=$(date +%s)
  cmake --build "$dir" -j "$(nproc)" --target fuzz_targets
  echo "sanitize: fuzz targets built in $dir in $(($(date +%s) - start)) s"
  ;;
build)
  src=$(cd "${2:?SRC}" && pwd) dir=${3:?DIR}
  if [ "${HEADWISE_SANITIZE:-1}" = 0 ]; then
    reference_unavailable "sanitize: HEADWISE_SANITIZE=0: the sanitizer build of the CPU binary and unit tests skipped"
  fi
  find_clang
  # -O0: -O1 took 2.4 times the CPU per file (5 files measured) and the runs here are short. The
  # tree's CMake config (Sanitize) also keeps the CLI at -O0 and builds most folders as unity
  # batches: 236 s of CPU in all, from 638 s (CLI at -O1, one file at a time).
  configure_tree "$src" "$dir" -O0 "" -DHEADWISE_TESTS=ON
  start=$(date +%s)
  cmake --build "$dir" -j "$(nproc)" --target headwise test_core test_io test_data
  echo "sanitize: built $dir/headwise, test_core, test_io, test_data in $(($(date +%s) - start)) s"
  ;;
fuzz)
  dir=${2:?DIR} target=${3:?TARGET} seconds=${4:?SECONDS}
  [ -x "$dir/fuzz_$target" ] || reference_unavailable "sanitize: $dir/fuzz_$target not built (fuzz:build skipped?)"
  exe="$(cd "$dir" && pwd)/fuzz_$target"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir "$work/corpus"
  cp -r "$here/../fuzz/corpus/$target/." "$work/corpus/"
  # -rss_limit_mb / -malloc_limit_mb: an input that makes a parser hold more than 2 GB is a
  # finding (bounded memory); -timeout: one input running 10 s is one (bounded time).
  set +e
  (cd "$work" && "$exe" corpus -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -close_fd_mask=1 -artifact_prefix="$work/" >"$work/log" 2>&1)
  rc=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
  if [ $rc -ne 0 ]; then
    tail -60 "$work/log"
    for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* "$work"/slow-unit-*; do
      [ -e "$a" ] && { echo "finding: $(basename "$a") (base64, first 4000 chars):"; base64 -w0 "$a" | head -c 4000; echo; }
    done
    echo "fuzz_$target: finding after ${runs:-?} executions"
    exit 1
  fi
  echo "fuzz_$target: ${runs:-?} executions in $seconds s, no finding"
  ;;
cli)
  dir=${2:?DIR} test_cli=${3:?TEST_CLI}
  [ -x "$dir/headwise" ] || reference_unavailable "sanitize: $dir/headwise not built (sanitize:build skipped?)"
  # The sanitized binary reserves terabytes of shadow address space: no ulimit -v for it; its
  # allocation limit is ASAN_OPTIONS' malloc_limit_mb. [oom] cases need bad_alloc, which a
  # sanitizer's operator new does not throw.
  HEADWISE_TEST_BINARY="$(cd "$dir" && pwd)/headwise" HEADWISE_TEST_NO_ULIMIT=1 "$test_cli" "[hostile]~[oom]"
  ;;
unit)
  dir=${2:?DIR} test=${3:?TEST}
  [ -x "$dir/$test" ] || reference_unavailable "sanitize: $dir/$test not built (sanitize:build skipped?)"
  "$dir/$test"
  ;;
*)
  echo "sanitize.sh: unknown mode $mode" >&2
  exit 2
  ;;
esac
