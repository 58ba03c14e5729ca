"""Errors that reach the user as one line, never as a traceback."""


class DataError(Exception):
    """Bad input data: the message names the file, the item and what is wrong."""

    def __init__(self, path, item, what):
        self.path = str(path)
        self.item = item
        self.what = what
        where = f"{self.path}: {one_line(item)}: " if item is not None else f"{self.path}: "
        super().__init__(where + what)


def one_line(item) -> str:
    """An item as the message names it: itself, or its repr where it holds a
    character that would break the line or hide (a newline, NUL, a control)."""
    text = str(item)
    return text if text.isprintable() else repr(text)


def excerpt(text: str, n: int = 160) -> str:
    """What came back, for a one-line message: its whitespace runs made single spaces, cut at ``n``
    characters (``...`` says where); a secret in it starred first (core/secrets.py), since the cut
    or the spaces would leave a part of it that no later starring finds."""
    from .secrets import mask

    text = " ".join(mask(str(text)).split())
    return text if len(text) <= n else text[:n] + "..."


class ConfigError(Exception):
    """A configuration problem, reported in one line."""


class DownloadError(Exception):
    """A download or verification failure; ``str()`` is always one line.
    ``brief``: the reason alone, without URLs or advice (the message when not
    given), for a line that repeats it, e.g. the next attempt's."""

    def __init__(self, message: str, brief: str | None = None):
        super().__init__(" ".join(str(message).splitlines()))
        self.brief = " ".join(str(brief).splitlines()) if brief is not None else str(self)


# What the workflow reports as one ``memobench:`` line instead of a traceback.
USER_ERRORS = (DataError, DownloadError, ConfigError)
