"""The documentation site: it builds with ``mkdocs build --strict`` (a broken link or an unknown API reference
fails the build), its API pages hold the public objects, every guide opens with the task it solves, and every Python
block of README.md and docs/ is either run here or marked illustrative.

A block is runnable when the line before its ```` ```python ```` fence is ``<!-- runnable -->``, or
``<!-- runnable needs=torchrl,gymnasium -->`` when it imports optional libraries (their extras); it is
``<!-- illustrative -->`` when it cannot run in seconds on a CPU (a GPU, several processes, a long training run, a
user's own files, Brax itself) or is a fragment of a larger program. Each runnable block runs in a namespace of its
own, so that it stands alone as a reader would copy it, with the bridge's copy counters at zero; the blocks of a page
run in order in a folder of their own. To pay for importing JAX and torch only once per worker, the pages are dealt
into ``_SHARDS`` groups, each run in one fresh interpreter; a traceback names the page and its line.
"""

import ast
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CONFIG = ROOT / "mkdocs.yml"

_MARKER = re.compile(r"<!-- (?P<kind>runnable|illustrative)(?: needs=(?P<needs>[\w.,-]+))? -->")
_ANY_MARKER = re.compile(r"<!--\s*(?:runnable|illustrative)")
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_PYTHON = {"python", "py", "python3"}
_MARKER_HELP = ("write `<!-- runnable -->`, `<!-- runnable needs=module -->` or `<!-- illustrative -->` on the line "
                "directly before the ```python fence")


def code_blocks(text: str, page: str = "page.md") -> list[dict]:
    """Every fenced code block of a Markdown page, in order: ``{"page", "line" (of the first code line),
    "language", "marker" ("runnable", "illustrative" or None), "needs", "code"}``.

    A marker that is not on the line directly before a ```` ```python ```` fence, a marker on another language's
    block, an illustrative marker with ``needs=`` and a fence that is never closed raise ``ValueError`` naming the
    page and line, so that a block meant to run is never skipped silently.
    """
    lines = text.split("\n")
    blocks, index, marker_lines, code_lines = [], 0, set(), set()
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        fence, indent = opening.group("fence"), opening.group("indent")
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = next((row for row in range(index + 1, len(lines)) if closing.match(lines[row])), None)
        if end is None:
            raise ValueError(f"{page}:{index + 1}: the {fence}{opening.group('info')} block is never closed")
        language = (opening.group("info").split() or [""])[0].lower()
        marker = _MARKER.fullmatch(lines[index - 1].strip()) if index else None
        if marker:
            marker_lines.add(index - 1)
            if language not in _PYTHON:
                raise ValueError(f"{page}:{index}: a {marker.group('kind')} marker must be followed by a ```python "
                                 f"fence, got {lines[index].strip()!r}")
            if marker.group("kind") == "illustrative" and marker.group("needs"):
                raise ValueError(f"{page}:{index}: an illustrative block is never run, so it needs nothing: "
                                 f"{lines[index - 1].strip()!r}")
        # Dedented by the fence's own indentation, as Markdown does for a block inside a list item.
        body = [row[len(indent):] if row.startswith(indent) else row.lstrip() for row in lines[index + 1 : end]]
        blocks.append({
            "page": page, "line": index + 2, "language": language, "marker": marker and marker.group("kind"),
            "needs": [name for name in ((marker and marker.group("needs")) or "").split(",") if name],
            "code": "\n".join(body) + "\n",
        })
        code_lines.update(range(index, end + 1))
        index = end + 1
    for row, line in enumerate(lines):
        if row not in marker_lines and row not in code_lines and _ANY_MARKER.search(line):
            raise ValueError(f"{page}:{row + 1}: a marker that is not well-formed or not directly before its "
                             f"fence: {line.strip()!r} ({_MARKER_HELP})")
    return blocks


def runnable_blocks(text: str, page: str = "page.md") -> list[dict]:
    """The runnable blocks of a Markdown page: ``{"page", "line" (of the first code line), "needs", "code"}``.

    A block is runnable when the line before its ```` ```python ```` fence is ``<!-- runnable -->``, or
    ``<!-- runnable needs=module,module -->``; ``code_blocks`` says what it refuses.
    """
    return [{key: block[key] for key in ("page", "line", "needs", "code")}
            for block in code_blocks(text, page) if block["marker"] == "runnable"]


def unmarked_python_blocks(text: str, page: str = "page.md") -> list[str]:
    """``page:line`` of each ```` ```python ```` block that is marked neither runnable nor illustrative."""
    return [f"{block['page']}:{block['line'] - 1}" for block in code_blocks(text, page)
            if block["language"] in _PYTHON and block["marker"] is None]


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def _pages_with_blocks() -> list[Path]:
    return [page for page in _pages() if re.search(r"<!--\s*runnable", page.read_text(encoding="utf-8"))]


def _mkdocs_environment() -> dict[str, str]:
    # Material's notice about its future versions is not a warning of this site; keep the build log to the build.
    return {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def _require_mkdocs() -> None:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed: install the docs extra (pip install -e '.[docs]'); make test does")


def test_site_builds_strict_with_the_api_pages(tmp_path):
    _require_mkdocs()
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(CONFIG), "-d", str(site)],
        cwd=tmp_path, env=_mkdocs_environment(), capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    expected = {
        "reference/torch-env": ["brax_bridge.env.TorchEnv", "set_physics", "load_state_dict"],
        "reference/convert": ["brax_bridge.convert.jax_to_torch", "brax_bridge.convert.torch_to_jax"],
        "reference/torchrl": ["brax_bridge.torchrl.BraxBridgeEnv"],
        "reference/gymnasium": ["brax_bridge.gymnasium.VectorEnv"],
        "reference/sb3": ["brax_bridge.sb3.VecEnv"],
        "reference/rsl-rl": ["brax_bridge.rsl_rl.RslRlVecEnv"],
        "reference/jax-ppo": ["brax_core.training.agents.ppo.train.train", "num_timesteps"],
        "reference/torch-ppo": ["torch_ppo.train(", "eval_backend", "progress_fn"],
        "reference/torch-shac": ["torch_analytic.shac.train", "td_lambda_targets", "SHACCritic"],
        "reference/torch-sac": ["torch_sac.train.train", "bootstrap_on_timeout", "ReplayBuffer", "critic_loss"],
        # The fields' table comes from the schema itself (docs/hooks/config_table.py).
        "reference/config": ["brax_core.training.agents.ppo.config.PPOConfig", "from_train_kwargs", "from_json",
                             "brax_core.training.agents.ppo.config.RunConfig", "<code>algorithm</code>",
                             "<code>learning_rate_schedule_min_lr</code>", "a non-negative integer"],
    }
    for page, names in expected.items():
        html = (site / page / "index.html").read_text(encoding="utf-8")
        missing = [name for name in names if name not in html]
        assert not missing, f"{page}: the generated page lacks {missing}"
    # The pages that include a file of the repository hold its text: every section of every results page, under
    # the anchor that links to it, and the summary's links to every topic page.
    assert "Where each concept lives" in (site / "architecture" / "index.html").read_text(encoding="utf-8")
    from markdown.extensions.toc import slugify

    summary = (site / "results" / "index.html").read_text(encoding="utf-8")
    for topic in sorted((ROOT / "benchmarks" / "results").glob("*.md")):
        assert f'href="{topic.stem}/"' in summary, f"the results summary does not link to {topic.stem}"
        html = (site / "results" / topic.stem / "index.html").read_text(encoding="utf-8")
        for heading in re.findall(r"^## (.+)$", topic.read_text(encoding="utf-8"), re.M):
            anchor = slugify(heading.replace("`", ""), "-")
            assert f'id="{anchor}"' in html, f"results/{topic.stem}: no section {heading!r} (#{anchor})"


def test_every_results_page_is_a_page_of_the_site():
    """Each topic page of benchmarks/results/ is included whole by the page of the same name in docs/results/,
    and the summary page includes the index, so that the site shows every measurement and never a stale copy."""
    topics = sorted(page.name for page in (ROOT / "benchmarks" / "results").glob("*.md"))
    assert topics, "benchmarks/results holds no page"
    assert sorted(page.name for page in (DOCS / "results").glob("*.md")) == topics
    for name in topics:
        text = (DOCS / "results" / name).read_text(encoding="utf-8")
        assert f'--8<-- "benchmarks/results/{name}"' in text, f"docs/results/{name} does not include its page"
    assert '--8<-- "benchmarks/RESULTS.md"' in (DOCS / "results.md").read_text(encoding="utf-8")


def test_strict_build_fails_on_a_broken_link_and_an_unknown_reference(tmp_path):
    """The site's own configuration, on a page with a link to a missing page and a reference to a missing
    object: the build must stop and name both."""
    _require_mkdocs()
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(
        "# Broken\n\nSee [the guide](missing-guide.md) and [the env][brax_bridge.env.NoSuchEnv].\n", encoding="utf-8"
    )
    build = (
        "import logging, sys\n"
        "from mkdocs.commands.build import build\n"
        "from mkdocs.config import load_config\n"
        "from mkdocs.exceptions import Abort\n"
        "logging.basicConfig(level=logging.WARNING)\n"
        "try:\n"
        "    build(load_config(sys.argv[1], docs_dir=sys.argv[2], site_dir=sys.argv[3], nav=[{'Home': 'index.md'}]))\n"
        "except Abort as abort:\n"
        "    sys.exit(f'aborted: {abort}')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", build, str(CONFIG), str(docs), str(tmp_path / "site")],
        cwd=tmp_path, env=_mkdocs_environment(), capture_output=True, text=True, timeout=300,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 1 and "aborted:" in log, log
    assert "missing-guide.md" in log and "brax_bridge.env.NoSuchEnv" in log, log


def test_every_guide_starts_with_the_task_it_solves():
    guides = sorted((DOCS / "guides").glob("*.md"))
    assert guides, "docs/guides holds no page"
    for page in guides:
        paragraphs = [p.strip() for p in page.read_text(encoding="utf-8").split("\n\n") if p.strip()]
        assert paragraphs[0].startswith("# "), f"{page.name}: the page must start with its title"
        assert paragraphs[1].startswith("You want to"), f"{page.name}: the first paragraph must say the task "
        "it solves (\"You want to ...\")"


def test_every_python_block_is_runnable_or_illustrative():
    unmarked = [where for page in _pages()
                for where in unmarked_python_blocks(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))]
    assert not unmarked, (f"Python blocks marked neither runnable nor illustrative (fence at page:line): "
                          f"{', '.join(unmarked)}; {_MARKER_HELP}")


def test_the_block_reader_refuses_what_it_would_skip():
    good = ("# t\n\n<!-- runnable needs=torchrl -->\n```python\nx = 1\n```\n\n<!-- illustrative -->\n```python\n"
            "train(hours=3)\n```\n\n```python\nnot run\n```\n\n```bash\nls\n```\n")
    assert runnable_blocks(good) == [{"page": "page.md", "line": 5, "needs": ["torchrl"], "code": "x = 1\n"}]
    assert unmarked_python_blocks(good) == ["page.md:13"]
    assert [block["marker"] for block in code_blocks(good)] == ["runnable", "illustrative", None, None]
    listed = "- a step:\n\n   <!-- runnable -->\n   ```python\n   x = 1\n   ```\n"
    assert runnable_blocks(listed)[0]["code"] == "x = 1\n"  # inside a list item, dedented as Markdown does
    shown = "````markdown\n<!-- runnable -->\n```python\nx = 1\n```\n````\n"
    assert runnable_blocks(shown) == [] and unmarked_python_blocks(shown) == []  # a marker shown as an example
    with pytest.raises(ValueError, match="page.md:1: a runnable marker must be followed by a ```python fence"):
        runnable_blocks("<!-- runnable -->\n```bash\nls\n```\n")
    with pytest.raises(ValueError, match="page.md:1: a marker that is not well-formed"):
        runnable_blocks("<!-- runnable -->\n\n```python\nx = 1\n```\n")
    with pytest.raises(ValueError, match="page.md:1: a marker that is not well-formed"):
        runnable_blocks("<!-- illustrative: GPU -->\n```python\nx = 1\n```\n")
    with pytest.raises(ValueError, match="illustrative block is never run"):
        runnable_blocks("<!-- illustrative needs=torchrl -->\n```python\nx = 1\n```\n")
    with pytest.raises(ValueError, match="page.md:2: the ```python block is never closed"):
        runnable_blocks("<!-- runnable -->\n```python\nx = 1\n")


_SHARDS = 2  # one per core: `make test` runs the suite with two workers

_RUNNER = """
import json, os, sys
# First, as a block that imports it would in a process of its own: it sets JAX's GPU memory up before JAX starts, which
# an earlier block that uses brax_core alone would otherwise start.
import brax_bridge
top = os.getcwd()
for page in json.load(sys.stdin):
    folder = os.path.join(top, page["name"].replace(os.sep, "_"))
    os.makedirs(folder)
    os.chdir(folder)
    for block in page["blocks"]:
        brax_bridge.reset_stats()  # a block's copy counts are its own, as in a fresh process
        # Blank lines in front, so that a traceback gives the line in the Markdown page.
        source = "\\n" * (block["line"] - 1) + block["code"]
        exec(compile(source, block["page"], "exec"), {"__name__": "__main__"})
        print(f"runnable block passed: {block['page']}:{block['line']}", flush=True)
import gc
gc.freeze()  # spares the exit the collector's walk over JAX's and torch's objects (seconds)
"""


@pytest.mark.parametrize("shard", range(_SHARDS))
def test_runnable_blocks_run(shard, tmp_path):
    pages, skipped = [], []
    for page in _pages_with_blocks()[shard::_SHARDS]:
        name = str(page.relative_to(ROOT))
        blocks = []
        for block in runnable_blocks(page.read_text(encoding="utf-8"), name):
            missing = [need for need in block["needs"] if importlib.util.find_spec(need) is None]
            if missing:
                skipped.append(f"{name}:{block['line']} (needs {', '.join(missing)})")
            else:
                blocks.append(block)
        pages.append({"name": name, "blocks": blocks})
    ran = sum(len(page["blocks"]) for page in pages)
    assert ran or skipped, f"shard {shard} of {_SHARDS} holds no runnable block: nothing here would catch a broken page"
    if ran:
        done = subprocess.run(
            [sys.executable, "-c", _RUNNER], input=json.dumps(pages), cwd=tmp_path, capture_output=True, text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        passed = [line for line in done.stdout.splitlines() if line.startswith("runnable block passed: ")]
        assert len(passed) == ran, done.stdout
    if skipped:
        pytest.skip(f"{ran} runnable blocks passed; not run, for want of optional extras (make test installs "
                    f"them): {'; '.join(skipped)}")



OUR_PACKAGES = (
    "brax_core", "brax_bridge", "torch_training", "torch_ppo", "torch_analytic", "torch_sac", "brax_bridge_app",
)


def _imports_of(code: str) -> list[tuple[str, str | None]]:
    """``(module, name)`` for each ``from module import name`` and ``(module, None)`` for each ``import module``."""
    try:
        tree = ast.parse(code)
    except SyntaxError:  # a fragment with elisions (``...`` among arguments): its import lines alone
        lines = [line.strip() for line in code.splitlines() if line.startswith(("import ", "from "))]
        tree = ast.parse("\n".join(lines))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found += [(node.module, alias.name) for alias in node.names]
    return found


def test_the_illustrative_blocks_import_what_exists():
    """An illustrative block is not run (it needs a GPU, a user's files or minutes), but every name it imports from
    this library exists: a renamed or removed API fails here."""
    checked, broken = 0, []
    for page in _pages():
        name = str(page.relative_to(ROOT))
        for block in code_blocks(page.read_text(encoding="utf-8"), name):
            if block["language"] != "python" or block["marker"] != "illustrative":
                continue
            for module, attribute in _imports_of(block["code"]):
                if module.split(".")[0] not in OUR_PACKAGES:
                    continue
                checked += 1
                try:
                    imported = importlib.import_module(module)
                except ImportError as err:
                    broken.append(f"{name}:{block['line']}: import {module}: {err}")
                    continue
                if attribute is not None and not hasattr(imported, attribute):
                    try:
                        importlib.import_module(f"{module}.{attribute}")
                    except ImportError:
                        broken.append(f"{name}:{block['line']}: {module} has no {attribute}")
    assert checked > 20, checked
    assert not broken, "\n".join(broken)
