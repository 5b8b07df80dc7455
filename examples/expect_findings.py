"""expect_findings.py REPORT.json [--exit N] [--finding PROPERTY:KIND[:POLICY[:TEXT]]]...
-- COMMAND...: runs COMMAND (an `attncheck check ... --json REPORT.json`), shows its summary and its
findings, and passes when it exits N (default 1) and its JSON report has every --finding asked
(property, or * for any, and kind; with POLICY, one of the policies the finding says would accept
it; with TEXT, words its message holds: "TypeError", of two raised findings). For ctest
(examples/CMakeLists.txt).
"""
import argparse
import json
import os
import subprocess
import sys


def main():
    if "--" not in sys.argv:
        sys.exit(__doc__)
    at = sys.argv.index("--")
    parser = argparse.ArgumentParser(usage=__doc__)
    parser.add_argument("report")
    parser.add_argument("--exit", type=int, default=1)
    parser.add_argument("--finding", action="append", default=[])
    args = parser.parse_args(sys.argv[1:at])
    command = sys.argv[at + 1:]
    if os.path.exists(args.report):
        os.remove(args.report)
    run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = run.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("findings: ")), max(0, len(lines) - 5))
    print("\n".join(lines[start:]))
    problems = []
    if run.returncode != args.exit:
        problems.append(f"expected exit {args.exit}, got {run.returncode}")
    findings = json.load(open(args.report))["findings"] if os.path.exists(args.report) else []
    for wanted in args.finding:
        prop, kind, *rest = wanted.split(":", 3)
        policy, text = (rest + ["", ""])[:2]
        if not any(prop in ("*", f["property"]) and f["kind"] == kind and (not policy or policy in f["accepted_under"]) and
                   text in (f.get("message") or "") for f in findings):
            problems.append(f"expected a finding {wanted}")
    for problem in problems:
        print(problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
