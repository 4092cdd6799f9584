#!/usr/bin/env bash
# The test suite, as `make test` runs it: every test spread over the cores by pytest-xdist
# (--dist loadfile: a file's tests on one worker, so that a module's shared campaign run is
# made once), the longest files first (tests/conftest.py, LONG_FIRST). No test needs the cores
# to itself: a test that compares wall-clock speeds compares two sides loaded alike (pairs of
# runs, ratios), and its bounds hold beside other work. Its wall time is printed.
#   scripts/run_tests.sh [--fast] [PYTEST_ARGS...]
#     --fast   only the tests that run no whole campaign (not marked `slow`): make check-fast
#   WORKERS=N  xdist workers (default: three a core: most of these tests wait on simulated
#              servers; on two cores four workers kept them about 80% busy, and six ran the
#              suite in 314 s against 352 s)
#   PY=...     the Python (default: .venv/bin/python)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
WORKERS=${WORKERS:-$((3 * $(nproc)))}
# Bytecode written and read: with PYTHONDONTWRITEBYTECODE set (as some images set it), every
# xdist worker rewrote every test module's asserts again (about 4.5 CPU-s a worker) and every
# simulator, CLI and far-side process compiled reportgen's sources again (0.14 CPU-s a
# simulator start); __pycache__/ is ignored by git.
unset PYTHONDONTWRITEBYTECODE
marks=()
if [ "${1:-}" = "--fast" ]; then
  marks=(-m "not slow")
  shift
fi

began=$(date +%s.%N)
# --no-loadscope-reorder: files in the order collected, the longest first (tests/conftest.py,
# LONG_FIRST); by default pytest-xdist starts the files with the most tests first
"$PY" -m pytest -n "$WORKERS" --dist loadfile --no-loadscope-reorder "${marks[@]}" "$@"
status=$?
awk -v a="$began" -v b="$(date +%s.%N)" 'BEGIN { printf "tests: %.0f s\n", b - a }'
exit $status
