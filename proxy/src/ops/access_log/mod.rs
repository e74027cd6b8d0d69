//! The access log: one line per finished connection, in the layout of
//! HAProxy's `option tcplog`, so that tools written for HAProxy's logs
//! (and people used to reading them) read ours.
//!
//! ```text
//!   format   %ci:%cp [%t] %ft %b/%s %Tw/%Tc/%Tt %B %ts %ac/%fc/%bc/%sc/%rc %sq/%bq
//!   example  127.0.0.1:51234 [30/Nov/2026:12:00:00.123] web web/127.0.0.1:9001 0/1/25 120 -- 1/1/1/1/0 0/0
//! ```
//!
//! To a file or standard error a line is just that; to syslog, the syslog
//! header goes in front (`<134>Nov 30 12:00:00 proxy[42]: ...`,
//! `log/syslog/`), as HAProxy's lines arrive.
//!
//! | field | meaning here |
//! |-------|--------------|
//! | `%ci:%cp` | the client's address and port. An IPv6 address is printed bare, as HAProxy does (`inet_ntop`, then `:` and the port): `::1:51234`; the port is what follows the last colon. |
//! | `[%t]` | when the connection was accepted, `dd/Mon/yyyy:hh:mm:ss.mmm`, **in UTC** (HAProxy prints local time; run it with `TZ=UTC` to compare lines). |
//! | `%ft` | the frontend's name. |
//! | `%b/%s` | the backend and the server. `%b` is the group the connection went to: the frontend's name for its own backend lines (as with HAProxy's `listen`), or a `group` section's; the server is named by its address (`127.0.0.1:9001`, `[::1]:9001`). `<NOSRV>` when no server was tried. |
//! | `%Tw` | milliseconds spent waiting for a backend below its maxconn; `-1` if no backend was ever tried (refused before, or none up). |
//! | `%Tc` | milliseconds to connect to the server, retries included; `-1` if no connect succeeded. |
//! | `%Tt` | milliseconds from accept to close. |
//! | `%B` | bytes from the server to the client (the JSON variant adds `bytes_up`). |
//! | `%ts` | the termination state, two characters: [`termination`]. |
//! | `%ac/%fc/%bc/%sc` | connections open in the process, the frontend, the backend and the server when the line was made, this one included (the line is made before the connection gives its places back, as HAProxy does). |
//! | `%rc` | connect retries; prefixed with `+` when a retry went to another server (HAProxy's redispatch). Our proxy never retries the same server, so any retry is a redispatch: the count is not the logged server's. |
//! | `%sq/%bq` | HAProxy's positions in the server and backend queues. Our waiting is not an ordered queue, so both are always `0/0`; the time spent waiting is in `%Tw`. |
//! | `{...}` | only on a frontend with `use-group` rules: the TLS server name its ClientHello gave, where HAProxy puts a capture (`{}` without one). |
//!
//! Names are escaped as HAProxy escapes non-printable characters (section
//! 8.6 of its manual): every byte outside `!`..`~`, and `#`, `"` and `/`
//! (which would break the fields apart) and the braces of a capture,
//! becomes `#` and two hex digits.
//! Our configuration only allows letters, digits, `-`, `_` and `.` in a
//! name, so in practice nothing is escaped.
//!
//! The layer's files, one idea each:
//!
//! - [`termination`]: who ended a connection and where (`--`, `SC`, `cD`...);
//! - [`record`]: one line: a finished connection, and its `tcplog` and
//!   JSON layouts;
//! - [`custom`]: a format of the operator's (`log-format "%ci %B %ts"`),
//!   compiled once;
//! - [`format`](mod@format): which of the three a line takes;
//! - [`sink`]: where lines go (stderr, a file, syslog), buffered per event
//!   loop, one system call per batch.

pub mod custom;
pub mod format;
pub mod record;
pub mod sink;
pub mod termination;
