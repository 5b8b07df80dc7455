# Shared by ci/check and ci/test (sourced, not run): installs what is missing, then builds.
# Dependencies come only from Debian's packages.

ATTNCHECK_PACKAGES=(cmake g++ clang libclang-rt-14-dev libgtest-dev librapidcheck-dev
  libeigen3-dev libboost-dev libmpfr-dev libgmp-dev pkg-config libbenchmark-dev nlohmann-json3-dev
  libtorch-dev libsleef-dev   # real third-party kernels for the tests: PyTorch 1.13, SLEEF
  python3-numpy python3-torch python3-pytest   # the Python client, its examples and their tests
  python3-venv python3-setuptools python3-wheel  # `pip install ./python`, tested in a venv
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

# build DIR [cmake args...]: configures once, then builds everything on all cores.
build() {
  local dir=$1; shift
  cmake -S "$ATTNCHECK_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null \
    || { echo "ci: cmake configure failed in $dir" >&2; exit 2; }
  cmake --build "$dir" -j "$(nproc)" >"$dir/build.log" 2>&1 \
    || { tail -n 60 "$dir/build.log" >&2; echo "ci: build failed in $dir (full log: $dir/build.log)" >&2; exit 2; }
}

ATTNCHECK_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
