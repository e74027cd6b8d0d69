#!/usr/bin/env bash
# N proxies behind one address: three load balancer nodes announce a service
# address (the VIP) with BGP while their proxy is healthy, and a router
# spreads the clients' flows over them by ECMP. Everything runs in network
# namespaces this script creates, on addresses that exist only inside them;
# docs/CLUSTER.md explains the design and the figures.
#
#   client ── router ──┬── lb1 ──┐        client    10.10.0.2, and 203.0.113.1-30 on lo
#   (ns)      BIRD 2   ├── lb2 ──┼── bnet ── be1    router    10.10.0.1, 10.11.N.1 (AS 65000)
#             ECMP     └── lb3 ──┘  (bridge) be2    lbN       10.11.N.2, 10.12.0.1N (AS 6500N)
#                       VIP on lo,           be3              VIP 198.51.100.1 on lo
#                       proxy, ExaBGP                beN       10.12.0.2N:8080 (fixture, whoami)
#
# Usage (as root; needs iproute2, bird2, exabgp, curl):
#   scripts/cluster.sh up [plain|resilient]   build it and wait until the three nodes carry
#                                             the VIP (default: resilient nexthop groups
#                                             where the kernel has them, else plain multipath)
#   scripts/cluster.sh demo                   up, then flows per node, a planned removal and
#                                             a crash, each with what it cost; then down
#   scripts/cluster.sh down                   stop every process and remove every namespace
#   scripts/cluster.sh status                 each node's proxy, health, BGP session; the route
#   scripts/cluster.sh paths                  the nodes the router sends the VIP to, in order
#   scripts/cluster.sh buckets                resilient groups: buckets per node
#   scripts/cluster.sh stop NODE              planned removal: SIGTERM to the node's proxy
#                                             (lameduck, then drain)
#   scripts/cluster.sh kill NODE              crash: SIGKILL to the node's proxy
#   scripts/cluster.sh start NODE             the node's proxy again
#   scripts/cluster.sh cut NODE | mend NODE   the node loses (gets back) every backend
#   scripts/cluster.sh second-chance NODE|off the other nodes pass packets of flows they do
#                                             not know to NODE (drain it without resets)
#   scripts/cluster.sh fib resilient|plain    switch the router's FIB mode (moves flows)
#   scripts/cluster.sh wait-paths N [SECONDS] until the router has N paths for the VIP
#
# Environment: CLUSTER_PREFIX (namespace prefix, default lbc), CLUSTER_RUN
# (state directory: configurations, logs, pids; default /tmp/$CLUSTER_PREFIX),
# PROXY_BIN, BACKEND_BIN, CLIENT_BIN (default: target/release, else target/debug).
#
# Exit status: 0 done, 1 failed, 2 bad usage, 3 a prerequisite is missing
# (not root, no network namespaces, no bird or exabgp): said on stderr.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
CONF=$HERE/cluster
PREFIX=${CLUSTER_PREFIX:-lbc}
RUN=${CLUSTER_RUN:-/tmp/$PREFIX}

VIP=198.51.100.1
PORT=80
NODES=(lb1 lb2 lb3)
BACKENDS=(be1 be2 be3)
CLIENT_ADDRS=30
# Resilient groups: 120 buckets share out evenly over 1 to 6 nodes; a bucket
# idle for 2 s may move to a node that (re)joins.
BUCKETS=120
IDLE_TIMER=2
GROUP_ID=100
TABLE=100

say() { printf '%s\n' "$*"; }
die() {
    printf 'cluster.sh: %s\n' "$*" >&2
    exit 1
}
missing() {
    printf 'cluster.sh: %s\n' "$*" >&2
    exit 3
}

ns() { printf '%s-%s' "$PREFIX" "$1"; }
in_ns() {
    local where=$1
    shift
    ip netns exec "$(ns "$where")" "$@"
}
node_index() {
    case $1 in
    lb[1-3]) printf '%s' "${1#lb}" ;;
    *) return 1 ;;
    esac
}
known_node() { node_index "$1" >/dev/null || die "unknown node '$1'; the nodes are ${NODES[*]}"; }

# ---------------------------------------------------------------------------
# Prerequisites and binaries
# ---------------------------------------------------------------------------

check_prerequisites() {
    [ "$(id -u)" = 0 ] || missing "needs root (network namespaces, veth links, routes)"
    command -v ip >/dev/null || missing "needs iproute2 (ip): apt-get install iproute2"
    command -v bird >/dev/null || missing "needs BIRD 2 (bird): apt-get install bird2"
    command -v exabgp >/dev/null || missing "needs ExaBGP (exabgp): apt-get install exabgp"
    command -v curl >/dev/null || missing "needs curl (the speakers' health check): apt-get install curl"
    local probe
    probe="$PREFIX-probe-$$"
    ip netns add "$probe" 2>/dev/null || missing "cannot create a network namespace (ip netns add)"
    ip netns del "$probe"
}

# The binary NAME: $VAR if set, else target/release/NAME, else target/debug/NAME.
binary() {
    local name=$1 var=$2 path
    path=${!var:-}
    if [ -z "$path" ]; then
        for profile in release debug; do
            if [ -x "$ROOT/target/$profile/$name" ]; then
                path=$ROOT/target/$profile/$name
                break
            fi
        done
    fi
    [ -n "$path" ] && [ -x "$path" ] || die "no $name binary: run 'cargo build --release' or set $var"
    printf '%s' "$path"
}

# ---------------------------------------------------------------------------
# Processes: each started in the background with its pid in $RUN/NAME.pid
# ---------------------------------------------------------------------------

# start_in NS NAME LOG CMD...: CMD in namespace NS, in a session of its own,
# its output added to LOG (a node's proxy started again keeps its story).
start_in() {
    local where=$1 name=$2 log=$3
    shift 3
    rm -f "$RUN/$name.pid"
    # The shell writes its own pid, then becomes CMD: the pid is CMD's.
    in_ns "$where" setsid sh -c 'echo $$ >"$0"; exec "$@"' "$RUN/$name.pid" "$@" \
        </dev/null >>"$log" 2>&1 &
    local tries=0
    while [ ! -s "$RUN/$name.pid" ] && [ $tries -lt 100 ]; do
        sleep 0.02
        tries=$((tries + 1))
    done
}

pid_of() { cat "$RUN/$1.pid" 2>/dev/null || true; }
alive() {
    local pid
    pid=$(pid_of "$1")
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}
signal() {
    local sig=$1 name=$2 pid
    pid=$(pid_of "$name")
    [ -n "$pid" ] || return 0
    kill "-$sig" "$pid" 2>/dev/null || true
}

# ---------------------------------------------------------------------------
# The network
# ---------------------------------------------------------------------------

make_ns() {
    local name
    name=$(ns "$1")
    ip netns add "$name"
    ip -n "$name" link set lo up
    # Flows come back by other paths than they left (ECMP, second chance):
    # no reverse-path filter.
    in_ns "$1" sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
}

# veth A:IFA <-> B:IFB
link() {
    ip link add "$2" netns "$(ns "$1")" type veth peer name "$4" netns "$(ns "$3")"
    ip -n "$(ns "$1")" link set "$2" up
    ip -n "$(ns "$3")" link set "$4" up
}

build_network() {
    local n
    for n in client router bnet "${NODES[@]}" "${BACKENDS[@]}"; do make_ns "$n"; done
    # client <-> router
    link client eth0 router c0
    ip -n "$(ns client)" addr add 10.10.0.2/24 dev eth0
    ip -n "$(ns client)" route add default via 10.10.0.1
    for n in $(seq 1 $CLIENT_ADDRS); do
        ip -n "$(ns client)" addr add "203.0.113.$n/32" dev lo
    done
    ip -n "$(ns router)" addr add 10.10.0.1/24 dev c0
    ip -n "$(ns router)" route add 203.0.113.0/24 via 10.10.0.2
    in_ns router sysctl -qw net.ipv4.ip_forward=1
    # The L4 hash: addresses, ports and protocol, so one client's flows spread.
    in_ns router sysctl -qw net.ipv4.fib_multipath_hash_policy=1
    # A nexthop whose neighbour entry failed is skipped.
    in_ns router sysctl -qw net.ipv4.fib_multipath_use_neigh=1
    # the backend network: a bridge in bnet
    ip -n "$(ns bnet)" link add br0 type bridge
    ip -n "$(ns bnet)" link set br0 up
    for n in 1 2 3; do
        # router <-> lbN
        link router "l$n" "lb$n" eth0
        ip -n "$(ns router)" addr add "10.11.$n.1/24" dev "l$n"
        ip -n "$(ns "lb$n")" addr add "10.11.$n.2/24" dev eth0
        ip -n "$(ns "lb$n")" route add default via "10.11.$n.1"
        in_ns "lb$n" sysctl -qw net.ipv4.ip_forward=1
        # lbN <-> bnet (backends)
        link "lb$n" bk bnet "lb$n"
        ip -n "$(ns bnet)" link set "lb$n" master br0
        ip -n "$(ns "lb$n")" addr add "10.12.0.1$n/24" dev bk
        # beN <-> bnet
        link "be$n" eth0 bnet "be$n"
        ip -n "$(ns bnet)" link set "be$n" master br0
        ip -n "$(ns "be$n")" addr add "10.12.0.2$n/24" dev eth0
    done
}

# resilient or plain: what the router's FIB does with BIRD's multipath route.
resilient_supported() {
    local r
    r=$(ns router)
    ip -n "$r" nexthop add id 9001 via 10.11.1.2 dev l1 2>/dev/null || return 1
    if ip -n "$r" nexthop add id 9002 group 9001 type resilient buckets 8 2>/dev/null; then
        ip -n "$r" nexthop del id 9002
        ip -n "$r" nexthop del id 9001
        return 0
    fi
    ip -n "$r" nexthop del id 9001
    return 1
}

choose_fib() {
    local wanted=$1
    case $wanted in
    resilient)
        resilient_supported || die "this kernel ($(uname -r)) or ip has no resilient nexthop groups (Linux 5.13, iproute2 5.13)"
        ;;
    plain) ;;
    auto)
        if resilient_supported; then
            wanted=resilient
        else
            say "note: no resilient nexthop groups here (kernel $(uname -r)); plain multipath: removing a node also moves some flows of the others"
            wanted=plain
        fi
        ;;
    *) die "unknown FIB mode '$wanted'; use resilient or plain" ;;
    esac
    printf '%s' "$wanted" >"$RUN/fib"
}

fib() { cat "$RUN/fib" 2>/dev/null || printf 'none'; }

# Switches a running cluster's router to FIB mode $1 (established flows
# may move: the hash's ranges change).
switch_fib() {
    local r
    r=$(ns router)
    case $1 in
    resilient) resilient_supported || die "no resilient nexthop groups on this kernel" ;;
    plain) ;;
    *) die "unknown FIB mode '$1'; use resilient or plain" ;;
    esac
    if alive mirror; then kill -KILL -- "-$(pid_of mirror)" 2>/dev/null || true; fi
    ip -n "$r" rule del to "$VIP/32" lookup $TABLE pref 100 2>/dev/null || true
    ip -n "$r" route del "$VIP/32" 2>/dev/null || true
    ip -n "$r" nexthop flush >/dev/null 2>&1 || true
    printf '%s' "$1" >"$RUN/fib"
    wire_fib
    wait_paths 3 30 || die "the router did not get its three paths back"
}

# The VIP's route in the main table, fed from BIRD's table 100.
wire_fib() {
    local r
    r=$(ns router)
    case $(fib) in
    plain)
        # BIRD's own multipath route: hash-threshold over the live nexthops.
        ip -n "$r" rule add to "$VIP/32" lookup $TABLE pref 100
        ;;
    resilient)
        local n
        for n in 1 2 3; do ip -n "$r" nexthop add id "$n" via "10.11.$n.2" dev "l$n"; done
        start_in router mirror "$RUN/mirror.log" "$HERE/cluster.sh" mirror
        ;;
    esac
}

# The gateways of BIRD's route for the VIP (table 100), one per line.
bird_gateways() {
    ip -n "$(ns router)" route show table $TABLE "$VIP/32" 2>/dev/null |
        grep -o 'via [0-9.]*' | cut -d' ' -f2 || true
}

# Resilient mode: makes group $GROUP_ID hold the nodes BIRD has a path to,
# and the VIP's main route point at it. Replacing a resilient group's
# members moves only the buckets of the members that left.
sync_group() {
    local r members="" gw n
    r=$(ns router)
    for gw in $(bird_gateways); do
        n=${gw#10.11.}
        n=${n%%.*}
        members="${members:+$members/}$n"
    done
    if [ -z "$members" ]; then
        ip -n "$r" route del "$VIP/32" 2>/dev/null || true
        ip -n "$r" nexthop del id $GROUP_ID 2>/dev/null || true
        return
    fi
    local current
    current=$(ip -n "$r" nexthop show id $GROUP_ID 2>/dev/null | grep -o 'group [0-9/]*' | cut -d' ' -f2 || true)
    [ "$current" = "$members" ] && return
    if [ -n "$current" ]; then
        ip -n "$r" nexthop replace id $GROUP_ID group "$members" type resilient \
            buckets $BUCKETS idle_timer $IDLE_TIMER
    else
        ip -n "$r" nexthop add id $GROUP_ID group "$members" type resilient \
            buckets $BUCKETS idle_timer $IDLE_TIMER
        ip -n "$r" route replace "$VIP/32" nhid $GROUP_ID
    fi
    say "$(date +%T.%N | cut -c1-12) group $GROUP_ID: ${current:-none} -> $members"
}

# Runs until killed: mirrors BIRD's route into the resilient group at each
# route change the kernel reports, and once a second in any case.
mirror() {
    sync_group
    ip -n "$(ns router)" monitor route 2>/dev/null | while :; do
        local status=0
        read -r -t 1 _ || status=$?
        if [ $status -ne 0 ] && [ $status -le 128 ]; then
            break # the monitor ended
        fi
        sync_group
    done
}

# The nodes the router sends the VIP to now, in the FIB's order.
paths() {
    local r ids n out=""
    r=$(ns router)
    case $(fib) in
    resilient)
        ids=$(ip -n "$r" nexthop show id $GROUP_ID 2>/dev/null | grep -o 'group [0-9/]*' | cut -d' ' -f2 || true)
        for n in ${ids//\// }; do out="$out lb$n"; done
        ;;
    plain)
        for n in $(bird_gateways); do
            n=${n#10.11.}
            out="$out lb${n%%.*}"
        done
        ;;
    esac
    say "${out# }"
}

count_paths() {
    local p
    p=$(paths)
    set -- $p
    printf '%s' "$#"
}

wait_paths() {
    local want=$1 limit=${2:-30} start now
    start=$(date +%s.%N)
    while :; do
        [ "$(count_paths)" = "$want" ] && break
        now=$(date +%s.%N)
        if awk -v s="$start" -v n="$now" -v l="$limit" 'BEGIN { exit !(n - s > l) }'; then
            return 1
        fi
        sleep 0.05
    done
    if [ "$(fib)" = resilient ] && [ "$want" -gt 0 ]; then
        # Every bucket where it belongs (a node that joined takes idle ones).
        while ! buckets_balanced; do
            now=$(date +%s.%N)
            if awk -v s="$start" -v n="$now" -v l="$limit" 'BEGIN { exit !(n - s > l) }'; then
                return 1
            fi
            sleep 0.2
        done
    fi
}

buckets() {
    ip -n "$(ns router)" nexthop bucket show id $GROUP_ID 2>/dev/null |
        grep -o 'nhid [0-9]*' | sort | uniq -c | awk '{ printf "lb%s %s\n", $3, $1 }'
}

buckets_balanced() {
    local counts
    counts=$(buckets | awk '{ print $2 }' | sort -u | wc -l)
    [ "$counts" = 1 ]
}

# ---------------------------------------------------------------------------
# The nodes
# ---------------------------------------------------------------------------

render() {
    local n
    mkdir -p "$RUN"
    rm -f "$RUN"/*.log
    cp "$CONF/healthcheck.conf" "$CONF/proxy.conf" "$CONF/bird-router.conf" "$RUN/"
    # Debian's package installs the health checker as its own command.
    local check
    check=$(command -v exabgp-healthcheck || true)
    [ -n "$check" ] || check="$(head -1 "$(command -v exabgp)" | cut -c3-) -m exabgp healthcheck"
    for n in 1 2 3; do
        sed -e "s|@NODE@|lb$n|g" -e "s|@N@|$n|g" -e "s|@DIR@|$RUN|g" \
            -e "s|@HEALTHCHECK@|$check|g" "$CONF/exabgp-node.conf" >"$RUN/exabgp-lb$n.conf"
    done
}

start_proxy() {
    local node=$1
    start_in "$node" "proxy-$node" "$RUN/proxy-$node.log" "$PROXY" --config "$RUN/proxy.conf"
}

start_speaker() {
    local node=$1
    # ExaBGP would run as 'nobody' and drop privileges otherwise; its
    # command pipes are not used here.
    start_in "$node" "exabgp-$node" "$RUN/exabgp-$node.log" \
        env exabgp.daemon.user=root exabgp.daemon.drop=false exabgp.api.cli=false \
        exabgp.log.destination=stdout exabgp "$RUN/exabgp-$node.conf"
}

start_everything() {
    local n
    for n in 1 2 3; do
        start_in "be$n" "backend-be$n" "$RUN/backend-be$n.log" \
            "$BACKEND" --host "10.12.0.2$n" --port 8080 --mode whoami
    done
    start_in router bird "$RUN/bird.log" bird -f -c "$RUN/bird-router.conf" -s "$RUN/bird.ctl" -P "$RUN/bird.pidfile"
    for n in "${NODES[@]}"; do start_proxy "$n"; done
    # The VIP goes on lo after the proxies listen on it (freebind).
    for n in "${NODES[@]}"; do ip -n "$(ns "$n")" addr add "$VIP/32" dev lo; done
    for n in "${NODES[@]}"; do start_speaker "$n"; done
}

up() {
    local wanted=${1:-auto}
    check_prerequisites
    PROXY=$(binary proxy PROXY_BIN)
    BACKEND=$(binary backend BACKEND_BIN)
    down quiet
    trap 'say "cluster.sh: up failed; removing what it built" >&2; down quiet' EXIT
    render
    build_network
    mark_syns
    choose_fib "$wanted"
    start_everything
    wire_fib
    if ! wait_paths 3 30; then
        status >&2 || true
        die "the router did not get three paths for $VIP within 30 s (logs in $RUN)"
    fi
    trap - EXIT
    say "cluster up: $VIP:$PORT on $(paths) (fib $(fib)); state and logs in $RUN"
}

down() {
    local quiet=${1:-} n name pids
    # The router's mirror first (it runs outside the namespaces' processes'
    # reach only in its session), then everything inside each namespace.
    for name in mirror; do
        if alive "$name"; then kill -KILL -- "-$(pid_of "$name")" 2>/dev/null || true; fi
    done
    for n in router bnet "${NODES[@]}" "${BACKENDS[@]}" client; do
        name=$(ns "$n")
        ip netns list 2>/dev/null | grep -qw "^$name" || continue
        pids=$(ip netns pids "$name" 2>/dev/null || true)
        # shellcheck disable=SC2086
        [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
        ip netns del "$name" 2>/dev/null || true
    done
    rm -f "$RUN"/*.pid "$RUN/fib" "$RUN/bird.ctl" 2>/dev/null || true
    [ -n "$quiet" ] || say "cluster down: namespaces $PREFIX-* removed"
}

status() {
    local n health
    say "fib: $(fib); paths for $VIP: $(paths)"
    [ "$(fib)" != resilient ] || say "buckets: $(buckets | tr '\n' ' ')"
    for n in "${NODES[@]}"; do
        health=$(in_ns "$n" curl -s -m 1 http://127.0.0.1:9100/health/web 2>/dev/null || printf 'no answer')
        say "$n: proxy $(alive "proxy-$n" && echo running || echo stopped); /health/web: ${health%$'\n'}"
    done
    in_ns router birdc -s "$RUN/bird.ctl" show protocols 2>/dev/null | grep -E '^lb' || true
}

# ---------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------

second_chance() {
    local target=$1 n t
    command -v nft >/dev/null || missing "second chance needs nftables (nft): apt-get install nftables"
    for n in "${NODES[@]}"; do
        in_ns "$n" nft delete table inet second_chance 2>/dev/null || true
        ip -n "$(ns "$n")" rule del pref 90 2>/dev/null || true
        ip -n "$(ns "$n")" route flush table 90 2>/dev/null || true
    done
    [ "$target" = off ] && return
    known_node "$target"
    t=$(node_index "$target")
    for n in "${NODES[@]}"; do
        [ "$n" = "$target" ] && continue
        sed -e "s|@VIP@|$VIP|g" -e "s|@PORT@|$PORT|g" "$CONF/second-chance.nft" | in_ns "$n" nft -f -
        ip -n "$(ns "$n")" route add "$VIP/32" via "10.12.0.1$t" dev bk table 90
        ip -n "$(ns "$n")" rule add fwmark 2 lookup 90 pref 90
    done
}

# Marks the SYNs to the VIP, so that each accepted socket carries mark 1
# (tcp_fwmark_accept): what second chance tells a local flow by.
mark_syns() {
    local n
    command -v nft >/dev/null || return 0
    for n in "${NODES[@]}"; do
        in_ns "$n" sysctl -qw net.ipv4.tcp_fwmark_accept=1
        sed -e "s|@VIP@|$VIP|g" -e "s|@PORT@|$PORT|g" "$CONF/mark-syns.nft" | in_ns "$n" nft -f -
        # The fwmark rule must come before the local table, which would
        # otherwise deliver the VIP here.
        ip -n "$(ns "$n")" rule add pref 100 lookup local
        ip -n "$(ns "$n")" rule del pref 0
    done
}

# ---------------------------------------------------------------------------
# The demo
# ---------------------------------------------------------------------------

# watch_event EVENT NODE: a 10 s timeline of new and held connections
# (cluster_client --watch) while EVENT (stop, kill) hits NODE at +2 s;
# says when the router withdrew it.
watch_event() {
    local event=$1 node=$2 out=$RUN/watch.out start now
    rm -f "$out"
    in_ns client "$CLIENT" --watch 10s --hold 60 >"$out" 2>&1 &
    local watcher=$!
    local tries=0
    while ! grep -q '^holding' "$out" 2>/dev/null && [ $tries -lt 100 ]; do
        sleep 0.05
        tries=$((tries + 1))
    done
    sleep 2
    start=$(date +%s.%N)
    main "$event" "$node"
    while [[ " $(paths) " == *" $node "* ]]; do
        now=$(date +%s.%N)
        if awk -v s="$start" -v n="$now" 'BEGIN { exit !(n - s > 15) }'; then break; fi
        sleep 0.02
    done
    now=$(date +%s.%N)
    wait "$watcher" || true
    cat "$out"
    say "$event $node at +2 s: the router withdrew it $(awk -v s="$start" -v n="$now" 'BEGIN { printf "%.2f", n - s }') s later; paths now: $(paths)"
}

# Brings NODE's proxy back and waits until the router has three paths.
restore() {
    main start "$1"
    wait_paths 3 30 || die "$1 did not come back within 30 s"
}

demo() {
    check_prerequisites
    CLIENT=$(binary cluster_client CLIENT_BIN)
    up auto
    trap 'down quiet' EXIT
    say ""
    say "== 1. flows per node: 3,000 connections through $VIP:$PORT"
    in_ns client "$CLIENT" --spread 3000
    say ""
    say "== 2. a planned removal: SIGTERM to lb2's proxy (lameduck 5 s: /health 503 while it"
    say "      still accepts, so its speaker withdraws the VIP first; then the drain)"
    watch_event stop lb2
    say "   lb2's own connections are lost when the router moves their flows: a proxy owns its"
    say "   sockets, and lb1 and lb3 answer packets of flows they never saw with a reset."
    sleep 9
    restore lb2
    say ""
    say "== 3. a crash: SIGKILL to lb1's proxy (its speaker notices at the next check)"
    watch_event kill lb1
    say "   with $(fib) routing the flows of lb2 and lb3 stay where they are; new connections"
    say "   that reached lb1 before the withdrawal were refused."
    restore lb1
    if [ "$(fib)" = resilient ]; then
        switch_fib plain
        local first
        first=$(paths | cut -d' ' -f1)
        say ""
        say "== 4. the same crash with plain multipath (hash-threshold): SIGKILL to $first, the"
        say "      first nexthop of the route"
        watch_event kill "$first"
        say "   each nexthop owns a slice of the hash range; the survivors' slices are recomputed,"
        say "   so part of a neighbour's flows move too, and are reset."
        restore "$first"
        switch_fib resilient
    fi
    if command -v nft >/dev/null; then
        say ""
        say "== 5. a planned removal with second chance: lb1 and lb3 pass packets of flows they"
        say "      do not know to lb2, which drains them (scripts/cluster/second-chance.nft)"
        second_chance lb2
        watch_event stop lb2
        second_chance off
    fi
    say ""
    say "(docs/CLUSTER.md explains each figure; the cluster is removed now)"
}

main() {
    local command=${1:-}
    shift || true
    case $command in
    up) up "$@" ;;
    down)
        [ "$(id -u)" = 0 ] || missing "needs root"
        down
        ;;
    status) status ;;
    paths) paths ;;
    buckets) buckets ;;
    wait-paths) wait_paths "${1:?wait-paths N [SECONDS]}" "${2:-30}" ;;
    stop)
        known_node "${1:-}"
        signal TERM "proxy-$1"
        ;;
    kill)
        known_node "${1:-}"
        signal KILL "proxy-$1"
        ;;
    start)
        known_node "${1:-}"
        PROXY=$(binary proxy PROXY_BIN)
        alive "proxy-$1" || start_proxy "$1"
        ;;
    cut)
        known_node "${1:-}"
        ip -n "$(ns "$1")" link set bk down
        ;;
    mend)
        known_node "${1:-}"
        ip -n "$(ns "$1")" link set bk up
        ;;
    second-chance) second_chance "${1:?second-chance NODE|off}" ;;
    fib) switch_fib "${1:?fib resilient|plain}" ;;
    mirror) mirror ;;
    demo) demo ;;
    -h | --help | help | "")
        sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
        ;;
    *)
        printf 'cluster.sh: unknown command %s; try --help\n' "$command" >&2
        exit 2
        ;;
    esac
}

main "$@"
