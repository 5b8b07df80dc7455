"""expect_findings.py REPORT.json [--exit N] [--finding PROPERTY:KIND[:POLICY[:TEXT]]]... [--says TEXT]...
[--min-cases N] [--max-seconds S] [--all-taken] -- COMMAND...: runs COMMAND (an `attncheck check ...
--json REPORT.json`), shows its summary and its findings, and passes when it exits N (default 1)
and its JSON report has every --finding asked (property, or * for any, and kind; with POLICY, one
of the policies the finding says would accept it; with TEXT, words its message or cause holds:
"TypeError", of two raised findings), its output every --says, at least N cases, a whole run of at
most S seconds, and with --all-taken every call taken (no refusal of what it said it takes). For
ctest (examples/CMakeLists.txt, cli/tests/CMakeLists.txt).
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
    parser.add_argument("--says", action="append", default=[])
    parser.add_argument("--min-cases", type=int, default=0)
    parser.add_argument("--max-seconds", type=float)
    parser.add_argument("--all-taken", action="store_true")
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
    report = json.load(open(args.report)) if os.path.exists(args.report) else {}
    findings = report.get("findings", [])
    for wanted in args.finding:
        prop, kind, *rest = wanted.split(":", 3)
        policy, text = (rest + ["", ""])[:2]
        if not any(prop in ("*", f["property"]) and f["kind"] == kind and (not policy or policy in f["accepted_under"]) and
                   (text in (f.get("message") or "") or text in (f.get("cause") or "")) for f in findings):
            problems.append(f"expected a finding {wanted}")
    for text in args.says:
        if text not in run.stdout:
            problems.append(f"expected the output to say: {text}")
    if report.get("cases", 0) < args.min_cases:
        problems.append(f"expected at least {args.min_cases} cases, got {report.get('cases')}")
    if args.max_seconds is not None and not report.get("seconds", float("inf")) <= args.max_seconds:
        problems.append(f"expected a run of at most {args.max_seconds} s, it took {report.get('seconds')}")
    if args.all_taken and report.get("calls_not_taken", 1) != 0:
        problems.append(f"expected every call taken, {report.get('calls_not_taken')} were not")
    for problem in problems:
        print(problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
