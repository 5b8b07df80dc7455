#!/usr/bin/env bash
# pip_install.sh PYTHON SCRATCH: `pip install ./python` into a fresh venv (from a copy: a build leaves
# files behind), then the installed client used from outside the source tree on a kept regression.
set -euo pipefail
python=$1 scratch=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$scratch" && mkdir -p "$scratch" && cp -r "$root/python" "$scratch/src"
"$python" -m venv --system-site-packages "$scratch/venv"
"$scratch/venv/bin/pip" install -q --no-build-isolation --no-index --no-deps "$scratch/src"
cd "$scratch"
"$scratch/venv/bin/python" -c "import attncheck; assert attncheck.__file__.startswith('$scratch/venv/'), attncheck.__file__"
"$scratch/venv/bin/python" -m attncheck numpy "$root/corpus/regressions/check/mutant_softmax_bf16_in_bf16.replay" | grep -F 'q = np.array(['
