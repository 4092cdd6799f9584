"""The SSE decoder against the ways real servers split and pad their streams."""

from __future__ import annotations

from reportgen.load.sse import SSEDecoder

STREAM = b'data: {"a":1}\n\n: keep-alive\n\ndata: {"a":2}\r\n\r\ndata: [DONE]\n\n'
EVENTS = [b'{"a":1}', b'{"a":2}', b"[DONE]"]


def test_whole_stream_in_one_read() -> None:
    assert SSEDecoder().feed(STREAM) == EVENTS


def test_every_split_point_gives_the_same_events() -> None:
    for cut in range(len(STREAM) + 1):
        d = SSEDecoder()
        events = d.feed(STREAM[:cut]) + d.feed(STREAM[cut:])
        assert events == EVENTS, cut


def test_byte_at_a_time() -> None:
    d = SSEDecoder()
    events: list[bytes] = []
    for b in STREAM:
        events += d.feed(bytes([b]))
    assert events == EVENTS
    assert d.close() == []


def test_cr_line_ends_multiline_data_and_ignored_fields() -> None:
    d = SSEDecoder()
    events: list[bytes] = []
    for b in b"event: x\rdata: one\rdata:two\r\rid: 3\rretry: 10\rdata: 3\r\r":
        events += d.feed(bytes([b]))
    assert events == [b"one\ntwo"]  # the last CR may be half a CRLF: held until more comes
    assert d.close() == [b"3"]


def test_events_without_data_are_not_events() -> None:
    # The SSE rule: an empty data buffer dispatches nothing (so no empty JSON to parse).
    assert SSEDecoder().feed(b"data\n\ndata:\n\nevent: ping\n\ndata: x\n\n") == [b"x"]


def test_crlf_split_between_reads_is_one_line_end() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: x\r") == []
    assert d.feed(b"\n\r") == []  # CRLF ends the line; the lone CR is held, maybe half a CRLF
    assert d.feed(b"\n") == [b"x"]  # ... it was: the blank line ends the event


def test_several_events_in_one_read_and_comments_only() -> None:
    d = SSEDecoder()
    assert d.feed(b": ping\n\n: ping\n\n") == []
    assert d.feed(b"data: 1\n\ndata: 2\n\ndata: 3\n\n") == [b"1", b"2", b"3"]


def test_data_without_space_and_with_extra_space() -> None:
    assert SSEDecoder().feed(b"data:x\n\ndata:  y\n\n") == [b"x", b" y"]


def test_non_utf8_bytes_pass_through_untouched() -> None:
    assert SSEDecoder().feed(b"data: \xff\xfe\n\n") == [b"\xff\xfe"]


def test_stream_cut_short_flushes_the_last_event() -> None:
    d = SSEDecoder()
    assert d.feed(b'data: {"a":1}') == []
    assert d.close() == [b'{"a":1}']
    d = SSEDecoder()
    assert d.feed(b"data: 1\ndata: 2\n") == []
    assert d.close() == [b"1\n2"]
    assert SSEDecoder().close() == []
