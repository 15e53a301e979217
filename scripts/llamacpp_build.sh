# Sourced by the llama.cpp comparisons (bench_decode_vs_llamacpp.sh, bench_batched_vs_llamacpp.sh):
# llama.cpp from PyPI's llama-cpp-python source package (pinned here; it vendors llama.cpp),
# fetched and configured once under LLAMA_CACHE (a folder outside the checkout serves every
# checkout; each pin builds into its own build-<pin>-cpu, never reused by another pin). Each
# script builds only the targets it needs into the same tree, so a later target costs its own
# files (llama-batched-bench: one file and a link), not the libraries again.
# The caller defines skip() (exit 77 with a reason) and sets PY (a python with pip) and CACHE.
LLAMA_PIN=0.3.36  # llama-cpp-python 0.3.36, the newest source package (0.3.16 vendored llama.cpp of 2025-08)
LLAMA_SRC="$CACHE/llama_cpp_python-$LLAMA_PIN/vendor/llama.cpp"
LLAMA_BLD="$CACHE/build-$LLAMA_PIN-cpu"

llamacpp_fetch() {
  mkdir -p "$CACHE"
  [ -f "$LLAMA_SRC/CMakeLists.txt" ] && return 0
  if [ ! -f "$CACHE/llama_cpp_python-$LLAMA_PIN.tar.gz" ]; then
    echo "bench: fetching llama-cpp-python==$LLAMA_PIN's source package ..." >&2
    "$PY" -m pip download --quiet --no-binary :all: --no-deps "llama-cpp-python==$LLAMA_PIN" -d "$CACHE" \
      || skip "cannot fetch llama-cpp-python==$LLAMA_PIN from the package registry"
  fi
  tar -xzf "$CACHE/llama_cpp_python-$LLAMA_PIN.tar.gz" -C "$CACHE" || skip "cannot unpack llama-cpp-python==$LLAMA_PIN"
}

# llamacpp_build TARGET...: configure the tree once (CPU, native), then build the targets given.
llamacpp_build() {
  if [ ! -f "$LLAMA_BLD/CMakeCache.txt" ]; then
    echo "bench: configuring llama.cpp (CPU, native) once under $LLAMA_BLD ..." >&2
    cmake -S "$LLAMA_SRC" -B "$LLAMA_BLD" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DLLAMA_CURL=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF \
      -DGGML_CCACHE=OFF >/dev/null || skip "cannot configure llama.cpp"
  fi
  echo "bench: building llama.cpp's $* under $LLAMA_BLD ..." >&2
  cmake --build "$LLAMA_BLD" -j2 --target "$@" >/dev/null || skip "cannot build llama.cpp's $*"
}
