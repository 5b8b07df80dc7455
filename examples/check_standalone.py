"""check_standalone.py ATTNCHECK PYTHON REPLAY OLD NEW: `attncheck repro --standalone` on an
adapter's kept finding, shown both ways. The script it writes, run by PYTHON isolated (-I: no
attncheck importable, only NumPy and the library), must exit 1 naming the element the replay file
says was wrong; and written from the same file with its failed call's line OLD made NEW (inputs the
library gets right), it must exit 0. For ctest (examples/CMakeLists.txt).
"""
import os
import re
import subprocess
import sys
import tempfile


def standalone(attncheck, python, replay, folder):
    script = os.path.join(folder, os.path.basename(replay) + ".py")
    subprocess.run([attncheck, "repro", replay, "--standalone", "yes", "--out", script], check=True)
    run = subprocess.run([python, "-I", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         cwd=folder)
    print(f"$ {python} -I {script}  (exit {run.returncode})\n{run.stdout}")
    return run


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    attncheck, python, replay, old, new = sys.argv[1:]
    text = open(replay).read()
    why = re.search(r"^failed-call-why (\w+)\[([\d,]+)\]", text, re.M)
    if not why or f"\nfailed-call {old}\n" not in text:
        sys.exit(f"{replay}: no failed-call-why naming an element, or no line 'failed-call {old}'")
    problems = []
    with tempfile.TemporaryDirectory() as folder:
        element = f"{why[1]}[{why[2].replace(',', ', ')}] = "
        found = standalone(attncheck, python, replay, folder)
        if found.returncode != 1 or element not in found.stdout:
            problems.append(f"the finding's script: expected exit 1 and '{element}'")
        right = os.path.join(folder, "right.replay")
        open(right, "w").write(text.replace(f"\nfailed-call {old}\n", f"\nfailed-call {new}\n"))
        agreed = standalone(attncheck, python, right, folder)
        if agreed.returncode != 0 or "every element within attncheck's bound" not in agreed.stdout:
            problems.append("the script of inputs the library gets right: expected exit 0 and every element within")
    print("\n".join(problems) or "both ways as expected")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
