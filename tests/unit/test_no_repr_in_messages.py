"""No Python repr reaches a user: messages quote values with `wording.quoted`.

A repr shows `PosixPath('…')`, `None`, `['a']` and escapes full-width spaces; users read the
value as they wrote it. The scan keeps `!r`/`repr()` from coming back; the error paths below
check what a user actually sees."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from sqlalchemy import make_url

from ragtriage.config.loading import load_settings
from ragtriage.errors import ConfigError, InputError
from ragtriage.eval.gate import GateRuleError, parse_rule
from ragtriage.kb.frontmatter import split_front_matter
from ragtriage.logs.log_line import BadLine
from ragtriage.logs.queue import parse_since
from ragtriage.logs.reader import parse_line
from ragtriage.wording import quoted

PACKAGE = Path(__file__).resolve().parents[2] / "ragtriage"

REPR_SIGNS = ("PosixPath(", "WindowsPath(", "None)", "['", "\\u3000", "b'")


#: Errors that report a bug (a traceback, exit 1): their text is for a developer.
BUG_ERRORS = {"RuntimeError", "AssertionError", "NotImplementedError"}


def _raises_a_bug(node: ast.AST) -> bool:
    exc = node.exc if isinstance(node, ast.Raise) else None
    return isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name) and exc.func.id in BUG_ERRORS


def _reprs_outside_dunder_repr(tree: ast.AST) -> list[int]:
    """Line numbers of `{x!r}` and `repr` uses outside `__repr__` methods and bug reports."""
    found: list[int] = []

    def visit(node: ast.AST, in_repr: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_repr = in_repr or node.name == "__repr__"
        in_repr = in_repr or _raises_a_bug(node)
        if not in_repr:
            if isinstance(node, ast.FormattedValue) and node.conversion == ord("r"):
                found.append(node.lineno)
            if isinstance(node, ast.Name) and node.id == "repr":
                found.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child, in_repr)

    visit(tree, False)
    return found


def test_package_source_shows_no_repr_outside_dunder_repr() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        for line in _reprs_outside_dunder_repr(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"ragtriage/{relative}:{line}")
    assert offenders == [], "use ragtriage.wording.quoted instead of repr in messages: " + ", ".join(
        offenders
    )


def test_the_scan_sees_a_message_repr_and_spares_dunder_repr_and_bug_reports() -> None:
    source = (
        'def f(x):\n    raise InputError(f"bad {x!r}")\n\n'
        'def g(kind):\n    raise RuntimeError(f"sent {kind!r}")\n\n'
        'class C:\n    def __repr__(self):\n        return f"C({self!r})"\n'
    )
    assert _reprs_outside_dunder_repr(ast.parse(source)) == [2]


@pytest.mark.parametrize(
    "value, expected",
    [
        ("rerank_eror", "'rerank_eror'"),
        ("上周\u3000二", "'上周\u3000二'"),  # CJK and the full-width space as they are
        ("a\nb\tc", "'a\\nb\\tc'"),  # one line, breaks visible
        (Path("文档") / "a b.md", "'文档/a b.md'"),
        (None, "null"),
        (True, "true"),
        (3, "3"),
        (0.25, "0.25"),
        (b"\xc3", "0xC3"),
        (["c1", 2, None], '["c1", 2, null]'),
        ({"chunk_id": "说明"}, '{"chunk_id": "说明"}'),
        (make_url("sqlite:////tmp/store.db"), "'sqlite:////tmp/store.db'"),  # a named tuple, shown as text
    ],
)
def test_quoted_shows_values_as_written(value: object, expected: str) -> None:
    assert quoted(value) == expected


def test_quoted_cuts_long_values_visibly() -> None:
    assert quoted("x" * 50, limit=10) == "'" + "x" * 10 + "…'"
    assert quoted("short", limit=10) == "'short'"


def test_config_value_of_the_wrong_type_is_shown_as_toml_would_write_it(tmp_path: Path) -> None:
    config = tmp_path / "配置.toml"
    config.write_text('[retrieval]\nbm25_k = ["十", 2]\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(config, environ={})
    message = str(caught.value)
    assert '(got ["十", 2])' in message and str(config) in message
    assert not any(sign in message for sign in REPR_SIGNS)


def test_log_field_of_the_wrong_type_shows_null_not_none() -> None:
    bad = parse_line(b'{"request_id": "r1", "raw_query": "q", "feedback": {"rating": ["up"]}}', 7)
    assert isinstance(bad, BadLine)
    message = bad.message
    assert "field 'feedback.rating'" in message and '(got ["up"])' in message
    assert not any(sign in message for sign in REPR_SIGNS)


def test_cli_option_errors_keep_cjk_and_full_width_spaces() -> None:
    with pytest.raises(InputError) as since:
        parse_since("上周\u3000二")
    with pytest.raises(GateRuleError) as gate:
        parse_rule("召回@5=高", "min")
    assert "--since '上周\u3000二':" in str(since.value)
    assert str(gate.value).startswith("--min '召回@5=高': ")
    for message in (str(since.value), str(gate.value)):
        assert not any(sign in message for sign in REPR_SIGNS)


def test_document_errors_name_the_path_as_a_plain_path() -> None:
    path = Path("手册") / "报销.md"
    with pytest.raises(InputError) as caught:
        split_front_matter("---\nstatus: 草稿\n---\n正文\n", path)
    message = str(caught.value)
    assert message.startswith(f"{path}:2: front matter status '草稿' is not one of")
    assert not any(sign in message for sign in REPR_SIGNS)
