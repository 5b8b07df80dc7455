#!/usr/bin/env bash
# pip_install.sh PYTHON SCRATCH BUILD: `pip install ./python` into a fresh venv, offline (from a copy:
# a build leaves files behind), then the installed client used from outside the source tree on a
# kept regression; and `cmake --install BUILD` into a prefix, whose attncheck the installed client
# finds on PATH (and says how to install it when it is not there).
set -euo pipefail
python=$1 scratch=$2 build=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$scratch" && mkdir -p "$scratch" && cp -r "$root/python" "$scratch/src"
"$python" -m venv --system-site-packages "$scratch/venv"
"$scratch/venv/bin/pip" install -q --no-build-isolation --no-index --no-deps "$scratch/src"
cd "$scratch"
"$scratch/venv/bin/python" -c "import attncheck; assert attncheck.__file__.startswith('$scratch/venv/'), attncheck.__file__"
"$scratch/venv/bin/python" -m attncheck numpy "$root/corpus/regressions/check/mutant_softmax_bf16_in_bf16.replay" | grep -F 'q = np.array(['
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
[ -x "$scratch/prefix/bin/attncheck" ] && [ -f "$scratch/prefix/include/attncheck/plugin.h" ]
found=$(env -u ATTNCHECK_BIN PATH="$scratch/prefix/bin:/usr/bin:/bin" "$scratch/venv/bin/python" -c "import attncheck; print(attncheck.find_binary())")
[ "$found" = "$scratch/prefix/bin/attncheck" ] || { echo "the installed client found '$found', not $scratch/prefix/bin/attncheck"; exit 1; }
missing=$(env -u ATTNCHECK_BIN PATH=/usr/bin:/bin "$scratch/venv/bin/python" -c "import attncheck; attncheck.find_binary()" 2>&1 || true)
grep -qF 'cmake --install build' <<<"$missing" || { echo "without attncheck on PATH the client said: $missing"; exit 1; }
