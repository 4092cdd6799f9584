"""An incremental Server-Sent Events decoder for streamed OpenAI-style responses.

Works on bytes as they come off the socket and returns each event's ``data`` payload as bytes
(a JSON parser takes bytes directly, so nothing is decoded twice). Copes with events split
across reads, several events in one read, CRLF or CR line ends, comments (``: keep-alive``) and
multi-line ``data:`` fields. Only ``data`` matters for inference streams, so ``event``, ``id``
and ``retry`` fields are read and ignored.

It sits on the load generator's hot path (one call per read, thousands of reads a second), so
the common case, LF line ends, costs one ``split`` and one loop over the lines.
"""

from __future__ import annotations


class SSEDecoder:
    __slots__ = ("_buf", "_data")

    def __init__(self) -> None:
        self._buf = b""  # an incomplete last line, kept for the next read
        self._data: list[bytes] = []  # data lines of the event being read

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add bytes read from the wire; return the data of every event now complete."""
        buf = self._buf + chunk if self._buf else chunk
        hold = b""
        if b"\r" in buf:  # rare: CRLF or CR line ends
            if buf.endswith(b"\r"):  # maybe the first half of a CRLF: decide on the next read
                buf, hold = buf[:-1], b"\r"
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buf.split(b"\n")
        self._buf = lines.pop() + hold
        events: list[bytes] = []
        data = self._data
        for line in lines:
            if not line:  # a blank line ends the event; one without data is no event
                if data:
                    payload = data[0] if len(data) == 1 else b"\n".join(data)
                    if payload:
                        events.append(payload)
                    data = self._data = []
            elif line.startswith(b"data:"):
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line == b"data":  # a field name alone means an empty value
                data.append(b"")
            # anything else: a comment (":" first) or a field we do not use
        return events

    def close(self) -> list[bytes]:
        """Flush what a stream cut short left: a last event without its closing blank line.

        The flushed payload may be cut mid-way; the caller decides whether it is usable.
        """
        if not self._buf and not self._data:
            return []
        return self.feed(b"\n\n")
