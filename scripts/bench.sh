#!/usr/bin/env bash
# The benchmark of issue 4, in one command: our proxy in every mode, and
# HAProxy and nginx where installed, in front of the same fixture backends,
# into docs/BENCHMARKS.md and its charts docs/bench/*.svg.
#
#     scripts/bench.sh              the full run (a few minutes on 2 cores)
#     scripts/bench.sh --quick      tiny sizes, under a minute, into target/bench-quick/
#     scripts/bench.sh --help       every option (--out DIR, --no-peers, --only a,b,c)
#
# The peers are optional: missing ones are skipped and the report says so.
# To include them (Debian):  apt-get install haproxy nginx libnginx-mod-stream
#
# The section "What the numbers say" of an existing report is kept; every
# table and chart is regenerated. Run it on a quiet machine: every proxy,
# the backends and the load client share its cores.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release -p proxy -p backend
# The report quotes the command as it was typed.
export BENCH_COMMAND="scripts/bench.sh${*:+ $*}"
exec target/release/bench --proxy target/release/proxy "$@"
