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


class ConfigError(Exception):
    """A configuration problem, reported in one line."""


class DownloadError(Exception):
    """A download or verification failure; ``str()`` is always one line."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).splitlines()))


# What the workflow reports as one ``memobench:`` line instead of a traceback.
USER_ERRORS = (DataError, DownloadError, ConfigError)
