//! TCP segments sent by the whole machine, from the kernel's own counter
//! (`Tcp: ... OutSegs` in /proc/net/snmp): taken before and after a
//! measurement, the difference over the connections made is what each
//! connection cost the network stack. Every run here is on loopback, where
//! each segment is counted once, by its sender: the load client, the proxy
//! and the backends together. Direct is the reference (a connection and its
//! close, about 10); a proxy doubles the connections, and anything above 20
//! is segments it could have merged.

use std::fs;
use std::io;

/// The machine's count of TCP segments sent so far.
pub fn sent() -> io::Result<u64> {
    out_segs(&fs::read_to_string("/proc/net/snmp")?).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "/proc/net/snmp: no Tcp OutSegs field",
        )
    })
}

/// `OutSegs` from the text of /proc/net/snmp: a `Tcp:` line of names, then
/// a `Tcp:` line of values in the same order.
fn out_segs(snmp: &str) -> Option<u64> {
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let names = tcp.next()?;
    let values = tcp.next()?;
    let index = names.split_whitespace().position(|n| n == "OutSegs")?;
    values.split_whitespace().nth(index)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_segs_is_read_by_name_from_the_tcp_lines() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Tcp: RtoAlgorithm ActiveOpens InSegs OutSegs RetransSegs\n\
                    Tcp: 1 200 5000 4711 3\n\
                    Udp: InDatagrams\nUdp: 9\n";
        assert_eq!(out_segs(snmp), Some(4711));
        assert_eq!(out_segs("Tcp: OutSegs\n"), None, "no value line");
        assert_eq!(out_segs("Tcp: InSegs\nTcp: 5\n"), None, "no such field");
    }

    #[test]
    fn this_machine_counts_segments() {
        assert!(sent().is_ok(), "Linux has /proc/net/snmp");
    }
}
