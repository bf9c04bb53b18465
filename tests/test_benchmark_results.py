"""The benchmark results pages: every section a script writes has one topic page, which holds it; a script's
``--write`` replaces its own section there, keeps the paragraphs written by hand and wraps its prose without
changing what the Markdown says."""

import argparse
import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import _results  # noqa: E402  (a script module of benchmarks/, not a package)

sys.path.remove(str(BENCHMARKS))


def _script_sections() -> dict[str, str]:
    """``SECTION`` of every benchmark script that defines one, read from its source (importing would load JAX)."""
    found = {}
    for script in sorted(BENCHMARKS.glob("*.py")):
        for node in ast.parse(script.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["SECTION"]:
                found[script.name] = ast.literal_eval(node.value)
    return found


def test_every_script_section_lives_on_the_page_that_holds_it():
    sections = _script_sections()
    assert {"learning.py", "ppo_parity.py", "vs_brax.py", "bridge_overhead.py", "adapters.py"} <= set(sections)
    for script, heading in sections.items():
        page = _results.section_page(heading)
        assert re.search(rf"^{re.escape(heading)}$", page.read_text(encoding="utf-8"), re.M), (
            f"{script} writes {heading!r}, which {page.relative_to(ROOT)} does not hold"
        )
    # ... and every section of every page is where section_page looks for it.
    for page in sorted(_results.PAGES.glob("*.md")):
        for heading in re.findall(r"^## .+$", page.read_text(encoding="utf-8"), re.M):
            assert _results.section_page(heading) == page, f"{heading!r} is on {page.name}"
    with pytest.raises(ValueError, match="no results page holds '## Nothing'.*## Learning"):
        _results.section_page("## Nothing")


def test_the_index_links_to_every_topic_page():
    index = _results.INDEX.read_text(encoding="utf-8")
    for page in sorted(_results.PAGES.glob("*.md")):
        assert f"](results/{page.name})" in index, f"benchmarks/RESULTS.md does not link to {page.name}"


@pytest.mark.parametrize("page", sorted(p.name for p in (BENCHMARKS / "results").glob("*.md")))
def test_pages_are_wrapped(page):
    """Prose reads at 120 columns: wrapping a page again changes nothing, and no prose line is longer, but for a
    code span (a command) that is longer by itself."""
    text = (_results.PAGES / page).read_text(encoding="utf-8")
    assert _results.wrap_prose(text) == text
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        fenced ^= line.startswith("```")
        if fenced or line.startswith(("|", "```")) or len(line) <= _results.WIDTH:
            continue
        longest_span = max((len(m.group(0)) for m in re.finditer(r"`[^`]+`", line)), default=0)
        assert longest_span > _results.WIDTH - 20, f"{page}:{number} is {len(line)} columns: {line[:80]}..."


LONG = (
    "Reading: the first run passes 950 at 196,608 env steps - the second one later; "
    + "word " * 30
    + "- 8 seeds; > 3 of them; # 4; 1. first; `python benchmarks/learning.py --envs fast --seeds 0 1 2 --minutes 2` "
    + "and more words after it " * 6
)


def test_wrap_prose_wraps_only_prose_and_keeps_the_markdown_meaning():
    markdown = pytest.importorskip("markdown")  # mkdocs' parser: the docs extra
    text = "\n".join(
        [
            "Command: `python benchmarks/x.py --write`  ",  # a hard line break ends its paragraph
            "Machine: " + ("a 2-core CPU, " * 12).rstrip(),
            "",
            LONG,
            "",
            "| seed | " + " | ".join(str(i) for i in range(60)) + " |",
            "| --- |" + " --- |" * 60,
            "",
            "- a list item that is long: " + "figure 1.5x, " * 12,
            "  continued here",
            "- a short item",
            "",
            "```",
            "python benchmarks/env_throughput.py " + "--flag " * 30,
            "```",
        ]
    )
    wrapped = _results.wrap_prose(text)
    def render(source: str) -> str:  # the HTML, whitespace as a browser shows it (one space, none beside a tag)
        html = markdown.Markdown(extensions=["tables", "fenced_code"]).convert(source)
        return re.sub(r"\s+", " ", re.sub(r"\s*(<[^>]*>)\s*", r"\1", html))

    assert render(wrapped) == render(text)
    lines = wrapped.split("\n")
    assert lines[0] == "Command: `python benchmarks/x.py --write`  "
    code_span = "`python benchmarks/learning.py --envs fast --seeds 0 1 2 --minutes 2`"
    assert any(code_span in line for line in lines), "a code span was broken across lines"
    assert [line for line in lines if line.startswith("|")] == text.split("\n")[5:7]  # tables untouched
    assert "python benchmarks/env_throughput.py " + "--flag " * 30 in lines  # code blocks untouched
    prose = [line for line in lines if not line.startswith(("|", "python", "```"))]
    assert max(len(line) for line in prose) <= _results.WIDTH
    assert len(prose) > len([line for line in text.split("\n") if not line.startswith(("|", "python", "```"))])
    assert _results.wrap_prose(wrapped) == wrapped


def test_replace_section_writes_the_topic_page_and_keeps_the_hand_written_paragraphs(tmp_path, monkeypatch):
    pages = tmp_path / "results"
    pages.mkdir()
    index = tmp_path / "RESULTS.md"
    index.write_text("# Benchmark results\n\n[Learning](results/learning.md)\n", encoding="utf-8")
    page = pages / "learning.md"
    page.write_text(
        "# How the presets learn\n\nSummary.\n\n## Learning\n\nold body\n\nRead with: by hand.\n\n"
        "| old | table |\n\n## Preset tuning\n\nuntouched\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(_results, "PAGES", pages)
    monkeypatch.setattr(_results, "INDEX", index)
    new_body = LONG + "\n\n| env | reward |\n| --- | ---: |\n| fast | 68.6 |"
    # The index (a command recorded before the pages were split) and no path both mean the topic page.
    for path in (str(index), None):
        written = _results.replace_section(path, "## Learning", new_body, keep=("Read with:",), keep_before_table=True)
        assert written == page
    assert index.read_text(encoding="utf-8") == "# Benchmark results\n\n[Learning](results/learning.md)\n"
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# How the presets learn\n\nSummary.\n\n## Learning\n\nReading: the first run")
    assert text.count("Read with: by hand.") == 1 and text.index("Read with:") < text.index("| env | reward |")
    assert "old body" not in text and "| old | table |" not in text
    assert text.endswith("| fast | 68.6 |\n\n## Preset tuning\n\nuntouched\n")
    learning = _results.old_section(None, "## Learning")
    assert max(len(line) for line in learning.split("\n") if "`" not in line) <= _results.WIDTH
    # A section the page does not hold yet is appended to it.
    _results.replace_section(None, "## Preset tuning, GPU", "new")
    assert page.read_text(encoding="utf-8").endswith("untouched\n\n## Preset tuning, GPU\n\nnew\n")


def test_the_write_option_takes_an_optional_file():
    parser = argparse.ArgumentParser()
    _results.add_write_option(parser)
    assert parser.parse_args([]).write is None
    assert parser.parse_args(["--write"]).write == ""  # the topic page
    assert parser.parse_args(["--write", "scratch.md"]).write == "scratch.md"

