"""Names as a user types them: matched in any case, echoed safely, and the closest known one
suggested when none matches.  Used by the CLI and by the settings it reads (config.json)."""

from __future__ import annotations

ECHO_MAX = 40  # an argument echoed in a message is cut to this many characters


def printable(text) -> str:
    """Text as it can be printed: bytes that were not UTF-8 in argv or a path shown as \\xff."""
    text = str(text)
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def shown(word) -> str:
    """An argument as it may be echoed: printable (undecodable bytes escaped) and cut short."""
    word = printable(word)
    word = "".join(c if c.isprintable() else repr(c)[1:-1] for c in word)
    return word if len(word) <= ECHO_MAX else word[:ECHO_MAX - 3] + "..."


def did_you_mean(word: str, choices, what: str) -> str:
    import difflib  # only on the error path: it costs milliseconds to import

    close = difflib.get_close_matches(word.lower(), [c.lower() for c in choices], n=1, cutoff=0.5)
    close = [c for c in choices if close and c.lower() == close[0]]
    hint = f"; did you mean '{close[0]}'?" if close else f" (known: {', '.join(sorted(choices))})"
    return f"unknown {what} '{shown(word)}'{hint}"


def match_name(word: str, choices) -> str | None:
    """``word`` as spelled in ``choices``, matched case-insensitively; None when absent."""
    if word in choices:
        return word
    low = word.lower()
    return next((c for c in choices if c.lower() == low), None)
