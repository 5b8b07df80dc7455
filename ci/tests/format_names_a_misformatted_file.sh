#!/usr/bin/env bash
# format.AMisformattedFileIsNamed (the root CMakeLists.txt): ci/format fails (exit 1) on a C++ file that is not
# laid out as .clang-format says, naming it: OUT_DIR/misformatted.cpp, one line of it.
# Usage: format_names_a_misformatted_file.sh FORMAT OUT_DIR
# FORMAT: the project's ci/format.
set -u
format=$1 out=$2
mkdir -p "$out" && cd "$out" || exit 1
printf 'int  f( int x ){return x;}\n' > "$out/misformatted.cpp"
"$format" "$out/misformatted.cpp" | grep -q 'not formatted: .*misformatted.cpp'
[ "${PIPESTATUS[0]}" -eq 1 ]
