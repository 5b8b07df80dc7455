"""error_bound_is_the_findings.py INF_JSON FINITE_JSON FINITE_TXT: check.TheReportedErrorBoundIsTheFindings's
verdict (reports.sh error_bound): the summary's largest error/bound is the finding's, in the JSON and on the
summary line; a wrong special value's is "inf" (never null), a bound failure's a finite number above 1."""
import json
import sys

i = json.load(open(sys.argv[1]))
f = json.load(open(sys.argv[2]))
line = open(sys.argv[3]).read().splitlines()[-1]
assert i['largest_error_bound_ratio'] == i['finding']['error_bound_ratio'] == 'inf', i
r = f['finding']['error_bound_ratio']
assert f['largest_error_bound_ratio'] == r and 1 < r < float('inf') and line.endswith('largest error/bound %.3g' % r), (line, r)
