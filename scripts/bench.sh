#!/usr/bin/env bash
# The benchmark, in one command: our proxy in every mode,
# and HAProxy and nginx where installed, in front of the same fixture
# backends; keep-alive HTTP through wrk; the system calls each proxy makes
# (strace); into docs/BENCHMARKS.md and its charts docs/bench/*.svg.
#
#     scripts/bench.sh              the full run (about 27 minutes on 2 cores: workload C
#                                   and wrk run 5 rounds, and workload A's compared rows 5 too)
#     scripts/bench.sh --quick      tiny sizes, under a minute, into target/bench-quick/
#     scripts/bench.sh --no-install do not install what is missing (also: BENCH_NO_INSTALL=1)
#     scripts/bench.sh --help       every option of the harness (--out DIR, --no-peers,
#                                   --only a,b,c,wrk,census)
#
# What it measures with, and installs when missing if it can (as root, with
# apt-get): HAProxy and nginx's stream module (the peers; not with
# --no-peers), nginx itself (the HTTP backends of the wrk rows), wrk and
# strace. Whatever is still missing is skipped, and the report says so.
# By hand (Debian):  apt-get install haproxy nginx libnginx-mod-stream strace wrk
#
# The section "What the numbers say" of an existing report is kept; every
# table and chart is regenerated. Run it on a quiet machine: every proxy,
# the backends and the load client share its cores.
set -euo pipefail
cd "$(dirname "$0")/.."

install=${BENCH_NO_INSTALL:+no}
peers=yes
args=()
for arg in "$@"; do
    case "$arg" in
        --no-install) install=no ;;
        --no-peers) peers=no; args+=("$arg") ;;
        # Nothing to install for a question.
        --help | -h | --version | -V) install=no; args+=("$arg") ;;
        *) args+=("$arg") ;;
    esac
done

sbin=/usr/sbin:/usr/local/sbin:/sbin
# Debian installs the servers in /usr/sbin, not on every user's PATH.
have() { PATH="$PATH:$sbin" command -v "$1" >/dev/null 2>&1; }

# Whether nginx has its stream module: built in, or Debian's loadable one.
have_stream() {
    local configure
    configure=$(PATH="$PATH:$sbin" nginx -V 2>&1) || return 1
    case " $configure " in *" --with-stream "*) return 0 ;; esac
    [ -e /usr/lib/nginx/modules/ngx_stream_module.so ]
}

# The Debian packages of what is missing, one a line.
missing_packages() {
    have strace || echo strace
    have wrk || echo wrk
    have nginx || echo nginx
    if [ "$peers" = yes ]; then
        have haproxy || echo haproxy
        have_stream || echo libnginx-mod-stream
    fi
}

install_missing() {
    local packages
    packages=$(missing_packages | paste -sd ' ')
    [ -n "$packages" ] || return 0
    if [ "$install" = no ]; then
        echo "bench.sh: not installing ($packages); those rows will be skipped" >&2
        return 0
    fi
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "bench.sh: missing: $packages; to include them: apt-get install $packages" >&2
        return 0
    fi
    echo "bench.sh: installing $packages" >&2
    # shellcheck disable=SC2086 # one word per package
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y $packages; then
        # A fresh machine may not have its package lists yet.
        apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $packages ||
            echo "bench.sh: could not install $packages; those rows will be skipped" >&2
    fi
    # Debian starts the services it installs: stop those we just installed,
    # so that no server of ours shares the machine while it is measured.
    local service
    for service in haproxy nginx; do
        case " $packages " in
            *" $service "*) systemctl stop "$service" 2>/dev/null || true ;;
        esac
    done
}

install_missing
cargo build --release -p proxy -p tools
# The report quotes the command as it was typed.
export BENCH_COMMAND="scripts/bench.sh${*:+ $*}"
exec target/release/bench --proxy target/release/proxy ${args[@]+"${args[@]}"}
