//! The resolver thread: every `resolve-interval`, each host name of the
//! running frontends looked up once, with the system's resolver
//! (`settings/resolve.rs`), and its answer given to every backend written
//! with it, in its frontend's [`AddressBook`] (`policy/address.rs`), which
//! the workers read on each connect and the checker before each check.
//!
//! ```text
//!   control thread ──Round{books, every}──▶ "resolver" thread
//!     (start, each reload)                   every `every`: one lookup per name (blocking, here),
//!                                            each answer ──▶ AddressBook::answer ──▶ workers' next connects
//! ```
//!
//! A thread of its own because a lookup blocks (the resolver's timeouts
//! run to seconds when a DNS server does not answer): not on an event
//! loop, whose every connection would wait, and not on the health-check
//! thread, whose checks would be late. Lookups run one after the other; a
//! round that takes longer than the interval delays the next, never
//! overlaps it.
//!
//! The control thread looks every name up itself at start and at a reload
//! (a name that does not resolve refuses them, `init-addr`), and gives the
//! answers to the books ([`give`]) before any worker sees them; it then
//! hands this thread the books it is to keep, which it holds weakly: a
//! frontend a reload removed is forgotten once its last connection ends.

use std::io;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

use crate::policy::address::AddressBook;
use crate::settings::resolve::Answers;

/// The thread, as the control thread holds it: dropping it ends the thread
/// (at its next wake-up, or once the lookup under way returns).
#[derive(Debug)]
pub struct Resolver {
    tx: mpsc::Sender<Round>,
}

/// What the thread works on: the books to keep up to date, and how often
/// (`None`: `resolve-interval off`, nothing to do until told otherwise).
#[derive(Debug)]
struct Round {
    books: Vec<Weak<AddressBook>>,
    every: Option<Duration>,
}

impl Resolver {
    /// Starts the thread on `books`, looking them up every `every`.
    pub fn spawn(books: &[Arc<AddressBook>], every: Option<Duration>) -> io::Result<Resolver> {
        let (tx, rx) = mpsc::channel();
        let first = Round {
            books: books.iter().map(Arc::downgrade).collect(),
            every,
        };
        thread::Builder::new()
            .name("resolver".into())
            .spawn(move || run(first, &rx))?;
        Ok(Resolver { tx })
    }

    /// The books to keep from now on, and how often (a reload's): their
    /// names were looked up just now, so the next round is one interval
    /// away.
    pub fn set(&self, books: &[Arc<AddressBook>], every: Option<Duration>) {
        let round = Round {
            books: books.iter().map(Arc::downgrade).collect(),
            every,
        };
        if self.tx.send(round).is_err() {
            crate::error!("the resolver thread is gone: host names are no longer looked up");
        }
    }
}

/// The thread's loop: a round every `every`, a new [`Round`] whenever the
/// control thread sends one, until it hangs up.
fn run(mut round: Round, rx: &mpsc::Receiver<Round>) {
    let mut next = round.every.map(|every| Instant::now() + every);
    loop {
        let told = match next {
            Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match told {
            Ok(new) => round = new,
            Err(RecvTimeoutError::Timeout) => {
                round.books.retain(|book| book.strong_count() > 0);
                let mut answers = Answers::default();
                for book in round.books.iter().filter_map(Weak::upgrade) {
                    give(&book, &mut answers);
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
        }
        next = round.every.map(|every| Instant::now() + every);
    }
}

/// Gives every backend of `book` written with a host name its name's
/// answer from `answers`, looking up those it has not asked yet.
pub fn give(book: &AddressBook, answers: &mut Answers) {
    for index in 0..book.len() {
        let Some(lookup) = book.lookup(index) else {
            continue;
        };
        match answers.ask(&lookup.host, lookup.port) {
            Ok(addrs) => book.answer(index, Ok(&addrs)),
            Err(why) => book.answer(index, Err(why)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::address::{Lookup, Place};
    use std::net::SocketAddr;

    /// A book of one backend written with the name `host` (a numeric one
    /// here: a test never asks the machine's DNS).
    fn book(host: &str) -> Arc<AddressBook> {
        let place = Place {
            label: format!("{host}:9000"),
            start: None,
            lookup: Some(Lookup {
                host: host.to_string(),
                port: 9000,
                prefer: None,
            }),
        };
        Arc::new(AddressBook::new("web", [place]))
    }

    fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !condition() {
            assert!(Instant::now() < deadline, "not within 5s: {what}");
            thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_thread_looks_up_every_interval_and_takes_new_books() {
        let first = book("127.0.0.7");
        let resolver = Resolver::spawn(
            std::slice::from_ref(&first),
            Some(Duration::from_millis(20)),
        )
        .expect("a resolver thread");
        let at = |b: &AddressBook| b.get(0);
        wait_for("a round", || at(&first).is_some());
        assert_eq!(at(&first), "127.0.0.7:9000".parse::<SocketAddr>().ok());
        let second = book("::1");
        resolver.set(
            std::slice::from_ref(&second),
            Some(Duration::from_millis(20)),
        );
        wait_for("a round of the new books", || at(&second).is_some());
        assert_eq!(at(&second), "[::1]:9000".parse::<SocketAddr>().ok());
        // Off: the books are kept, and nothing is looked up.
        let third = book("127.0.0.8");
        resolver.set(std::slice::from_ref(&third), None);
        thread::sleep(Duration::from_millis(100));
        assert_eq!(at(&third), None);
        drop(resolver);
    }
}
