//! Consistent hashing for `balance source`: a Maglev lookup table, so that
//! a client keeps its server and few clients move when a server leaves.
//!
//! The same client address should reach the same server (a cache stays
//! warm, a session survives a reconnect), and when a server leaves, clients
//! of *other* servers should not move. `hash(client) % servers` keeps the
//! first promise and breaks the second: going from 10 to 9 servers changes
//! the answer for about 9 clients in 10. Maglev (Eisenbud et al., "Maglev: A
//! Fast and Reliable Software Network Load Balancer", NSDI 2016) keeps both
//! promises with a lookup table of M slots, M a prime much larger than the
//! number of servers (65,537 here):
//!
//! 1. Each server gets its own order in which it would like to take the
//!    slots, a *permutation* of `0..M`, from two hashes of its identity
//!    (its [`Key`]: its address, or its host name for one written so):
//!    `offset = h1 % M`, `skip = h2 % (M - 1) + 1`, and its j-th favourite
//!    slot is `(offset + j * skip) % M`. Because M is prime and `0 < skip <
//!    M`, this visits every slot exactly once.
//! 2. The servers take turns, round-robin: each takes its next favourite
//!    slot that is still empty, until the table is full.
//! 3. A client goes to the server in slot `hash(client) % M`.
//!
//! With M = 7 and three servers:
//!
//! ```text
//!   preferences    a: 3 0 4 1 5 2 6     b: 0 2 4 6 1 3 5     c: 3 4 5 6 0 1 2
//!   turn a: 3      turn b: 0            turn c: 3 taken, 4
//!   turn a: 0 taken, 4 taken, 1         turn b: 2           turn c: 5
//!   turn a: 5 taken, 2 taken, 6  (full)
//!
//!   slot      0  1  2  3  4  5  6
//!   server    b  a  b  a  c  c  a
//! ```
//!
//! Every server gets almost the same number of slots (turns alternate), and
//! the table depends only on the set of servers, not on their order. When a
//! server leaves, the table is rebuilt: each remaining server walks the same
//! preference list as before, so it mostly takes the same slots again, plus
//! some of the slots the leaver freed. Clients on the leaver must move;
//! nearly all others stay (the paper and the tests here measure it).
//!
//! Weights make the turns uneven: a server of weight 3 takes three slots per
//! round where one of weight 1 takes one (with weight 1 for everyone, this is
//! exactly the paper's algorithm). The table covers the servers *in
//! rotation* (up, weight above 0) and is rebuilt only when that set changes
//! ([`Balancer::set_up`](crate::policy::balance::Balancer::set_up)). A server that a pick merely avoids (full at its
//! maxconn, or already tried) stays in the table, since that comes and goes
//! with every connection; instead, a client whose slot points at an avoided
//! server walks on to the next slots until one points at an available
//! server. Each tier (normal, backup) has its own table.
//!
//! The hash is FNV-1a 64 (a byte at a time: `h ^= byte; h *= prime`),
//! followed by MurmurHash3's 64-bit finalizer, which mixes every input bit
//! into the low bits that `% M` keeps (FNV-1a alone leaves similar inputs,
//! like consecutive addresses, with similar low bits). Both are fixed,
//! published functions, so the table, and so every client's server, is the
//! same across runs, processes and Rust versions (`std`'s `DefaultHasher`
//! promises none of that).

use std::net::{IpAddr, SocketAddr};

/// The table size a balancer uses: a prime, and far more slots than
/// servers, so that each server's share is close to exact (the paper uses
/// 65,537 too).
pub const TABLE_SIZE: usize = 65_537;

/// The lookup table of one tier: slot `i` holds the index of the server
/// that owns it (module docs).
#[derive(Debug, Clone, Default)]
pub struct Table {
    slots: Vec<u32>,
}

impl Table {
    /// A table of `size` slots (a prime, at least the number of servers)
    /// shared out among `servers`: each an index, a key and a weight.
    /// Empty when there are no servers.
    pub fn build(servers: impl IntoIterator<Item = (usize, Key, u32)>, size: usize) -> Table {
        let members = servers
            .into_iter()
            .map(|(index, key, weight)| Member::new(index, key, weight, size))
            .collect();
        Table {
            slots: fill(members, size),
        }
    }

    /// The server for `client`: the owner of its slot, or, if `available`
    /// refuses that one, of the next slots in turn. `None` for an empty
    /// table, or if `available` refuses every owner.
    pub fn lookup(&self, client: IpAddr, available: impl Fn(usize) -> bool) -> Option<usize> {
        let len = self.slots.len();
        if len == 0 {
            return None;
        }
        let start = (hash(&ip_bytes(client)) % len as u64) as usize;
        // Every available server of the tier owns at least one slot, so this
        // walk finds one within len steps.
        (0..len)
            .map(|step| self.slots[(start + step) % len] as usize)
            .find(|&i| available(i))
    }
}

/// What a server's preference list is drawn from: two different hashes of
/// its identity (the same bytes with a different last byte), taken once.
/// The identity, not the index, so that the table does not depend on the
/// order of the configuration; and not where the server is now, for one
/// written as a host name, so that a new answer of the resolver moves no
/// client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    offset: u64,
    skip: u64,
}

impl Key {
    /// The key of a server known by its address: its IP's bytes, then its
    /// port's.
    pub fn of_addr(addr: SocketAddr) -> Key {
        let mut bytes = ip_bytes(addr.ip());
        bytes.extend_from_slice(&addr.port().to_be_bytes());
        Key::of_bytes(&bytes)
    }

    /// The key of a server known by other bytes (a host name and its port,
    /// as written).
    pub fn of_bytes(bytes: &[u8]) -> Key {
        let salted = |salt: u8| {
            let mut bytes = bytes.to_vec();
            bytes.push(salt);
            hash(&bytes)
        };
        Key {
            offset: salted(0),
            skip: salted(1),
        }
    }
}

/// A server taking part in a Maglev table, and where it is in its own
/// preference list.
#[derive(Debug)]
struct Member {
    index: u32,
    weight: u32,
    offset: u64,
    skip: u64,
    /// How many of its preferences it has tried so far.
    tried: u64,
}

impl Member {
    fn new(index: usize, key: Key, weight: u32, size: usize) -> Member {
        let size = size as u64;
        Member {
            index: index as u32, // fits: the balancer checks its server count
            weight,
            offset: key.offset % size,
            // In 1..size: never 0, which would stay on one slot forever.
            skip: key.skip % (size - 1) + 1,
            tried: 0,
        }
    }

    /// Its next preferred slot; each slot comes up exactly once in `size`
    /// calls, because `size` is prime and `skip` is not a multiple of it.
    fn next_preference(&mut self, size: u64) -> usize {
        let slot = (self.offset + self.tried * self.skip) % size;
        self.tried += 1;
        slot as usize
    }
}

/// An empty Maglev slot.
const EMPTY: u32 = u32::MAX;

/// Fills a table of `size` slots: the members take turns, each taking its
/// next preferred empty slot, `weight` slots per turn, until it is full.
/// Empty if there are no members.
fn fill(mut members: Vec<Member>, size: usize) -> Vec<u32> {
    if members.is_empty() {
        return Vec::new();
    }
    let mut table = vec![EMPTY; size];
    let mut filled = 0;
    loop {
        for member in &mut members {
            for _ in 0..member.weight {
                take_next_empty(member, &mut table);
                filled += 1;
                if filled == size {
                    return table;
                }
            }
        }
    }
}

/// `member` claims the first slot in its preference order still empty. One
/// exists: the caller stops as soon as the table is full.
fn take_next_empty(member: &mut Member, table: &mut [u32]) {
    loop {
        let slot = member.next_preference(table.len() as u64);
        if table[slot] == EMPTY {
            table[slot] = member.index;
            return;
        }
    }
}

// ---- hashing ----

/// The bytes of an address, with IPv4-mapped IPv6 (`::ffff:a.b.c.d`, what a
/// dual-stack listener reports for an IPv4 client) taken as the IPv4 address
/// it is, so both spellings of one client hash alike.
fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    }
}

/// FNV-1a 64 followed by MurmurHash3's fmix64 (module docs: why both).
fn hash(bytes: &[u8]) -> u64 {
    fmix64(fnv1a64(bytes))
}

/// FNV-1a, 64 bits: for each byte, xor it in, then multiply by the FNV prime.
fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET_BASIS, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

/// MurmurHash3's 64-bit finalizer: every input bit affects every output bit.
pub fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// Whether `n` is prime: a table size must be, for every preference
/// list to visit every slot.
pub fn is_prime(n: usize) -> bool {
    n >= 2 && (2..).take_while(|d| d * d <= n).all(|d| n % d != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(last: u8) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, last], 80))
    }

    #[test]
    fn the_example_of_the_docs_fills_every_slot_evenly() {
        let table = Table::build((0..3).map(|i| (i, Key::of_addr(addr(i as u8 + 1)), 1)), 7);
        let mut counts = [0; 3];
        for &slot in &table.slots {
            counts[slot as usize] += 1;
        }
        assert_eq!(counts.iter().sum::<usize>(), 7);
        assert!(counts.iter().all(|&c| (2..=3).contains(&c)), "{counts:?}");
    }

    #[test]
    fn a_preference_list_visits_every_slot_once() {
        let mut member = Member::new(0, Key::of_addr(addr(1)), 1, 13);
        let mut slots: Vec<usize> = (0..13).map(|_| member.next_preference(13)).collect();
        slots.sort_unstable();
        assert!(slots.into_iter().eq(0..13));
    }

    #[test]
    fn an_empty_table_has_no_server() {
        let table = Table::build(std::iter::empty(), 7);
        assert_eq!(table.lookup(IpAddr::from([192, 0, 2, 1]), |_| true), None);
    }

    #[test]
    fn fnv1a64_matches_the_published_test_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn primes() {
        let small: Vec<usize> = (0..30).filter(|&n| is_prime(n)).collect();
        assert_eq!(small, [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]);
        assert!(is_prime(TABLE_SIZE));
    }
}
