#!/usr/bin/env bash
# Install the system libraries reportgen needs, where missing.
#   scripts/bootstrap.sh          Pango (for weasyprint's PDF rendering)
#   scripts/bootstrap.sh --test   also Chromium (headless HTML tests), poppler-utils (pdftotext)
#                                 OpenSSH and Slurm (the SSH and Slurm executors' tests run both on
#                                 127.0.0.1)
# Uses apt-get (as root, or through sudo). On other systems it says what to install and stops.
set -euo pipefail

want_test=0
[ "${1:-}" = "--test" ] && want_test=1

missing=()
# Debian and Ubuntu ship venv's pip bootstrap separately.
${PYTHON:-python3} -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
have_lib() { ldconfig -p 2>/dev/null | grep -q "$1"; }
have_lib 'libpango-1.0.so' || missing+=(libpango-1.0-0)
have_lib 'libpangoft2-1.0.so' || missing+=(libpangoft2-1.0-0)
if ! fc-list >/dev/null 2>&1 || [ -z "$(fc-list 2>/dev/null | head -n 1)" ]; then
  missing+=(fontconfig fonts-dejavu-core)
fi
if [ $want_test -eq 1 ]; then
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v pdftotext >/dev/null 2>&1 || missing+=(poppler-utils)
  # the SSH executor's tests: an OpenSSH server on 127.0.0.1 (started by the tests), a client
  [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
  command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
  # the Slurm executor's tests: a cluster of one machine (scripts/slurm_local.sh starts it)
  command -v slurmctld >/dev/null 2>&1 || missing+=(slurm-wlm)
  command -v munged >/dev/null 2>&1 || missing+=(munge)
fi

[ ${#missing[@]} -eq 0 ] && exit 0

echo "reportgen: installing system packages: ${missing[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "reportgen: no apt-get here; install these with your package manager: ${missing[*]}" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "reportgen: run as root or install: ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
