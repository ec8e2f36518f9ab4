"""optimize-ts --diff, --explain, --dry-run and the --html viewer (the page is opened in headless
Chromium; its DOM, after the page's script ran, is checked; a screenshot is kept under
BUILD/test-artifacts/)."""
import html.parser
import json
import os
import pathlib
import pty
import re
import shutil
import subprocess

import pytest
import torch
from torch import Tensor

from optimize_ts_util import EXAMPLES, generate_seed_models, run_tool

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
BUILD = pathlib.Path(os.environ.get("TSFUSE_BUILD", pathlib.Path(__file__).resolve().parents[2] / "build"))
SEED_SOURCE = (EXAMPLES / "seed_models.py").read_text().splitlines()
INTERSECTION_OPS = ("aten::min", "aten::max", "aten::sub", "aten::clamp", "aten::mul")


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return generate_seed_models(tmp_path_factory.mktemp("seeds"))


class Rejected(torch.nn.Module):
    """A broadcast region whose operand (a view of a) is written in place between the region's
    reads: fuse_pairwise rejects it."""

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        d = (a[:, None] - b[None, :]).abs()
        a.add_(1)
        return d * a[:, None]


@pytest.fixture(scope="module")
def rejected(tmp_path_factory):
    path = tmp_path_factory.mktemp("rejected") / "rejected.pt"
    torch.jit.script(Rejected()).save(str(path))
    return path


def source_line_of(text):
    """1-based line of examples/seed_models.py containing `text` (exactly one)."""
    hits = [i + 1 for i, line in enumerate(SEED_SOURCE) if text in line]
    assert len(hits) == 1, (text, hits)
    return hits[0]


def inlined_forward_graph(path):
    """forward's graph inlined in place (a copy would renumber the values), as optimize-ts does."""
    module = torch.jit.load(str(path))  # alive while inlining: it owns the called functions
    graph = module.forward.graph
    torch._C._jit_pass_inline(graph)
    return str(graph)


def apply_unified_diff(before_lines, diff_lines):
    """Applies a one-file unified diff; asserts every context and '-' line matches `before`."""
    out, pos, i = [], 0, 0
    while i < len(diff_lines):
        m = re.match(r"@@ -(\d+),(\d+) \+(\d+),(\d+) @@$", diff_lines[i])
        if not m:
            i += 1
            continue
        start, length = int(m[1]), int(m[2])
        start = start - 1 if length else start
        out += before_lines[pos:start]
        pos = start
        i += 1
        while i < len(diff_lines) and not diff_lines[i].startswith("@@"):
            tag, text = diff_lines[i][:1], diff_lines[i][1:]
            if tag in " -":
                assert before_lines[pos] == text, (pos, before_lines[pos], text)
                pos += 1
            if tag in " +":
                out.append(text)
            i += 1
    return out + before_lines[pos:]


# --- --diff ---------------------------------------------------------------------------------------

def test_diff_applies_to_the_inlined_graph(seeds, optimize_ts, tmp_path, tsfuse_lib):
    out = tmp_path / "o.pt"
    proc = run_tool(optimize_ts, "-q", "--diff", seeds["intersection"], out)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" not in proc.stdout  # not a terminal: plain
    lines = proc.stdout.splitlines()
    assert lines[0] == f"--- {seeds['intersection']}:forward (before fusion)"
    assert lines[1] == f"+++ {out}:forward"
    removed = [l for l in lines[2:] if l.startswith("-")]
    added = [l for l in lines[2:] if l.startswith("+")]
    for op in INTERSECTION_OPS:
        assert any(op + "(" in l for l in removed), op
    assert sum("tsfuse::pairwise(" in l for l in added) == 1
    before = inlined_forward_graph(seeds["intersection"]).splitlines()
    after = apply_unified_diff(before, lines[2:])
    assert sum("tsfuse::pairwise(" in l for l in after) == 1
    assert not any(op + "(" in l for l in after for op in INTERSECTION_OPS)
    assert sum(l.lstrip().startswith("return") for l in after) == 1


@pytest.mark.parametrize("flags,env,colored", [
    (["--color=always"], {}, True),
    (["--color", "never"], {}, False),
    ([], {}, False),  # auto, stdout a pipe
])
def test_diff_color(seeds, optimize_ts, tmp_path, flags, env, colored):
    proc = run_tool(optimize_ts, "-q", "--diff", *flags, seeds["intersection"], tmp_path / "o.pt", env=env)
    assert proc.returncode == 0, proc.stderr
    assert ("\x1b[31m-" in proc.stdout and "\x1b[32m+" in proc.stdout) == colored
    assert ("\x1b[" in proc.stdout) == colored


def run_on_tty(args, env):
    """Runs a command with stdout on a pseudo-terminal; returns (exit code, output)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(a) for a in args], stdout=slave, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=120), b"".join(chunks).decode()


def test_diff_color_auto_on_a_terminal(seeds, optimize_ts, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TSFUSE_LOG_LEVEL")}
    env["TERM"] = "xterm"
    code, text = run_on_tty([optimize_ts, "-q", "--diff", seeds["intersection"], tmp_path / "a.pt"], env)
    assert code == 0 and "\x1b[31m-" in text
    code, text = run_on_tty([optimize_ts, "-q", "--diff", seeds["intersection"], tmp_path / "b.pt"],
                            dict(env, NO_COLOR="1"))
    assert code == 0 and "tsfuse::pairwise" in text and "\x1b[" not in text


def test_diff_nothing_changed(seeds, optimize_ts, tmp_path):
    proc = run_tool(optimize_ts, "--diff", seeds["nothing_to_fuse"], tmp_path / "o.pt")
    assert proc.returncode == 0
    assert "no graph changed" in proc.stdout and "@@" not in proc.stdout


# --- --explain and --dry-run --------------------------------------------------------------------

def test_explain_intersection_writes_nothing(seeds, optimize_ts, tmp_path):
    before = sorted(os.listdir(seeds["intersection"].parent))
    proc = run_tool(optimize_ts, "--explain", seeds["intersection"])
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(seeds["intersection"].parent)) == before
    out = proc.stdout
    assert "nothing written" in out
    assert "FUSE  9 nodes -> tsfuse::pairwise" in out
    first, last = source_line_of("all_pairs_min_ymax = torch.min("), source_line_of("return intersect_heights *")
    assert f"seed_models.py:{first}-{last}" in out
    # each fused node with its file:line and the source line itself
    for text in ("torch.min(y_max1, y_max2.t())", "torch.clamp(all_pairs_min_xmax - all_pairs_max_xmin, min=0)"):
        line = source_line_of(text)
        assert re.search(rf"seed_models\.py:{line}\s+.*{re.escape(text)}", out), text
    assert "example_inputs: nothing to fuse" in out


def test_explain_says_why_not(rejected, optimize_ts):
    proc = run_tool(optimize_ts, "--explain", rejected)
    assert proc.returncode == 0, proc.stderr
    assert "KEEP  3 node(s) unfused (fuse_pairwise" in proc.stdout
    assert "why not: operand" in proc.stdout and "in-place" in proc.stdout
    # canonicalize also explains why it keeps the in-place add_ on the input
    assert "KEEP  1 node(s) unfused (canonicalize, test_optimize_ts_viewer.py:" in proc.stdout
    assert "a.add_(1)" in proc.stdout  # the kept node's source line
    assert "0 fusion(s), 2 rejected candidate(s)" in proc.stdout


def test_dry_run_writes_no_model(seeds, optimize_ts, tmp_path):
    out, report = tmp_path / "o.pt", tmp_path / "r.json"
    proc = run_tool(optimize_ts, "--dry-run", "--check=2", "--report", report, seeds["intersection"], out)
    assert proc.returncode == 0, proc.stderr
    assert not out.exists() and "(not written)" in proc.stdout and "check: passed" in proc.stdout
    doc = json.loads(report.read_text())
    assert doc["output_written"] is False and doc["check"]["passed"] and doc["check"]["runs"] == 2
    rewrite = [e for e in doc["events"] if e["kind"] == "rewrite"][0]
    assert len(rewrite["node_ids"]) == len(rewrite["nodes"]) == 9 and rewrite["fused_node"].startswith("%")
    # OUT may be left out
    proc = run_tool(optimize_ts, "-q", "--dry-run", seeds["intersection"])
    assert proc.returncode == 0 and proc.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_exit_4_internal_error_leaves_nothing(seeds, optimize_ts, tmp_path):
    out = tmp_path / "o.pt"
    proc = run_tool(optimize_ts, "--html", tmp_path / "v.html", seeds["intersection"], out,
                    env={"TSFUSE_OPTIMIZE_TS_FAULT": "internal"})
    assert proc.returncode == 4
    assert proc.stderr.startswith("optimize-ts: error: internal error: ") and len(proc.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # neither OUT nor the page nor a temp file


# --- --html ---------------------------------------------------------------------------------------

class Dom(html.parser.HTMLParser):
    """The elements of a page: tag, attributes, text (own and descendants'), children."""

    VOID = {"meta", "input", "col", "br", "img", "link"}

    def __init__(self, text):
        super().__init__()
        self.root = {"tag": "#root", "attrs": {}, "children": [], "text": ""}
        self.stack = [self.root]
        self.by_id = {}
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        e = {"tag": tag, "attrs": dict(attrs), "children": [], "text": ""}
        self.stack[-1]["children"].append(e)
        if "id" in e["attrs"]:
            self.by_id[e["attrs"]["id"]] = e
        if tag not in self.VOID:
            self.stack.append(e)

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i]["tag"] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        for e in self.stack:
            e["text"] += data

    def all(self, pred, node=None):
        node = node or self.root
        for c in node["children"]:
            if pred(c):
                yield c
            yield from self.all(pred, c)


def classes(e):
    return set(e["attrs"].get("class", "").split())


def has_class(name, tag=None):
    return lambda e: name in classes(e) and (tag is None or e["tag"] == tag)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (scripts/setup.sh installs Debian's chromium): "
                             "the HTML viewer's DOM is not checked")


def chromium(*args):
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--mute-audio",
           "--user-data-dir=" + str(BUILD / "test-artifacts" / "chromium-profile"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def rendered(page, fragment=""):
    proc = chromium("--dump-dom", page.as_uri() + fragment)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = Dom(proc.stdout)
    body = next(dom.all(lambda e: e["tag"] == "body"))
    assert body["attrs"].get("data-ready") == "1", "the page's script did not finish"
    return dom, body


@pytest.fixture(scope="module")
def intersection_page(seeds, optimize_ts, tmp_path_factory):
    d = tmp_path_factory.mktemp("html")
    page = d / "intersection.html"
    proc = run_tool(optimize_ts, "-q", "--html", page, seeds["intersection"], d / "o.pt")
    assert proc.returncode == 0, proc.stderr
    return page


def test_html_is_self_contained(intersection_page):
    text = intersection_page.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert not re.search(r"<(script|link|img|iframe)[^>]*\s(src|href)=", text)
    assert "http://" not in text and "https://" not in text
    assert "@import" not in text and "url(" not in text


@needs_chromium
def test_html_links_fused_op_and_original_nodes_both_ways(intersection_page):
    dom, body = rendered(intersection_page, "#select=F1")
    assert body["attrs"].get("data-selected") == "F1"
    replaced = list(dom.all(has_class("role-replaced", "td")))
    fused = list(dom.all(has_class("role-fused", "td")))
    assert len(replaced) == 9 and len(fused) == 1
    fused = fused[0]
    assert "tsfuse::pairwise(" in fused["text"] and fused["attrs"]["data-fusion"] == "F1"
    for cell in replaced + [fused]:
        assert "sel" in classes(cell), cell["attrs"]
    # original -> fused op
    for cell in replaced:
        assert cell["attrs"]["data-fusion"] == "F1"
        links = list(dom.all(has_class("to-fused", "a"), cell))
        assert len(links) == 1 and links[0]["attrs"]["href"] == "#" + fused["attrs"]["id"]
    # fused op -> each original, by id
    back = {a["attrs"]["href"][1:] for a in dom.all(has_class("to-orig", "a"), fused)}
    assert back == {c["attrs"]["id"] for c in replaced}
    ops = sorted(c["text"].split("= ")[1].split("(")[0] for c in replaced)
    assert ops == sorted(["aten::min"] * 2 + ["aten::max"] * 2 + ["aten::sub"] * 2 + ["aten::clamp"] * 2 +
                         ["aten::mul"])
    # every original node shows where it came from, and that line of source
    for cell in replaced:
        src = next(dom.all(has_class("src", "span"), cell))["text"]
        m = re.fullmatch(r"seed_models\.py:(\d+)", src)
        assert m, src
        code = next(dom.all(has_class("code", "span"), cell))["text"]
        assert code == SEED_SOURCE[int(m[1]) - 1].strip()
    # the operand list, expression and donated list the rewrite added belong to F1 too; nothing
    # else is selected
    parts = list(dom.all(has_class("role-part", "td")))
    assert len(parts) == 3 and all("sel" in classes(p) for p in parts)
    assert any("int[] = prim::Constant" in p["text"] for p in parts)
    assert len(list(dom.all(has_class("sel", "td")))) == 9 + 1 + 3 + len(list(dom.all(
        lambda e: "dead-of" in classes(e))))


@needs_chromium
def test_html_selecting_a_node_selects_its_fusion(intersection_page, seeds):
    # from an original node (by its id in the before graph) ...
    dom, body = rendered(intersection_page, "#node=%25all_pairs_min_ymax.1")
    assert body["attrs"].get("data-selected") == "F1"
    assert "sel" in classes(next(dom.all(has_class("role-fused", "td"))))
    # ... and from the fused op back
    fused_id = next(dom.all(has_class("role-fused", "td")))["attrs"]["data-node"]
    dom, body = rendered(intersection_page, "#node=" + fused_id.replace("%", "%25"))
    assert body["attrs"].get("data-selected") == "F1"
    assert all("sel" in classes(c) for c in dom.all(has_class("role-replaced", "td")))


@needs_chromium
def test_html_summary_folding_and_search(intersection_page):
    dom, _ = rendered(intersection_page, "#search=aten::clamp")
    fusions = dom.by_id["summary-fusions"]["text"]
    first, last = source_line_of("all_pairs_min_ymax = torch.min("), source_line_of("return intersect_heights *")
    assert "F1" in fusions and "tsfuse::pairwise" in fusions and f"seed_models.py:{first}-{last}" in fusions
    methods = dom.by_id["summary-methods"]["text"]
    assert "forward" in methods and "example_inputs" in methods
    # example_inputs is unchanged: its rows fold away
    section = next(dom.all(lambda e: e["attrs"].get("data-method") == "example_inputs"))
    assert list(dom.all(has_class("fold", "tr"), section))
    assert list(dom.all(has_class("hidden", "tr"), section))
    hits = [c for c in dom.all(has_class("hit", "td"))]
    assert sum("aten::clamp(" in c["text"] and "role-replaced" in classes(c) for c in hits) == 2
    assert re.fullmatch(r"\d+ match(es)?", dom.by_id["hits"]["text"])


@needs_chromium
def test_html_lists_rejected_candidates(rejected, optimize_ts, tmp_path):
    page = tmp_path / "rejected.html"
    proc = run_tool(optimize_ts, "--dry-run", "-q", "--html", page, rejected)
    assert proc.returncode == 0, proc.stderr
    dom, _ = rendered(page)
    items = list(dom.all(lambda e: e["tag"] == "li" and "data-rejection" in e["attrs"]))
    assert len(items) == 2  # canonicalize keeps a_.add_(1); fuse_pairwise rejects the region
    assert any("in-place" in i["text"] and "fuse_pairwise" in i["text"] for i in items)
    assert any("aten::add_ kept" in i["text"] and "canonicalize" in i["text"] for i in items)
    badges = list(dom.all(has_class("rejbadge", "span")))
    assert len(badges) == 4  # on each of the candidates' nodes: 3 + 1
    assert not list(dom.all(has_class("role-fused", "td")))


@needs_chromium
def test_html_screenshot_artifact(intersection_page):
    artifacts = BUILD / "test-artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "viewer_intersection.png"
    shutil.copy(intersection_page, artifacts / "viewer_intersection.html")
    shot.unlink(missing_ok=True)
    proc = chromium("--window-size=1600,1300", "--hide-scrollbars", f"--screenshot={shot}",
                    intersection_page.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20000
