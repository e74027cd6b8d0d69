//! The admin listener's answers: which one a request gets, and how it is
//! written (always a `Content-Length` and `Connection: close`).

use crate::ops::metrics::exposition::{FrontendHealth, Published};

use super::page::{PAGE, PAGE_TYPE};
use super::request::Request;
use super::views;

/// The content type of the Prometheus text format 0.0.4.
pub(super) const METRICS_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The content type of `/stats.json`.
const JSON_TYPE: &str = "application/json";

/// The content type of `/stats.csv`.
const CSV_TYPE: &str = "text/csv; charset=utf-8";

/// The answer to a well-formed request.
pub(super) fn respond(request: &Request<'_>, registry: &Published) -> Response {
    let frontend = request.path.strip_prefix("/health/");
    let known = matches!(
        request.path,
        "/metrics" | "/health" | "/stats" | "/stats.json" | "/stats.csv"
    ) || frontend.is_some();
    if !known {
        return Response::text(
            404,
            "not found: try /metrics, /health, /health/FRONTEND, /stats, /stats.json or \
             /stats.csv\n",
        );
    }
    let head_only = match request.method {
        "GET" => false,
        "HEAD" => true,
        _ => {
            let mut response = Response::text(405, "method not allowed: GET or HEAD\n");
            response.allow = true;
            return response;
        }
    };
    let mut response = match (request.path, frontend) {
        ("/metrics", _) => Response {
            content_type: METRICS_TYPE,
            ..Response::text(200, registry.render())
        },
        ("/stats", _) => Response {
            content_type: PAGE_TYPE,
            ..Response::text(200, PAGE)
        },
        ("/stats.json", _) => Response {
            content_type: JSON_TYPE,
            ..Response::text(200, views::json(&views::rows(registry)))
        },
        ("/stats.csv", _) => Response {
            content_type: CSV_TYPE,
            ..Response::text(200, views::csv(&views::rows(registry)))
        },
        (_, Some(name)) => frontend_health(registry, name),
        _ => process_health(registry),
    };
    response.head_only = head_only;
    response
}

/// `/health`: 200 while the process serves, 503 once a graceful stop
/// began (its lameduck phase included): a load balancer or a route
/// announcer in front of it must stop sending new clients.
fn process_health(registry: &Published) -> Response {
    match registry.stopping() {
        Some(phase) => Response::text(503, format!("{}\n", phase.name())),
        None => Response::text(200, "ok\n"),
    }
}

/// `/health/NAME`: as `/health`, and 503 as well when frontend `NAME` has
/// no usable server, so that a node whose backends are all down leaves the
/// rotation by itself; 404 for a name no frontend has.
fn frontend_health(registry: &Published, name: &str) -> Response {
    let Some(health) = registry.get().frontend_health(name) else {
        return Response::text(404, format!("not found: no frontend named '{name}'\n"));
    };
    if let Some(phase) = registry.stopping() {
        return Response::text(503, format!("{}\n", phase.name()));
    }
    let FrontendHealth { usable, servers } = health;
    match usable {
        0 => Response::text(503, format!("down: 0 of {servers} servers usable\n")),
        _ => Response::text(200, format!("ok: {usable} of {servers} servers usable\n")),
    }
}

/// The reason phrase of each status the listener answers with.
const REASONS: &[(u16, &str)] = &[
    (200, "OK"),
    (400, "Bad Request"),
    (403, "Forbidden"),
    (404, "Not Found"),
    (405, "Method Not Allowed"),
    (408, "Request Timeout"),
    (409, "Conflict"),
    (411, "Length Required"),
    (413, "Content Too Large"),
    (431, "Request Header Fields Too Large"),
    (503, "Service Unavailable"),
];

/// An answer, and how to write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Response {
    pub(super) status: u16,
    content_type: &'static str,
    body: String,
    /// Add `Allow: GET, HEAD` (a 405).
    allow: bool,
    /// A HEAD request: the head of the GET answer, without its body.
    pub(super) head_only: bool,
}

impl Response {
    /// A plain-text answer.
    pub(super) fn text(status: u16, body: impl Into<String>) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
            allow: false,
            head_only: false,
        }
    }

    /// Status line, headers, blank line, body: always a `Content-Length`
    /// and `Connection: close`.
    pub(super) fn to_bytes(&self) -> Vec<u8> {
        let reason = REASONS
            .iter()
            .find(|(status, _)| *status == self.status)
            .map_or("Error", |(_, reason)| reason);
        let allow = if self.allow {
            "Allow: GET, HEAD\r\n"
        } else {
            ""
        };
        let mut bytes = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{allow}\
             Connection: close\r\n\r\n",
            self.status,
            self.content_type,
            self.body.len()
        )
        .into_bytes();
        if !self.head_only {
            bytes.extend_from_slice(self.body.as_bytes());
        }
        bytes
    }
}
