"""keep_going_findings.py JSON JUNIT: check.KeepGoingReportsEveryBug's verdict on the three-bug kernel's
--keep-going run (keep_going_and_jobs.sh every_bug): three findings of three kinds, each with its replay
file; the wrong value's finding with its element's fields and the one feature it fails only with; the
NaN empty rows' with the policy that would accept them; a JUnit failure each."""
import json
import os
import sys
import xml.etree.ElementTree as E

d = json.load(open(sys.argv[1]))
kinds = [f['kind'] for f in d['findings']]
assert sorted(kinds) == ['crashed', 'wrong special value', 'wrong value'], kinds
assert all(os.path.exists(f['replay']) for f in d['findings'])
w = [f for f in d['findings'] if f['kind'] == 'wrong value'][0]
assert w['fails_only_with'] == ['explicit scale'] and w['tensor'] == 'out' and len(w['index']) == 4 and w['bound'] > 0 and abs(
    w['computed'] - w['exact']) > w['bound'] and w['shape'].startswith('B 1 H 1'), w
n = [f for f in d['findings'] if f['kind'] == 'wrong special value'][0]
assert n['accepted_under'] == ['--empty-rows nan'] and n['computed'] == 'nan' and n['exact'] == 0, n
suite = E.parse(sys.argv[2]).getroot().find('testsuite')
assert int(suite.get('failures')) == len(kinds), suite.attrib
