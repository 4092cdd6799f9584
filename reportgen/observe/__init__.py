"""What the run sees of the machine and the server beside the load.

- ``gpu``: NVML behind a small source interface (and a fake replaying a recorded capture).
- ``telemetry``: GPU samples during a level's window. ``fingerprint``: the host, its GPUs and
  the software, recorded once per run. ``evidence``: the server's info endpoints, its
  Prometheus counters and what its log says.

Imports only ``reportgen.redact`` (and the package's version): the run stage calls it, and
results read what it recorded.
"""
