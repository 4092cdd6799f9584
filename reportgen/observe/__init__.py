"""What the run sees of the machine and the server beside the load.

- ``gpu``: what a GPU source answers; ``nvml``: the driver's; ``sources``: a recorded capture
  replayed, and ``open_source``, which picks one.
- ``telemetry``: GPU samples during a level's window. ``fingerprint``: the host, its GPUs and
  the software, recorded once per run; ``environment``: that record typed, as results, render
  and diff read it. ``evidence``: the server's info endpoints, its Prometheus counters and
  what its log says; ``events``: the engine's run-time events found in its log.

Imports ``reportgen.redact``, ``reportgen.tls``, the engines' patterns and the level record
an event is (``results.levels``): the run stage calls it, and results read what it recorded.
"""
