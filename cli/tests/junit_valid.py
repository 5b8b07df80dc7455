"""junit_valid.py FILE.xml failure|none: passes when `attncheck check --junit` wrote JUnit XML that
parses, whose <testsuite> counts agree with its test cases (classname attncheck, a property's name,
its seconds), and that holds one failure carrying the report (failure) or none (none)."""
import sys
import xml.etree.ElementTree as ET


def fail(reason):
    print("junit_valid: " + reason)
    sys.exit(1)


if len(sys.argv) != 3 or sys.argv[2] not in ("failure", "none"):
    fail("usage: junit_valid.py FILE.xml failure|none")
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError) as e:
    fail("%s: %s" % (sys.argv[1], e))
suite = root.find("testsuite") if root.tag == "testsuites" else root
if suite is None or suite.tag != "testsuite":
    fail("no <testsuite>")
cases = suite.findall("testcase")
failures = suite.findall("testcase/failure")
if not cases or int(suite.get("tests")) != len(cases) or int(suite.get("failures")) != len(failures):
    fail("tests=%s failures=%s, but %d test cases and %d failures" % (suite.get("tests"), suite.get("failures"), len(cases), len(failures)))
for case in cases:
    if case.get("classname") != "attncheck" or not case.get("name") or float(case.get("time")) < 0:
        fail("a test case without classname attncheck, a name or a time: %s" % case.attrib)
if float(suite.get("time")) < 0:
    fail("the suite has no time")
if sys.argv[2] == "none" and failures:
    fail("expected no failure, got: " + failures[0].get("message"))
if sys.argv[2] == "failure":
    if len(failures) != 1:
        fail("expected one failure, got %d" % len(failures))
    text = failures[0].text or ""
    if "counterexample to Property." not in text or "replay it: " not in text:
        fail("the failure does not carry the report: " + text[:200])
print("junit_valid: %d test cases, %d failures, %s s" % (len(cases), len(failures), suite.get("time")))
