# pytest finds the client in the source tree (or wherever `pip install ./python` put it).
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
