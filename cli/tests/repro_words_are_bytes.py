"""repro_words_are_bytes.py STANDALONE_PY PYTEST_PY: repro.WordsThatAreNotUtf8MakePythonThatCompiles's verdict
(repro_of_a_command.sh words_not_utf8): in the Python repro wrote, each word that is not UTF-8 (byte 0xff) is a
string that encodes back to its bytes (os.fsencode): the standalone script's ADAPTER_OPTIONS ['--x', 0xff] and
the pytest file's COMMAND, which ends in ' zeros ' 0xff."""
import ast
import os
import sys


def assigned(f, name):
    return next(n.value for n in ast.parse(open(f, 'rb').read()).body
                if isinstance(n, ast.Assign) and getattr(n.targets[0], 'id', '') == name)


o = ast.literal_eval(assigned(sys.argv[1], 'ADAPTER_OPTIONS'))
c = ast.literal_eval(assigned(sys.argv[2], 'COMMAND').args[1])
assert [os.fsencode(w) for w in o] == [b'--x', b'\xff'], o
assert os.fsencode(c).endswith(b' zeros \xff'), c
