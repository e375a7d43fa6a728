"""benchmarks/results is a reference indexed by docs/results.md, and the docs' relative links resolve.

Every file under benchmarks/results must be reachable from docs/results.md: linked from it, or from a
README.md it links (a folder linked counts as its README, a README linked as its folder), directly or
through a linked folder above the file. Every top-level folder there has a README.md that states the
question, the command, the machine, the date and the load, has a table, and shows a plot where the
folder has one. Every relative link in README.md, docs/*.md and the results' READMEs must name a path
that exists. The tree stays at most a quarter of the 2,029 files it held before it became a reference,
no page of documentation runs over 400 lines, and the pages describe results by date, machine and
load, not by who ran them.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
INDEX = ROOT / "docs" / "results.md"
FILES_BEFORE = 2029  # benchmarks/results at 0ebc753, before it became a reference
MAX_PAGE_LINES = 400
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def links(md: Path) -> list[Path]:
    """Return the paths that md's relative Markdown links name (anchors dropped; URLs and pure anchors skipped)."""
    out = []
    for target in LINK.findall(md.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        out.append((md.parent / unquote(target.split("#", 1)[0])).resolve())
    return out


def reachable() -> tuple[set[Path], set[Path]]:
    """Return (files, folders) under benchmarks/results linked from the index or a README it reaches."""
    files: set[Path] = set()
    folders: set[Path] = set()
    todo, seen = [INDEX], set()
    while todo:
        md = todo.pop()
        if md in seen:
            continue
        seen.add(md)
        for p in links(md):
            if not p.is_relative_to(RESULTS):
                continue
            if p.is_dir():
                folders.add(p)
                if (p / "README.md").is_file():
                    todo.append(p / "README.md")
            elif p.is_file():
                files.add(p)
                if p.name == "README.md":  # a README describes its folder: reaching it reaches the folder
                    folders.add(p.parent)
                    todo.append(p)
    return files, folders


def stored() -> list[Path]:
    """Return the files under benchmarks/results that git keeps or would add.

    What .gitignore names (the demo's output, `bench --quick`'s plot) is left out, so running the
    demo first does not fail these tests.
    """
    cmd = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", str(RESULTS)]
    try:
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True).stdout.decode()
        listed = [ROOT / name for name in out.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: everything on disk
        listed = list(RESULTS.rglob("*"))
    return sorted(p for p in listed if p.is_file() and "__pycache__" not in p.parts)


def folders() -> list[Path]:
    """Return the top-level folders of benchmarks/results that hold a stored file."""
    tops = {p.relative_to(RESULTS).parts[0] for p in stored() if len(p.relative_to(RESULTS).parts) > 1}
    return sorted(RESULTS / name for name in tops)


def test_every_result_file_is_reached_from_the_index():
    files, folders = reachable()
    loose = [str(p.relative_to(ROOT)) for p in stored()
             if p not in files and not any(p.is_relative_to(d) for d in folders)]
    assert not loose, f"not linked from docs/results.md or a README it links: {loose}"


def test_every_top_level_result_folder_has_a_readme():
    bare = [d.name for d in folders() if not (d / "README.md").is_file()]
    assert not bare, f"result folders without a README.md: {bare}"


def test_relative_links_resolve():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(RESULTS.rglob("README.md"))]
    broken = [f"{md.relative_to(ROOT)} -> {p}" for md in pages for p in links(md) if not p.exists()]
    assert not broken, f"broken relative links: {broken}"



def pages() -> list[Path]:
    """README.md, benchmarks/README.md, docs/*.md and every Markdown file under benchmarks/results."""
    return [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            *sorted(RESULTS.rglob("*.md"))]


def test_results_are_at_most_a_quarter_of_what_they_were():
    n = len(stored())
    assert n <= FILES_BEFORE // 4, f"benchmarks/results holds {n} files, more than {FILES_BEFORE // 4}"


def test_no_page_is_over_400_lines():
    counts = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines()) for p in pages()}
    long = {name: n for name, n in counts.items() if n > MAX_PAGE_LINES}
    assert not long, f"pages over {MAX_PAGE_LINES} lines: {long}"


# What a folder's README must state, each as a pattern it must match somewhere (case-insensitive).
README_PARTS = {
    "the question": r"\*\*questions?\b",
    "the command": r"\bcommands?\b|^```(sh|bash)$",
    "the machine": r"\bmachine\b",
    "the date": r"\b20\d\d-\d\d-\d\d\b",
    "the load": r"\bload\b",
    "a table": r"^\|[-:| ]+\|$",
}


def test_every_top_level_result_folder_readme_states_what_a_reader_needs():
    missing = {}
    for d in folders():
        readme = d / "README.md"
        if not readme.is_file():
            continue  # test_every_top_level_result_folder_has_a_readme reports it
        text = readme.read_text(encoding="utf-8")
        gaps = [what for what, pattern in README_PARTS.items()
                if not re.search(pattern, text, re.IGNORECASE | re.MULTILINE)]
        if any(p.suffix == ".png" and p.is_relative_to(d) for p in stored()) and "![" not in text:
            gaps.append("a plot (the folder has one)")
        if gaps:
            missing[d.name] = gaps
    assert not missing, f"result READMEs missing parts: {missing}"


# Words that narrate who made a result instead of stating its date, machine and load.
NARRATION = re.compile(r"\b(sessions?|workers?|reviewers?|we|I ran|our team)\b")


def test_pages_describe_results_not_who_ran_them():
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in pages()
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if NARRATION.search(line)]
    assert not found, f"narration of who ran what: {found}"
