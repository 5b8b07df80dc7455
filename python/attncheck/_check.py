"""attncheck.check: the whole campaign against a Python function, from pytest or a script."""
import importlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from ._adapters import masked
from ._protocol import capability_bits, limit_values, restriction_bits
from ._replay import numpy_source, problem_from_replay
from ._serve import default_capabilities

SERVING = "ATTNCHECK_SERVING"  # set by `python3 -m attncheck serve`, the child check() starts


def find_binary():
    """The attncheck program: $ATTNCHECK_BIN, else attncheck on PATH, else the source tree's build."""
    if os.environ.get("ATTNCHECK_BIN"):
        return os.environ["ATTNCHECK_BIN"]
    on_path = shutil.which("attncheck")
    if on_path:
        return on_path
    tree = Path(__file__).resolve().parents[2]
    built = tree / "build" / "cli" / "attncheck"
    if built.is_file():
        return str(built)
    if (tree / "ci" / "check").is_file():  # the client in its source tree, not yet built
        raise FileNotFoundError(f"the attncheck program was not found: build the source tree (ci/check) so that "
                                f"{built} exists, or set ATTNCHECK_BIN")
    raise FileNotFoundError("the attncheck program was not found on PATH: install it (in its source tree, "
                            "`cmake --install build --prefix ~/.local` puts it in ~/.local/bin), or set ATTNCHECK_BIN")


def _own_path():
    """This process's sys.path beyond the interpreter's own (its standard library and site-packages),
    with this package's folder first."""
    interpreter = {os.path.realpath(p) for p in sysconfig.get_paths().values()}
    interpreter |= {os.path.realpath(p) for p in site.getsitepackages() + [site.getusersitepackages()]}
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    own = [str(Path(__file__).resolve().parents[1])]
    for p in sys.path:
        p = os.path.realpath(p or os.getcwd())
        if p not in interpreter and p not in own and not p.startswith(stdlib) and os.path.isdir(p):
            own.append(p)
    return own


def replay_name(fn):
    """The default replay file of a finding of fn: attncheck-MODULE.NAME.replay, so that two tests'
    functions of one name (each module's `forward`) keep a file each."""
    spec = spec_of(fn).split(":")[-2:]  # a masked function's own module and name
    module = os.path.splitext(os.path.basename(spec[0]))[0] if spec[0].endswith(".py") else spec[0]
    return "attncheck-" + re.sub(r"[^A-Za-z0-9_.-]", "_", module + "." + spec[1]) + ".replay"


def spec_of(fn):
    """Where a child process finds fn again: 'MODULE:NAME' or 'FILE.py:NAME', with masked: in front."""
    if isinstance(fn, masked):
        return f"masked-{fn.tensors}:" + spec_of(fn.fn)
    name = getattr(fn, "__qualname__", None)
    module = getattr(fn, "__module__", None)
    if not name or not module or "<" in name:
        raise TypeError(f"attncheck.check runs {name or fn!r} in a child process, which imports it by name: "
                        "define it at the top level of a module (not a lambda or a nested function)")
    if module == "__main__":
        return os.path.abspath(sys.modules["__main__"].__file__) + ":" + name
    return f"{module}:{name}"


def load(spec):
    """The function a spec names (the child's side of spec_of)."""
    if spec.startswith("masked-"):
        tensors, rest = spec[len("masked-"):].split(":", 1)
        return masked(load(rest), tensors=tensors)
    where, name = spec.rsplit(":", 1)
    if where.endswith(".py"):
        loaded = importlib.util.spec_from_file_location("attncheck_served", where)
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    fn = module
    for part in name.split("."):
        fn = getattr(fn, part)
    return fn


def check(forward, seconds=20, capabilities=None, seed=None, backward=None, empty_rows="zero", lse_empty="ninf",
          masked_inputs="any", keep_going=False, counterexample=None, args=(), restrictions=None, limits=None,
          cases=None):
    """Runs `attncheck check --impl-cmd` on forward (and backward): returns the JSON report on a
    pass; raises AssertionError carrying the report on a finding, RuntimeError when it cannot run.

    forward and backward are found again by name in the child process, so they must be defined at
    the top level of a module. seed: the campaign's (None: $ATTNCHECK_SEED, else 1; printed in
    the report). empty_rows, lse_empty, masked_inputs: the policies, the conventions forward is
    checked against (`attncheck check --help`, docs/contract.md "Policies"): empty_rows "zero",
    "nan", "mean" (the mean of V, what a finite mask value gives) or "any"; lse_empty "ninf" or
    "zero"; masked_inputs "any" or "finite" (NaN and inf only where every query looks: a
    textbook `weights @ v`). The report says which it assumed. keep_going: run the whole budget
    and raise with every distinct finding, each with its replay file in attncheck-MODULE.NAME/
    (counterexample then names that folder). counterexample: where the replay file of a finding goes (default
    attncheck-MODULE.NAME.replay in the current directory, replay_name). args: more options for `attncheck check`.
    restrictions, limits: what forward takes of what it claims, as serve() takes them (default: its own
    attributes). cases: also stop after that many property runs (`attncheck check --cases`): with a
    generous `seconds`, the same runs on any machine, loaded or not. A run that could not check enough (most calls not taken, a property that never ran)
    raises RuntimeError: it is inconclusive, not a pass.
    In the child itself (while it imports the module that calls check) this returns None at once.
    """
    __tracebackhide__ = True  # pytest shows the report it raises, not this function's source
    if os.environ.get(SERVING):
        return None
    names = sorted(default_capabilities(forward) if capabilities is None else capabilities)
    capability_bits(names)  # an unknown name is a ValueError here, not a child that cannot start
    # The child finds attncheck and the caller's modules where this process does: the command names
    # them, so that the replay line it prints works from any shell.
    child = ["env", "PYTHONPATH=" + os.pathsep.join(_own_path()), sys.executable, "-m", "attncheck", "serve",
             spec_of(forward), "--capabilities", ",".join(names)]
    if backward is not None:
        child += ["--backward", spec_of(backward)]
    restrictions = getattr(forward, "restrictions", None) if restrictions is None else restrictions
    limits = getattr(forward, "limits", None) if limits is None else limits
    if restrictions:
        restriction_bits(restrictions)  # an unknown name is a ValueError here too
        child += ["--restrictions", ",".join(restrictions)]
    if limits:
        limit_values(limits)
        child += ["--limits", json.dumps(limits)]
    seed = int(os.environ.get("ATTNCHECK_SEED", "1")) if seed is None else seed
    counterexample = counterexample or (replay_name(forward)[:-len(".replay")] if keep_going else replay_name(forward))
    with tempfile.TemporaryDirectory() as scratch:
        report_path = os.path.join(scratch, "report.json")
        command = [find_binary(), "check", "--impl-cmd", shlex.join(child), "--seconds", str(seconds),
                   "--seed", str(seed), "--empty-rows", empty_rows, "--lse-empty", lse_empty,
                   "--masked-inputs", masked_inputs,
                   *(["--keep-going", "--counterexample-dir"] if keep_going else ["--counterexample"]), counterexample,
                   "--json", report_path, *(["--cases", str(cases)] if cases else []), *args]
        run = subprocess.run(command, capture_output=True, text=True)
        report = json.load(open(report_path)) if os.path.exists(report_path) else None
    text = f"$ {shlex.join(command)}\n{run.stdout}{run.stderr}"
    if run.returncode == 0:
        return report
    if run.returncode == 1:
        if os.path.isfile(counterexample):
            try:
                text += "\nthe counterexample as NumPy arrays, to paste into a test:\n" + numpy_source(
                    *problem_from_replay(counterexample)) + "\n"
            except ValueError:  # a property that draws no case: the report says it all
                pass
        raise AssertionError(f"attncheck found a counterexample (seed {seed}):\n{text}")
    raise RuntimeError(f"attncheck could not check {spec_of(forward)} (exit {run.returncode}):\n{text}")
