//! One relaying connection on its way from the old process to the new one:
//! what travels beside its two sockets so that the new process carries on
//! its relay where the old one stopped, and, at its close, writes the
//! access-log line the connection would have had without the upgrade.
//!
//! ```text
//!   conn 7 frontend=web group=web server=127.0.0.1:9001 name=db1 client=127.0.0.1:40312
//!        accepted=1764651234123456 age=1503000 wait=12 connect=340 retries=0 early=0
//!        spliced=0 sent=1 destination=- source=- log-id=88 sni=- moves=0
//!        machine=01020000... up=5 down=0
//! ```
//!
//! One line a connection, `key=value` after its number, every key present
//! (`-` for none); times in microseconds (`accepted` since the Unix epoch,
//! the others as durations: `age` since it was accepted, so that no clock
//! of the old process is needed to read them). `machine` is the relay
//! machine's snapshot in hex (`conn/snapshot.rs`), `up` and `down` how many
//! bytes each direction holds, which follow in `data` messages (wire.rs).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use crate::conn::snapshot;

/// What travels with one connection, besides its sockets and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parcel {
    /// Its number in this handover (the old process's choice).
    pub id: u64,
    /// The frontend that accepted it.
    pub frontend: String,
    /// The group its backend was chosen from.
    pub group: String,
    /// The address of the backend it is connected to (for one written
    /// with a host name, where its name pointed when it connected).
    pub server: SocketAddr,
    /// That backend's name (its address as written for a line without
    /// one): with the address, what finds it again among servers that share
    /// an address.
    pub name: String,
    /// The client (the one its PROXY header named, if it sent one).
    pub client: SocketAddr,
    /// When it was accepted, in microseconds since the Unix epoch.
    pub accepted_unix_us: u64,
    /// How long it has been open.
    pub age: Duration,
    /// Time it waited for places (`%Tw`).
    pub wait: Option<Duration>,
    /// Time to connect its backend (`%Tc`).
    pub connect: Option<Duration>,
    /// Connects tried again elsewhere.
    pub retries: u32,
    /// Client bytes sent to the backend before the relay began.
    pub early: u64,
    /// Bytes moved by splice so far.
    pub spliced: u64,
    /// The client sent a byte (what `dontlognull` asks).
    pub client_sent: bool,
    /// Where the client connected to, as its PROXY header said.
    pub destination: Option<SocketAddr>,
    /// Where the backend was connected from, if the log format wanted it.
    pub backend_source: Option<SocketAddr>,
    /// Its number in the access log (`%ID`).
    pub log_id: u64,
    /// The server name of its ClientHello.
    pub sni: Option<String>,
    /// How many upgrades moved it before this one.
    pub moves: u32,
    /// Its relay machine (`snapshot::write`).
    pub machine: [u8; snapshot::LEN],
    /// How many bytes each direction holds (the client's first).
    pub held: [usize; 2],
}

/// The keys of a line, in order.
const KEYS: [&str; 22] = [
    "frontend",
    "group",
    "server",
    "name",
    "client",
    "accepted",
    "age",
    "wait",
    "connect",
    "retries",
    "early",
    "spliced",
    "sent",
    "destination",
    "source",
    "log-id",
    "sni",
    "moves",
    "machine",
    "up",
    "down",
    // A key for what comes next; refused if present: a reader refuses
    // what it does not know rather than guess.
    "",
];

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn or_dash<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_string(), |v| v.to_string())
}

impl Parcel {
    /// Its line (module docs), without the newline.
    pub fn line(&self) -> String {
        let mut hex = String::with_capacity(2 * snapshot::LEN);
        for byte in self.machine {
            let _ = write!(hex, "{byte:02x}");
        }
        let values = [
            self.frontend.clone(),
            self.group.clone(),
            self.server.to_string(),
            self.name.clone(),
            self.client.to_string(),
            self.accepted_unix_us.to_string(),
            micros(self.age).to_string(),
            or_dash(self.wait.map(micros)),
            or_dash(self.connect.map(micros)),
            self.retries.to_string(),
            self.early.to_string(),
            self.spliced.to_string(),
            u8::from(self.client_sent).to_string(),
            or_dash(self.destination),
            or_dash(self.backend_source),
            self.log_id.to_string(),
            or_dash(self.sni.as_deref()),
            self.moves.to_string(),
            hex,
            self.held[0].to_string(),
            self.held[1].to_string(),
        ];
        let mut line = format!("conn {}", self.id);
        for (key, value) in KEYS.iter().zip(values) {
            let _ = write!(line, " {key}={value}");
        }
        line
    }

    /// Reads a line back; the error says which key was wrong, and how.
    pub fn parse(line: &str) -> Result<Parcel, String> {
        let mut words = line.split(' ');
        let (Some("conn"), Some(id)) = (words.next(), words.next()) else {
            return Err("not a connection (conn ID key=value ...)".into());
        };
        let id = id.parse().map_err(|_| format!("{id:?} is not a number"))?;
        let values = values(words)?;
        let v = |i: usize| values[i];
        Ok(Parcel {
            id,
            frontend: word(v(0))?,
            group: word(v(1))?,
            server: parse(KEYS[2], v(2))?,
            name: word(v(3))?,
            client: parse(KEYS[4], v(4))?,
            accepted_unix_us: parse(KEYS[5], v(5))?,
            age: Duration::from_micros(parse(KEYS[6], v(6))?),
            wait: optional(KEYS[7], v(7))?.map(Duration::from_micros),
            connect: optional(KEYS[8], v(8))?.map(Duration::from_micros),
            retries: parse(KEYS[9], v(9))?,
            early: parse(KEYS[10], v(10))?,
            spliced: parse(KEYS[11], v(11))?,
            client_sent: parse::<u8>(KEYS[12], v(12))? == 1,
            destination: optional(KEYS[13], v(13))?,
            backend_source: optional(KEYS[14], v(14))?,
            log_id: parse(KEYS[15], v(15))?,
            sni: optional(KEYS[16], v(16))?,
            moves: parse(KEYS[17], v(17))?,
            machine: unhex(v(18))?,
            held: [parse(KEYS[19], v(19))?, parse(KEYS[20], v(20))?],
        })
    }
}

/// Each key's value, in [`KEYS`]' order: every key once, nothing else.
fn values<'a>(words: impl Iterator<Item = &'a str>) -> Result<Vec<&'a str>, String> {
    let mut values = Vec::with_capacity(KEYS.len() - 1);
    for (i, word) in words.enumerate() {
        let expected = KEYS.get(i).copied().unwrap_or("");
        match word.split_once('=') {
            Some((key, value)) if key == expected && !key.is_empty() => values.push(value),
            _ if expected.is_empty() => return Err(format!("{word:?} after the last key")),
            _ => return Err(format!("{word:?} where {expected}= was due")),
        }
    }
    match values.len() == KEYS.len() - 1 {
        true => Ok(values),
        false => Err(format!("{}= is missing", KEYS[values.len()])),
    }
}

fn word(value: &str) -> Result<String, String> {
    match value.is_empty() {
        true => Err("an empty name".into()),
        false => Ok(value.to_string()),
    }
}

fn parse<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("{key}={value:?} is not what it should be"))
}

fn optional<T: std::str::FromStr>(key: &str, value: &str) -> Result<Option<T>, String> {
    match value {
        "-" => Ok(None),
        value => parse(key, value).map(Some),
    }
}

fn unhex(text: &str) -> Result<[u8; snapshot::LEN], String> {
    let mut out = [0u8; snapshot::LEN];
    if text.len() != 2 * out.len() {
        return Err(format!(
            "machine= is {} hex digits, not {}",
            text.len(),
            2 * out.len()
        ));
    }
    for (i, byte) in out.iter_mut().enumerate() {
        let pair = text.get(2 * i..2 * i + 2).ok_or("machine= is not hex")?;
        *byte = u8::from_str_radix(pair, 16).map_err(|_| format!("machine= has {pair:?}"))?;
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A parcel with every field set.
    pub(crate) fn sample() -> Parcel {
        Parcel {
            id: 7,
            frontend: "web".into(),
            group: "api".into(),
            server: "127.0.0.1:9001".parse().expect("an address"),
            name: "db1".into(),
            client: "[::1]:40312".parse().expect("an address"),
            accepted_unix_us: 1_764_651_234_123_456,
            age: Duration::from_micros(1_503_000),
            wait: Some(Duration::from_micros(12)),
            connect: None,
            retries: 1,
            early: 42,
            spliced: 65_536,
            client_sent: true,
            destination: Some("10.0.0.1:443".parse().expect("an address")),
            backend_source: None,
            log_id: 88,
            sni: Some("api.example".into()),
            moves: 2,
            machine: [0xab; snapshot::LEN],
            held: [5, 70_000],
        }
    }

    #[test]
    fn a_parcel_reads_back_as_it_was_written() {
        let parcel = sample();
        let line = parcel.line();
        assert!(line.starts_with("conn 7 frontend=web group=api "), "{line}");
        assert_eq!(Parcel::parse(&line), Ok(parcel));
    }

    #[test]
    fn a_line_that_is_not_one_is_refused_with_the_key() {
        let line = sample().line();
        let wrong = |from: &str, to: &str| Parcel::parse(&line.replace(from, to)).expect_err(to);
        assert!(wrong("server=127.0.0.1:9001", "server=nowhere").contains("server="));
        assert!(wrong(" group=api", "").contains("group= was due"));
        assert!(wrong("down=70000", "down=70000 later=1").contains("after the last key"));
        assert!(wrong("machine=abab", "machine=zzab").contains("machine="));
        assert!(Parcel::parse("hello 1 2").is_err());
        let cut = &line[..line.find(" up=").expect("up")];
        assert!(
            Parcel::parse(cut)
                .expect_err("cut")
                .contains("up= is missing")
        );
    }
}
