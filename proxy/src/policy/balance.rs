//! Choosing a backend: the `balance` algorithms, weights, backups.
//!
//! The pool mode's picker (`blocking/picker.rs`) answers "which backend is next?" with a bare
//! counter. A real load balancer needs more: backends with different
//! capacities (weights), backends taken out of rotation (health checks,
//! draining), spare backends used only in an emergency (backups), servers a
//! pick must pass over (tried already, or full), and a choice of algorithm.
//! This module is that logic, and only that: no sockets, no clocks, no
//! threads. The caller tells the [`Balancer`] what happened (a check failed,
//! a connection opened or closed) and asks it to [`pick`](Balancer::pick).
//!
//! # One balancer per event loop
//!
//! Every method that changes state takes `&mut self`, and nothing inside is
//! shared: each event loop owns its own `Balancer` and feeds it its own
//! events, so picking needs no lock and no atomic. The price is that each
//! loop sees only its own connections: with 4 loops, "least connections"
//! means least connections *opened by this loop*. HAProxy's threads share one
//! state under locks; nginx's worker processes keep per-worker counts too,
//! unless a shared `zone` is configured. Per-loop counts are nginx's
//! default trade.
//!
//! # Who may be picked
//!
//! ```text
//!   server          in rotation?            available?
//!   --------------  ----------------------  ---------------------------------
//!   up, weight 3    yes                     yes, unless the pick avoids it
//!   up, weight 0    no: drained             no  (its open connections go on)
//!   down            no                      no
//! ```
//!
//! A pick may be told to avoid some servers ([`Balancer::pick_avoiding`]):
//! the ones a client's earlier connect attempts failed on, and the ones its
//! caller found at their `maxconn`. Limits are not kept here: a `maxconn`
//! is a promise for the whole process, so its count is shared by every
//! event loop (limit.rs), and the caller passes the full servers in.
//!
//! The servers come in two tiers, normal and backup. Picks come from the
//! normal tier while any normal server is available; only when none is (all
//! down, drained or avoided) do they come from the backup tier, and they go
//! back to the normal tier as soon as one normal server is available again.
//! If no server of either tier is available, [`pick`](Balancer::pick)
//! returns `None` and the caller refuses (or queues) the client.
//!
//! # The algorithms
//!
//! ## `roundrobin`: smooth weighted round-robin (nginx's)
//!
//! Each server has a *current* score, starting at 0. On every pick, every
//! available server adds its weight to its score; the server with the
//! highest score wins and pays for its win by subtracting the total of the
//! weights. With weights a=5, b=1, c=1 (total 7):
//!
//! ```text
//!   pick   scores after adding     winner   scores after paying 7
//!   1      a 5   b 1   c 1         a        a -2   b 1   c 1
//!   2      a 3   b 2   c 2         a        a -4   b 2   c 2
//!   3      a 1   b 3   c 3         b        a  1   b -4  c 3
//!   4      a 6   b -3  c 4         a        a -1   b -3  c 4
//!   5      a 4   b -2  c 5         c        a  4   b -2  c -2
//!   6      a 9   b -1  c -1        a        a  2   b -1  c -1
//!   7      a 7   b 0   c 0         a        a  0   b 0   c 0    (back to the start)
//! ```
//!
//! Over a cycle of 7 picks, `a` wins 5 times and `b` and `c` once each, as
//! the weights say, but interleaved (`a a b a c a a`) rather than in a burst
//! (`a a a a a b c`): a heavy server never gets a long run of new
//! connections at once. Ties go to the first server in the list.
//!
//! ## `leastconn`: fewest active connections
//!
//! The server with the fewest open connections per unit of weight wins
//! (`active / weight`, compared without division as `a.active * b.weight <
//! b.active * a.weight`, like HAProxy and nginx). With equal weights that is
//! simply "fewest open connections". Ties are broken round-robin: the scan
//! starts just after the previous winner, and the first of the tied servers
//! met wins, so equally idle servers take turns instead of the first one
//! getting every connection.
//!
//! ## `random`: power of two choices
//!
//! Pick two different available servers uniformly at random and take the
//! less loaded of the two (by the same `active / weight` measure). Picking
//! only one at random spreads load unevenly; looking at every server (least
//! connections) makes every balancer that shares no state rush the same
//! idle server at once. Two random choices get most of the benefit of
//! looking at all of them (Mitzenmacher, "The Power of Two Choices in
//! Randomized Load Balancing"). The randomness is a tiny xorshift64*
//! generator, seeded differently per balancer (or by [`Balancer::seed`] in
//! tests); it need not be unpredictable, only well spread.
//!
//!
//! ## `first`: the first with room
//!
//! The first available server in the order of the file (HAProxy's `balance
//! first`), weights ignored. The caller passes the servers at their
//! `maxconn` in `avoid`, so the first one *with a free place* wins: new
//! connections fill the first server up to its `maxconn`, then the second,
//! and so on, and servers beyond the load stay idle (they can be powered
//! down, or serve something else). Without a `maxconn` the first server
//! takes everything.
//!
//! ## `source`: consistent hashing
//!
//! A client address always reaches the same server while the set of
//! servers stays the same, and few clients move when it changes: a Maglev
//! table per tier, in [`maglev`].

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::{IpAddr, SocketAddr};

use super::maglev::{self, Key, Table};

/// The largest weight a server may have.
pub const MAX_WEIGHT: u32 = 256;

/// One backend, as configured. Where it is does not matter here: the
/// caller connects to the index picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Server {
    /// Who it is, for its place in a `balance source` table: its address,
    /// or its host name for one written so ([`Key`]).
    pub key: Key,
    /// Its share of new connections relative to the others. 0 drains it: no
    /// new connections, the open ones carry on.
    pub weight: u32,
    /// A backup server takes connections only when no normal one can.
    pub backup: bool,
}

impl Server {
    /// A normal server at `addr` of weight 1, the default of HAProxy and
    /// nginx.
    pub fn new(addr: SocketAddr) -> Server {
        Server {
            key: Key::of_addr(addr),
            weight: 1,
            backup: false,
        }
    }
}

/// How [`Balancer::pick`] chooses among the available servers (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Algorithm {
    /// Smooth weighted round-robin, nginx's (`balance roundrobin`).
    #[default]
    RoundRobin,
    /// Fewest active connections per weight, ties round-robin.
    LeastConn,
    /// Power of two choices: two at random, the less loaded wins.
    Random,
    /// Consistent hashing of the client address on a Maglev table.
    Source,
    /// The first server, in the order of the file, with a free place under
    /// its `maxconn` (HAProxy's `balance first`): as few servers as the
    /// load needs are in use.
    First,
}

impl Algorithm {
    /// Every algorithm, in the order the docs list them.
    pub const ALL: [Algorithm; 5] = [
        Algorithm::RoundRobin,
        Algorithm::LeastConn,
        Algorithm::Random,
        Algorithm::Source,
        Algorithm::First,
    ];

    /// Its name in a configuration file and on the command line (HAProxy's
    /// `balance` keywords).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::RoundRobin => "roundrobin",
            Algorithm::LeastConn => "leastconn",
            Algorithm::Random => "random",
            Algorithm::Source => "source",
            Algorithm::First => "first",
        }
    }

    /// The algorithm named `word`.
    pub fn parse(word: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.name() == word)
    }
}

/// What the balancer knows about one server beyond its configuration.
#[derive(Debug, Clone, Default)]
struct ServerTally {
    /// The last health verdict; servers start up.
    down: bool,
    /// Connections opened to it and not yet closed.
    active: u32,
    /// Its smooth round-robin score.
    current: i64,
}

/// Picks a backend for each new connection (module docs).
#[derive(Debug)]
pub struct Balancer {
    /// The servers, each with the weight in force (its configured one, or
    /// the share its agent asked: [`Balancer::set_weight_percent`]).
    servers: Vec<Server>,
    /// Each server's weight as configured.
    configured: Vec<u32>,
    state: Vec<ServerTally>,
    algorithm: Algorithm,
    /// Where leastconn's scan starts: just after the previous winner.
    next: usize,
    rng: XorShift,
    table_size: usize,
    /// The Maglev tables of the normal tier (`[0]`) and the backup tier
    /// (`[1]`); empty unless the algorithm is `Source`.
    tables: [Table; 2],
    /// Servers the pick in progress must not return (a retry's earlier
    /// attempts, servers found full); empty between picks, its capacity
    /// kept so that picking does not allocate.
    avoid: Vec<usize>,
}

impl Balancer {
    /// A balancer over `servers`, all up, none with a connection limit.
    pub fn new(servers: Vec<Server>, algorithm: Algorithm) -> Balancer {
        Balancer::with_table_size(servers, algorithm, maglev::TABLE_SIZE)
    }

    /// [`Balancer::new`] with a Maglev table of `table_size` slots, for
    /// tests or for pools of more than a few hundred servers.
    ///
    /// # Panics
    ///
    /// If `table_size` is not a prime at least as large as the number of
    /// servers (a programming error: the table would not work).
    pub fn with_table_size(
        servers: Vec<Server>,
        algorithm: Algorithm,
        table_size: usize,
    ) -> Balancer {
        assert!(
            maglev::is_prime(table_size),
            "Maglev table size {table_size} is not a prime"
        );
        assert!(
            table_size >= servers.len() && u32::try_from(servers.len()).is_ok(),
            "Maglev table size {table_size} is smaller than the {} servers",
            servers.len()
        );
        let mut balancer = Balancer {
            state: vec![ServerTally::default(); servers.len()],
            configured: servers.iter().map(|s| s.weight).collect(),
            servers,
            algorithm,
            next: 0,
            // A different sequence per balancer, so that event loops do not
            // all sample the same servers in step. RandomState's keys are
            // random per process and per instance; no I/O is needed here.
            rng: XorShift::new(RandomState::new().hash_one(0u8)),
            table_size,
            tables: [Table::default(), Table::default()],
            avoid: Vec::new(),
        };
        balancer.rebuild(false);
        balancer.rebuild(true);
        balancer
    }

    /// Restarts the random generator from `seed`, for reproducible tests.
    pub fn seed(&mut self, seed: u64) {
        self.rng = XorShift::new(seed);
    }

    /// The servers, in the order given to [`Balancer::new`]; indices into
    /// this slice are what [`pick`](Balancer::pick) returns.
    pub fn servers(&self) -> &[Server] {
        &self.servers
    }

    /// The algorithm chosen at construction.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The index of the server for a new connection from `client`, or `None`
    /// if no server is available. `client` matters only to `Source`.
    ///
    /// Picking does not count the connection: call
    /// [`connection_opened`](Balancer::connection_opened) once it is made.
    pub fn pick(&mut self, client: IpAddr) -> Option<usize> {
        self.pick_avoiding(client, &[])
    }

    /// [`pick`](Balancer::pick), but never one of the servers in `avoid`:
    /// a retry after a failed connect goes to a server not tried yet, and a
    /// server found full elsewhere is passed over. If every normal server
    /// is avoided, the pick comes from the backups, as if they were down.
    pub fn pick_avoiding(&mut self, client: IpAddr, avoid: &[usize]) -> Option<usize> {
        self.avoid.clear();
        self.avoid.extend_from_slice(avoid);
        let chosen = self.tier().and_then(|backup| match self.algorithm {
            Algorithm::RoundRobin => self.pick_smooth(backup),
            Algorithm::LeastConn => self.pick_least(backup),
            Algorithm::Random => self.pick_two(backup),
            Algorithm::Source => self.pick_source(backup, client),
            Algorithm::First => self.nth_candidate(backup, 0),
        });
        self.avoid.clear();
        chosen
    }

    /// Records a health verdict for server `index`. When the set of servers
    /// in rotation changes, the Maglev table of its tier is rebuilt.
    ///
    /// # Panics
    ///
    /// If `index` is out of range, like every method taking an index.
    pub fn set_up(&mut self, index: usize, up: bool) {
        if self.state[index].down != up {
            return; // no change: keep the table
        }
        self.state[index].down = !up;
        if self.servers[index].weight > 0 {
            self.rebuild(self.servers[index].backup);
        }
    }

    /// Sets server `index`'s weight to `percent` of its configured one (its
    /// agent's word, `policy/agent_state.rs`): 0 drains it; any other share
    /// keeps it at 1 at least and [`MAX_WEIGHT`] at most. A change rebuilds
    /// the Maglev table of its tier.
    pub fn set_weight_percent(&mut self, index: usize, percent: u32) {
        let configured = u64::from(self.configured[index]);
        let scaled = (configured * u64::from(percent)).div_ceil(100);
        let weight = u32::try_from(scaled.min(u64::from(MAX_WEIGHT))).unwrap_or(MAX_WEIGHT);
        if self.servers[index].weight == weight {
            return;
        }
        self.servers[index].weight = weight;
        self.rebuild(self.servers[index].backup);
    }

    /// Sets server `index`'s configured weight (the operator's `set
    /// weight`), then its weight in force from `percent` of it, as
    /// [`Balancer::set_weight_percent`] does.
    pub fn set_configured_weight(&mut self, index: usize, weight: u32, percent: u32) {
        self.configured[index] = weight.min(MAX_WEIGHT);
        self.set_weight_percent(index, percent);
    }

    /// Whether server `index` is up (its last health verdict).
    pub fn is_up(&self, index: usize) -> bool {
        !self.state[index].down
    }

    /// Counts a connection opened to server `index`.
    pub fn connection_opened(&mut self, index: usize) {
        let state = &mut self.state[index];
        state.active = state.active.saturating_add(1);
    }

    /// Counts a connection to server `index` closed. A close without a
    /// matching open is ignored rather than wrapping the count.
    pub fn connection_closed(&mut self, index: usize) {
        let state = &mut self.state[index];
        state.active = state.active.saturating_sub(1);
    }

    /// Server `index`'s active connections.
    pub fn active(&self, index: usize) -> u32 {
        self.state[index].active
    }

    // ---- who may be picked ----

    /// Up and not drained: a member of its tier's Maglev table.
    fn in_rotation(&self, index: usize) -> bool {
        !self.state[index].down && self.servers[index].weight > 0
    }

    fn available(&self, index: usize) -> bool {
        self.in_rotation(index) && !self.avoid.contains(&index)
    }

    /// May be picked now from the tier `backup`.
    fn candidate(&self, index: usize, backup: bool) -> bool {
        self.servers[index].backup == backup && self.available(index)
    }

    /// The tier to pick from: normal if any normal server is available, else
    /// backup if any backup server is, else none.
    fn tier(&self) -> Option<bool> {
        [false, true]
            .into_iter()
            .find(|&backup| (0..self.servers.len()).any(|i| self.candidate(i, backup)))
    }

    /// `a` is less loaded than `b`: `a.active / a.weight < b.active /
    /// b.weight`, cross-multiplied to stay in integers (u64: no overflow).
    fn less_loaded(&self, a: usize, b: usize) -> bool {
        let load = |x: usize, y: usize| {
            u64::from(self.state[x].active) * u64::from(self.servers[y].weight)
        };
        load(a, b) < load(b, a)
    }

    // ---- the algorithms ----

    /// Smooth weighted round-robin: everyone adds its weight, the highest
    /// score wins and pays the total.
    fn pick_smooth(&mut self, backup: bool) -> Option<usize> {
        let mut total: i64 = 0;
        let mut best: Option<usize> = None;
        for i in 0..self.servers.len() {
            if !self.candidate(i, backup) {
                continue;
            }
            let weight = i64::from(self.servers[i].weight);
            self.state[i].current += weight;
            total += weight;
            // Strictly greater: on a tie the earlier server keeps the lead.
            if best.is_none_or(|b| self.state[i].current > self.state[b].current) {
                best = Some(i);
            }
        }
        let chosen = best?;
        self.state[chosen].current -= total;
        Some(chosen)
    }

    /// Least connections, scanning from just after the last winner so that
    /// ties rotate.
    fn pick_least(&mut self, backup: bool) -> Option<usize> {
        let n = self.servers.len();
        let mut best: Option<usize> = None;
        for offset in 0..n {
            let i = (self.next + offset) % n;
            if self.candidate(i, backup) && best.is_none_or(|b| self.less_loaded(i, b)) {
                best = Some(i);
            }
        }
        let chosen = best?;
        self.next = chosen + 1;
        Some(chosen)
    }

    /// Power of two choices among the candidates.
    fn pick_two(&mut self, backup: bool) -> Option<usize> {
        let count = (0..self.servers.len())
            .filter(|&i| self.candidate(i, backup))
            .count();
        if count < 2 {
            return self.nth_candidate(backup, 0);
        }
        // Two distinct positions: draw the second among the other count - 1
        // and step over the first.
        let first = self.rng.below(count);
        let mut second = self.rng.below(count - 1);
        if second >= first {
            second += 1;
        }
        let a = self.nth_candidate(backup, first)?;
        let b = self.nth_candidate(backup, second)?;
        Some(if self.less_loaded(b, a) { b } else { a })
    }

    fn nth_candidate(&self, backup: bool, nth: usize) -> Option<usize> {
        (0..self.servers.len())
            .filter(|&i| self.candidate(i, backup))
            .nth(nth)
    }

    /// Maglev lookup; if the slot's server is avoided, the next slots in turn.
    fn pick_source(&self, backup: bool, client: IpAddr) -> Option<usize> {
        self.tables[usize::from(backup)].lookup(client, |i| self.available(i))
    }

    // ---- the Maglev table ----

    /// Rebuilds the table of tier `backup` from its servers in rotation.
    fn rebuild(&mut self, backup: bool) {
        if self.algorithm != Algorithm::Source {
            return;
        }
        let members = (0..self.servers.len())
            .filter(|&i| self.servers[i].backup == backup && self.in_rotation(i))
            .map(|i| (i, self.servers[i].key, self.servers[i].weight));
        self.tables[usize::from(backup)] = Table::build(members, self.table_size);
    }
}

// ---- randomness ----

/// Marsaglia's xorshift64, with the multiply of xorshift64* on the output:
/// three shifts and a multiply per number, plenty for picking servers.
#[derive(Debug, Clone)]
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> XorShift {
        // The state must never be 0 (xorshift would stay at 0 forever);
        // fmix64 is a bijection taking only 0 to 0, hence the `| 1`.
        XorShift(maglev::fmix64(seed) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (n > 0): the high bits of `next * n` (Lemire's
    /// multiply-shift, which avoids the division of `% n`; the bias is
    /// below n / 2^64).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::net::Ipv4Addr;

    const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));

    fn server(last: u8, weight: u32) -> Server {
        Server {
            weight,
            ..Server::new(SocketAddr::from(([10, 0, 0, last], 80)))
        }
    }

    fn backup(last: u8) -> Server {
        Server {
            backup: true,
            ..server(last, 1)
        }
    }

    /// `count` picks from one client, as letters: server 0 is `a`.
    fn letters(balancer: &mut Balancer, count: usize) -> String {
        (0..count)
            .map(|_| match balancer.pick(CLIENT) {
                Some(i) => char::from(b'a' + i as u8),
                None => '-',
            })
            .collect()
    }

    /// How many of `count` picks went to each server.
    fn tally(balancer: &mut Balancer, count: usize) -> Vec<usize> {
        let mut counts = vec![0; balancer.servers().len()];
        for _ in 0..count {
            counts[balancer.pick(CLIENT).expect("a server")] += 1;
        }
        counts
    }

    /// Client 0..count: distinct IPv4 addresses.
    fn client(n: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n))
    }

    // ---- smooth weighted round-robin ----

    #[test]
    fn smooth_round_robin_interleaves_5_1_1() {
        let mut b = Balancer::new(
            vec![server(1, 5), server(2, 1), server(3, 1)],
            Algorithm::RoundRobin,
        );
        assert_eq!(letters(&mut b, 14), "aabacaaaabacaa");
    }

    #[test]
    fn smooth_round_robin_gives_exactly_the_weight_ratio() {
        let mut b = Balancer::new(
            vec![server(1, 5), server(2, 1), server(3, 1)],
            Algorithm::RoundRobin,
        );
        assert_eq!(tally(&mut b, 700), [500, 100, 100]);
    }

    #[test]
    fn equal_weights_are_plain_round_robin() {
        let mut b = Balancer::new(
            vec![server(1, 1), server(2, 1), server(3, 1)],
            Algorithm::RoundRobin,
        );
        assert_eq!(letters(&mut b, 7), "abcabca");
    }

    #[test]
    fn an_agents_share_scales_the_configured_weight() {
        let mut b = Balancer::new(vec![server(1, 4), server(2, 4)], Algorithm::RoundRobin);
        b.set_weight_percent(0, 50);
        assert_eq!(b.servers()[0].weight, 2);
        let picks: Vec<usize> = (0..6).map(|_| b.pick(CLIENT).expect("a pick")).collect();
        assert_eq!(picks.iter().filter(|&&i| i == 0).count(), 2, "{picks:?}");
        b.set_weight_percent(0, 0);
        assert!((0..10).all(|_| b.pick(CLIENT) == Some(1)), "0% drains");
        b.set_weight_percent(0, 1);
        assert_eq!(b.servers()[0].weight, 1, "a share above 0 keeps it in");
        b.set_weight_percent(0, 1000);
        assert_eq!(b.servers()[0].weight, 40);
        b.set_weight_percent(0, 100);
        assert_eq!(b.servers()[0].weight, 4, "back to its configured weight");
    }

    #[test]
    fn weight_0_drains_a_server() {
        let mut b = Balancer::new(
            vec![server(1, 1), server(2, 0), server(3, 1)],
            Algorithm::RoundRobin,
        );
        assert_eq!(letters(&mut b, 6), "acacac");
    }

    #[test]
    fn down_servers_are_skipped_and_return_when_up() {
        let mut b = Balancer::new(
            vec![server(1, 1), server(2, 1), server(3, 1)],
            Algorithm::RoundRobin,
        );
        b.set_up(1, false);
        assert!(!b.is_up(1));
        assert_eq!(letters(&mut b, 4), "acac");
        b.set_up(1, true);
        assert_eq!(tally(&mut b, 300), [100, 100, 100]);
    }

    #[test]
    fn first_takes_the_first_available_server_in_order_whatever_the_weights() {
        let mut b = Balancer::new(
            vec![server(1, 1), server(2, 5), backup(3)],
            Algorithm::First,
        );
        assert_eq!(letters(&mut b, 4), "aaaa");
        // The first full (the caller avoids it): the second, then the backup.
        assert_eq!(b.pick_avoiding(CLIENT, &[0]), Some(1));
        assert_eq!(b.pick_avoiding(CLIENT, &[0, 1]), Some(2));
        b.set_up(0, false);
        assert_eq!(letters(&mut b, 2), "bb");
        b.set_weight_percent(1, 0);
        assert_eq!(letters(&mut b, 2), "cc", "drained: the backup");
    }

    #[test]
    fn backups_serve_only_while_no_normal_server_can() {
        for algorithm in [
            Algorithm::RoundRobin,
            Algorithm::LeastConn,
            Algorithm::Random,
            Algorithm::Source,
        ] {
            let mut b = Balancer::new(vec![server(1, 1), backup(2), server(3, 0)], algorithm);
            b.seed(1);
            assert_eq!(letters(&mut b, 3), "aaa", "{algorithm:?}: normal first");
            b.set_up(0, false); // the only normal server in rotation goes down
            assert_eq!(letters(&mut b, 3), "bbb", "{algorithm:?}: then the backup");
            b.set_up(0, true);
            assert_eq!(letters(&mut b, 3), "aaa", "{algorithm:?}: normal again");
            b.set_up(0, false);
            b.set_up(1, false);
            assert_eq!(letters(&mut b, 2), "--", "{algorithm:?}: nothing left");
        }
    }

    #[test]
    fn avoided_servers_are_passed_over_by_every_algorithm() {
        for algorithm in [
            Algorithm::RoundRobin,
            Algorithm::LeastConn,
            Algorithm::Random,
            Algorithm::Source,
        ] {
            let mut b = Balancer::new(vec![server(1, 1), server(2, 1), server(3, 1)], algorithm);
            for n in 0..50 {
                let chosen = b.pick_avoiding(client(n), &[0, 2]);
                assert_eq!(chosen, Some(1), "{algorithm:?}");
            }
            assert_eq!(
                b.pick_avoiding(client(0), &[0, 1, 2]),
                None,
                "{algorithm:?}"
            );
            // The avoid list lasts one pick only.
            assert!(b.pick(client(0)).is_some(), "{algorithm:?}");
        }
    }

    #[test]
    fn avoiding_every_normal_server_falls_back_to_the_backup() {
        let mut backup = server(3, 1);
        backup.backup = true;
        let mut b = Balancer::new(
            vec![server(1, 1), server(2, 1), backup],
            Algorithm::RoundRobin,
        );
        assert_eq!(b.pick_avoiding(client(0), &[0, 1]), Some(2));
        assert_eq!(b.pick_avoiding(client(0), &[0]), Some(1));
    }

    #[test]
    fn nothing_to_pick_is_none() {
        for algorithm in [
            Algorithm::RoundRobin,
            Algorithm::LeastConn,
            Algorithm::Random,
            Algorithm::Source,
        ] {
            assert_eq!(Balancer::new(Vec::new(), algorithm).pick(CLIENT), None);
            let mut b = Balancer::new(vec![server(1, 0), server(2, 1)], algorithm);
            b.set_up(1, false);
            assert_eq!(b.pick(CLIENT), None, "{algorithm:?}");
        }
    }

    // ---- least connections ----

    #[test]
    fn leastconn_picks_the_server_with_fewer_connections() {
        let mut b = Balancer::new(
            vec![server(1, 1), server(2, 1), server(3, 1)],
            Algorithm::LeastConn,
        );
        for _ in 0..3 {
            b.connection_opened(0);
            b.connection_opened(2);
        }
        b.connection_opened(1);
        assert_eq!(letters(&mut b, 3), "bbb");
        b.connection_opened(1);
        b.connection_opened(1);
        b.connection_opened(1); // now b has 4, a and c have 3
        b.connection_closed(2); // c has 2
        assert_eq!(b.pick(CLIENT), Some(2));
    }

    #[test]
    fn leastconn_ties_rotate() {
        let mut b = Balancer::new(
            vec![server(1, 1), server(2, 1), server(3, 1)],
            Algorithm::LeastConn,
        );
        // Nothing is ever opened: all tie at 0, and they take turns.
        assert_eq!(letters(&mut b, 7), "abcabca");
    }

    #[test]
    fn leastconn_counts_connections_per_weight() {
        let mut b = Balancer::new(vec![server(1, 3), server(2, 1)], Algorithm::LeastConn);
        for _ in 0..400 {
            let chosen = b.pick(CLIENT).expect("a server");
            b.connection_opened(chosen);
        }
        assert_eq!((b.active(0), b.active(1)), (300, 100));
    }

    // ---- power of two choices ----

    /// The idle server wins whenever it is one of the two sampled, because
    /// it has strictly fewer connections than any other. Two distinct
    /// servers out of n include a given one with probability 2/n (it is the
    /// first draw with probability 1/n, or the second with (n-1)/n *
    /// 1/(n-1) = 1/n). With n = 10 over 1,000 picks that is 200 expected;
    /// the binomial's standard deviation is about 13, so 150 is almost 4
    /// deviations below. The seed is fixed, so the run is deterministic.
    #[test]
    fn two_choices_takes_the_idle_server_whenever_it_is_sampled() {
        let n = 10;
        let servers = (1..=n).map(|i| server(i, 1)).collect();
        let mut b = Balancer::new(servers, Algorithm::Random);
        b.seed(7);
        for i in 1..usize::from(n) {
            for _ in 0..100 {
                b.connection_opened(i);
            }
        }
        let counts = tally(&mut b, 1_000);
        assert!(
            counts[0] >= 150,
            "idle server chosen {} times in 1000",
            counts[0]
        );
    }

    #[test]
    fn two_choices_samples_two_distinct_servers() {
        // Two servers, one busy: two distinct samples are always both
        // servers, so the idle one wins every time.
        let mut b = Balancer::new(vec![server(1, 1), server(2, 1)], Algorithm::Random);
        b.seed(3);
        b.connection_opened(0);
        assert_eq!(letters(&mut b, 50), "b".repeat(50));
    }

    #[test]
    fn two_choices_spreads_load_evenly() {
        let mut b = Balancer::new((1..=4).map(|i| server(i, 1)).collect(), Algorithm::Random);
        b.seed(11);
        for _ in 0..400 {
            let chosen = b.pick(CLIENT).expect("a server");
            b.connection_opened(chosen);
        }
        for i in 0..4 {
            assert!(
                (95..=105).contains(&b.active(i)),
                "server {i}: {}",
                b.active(i)
            );
        }
    }

    // ---- source: Maglev ----

    #[test]
    fn source_keeps_a_client_on_one_server() {
        let mut b = Balancer::new((1..=5).map(|i| server(i, 1)).collect(), Algorithm::Source);
        for n in 0..100 {
            let first = b.pick(client(n));
            assert!(first.is_some());
            assert!((0..3).all(|_| b.pick(client(n)) == first));
        }
    }

    #[test]
    fn source_hashes_an_ipv4_mapped_client_like_the_ipv4_one() {
        let mut b = Balancer::new((1..=5).map(|i| server(i, 1)).collect(), Algorithm::Source);
        for n in 0..50 {
            let IpAddr::V4(v4) = client(n) else {
                unreachable!()
            };
            assert_eq!(b.pick(IpAddr::V6(v4.to_ipv6_mapped())), b.pick(client(n)));
        }
    }

    fn ten_servers() -> Balancer {
        Balancer::new((1..=10).map(|i| server(i, 1)).collect(), Algorithm::Source)
    }

    fn assignment(b: &mut Balancer, clients: u32) -> Vec<usize> {
        (0..clients)
            .map(|n| b.pick(client(n)).expect("a server"))
            .collect()
    }

    #[test]
    fn maglev_spreads_clients_within_10_percent() {
        let mut b = ten_servers();
        let mut counts = HashMap::new();
        for chosen in assignment(&mut b, 10_000) {
            *counts.entry(chosen).or_insert(0) += 1;
        }
        assert_eq!(counts.len(), 10);
        for (server, count) in counts {
            assert!(
                (900..=1_100).contains(&count),
                "server {server}: {count} of 10000"
            );
        }
    }

    #[test]
    fn removing_1_of_10_moves_about_a_tenth_of_the_clients() {
        let mut b = ten_servers();
        let before = assignment(&mut b, 10_000);
        b.set_up(3, false);
        let after = assignment(&mut b, 10_000);
        let moved = before.iter().zip(&after).filter(|(x, y)| x != y).count();
        let on_removed = before.iter().filter(|&&s| s == 3).count();
        // Everyone on the removed server must move, and only they, nearly.
        assert!(before.iter().zip(&after).all(|(&x, &y)| x != 3 || y != 3));
        assert!(moved <= 1_500, "{moved} of 10000 clients moved");
        assert!(
            moved - on_removed <= 300,
            "{} clients of other servers moved",
            moved - on_removed
        );
        // Back up: the same table as before, so everyone returns.
        b.set_up(3, true);
        assert_eq!(assignment(&mut b, 10_000), before);
    }

    #[test]
    fn the_table_does_not_depend_on_the_order_of_servers() {
        let mut forward = ten_servers();
        let mut reversed = Balancer::new(
            (1..=10).rev().map(|i| server(i, 1)).collect(),
            Algorithm::Source,
        );
        for n in 0..1_000 {
            let a = forward.pick(client(n)).expect("a server");
            let b = reversed.pick(client(n)).expect("a server");
            assert_eq!(forward.servers()[a].key, reversed.servers()[b].key);
        }
    }

    #[test]
    fn maglev_weights_scale_the_share() {
        let mut b = Balancer::new(vec![server(1, 3), server(2, 1)], Algorithm::Source);
        let heavy = assignment(&mut b, 10_000)
            .iter()
            .filter(|&&s| s == 0)
            .count();
        assert!(
            (7_000..=8_000).contains(&heavy),
            "weight 3 of 4 got {heavy} of 10000"
        );
    }

    #[test]
    fn source_walks_past_an_avoided_server() {
        let mut b = ten_servers();
        let home = b.pick(CLIENT).expect("a server");
        let other = b.pick_avoiding(CLIENT, &[home]).expect("a server");
        assert_ne!(other, home);
        assert_eq!(
            b.pick_avoiding(CLIENT, &[home]),
            Some(other),
            "and consistently so"
        );
        assert_eq!(b.pick(CLIENT), Some(home));
    }

    #[test]
    fn closing_more_than_opened_does_not_wrap() {
        let mut b = Balancer::new(vec![server(1, 1)], Algorithm::LeastConn);
        b.connection_closed(0);
        assert_eq!(b.active(0), 0);
    }

    // ---- the pieces ----

    #[test]
    #[should_panic(expected = "not a prime")]
    fn a_table_size_that_is_not_prime_is_refused() {
        Balancer::with_table_size(vec![server(1, 1)], Algorithm::Source, 65_536);
    }
}
