//! # policy: who may get a connection, and where it goes
//!
//! Decisions, and only decisions: no sockets, no threads, no waiting. The
//! event loops ask, tell what happened (a connection opened or closed, a
//! check failed, a host name resolved), and act on the answer; each file
//! can be tested with plain values, the time among them where time matters
//! (`now`). Only the health board and the address book read the clock
//! themselves, to stamp when a server came back up (its `slowstart`) or
//! when its name stopped resolving.
//!
//! | file | the question it answers |
//! |---|---|
//! | [`acl`] | may this source address connect at all? (`allow`, `deny`) |
//! | [`cidr`] | what an address range is (`10.0.0.0/8`), and who is in it |
//! | [`source_limit`] | has this source its `maxconn-per-source` already? |
//! | [`source_rate`] | has this source made its `rate-limit-per-source` of connections this period? |
//! | [`session_rate`] | may the frontend accept one more now, under `rate-limit sessions`? |
//! | [`limit`] | is there room under a `maxconn` (global, frontend, backend)? |
//! | [`descriptors`] | how large may the global `maxconn` be, two descriptors a connection? |
//! | [`health`] | which backends are up (rise and fall, from checks and traffic)? |
//! | [`check`] | what does an active check say and expect (`option redis-check`...)? |
//! | [`admin_state`] | what has the operator said of a server: ready, drain or maint, which weight? |
//! | [`agent_state`] | what has a server's agent said: out of rotation, draining, which weight? |
//! | [`balance`] | which backend gets this connection (the `balance` algorithms)? |
//! | [`address`] | where is this backend now (its host name's last good answer)? |
//! | [`maglev`] | which backend owns this client's slot (`balance source`)? |
//! | [`route`] | which group of backends does this TLS server name go to (`use-group`)? |
//!
//! May import: the ground floor ([`crate::log`]) and the runtime's sync
//! tools. Nothing above: the settings name these types (a configuration
//! says `balance leastconn` with [`balance::Algorithm`]), never the reverse.

pub mod acl;
pub mod address;
pub mod admin_state;
pub mod agent_state;
pub mod balance;
pub mod check;
pub mod cidr;
pub mod descriptors;
pub mod health;
pub mod limit;
pub mod maglev;
pub mod route;
pub mod session_rate;
pub mod source_limit;
pub mod source_rate;
