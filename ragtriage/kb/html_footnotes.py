"""Find an HTML page's footnotes and the marker that cites each, so a footnote joins the citing section.

A footnote is a pair: a marker link `<a href="#X">` in the text and the body element `X` names (by
`id`, or by `name` on an empty anchor, in which case the body is the block around that anchor). Both
sides must look like a footnote, which keeps table-of-contents and cross-reference links out:

- marker: its text is a label (`[6]`, `1`, `iv`, `*`, `注2`), and a `class` mentioning `footnote` or
  `noteref`, `role="doc-noteref"`, `epub:type="noteref"`, a `<sup>` around or inside the link, or a
  fragment such as `#ftn.idm12`, `#fn1`, `#fn:1`, `#_ftn1`, `#footnote-2`, `#cite_note-3`;
- body: inside (or itself) a `footnote(s)`/`endnotes`/`references` class, a `doc-endnotes`/`doc-footnote`
  role, an `epub:type` footnote/endnote or `id="footnotes"`; an id of the fragment shapes above; or a
  link back to the marker.

This covers DocBook (`div.footnotes > div.footnote#ftn.*`), pandoc (`section.footnotes > ol > li#fn1`,
EPUB `aside`), Python-Markdown (`div.footnote li#fn:1`), markdown-it, docutils (`aside.footnote`),
MediaWiki (`ol.references li#cite_note-1`) and Word's `_ftn1` anchors. A body whose markers all sit in
skipped markup (navigation) has no reachable marker and stays where it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from bs4 import Tag

# `fn1`, `fn:a`, `ftn.idm12`, `_ftn1`, `footnote-2`, `cite_note-3`; not the back-link ids `fnref1`, `_ftnref1`,
# `footnote-reference-1`, nor a whole `footnotes` list.
_FRAGMENT = re.compile(
    r"^(?:_?ftn|fn|footnote|endnote|note|cite_note)(?!-?ref)(?:\d[\w.:-]*|[-_.:][\w.:-]+)$", re.IGNORECASE
)
_BODY_CLASSES = {
    "footnote", "footnotes", "footnote-item", "footnotes-list", "endnote", "endnotes", "references",
}  # fmt: skip
_BODY_ROLES = {"doc-endnotes", "doc-footnote", "doc-endnote"}
_EPUB_TYPES = {"footnote", "footnotes", "endnote", "endnotes", "rearnote", "rearnotes"}
# A body is a block; an anchor inside a paragraph stands for that paragraph (or list item, ...).
_BODY_BLOCKS = {"p", "li", "div", "aside", "section", "dd", "table", "blockquote", "article"}
_HEADINGS = {f"h{level}" for level in range(1, 7)}
_LABEL = re.compile(r"[\[\]()\s]")
_WORD = re.compile(r"\w")
_LABEL_TEXT = re.compile(
    r"^(?:注释?|note)?(?:[0-9A-Za-z]{1,4}|[\u2460-\u2473]|[*†‡§¶]{1,3})?$", re.IGNORECASE
)


@dataclass
class Footnotes:
    """The relocatable footnotes of one page: body per marker, and each body's first reachable marker."""

    body_of_marker: dict[int, Tag] = field(default_factory=dict)
    """id(marker `<a>`) → body element, for every footnote marker."""
    label_of_body: dict[int, str] = field(default_factory=dict)
    """id(body) → the marker's text without brackets (`6` for `[6]`); set only for bodies to relocate."""
    bodies: list[Tag] = field(default_factory=list)
    """The bodies to relocate, in the order of their first marker."""

    def relocated(self, element: Tag) -> bool:
        """True when `element` is a footnote body that belongs after the paragraph citing it."""
        return id(element) in self.label_of_body

    def markers_in(self, element: Tag) -> list[Tag]:
        """The footnote markers inside `element` (or `element` itself), in document order."""
        if not self.body_of_marker:
            return []
        if element.name == "a":
            return [element] if id(element) in self.body_of_marker else []
        return [link for link in element.find_all("a", href=True) if id(link) in self.body_of_marker]


def find_footnotes(root: Tag, is_skipped: Callable[[Tag], bool]) -> Footnotes:
    """Pair the footnote markers under `root` with their bodies (see the module docstring)."""
    links = [link for link in root.find_all("a", href=True) if str(link["href"]).startswith("#")]
    targets = _targets(root)
    candidates: list[tuple[Tag, Tag, Tag]] = []
    for link in links:
        fragment = str(link["href"])[1:]
        target = targets.get(fragment)
        if target is None or not _marker_like(link, fragment):
            continue
        body = _body_block(target)
        if body is not None and not _contains(body, link) and _body_like(body, target, link):
            candidates.append((link, target, body))
    result = Footnotes()
    markers = [link for link, target, _ in candidates if not _is_back_link(link, target, candidates)]
    for link in markers:
        body = next(body for marker, _, body in candidates if marker is link)
        result.body_of_marker[id(link)] = body
        if id(body) not in result.label_of_body and _reachable(link, root, is_skipped):
            result.label_of_body[id(body)] = _LABEL.sub("", link.get_text()) or str(link["href"])[1:]
            result.bodies.append(body)
    _drop_back_arrows(result.bodies, markers)
    return result


def _is_back_link(link: Tag, target: Tag, candidates: list[tuple[Tag, Tag, Tag]]) -> bool:
    """`link` sits in another candidate's footnote body and points at that candidate's marker.

    Both directions of a footnote look alike (each is a link to an id next to a `<sup>`); the one
    inside the body is the way back.
    """
    for marker, _, body in candidates:
        if marker is link or not _contains(body, link):
            continue
        if target is marker or target is marker.parent or _contains(target, marker):
            return True
    return False


def _drop_back_arrows(bodies: list[Tag], markers: list[Tag]) -> None:
    """Remove `↩`/`^` back-links: once the footnote sits after its paragraph they only add noise.

    A back-link whose text is the label (DocBook's `[6]`) stays: it numbers the footnote.
    """
    marker_names: set[str] = set()
    for marker in markers:
        marker_names |= _names(marker)
    for body in bodies:
        for back_link in body.find_all("a", href=True):
            if str(back_link["href"])[1:] in marker_names and not _WORD.search(back_link.get_text()):
                back_link.decompose()


def _names(marker: Tag) -> set[str]:
    """What a back-link may point at: the marker's `id` or `name`, or the `<sup id>` around it."""
    names = {str(value) for value in (marker.get("id"), marker.get("name")) if value}
    if marker.parent is not None and marker.parent.name == "sup" and marker.parent.get("id"):
        names.add(str(marker.parent["id"]))
    return names


def labelled_text(label: str, text: str) -> str | None:
    """A footnote's first block, starting with `[label] ` unless it already starts with its label.

    None for a block that is only the label (docutils writes it apart): the next block gets it.
    """
    stripped = text.strip()
    if _LABEL.sub("", stripped) == label:
        return None
    if re.match(rf"\[{re.escape(label)}\]|{re.escape(label)}[.)]\s", stripped):
        return text
    return f"[{label}] {stripped}"


def _targets(root: Tag) -> dict[str, Tag]:
    """Fragment → element, from `id` first, then `name` (the first of each wins, as in browsers)."""
    found: dict[str, Tag] = {}
    for element in root.find_all(True):
        element_id = element.get("id")
        if element_id and str(element_id) not in found:
            found[str(element_id)] = element
    for anchor in root.find_all("a", attrs={"name": True}):
        found.setdefault(str(anchor["name"]), anchor)
    return found


def _marker_like(link: Tag, fragment: str) -> bool:
    classes = " ".join(link.get_attribute_list("class")).lower()
    if link.get("role") == "doc-backlink" or "backref" in classes or "footnote-back" in classes:
        return False
    # A footnote is cited by a label (`[6]`, `1`, `iv`, `*`, `注2`); other link text is a cross-reference.
    if not _LABEL_TEXT.match(_LABEL.sub("", link.get_text())):
        return False
    if "footnote" in classes or "noteref" in classes:
        return True
    if link.get("role") == "doc-noteref" or link.get("epub:type") == "noteref":
        return True
    if link.find("sup") is not None or (link.parent is not None and link.parent.name == "sup"):
        return True
    return bool(_FRAGMENT.match(fragment))


def _body_block(target: Tag) -> Tag | None:
    """The block holding the footnote text; None when it is a heading or holds one (a section link)."""
    body: Tag | None = target
    while body is not None and body.name not in _BODY_BLOCKS:
        if body.name in _HEADINGS or body.name in ("body", "html", "[document]"):
            return None
        body = body.parent
    if body is None or body.find(list(_HEADINGS)) is not None:
        return None
    return body


def _body_like(body: Tag, target: Tag, marker: Tag) -> bool:
    for name in (target.get("id"), target.get("name"), body.get("id")):
        if name and _FRAGMENT.match(str(name)):
            return True
    for element in (body, *body.parents):
        if element.name in ("body", "html", "[document]"):
            break
        classes = {cls.lower() for cls in element.get_attribute_list("class")}
        if classes & _BODY_CLASSES or element.get("role") in _BODY_ROLES:
            return True
        if element.get("epub:type") in _EPUB_TYPES or element.get("id") in ("footnotes", "endnotes"):
            return True
    return _links_back(body, marker)


def _links_back(body: Tag, marker: Tag) -> bool:
    """The body links to the marker, to its `name`, or to the `<sup>` around it."""
    names = _names(marker)
    return any(str(link["href"])[1:] in names for link in body.find_all("a", href=True))


def _contains(ancestor: Tag, element: Tag) -> bool:
    return any(parent is ancestor for parent in element.parents)


def _reachable(marker: Tag, root: Tag, is_skipped: Callable[[Tag], bool]) -> bool:
    """The walker will reach `marker`: nothing around it is skipped (a footnote body is walked too)."""
    for element in (marker, *marker.parents):
        if element is root:
            return True
        if is_skipped(element):
            return False
    return True
