//! `option smtpchk [HELO|EHLO DOMAIN]`: the opening of an SMTP session
//! (RFC 5321, sections 3.1, 4.1.1.1 and 4.2).
//!
//! ```text
//!   server ─▶ 220 mail.example ESMTP            the greeting: 2xx is a server at work
//!   check  ─▶ HELO localhost                    (HAProxy's default greeting)
//!   server ─▶ 250 mail.example                  2xx: UP
//!   check  ─▶ QUIT                              and the server closes
//! ```
//!
//! A reply is one line `CODE text`, or several whose last is `CODE text`
//! and the others `CODE-text` (EHLO's list of extensions); only the code
//! of the last line counts. A 4xx or 5xx greeting (`554 no service`) or
//! answer is DOWN with the server's words.

use super::dialogue::{Dialogue, Inbox, Next, Status, Verdict, got, line, shown};

/// `option smtpchk`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmtpCheck {
    /// `HELO` (the default) or `EHLO`.
    pub hello: String,
    /// The domain it names (default `localhost`).
    pub domain: String,
}

impl Default for SmtpCheck {
    fn default() -> Self {
        SmtpCheck {
            hello: "HELO".to_string(),
            domain: "localhost".to_string(),
        }
    }
}

impl SmtpCheck {
    /// A check from its first step.
    pub fn start(&self) -> Box<dyn Dialogue + '_> {
        Box::new(Run {
            check: self,
            greeted: false,
        })
    }
}

struct Run<'a> {
    check: &'a SmtpCheck,
    /// The greeting was 2xx and the HELO or EHLO is sent.
    greeted: bool,
}

impl Dialogue for Run<'_> {
    fn next(&mut self, inbox: &mut Inbox) -> Next {
        let (code, text) = match reply(inbox) {
            Reply::Incomplete if inbox.is_final() => {
                let detail = format!(
                    "smtp: expected {}, got {}",
                    self.awaiting_reply(),
                    got(inbox)
                );
                return Next::done(Verdict::failed(Status::L7Rsp, detail));
            }
            Reply::Incomplete => return Next::Receive,
            Reply::Bad(line) => {
                let detail = format!("smtp: not an SMTP reply: {}", shown(&line));
                return Next::done(Verdict::failed(Status::L7Rsp, detail));
            }
            Reply::Whole(code, text) => (code, text),
        };
        let step = if self.greeted {
            self.check.hello.as_str()
        } else {
            "greeting"
        };
        if !(200..300).contains(&code) {
            let detail = format!("smtp: {step}: {code} {}", String::from_utf8_lossy(&text));
            return Next::done(Verdict::failed(Status::L7Sts, detail));
        }
        if self.greeted {
            return Next::Done {
                verdict: Verdict::passed(format!("smtp: {code} after {}", self.check.hello)),
                goodbye: b"QUIT\r\n".to_vec(),
            };
        }
        self.greeted = true;
        let hello = format!("{} {}\r\n", self.check.hello, self.check.domain);
        Next::Send(hello.into_bytes())
    }

    fn awaiting(&self) -> String {
        format!("smtp: {}", self.awaiting_reply())
    }
}

impl Run<'_> {
    fn awaiting_reply(&self) -> String {
        match self.greeted {
            false => "the 220 greeting".to_string(),
            true => format!("the reply to {}", self.check.hello),
        }
    }
}

enum Reply {
    Incomplete,
    /// The code, and the last line's text.
    Whole(u16, Vec<u8>),
    Bad(Vec<u8>),
}

/// One whole reply at the start of the inbox, consumed.
fn reply(inbox: &mut Inbox) -> Reply {
    let mut at = 0;
    loop {
        let Some((text, used)) = line(&inbox.bytes()[at..]) else {
            return Reply::Incomplete;
        };
        let code = text
            .get(..3)
            .filter(|c| c.iter().all(u8::is_ascii_digit))
            .and_then(|c| std::str::from_utf8(c).ok()?.parse::<u16>().ok());
        let Some(code) = code else {
            return Reply::Bad(text.to_vec());
        };
        match text.get(3) {
            Some(b'-') => at += used,
            None | Some(b' ') => {
                let words = text.get(4..).unwrap_or_default().to_vec();
                inbox.consume(at + used);
                return Reply::Whole(code, words);
            }
            Some(_) => return Reply::Bad(text.to_vec()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::dialogue::testing::run;
    use super::*;

    #[test]
    fn a_greeting_and_a_250_are_up_then_quit() {
        let check = SmtpCheck {
            hello: "EHLO".into(),
            domain: "lb.example".into(),
        };
        let (sent, verdict) = run(
            &mut *check.start(),
            &[
                Some(b"220 mx.example ESMTP\r\n"),
                Some(b"250-mx.example\r\n250-SIZE 10240000\r\n"),
                Some(b"250 HELP\r\n"),
            ],
        );
        assert_eq!(sent, b"EHLO lb.example\r\nQUIT\r\n");
        assert_eq!(verdict, Some(Verdict::passed("smtp: 250 after EHLO")));
    }

    #[test]
    fn a_refusal_is_down_with_its_words() {
        let check = SmtpCheck::default();
        let (sent, verdict) = run(
            &mut *check.start(),
            &[Some(b"554 no SMTP service here\r\n")],
        );
        assert!(sent.is_empty());
        assert_eq!(
            verdict,
            Some(Verdict::failed(
                Status::L7Sts,
                "smtp: greeting: 554 no SMTP service here"
            ))
        );
        let (_, verdict) = run(
            &mut *check.start(),
            &[Some(b"220 hi\r\n"), Some(b"HELO localhost\r\n")],
        );
        assert_eq!(
            verdict,
            Some(Verdict::failed(
                Status::L7Rsp,
                "smtp: not an SMTP reply: \"HELO localhost\""
            ))
        );
        let (_, verdict) = run(&mut *check.start(), &[Some(b"220 hi\r\n"), None]);
        assert!(
            verdict
                .expect("closed")
                .detail
                .contains("the reply to HELO")
        );
    }
}
