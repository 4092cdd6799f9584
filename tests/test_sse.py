"""The SSE decoder against the ways real servers split and pad their streams."""

from __future__ import annotations

from reportgen.sse import SSEDecoder

STREAM = b'data: {"a":1}\n\n: keep-alive\n\ndata: {"a":2}\r\n\r\ndata: [DONE]\n\n'


def test_whole_stream_in_one_read() -> None:
    assert SSEDecoder().feed(STREAM) == ['{"a":1}', '{"a":2}', "[DONE]"]


def test_every_split_point_gives_the_same_events() -> None:
    for cut in range(len(STREAM) + 1):
        d = SSEDecoder()
        events = d.feed(STREAM[:cut]) + d.feed(STREAM[cut:])
        assert events == ['{"a":1}', '{"a":2}', "[DONE]"], cut


def test_byte_at_a_time_with_cr_line_ends_and_multiline_data() -> None:
    d = SSEDecoder()
    events: list[str] = []
    for b in b"event: x\rdata: one\rdata:two\r\rid: 3\n\n":
        events += d.feed(bytes([b]))
    assert events == ["one\ntwo"]


def test_stream_cut_short_flushes_the_last_event() -> None:
    d = SSEDecoder()
    assert d.feed(b'data: {"a":1}') == []
    assert d.close() == ['{"a":1}']
