#!/usr/bin/env bash
# docs.ABugTheCatalogOmitsIsNamed (impl/tests/CMakeLists.txt): catalog_names_every_bug.py fails (exit 1) naming
# a planted bug the catalog does not name: PLANTED_BUGS_DEF with one more row, not_in_the_catalog, written to
# OUT_DIR/one_more_bug.def, checked against CATALOG_MD.
# Usage: catalog_omits_a_bug.sh PYTHON PLANTED_BUGS_DEF CATALOG_MD OUT_DIR
set -u
python=$1 planted_bugs_def=$2 catalog=$3 out=$4
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out" && cd "$out" || exit 1
{ cat "$planted_bugs_def"; echo 'ATTNCHECK_FORWARD_BUG(not_in_the_catalog)'; } > "$out/one_more_bug.def"
"$python" "$here/catalog_names_every_bug.py" "$out/one_more_bug.def" "$catalog" | grep -q 'does not name not_in_the_catalog'
[ "${PIPESTATUS[0]}" -eq 1 ]
