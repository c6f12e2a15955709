"""A command's summary as its logical lines: `commands.common.echo_lines` wraps each line at the
output's width (120 columns in a pipe), continuation lines indented by spaces."""

from __future__ import annotations


def report_lines(output: str) -> list[str]:
    """`output`'s lines with each wrapped line joined back (a continuation starts with spaces)."""
    lines: list[str] = []
    for line in output.splitlines():
        if line.startswith(" ") and lines:
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return lines


def report_text(output: str) -> str:
    """`report_lines(output)` joined with newlines (for `in` checks of whole phrases)."""
    return "\n".join(report_lines(output))
