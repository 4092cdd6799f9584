"""The load stage: requests against a ready server, one record per request.

- ``loadgen``: one level (closed or open loop, in this process or in worker processes), the
  entry point; ``sizing``: how many worker processes and pre-opened connections it needs.
- ``records``: what a request and a level are (``RequestSpec``, ``RequestRecord``, ``LevelRun``).
- ``client``: one HTTP request, streamed or not, into one record; ``answer``: what its response
  says; ``sse``: the event-stream decoder.
- ``wire``: kernel-timed plain HTTP/1.1 connections (the hot path for http:// URLs).
- ``worker``: one event loop's share of a level, in-process or in a worker process.
- ``prompts``, ``tokens``: what is sent (synthetic, dataset or fixed prompts; tokenizers).

Imports only ``reportgen.errors``: the run stage drives it, and nothing here knows of runs.
"""
