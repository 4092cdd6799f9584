"""The exit codes of every ``reportgen`` command."""

EXIT_OK = 0  # success
EXIT_FAILED = 1  # a run or render that failed (or, with --strict, an experiment)
EXIT_BAD_INPUT = 2  # a campaign file, arguments or results file that cannot be used
EXIT_UNDECIDED = 3  # history check: the data cannot tell whether the newest run regressed
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGTERM: 143, 128 + its number: ``run.interrupt.exit_code``)
