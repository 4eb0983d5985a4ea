"""Check every link inside the built site: ``python docs/check_links.py docs/_build/html``.

Each ``href`` and ``src`` of every HTML page that points inside the site (no scheme, not
``mailto:``) must name a file that exists, and its ``#fragment``, if any, an ``id`` (or ``name``)
in that file. Links to other websites are listed, not fetched: the build machines are offline.
Exits 1 and prints every broken link, with the page it is on.
"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if value is None:
                continue
            if key in ("id", "name") and tag != "meta":
                self.ids.add(value)
            elif key in ("href", "src") and tag not in ("base",):
                self.links.append(value)


def _parse(path: Path, cache: dict[Path, _Page]) -> _Page:
    if path not in cache:
        page = _Page()
        page.feed(path.read_text(encoding="utf-8", errors="replace"))
        cache[path] = page
    return cache[path]


def check(site: Path) -> tuple[list[str], int, int]:
    """Return (broken links as 'page: link (why)', internal links checked, external links seen)."""
    cache: dict[Path, _Page] = {}
    broken: list[str] = []
    internal = external = 0
    for html in sorted(site.rglob("*.html")):
        for link in _parse(html, cache).links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith(("//", "mailto:")):
                external += 1
                continue
            internal += 1
            target = html if not parts.path else (html.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            where = f"{html.relative_to(site)}: {link}"
            if not target.exists():
                broken.append(f"{where} (no such file)")
            elif parts.fragment and target.suffix == ".html":
                if unquote(parts.fragment) not in _parse(target, cache).ids:
                    broken.append(f"{where} (no #{parts.fragment} in {target.name})")
    return broken, internal, external


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python docs/check_links.py BUILT_HTML_FOLDER", file=sys.stderr)
        return 2
    broken, internal, external = check(Path(argv[0]).resolve())
    for line in broken:
        print(f"broken link: {line}")
    print(f"{internal} links inside the site checked, {len(broken)} broken; "
          f"{external} links to other sites not fetched (offline)")  # fmt: skip
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
