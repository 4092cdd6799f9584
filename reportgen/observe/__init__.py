"""What the run sees of the machine and the server beside the load.

- ``gpu``: what a GPU source answers; ``nvml``: the driver's; ``sources``: a recorded capture
  replayed, and ``open_source``, which picks one.
- ``telemetry``: GPU samples during a level's window. ``fingerprint``: the host, its GPUs and
  the software, recorded once per run. ``evidence``: the server's info endpoints, its
  Prometheus counters and what its log says.

Imports only ``reportgen.redact`` (and the package's version): the run stage calls it, and
results read what it recorded.
"""
