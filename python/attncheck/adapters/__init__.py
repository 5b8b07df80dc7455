"""Adapters: the attention people run, each a child of `attncheck check --impl-cmd`.

One module per implementation, run as

    attncheck check --impl-cmd "python3 -m attncheck.adapters.NAME [OPTIONS]"

Each translates attncheck's problem into the library's own inputs and calls the library: it adds no
masking, scaling, NaN handling or re-computation of its own, says in its docstring and --help where
a feature had to be translated into what the library takes, and claims exactly what the library
supports. README.md, "Checking a shipped runtime", has each one's command line.
"""
import importlib
import sys

# A problem the library's entry point cannot be given that no restriction states (GroupQueryAttention's
# Tq > Tk, an explicit scale for a torch without scale=): counted as not taken, never a finding.
from .._serve import NotExpressible  # noqa: F401  (the adapters' name for it)


def library(name, adapter):
    """The module `name` imported, or one line on stderr and exit 2 when it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        sys.stderr.write(f"attncheck.adapters.{adapter}: needs the Python package '{name}', which does not import "
                         f"here ({error}); ci/lib.sh's ensure_venvs installs the pinned one\n")
        sys.exit(2)
