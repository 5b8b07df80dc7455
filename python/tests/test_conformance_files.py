"""ci/conformance.py's files, on a tree of its own in tmp_path: what a run replaces in --docs (its
rows' folders, docs/conformance.md, the README's summary) and what it leaves (layers.md, kept by hand,
and anything else there), and that a run that fails leaves the last one's files as they were. No
runtime runs: the rows are probed by a fake, the campaigns' reports are the last run's in --work
(--render-only), and a finding's standalone script is never written."""
import importlib.util
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROW = "jax-xla-x64"  # the row that runs here (f64 only); every other row is not installed
STALE = "ort-mha"  # a row whose last folder goes: it has no findings now
BEGIN, END = "<!-- conformance summary: written by ci/conformance -->", "<!-- end of the conformance summary -->"
FINDING = dict(kind="wrong value", property="ExplicitScaleIsHonoured", fails_only_with=["explicit scale"],
               accepted_under=[], message="", tensor="out", index=[0, 0, 0, 0], computed=1.0, exact=2.0, bound=0.1,
               shrunk_to="B1 H1 Tq1 Tk1", shape="B1 H1 Tq1 Tk1", replay="findings/scale.replay")


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """The module, run on tmp_path as its repository: the last run's docs and reports, and `run(...)`
    running its main() with those arguments."""
    spec = importlib.util.spec_from_file_location("conformance_under_test", ROOT / "ci" / "conformance.py")
    conformance = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conformance)
    monkeypatch.setattr(conformance, "ROOT", str(tmp_path))
    monkeypatch.setattr(conformance, "probe", lambda row, args: ("0.4.38", {"f64", "scale"}) if row.key == ROW
                        else (None, "not installed in this test"))
    # `attncheck repro` is not run: each finding is "not reproduced standalone (not run in this test)"
    refused = lambda command, **_: subprocess.CompletedProcess(command, 1, "", "not run in this test")
    monkeypatch.setattr(conformance, "subprocess", types.SimpleNamespace(
        run=refused, TimeoutExpired=subprocess.TimeoutExpired, STDOUT=subprocess.STDOUT))

    docs = tmp_path / "docs" / "conformance"
    for path, text in {"layers.md": "## Multi-head attention layers\n\nKept by hand.\n", "notes.txt": "mine\n",
                       "drafts/plan.md": "also mine\n", f"{ROW}/strict-1-Old.replay": "old\n",
                       f"{STALE}/strict-1-Old.replay": "old\n"}.items():
        (docs / path).parent.mkdir(parents=True, exist_ok=True)
        (docs / path).write_text(text)
    (tmp_path / "docs" / "conformance.md").write_text("# the last run's report\n")
    (tmp_path / "README.md").write_text(f"# attncheck\n{BEGIN}\nthe last summary\n{END}\nthe rest\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "run.json").write_text(json.dumps(dict(seconds=1, shrink_seconds=1, seed=1, started="2026-12-03T10:00:00",
                                                   commits={r.key: "abc1234" for r in conformance.ROWS})))
    for contract in ("strict", "conventions"):
        folder = work / ROW / f"{contract}-f64"
        (folder / "findings").mkdir(parents=True)
        (folder / "findings" / "scale.replay").write_text(  # a venv older than --venv-python
            "attncheck-replay 2\nimpl-cmd /old-venv/bin/python -m attncheck.adapters.jax\n")
        (folder / "report.json").write_text(json.dumps(dict(findings=[FINDING], domain=dict(restrictions=[]),
                                                            calls=10, calls_not_taken=0, not_taken_reasons=[])))

    def run(*extra):
        monkeypatch.setattr(sys, "argv", ["conformance.py", "--attncheck", "attncheck", "--venv-python",
                                          "/venv/bin/python", "--render-only", "--work", str(work), "--docs", str(docs),
                                          *extra])
        conformance.main()

    return types.SimpleNamespace(module=conformance, root=tmp_path, docs=docs, run=run)


def snapshot(root):
    """Every file under root, by its path relative to root: its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_run_replaces_its_rows_folders_and_nothing_else_in_docs(tree):
    before = snapshot(tree.docs)
    with pytest.raises(SystemExit) as exit:
        tree.run()
    assert exit.value.code == 0
    after = snapshot(tree.docs)
    for kept_by_hand in ("layers.md", "notes.txt", "drafts/plan.md"):
        assert after[kept_by_hand] == before[kept_by_hand]
    assert sorted(after) == sorted(["layers.md", "notes.txt", "drafts/plan.md",
                                    f"{ROW}/strict-1-ExplicitScaleIsHonoured.replay",
                                    f"{ROW}/conventions-1-ExplicitScaleIsHonoured.replay"])
    assert after[f"{ROW}/strict-1-ExplicitScaleIsHonoured.replay"] == \
        b"attncheck-replay 2\nimpl-cmd python3 -m attncheck.adapters.jax\n"
    assert sorted(p.name for p in tree.root.iterdir()) == ["README.md", "docs", "work"]  # no temporary left
    assert sorted(p.name for p in (tree.root / "docs").iterdir()) == ["conformance", "conformance.md"]
    readme = (tree.root / "README.md").read_text()
    assert readme.startswith(f"# attncheck\n{BEGIN}\n| implementation") and readme.endswith(f"\n{END}\nthe rest\n")


def test_the_layers_section_kept_by_hand_ends_the_report(tree):
    with pytest.raises(SystemExit):
        tree.run()
    report = (tree.root / "docs" / "conformance.md").read_text()
    assert report.endswith("\n## Multi-head attention layers\n\nKept by hand.\n")
    assert f"`docs/conformance/{ROW}/strict-1-ExplicitScaleIsHonoured.replay`" in report  # where --docs keeps it


def test_a_run_that_fails_while_rendering_leaves_the_last_runs_files(tree, monkeypatch):
    before = snapshot(tree.root)

    def render(*_):
        raise RuntimeError("rendering failed")
    monkeypatch.setattr(tree.module, "render", render)
    with pytest.raises(RuntimeError, match="rendering failed"):
        tree.run()
    after = snapshot(tree.root)
    # the work folder's run.json is rewritten (the same settings), nothing else is
    assert {k: v for k, v in after.items() if k != "work/run.json"} == \
        {k: v for k, v in before.items() if k != "work/run.json"}
    assert sorted(p.name for p in (tree.root / "docs").iterdir()) == ["conformance", "conformance.md"]


def test_a_folder_named_as_a_row_but_holding_other_files_is_never_replaced(tree):
    (tree.docs / ROW / "my-notes.md").write_text("not a replay file\n")
    before = snapshot(tree.root)
    with pytest.raises(SystemExit) as exit:
        tree.run()
    assert f"{tree.docs / ROW}" in str(exit.value.code) and "not ci/conformance.py's" in str(exit.value.code)
    assert snapshot(tree.root) == before
