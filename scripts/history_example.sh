#!/usr/bin/env bash
# Rebuilds docs/examples/history/: the committed GPU runs of the vLLM and SGLang campaigns as
# one history, before and after the steady-state work, on an H200 and on an H100.
#
#   scripts/history_example.sh          # from the repository's root, with reportgen installed
#
# The runs: the vLLM MoE run of 2026-12-01 (tests/fixtures/runs/vllm-h200-moe), the two dense
# H200 runs of 2026-12-03 and 2026-12-04 (their results back from the repository's history,
# commits 5b2d1fc and 7b3aff8, in docs/examples/history/runs/) and the H100 run of 2026-12-05
# (docs/examples/vllm-h100); SGLang's H200 runs of 2026-12-04 and 2026-12-05
# (tests/fixtures/runs/sglang-h200-waves and -steady), its H100 run of 2026-12-05
# (docs/examples/sglang-h100) and the same campaign run again on an H100 on 2026-12-06
# (docs/examples/history/runs/). The store is made afresh in output/ and not committed: it is
# what `reportgen history add` makes of these directories.
set -euo pipefail
cd "$(dirname "$0")/.."
out=docs/examples/history
store=output/history-example.sqlite
rm -f "$store" "$store-wal" "$store-shm"
reportgen history add --store "$store" \
  tests/fixtures/runs/vllm-h200-moe $out/runs/*/ docs/examples/vllm-h100 \
  tests/fixtures/runs/sglang-h200-waves tests/fixtures/runs/sglang-h200-steady docs/examples/sglang-h100
for campaign in vllm-h200 sglang-h200-dense8b; do
  COLUMNS=120 reportgen history show "$campaign" --store "$store" > "$out/$campaign.txt"
  set +e
  COLUMNS=120 reportgen history check "$campaign" --store "$store" --fail-on-regression 5% \
    > "$out/$campaign-check.txt"
  echo "exit $?" >> "$out/$campaign-check.txt"
  set -e
  # a PDF for SGLang's history only (its newest run has one to be judged against): the
  # repository stays under 15 MB
  pdf=--no-pdf; [ "$campaign" = sglang-h200-dense8b ] && pdf=
  reportgen history report "$campaign" --store "$store" --out "$out/$campaign" $pdf
  xz -9e -f "$out/$campaign/history.html"  # kept compressed, as the examples' report.html
done
