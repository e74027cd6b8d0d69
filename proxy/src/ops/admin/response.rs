//! The admin listener's answers: which one a request gets, and how it is
//! written (always a `Content-Length` and `Connection: close`).

use crate::ops::metrics::exposition::Published;

use super::request::Request;

/// The content type of the Prometheus text format 0.0.4.
pub(super) const METRICS_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The answer to a well-formed request.
pub(super) fn respond(request: &Request<'_>, registry: &Published) -> Response {
    let known = matches!(request.path, "/metrics" | "/health");
    if !known {
        return Response::text(404, "not found: try /metrics or /health\n");
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
    let mut response = match request.path {
        "/metrics" => Response {
            content_type: METRICS_TYPE,
            ..Response::text(200, registry.render())
        },
        // A draining proxy is alive but takes no new clients: a load
        // balancer in front of it must stop sending them.
        _ if registry.is_draining() => Response::text(503, "draining\n"),
        _ => Response::text(200, "ok\n"),
    };
    response.head_only = head_only;
    response
}

/// The reason phrase of each status the listener answers with.
const REASONS: &[(u16, &str)] = &[
    (200, "OK"),
    (400, "Bad Request"),
    (404, "Not Found"),
    (405, "Method Not Allowed"),
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
    head_only: bool,
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
