# Shared by ci/check and ci/test (sourced, not run): installs what is missing, then builds.
# Dependencies come only from Debian's packages.

ATTNCHECK_PACKAGES=(cmake g++ clang libclang-rt-14-dev libgtest-dev librapidcheck-dev
  libeigen3-dev libboost-dev libmpfr-dev libgmp-dev pkg-config libbenchmark-dev nlohmann-json3-dev
  libtorch-dev libsleef-dev   # real third-party kernels for the tests: PyTorch 1.13, SLEEF
  python3-numpy python3-torch python3-pytest   # the Python client, its examples and their tests
  python3-venv python3-setuptools python3-wheel  # `pip install ./python`, tested in a venv
  clang-format  # ci/format, run by ctest
  chromium)  # headless, it loads `attncheck check --html` reports in ctest

# Installs the packages above that dpkg does not report installed: directly as root,
# through sudo otherwise, and without either prints the one line to run and stops.
ensure_packages() {
  local missing=() p
  for p in "${ATTNCHECK_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local line="apt-get update && apt-get install -y ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then
    echo "ci: installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive bash -c "$line" >/dev/null || { echo "ci: apt-get failed: $line" >&2; exit 2; }
  elif command -v sudo >/dev/null 2>&1; then
    echo "ci: installing through sudo: ${missing[*]}"
    sudo DEBIAN_FRONTEND=noninteractive bash -c "$line" >/dev/null || { echo "ci: apt-get failed: sudo $line" >&2; exit 2; }
  else
    echo "ci: missing packages; as root run: $line" >&2
    exit 2
  fi
}

# ensure_venv [REQUIREMENTS IMPORTS VARIABLE PLACE SOURCE]: a virtual environment with the pinned wheels
# of ci/REQUIREMENTS over Debian's python3 (--system-site-packages: its pytest; the venv's own numpy
# and the rest shadow Debian's), made by python3-venv alone (pip from its own wheel): made once in
# $PLACE (the variable named PLACE says where) or else ~/.cache/attncheck/NAME-HASH, NAME venv for
# requirements.txt, venv-torch for requirements-torch.txt and venv-mlx for requirements-mlx.txt,
# HASH from the file, so a clean clone reuses it. It is built where it stays, under a lock, and
# counts as made only once its stamp (written last, holding HASH) is there, after `import IMPORTS`
# ran in it; a half-made one is removed and made again. Exports VARIABLE, its python. SOURCE names
# the packages of ci/REQUIREMENTS that have no wheel (space-separated): they are built from their
# pinned sdists after the wheels are in, without build isolation, so that their build dependencies
# are the file's pinned wheels too. With no arguments, the venv of ci/requirements.txt (ONNX
# Runtime, JAX, OpenVINO): ATTNCHECK_VENV_PYTHON, in $ATTNCHECK_VENV.
ensure_venv() {
  local file=${1:-requirements.txt} imports=${2:-onnx, onnxruntime} variable=${3:-ATTNCHECK_VENV_PYTHON}
  local place=${4:-ATTNCHECK_VENV} source=${5:-} requirements hash venv stamp owner lock wheel name built
  requirements="$ATTNCHECK_ROOT/ci/$file" name=${file#requirements} name=venv${name%.txt}
  built="^(${source// /|})=="  # the lines of SOURCE's packages (none when SOURCE is empty)
  hash=$(sha256sum "$requirements" | cut -c1-12)
  [ -n "${!place:-}${HOME:-}" ] || { echo "ci: neither $place nor HOME is set: nowhere to keep the venv" >&2; exit 2; }
  venv=${!place:-$HOME/.cache/attncheck/$name-$hash}
  stamp="$venv/.attncheck-venv-complete" owner="$venv/.attncheck-venv"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$hash" ]; then
    mkdir -p "$(dirname "$venv")" && exec {lock}>"$venv.lock" && flock "$lock" \
      || { echo "ci: cannot make or lock $venv.lock for the Python venv" >&2; exit 2; }
    # Under the lock: a run that waited finds the stamp another has just written.
    if [ "$(cat "$stamp" 2>/dev/null)" != "$hash" ]; then
      if [ -e "$venv" ] && [ ! -f "$owner" ] && [ -n "$(ls -A "$venv")" ]; then
        echo "ci: $venv is not a venv ensure_venv made; remove it or set $place elsewhere" >&2; exit 2
      fi
      wheel=$(ls /usr/share/python-wheels/pip-*.whl 2>/dev/null | tail -n 1)
      echo "ci: making the Python venv $venv (ci/$file)"
      { rm -rf "$venv" && mkdir -p "$venv" && echo "made by ci/lib.sh ensure_venv" >"$owner" && [ -n "$wheel" ] &&
        /usr/bin/python3 -m venv --system-site-packages --without-pip "$venv" &&
        "$venv/bin/python" "$wheel/pip" install --quiet --disable-pip-version-check --no-input \
          --only-binary :all: --no-deps -r <(grep -viE "$built" "$requirements") &&
        { [ -z "$source" ] || "$venv/bin/python" "$wheel/pip" install --quiet --disable-pip-version-check --no-input \
          --no-binary :all: --no-build-isolation --no-deps $(grep -iE "$built" "$requirements" | sed 's/#.*//'); } &&
        "$venv/bin/python" -c "import $imports"; } >"$venv.log" 2>&1 \
        || { echo "ci: could not make the Python venv $venv from ci/$file (log: $venv.log)" >&2; exit 2; }
      echo "$hash" >"$stamp"
    fi
    exec {lock}>&-
  fi
  export "$variable=$venv/bin/python"
}

# The venvs ci/check, ci/test and ci/conformance use: ONNX Runtime, JAX and OpenVINO (ATTNCHECK_VENV
# says where, else ~/.cache/attncheck/venv-HASH); a current PyTorch (ATTNCHECK_TORCH_VENV, else
# ~/.cache/attncheck/venv-torch-HASH). The torch venv is large: 5.4 GB on disk (nvidia 3.0 GB,
# torch 1.2 GB, triton 1.0 GB) from 2.9 GB of wheels; made in 1 min 56 s here from wheels already
# downloaded (2026-12-03, 2 cores), plus their download from PyPI the first time (about 1 min at
# 50 MB/s); 102 s in all on a new machine, download included (2026-12-04). Made once per machine,
# like the other. Apple MLX on the CPU (ATTNCHECK_MLX_VENV, else
# ~/.cache/attncheck/venv-mlx-HASH; ci/requirements-mlx.txt: mlx, mlx-cpu, numpy): small, 111 MB on
# disk (numpy 73 MB, mlx 26 MB, mlx-cpu's BLAS and LAPACK 12 MB) from 28 MB of wheels; made in 6.6 s
# the first time, their download from PyPI included (4.1 s on a new machine on 2026-12-04; 4.7 s from
# pip's cache; 2026-12-03, 2 cores).
# Keras 3 on JAX (ATTNCHECK_KERAS_VENV, else ~/.cache/attncheck/venv-keras-HASH): 664 MB on disk (jaxlib 349 MB, scipy 113 MB) from 145 MB of
# wheels; made in 79 s here (2026-12-03, 2 cores) with the wheels in pip's cache, about 10 s more
# to download them the first time (16 s in all on a new, quiet machine, 2026-12-04). Its import check runs with KERAS_BACKEND=jax (keras' default
# backend, TensorFlow, is not installed). llama.cpp's ggml (ATTNCHECK_LLAMA_VENV, else
# ~/.cache/attncheck/venv-llama-HASH): llama-cpp-python's sdist (it has no Linux wheel) built here
# by Debian's cmake and g++ with LLAMA_CMAKE_ARGS (not in the venv's hash: change
# ci/requirements-llama.txt with them): CPU only though nvcc may be installed, no multimodal library,
# tools, tests or examples; ggml's default -march=native, so the libraries fit this machine. 132 MB
# on disk (numpy 73 MB; llama_cpp's libraries 20 MB, and 32 MB more of the same in site-packages/lib,
# where llama.cpp's own install puts them) from a 77 MB sdist and 20 MB of wheels; its build is
# the cost: made in 18 min 10 s here the first time (2026-12-03, 2 cores under a load of 9; 8 min
# 45 s of CPU), 11 min 33 s in a quieter moment.
LLAMA_CMAKE_ARGS="-DGGML_CUDA=OFF -DLLAVA_BUILD=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF"
ensure_venvs() {
  ensure_venv
  KERAS_BACKEND=torch ensure_venv requirements-torch.txt "torch, keras" ATTNCHECK_TORCH_PYTHON ATTNCHECK_TORCH_VENV
  ensure_venv requirements-mlx.txt mlx.core ATTNCHECK_MLX_PYTHON ATTNCHECK_MLX_VENV
  KERAS_BACKEND=jax ensure_venv requirements-keras.txt "keras, jax" ATTNCHECK_KERAS_PYTHON ATTNCHECK_KERAS_VENV
  CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
    ensure_venv requirements-llama.txt llama_cpp ATTNCHECK_LLAMA_PYTHON ATTNCHECK_LLAMA_VENV llama-cpp-python
}

# build DIR [cmake args...]: configures once, then builds everything on all cores. Debug information
# is line tables (-g1): every sanitizer report and backtrace keeps its files and lines, at a fraction
# of -g's compile and link time (a tools/src/cases.cpp object 1.0 MB, not 3.6).
build() {
  local dir=$1; shift
  cmake -S "$ATTNCHECK_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" "$@" >/dev/null \
    || { echo "ci: cmake configure failed in $dir" >&2; exit 2; }
  cmake --build "$dir" -j "$(nproc)" >"$dir/build.log" 2>&1 \
    || { tail -n 60 "$dir/build.log" >&2; echo "ci: build failed in $dir (full log: $dir/build.log)" >&2; exit 2; }
}

ATTNCHECK_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
