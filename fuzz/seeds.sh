#!/usr/bin/env bash
# seeds.sh [--check] MAKE_SEEDS: files every seed MAKE_SEEDS (build/fuzz/make_seeds) writes in
# corpus/<target>/, named by the sha1 of its content. With --check, changes nothing and exits 1
# naming each seed that is missing, so that ctest notices a generator changed without its corpus.
set -euo pipefail
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
[ $# -eq 1 ] && [ -x "$1" ] || { echo "usage: fuzz/seeds.sh [--check] path/to/make_seeds" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
made=$(mktemp -d)
trap 'rm -rf "$made"' EXIT
"$1" "$made"

missing=0
for file in "$made"/*/*; do
  target=$(basename "$(dirname "$file")")
  name=$(sha1sum <"$file" | cut -c1-40)
  [ -e "$root/corpus/$target/$name" ] && continue
  if [ $check -eq 1 ]; then
    echo "seeds: $target seed $(basename "$file") is not in corpus/$target/ (as $name); run fuzz/seeds.sh $1"
    missing=1
  else
    mkdir -p "$root/corpus/$target"
    cp "$file" "$root/corpus/$target/$name"
    echo "seeds: corpus/$target/$name ($(basename "$file"))"
  fi
done
exit $missing
