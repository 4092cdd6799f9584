"""Parts of benchmarks/loadgen.py: servers, clients, processes, accuracy, tables."""
