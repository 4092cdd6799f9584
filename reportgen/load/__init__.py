"""The load generator's parts; ``reportgen.load.loadgen`` is the entry point and its public face.

- ``records``: what a request and a level are (``RequestSpec``, ``RequestRecord``, ``LevelRun``).
- ``client``: one HTTP request, streamed or not, into one record.
- ``wire``: kernel-timed plain HTTP/1.1 connections (the hot path for http:// URLs).
- ``worker``: one event loop's share of a level (closed or open loop), in-process or in a
  worker process.
"""
