#!/usr/bin/env bash
# one_claim_per_file.sh [DIR]: checks the suite's rule, one claim per file, named as the claim: each
# DIR/*.cpp (properties/ by default) that registers a property (ATTNCHECK_PROPERTY, read as
# properties/CMakeLists.txt reads it) registers exactly one, and is named as that property in
# snake_case (RowsSumToOne in rows_sum_to_one.cpp; NaN is one word, ...RowNaN in ..._row_nan.cpp).
# Files that register none (the registry, the *_support.cpp) are free. Prints each file that breaks
# the rule; exit 1 if one does, 2 when DIR holds no .cpp.
set -euo pipefail
dir=${1:-$(cd "$(dirname "$0")/.." && pwd)}
shopt -s nullglob
files=("$dir"/*.cpp)
[ ${#files[@]} -gt 0 ] || { echo "one_claim_per_file.sh: no .cpp in $dir" >&2; exit 2; }

snake_case() {
  sed -E 's/NaN/Nan/g; s/([A-Z]+)([A-Z][a-z])/\1_\2/g; s/([a-z0-9])([A-Z])/\1_\2/g' <<<"$1" | tr '[:upper:]' '[:lower:]'
}

broken=0
for file in "${files[@]}"; do
  mapfile -t names < <(grep -o 'ATTNCHECK_PROPERTY([A-Za-z0-9_]\+' "$file" | sed 's/.*(//')
  [ ${#names[@]} -gt 0 ] || continue
  if [ ${#names[@]} -gt 1 ]; then
    echo "$file registers ${#names[@]} properties (${names[*]}): one claim per file, each in a file named as it"
    broken=1
    continue
  fi
  expected=$(snake_case "${names[0]}").cpp
  if [ "$(basename "$file")" != "$expected" ]; then
    echo "$file registers ${names[0]}: its file is to be named $expected"
    broken=1
  fi
done
exit $broken
