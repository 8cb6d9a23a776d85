"""A loopback HTTP server for the W3C Basic HTTP tests run through the in-memory driver.

Each session gets an address ``http://127.0.0.1:<port>/basichttp/<session id>`` in its
``_ioprocessors``. The server decodes every POST with the processor's own decoder
(``routes.basichttp.decode_post``) on its thread and answers only once the event is in its
inbox; the driver's thread takes the inbox over (:meth:`LoopbackServer.hand_over`) right after
each POST it made returns (the route's ``after_post``) and between runs, so the in-memory
driver is only ever touched by its own thread, and an event a session posts to itself is
queued before the sends that follow the POST in document order (W3C test 201).
"""

from __future__ import annotations

import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import urlsplit

from routes.basichttp import (
    BASICHTTP_SHORT,
    BASICHTTP_TYPE,
    LOOPBACK_OPTIONS,
    ORIGIN_HEADER,
    BadInbound,
    Inbound,
    MemoryBasicHTTP,
    decode_post,
)
from statecharts.drivers.memory import MemoryDriver

PREFIX = "/basichttp/"
MAX_BODY_BYTES = 64 * 1024


class LoopbackServer:
    """Started by ``with LoopbackServer() as server:``; stopped when the block ends."""

    def __init__(self) -> None:
        self.inbox: queue.Queue[tuple[str, Inbound]] = queue.Queue()
        self.driver: MemoryDriver | None = None
        inbox = self.inbox

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # (the name http.server calls)
                parts = urlsplit(self.path)
                if not parts.path.startswith(PREFIX):
                    self.send_error(404)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY_BYTES:
                    self.send_error(413)
                    return
                body = self.rfile.read(length)
                try:
                    event = decode_post(
                        path=parts.path,
                        query=parts.query,
                        content_type=self.headers.get("Content-Type"),
                        body=body,
                        origin=self.headers.get(ORIGIN_HEADER),
                    )
                except BadInbound as exc:
                    self.send_error(400, str(exc))
                    return
                inbox.put((parts.path[len(PREFIX) :], event))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return None  # (quiet: the runner prints outcomes, not requests)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()

    def location(self, session_id: str) -> str:
        return f"http://127.0.0.1:{self.port}{PREFIX}{session_id}"

    def io_processors(self, session_id: str) -> dict[str, str]:
        where = self.location(session_id)
        return {BASICHTTP_TYPE: where, BASICHTTP_SHORT: where}

    def route(self) -> MemoryBasicHTTP:
        return MemoryBasicHTTP(LOOPBACK_OPTIONS, after_post=self.hand_over)

    def clear(self) -> None:
        while True:
            try:
                self.inbox.get_nowait()
            except queue.Empty:
                return

    def hand_over(self) -> int:
        """Queue what arrived into the driver's sessions (on the driver's thread); how many."""
        handed = 0
        while True:
            try:
                session_id, event = self.inbox.get_nowait()
            except queue.Empty:
                return handed
            session = self.driver.sessions.get(session_id) if self.driver else None
            if session is not None and session.running:
                session.enqueue(
                    event.name,
                    event.data,
                    raw=event.raw,
                    origin=event.origin,
                    origintype=BASICHTTP_TYPE,
                )
                handed += 1
