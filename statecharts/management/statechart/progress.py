"""A progress display for the long management commands (``statechart prune``, ``statechart
replay --all``, ...), as users of such tools expect: on a terminal one line rewritten in
place; otherwise (a log file, a cron job's mail) plain lines, at most about ``lines`` of
them, so a log is not flooded by a million-row run.
"""

from __future__ import annotations

from django.core.management.base import OutputWrapper

WIDTH = 78


class Progress:
    """Shows ``text`` for ``done`` of ``total`` items (``total`` may be unknown)."""

    def __init__(
        self,
        stdout: OutputWrapper,
        *,
        plain: bool = True,
        total: int | None = None,
        lines: int = 10,
    ) -> None:
        """``plain``: whether to print plain lines when the output is not a terminal (a
        command passes ``verbosity >= 2`` where its summary says enough)."""
        self.stdout = stdout
        self.live = stdout.isatty()
        self.plain = plain
        self.total = total
        self.every = max(1, (total or 0) // max(1, lines))
        self.next_plain = self.every  # the next count a plain line is printed at
        self.shown = False

    def update(self, done: int, text: str) -> None:
        of = f" of {self.total:,}" if self.total is not None else ""
        line = f"{done:,}{of}: {text}"
        if self.live:
            self.stdout.write(line[:WIDTH].ljust(WIDTH), ending="\r")
            self.stdout.flush()
            self.shown = True
        elif self.plain and (done >= self.next_plain or done == self.total):
            self.stdout.write(line)
            self.next_plain = done + self.every

    def close(self) -> None:
        """Clears the live line, so the summary that follows starts on a clean line."""
        if self.live and self.shown:
            self.stdout.write(" " * WIDTH, ending="\r")
            self.stdout.flush()
