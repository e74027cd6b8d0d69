//! Choosing a connection's group of backends on a frontend with
//! `use-group` rules: its ClientHello read (`conn/client_hello.rs`) within
//! `timeout client-hs`, its server name and protocols matched against the
//! rules (`policy/route.rs`), and every byte read kept, to reach the chosen
//! backend first, unchanged.
//!
//! ```text
//!   the client's first bytes ──▶ a ClientHello ──▶ its SNI or ALPN matches a rule ──▶ that rule's group
//!        │                           │   no SNI, or no rule matches ──▶ the default group
//!        │                           └─ malformed, too large, cut, too slow ──▶ refused
//!        └─ not TLS (or silent for timeout client-hs) ──▶ the default group, or refused (not-tls refuse)
//! ```
//!
//! A frontend without rules never comes here: its connections read
//! nothing before their backend is chosen, as before (no extra system
//! call). These are methods of the connection's `WorkerFrontend`, in a file of
//! their own because they are one idea, as `connect.rs` is.

use crate::conn::client_hello::{self, HelloError};
use crate::ops::access_log::termination::{Cause, Phase, Termination};
use crate::ops::metrics::counters;
use crate::policy::route::{NotTls, Unmatched};
use runtime::net::TcpStream;

use super::connection::Refusal;
use super::frontend::WorkerFrontend;
use super::trace::Trace;

impl WorkerFrontend {
    /// The group this connection goes to (0, the default, without rules),
    /// with its ClientHello's bytes added to `early`.
    pub(super) async fn route(
        &self,
        client: &TcpStream,
        early: &mut Vec<u8>,
        trace: &mut Trace,
    ) -> Result<usize, Refusal> {
        let frontend = &self.shared.frontend;
        let Some(routes) = &frontend.routing else {
            return Ok(0);
        };
        let limit = frontend.timeouts.client_hs;
        let read = client_hello::read_hello(client, early, limit).await;
        // The reader's 16 KiB would otherwise be held while the connection
        // waits for its backend: keep only what was read.
        early.shrink_to_fit();
        trace.client_sent |= !early.is_empty();
        let (group, slot) = match read {
            Ok(Some(hello)) => {
                let matched = routes.route_hello(hello.sni.as_deref(), &hello.alpn);
                if hello.sni.is_some() {
                    trace.extra_mut().sni = hello.sni;
                }
                match matched {
                    Some(rule) => (routes.rules().get(rule).map_or(0, |r| r.group), rule),
                    None if trace.extra().sni.is_some() => (0, routes.slot(Unmatched::NoMatch)),
                    None => (0, routes.slot(Unmatched::NoName)),
                }
            }
            Ok(None) => {
                self.count_route(routes.slot(Unmatched::NotTls));
                return match routes.not_tls {
                    NotTls::Default => Ok(0),
                    NotTls::Refuse => Err(Refusal::denied("not TLS (not-tls refuse)")),
                };
            }
            Err(e) => return Err(hello_refusal(e)),
        };
        self.count_route(slot);
        Ok(group)
    }

    fn count_route(&self, slot: usize) {
        if let Some(counter) = self.counters.routes.get(slot) {
            counters::inc(counter);
        }
    }
}

/// A ClientHello that could not be read: who is to blame, as HAProxy says
/// it (`cR` too slow, `CR` gone, `PR` refused by the proxy).
fn hello_refusal(e: HelloError) -> Refusal {
    let cause = match &e {
        HelloError::TimedOut(..) => Cause::ClientTimeout,
        HelloError::Closed(_) | HelloError::Io(_) => Cause::ClientAbort,
        HelloError::TooLarge | HelloError::Malformed(_) => Cause::Proxy,
    };
    Refusal::new(e.to_string(), Termination::new(cause, Phase::Request))
}
