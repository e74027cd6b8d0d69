//! Where a server is now: for a `backend` line written with an IP address,
//! there, for good; for one written with a host name, the last good answer
//! of the system's resolver, which can change while the proxy runs.
//!
//! A server's identity is its name and its address *as written*
//! (`db1 db.internal:5432`): what the log, the metrics and an upgrade know
//! it by. Where it is, the socket address new connections and health
//! checks go to, is a value of its own, in one [`AddressBook`] per
//! frontend:
//!
//! ```text
//!   resolver thread ──answer()──▶ ┌ AddressBook (one per frontend) ────────────┐
//!   control thread (start,        │  server 0  db.internal:5432  10.0.0.7:5432 │ ──get()──▶ every worker's connect,
//!     reload)      ──answer()──▶  │  server 1  10.0.0.9:5432     (fixed)       │            the checker's checks
//!                                 └────────────────────────────────────────────┘
//! ```
//!
//! A changed address takes effect for the next connection; one already
//! open stays where it is (its socket is connected). A failed lookup
//! changes nothing but the server's record of failures: it keeps its last
//! good address, and the change of state (resolving, failing) is logged
//! once, not at every lookup. A server that never had an address (its
//! name did not resolve at start, and its line says `init-addr none`) is
//! out of rotation until one comes: the balancers look at
//! [`AddressBook::generation`], bumped when a server gets its first
//! address, as they do at the health board's.
//!
//! # Why a seqlock
//!
//! Every worker reads a server's address on every connect attempt, and a
//! lookup changes it once in a long while: the read must be cheap and
//! never wait for the writer. A `RwLock<SocketAddr>` would make every read
//! a read-modify-write of the lock's counter, one cache line bounced
//! between every worker's core on every connect. An `AtomicU64` holds an
//! IPv4 address and its port, but an IPv6 one needs 18 bytes. So each
//! address is three `AtomicU64` words behind a sequence number
//! (`AtomicAddr`, a seqlock): the writer makes the number odd, writes the
//! words, makes it even again; a reader reads the number, the words, the
//! number again, and keeps the words if the number was even and did not
//! move. A read is four loads and never writes; a reader that meets a
//! write under way (a few nanoseconds, once per changed answer) reads
//! again. Writers take the server's `Mutex`, so there is one at a time.
//!
//! Which answer: a lookup may give several addresses (IPv4 and IPv6, or a
//! name with several records). [`choose`] keeps the current one while the
//! answer still holds it, so that a name whose records rotate does not move
//! the server at each lookup (HAProxy's rule); otherwise the first one, in
//! the order the resolver sorted them (RFC 6724, `/etc/gai.conf`), of the
//! family its line prefers if it says (`resolve-prefer`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// An address family a server's line prefers among its name's answers
/// (`resolve-prefer ipv4|ipv6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// Its word in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            Family::V4 => "ipv4",
            Family::V6 => "ipv6",
        }
    }

    fn holds(self, addr: &SocketAddr) -> bool {
        match self {
            Family::V4 => addr.is_ipv4(),
            Family::V6 => addr.is_ipv6(),
        }
    }
}

/// What to look up for a server written with a host name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// The name.
    pub host: String,
    /// The port of its line: every answer gets it.
    pub port: u16,
    /// `resolve-prefer`: its family first, if the answer has one.
    pub prefer: Option<Family>,
}

/// The address a server should use, from a lookup's `answer`: `current`
/// while the answer holds it, else the first answer (of the `prefer`red
/// family, if the answer has one of that family). `None` for an empty
/// answer.
pub fn choose(
    answer: &[SocketAddr],
    current: Option<SocketAddr>,
    prefer: Option<Family>,
) -> Option<SocketAddr> {
    let preferred = |a: &&SocketAddr| prefer.is_none_or(|f| f.holds(a));
    let candidates: Vec<&SocketAddr> = match answer.iter().any(|a| preferred(&a)) {
        true => answer.iter().filter(preferred).collect(),
        false => answer.iter().collect(),
    };
    match current {
        Some(current) if candidates.contains(&&current) => Some(current),
        _ => candidates.first().map(|&&a| a),
    }
}

/// A lookup that failed, while the failures go on: since when, and the
/// last reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failing {
    /// The first failure of the run.
    pub since: Instant,
    /// What the resolver said the last time (`name or service not known`).
    pub why: String,
}

/// Where a frontend's servers are now (module docs), by the indexes of its
/// backends.
#[derive(Debug)]
pub struct AddressBook {
    frontend: String,
    servers: Vec<Entry>,
    /// Bumped (Release) each time a server that had no address gets one.
    generation: AtomicU64,
}

#[derive(Debug)]
struct Entry {
    /// How the log lines name it: `db1 (db.internal:5432)`.
    label: String,
    /// Its name, for a server written with one.
    lookup: Option<Lookup>,
    at: AtomicAddr,
    /// How its lookups go; held by whoever writes `at`.
    failing: Mutex<Option<Failing>>,
    /// Lookups that failed, for the metrics. Written with `failing` held.
    failures: AtomicU64,
}

/// One server as [`AddressBook::new`] takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// How the log lines name it.
    pub label: String,
    /// Where it is at first: its address for one written with an IP
    /// address; for a name, the address it had before a reload, or its
    /// `init-addr` one, or none.
    pub start: Option<SocketAddr>,
    /// Its name, for a server written with one.
    pub lookup: Option<Lookup>,
}

impl AddressBook {
    /// The servers of frontend `frontend`, in order.
    pub fn new(frontend: &str, servers: impl IntoIterator<Item = Place>) -> AddressBook {
        let servers = servers
            .into_iter()
            .map(|place| Entry {
                label: place.label,
                lookup: place.lookup,
                at: AtomicAddr::new(place.start),
                failing: Mutex::new(None),
                failures: AtomicU64::new(0),
            })
            .collect();
        AddressBook {
            frontend: frontend.to_string(),
            servers,
            generation: AtomicU64::new(0),
        }
    }

    /// How many servers.
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// No servers at all?
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Where server `index` is now: what a connect or a check goes to
    /// (`None`: a name that has not resolved yet, or an index past the
    /// last). Lock-free: four atomic loads.
    pub fn get(&self, index: usize) -> Option<SocketAddr> {
        self.servers.get(index)?.at.load()
    }

    /// The name server `index` is looked up by, if it is written with one.
    pub fn lookup(&self, index: usize) -> Option<&Lookup> {
        self.servers.get(index)?.lookup.as_ref()
    }

    /// Whether any server is written with a name (a resolver has work).
    pub fn has_names(&self) -> bool {
        self.servers.iter().any(|s| s.lookup.is_some())
    }

    /// Changes that may put a server into rotation: compare with the last
    /// value seen, as with the health board's generation.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// How many lookups of server `index`'s name failed so far.
    pub fn failures(&self, index: usize) -> u64 {
        self.servers
            .get(index)
            .map_or(0, |s| s.failures.load(Ordering::Relaxed))
    }

    /// While server `index`'s lookups fail: since when, and why.
    pub fn failing(&self, index: usize) -> Option<Failing> {
        let server = self.servers.get(index)?;
        let failing = server.failing.lock();
        failing.unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// A lookup of server `index`'s name answered `answer` (the addresses,
    /// or why it failed): its address follows ([`choose`]), or stays on a
    /// failure; each change of state is logged once. Nothing for a server
    /// written with an IP address.
    pub fn answer(&self, index: usize, answer: Result<&[SocketAddr], &str>) {
        let Some(server) = self.servers.get(index) else {
            return;
        };
        let Some(lookup) = &server.lookup else {
            return;
        };
        let mut failing = server
            .failing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let current = server.at.load();
        let chosen = match answer {
            Ok(addrs) => choose(addrs, current, lookup.prefer).ok_or("no address"),
            Err(why) => Err(why),
        };
        match chosen {
            Ok(addr) => {
                let was = failing.take();
                if Some(addr) != current {
                    server.at.store(Some(addr));
                    if current.is_none() {
                        self.generation.fetch_add(1, Ordering::Release);
                    }
                }
                self.log_found(server, lookup, (current, addr), was);
            }
            Err(why) => {
                server.failures.fetch_add(1, Ordering::Relaxed);
                if let Some(failing) = failing.as_mut() {
                    failing.why = why.to_string();
                    return;
                }
                *failing = Some(Failing {
                    since: Instant::now(),
                    why: why.to_string(),
                });
                self.log_failed(server, lookup, current, why);
            }
        }
    }

    /// The line for an answer that gave `now` (`before`: the address it
    /// had), if anything changed: a new address, or lookups that work again
    /// (`was`: their failure).
    fn log_found(
        &self,
        server: &Entry,
        lookup: &Lookup,
        (before, now): (Option<SocketAddr>, SocketAddr),
        was: Option<Failing>,
    ) {
        let again = was.map(|f| {
            let took = Duration::from_secs(f.since.elapsed().as_secs());
            format!(" (again, after failing for {took:?}: {})", f.why)
        });
        let head = format!("frontend {}: backend {}", self.frontend, server.label);
        let host = &lookup.host;
        match before {
            None => crate::info!(
                "{head}: {host} resolves to {now}{}; in rotation",
                again.unwrap_or_default()
            ),
            Some(before) if before != now => crate::info!(
                "{head}: {host} resolves to {now}{}, no longer {before}: new connections and \
                 checks go there, open ones stay",
                again.unwrap_or_default()
            ),
            Some(_) => {
                if let Some(again) = again {
                    crate::info!("{head}: {host} resolves to {now}{again}");
                }
            }
        }
    }

    /// The line for the first failure of a run.
    fn log_failed(&self, server: &Entry, lookup: &Lookup, kept: Option<SocketAddr>, why: &str) {
        let host = &lookup.host;
        let head = format!("frontend {}: backend {}", self.frontend, server.label);
        match kept {
            Some(kept) => crate::warn!(
                "{head}: {host} does not resolve: {why}; keeping its last good address {kept}"
            ),
            None => crate::warn!(
                "{head}: {host} does not resolve: {why}; it has no address yet, and stays out \
                 of rotation until it resolves"
            ),
        }
    }
}

/// A socket address (or none) that a writer changes while any thread reads
/// it, without a lock: a seqlock over three words (module docs).
///
/// The orderings are those of Boehm's seqlock ("Can seqlocks get along
/// with programming language memory models?", 2012): the writer stores the
/// odd number, then a Release fence, then the words, then the even number
/// with Release; the reader loads the number with Acquire, the words, then
/// an Acquire fence, then the number again. A reader that saw any word of
/// a write in progress sees, after its fence, the odd number stored before
/// it (the two fences synchronize through that word), so it reads again; a
/// reader whose first load saw the even number of a finished write sees all
/// of its words.
#[derive(Debug)]
struct AtomicAddr {
    /// Even: stable; odd: a write is under way.
    seq: AtomicU64,
    words: [AtomicU64; 3],
}

/// How many times a reader spins on a write under way before it yields.
const SPINS: u32 = 64;

/// `words[0]`'s bits: the port (0..16), the kind (16..18: none, IPv4,
/// IPv6), an IPv6 scope id (32..64).
const NONE: u64 = 0;
const V4: u64 = 1;
const V6: u64 = 2;

impl AtomicAddr {
    fn new(addr: Option<SocketAddr>) -> AtomicAddr {
        AtomicAddr {
            seq: AtomicU64::new(0),
            words: encode(addr).map(AtomicU64::new),
        }
    }

    /// Stores `addr`. One writer at a time: the caller holds a lock.
    fn store(&self, addr: Option<SocketAddr>) {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        for (word, value) in self.words.iter().zip(encode(addr)) {
            word.store(value, Ordering::Relaxed);
        }
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// The address stored last. Reads again while a write is under way,
    /// which lasts a few stores; past a few tries the writer was probably
    /// descheduled in the middle of one, and the reader gives its core
    /// away rather than spin through the writer's wait.
    fn load(&self) -> Option<SocketAddr> {
        let mut tries = 0u32;
        loop {
            let before = self.seq.load(Ordering::Acquire);
            if before % 2 == 0 {
                let words = [0, 1, 2].map(|i| self.words[i].load(Ordering::Relaxed));
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == before {
                    return decode(words);
                }
            }
            match tries < SPINS {
                true => std::hint::spin_loop(),
                false => std::thread::yield_now(),
            }
            tries = tries.saturating_add(1);
        }
    }
}

fn encode(addr: Option<SocketAddr>) -> [u64; 3] {
    match addr {
        None => [NONE, 0, 0],
        Some(SocketAddr::V4(a)) => [
            u64::from(a.port()) | V4 << 16,
            0,
            u64::from(a.ip().to_bits()),
        ],
        Some(SocketAddr::V6(a)) => {
            let bits = a.ip().to_bits();
            [
                u64::from(a.port()) | V6 << 16 | u64::from(a.scope_id()) << 32,
                (bits >> 64) as u64,
                bits as u64, // the low half: truncation meant
            ]
        }
    }
}

fn decode([head, high, low]: [u64; 3]) -> Option<SocketAddr> {
    let port = (head & 0xffff) as u16;
    match (head >> 16) & 0b11 {
        V4 => {
            let ip = Ipv4Addr::from_bits(low as u32);
            Some(SocketAddr::new(IpAddr::V4(ip), port))
        }
        V6 => {
            let ip = Ipv6Addr::from_bits(u128::from(high) << 64 | u128::from(low));
            let scope = (head >> 32) as u32;
            Some(SocketAddr::V6(SocketAddrV6::new(ip, port, 0, scope)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    fn a(text: &str) -> SocketAddr {
        text.parse().expect("a socket address")
    }

    #[test]
    fn every_kind_of_address_goes_through_the_words_unchanged() {
        let scoped = SocketAddr::V6(SocketAddrV6::new("fe80::1".parse().unwrap(), 443, 0, 7));
        for addr in [
            None,
            Some(a("127.0.0.1:9001")),
            Some(a("255.255.255.255:65535")),
            Some(a("0.0.0.0:0")),
            Some(a("[::1]:5432")),
            Some(a("[2001:db8::ffff:1]:1")),
            Some(scoped),
        ] {
            assert_eq!(decode(encode(addr)), addr);
            let cell = AtomicAddr::new(None);
            cell.store(addr);
            assert_eq!(cell.load(), addr);
        }
    }

    // A reader never sees half of one address and half of another: one
    // thread writes two addresses that differ in every word, in turn,
    // while another reads; each read is one of the two.
    #[test]
    fn a_reader_never_sees_a_torn_address() {
        let one = Some(a("10.1.2.3:1111"));
        let other = Some(a("[2001:db8::42]:2222"));
        let cell = Arc::new(AtomicAddr::new(one));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (cell, stop) = (cell.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut writes = 0u64;
                while !stop.load(Ordering::Relaxed) && writes < 5_000_000 {
                    cell.store(if writes % 2 == 0 { other } else { one });
                    writes += 1;
                }
                writes
            })
        };
        let mut seen = [0u64; 2];
        for _ in 0..200_000 {
            let read = cell.load();
            assert!(read == one || read == other, "torn read: {read:?}");
            seen[usize::from(read == other)] += 1;
        }
        stop.store(true, Ordering::Relaxed);
        let writes = writer.join().expect("the writer");
        assert!(writes > 0 && seen.iter().sum::<u64>() == 200_000);
    }

    #[test]
    fn the_current_address_stays_while_the_answer_holds_it() {
        let (one, two, six) = (a("10.0.0.1:80"), a("10.0.0.2:80"), a("[2001:db8::1]:80"));
        assert_eq!(choose(&[one, two], None, None), Some(one));
        assert_eq!(choose(&[one, two], Some(two), None), Some(two), "kept");
        assert_eq!(choose(&[two, one], Some(one), None), Some(one), "rotated");
        assert_eq!(choose(&[two], Some(one), None), Some(two), "gone: moves");
        assert_eq!(choose(&[], Some(one), None), None);
        // resolve-prefer: that family first; the other if it is all there is.
        assert_eq!(choose(&[six, one], None, Some(Family::V4)), Some(one));
        assert_eq!(choose(&[six, one], None, None), Some(six));
        assert_eq!(choose(&[six], None, Some(Family::V4)), Some(six));
        assert_eq!(choose(&[one, six], Some(one), Some(Family::V6)), Some(six));
    }

    fn book() -> AddressBook {
        let name = |host: &str| Lookup {
            host: host.to_string(),
            port: 9000,
            prefer: None,
        };
        AddressBook::new(
            "web",
            [
                Place {
                    label: "db1 (db.test:9000)".into(),
                    start: None,
                    lookup: Some(name("db.test")),
                },
                Place {
                    label: "127.0.0.1:9002".into(),
                    start: Some(a("127.0.0.1:9002")),
                    lookup: None,
                },
            ],
        )
    }

    #[test]
    fn a_name_gets_its_address_and_keeps_it_while_lookups_fail() {
        let b = book();
        assert_eq!((b.get(0), b.get(1)), (None, Some(a("127.0.0.1:9002"))));
        assert!(b.has_names() && b.lookup(1).is_none() && b.get(2).is_none());
        b.answer(0, Err("name or service not known"));
        assert_eq!((b.get(0), b.generation(), b.failures(0)), (None, 0, 1));
        b.answer(0, Ok(&[a("127.0.0.1:9000")]));
        assert_eq!(b.get(0), Some(a("127.0.0.1:9000")));
        assert_eq!(b.generation(), 1, "into rotation: the balancers look");
        assert_eq!(b.failing(0), None);
        b.answer(0, Err("temporary failure in name resolution"));
        b.answer(0, Ok(&[]));
        assert_eq!(b.get(0), Some(a("127.0.0.1:9000")), "the last good one");
        let failing = b.failing(0).expect("failing");
        assert_eq!((failing.why.as_str(), b.failures(0)), ("no address", 3));
        b.answer(0, Ok(&[a("127.0.0.2:9000")]));
        assert_eq!(b.get(0), Some(a("127.0.0.2:9000")));
        assert_eq!(b.generation(), 1, "it had an address: nothing to copy");
        b.answer(1, Ok(&[a("10.9.9.9:1")]));
        assert_eq!(b.get(1), Some(a("127.0.0.1:9002")), "an IP stays");
    }
}
