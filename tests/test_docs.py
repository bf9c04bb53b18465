"""The documentation site: it builds with ``mkdocs build --strict`` (a broken link or an unknown API reference
fails the build), its API pages hold the public objects, every guide opens with the task it solves, and every code
block marked runnable runs.

A block is runnable when the line before its ```` ```python ```` fence is ``<!-- runnable -->``, or
``<!-- runnable needs=torchrl,gymnasium -->`` when it imports optional libraries (their extras). Each block runs in a
namespace of its own, so that it stands alone as a reader would copy it, with the bridge's copy counters at zero; the
blocks of a page run in order in a folder of their own. To pay for importing JAX and torch only once per worker, the
pages are dealt into ``_SHARDS`` groups, each run in one fresh interpreter; a traceback names the page and its line.
"""

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

_MARKER = re.compile(r"^<!-- runnable(?: needs=(?P<needs>[\w.,-]+))? -->\n(?P<fence>```[^\n]*)\n", re.M)
_ANY_MARKER = re.compile(r"<!--\s*runnable")


def runnable_blocks(text: str, page: str = "page.md") -> list[dict]:
    """The runnable blocks of a Markdown page: ``{"page", "line" (of the first code line), "needs", "code"}``.

    A marker that is not directly followed by a ```` ```python ```` fence, or a fence that is never closed, raises
    ``ValueError``, so that a block meant to run is never skipped silently.
    """
    blocks = []
    for match in _MARKER.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        if not re.fullmatch(r"```python(\s.*)?", match.group("fence")):
            raise ValueError(f"{page}:{line}: a runnable marker must be followed by a ```python fence, "
                             f"got {match.group('fence')!r}")
        end = text.find("\n```", match.end() - 1)
        if end < 0:
            raise ValueError(f"{page}:{line}: the runnable block is never closed")
        needs = [name for name in (match.group("needs") or "").split(",") if name]
        blocks.append({"page": page, "line": line + 2, "needs": needs, "code": text[match.end() : end + 1]})
    markers = len(_ANY_MARKER.findall(text))
    if markers != len(blocks):
        raise ValueError(f"{page}: {markers} runnable markers but {len(blocks)} well-formed ones "
                         "(write `<!-- runnable -->` or `<!-- runnable needs=module -->` on the line before the fence)")
    return blocks


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def _pages_with_blocks() -> list[Path]:
    return [page for page in _pages() if _ANY_MARKER.search(page.read_text(encoding="utf-8"))]


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
        # The fields' table comes from the schema itself (docs/hooks/config_table.py).
        "reference/config": ["brax_core.training.agents.ppo.config.PPOConfig", "from_train_kwargs",
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


def test_the_block_reader_refuses_what_it_would_skip():
    good = "# t\n\n<!-- runnable needs=torchrl -->\n```python\nx = 1\n```\n\n```python\nnot run\n```\n"
    assert runnable_blocks(good) == [{"page": "page.md", "line": 5, "needs": ["torchrl"], "code": "x = 1\n"}]
    with pytest.raises(ValueError, match="followed by a ```python fence"):
        runnable_blocks("<!-- runnable -->\n```bash\nls\n```\n")
    with pytest.raises(ValueError, match="well-formed"):
        runnable_blocks("<!-- runnable -->\n\n```python\nx = 1\n```\n")
    with pytest.raises(ValueError, match="never closed"):
        runnable_blocks("<!-- runnable -->\n```python\nx = 1\n")


_SHARDS = 2  # one per core: `make test` runs the suite with two workers

_RUNNER = """
import json, os, sys
top = os.getcwd()
for page in json.load(sys.stdin):
    folder = os.path.join(top, page["name"].replace(os.sep, "_"))
    os.makedirs(folder)
    os.chdir(folder)
    for block in page["blocks"]:
        if "brax_bridge" in sys.modules:
            sys.modules["brax_bridge"].reset_stats()  # a block's copy counts are its own, as in a fresh process
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

