"""An incremental Server-Sent Events decoder for streamed OpenAI-style responses.

Copes with events split across reads, several events in one read, CRLF or CR line ends,
comments (``: keep-alive``) and multi-line ``data:`` fields. Only ``data`` payloads matter
for inference streams, so ``event``/``id``/``retry`` fields are read and ignored.
"""

from __future__ import annotations


class SSEDecoder:
    def __init__(self) -> None:
        self._buf = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes | str) -> list[str]:
        """Add bytes read from the wire; return the data of every event now complete."""
        text = chunk.decode("utf-8", errors="replace") if isinstance(chunk, bytes) else chunk
        buf = self._buf + text
        # A CR at the very end might be the first half of a CRLF: keep it for the next read.
        hold = buf.endswith("\r")
        if hold:
            buf = buf[:-1]
        buf = buf.replace("\r\n", "\n").replace("\r", "\n")
        lines = buf.split("\n")
        self._buf = lines.pop() + ("\r" if hold else "")
        events: list[str] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append("\n".join(self._data))
                    self._data = []
                continue
            if line.startswith(":"):
                continue  # comment / keep-alive
            name, sep, value = line.partition(":")
            if sep and value.startswith(" "):
                value = value[1:]
            if name == "data":
                self._data.append(value)
        return events

    def close(self) -> list[str]:
        """Flush an event left without its closing blank line (a stream cut short)."""
        rest = self.feed("\n\n") if self._buf or self._data else []
        return rest
