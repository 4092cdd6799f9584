"""Pure analysis: tables in, dataclasses and dicts out. No I/O, no clocks, no printing."""
