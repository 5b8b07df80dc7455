"""The conformance report (ci/conformance runs this): every adapter's library under the strict
contract and under its documented conventions, for each format it has, every finding kept.

For each row of ROWS (an implementation, its version and entry point) and each format the adapter
claims, `attncheck check --keep-going --dtype F` runs twice: strict, and with the row's
conventions. A finding is put in the columns of the claims it is about (COLUMNS: from the features
it fails only with, the policy that would accept it, its kind); the same finding in several formats
is listed once. What the library takes is its adapter's restrictions (never sent a problem outside
them) and the calls it could not take (NotExpressible: counted, not findings). Each finding's replay file is kept in docs/conformance/ROW/, and `attncheck repro
--standalone yes` turns it into a script that is run with the row's python, isolated (-I, no
attncheck importable), to show that the library alone reproduces it. A full run first keeps the
table it replaces (--work/previous) and replays each of its findings on the release installed now,
for the section "What changed since the previous table". Writes docs/conformance.md
and the README's summary between its markers. Nothing is replaced before the whole report is
rendered, and in --docs only the rows' folders are (docs/conformance/layers.md is kept by hand).
"""
import argparse
import concurrent.futures
import dataclasses
import datetime
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMATS = ("f32", "f64", "f16", "bf16")
STRICT, CONVENTIONS = "strict", "conventions"


@dataclasses.dataclass
class Row:
    key: str  # its folder in docs/conformance and its anchor
    implementation: str
    package: str  # the Python distribution whose version is measured
    entry: str  # the entry point, as its users call it
    adapter: str  # python -m attncheck.adapters.ADAPTER OPTIONS
    options: list
    conventions: list  # attncheck's policy flags for what the library documents
    documented: str  # where the conventions come from
    python: str = "venv"  # or "system": Debian's python3 (torch 1.13); "torch": --torch-python's (torch 2.x);
    # "mlx": --mlx-python's (MLX on the CPU)
    # "keras": --keras-python's (keras 3 on jax); keras on torch is in --torch-python's
    # "llama": --llama-python's (llama.cpp's ggml, llama-cpp-python built from its sdist)
    formats: tuple = FORMATS  # of those the adapter claims, the ones this row checks
    check: tuple = ()  # more flags of attncheck check, under both contracts
    slow: float = 1  # its campaigns get this many times --seconds: its calls compile per shape, and in
    # --seconds alone some applicable properties never run (INCONCLUSIVE)


_ORT_EMPTY = "an empty row gives 0 (onnxruntime PR 28958): the contract's own; 0 x NaN of a masked value is not guarded"
_FINITE = ["--masked-inputs", "finite"]
ROWS = [
    Row("ort-attention-23", "ONNX Runtime", "onnxruntime", "ONNX `Attention`, opset 23", "onnxruntime",
        ["--op", "attention", "--opset", "23"], _FINITE, _ORT_EMPTY),
    Row("ort-attention-24", "ONNX Runtime", "onnxruntime", "ONNX `Attention`, opset 24 (nonpad_kv_seqlen)",
        "onnxruntime", ["--op", "attention", "--opset", "24"], _FINITE,
        _ORT_EMPTY + "; is_causal with nonpad_kv_seqlen is the specification's \"bottom-right (offset-aware)\" mask "
        "(onnx 1.23): j <= i + nonpad_kv_seqlen[b] - Tq, attncheck's KV-end causal (docs/contract.md)"),
    Row("ort-gqa", "ONNX Runtime", "onnxruntime", "com.microsoft `GroupQueryAttention` (KV cache)", "onnxruntime",
        ["--op", "gqa"], _FINITE, "no empty-row value documented; masked positions are zeroed after the softmax"),
    Row("ort-mha", "ONNX Runtime", "onnxruntime", "com.microsoft `MultiHeadAttention`", "onnxruntime", ["--op", "mha"],
        _FINITE, "masked scores get mask_filter_value (default -10000), which no policy of attncheck's accepts"),
    Row("torch-1.13", "PyTorch", "torch", "`torch.nn.functional._scaled_dot_product_attention` (Debian's 1.13)",
        "torch_sdpa", [], ["--empty-rows", "nan"] + _FINITE,
        "a fully masked row is NaN before 2.5 (the docs' equivalent code still gives NaN)", python="system"),
    Row("torch-2.15-math", "PyTorch", "torch", "`torch.nn.functional.scaled_dot_product_attention`, "
        "`sdpa_kernel(SDPBackend.MATH)` (PyPI's 2.15)", "torch_sdpa", ["--backend", "math"], _FINITE,
        "a fully masked row gives 0 since 2.5 (the contract's own); the mask is added to the scores", python="torch"),
    Row("torch-2.15-flash", "PyTorch", "torch", "the same under `sdpa_kernel(SDPBackend.FLASH_ATTENTION)`, the CPU "
        "flash kernel", "torch_sdpa", ["--backend", "flash"], _FINITE, "as above", python="torch"),
    Row("torch-2.15-flex", "PyTorch", "torch", "`torch.nn.attention.flex_attention.flex_attention` with "
        "`create_block_mask` and `score_mod`, eager on the CPU (PyPI's 2.15)", "flex_attention", [], _FINITE,
        "a fully masked row gives 0 and lse -inf (torch._safe_softmax: the contract's own); forbidden scores become "
        "-inf (torch.where) but the weights multiply all of V", python="torch"),
    Row("jax-xla", "JAX", "jax", "`jax.nn.dot_product_attention(implementation=\"xla\")`", "jax", [],
        ["--empty-rows", "mean"] + _FINITE, "a forbidden score is -0.7 x finfo.max: an empty row is the mean of V",
        slow=3),  # f16 and bf16 op by op: 8 cases in 30 s
    Row("jax-xla-x64", "JAX", "jax", "the same with jax_enable_x64, float64", "jax", ["--enable-x64"],
        ["--empty-rows", "mean"] + _FINITE, "as above", formats=("f64",)),
    Row("mlx-cpu", "MLX", "mlx", "`mx.fast.scaled_dot_product_attention` on `mx.cpu` (PyPI's `mlx[cpu]`)", "mlx", [],
        ["--empty-rows", "mean"] + _FINITE, "a bool mask replaces a forbidden score with finfo(dtype).min (its CPU "
        "composite, mlx/fast.cpp): an empty row is the mean of V; the weights multiply all of V", python="mlx"),
    Row("mlx-cpu-f64", "MLX", "mlx", "the same in float64 (--f64; its softmax stays in float32, as documented)", "mlx",
        ["--f64"], ["--empty-rows", "mean"] + _FINITE, "as above", python="mlx", formats=("f64",)),
    Row("keras-ops-jax", "Keras", "keras", "`keras.ops.dot_product_attention` on the JAX backend (keras 3)", "keras",
        ["--api", "ops"], ["--empty-rows", "mean"] + _FINITE,
        "it calls jax.nn.dot_product_attention: an empty row is the mean of V, as jax's", python="keras",
        check=("--case-timeout", "120"), slow=3),  # eager: each new shape compiles anew, 2 to 4 s a case
    Row("keras-ops-torch", "Keras", "keras", "`keras.ops.dot_product_attention` on the torch backend (keras 3; "
        "torch's SDPA, PyPI's 2.15)", "keras", ["--api", "ops", "--backend", "torch"], ["--empty-rows", "mean"] + _FINITE,
        "a bool mask becomes -0.7 x finfo.max added to the scores (keras/src/backend/torch/nn.py): an empty row is the "
        "mean of V", python="torch"),
    Row("llama-cpp-flash", "llama.cpp", "llama_cpp_python", "`ggml_flash_attn_ext` on the CPU as llama.cpp's "
        "build_attn_mha calls it (-fa on; f16 KV cache, f16 KQ mask)", "llama_cpp", ["--path", "flash"], _FINITE,
        "a row with no permitted key gives 0 (ggml's S_inv = 0); a forbidden key is skipped below 64 query rows, "
        "but from 64 on (the tiled path) the weights multiply all of V", python="llama", formats=("f32", "f16")),
    Row("llama-cpp-softmax", "llama.cpp", "llama_cpp_python", "`ggml_mul_mat` / `ggml_soft_max_ext` / `ggml_mul_mat` "
        "as build_attn_mha without flash attention (-fa off; f16 KV cache, f32 KQ mask)", "llama_cpp",
        ["--path", "softmax"], ["--empty-rows", "nan"] + _FINITE,
        "the mask is added to every score and the softmax takes the whole row: an empty row is NaN (-inf - -inf), "
        "the weights multiply all of V", python="llama", formats=("f32", "f16")),
    Row("openvino-f32", "OpenVINO", "openvino", "`opset13.scaled_dot_product_attention`, INFERENCE_PRECISION_HINT f32",
        "openvino", ["--precision", "f32"], ["--empty-rows", "nan"] + _FINITE,
        "the spec's reference is Select(!mask, -inf, 0) then softmax: an all-false mask gives NaN (openvino 35959)"),
    Row("openvino-default", "OpenVINO", "openvino", "the same at its default precision hint", "openvino",
        ["--precision", "default"], ["--empty-rows", "nan"] + _FINITE, "as above"),
    Row("openvino-paged", "OpenVINO", "openvino", "`PagedAttentionExtension` (vLLM's and openvino.genai's paged "
        "attention), the CPU plugin's PagedAttention node", "openvino", ["--op", "paged"], _FINITE,
        "the op has no mask but its own causal one at each sequence's cache end (src/core/src/op/paged_attention.cpp)"),
]

# The claims, one column each: (header, the capability a library needs for it to apply, or None).
COLUMNS = [("forbidden inputs", "masks"), ("empty rows", "masks"), ("allow mask", "allow"), ("causal alignment", "causal"),
           ("key lengths", "kv_lens"), ("GQA", "gqa"), ("window", "window"), ("soft-cap", "softcap"), ("bias", "bias"),
           ("scale", None), ("lse", "lse"), ("backward", "backward"), ("KV cache", "kv_cache"), ("paged", "paged_kv"),
           ("varlen", "varlen"), ("sinks", "sinks")] + [(f, f) for f in FORMATS] + \
          [("the bound", None), ("precision gate", None), ("refusals", None)]
MASKS = {"allow", "causal", "kv_lens", "window", "bias"}
# A feature a finding fails only with (attncheck's diagnosis; cli/src/diagnosis.cpp) -> its column.
FEATURE_COLUMN = {"allow mask": "allow mask", "causal": "causal alignment", "key lengths": "key lengths",
                  "grouped KV heads": "GQA", "window": "window", "soft-cap": "soft-cap", "bias": "bias",
                  "explicit scale": "scale", "lse": "lse", "backward": "backward", "KV-end causal": "KV cache",
                  "paged KV": "paged", "varlen": "varlen", "sinks": "sinks"}
REFUSALS = {"raised", "refused", "crashed", "hung"}
KEPT_BYTES = 100_000  # the largest replay file docs/conformance keeps
# The files a row's folder in --docs holds: a finding's replay file, as keep_and_reproduce names it.
KEPT_NAME = re.compile(rf"({STRICT}|{CONVENTIONS})-(\d+)-(\w+)\.replay")


def columns_of(finding):
    """The claims a finding deviates from, formats aside (a format's cell is found by own())."""
    columns = {FEATURE_COLUMN[w] for w in finding["fails_only_with"] if w in FEATURE_COLUMN}
    accepted = finding["accepted_under"]
    if finding["kind"] in REFUSALS:
        columns.add("refusals")
    elif any(a.startswith("--empty-rows") for a in accepted):
        columns.add("empty rows")
    elif finding["kind"] == "changed by a poisoned forbidden input" or "--masked-inputs finite" in accepted or \
            "may not see key" in finding.get("message", ""):  # ANanOrInfPermittedScoreMakesItsRowNaN's other rows
        columns.add("forbidden inputs")
    elif finding["kind"] == "imprecise":
        columns.add("precision gate")
    if not columns:
        columns.add("the bound")
    return columns


def python_of(row, args):
    return {"venv": args.venv_python, "torch": args.torch_python, "mlx": args.mlx_python,
            "keras": args.keras_python, "llama": args.llama_python}.get(row.python, "/usr/bin/python3")


def environment():
    return dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), PYTHONDONTWRITEBYTECODE="1")


def probe(row, args):
    """(version, claimed capabilities) of a row, or (None, the one line saying why it cannot run)."""
    if python_of(row, args) is None:
        return None, f"no --{row.python}-python given (ci/lib.sh's ensure_venvs makes it)"
    code = ("import importlib, importlib.metadata as m, sys; a = importlib.import_module('attncheck.adapters.' + "
            "sys.argv[1]); print(m.version(sys.argv[2])); print(' '.join(sorted(a.setup(sys.argv[3:])['capabilities'])))")
    run = subprocess.run([python_of(row, args), "-c", code, row.adapter, row.package] + row.options,
                         capture_output=True, text=True, env=environment(), timeout=300)
    if run.returncode != 0:
        return None, (run.stderr.strip().splitlines() or ["exit %d" % run.returncode])[-1]
    version, claims = run.stdout.split("\n")[:2]
    return version, set(claims.split())


def command_of(row, args):
    return " ".join([python_of(row, args), "-m", "attncheck.adapters." + row.adapter] + row.options)


def run_check(row, fmt, contract, args):
    """One campaign; its JSON report (None when attncheck itself failed: exit 2)."""
    folder = os.path.join(args.work, row.key, f"{contract}-{fmt}")
    report = os.path.join(folder, "report.json")
    if args.render_only:
        return json.load(open(report)) if os.path.exists(report) else None
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    policy = row.conventions if contract == CONVENTIONS else []
    command = [args.attncheck, "check", "--impl-cmd", command_of(row, args), "--dtype", fmt, "--keep-going",
               "--seconds", str(args.seconds * row.slow), "--shrink-seconds", str(args.shrink_seconds), "--seed", str(args.seed),
               "--jobs", "1", "--json", report, "--counterexample-dir", os.path.join(folder, "findings")] + policy + \
        list(row.check)
    with open(os.path.join(folder, "output.txt"), "w") as output:
        run = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, env=environment(), cwd=folder)
    print(f"conformance: {row.key} {contract} {fmt}: exit {run.returncode}", flush=True)
    return json.load(open(report)) if run.returncode in (0, 1, 3) and os.path.exists(report) else None


def merged(runs):
    """The findings of one row under one contract, each cause once: dicts of the first one's fields
    plus 'formats' (where it was found), 'columns' and 'also' (the other properties it broke). Two
    findings are of one cause when they fail only with the same features (formats aside), are
    accepted under the same policies and are both refusals or both wrong outputs; a finding that
    needs no feature is one with those the same policies accept, or else its property's and kind's
    alone."""
    found = {}
    for fmt, report in runs.items():
        for f in (report or {}).get("findings", []):
            needs = tuple(sorted(set(f["fails_only_with"]) - set(FORMATS)))
            cause = (f["kind"] in REFUSALS, needs) if needs else ("accepted",) if f["accepted_under"] else \
                (f["property"], f["kind"])  # a policy accepting it names the cause (the empty row's value, ...)
            entry = found.setdefault(cause + tuple(f["accepted_under"]),
                                     dict(f, formats=[], columns=set(), also=[], folder=fmt))
            entry["columns"] |= columns_of(f)
            if fmt not in entry["formats"]:
                entry["formats"].append(fmt)
            named = f"Property.{f['property']} ({f['kind']})"
            if f["property"] != entry["property"] and named not in entry["also"]:
                entry["also"].append(named)
    return list(found.values())


def keep_and_reproduce(row, contract, number, finding, args, staging):
    """Copies the finding's replay file into its row's folder in staging, which becomes the row's
    folder in --docs (its command with the venv's python shown as python3), writes its standalone
    script and runs it; returns what happened."""
    if not finding.get("replay"):
        finding["kept"] = "no replay file"
        return "not reproduced standalone (the finding has no replay file)"
    source = os.path.join(args.work, row.key, f"{contract}-{finding['folder']}", finding["replay"])
    name = os.path.join(row.key, f"{contract}-{number}-{finding['property']}.replay")
    # the python as python3, whichever venv ran it (an --only run re-renders rows an older venv ran)
    text = re.sub(r"^impl-cmd \S+ -m ", "impl-cmd python3 -m ", open(source).read(), count=1, flags=re.M)
    if len(text) > KEPT_BYTES:  # not shrunk in its budget: the repository keeps no megabytes of it
        finding["kept"] = f"{os.path.relpath(source, ROOT)}, not kept: {len(text) / 1e6:.1f} MB, not shrunk in time"
    else:
        os.makedirs(os.path.join(staging, row.key), exist_ok=True)
        with open(os.path.join(staging, name), "w") as kept:
            kept.write(text)
        finding["kept"] = os.path.relpath(os.path.join(args.docs, name), ROOT)
    script = os.path.join(args.work, row.key, f"{contract}-{number}.standalone.py")
    repro = [args.attncheck, "repro", source, "--standalone", "yes", "--out", script]
    written = subprocess.run(repro, capture_output=True, text=True)
    if written.returncode != 0:  # no call kept (a backward, a crash): the property once more, on the adapter named here
        try:
            written = subprocess.run(repro + ["--impl-cmd", command_of(row, args)], capture_output=True, text=True,
                                     env=environment(), timeout=600)
        except subprocess.TimeoutExpired:
            return "not reproduced standalone (the property's run once more took over 600 s)"
    if written.returncode != 0:
        why = (written.stderr.strip().splitlines() or ["?"])[-1].split(".replay: ", 1)[-1]
        return f"not reproduced standalone ({why[:200]})"
    try:
        run = subprocess.run([python_of(row, args), "-I", script], capture_output=True, text=True, timeout=300,
                             cwd=os.path.dirname(script))
    except subprocess.TimeoutExpired:
        return "the standalone script did not finish in 300 s"
    return "reproduced standalone" if shown(finding, run) else \
        f"NOT reproduced standalone (the script exits {run.returncode}: {last_line(run)[:160]})"


def last_line(run):
    return ((run.stderr or run.stdout).strip().splitlines() or [""])[-1]


def shown(finding, run):
    """Whether a standalone script's run shows the finding itself: the same exception (raised), a
    death by a signal (crashed), else the element named outside the bound; an exit of 1 alone (a
    traceback of anything) is not enough."""
    raised = re.search(r"raised (\w+): ", finding.get("message") or "")
    if finding["kind"] == "raised":
        return run.returncode == 1 and raised is not None and f"{raised[1]}: " in last_line(run)
    if finding["kind"] == "crashed":
        return run.returncode < 0
    element = f"{finding['tensor']}[{', '.join(str(i) for i in finding['index'])}] = " if finding.get("tensor") else ""
    return run.returncode == 1 and "elements outside attncheck's bound" in run.stdout and element in run.stdout


def describe(f):
    """One line: what the finding is."""
    what = f"{f['kind']}, Property.{f['property']}"
    if f["kind"] in REFUSALS and f.get("message"):
        line = f["message"].splitlines()[0]  # a library's message ends with its reason: keep both ends
        what += ": " + (line if len(line) <= 240 else line[:100] + " ... " + line[-130:])
    elif f.get("tensor"):
        index = ",".join(str(i) for i in f["index"] or [])
        bound = f["bound"] if isinstance(f["bound"], str) else f"{f['bound']:.3g}"
        what += f": {f['tensor']}[{index}] = {f['computed']}, exact {f['exact']}, bound {bound}"
    if f["fails_only_with"]:
        what += "; fails only with " + ", ".join(f["fails_only_with"])
    if f["accepted_under"]:
        what += "; accepted under " + ", ".join(f["accepted_under"])
    also = f"; also {', '.join(f['also'])}" if f["also"] else ""
    return what + f"; shrunk to {f['shrunk_to'] or f['shape']}; in {', '.join(f['formats'])}{also}"


def ran(reports):
    """The formats whose campaign gave a report (not those attncheck itself failed on)."""
    return [fmt for fmt, report in reports.items() if report is not None]


def own(finding, fmt, ran):
    """Whether a finding is the format's own: it fails only with it (attncheck's diagnosis), or it is
    a half format's and was found in none of the wide formats the row ran (a seconds budget finds a
    finding in one wide format and not another by chance, so found-here-not-there says nothing)."""
    wide = [w for w in ("f32", "f64") if w in ran]
    return fmt in finding["fails_only_with"] or (
        fmt in ("f16", "bf16") and fmt in finding["formats"] and bool(wide) and not set(wide) & set(finding["formats"]))


def cell(row_claims, column, need, findings, ran, anchor):
    """One claim of one row: conforms, deviates (its findings' links) or not supported. A format's
    cell lists the findings that are its own; the others are in their claims' columns."""
    applies = need in ran if need in FORMATS else need is None or (need == "masks" and row_claims & MASKS) or need in row_claims
    if not applies:
        return "not supported"
    mine = [(n, f) for n, f in findings if (own(f, column, ran) if column in FORMATS else column in f["columns"])]
    if mine:
        return "deviates " + ", ".join(f"[{n}](#{anchor}-{n})" for n, f in mine)
    return "no deviation of its own" if column in FORMATS and findings else "conforms"


def takes(runs):
    """What a row's library takes, from its reports by format: its restrictions (the adapter's) and
    the calls it could not take, with their reasons (the first clause, numbers blanked); a format
    whose run was inconclusive is named."""
    reports = [r for r in runs.values() if r is not None]
    if not reports:
        return "-"
    restrictions = sorted({w for r in reports for w in r["domain"]["restrictions"]})
    calls, not_taken = sum(r["calls"] for r in reports), sum(r["calls_not_taken"] for r in reports)
    reasons = sorted({re.sub(r"[-+\d.e]*\d", "#", reason) for r in reports for reason in r["not_taken_reasons"]})
    said = ["only " + ", ".join(w.replace("_", " ") for w in restrictions)] if restrictions else ["all it claims"]
    if not_taken:
        said.append(f"not taken {not_taken:,} of {calls:,} calls ({'; '.join(reasons)})")
    said += [f"INCONCLUSIVE in {fmt}: {r['inconclusive']}" for fmt, r in runs.items() if r and r.get("inconclusive")]
    return "; ".join(said)


def render(results, args, started):
    lines = ["# Conformance of the attention people run", "",
             f"Written by `ci/conformance` on {started:%Y-%m-%d} ({args.seconds} s per format and contract{slow_rows(args)}, seed "
             f"{args.seed}, shrinking {args.shrink_seconds} s per finding; attncheck {commits_text(args.commits)}; CPU: {cpu()}).",
             "Each row is one implementation, version and entry point, run through its adapter "
             "(python/attncheck/adapters) with `attncheck check --keep-going`, once per format it has. A cell says "
             "whether the implementation conforms to that claim, deviates (linked to the finding), or does not "
             "support it. The column \"takes\" says what the entry point takes of its claims: the adapter's "
             "restrictions (attncheck features lists them; no problem outside them is sent) and the calls the "
             "library could not be given (the adapter raised NotExpressible, saying why), counted and never a "
             "finding: a limit of the library rather than a wrong answer. A finding is reproduced by the library alone: `attncheck repro FILE.replay --standalone yes "
             "--out repro.py && python3 repro.py` (the replay files are in docs/conformance/).", ""]
    header = "| implementation | version | entry point | takes | " + " | ".join(c for c, _ in COLUMNS) + " |"
    rule = "|" + "---|" * (4 + len(COLUMNS))
    details = []
    for contract, title in ((STRICT, "Under the strict contract"), (CONVENTIONS, "Under each library's documented conventions")):
        lines += [f"## {title}", ""]
        if contract == CONVENTIONS:
            lines += ["The conventions each row is checked under, and where they come from:", ""]
            lines += [f"- {r.implementation}, {r.entry}: `{' '.join(r.conventions)}` ({r.documented})." for r in ROWS
                      if r.key in results]
            lines += [""]
        lines += [header, rule]
        for row in ROWS:
            if row.key not in results:
                continue
            version, claims, runs = results[row.key]
            if runs is None:
                lines.append(f"| {row.implementation} | - | {row.entry} | not installed here: {claims} |")
                continue
            findings = list(enumerate(runs[contract + "-findings"], 1))
            anchor = f"{row.key}-{contract}"
            cells = [cell(claims, c, need, findings, ran(runs[contract]), anchor) for c, need in COLUMNS]
            lines.append(f"| {row.implementation} | {version} | {row.entry} | {takes(runs[contract])} | " +
                         " | ".join(cells) + " |")
            if findings:
                policy = " " + " ".join(row.conventions) if contract == CONVENTIONS else ""
                details += [f"### {row.implementation} {version}, {row.entry}: {title.lower()}", "",
                            f"`attncheck check --impl-cmd \"python3 -m attncheck.adapters.{row.adapter}"
                            f"{''.join(' ' + o for o in row.options)}\"{policy} --keep-going --dtype F`, "
                            f"F in {', '.join(runs[contract])}:", ""]
                details += [f"<a id=\"{anchor}-{n}\"></a>{n}. {describe(f)}. {f['reproduced']}: `{f['kept']}`."
                            for n, f in findings] + [""]
        lines += [""]
    layers = os.path.join(ROOT, "docs", "conformance", "layers.md")  # the layers' verdicts, kept by hand
    kept = [open(layers).read().rstrip("\n")] if os.path.exists(layers) else []
    return "\n".join(lines + changes(results, args) + ["## The findings", ""] + details + kept)


def slow_rows(args):
    """The rows whose campaigns get more than --seconds, said after it."""
    slow = [f"{args.seconds * r.slow:g} s for {r.key}" for r in ROWS if r.slow != 1]
    return f" ({', '.join(slow)})" if slow else ""


def summary(results):
    """The README's table: each row's deviations under both contracts."""
    lines = ["| implementation | version | entry point | strict contract | under its conventions |", "|---|---|---|---|---|"]
    for row in ROWS:
        if row.key not in results or results[row.key][2] is None:
            continue
        version, _, runs = results[row.key]
        counts = []
        for contract in (STRICT, CONVENTIONS):
            deviations = runs[contract + "-findings"]
            columns = sorted({c for f in deviations for c in f["columns"]} |
                             {fmt for f in deviations for fmt in FORMATS if own(f, fmt, ran(runs[contract]))},
                             key=[c for c, _ in COLUMNS].index)
            n = len(deviations)
            text = "conforms" if n == 0 else f"{n} deviation{'s' * (n > 1)}: {', '.join(columns)}"
            unsure = [fmt for fmt, r in runs[contract].items() if r and r.get("inconclusive")]
            text += f" (INCONCLUSIVE in {', '.join(unsure)})" if unsure else ""
            counts.append(text)
        lines.append(f"| {row.implementation} | {version} | {row.entry} | {counts[0]} | {counts[1]} |")
    return "\n".join(lines)


def git_commit():
    run = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return run.stdout.strip() or "?"


def cpu():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


def with_summary(text):
    """The README with text between its markers."""
    readme = open(os.path.join(ROOT, "README.md")).read()
    begin, end = "<!-- conformance summary: written by ci/conformance -->", "<!-- end of the conformance summary -->"
    if begin not in readme or end not in readme:
        sys.exit(f"conformance: README.md has no markers '{begin}' and '{end}'")
    head, rest = readme.split(begin, 1)
    return head + begin + "\n" + text + "\n" + end + rest.split(end, 1)[1]


def replace_file(path, text):
    """Writes path whole or not at all: a file beside it, renamed over it."""
    written = f"{path}.new-{os.getpid()}"
    try:
        with open(written, "w") as file:
            file.write(text)
        os.replace(written, path)
    finally:
        if os.path.exists(written):
            os.remove(written)


def generated(place):
    """Whether a row's place in --docs is this script's to replace: nothing there yet, or a folder
    of kept replay files only (a name alone says nothing of who made it)."""
    if not os.path.lexists(place):
        return True
    return os.path.isdir(place) and not os.path.islink(place) and all(
        KEPT_NAME.fullmatch(name) and os.path.isfile(os.path.join(place, name)) for name in os.listdir(place))


def refuse_foreign(docs):
    """Exits, having replaced nothing, when a row's place in --docs holds what this script did not write."""
    foreign = [place for place in (os.path.join(docs, row.key) for row in ROWS) if not generated(place)]
    if foreign:
        sys.exit(f"conformance: {', '.join(foreign)}: not ci/conformance.py's (a row's folder holds its replay "
                 f"files only); nothing in {docs} replaced")


def put_rows(staging, docs):
    """Each row's folder in staging becomes its folder in --docs, in place of the last run's; a row
    with none there loses its last one. Nothing else in --docs is touched (layers.md is kept by hand)."""
    refuse_foreign(docs)
    os.makedirs(docs, exist_ok=True)
    last = os.path.join(staging, ".last")  # no row's key: the last run's folders, removed with staging
    os.makedirs(last)
    for row in ROWS:
        place, new = os.path.join(docs, row.key), os.path.join(staging, row.key)
        if os.path.lexists(place):  # out first: a folder is renamed only where there is none (or an empty one)
            os.replace(place, os.path.join(last, row.key))
        if os.path.exists(new):
            os.replace(new, place)


def keep_previous(args):
    """At a full run's start, the table it replaces as it was: each row's version and replay files,
    copied to --work/previous (a later --only or --render-only compares with the same table)."""
    previous = os.path.join(args.work, "previous")
    shutil.rmtree(previous, ignore_errors=True)
    os.makedirs(previous)
    versions, table = {}, os.path.join(ROOT, "docs", "conformance.md")
    for line in open(table) if os.path.exists(table) else []:
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| ") and len(cells) > 3:
            versions.setdefault(f"{cells[0]}, {cells[2]}", cells[1])
    json.dump({r.key: versions.get(f"{r.implementation}, {r.entry}") for r in ROWS}, open(
        os.path.join(previous, "versions.json"), "w"))
    for row in ROWS:
        if os.path.isdir(os.path.join(args.docs, row.key)):
            shutil.copytree(os.path.join(args.docs, row.key), os.path.join(previous, row.key))


def replay_previous(row, args):
    """Each finding of the previous table's row replayed once on the library installed now (its
    kept replay file, `attncheck check --replay`, under the file's policies); written to
    --work/previous/ROW.json as [contract, number, property, verdict]."""
    folder, verdicts = os.path.join(args.work, "previous", row.key), []
    kept = [KEPT_NAME.fullmatch(n) for n in (os.listdir(folder) if os.path.isdir(folder) else [])]
    for name, contract, number, prop in sorted((m[0], m[1], int(m[2]), m[3]) for m in kept if m):
        try:
            run = subprocess.run([args.attncheck, "check", "--impl-cmd", command_of(row, args), "--replay",
                                  os.path.join(folder, name)], capture_output=True, text=True, env=environment(),
                                 cwd=args.work, timeout=600)
            verdict = {0: "no longer fails", 1: "still fails"}.get(run.returncode, f"not replayed ({last_line(run)[:120]})")
        except subprocess.TimeoutExpired:
            verdict = "not replayed (over 600 s)"
        verdicts.append([contract, number, prop, verdict])
    json.dump(verdicts, open(os.path.join(args.work, "previous", row.key + ".json"), "w"))


def changes(results, args):
    """The section "What changed since the previous table": per row, its version then and now, the
    previous findings that no longer fail, how many still do, and the findings of a property the
    previous table did not find under that contract."""
    previous = os.path.join(args.work, "previous")
    if not os.path.exists(os.path.join(previous, "versions.json")):
        return []
    versions = json.load(open(os.path.join(previous, "versions.json")))
    lines = ["## What changed since the previous table", "",
             "Each finding of the previous table replayed once on the release checked now, from its kept replay "
             "file (`attncheck check --impl-cmd ... --replay FILE`): one that no longer fails was fixed upstream "
             "or, where the adapter's translation changed since (`git log python/attncheck/adapters`), is no "
             "longer asked of the library. A finding is new when the previous table had none of its property "
             "under that contract.", ""]
    for row in ROWS:
        if row.key not in results or results[row.key][2] is None:
            continue
        version, _, runs = results[row.key]
        then = versions.get(row.key)
        if then is None:
            lines.append(f"- {row.implementation} {version}, {row.entry}: new in this table.")
            continue
        verdicts_file = os.path.join(previous, row.key + ".json")
        verdicts = json.load(open(verdicts_file)) if os.path.exists(verdicts_file) else []
        before = {(c, p) for c, _, p, _ in verdicts}
        gone = [f"{c} {n} (Property.{p})" for c, n, p, v in verdicts if v == "no longer fails"]
        other = [f"{c} {n}: {v}" for c, n, p, v in verdicts if v not in ("no longer fails", "still fails")]
        still = sum(v == "still fails" for *_, v in verdicts)
        new = [f"[{c} {n}](#{row.key}-{c}-{n})" for c in (STRICT, CONVENTIONS)
               for n, f in enumerate(runs[c + "-findings"], 1) if (c, f["property"]) not in before]
        said = [f"still fails: {still} of {len(verdicts)}" if verdicts else "no finding before"] + \
            (["no longer fails: " + ", ".join(gone)] if gone else []) + \
            (["new: " + ", ".join(new)] if new else []) + other
        versions_said = f"still {version}" if then == version else f"{then} to {version}"
        lines.append(f"- {row.implementation} {versions_said}, {row.entry}: " + "; ".join(said) + ".")
    return lines + [""]


def arguments():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attncheck", required=True)
    parser.add_argument("--venv-python", required=True)
    parser.add_argument("--torch-python", help="the python of the rows of a current torch (ci/requirements-torch.txt)")
    parser.add_argument("--mlx-python", help="the python of the MLX rows (ci/requirements-mlx.txt)")
    parser.add_argument("--keras-python", help="the python of the rows of keras 3 on jax (ci/requirements-keras.txt)")
    parser.add_argument("--llama-python", help="the python of the llama.cpp rows (ci/requirements-llama.txt)")
    parser.add_argument("--seconds", type=float, default=30, help="each campaign's budget (default 30)")
    parser.add_argument("--shrink-seconds", type=float, default=5, help="shrinking per finding (default 5)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--parallel", type=int, default=2, help="campaigns at once (default 2)")
    parser.add_argument("--only", action="append",
                        help="run only these rows (their keys), with the last run's settings; the others' last "
                             "results stay in the report")
    parser.add_argument("--render-only", action="store_true",
                        help="run no campaign: write the report from the last run's files in --work")
    parser.add_argument("--work", default=os.path.join(ROOT, "build", "conformance"))
    parser.add_argument("--docs", default=os.path.join(ROOT, "docs", "conformance"))
    args = parser.parse_args()
    args.attncheck = os.path.abspath(args.attncheck)
    return args


def settings(args):
    """When the campaigns ran and with what (run.json in --work): a full run records them, a partial
    run or --render-only reads them back. Returns the date of the full run."""
    measured = os.path.join(args.work, "run.json")
    if args.render_only or args.only:
        if not os.path.exists(measured):
            sys.exit(f"conformance: {measured} is missing: --only and --render-only need a full run first")
        run = json.load(open(measured))
        args.seconds, args.shrink_seconds, args.seed = run["seconds"], run["shrink_seconds"], run["seed"]
        run["commits"].update({key: git_commit() for key in args.only or [] if not args.render_only})
        json.dump(run, open(measured, "w"))
        args.commits = run["commits"]
        return datetime.datetime.fromisoformat(run["started"])
    started = datetime.datetime.now()
    args.commits = {r.key: git_commit() for r in ROWS}
    os.makedirs(args.work, exist_ok=True)
    keep_previous(args)
    json.dump(dict(seconds=args.seconds, shrink_seconds=args.shrink_seconds, seed=args.seed,
                   started=started.isoformat(), commits=args.commits), open(measured, "w"))
    return started


def commits_text(commits):
    """The attncheck each row ran with: "abc1234", or "abc1234 (jax-xla, torch-1.13: def5678)"."""
    by_commit = {}
    for key, commit in commits.items():
        by_commit.setdefault(commit, []).append(key)
    first, *others = sorted(by_commit, key=lambda c: -len(by_commit[c]))
    rest = "; ".join(f"{', '.join(by_commit[c])}: {c}" for c in others)
    return first + (f" ({rest})" if rest else "")


def results_of(probes, reports, args, staging):
    """Per row: (version, claims, runs), runs holding each contract's reports by format and its
    merged findings, each kept (in staging) and reproduced; (None, why, None) for a row that cannot
    run here."""
    results = {}
    for row in ROWS:
        version, claims = probes[row.key]
        if version is None:
            results[row.key] = (None, claims, None)
            continue
        runs = {}
        for contract in (STRICT, CONVENTIONS):
            runs[contract] = {f: r for (k, f, c), r in reports.items() if k == row.key and c == contract}
            runs[contract + "-findings"] = merged(runs[contract])
            for n, finding in enumerate(runs[contract + "-findings"], 1):
                finding["reproduced"] = keep_and_reproduce(row, contract, n, finding, args, staging)
        results[row.key] = (version, claims, runs)
    return results


def write_docs(probes, reports, args, started):
    """Keeps the findings and writes docs/conformance.md and the README's summary: all in files of
    their own first, put in place only once the whole report is rendered, so that a run that fails
    leaves the last run's files as they were."""
    staging = f"{os.path.normpath(args.docs)}.new-{os.getpid()}"  # beside --docs: renamed within one file system
    os.makedirs(staging)
    try:
        results = results_of(probes, reports, args, staging)
        text = render(results, args, started) + "\n"
        readme = with_summary(summary(results))
        put_rows(staging, args.docs)
        replace_file(os.path.join(ROOT, "docs", "conformance.md"), text)
        replace_file(os.path.join(ROOT, "README.md"), readme)
    finally:
        shutil.rmtree(staging)


def main():
    args = arguments()
    unknown = set(args.only or []) - {r.key for r in ROWS}
    if unknown:
        sys.exit(f"conformance: no row {', '.join(sorted(unknown))} (rows: {', '.join(r.key for r in ROWS)})")
    refuse_foreign(args.docs)  # before the campaigns, not after them
    started = settings(args)
    probes = {r.key: probe(r, args) for r in ROWS}
    jobs = [(r.key, f, c) for r in ROWS if probes[r.key][0] for f in FORMATS
            if f in probes[r.key][1] and f in r.formats for c in (STRICT, CONVENTIONS)]
    by_key = {r.key: r for r in ROWS}
    to_run = [] if args.render_only else [j for j in jobs if not args.only or j[0] in args.only]
    with concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
        list(pool.map(lambda job: run_check(by_key[job[0]], *job[1:], args), to_run))
        list(pool.map(lambda key: replay_previous(by_key[key], args), sorted({k for k, _, _ in to_run})))
    args.render_only = True  # every report from its file now: this run's, and the last run's of the other rows
    reports = {job: run_check(by_key[job[0]], *job[1:], args) for job in jobs}
    write_docs(probes, reports, args, started)
    failed = [f"{k} {c} {f}" for (k, f, c), report in reports.items() if report is None]
    print("conformance: docs/conformance.md written" + (f"; no report (attncheck failed) for: {', '.join(failed)}"
                                                        if failed else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
