"""catalog_names_every_bug.py PLANTED_BUGS_DEF CHECKING_MD: passes when the mutant catalog of
docs/checking.md (its section "## The mutant catalog") names, in the first cell of a table row,
every planted bug of impl/variants/planted_bugs.def, and no bug that file does not hold."""
import re
import sys

bugs = set(re.findall(r"^ATTNCHECK_(?:FORWARD|BACKWARD|LAYER)_BUG\(([a-z0-9_]+)\)", open(sys.argv[1]).read(), re.M))
text = open(sys.argv[2]).read()
section = text[text.index("## The mutant catalog") :]
section = section[: section.find("\n## ", 1) if "\n## " in section[1:] else len(section)]
named = set()
for row in re.findall(r"^\| ([^|]+) \|", section, re.M):
    named.update(re.findall(r"\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b", row.replace("(backward)", "")))
problems = [f"the catalog does not name {b}" for b in sorted(bugs - named)]
problems += [f"the catalog names {n}, which planted_bugs.def does not hold" for n in sorted(named - bugs)]
for p in problems:
    print(p)
print(f"{len(bugs)} planted bugs, {len(named)} named in the catalog")
sys.exit(1 if problems else 0)
