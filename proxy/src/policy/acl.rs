//! Access control by source address: `allow` / `deny` lists of address
//! ranges, and a ceiling on each source's concurrent connections.
//!
//! Both answer one question about a freshly accepted client, before any
//! backend is connected: may this address come in? A refused client is
//! closed at once; it never costs a backend connection.
//!
//! ```text
//!   accept() ──▶ AccessList::admits(ip)? ──no──▶ close, count "denied"
//!                        │ yes
//!                        ▼
//!                SourceLimits::try_acquire(ip)? ──None──▶ close, count "over per-source limit"
//!                        │ Some(permit)
//!                        ▼
//!                pick a backend, connect, relay ...   drop(permit): this source's count -= 1
//! ```
//!
//! # Address ranges
//!
//! A [`Cidr`] is an address and a prefix length: `10.0.0.0/8` is every
//! address whose first 8 bits are those of `10.0.0.0`, `2001:db8::/32` every
//! IPv6 address starting with the 32 bits `2001:0db8`. A bare address is a
//! range of one (`192.168.1.7` is `192.168.1.7/32`, `::1` is `::1/128`).
//!
//! A range whose address has bits set after the prefix, like `10.0.0.1/8`,
//! is refused: it is usually a typo for `10.0.0.0/8` or for `10.0.0.1/32`,
//! and guessing which would let a firewall rule cover 16 million addresses
//! when one was meant (or the other way round). iptables masks the bits
//! silently and nginx masks them with a warning ("low address bits are
//! meaningless"); `ip route` refuses ("Invalid prefix for given prefix
//! length"), as a careful firewall should, and so do we, with the
//! corrected range in the message.
//!
//! ## One client, one address: IPv4-mapped IPv6
//!
//! A dual-stack listener (`[::]:80`) reports an IPv4 client as an
//! IPv4-mapped IPv6 address, `::ffff:10.1.2.3`. That client is `10.1.2.3`:
//! it is matched by IPv4 ranges, whichever listener accepted it, exactly as
//! nginx does. Each client is matched in its own family only, so `::/0`
//! means "every IPv6 client" and does not cover IPv4 clients; to cover
//! everyone, write `0.0.0.0/0` and `::/0`. A range written in the mapped
//! form (`::ffff:10.0.0.0/104`) is read as the IPv4 range it stands for
//! (`10.0.0.0/8`), so it matches what it says.
//!
//! # Allow and deny
//!
//! An [`AccessList`] is a frontend's two lists. The rule is the same whatever
//! order the lines are written in:
//!
//! ```text
//!   deny covers ip?            yes ──▶ refused        (deny always wins)
//!   allow list empty?          yes ──▶ admitted       (no allow rule: everyone not denied)
//!   allow covers ip?           yes ──▶ admitted
//!                              no  ──▶ refused        (allow rules exist: only what they cover)
//! ```
//!
//! nginx (and HAProxy's `tcp-request` rules) instead take the first
//! matching line in file order, so `allow 10.0.0.0/8; deny 10.6.6.6` lets
//! `10.6.6.6` in. Here "deny wins" means a deny line can be added anywhere
//! and always does what it says.
//!
//! # Concurrent connections per source (`maxconn-per-source N`)
//!
//! [`SourceLimits`] counts each source address's open connections, and
//! refuses a new one from a source that already has N. The counts are
//! process-wide: every event-loop thread shares one `SourceLimits`, so an
//! operator's "20 per source" means 20, not 20 per thread.
//!
//! It borrows [`limit`](crate::policy::limit)'s idea, a place taken by
//! `try_acquire` and given back by dropping the permit, so a connection
//! cannot forget to, but not its atomic counter: here the count lives in a
//! map entry that must disappear when it reaches 0 (else every address ever
//! seen would stay in memory), and "decrement, and remove at 0" must happen
//! as one step against a concurrent "insert or increment". A lock does that
//! plainly. Nor does a source over its limit wait for room, as a frontend at
//! its `maxconn` does: it is refused at once, like HAProxy's `tcp-request
//! connection reject` on `sc_conn_cur` and nginx's `limit_conn`; queueing
//! it would let one client hold the queue instead.
//!
//! ## Shards
//!
//! One map behind one mutex would make every accept on every thread queue
//! for the same lock. So the map is split into 64 shards, each a
//! `Mutex<HashMap<IpAddr, u32>>`, and an address always goes to the shard
//! its hash picks:
//!
//! ```text
//!   ip ──hash──▶ shard 0 .. 63 ──▶ Mutex<HashMap<ip, open connections>>
//!
//!   loop 1: 10.0.0.7   ──▶ shard 12  ┐ different shards:
//!   loop 2: 192.0.2.9  ──▶ shard 40  ┘ no waiting on each other
//! ```
//!
//! The lock is held for one map lookup, twice per connection (accept and
//! close), and taken only when the option is configured. Two loops contend
//! only when their clients happen to hash to the same shard, one chance in
//! 64. The hash is `std`'s keyed SipHash with a random key per process, so a
//! client cannot choose addresses that all fall into one shard. The maps
//! give back memory as their sources leave, so memory follows the sources
//! connected now, not every source ever seen.
//!
//! ## IPv6 sources
//!
//! IPv4-mapped addresses count as the IPv4 address, so one client is one
//! count whichever listener accepted it. An IPv6 client is counted per full
//! 128-bit address. An IPv6 client usually owns a whole /64, 2^64
//! addresses, and can spread its connections over as many of them as it
//! likes, each with a count of its own: the limit stops a careless client,
//! not a determined one. HAProxy (`track-sc0 src`) and nginx
//! (`limit_conn_zone $binary_remote_addr`) key on the full address too,
//! unless configured otherwise (HAProxy: `src,ipmask(32,64)`).

use std::collections::HashMap;
use std::collections::hash_map::{Entry, RandomState};
use std::fmt;
use std::hash::BuildHasher;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

// ---- address ranges ----

/// An address range, IPv4 or IPv6: `10.0.0.0/8`, `192.168.1.7` (a /32),
/// `2001:db8::/32`, `::1` (a /128). Its address never has bits set after
/// the prefix (module docs: why such ranges are refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The first address of the range; IPv4 for mapped ranges.
    network: IpAddr,
    /// How many leading bits of an address must equal `network`'s.
    prefix: u8,
}

impl Cidr {
    /// Reads `10.0.0.0/8`, `192.168.1.7`, `2001:db8::/32` or `::1`. The
    /// error says what is wrong and what to write instead.
    pub fn parse(text: &str) -> Result<Cidr, String> {
        const EXAMPLES: &str = "write an address (10.0.0.1, 2001:db8::1) \
                                or a range (10.0.0.0/8, 2001:db8::/32)";
        if text.is_empty() {
            return Err(format!("an empty address range; {EXAMPLES}"));
        }
        let (addr_text, prefix_text) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let Ok(addr) = addr_text.parse::<IpAddr>() else {
            // `[::1]` is how an address is written next to a port, not here.
            let inner = addr_text
                .strip_prefix('[')
                .and_then(|a| a.strip_suffix(']'));
            if let Some(inner) = inner.filter(|a| a.parse::<Ipv6Addr>().is_ok()) {
                return Err(format!(
                    "'{text}' is not an IP address; write IPv6 without brackets: {inner}{}",
                    prefix_text.map(|p| format!("/{p}")).unwrap_or_default()
                ));
            }
            return Err(format!("'{text}' is not an IP address; {EXAMPLES}"));
        };
        let bits = bits_of(addr);
        let family = match addr {
            IpAddr::V4(_) => "IPv4",
            IpAddr::V6(_) => "IPv6",
        };
        let prefix = match prefix_text {
            None => bits,
            Some("") => {
                return Err(format!(
                    "'{text}' has no prefix length after the '/'; write {addr}/{bits} \
                     (or just {addr}) for one address, or a shorter prefix for a range"
                ));
            }
            // Digits only: `u32::from_str` would also take "+8".
            Some(p) if !p.bytes().all(|b| b.is_ascii_digit()) => {
                return Err(format!(
                    "'{text}': the prefix length '{p}' is not a number of bits; \
                     write e.g. {}",
                    match addr {
                        IpAddr::V4(_) => "10.0.0.0/8",
                        IpAddr::V6(_) => "2001:db8::/32",
                    }
                ));
            }
            Some(p) => match p.parse::<u32>() {
                Ok(n) if n <= u32::from(bits) => n as u8,
                // Too many digits for a u32 is too long as well.
                _ => {
                    return Err(format!(
                        "prefix length {p} is too long for {family} (at most {bits})"
                    ));
                }
            },
        };
        let network = masked(addr, prefix);
        if network != addr {
            return Err(format!(
                "'{text}' has host bits set; did you mean {network}/{prefix}?"
            ));
        }
        Ok(Cidr::mapped_as_ipv4(network, prefix))
    }

    /// A range inside `::ffff:0:0/96` (IPv4-mapped) is the IPv4 range it
    /// stands for, since mapped clients are matched as IPv4 (module docs).
    fn mapped_as_ipv4(network: IpAddr, prefix: u8) -> Cidr {
        let v4 = match network {
            IpAddr::V6(v6) if prefix >= 96 => v6.to_ipv4_mapped(),
            _ => None,
        };
        match v4 {
            Some(v4) => Cidr {
                network: IpAddr::V4(v4),
                prefix: prefix - 96,
            },
            None => Cidr { network, prefix },
        }
    }

    /// The first address of the range.
    pub fn network(&self) -> IpAddr {
        self.network
    }

    /// The prefix length: 0 to 32 for IPv4, 0 to 128 for IPv6.
    pub fn prefix_len(&self) -> u8 {
        self.prefix
    }

    /// Whether `ip` is in the range. An IPv4-mapped IPv6 address
    /// (`::ffff:10.1.2.3`, as a dual-stack listener reports an IPv4 client)
    /// is the IPv4 address it carries; otherwise an address is only ever in
    /// ranges of its own family.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        let same_family = ip.is_ipv4() == self.network.is_ipv4();
        same_family && masked(ip, self.prefix) == self.network
    }
}

impl fmt::Display for Cidr {
    /// The canonical spelling, always with its prefix: `10.0.0.0/8`,
    /// `192.168.1.7/32`, `2001:db8::/32`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Cidr, String> {
        Cidr::parse(text)
    }
}

/// Address bits in `ip`'s family.
fn bits_of(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

/// `ip` with every bit after the first `prefix` cleared (a prefix wider
/// than the family keeps every bit). `!0 << 32` would overflow a u32,
/// hence the `checked_shl`: a /0 keeps no bits.
fn masked(ip: IpAddr, prefix: u8) -> IpAddr {
    let host_bits = u32::from(bits_of(ip).saturating_sub(prefix));
    match ip {
        IpAddr::V4(v4) => {
            let mask = u32::MAX.checked_shl(host_bits).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from_bits(v4.to_bits() & mask))
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX.checked_shl(host_bits).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & mask))
        }
    }
}

// ---- allow and deny ----

/// A frontend's `allow` and `deny` lists (module docs: the rule).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessList {
    /// If any: only sources in one of these ranges are admitted.
    pub allow: Vec<Cidr>,
    /// Sources in any of these ranges are refused, even if allowed.
    pub deny: Vec<Cidr>,
}

impl AccessList {
    /// Deny wins; if any allow rule exists, only sources it covers are
    /// admitted; with no rules, everyone.
    pub fn admits(&self, ip: IpAddr) -> bool {
        let covers = |rules: &[Cidr]| rules.iter().any(|cidr| cidr.contains(ip));
        !covers(&self.deny) && (self.allow.is_empty() || covers(&self.allow))
    }

    /// No rules at all: everyone is admitted.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }
}

// ---- concurrent connections per source ----

/// How many maps the counts are spread over (module docs: shards).
const SHARDS: usize = 64;

/// A shard's map may keep this many slots with no sources at all: below
/// it, giving memory back is not worth a reallocation.
const MIN_KEPT_CAPACITY: usize = 64;

/// Per-source concurrent-connection limit shared by every event-loop thread
/// (`maxconn-per-source N`; module docs).
pub struct SourceLimits {
    /// Connections one source may have open at once.
    max: u32,
    /// Open connections per source, in the shard its hash picks. A source
    /// with no open connection has no entry.
    shards: [Mutex<HashMap<IpAddr, u32>>; SHARDS],
    /// Picks the shard. Not the maps' own hasher: within one shard every
    /// key would then share its low hash bits, the ones a map uses to
    /// place its keys, and they would all collide.
    shard_hasher: RandomState,
}

/// One place taken under a [`SourceLimits`] for one source; dropping it
/// gives the place back.
#[derive(Debug)]
#[must_use = "dropping the permit gives the place back at once"]
pub struct SourcePermit {
    limits: Arc<SourceLimits>,
    /// Normalised: IPv4 for a mapped address.
    ip: IpAddr,
}

impl SourceLimits {
    /// At most `max_per_source` open connections per source address (0
    /// admits nobody; the configuration asks for at least 1).
    pub fn new(max_per_source: u32) -> Arc<SourceLimits> {
        Arc::new(SourceLimits {
            max: max_per_source,
            shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
            shard_hasher: RandomState::new(),
        })
    }

    /// The ceiling per source.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// Takes one place for `ip`, or `None` if `ip` already has `max` open
    /// connections. The permit gives it back on drop (and removes the entry
    /// when the count reaches 0, so memory is bounded by the sources
    /// currently connected).
    pub fn try_acquire(self: &Arc<Self>, ip: IpAddr) -> Option<SourcePermit> {
        let ip = ip.to_canonical();
        let mut shard = self.shard(ip);
        match shard.entry(ip) {
            Entry::Occupied(mut open) if *open.get() < self.max => *open.get_mut() += 1,
            Entry::Occupied(_) => return None,
            // No entry is made for a refusal: that would leave a 0 behind.
            Entry::Vacant(_) if self.max == 0 => return None,
            Entry::Vacant(slot) => {
                slot.insert(1);
            }
        }
        Some(SourcePermit {
            limits: self.clone(),
            ip,
        })
    }

    /// Open connections from `ip` now (0 for a source never seen).
    pub fn open(&self, ip: IpAddr) -> u32 {
        let ip = ip.to_canonical();
        self.shard(ip).get(&ip).copied().unwrap_or(0)
    }

    /// Sources with at least one open connection now. The shards are read
    /// one after the other, so under traffic this is an estimate.
    pub fn sources(&self) -> usize {
        (0..SHARDS).map(|i| self.lock(i).len()).sum()
    }

    fn release(&self, ip: IpAddr) {
        let mut shard = self.shard(ip);
        if let Entry::Occupied(mut open) = shard.entry(ip) {
            if *open.get() <= 1 {
                open.remove();
            } else {
                *open.get_mut() -= 1;
            }
        }
        // A burst of many sources grows the map; once most have left, give
        // the memory back. Shrinking to twice the size left, and only below
        // a quarter, keeps a map near a boundary from resizing every time.
        let (len, capacity) = (shard.len(), shard.capacity());
        if capacity > MIN_KEPT_CAPACITY && len < capacity / 4 {
            shard.shrink_to((len * 2).max(MIN_KEPT_CAPACITY));
        }
    }

    /// The locked shard that holds `ip` (already normalised).
    fn shard(&self, ip: IpAddr) -> MutexGuard<'_, HashMap<IpAddr, u32>> {
        self.lock((self.shard_hasher.hash_one(ip) % SHARDS as u64) as usize)
    }

    /// A panic while a shard was locked leaves counts that are still
    /// whole numbers (every change is one store), so a poisoned lock is
    /// used as is, as in [`limit`](crate::policy::limit).
    fn lock(&self, index: usize) -> MutexGuard<'_, HashMap<IpAddr, u32>> {
        self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for SourceLimits {
    // Without the counts: printing them would lock every shard.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceLimits")
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

impl SourcePermit {
    /// The source this place was taken for (IPv4 for a mapped address).
    pub fn ip(&self) -> IpAddr {
        self.ip
    }
}

impl Drop for SourcePermit {
    fn drop(&mut self) {
        self.limits.release(self.ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
    use std::thread;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("a test address")
    }

    fn cidr(text: &str) -> Cidr {
        Cidr::parse(text).expect("a test range")
    }

    fn error(text: &str) -> String {
        Cidr::parse(text).expect_err("a bad range")
    }

    // ---- Cidr::parse ----

    #[test]
    fn parses_ranges_and_single_addresses() {
        for (text, shown, prefix) in [
            ("10.0.0.0/8", "10.0.0.0/8", 8),
            ("192.168.1.7", "192.168.1.7/32", 32),
            ("192.168.1.7/32", "192.168.1.7/32", 32),
            ("0.0.0.0/0", "0.0.0.0/0", 0),
            ("2001:db8::/32", "2001:db8::/32", 32),
            ("2001:0DB8:0000::/32", "2001:db8::/32", 32),
            ("::1", "::1/128", 128),
            ("::/0", "::/0", 0),
            ("fe80::/10", "fe80::/10", 10),
            // Leading zeros in the prefix are still a number.
            ("10.0.0.0/08", "10.0.0.0/8", 8),
        ] {
            let c = cidr(text);
            assert_eq!(c.to_string(), shown, "{text}");
            assert_eq!(c.prefix_len(), prefix, "{text}");
            // The canonical spelling reads back as the same range.
            assert_eq!(cidr(shown), c, "{text}");
            assert_eq!(shown.parse::<Cidr>(), Ok(c), "{text}");
        }
    }

    #[test]
    fn a_mapped_range_is_read_as_the_ipv4_range_it_stands_for() {
        assert_eq!(cidr("::ffff:10.0.0.0/104"), cidr("10.0.0.0/8"));
        assert_eq!(cidr("::ffff:10.1.2.3"), cidr("10.1.2.3/32"));
        assert_eq!(cidr("::ffff:0.0.0.0/96"), cidr("0.0.0.0/0"));
        // Wider than the mapped block: an IPv6 range, left as written.
        assert_eq!(cidr("::/80").to_string(), "::/80");
        assert_eq!(cidr("::fffe:0:0/95").to_string(), "::fffe:0:0/95");
    }

    #[test]
    fn bad_ranges_say_what_is_wrong_and_what_to_write() {
        let examples = "write an address (10.0.0.1, 2001:db8::1) \
                        or a range (10.0.0.0/8, 2001:db8::/32)";
        for (text, message) in [
            (
                "10.0.0.0/33",
                "prefix length 33 is too long for IPv4 (at most 32)".to_string(),
            ),
            (
                "2001:db8::/129",
                "prefix length 129 is too long for IPv6 (at most 128)".to_string(),
            ),
            (
                "10.0.0.0/99999999999",
                "prefix length 99999999999 is too long for IPv4 (at most 32)".to_string(),
            ),
            (
                "10.0.0.1/8",
                "'10.0.0.1/8' has host bits set; did you mean 10.0.0.0/8?".to_string(),
            ),
            (
                "2001:db8::1/32",
                "'2001:db8::1/32' has host bits set; did you mean 2001:db8::/32?".to_string(),
            ),
            (
                "192.168.1.7/24",
                "'192.168.1.7/24' has host bits set; did you mean 192.168.1.0/24?".to_string(),
            ),
            (
                "10.0.0/8",
                format!("'10.0.0/8' is not an IP address; {examples}"),
            ),
            (
                "10.0.0.256",
                format!("'10.0.0.256' is not an IP address; {examples}"),
            ),
            // A leading zero could be octal to some tools: refused.
            (
                "010.0.0.0/8",
                format!("'010.0.0.0/8' is not an IP address; {examples}"),
            ),
            (
                "localhost",
                format!("'localhost' is not an IP address; {examples}"),
            ),
            (
                " 10.0.0.0/8",
                format!("' 10.0.0.0/8' is not an IP address; {examples}"),
            ),
            ("/8", format!("'/8' is not an IP address; {examples}")),
            ("", format!("an empty address range; {examples}")),
            (
                "[::1]",
                "'[::1]' is not an IP address; write IPv6 without brackets: ::1".to_string(),
            ),
            (
                "[2001:db8::]/32",
                "'[2001:db8::]/32' is not an IP address; write IPv6 without brackets: \
                 2001:db8::/32"
                    .to_string(),
            ),
            (
                "10.0.0.0/",
                "'10.0.0.0/' has no prefix length after the '/'; write 10.0.0.0/32 \
                 (or just 10.0.0.0) for one address, or a shorter prefix for a range"
                    .to_string(),
            ),
            (
                "10.0.0.0/x",
                "'10.0.0.0/x': the prefix length 'x' is not a number of bits; \
                 write e.g. 10.0.0.0/8"
                    .to_string(),
            ),
            (
                "10.0.0.0/+8",
                "'10.0.0.0/+8': the prefix length '+8' is not a number of bits; \
                 write e.g. 10.0.0.0/8"
                    .to_string(),
            ),
            (
                "10.0.0.0/8/8",
                "'10.0.0.0/8/8': the prefix length '8/8' is not a number of bits; \
                 write e.g. 10.0.0.0/8"
                    .to_string(),
            ),
            (
                "::/-1",
                "'::/-1': the prefix length '-1' is not a number of bits; \
                 write e.g. 2001:db8::/32"
                    .to_string(),
            ),
        ] {
            assert_eq!(error(text), message, "{text:?}");
        }
    }

    // ---- Cidr::contains ----

    #[test]
    fn contains_the_first_and_last_address_and_nothing_outside() {
        let c = cidr("10.0.0.0/8");
        assert!(c.contains(ip("10.0.0.0")));
        assert!(c.contains(ip("10.255.255.255")));
        assert!(!c.contains(ip("9.255.255.255")));
        assert!(!c.contains(ip("11.0.0.0")));

        let c = cidr("192.168.1.64/26");
        assert!(!c.contains(ip("192.168.1.63")));
        assert!(c.contains(ip("192.168.1.64")));
        assert!(c.contains(ip("192.168.1.127")));
        assert!(!c.contains(ip("192.168.1.128")));

        let c = cidr("2001:db8::/32");
        assert!(c.contains(ip("2001:db8::")));
        assert!(c.contains(ip("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff")));
        assert!(!c.contains(ip("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff")));
        assert!(!c.contains(ip("2001:db9::")));
    }

    #[test]
    fn single_addresses_and_whole_families() {
        let one = cidr("192.168.1.7");
        assert!(one.contains(ip("192.168.1.7")));
        assert!(!one.contains(ip("192.168.1.6")));
        assert!(!one.contains(ip("192.168.1.8")));

        let one6 = cidr("::1");
        assert!(one6.contains(ip("::1")));
        assert!(!one6.contains(ip("::")));
        assert!(!one6.contains(ip("::2")));

        let all4 = cidr("0.0.0.0/0");
        assert!(all4.contains(ip("0.0.0.0")));
        assert!(all4.contains(ip("255.255.255.255")));
        assert!(!all4.contains(ip("::1")));

        let all6 = cidr("::/0");
        assert!(all6.contains(ip("::")));
        assert!(all6.contains(ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")));
        // Each client in its own family: IPv4 clients are not in ::/0.
        assert!(!all6.contains(ip("10.0.0.1")));
        assert!(!all6.contains(ip("::ffff:10.0.0.1")));
    }

    #[test]
    fn a_mapped_client_is_its_ipv4_address() {
        let c = cidr("10.0.0.0/8");
        assert!(c.contains(ip("::ffff:10.1.2.3")));
        assert!(c.contains(ip("::ffff:10.0.0.0")));
        assert!(c.contains(ip("::ffff:10.255.255.255")));
        assert!(!c.contains(ip("::ffff:11.0.0.0")));
        assert!(cidr("10.1.2.3").contains(ip("::ffff:10.1.2.3")));
        // Only the mapped form: the old "IPv4-compatible" ::10.1.2.3 is IPv6.
        assert!(!c.contains(ip("::10.1.2.3")));
        // Written mapped, the rule matches either spelling of the client.
        let mapped = cidr("::ffff:10.0.0.0/104");
        assert!(mapped.contains(ip("10.9.9.9")));
        assert!(mapped.contains(ip("::ffff:10.9.9.9")));
    }

    // ---- AccessList ----

    #[test]
    fn access_list_precedence() {
        let list = |allow: &[&str], deny: &[&str]| AccessList {
            allow: allow.iter().map(|t| cidr(t)).collect(),
            deny: deny.iter().map(|t| cidr(t)).collect(),
        };
        let none = list(&[], &[]);
        let only_deny = list(&[], &["10.6.0.0/16", "2001:db8::/32"]);
        let only_allow = list(&["10.0.0.0/8", "::1"], &[]);
        // Overlapping: a denied hole in an allowed range.
        let both = list(&["10.0.0.0/8"], &["10.6.0.0/16"]);
        // Deny covering more than allow: the allowed part is still refused.
        let deny_wider = list(&["10.6.0.0/16"], &["10.0.0.0/8"]);

        let table: &[(&AccessList, &str, bool)] = &[
            (&none, "10.6.6.6", true),
            (&none, "2001:db8::1", true),
            (&only_deny, "10.6.6.6", false),
            (&only_deny, "::ffff:10.6.6.6", false),
            (&only_deny, "2001:db8::1", false),
            (&only_deny, "10.7.0.1", true),
            (&only_deny, "::1", true),
            (&only_allow, "10.7.0.1", true),
            (&only_allow, "::ffff:10.7.0.1", true),
            (&only_allow, "::1", true),
            (&only_allow, "192.0.2.1", false),
            (&only_allow, "::2", false),
            (&both, "10.7.0.1", true),
            (&both, "10.6.6.6", false),
            (&both, "::ffff:10.6.6.6", false),
            (&both, "192.0.2.1", false),
            (&deny_wider, "10.6.6.6", false),
            (&deny_wider, "10.7.0.1", false),
            (&deny_wider, "192.0.2.1", false),
        ];
        for &(acl, client, admitted) in table {
            assert_eq!(acl.admits(ip(client)), admitted, "{client} with {acl:?}");
        }
        assert!(none.is_empty());
        assert!(!only_deny.is_empty());
        assert_eq!(AccessList::default(), none);
    }

    // ---- SourceLimits ----

    #[test]
    fn a_source_gets_exactly_its_limit() {
        let limits = SourceLimits::new(3);
        let client = ip("192.0.2.1");
        let permits: Vec<_> = (0..3)
            .map(|_| limits.try_acquire(client).expect("a place under the limit"))
            .collect();
        assert_eq!(limits.open(client), 3);
        assert!(limits.try_acquire(client).is_none());
        assert!(limits.try_acquire(client).is_none());
        // Refusals take nothing.
        assert_eq!(limits.open(client), 3);
        drop(permits);
        assert_eq!(limits.open(client), 0);
    }

    #[test]
    fn dropping_a_permit_gives_its_place_back() {
        let limits = SourceLimits::new(1);
        let client = ip("2001:db8::7");
        let permit = limits.try_acquire(client).expect("the only place");
        assert_eq!(permit.ip(), client);
        assert!(limits.try_acquire(client).is_none());
        drop(permit);
        assert_eq!(limits.open(client), 0);
        let again = limits.try_acquire(client);
        assert!(again.is_some());
    }

    #[test]
    fn entries_are_removed_at_zero_and_memory_is_given_back() {
        let limits = SourceLimits::new(2);
        let permits: Vec<_> = (0..10_000u32)
            .map(|n| {
                let client = IpAddr::V4(Ipv4Addr::from_bits(0x0a00_0000 + n));
                limits.try_acquire(client).expect("a new source")
            })
            .collect();
        assert_eq!(limits.sources(), 10_000);
        drop(permits);
        assert_eq!(limits.sources(), 0);
        for i in 0..SHARDS {
            let capacity = limits.lock(i).capacity();
            assert!(
                capacity <= 2 * MIN_KEPT_CAPACITY,
                "shard {i} kept {capacity} slots"
            );
        }
        // A refusal leaves no entry behind either.
        let nobody = SourceLimits::new(0);
        assert!(nobody.try_acquire(ip("192.0.2.1")).is_none());
        assert_eq!(nobody.sources(), 0);
    }

    #[test]
    fn sources_are_independent_and_mapped_spellings_are_one_source() {
        let limits = SourceLimits::new(2);
        let a = ip("192.0.2.1");
        let a_mapped = ip("::ffff:192.0.2.1");
        let b = ip("192.0.2.2");
        let c = ip("2001:db8::1");
        let _a1 = limits.try_acquire(a).expect("a's first");
        let a2 = limits
            .try_acquire(a_mapped)
            .expect("a's second, spelled mapped");
        assert_eq!(a2.ip(), a);
        assert!(limits.try_acquire(a).is_none());
        assert!(limits.try_acquire(a_mapped).is_none());
        assert_eq!(limits.open(a_mapped), 2);
        // a at its limit does not touch b or c.
        let _b = limits.try_acquire(b).expect("b's first");
        let _c1 = limits.try_acquire(c).expect("c's first");
        let _c2 = limits.try_acquire(c).expect("c's second");
        assert!(limits.try_acquire(c).is_none());
        assert_eq!((limits.open(a), limits.open(b), limits.open(c)), (2, 1, 2));
        assert_eq!(limits.sources(), 3);
        drop(a2);
        assert_eq!(limits.open(a), 1);
        assert_eq!(limits.open(c), 2);
    }

    #[test]
    fn many_threads_on_one_source_never_exceed_the_limit() {
        const MAX: u32 = 3;
        const PER_THREAD: u32 = 2_000;
        // Ample for PER_THREAD successes; a leaked place would use them up
        // and fail the test instead of hanging it.
        const ATTEMPTS: u32 = 10_000_000;
        let limits = SourceLimits::new(MAX);
        let holding = AtomicU32::new(0);
        let peak = AtomicU32::new(0);
        let done: Vec<u32> = thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|t| {
                    let (limits, holding, peak) = (&limits, &holding, &peak);
                    // Half the threads see the client as a dual-stack
                    // listener would: one source all the same.
                    let client = ip(if t % 2 == 0 {
                        "192.0.2.1"
                    } else {
                        "::ffff:192.0.2.1"
                    });
                    s.spawn(move || {
                        let mut done = 0;
                        for _ in 0..ATTEMPTS {
                            if done == PER_THREAD {
                                break;
                            }
                            let Some(permit) = limits.try_acquire(client) else {
                                thread::yield_now();
                                continue;
                            };
                            let now = holding.fetch_add(1, SeqCst) + 1;
                            peak.fetch_max(now, SeqCst);
                            peak.fetch_max(limits.open(client), SeqCst);
                            thread::yield_now();
                            holding.fetch_sub(1, SeqCst);
                            drop(permit);
                            done += 1;
                        }
                        done
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("a worker thread"))
                .collect()
        });
        assert_eq!(done, vec![PER_THREAD; 4]);
        let peak = peak.load(SeqCst);
        assert!((1..=MAX).contains(&peak), "peak {peak}");
        assert_eq!(limits.open(ip("192.0.2.1")), 0);
        assert_eq!(limits.sources(), 0);
    }
}
