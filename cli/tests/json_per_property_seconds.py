"""json_per_property_seconds.py JSON: report.JsonHasPerPropertySeconds: `attncheck check --json` gives each
property that ran its seconds (none negative) and the run's seed; prints the seconds."""
import json
import sys

r = json.load(open(sys.argv[1]))
s = r['per_property_seconds']
assert s.keys() == r['per_property'].keys() and all(t >= 0 for t in s.values()), s
assert 'seed' in r, 'the JSON report has no seed'
print(s)
