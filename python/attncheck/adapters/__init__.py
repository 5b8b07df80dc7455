"""Adapters: the attention people run, each a child of `attncheck check --impl-cmd`.

One module per implementation, run as

    attncheck check --impl-cmd "python3 -m attncheck.adapters.NAME [OPTIONS]"

Each translates attncheck's problem into the library's own inputs and calls the library: it adds no
masking, scaling, NaN handling or re-computation of its own, says in its docstring and --help where
a feature had to be translated into what the library takes, and claims exactly what the library
supports. README.md, "Checking a shipped runtime", has each one's command line.

Each imports its library with library(), which keeps the version it found (ran(): what serve()
writes to stderr at the start) and refuses, in one line and with exit 2, a release older than the
first with the entry point the adapter calls. A feature that came later narrows the claims instead.
"""
import functools
import importlib
import re
import sys

# A problem the library's entry point cannot be given that no restriction states (GroupQueryAttention's
# Tq > Tk, an explicit scale for a torch without scale=): counted as not taken, never a finding.
from .._serve import NotExpressible  # noqa: F401  (the adapters' name for it)

RAN = {}  # the libraries library() imported: name -> version


def version(text):
    """A release's number as a tuple of its leading numbers: "2.15.0+cpu" -> (2, 15, 0), "2026.4.1-22982-e213" ->
    (2026, 4, 1); a suffix (a local build, a pre-release) is dropped."""
    match = re.match(r"\d+(\.\d+)*", str(text))
    return tuple(int(x) for x in match.group().split(".")) if match else ()


def refuse(adapter, why):
    """One line on stderr, exit 2: attncheck check then stops with it (docs/protocol.md: a child that cannot start)."""
    sys.stderr.write(f"attncheck.adapters.{adapter}: {why}\n")
    sys.exit(2)


def library(name, adapter, entry=None, since=None):
    """The module `name` imported, or one line on stderr and exit 2 when it is not installed, is older
    than `since` (the first release with what the adapter calls, a string such as "0.4.31") or lacks
    `entry` (that attribute path in the module, e.g. "nn.dot_product_attention"). Its version is kept for ran()."""
    try:
        module = importlib.import_module(name)
    except ImportError as error:
        refuse(adapter, f"needs the Python package '{name}', which does not import here ({error}); ci/lib.sh's "
                        f"ensure_venvs installs the pinned one")
    installed = getattr(module, "__version__", "(no __version__)")
    what = f"{name}.{entry}" if entry else "what the adapter calls"
    if since is not None and version(installed) and version(installed) < version(since):  # none: not judged
        refuse(adapter, f"{name} {installed} is older than {since}, the first release with {what}; run it with a "
                        f"python that has {name} {since} or later (README.md, \"Checking a shipped runtime\")")
    if entry is not None and _attribute(module, entry) is None:
        refuse(adapter, f"{name} {installed} has no {what}; run it with a python whose {name} has it "
                        f"(README.md, \"Checking a shipped runtime\")")
    RAN[name.split(".")[0]] = installed
    return module


def _attribute(module, path):
    try:
        return functools.reduce(getattr, path.split("."), module)
    except AttributeError:
        return None


def ran():
    """The libraries this adapter imported and their versions: "onnxruntime 1.32.0, onnx 1.23.2"."""
    return ", ".join(f"{name} {installed}" for name, installed in RAN.items())


def serve(adapter, served):
    """attncheck.serve(**served), after one line on stderr that names the libraries and versions called;
    nothing when served is None (the adapter's setup() printed what an option asked for)."""
    if served is None:
        return
    import attncheck  # here, not above: the modules run without attncheck in attncheck repro's standalone scripts
    sys.stderr.write(f"attncheck.adapters.{adapter}: calling {ran()}\n")
    sys.stderr.flush()
    attncheck.serve(**served)
