"""Every relative link in README.md and docs/*.md leads somewhere: a file that exists, a heading that exists.

The README is a short page that sends readers into docs/; a page renamed, a section moved or a
heading reworded must not leave a dead link behind. Anchors are checked against the slugs GitHub
gives headings (github-slugger's rules), since that is where these pages are read. The checker is
tested on a page with known broken links too, so a checker that finds nothing cannot pass unnoticed.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parent.parent

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_INLINE_LINK = re.compile(r"\]\(\s*(<[^>]*>|[^)\s]+)")
_REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
_HTML_LINK = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_HTML_ANCHOR = re.compile(r"""<a\b[^>]*\b(?:name|id)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//")


def documents(root: Path = REPO) -> list[Path]:
    """The pages whose links are checked: the README and every page under docs/."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (fenced lines become blank: nothing there is a link or heading)."""
    lines: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            lines.append("")
        elif fence is not None:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
            lines.append("")
        else:
            lines.append(line)
    return lines


def rendered_text(heading: str) -> str:
    """A heading's text as GitHub renders it: link and image texts, code without backticks, no markup."""
    parts: list[str] = []
    last = 0
    for span in _CODE_SPAN.finditer(heading):
        parts.append(_strip_markup(heading[last:span.start()]))
        parts.append(span.group(2).strip() if span.group(2).strip() else span.group(2))
        last = span.end()
    parts.append(_strip_markup(heading[last:]))
    return "".join(parts)


def _strip_markup(text: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"(?<!\w)_+|_+(?!\w)", "", text)


def github_slug(heading: str) -> str:
    """github-slugger's slug: lower case, letters, digits, marks, '-' and '_' kept, each space a '-'."""
    out: list[str] = []
    for ch in rendered_text(heading).lower():
        if ch == " ":
            out.append("-")
        elif ch in "-_" or ch.isalnum() or unicodedata.category(ch).startswith("M"):
            out.append(ch)
    return "".join(out)


def anchors(text: str) -> set[str]:
    """Every anchor a page offers: its headings' slugs (with GitHub's -1, -2 for repeats) and HTML anchors."""
    found: set[str] = set()
    occurrences: dict[str, int] = {}
    lines = prose_lines(text)
    for i, line in enumerate(lines):
        heading: str | None = None
        match = _ATX.match(line)
        if match:
            heading = match.group(1) or ""
        elif (i + 1 < len(lines) and line.strip() and _SETEXT.match(lines[i + 1])
              and not _ATX.match(line) and not line.lstrip().startswith(("|", "- ", "* ", "+ ", ">"))):
            heading = line.strip()
        if heading is not None:
            slug = base = github_slug(heading)
            while slug in occurrences:
                occurrences[base] += 1
                slug = f"{base}-{occurrences[base]}"
            occurrences[slug] = 0
            found.add(slug)
        found.update(_HTML_ANCHOR.findall(line))
    return found


def link_targets(text: str) -> list[tuple[int, str]]:
    """(line number, destination) of every Markdown or HTML link outside code."""
    targets: list[tuple[int, str]] = []
    for number, line in enumerate(prose_lines(text), start=1):
        line = _CODE_SPAN.sub("", line)
        found = _INLINE_LINK.findall(line) + _REFERENCE_DEF.findall(line) + _HTML_LINK.findall(line)
        targets.extend((number, dest.strip("<>")) for dest in found)
    return targets


def broken_links(page: Path, root: Path = REPO) -> tuple[int, list[str]]:
    """How many relative links ``page`` has, and one line for each that leads nowhere."""
    text = page.read_text(encoding="utf-8")
    checked = 0
    problems: list[str] = []
    where = page.relative_to(root)
    for number, dest in link_targets(text):
        if _SCHEME.match(dest):
            continue  # a web address: not ours to check offline
        checked += 1
        path_part, _, anchor = dest.partition("#")
        target = (page.parent / unquote(path_part)).resolve() if path_part else page
        if not target.is_relative_to(root.resolve()):
            problems.append(f"{where}:{number}: {dest}: leads outside the repository")
            continue
        if not target.exists():
            problems.append(f"{where}:{number}: {dest}: no such file")
            continue
        if anchor and target.suffix == ".md" and unquote(anchor) not in anchors(target.read_text(encoding="utf-8")):
            problems.append(f"{where}:{number}: {dest}: no heading with anchor #{anchor} in {target.name}")
    return checked, problems


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    pages = documents()
    assert (REPO / "README.md") in pages and len(pages) >= 8, pages
    total = 0
    problems: list[str] = []
    for page in pages:
        checked, found = broken_links(page)
        total += checked
        problems += found
    assert not problems, "broken links:\n" + "\n".join(problems)
    assert total >= 50, f"only {total} relative links found: is the link pattern still right?"


def test_the_readme_stays_a_short_page() -> None:
    size = len((REPO / "README.md").read_bytes())
    assert size < 20_000, f"README.md is {size} bytes; move reference material into docs/"


def documentation_list(readme: str) -> set[str]:
    """The pages the README's "## Documentation" section links, as written (``docs/x.md``)."""
    section = readme.partition("\n## Documentation\n")[2].partition("\n## ")[0]
    return {dest.partition("#")[0] for _, dest in link_targets(section)}


def test_the_readme_lists_every_docs_page() -> None:
    listed = documentation_list((REPO / "README.md").read_text(encoding="utf-8"))
    pages = {f"docs/{page.name}" for page in (REPO / "docs").glob("*.md")}
    assert pages and not pages - listed, f"docs pages missing from the README's Documentation list: {sorted(pages - listed)}"


def test_the_documentation_list_is_read_from_its_own_section() -> None:
    readme = "# T\n\n[a](docs/a.md)\n\n## Documentation\n\n- [b](docs/b.md#x): b\n- [c](docs/c.md)\n\n## Later\n\n[d](docs/d.md)\n"
    assert documentation_list(readme) == {"docs/b.md", "docs/c.md"}


def test_the_checker_reports_missing_files_and_anchors(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other page\n\n## Exit status (0, 1, 2)\n", encoding="utf-8")
    (tmp_path / "README.md").write_text(
        "# Title\n\n## Two words\n\n"
        "[ok](docs/other.md) [ok](docs/other.md#exit-status-0-1-2) [ok](#two-words) [web](https://example.com/x)\n"
        "[gone](docs/missing.md) and [bad anchor](docs/other.md#exit-status) and [bad](#three-words)\n"
        "`[in code](nowhere.md)`\n\n```\n[in a fence](nowhere.md)\n```\n\n[ref]: ../outside.md\n",
        encoding="utf-8",
    )
    checked, problems = broken_links(tmp_path / "README.md", tmp_path)
    assert checked == 7
    assert problems == [
        "README.md:6: docs/missing.md: no such file",
        "README.md:6: docs/other.md#exit-status: no heading with anchor #exit-status in other.md",
        "README.md:6: #three-words: no heading with anchor #three-words in README.md",
        "README.md:13: ../outside.md: leads outside the repository",
    ]


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("7. Requests of our own", "7-requests-of-our-own"),
        ("Warm restart (route snapshot)", "warm-restart-route-snapshot"),
        ("`mqadmin watch`", "mqadmin-watch"),
        ("JSON shapes (`--json`)", "json-shapes---json"),
        ("The NameServer's requests", "the-nameservers-requests"),
        ("Spark fan-out: A → B", "spark-fan-out-a--b"),
        ("[Linked](x.md) *and* __bold__ snake_case", "linked-and-bold-snake_case"),
    ],
)
def test_slugs_follow_github(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug


def test_repeated_headings_get_numbered_anchors() -> None:
    page = "# Options\n\n## Options\n\nText\n=====\n\n```\n# not a heading\n```\n<a name=\"kept\"></a>\n"
    assert anchors(page) == {"options", "options-1", "text", "kept"}
