//! Address ranges: `10.0.0.0/8`, `2001:db8::/32`, a bare address as a
//! range of one. What `allow`, `deny` and `accept-proxy` are written in.
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
//! # One client, one address: IPv4-mapped IPv6
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

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

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
        if text.is_empty() {
            return Err(format!("an empty address range; {EXAMPLES}"));
        }
        let (addr_text, prefix_text) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr = parse_address(text, addr_text, prefix_text)?;
        let prefix = match prefix_text {
            None => bits_of(addr),
            Some(p) => parse_prefix(text, addr, p)?,
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

/// What a range may look like, for the errors.
const EXAMPLES: &str =
    "write an address (10.0.0.1, 2001:db8::1) or a range (10.0.0.0/8, 2001:db8::/32)";

/// The address part of the range `text`.
fn parse_address(text: &str, addr_text: &str, prefix_text: Option<&str>) -> Result<IpAddr, String> {
    if let Ok(addr) = addr_text.parse::<IpAddr>() {
        return Ok(addr);
    }
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
    Err(format!("'{text}' is not an IP address; {EXAMPLES}"))
}

/// The prefix length `p` after the `/` of the range `text` on `addr`.
fn parse_prefix(text: &str, addr: IpAddr, p: &str) -> Result<u8, String> {
    let bits = bits_of(addr);
    if p.is_empty() {
        return Err(format!(
            "'{text}' has no prefix length after the '/'; write {addr}/{bits} \
             (or just {addr}) for one address, or a shorter prefix for a range"
        ));
    }
    // Digits only: `u32::from_str` would also take "+8".
    if !p.bytes().all(|b| b.is_ascii_digit()) {
        let example = match addr {
            IpAddr::V4(_) => "10.0.0.0/8",
            IpAddr::V6(_) => "2001:db8::/32",
        };
        return Err(format!(
            "'{text}': the prefix length '{p}' is not a number of bits; write e.g. {example}"
        ));
    }
    match p.parse::<u32>() {
        Ok(n) if n <= u32::from(bits) => Ok(n as u8),
        // Too many digits for a u32 is too long as well.
        _ => {
            let family = match addr {
                IpAddr::V4(_) => "IPv4",
                IpAddr::V6(_) => "IPv6",
            };
            Err(format!(
                "prefix length {p} is too long for {family} (at most {bits})"
            ))
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
