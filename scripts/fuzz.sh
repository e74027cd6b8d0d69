#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ (cargo-fuzz, libFuzzer) for a bounded
# time, one after the other, one process each, and prints what each did:
# executions, coverage (libFuzzer's cov and ft), corpus size, and any crash.
#
#     scripts/fuzz.sh [--install] [SECONDS] [TARGET...]
#
# SECONDS is each target's time (default 60); TARGETs default to every
# target `cargo fuzz list` names, so a new target needs no change here.
# Each target starts from the seeds committed in fuzz/corpus/<target>/ and
# from what earlier runs found, kept in target/fuzz/corpus/<target>/ (only
# that one is written to: the committed seeds stay as they are).
#
# Needs the nightly toolchain and cargo-fuzz, and skips (exit 0) with a
# message where either is missing. `--install` first installs a missing
# cargo-fuzz (`cargo install cargo-fuzz --locked`, bounded by
# FUZZ_INSTALL_TIMEOUT seconds, default 600); without it nothing is installed.
#
# A crash (a panic, an overflow, an assertion of the target, a timeout of
# 10 s on one input, more than 2 GiB of memory) stops that target; its input
# is saved under fuzz/artifacts/<target>/, the script says how to replay it,
# goes on with the other targets, and exits 1. Turn the input into a unit
# test beside the parser, then fix the parser.
#
# The targets are built without a sanitizer: they run safe Rust only, where
# what can fail is a panic, an overflow check or a debug assertion (all on
# in a cargo-fuzz build), and AddressSanitizer would halve the executions.
# FUZZ_SANITIZER=address puts it back. Logs: target/fuzz/logs/<target>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
tool=fuzz
# shellcheck source=scripts/nightly.sh
. scripts/nightly.sh

install=no
if [ "${1:-}" = --install ]; then
    install=yes
    shift
fi
case "${1:-}" in
    -h|--help) print_help; exit 0 ;;
esac
seconds="${1:-60}"
[ "$#" -gt 0 ] && shift
case "$seconds" in
    ''|*[!0-9]*|0) echo "usage: $0 [--install] [SECONDS] [TARGET...] (SECONDS a whole number > 0)" >&2; exit 2 ;;
esac

need_nightly "rustup toolchain install nightly; cargo-fuzz needs it"
if ! cargo fuzz --version >/dev/null 2>&1 && [ "$install" = yes ]; then
    echo "fuzz: installing cargo-fuzz (cargo install cargo-fuzz --locked)"
    timeout "${FUZZ_INSTALL_TIMEOUT:-600}" cargo install cargo-fuzz --locked --quiet ||
        echo "fuzz: installing cargo-fuzz failed or took too long"
fi
cargo fuzz --version >/dev/null 2>&1 ||
    skip "cargo-fuzz is not installed (cargo install cargo-fuzz --locked, or pass --install)"
need_supported_host libFuzzer

fuzz=(cargo +nightly fuzz)
build=(--sanitizer "${FUZZ_SANITIZER:-none}" --target-dir target/fuzz/build)
if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <("${fuzz[@]}" list)
fi
logs=target/fuzz/logs
mkdir -p "$logs"

[ "${#targets[@]}" -gt 0 ] || { echo "fuzz: cargo fuzz list named no target" >&2; exit 1; }

printf '\n==> building the fuzz targets (%s, nightly)\n' "$("${fuzz[@]}" --version)"
if ! "${fuzz[@]}" build "${build[@]}" >"$logs/build.log" 2>&1; then
    tail -n 30 "$logs/build.log" >&2
    echo "fuzz: the targets do not build; the whole log is $logs/build.log" >&2
    exit 1
fi

# One field of libFuzzer's last status line ("#N DONE cov: 1 ft: 2 corp: 3/4b ...").
status_field() { grep -E '^#[0-9]+' "$1" | tail -n 1 | sed -n "s/.* $2: \([^ ]*\).*/\1/p"; }

failed=()
printf '\n==> %s s per target\n' "$seconds"
# corpus: libFuzzer's count of the inputs it keeps (and their bytes), not the
# files on disk, which include inputs since superseded by smaller ones.
printf '%-16s %-9s %-12s %-7s %-7s %-12s %s\n' target seconds executions cov ft corpus result
for target in "${targets[@]}"; do
    grown="target/fuzz/corpus/$target"
    seeds="fuzz/corpus/$target"
    mkdir -p "$grown" "$seeds"
    log="$logs/$target.log"
    started=$SECONDS
    set +e
    nice -n "${FUZZ_NICE:-10}" "${fuzz[@]}" run "${build[@]}" "$target" "$grown" "$seeds" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        >"$log" 2>&1
    status=$?
    set -e
    result=ok
    if [ "$status" -ne 0 ]; then
        result="CRASH (exit $status)"
        failed+=("$target")
    fi
    executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
    printf '%-16s %-9s %-12s %-7s %-7s %-12s %s\n' "$target" "$((SECONDS - started))" \
        "${executions:-?}" "$(status_field "$log" cov)" "$(status_field "$log" ft)" \
        "$(status_field "$log" corp)" "$result"
done

if [ "${#failed[@]}" -gt 0 ]; then
    for target in "${failed[@]}"; do
        echo
        echo "fuzz: $target crashed; from $logs/$target.log:"
        grep -m 1 -B 2 -A 12 -E '^(thread .* panicked|==[0-9]+==|ALARM|.*out-of-memory)' \
            "$logs/$target.log" || tail -n 20 "$logs/$target.log"
        input="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$logs/$target.log" | tail -n 1)"
        echo "replay: cargo +nightly fuzz run ${build[*]} $target ${input:-fuzz/artifacts/$target/<file>}"
    done
    exit 1
fi
echo
echo "fuzz: no crash in ${#targets[@]} targets; corpora in target/fuzz/corpus/, logs in $logs/"
