#!/usr/bin/env bash
# A real llama.cpp model server with a tiny model made on the spot, for the real_server tests.
# Run through ./dev:  ./dev real-server [--cpp] [--port N]
#
#   (default)  llama-cpp-python's server (pip package, llama.cpp compiled from source)
#   --cpp      llama.cpp's own llama-server (built from the llama.cpp sources that ship in the
#              llama-cpp-python source package), started with --jinja: it parses tool calls, so
#              the tool round trip and the crash after a tool result are exercised too
#
# Everything goes to $MAKA_REAL_SERVER_HOME (default /tmp/maka-real-server): a venv, the build,
# the model. Only the package registries are used; no model weights are downloaded. The first
# run compiles llama.cpp (10-30 minutes on 2 cores); later runs start at once. The server runs in
# the foreground until Ctrl-C; the command that runs the suite against it is printed first.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
home=${MAKA_REAL_SERVER_HOME:-/tmp/maka-real-server}
version=0.3.36
port=8080
flavour=python
while [ $# -gt 0 ]; do
    case "$1" in
        --cpp) flavour=cpp ;;
        --port) port=$2; shift ;;
        *) echo "usage: ./dev real-server [--cpp] [--port N]" >&2; exit 2 ;;
    esac
    shift
done
ctx=8192
mkdir -p "$home"
venv=$home/venv
cmake_args="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_CURL=OFF -DGGML_OPENMP=OFF"

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import llama_cpp, gguf" 2>/dev/null; then
    echo "real-server: building llama-cpp-python $version into $venv (log: $home/pip.log)" >&2
    python3 -m venv "$venv"
    CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL=2 nice -n 10 \
        "$venv/bin/pip" install "llama-cpp-python[server]==$version" gguf numpy >"$home/pip.log" 2>&1 \
        || { tail -n 30 "$home/pip.log" >&2; exit 1; }
fi

model=$home/tiny-$flavour.gguf
if [ "$flavour" = cpp ]; then
    "$venv/bin/python" "$repo/tests/real_server/tiny_gguf.py" "$model" --llama-server >&2
else
    "$venv/bin/python" "$repo/tests/real_server/tiny_gguf.py" "$model" >&2
fi

url=http://127.0.0.1:$port/v1
cat >&2 <<EOF
real-server: serving $model at $url ($flavour). In another terminal:
  MAKA_REAL_SERVER_URL=$url MAKA_REAL_SERVER_CONTEXT_TOKENS=$ctx \\
    .venv/bin/python -m pytest -v -rs -m real_server tests/real_server
EOF

if [ "$flavour" = python ]; then
    exec "$venv/bin/python" -m llama_cpp.server --model "$model" --model_alias tiny \
        --host 127.0.0.1 --port "$port" --n_ctx "$ctx"
fi

server=$home/build/bin/llama-server
if [ ! -x "$server" ]; then
    echo "real-server: building llama.cpp's llama-server (log: $home/build.log)" >&2
    src=$home/src
    mkdir -p "$src"
    if [ ! -d "$src/llama_cpp_python-$version" ]; then
        "$venv/bin/pip" download --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$src" >&2
        tar -xzf "$src/llama_cpp_python-$version.tar.gz" -C "$src"
    fi
    "$venv/bin/pip" install -q cmake ninja >&2
    # No web UI (it would be downloaded) and no TLS or curl: a local test server needs neither.
    nice -n 10 "$venv/bin/cmake" -G Ninja -DCMAKE_MAKE_PROGRAM="$venv/bin/ninja" -S "$src/llama_cpp_python-$version/vendor/llama.cpp" -B "$home/build" \
        -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
        -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
        -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >"$home/build.log" 2>&1 \
        && nice -n 10 "$venv/bin/cmake" --build "$home/build" --target llama-server -j 2 >>"$home/build.log" 2>&1 \
        || { tail -n 30 "$home/build.log" >&2; exit 1; }
fi
# The repeat penalty over the last 512 tokens is what makes the tiny model call a tool, and a low
# temperature keeps it predictable (see tiny_gguf.py); no reply is longer than 256 tokens.
exec "$server" -m "$model" --alias tiny --jinja -c "$ctx" --host 127.0.0.1 --port "$port" \
    --repeat-penalty 1.5 --repeat-last-n 512 --temp 0.1 -n 256 -np 1
