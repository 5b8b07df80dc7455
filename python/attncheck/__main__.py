"""python3 -m attncheck serve MODULE:NAME (or FILE.py:NAME) [--capabilities f32,allow] [--backward SPEC]
[--restrictions causal,square] [--limits '{"max_Tq": 1024}']:
serves a function to `attncheck check --impl-cmd` without a serve() call in its file.
python3 -m attncheck numpy FILE.replay: a kept counterexample as NumPy arrays to paste into a test."""
import argparse
import json
import os

from ._check import SERVING, load
from ._replay import numpy_source, problem_from_replay
from ._serve import serve


def main():
    parser = argparse.ArgumentParser(prog="python3 -m attncheck")
    commands = parser.add_subparsers(dest="command", required=True)
    serving = commands.add_parser("serve", help="serve a function over the child protocol on stdin/stdout")
    serving.add_argument("forward", help="MODULE:NAME or FILE.py:NAME; masked-numpy: or masked-torch: in front "
                                         "wraps fn(Q, K, V, mask) with attncheck.masked")
    serving.add_argument("--capabilities", help="comma-separated, e.g. f32,f64,allow,causal (default: the function's own, else f32)")
    serving.add_argument("--backward", help="MODULE:NAME of backward(p, dout) -> (dq, dk, dv)")
    serving.add_argument("--restrictions", help="comma-separated, e.g. causal,square,default_scale (attncheck features "
                                                "lists them; default: the function's own, else none)")
    serving.add_argument("--limits", help='a JSON object, e.g. {"max_Tq": 1024, "head_dims": [64, 128]}')
    show = commands.add_parser("numpy", help="print a replay file's case as NumPy arrays")
    show.add_argument("replay", help="a replay file written by attncheck check (--counterexample)")
    options = parser.parse_args()
    if options.command == "numpy":
        try:
            print(numpy_source(*problem_from_replay(options.replay)))
        except (OSError, ValueError, KeyError) as e:
            raise SystemExit(f"python3 -m attncheck numpy: {e}")
        return
    os.environ[SERVING] = "1"  # a module that calls attncheck.check() as it is imported does not recurse
    forward = load(options.forward)
    backward = load(options.backward) if options.backward else None
    capabilities = set(options.capabilities.split(",")) if options.capabilities else None
    restrictions = options.restrictions.split(",") if options.restrictions else None
    limits = json.loads(options.limits) if options.limits else None
    serve(forward, capabilities=capabilities, backward=backward, restrictions=restrictions, limits=limits)


main()
