#!/bin/bash -eu
# ClusterFuzzLite (and OSS-Fuzz) build: compiles the fuzz targets with the engine's compiler and
# flags ($CC, $CXX, $CFLAGS, $CXXFLAGS, $LIB_FUZZING_ENGINE), then puts each target in $OUT with
# its seed corpus (corpus/<target>/ and its regressions), options and dictionary. Only the
# fuzzers and the libraries they link are built, in $WORK. The fuzz build's ctest runs it locally
# with temporary directories (fuzz.ClusterFuzzLiteBuild, on every ci/fuzz run) so that it cannot rot.
set -o pipefail
src=$SRC/attncheck
targets=()  # every target has an options file
for options in "$src"/fuzz/*.options; do targets+=("$(basename "$options" .options)"); done

cmake -S "$src" -B "$WORK/attncheck-build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTNCHECK_FUZZ=ON \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_C_FLAGS="${CFLAGS:-}" \
  -DCMAKE_CXX_FLAGS="$CXXFLAGS" -DATTNCHECK_FUZZ_ENGINE="$LIB_FUZZING_ENGINE"
cmake --build "$WORK/attncheck-build" -j "$(nproc)" --target "${targets[@]}"

for target in "${targets[@]}"; do
  cp "$WORK/attncheck-build/fuzz/$target" "$src/fuzz/$target.options" "$OUT/"
  [ ! -f "$src/fuzz/$target.dict" ] || cp "$src/fuzz/$target.dict" "$OUT/"
  rm -f "$OUT/${target}_seed_corpus.zip"
  # Kept regressions are texts for the replay programs (docs/fuzzing.md), not libFuzzer inputs,
  # but for fuzz_npy, whose kept regressions are .npy bytes.
  find "$src/corpus/$target" "$src/corpus/regressions/$target" -type f ! -name '.*' ! -name '*.txt' |
    zip -q -j "$OUT/${target}_seed_corpus.zip" -@
done
