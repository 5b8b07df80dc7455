#!/usr/bin/env bash
# progress_line.sh ATTNCHECK: on a terminal (a pseudo-terminal from util-linux's script) `attncheck
# check` rewrites one progress line in place and erases it before the verdict; into a pipe it
# writes no carriage return or escape at all.
attncheck=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
script -qec "$attncheck check --cases 60 --seconds 600" /dev/null >"$dir/tty.txt" </dev/null
"$attncheck" check --cases 60 --seconds 600 >"$dir/pipe.txt"
cat -v "$dir/tty.txt"
grep -q $'\r\e\\[Kattncheck check: [0-9]* properties, [0-9]* cases, [0-9.]* s of 600 s' "$dir/tty.txt" ||
  { echo "expected a progress line on the terminal"; exit 1; }
grep -q "attncheck check: PASS" "$dir/tty.txt" || { echo "expected the verdict on the terminal"; exit 1; }
grep -q $'[\r\e]' "$dir/pipe.txt" && { echo "expected no progress line into a pipe:"; cat -v "$dir/pipe.txt"; exit 1; }
grep -q "attncheck check: PASS" "$dir/pipe.txt" || { echo "expected the verdict into the pipe"; exit 1; }
echo "progress_line: PASS"
