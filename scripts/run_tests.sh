#!/usr/bin/env bash
# The test suite in two phases, as `make test` runs it:
#   1. every test not marked `timing`, spread over the cores by pytest-xdist (--dist loadfile:
#      a file's tests on one worker, so that a module's shared campaign run is made once);
#   2. the tests marked `timing` (wall-clock assertions), two at a time and no other test
#      sharing the cores (their bounds hold beside one other such test: most of their time is
#      spent waiting on a simulated server).
# Both phases run; the exit code is the first failure's. Each phase's wall time is printed.
#   scripts/run_tests.sh [--fast] [PYTEST_ARGS...]
#     --fast   only the tests that run no whole campaign (not marked `slow`): make check-fast
#   WORKERS=N  xdist workers for phase 1 (default: twice the cores: most of these tests wait on
#              simulated servers; on two cores three workers kept them 51% busy, four 66%)
#   TIMING_WORKERS=N  xdist workers for phase 2 (default 2; 1: one test at a time)
#   PY=...     the Python (default: .venv/bin/python)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
WORKERS=${WORKERS:-$((2 * $(nproc)))}
# Bytecode written and read: with PYTHONDONTWRITEBYTECODE set (as some images set it), every
# xdist worker rewrote every test module's asserts again (about 4.5 CPU-s a worker) and every
# simulator, CLI and far-side process compiled reportgen's sources again (0.14 CPU-s a
# simulator start); __pycache__/ is ignored by git.
unset PYTHONDONTWRITEBYTECODE
TIMING_WORKERS=${TIMING_WORKERS:-2}
extra=""
if [ "${1:-}" = "--fast" ]; then
  extra=" and not slow"
  shift
fi

now() { date +%s.%N; }
began=$(now)
status=0
phase() {  # phase NAME PYTEST_ARGS...
  local name=$1 t0 rc
  shift
  t0=$(now)
  "$PY" -m pytest "$@"
  rc=$?
  [ $rc -eq 5 ] && rc=0  # nothing selected in this phase (a -k that names only the other)
  awk -v a="$t0" -v b="$(now)" -v n="$name" 'BEGIN { printf "tests: %s phase took %.0f s\n", n, b - a }'
  [ $status -ne 0 ] || status=$rc
}
# --no-loadscope-reorder: files in the order collected, the longest first (tests/conftest.py,
# LONG_FIRST); by default pytest-xdist starts the files with the most tests first
phase parallel -n "$WORKERS" --dist loadfile --no-loadscope-reorder -m "not timing$extra" "$@"
# Only the files that mark timing tests are collected again (a mark is written
# `pytest.mark.timing` in the file that holds the test).
# (Unless pytest arguments were given: they may name the files.)
timed=()
[ $# -gt 0 ] || mapfile -t timed < <(grep -rl --include="test_*.py" "pytest.mark.timing" tests)
if [ $# -gt 0 ] || [ ${#timed[@]} -gt 0 ]; then
  if [ "$TIMING_WORKERS" -gt 1 ]; then
    phase timing -n "$TIMING_WORKERS" --dist loadfile --no-loadscope-reorder -m "timing$extra" \
      "$@" "${timed[@]}"
  else
    phase timing -p no:xdist -m "timing$extra" "$@" "${timed[@]}"
  fi
fi
awk -v a="$began" -v b="$(now)" 'BEGIN { printf "tests: %.0f s in all\n", b - a }'
exit $status
