#!/usr/bin/env bash
# Model-checks the runtime's cross-thread protocols with loom: the blocking
# thread pool (every job runs exactly once, shutdown never deadlocks), the
# task state word with the remote run queue (no lost wake, no double queue),
# and Notify (no lost wake between a check and a wait, nor when a waiter
# registers or leaves while notify_all runs). Every `loom_*` test of the
# library runs: thread_pool.rs, task.rs and notify.rs hold them.
#
# loom replaces std's Mutex, Condvar, atomics and threads (through
# runtime/src/sync.rs) and runs each `loom_*` test under every interleaving
# it can reach with at most LOOM_MAX_PREEMPTIONS forced preemptions (2 by
# default): a bounded search, not a proof over all interleavings. Raise it
# for a deeper, slower one.
# A separate target directory keeps the --cfg loom build from invalidating
# the normal one.
set -euo pipefail
cd "$(dirname "$0")/.."
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
RUSTFLAGS="--cfg loom ${RUSTFLAGS:-}" CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/loom" \
    cargo test -p runtime --release --lib loom
