#!/usr/bin/env bash
# The seed's race (milestone 3) under ThreadSanitizer, and its two fixes.
#
# Builds the proxy with the `race-demo` feature (which adds `--picker racy`,
# an unsynchronized read-then-write of a global counter: a real data race)
# with -Zsanitizer=thread, then for each picker (racy, mutex, atomic) runs it
# in pool mode in front of three fixture backends, drives the same
# concurrent load through it (tools/src/race/mod.rs), stops it with
# SIGTERM, and counts the "WARNING: ThreadSanitizer: data race" reports in
# its stderr. Expected, and checked: racy > 0, mutex = 0, atomic = 0.
# It also runs picker.rs's compile_fail doctests on nightly, where rustdoc
# checks that each fails with the error code it names.
#
# Needs the nightly toolchain with rust-src:
#     rustup toolchain install nightly --component rust-src
# and skips (exit 0) with a message where either is missing.
#
# Why rust-src: the standard library is shipped uninstrumented. Without
# -Zbuild-std, ThreadSanitizer cannot see std's own synchronization (the
# futex inside Mutex, the Condvar of the thread pool, Arc's counts), so
# memory handed between threads *through* std looks unsynchronized: 30 to 40
# false reports per run, for mutex and atomic alike. -Zbuild-std rebuilds std
# with the sanitizer (about 40 s the first time), and then only the real race
# remains. `--without-build-std` runs that first, misleading configuration,
# to see it; the expectations are not checked then.
#
# Logs: target/tsan/logs/race-<picker>.log. Knobs (environment): THREADS (8),
# REQUESTS (400), CLIENTS (32).
set -euo pipefail
cd "$(dirname "$0")/.."
tool=race-repro
# shellcheck source=scripts/nightly.sh
. scripts/nightly.sh

build_std=yes
case "${1:-}" in
    "") ;;
    --without-build-std) build_std=no ;;
    -h|--help) print_help; exit 0 ;;
    *) echo "usage: $0 [--without-build-std]" >&2; exit 2 ;;
esac

need_nightly "rustup toolchain install nightly --component rust-src"
if [ "$build_std" = yes ]; then
    rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src' ||
        skip "the nightly toolchain lacks rust-src, needed by -Zbuild-std (rustup component add rust-src --toolchain nightly)"
fi
need_supported_host ThreadSanitizer

step() { printf '\n==> %s\n' "$*"; }

step "the compile_fail doctests, error codes checked (nightly rustdoc)"
CARGO_TARGET_DIR=target/nightly cargo +nightly test -q -p proxy --doc picker

export CARGO_TARGET_DIR=target/tsan
if [ "$build_std" = yes ]; then
    step "building the proxy with race-demo and ThreadSanitizer, std included"
    RUSTFLAGS="-Zsanitizer=thread" \
        cargo +nightly build -Zbuild-std -p proxy --features race-demo --target "$host"
else
    step "building the proxy with race-demo and ThreadSanitizer, std NOT instrumented"
    # A separate directory: the two builds would otherwise overwrite each other.
    export CARGO_TARGET_DIR=target/tsan-no-build-std
    RUSTFLAGS="-Zsanitizer=thread -Cunsafe-allow-abi-mismatch=sanitizer" \
        cargo +nightly build -p proxy --features race-demo --target "$host"
fi
proxy="$CARGO_TARGET_DIR/$host/debug/proxy"

step "building the load driver (an ordinary build)"
CARGO_TARGET_DIR=target cargo build -q -p tools --bin race_load
load=target/debug/race_load

logs="$CARGO_TARGET_DIR/logs"
mkdir -p "$logs"
declare -A reports
step "load: ${REQUESTS:-400} requests from ${CLIENTS:-32} clients, pool of ${THREADS:-8} threads"
printf '%-8s %-13s %-9s %-15s %s\n' picker tsan_reports requests served exit
for picker in racy mutex atomic; do
    line="$("$load" --proxy "$proxy" --picker "$picker" --threads "${THREADS:-8}" --requests "${REQUESTS:-400}" \
        --clients "${CLIENTS:-32}" --log "$logs/race-$picker.log")"
    field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
    reports[$picker]="$(field tsan_reports)"
    printf '%-8s %-13s %-9s %-15s %s\n' "$picker" "${reports[$picker]}" "$(field ok)" \
        "$(field served)" "$(field exit)"
done

echo
if [ "$build_std" = no ]; then
    echo "Without -Zbuild-std these counts include false reports from the uninstrumented std;"
    echo "run without --without-build-std for the real figures. Logs: $logs/"
    exit 0
fi
if [ "${reports[racy]}" -gt 0 ] && [ "${reports[mutex]}" -eq 0 ] && [ "${reports[atomic]}" -eq 0 ]; then
    echo "as expected: the racy picker races, the mutex and atomic pickers do not. Logs: $logs/"
    grep -m1 -A2 'WARNING: ThreadSanitizer: data race' "$logs/race-racy.log" || true
    grep -m1 'Location is global' "$logs/race-racy.log" || true
else
    echo "UNEXPECTED: wanted racy > 0, mutex = 0, atomic = 0. Logs: $logs/" >&2
    exit 1
fi
