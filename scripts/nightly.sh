# Sourced, not run: what the scripts that need the nightly toolchain share
# (fuzz.sh, race-repro.sh). Each sets `tool` to its name before sourcing.
#
# They must skip cleanly, exit 0 with a line saying why, where nightly is
# absent: the CI machine kind ships stable only, and a missing optional tool
# is not a failed check.

# Prints the script's header comment (line 2 up to `set -euo`) as its help.
print_help() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

skip() {
    echo "$tool: skipped: $*"
    exit 0
}

# Skips unless rustup and a nightly toolchain are there; $1 says how to
# install what the script needs.
need_nightly() {
    command -v rustup >/dev/null 2>&1 || skip "rustup is not installed, so there is no nightly toolchain"
    rustup toolchain list 2>/dev/null | grep -q '^nightly' || skip "no nightly toolchain ($1)"
}

# Skips unless the host is one where $1 (the sanitizer, libFuzzer) is set
# up; sets `host` to its target triple, which the builds then name.
need_supported_host() {
    host="$(rustc +nightly -vV | sed -n 's/^host: //p')"
    case "$host" in
        x86_64-unknown-linux-gnu | aarch64-unknown-linux-gnu) ;;
        *) skip "$1 is not set up here for $host" ;;
    esac
}
