"""Text a job chose (log lines, failure reasons, file contents), made safe to show: in a notification (SNS e-mail,
chat) or a terminal, it must not carry control or format characters (ANSI escapes, carriage returns, bidi
overrides, line separators) nor grow without bound."""

from __future__ import annotations

MAX_LINE_CHARS = 2000


def printable(text: str) -> str:
    """`text` with every control or format character shown as an escape (\\x1b, \\u202e); one line."""
    return "".join(c if c.isprintable() else (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
                   for c in text)


def neutral(text: str, *, max_line_chars: int = MAX_LINE_CHARS) -> str:
    """`text` with its line breaks kept and everything else `printable`, each line at most `max_line_chars`."""
    lines = [printable(line) for line in text.split("\n")]
    return "\n".join(line if len(line) <= max_line_chars else line[: max_line_chars - 3] + "..." for line in lines)
