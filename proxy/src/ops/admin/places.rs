//! The admin listener's places: at most so many connections open at once,
//! and when every place is taken, the oldest connection that is only
//! waiting gives way to the newcomer, so that a scrape never queues behind
//! clients that send nothing.
//!
//! A connection waits twice: for its request head, and, once answered, for
//! its client to close (the lingering close). In both it holds a place but
//! does no work, and closing it costs its client nothing it was promised:
//! a head that has not come is not a request yet (nginx drops such
//! connections the same way when `worker_connections` runs out), and an
//! answered client has its answer. So a newcomer that finds every place
//! taken closes the oldest of them, answered ones first:
//!
//! ```text
//!   places: [1 waiting for its head] [2 answering] [3 lingering] [4 waiting for its head]
//!   newcomer 5: 3 gives way (answered first), then 1, then 4; 2 never (it is answering)
//! ```
//!
//! Only when every place is answering (writing an answer, bounded by the
//! write timeout) does the newcomer wait, in the accept loop: the listener
//! then holds one descriptor over its limit, and the rest wait in the
//! kernel's listen queue.
//!
//! Everything here lives on the admin thread (one runtime, no locks): the
//! state is in a `RefCell` shared by the accept loop and the connections'
//! tasks, never borrowed across an `await`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use runtime::notify::Notify;
use runtime::oneshot;

/// What a connection that holds a place without working waits for. The
/// order is the order in which they give way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Waiting {
    /// Answered: reading what its client still sends, until it closes.
    ForClose,
    /// No complete request head yet.
    ForRequest,
}

/// The places of one admin listener.
#[derive(Debug)]
pub(super) struct Places {
    shared: Rc<Book>,
}

#[derive(Debug)]
struct Book {
    state: RefCell<Ledger>,
    /// Notified when a place is given back or a connection starts waiting:
    /// either may let a newcomer in.
    changed: Notify,
}

#[derive(Debug)]
struct Ledger {
    max: usize,
    open: usize,
    /// The next place's number: places are numbered in the order taken, so
    /// the smallest is the oldest.
    next: u64,
    /// The waiting connections, the first to give way first; dropping a
    /// sender tells its connection to give way.
    waiting: BTreeMap<(Waiting, u64), oneshot::Sender<()>>,
}

/// One connection's place; dropping it gives the place back.
#[derive(Debug)]
pub(super) struct Place {
    shared: Rc<Book>,
    number: u64,
    /// Its key in `waiting`, while it waits.
    waiting: Option<(Waiting, u64)>,
}

/// Completes when the connection is asked to give its place to a newcomer.
#[derive(Debug)]
#[must_use = "a GiveWay does nothing unless awaited"]
pub(super) struct GiveWay(oneshot::Receiver<()>);

impl Future for GiveWay {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Sent or dropped, either means "give way".
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

impl Places {
    /// Places for `max` connections (at least one).
    pub(super) fn new(max: usize) -> Places {
        let state = Ledger {
            max: max.max(1),
            open: 0,
            next: 0,
            waiting: BTreeMap::new(),
        };
        Places {
            shared: Rc::new(Book {
                state: RefCell::new(state),
                changed: Notify::new(),
            }),
        }
    }

    /// A place for a new connection, which starts waiting for its request:
    /// at once if one is free; otherwise the first waiting connection is
    /// told to give way, and the place is taken once it has. Waits longer
    /// only while no connection waits (every place is answering).
    pub(super) async fn take(&self) -> (Place, GiveWay) {
        loop {
            let changed = self.shared.changed.notified();
            let gives_way = {
                let mut state = self.shared.state.borrow_mut();
                if state.open < state.max {
                    state.open += 1;
                    let number = state.next;
                    state.next += 1;
                    drop(state);
                    let mut place = Place {
                        shared: self.shared.clone(),
                        number,
                        waiting: None,
                    };
                    let give_way = place.wait(Waiting::ForRequest);
                    return (place, give_way);
                }
                state.waiting.pop_first()
            };
            // Dropped outside the borrow: it wakes that connection's task,
            // which closes and gives its place back, notifying `changed`.
            drop(gives_way);
            changed.await;
        }
    }

    /// Places taken now.
    #[cfg(test)]
    fn open(&self) -> usize {
        self.shared.state.borrow().open
    }
}

impl Place {
    /// From now on the connection only waits, for `what`: it gives way to
    /// a newcomer when it is the first waiting and every place is taken
    /// (the returned future completes then).
    pub(super) fn wait(&mut self, what: Waiting) -> GiveWay {
        let (sender, receiver) = oneshot::channel();
        let key = (what, self.number);
        let before = {
            let mut state = self.shared.state.borrow_mut();
            let before = self.waiting.and_then(|key| state.waiting.remove(&key));
            state.waiting.insert(key, sender);
            before
        };
        self.waiting = Some(key);
        drop(before);
        self.shared.changed.notify_all();
        GiveWay(receiver)
    }

    /// The connection works now (it answers): it no longer gives way.
    pub(super) fn work(&mut self) {
        let removed = self.unlist();
        drop(removed);
    }

    /// Takes the place out of `waiting`; the sender is returned to be
    /// dropped once the state is no longer borrowed.
    fn unlist(&mut self) -> Option<oneshot::Sender<()>> {
        let key = self.waiting.take()?;
        self.shared.state.borrow_mut().waiting.remove(&key)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let removed = self.unlist();
        self.shared.state.borrow_mut().open -= 1;
        drop(removed);
        self.shared.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtime::combinator::{Either, select};
    use std::future::ready;

    /// Whether `future` is ready at its first poll (a ready second future
    /// wins the select only if the first is pending).
    async fn ready_now<F: Future>(future: F) -> Option<F::Output> {
        match select(future, ready(())).await {
            Either::Left(output) => Some(output),
            Either::Right(()) => None,
        }
    }

    fn block_on<F: Future>(future: F) -> F::Output {
        runtime::Runtime::new().expect("a runtime").block_on(future)
    }

    #[test]
    fn free_places_are_taken_at_once() {
        block_on(async {
            let places = Places::new(2);
            let first = ready_now(places.take()).await;
            let second = ready_now(places.take()).await;
            assert!(first.is_some() && second.is_some());
            assert_eq!(places.open(), 2);
            drop(first);
            assert_eq!(places.open(), 1);
            drop(second);
            assert_eq!(places.open(), 0);
        });
    }

    #[test]
    fn the_oldest_waiting_gives_way_answered_ones_first() {
        block_on(async {
            let places = Places::new(3);
            let (old, old_gives_way) = places.take().await;
            let (mut working, _) = places.take().await;
            let (mut answered, _) = places.take().await;
            working.work();
            let answered_gives_way = answered.wait(Waiting::ForClose);
            // A newcomer: the answered one gives way, though it is not the
            // oldest, and the newcomer gets its place once it is dropped.
            let newcomer = places.take();
            let newcomer = async {
                let closer = async {
                    answered_gives_way.await;
                    drop(answered);
                };
                runtime::combinator::join(newcomer, closer).await.0
            };
            let (new, _new_gives_way) = newcomer.await;
            assert_eq!(places.open(), 3);
            // Next in line: the oldest still waiting for its request.
            let next = places.take();
            let closer = async {
                old_gives_way.await;
                drop(old);
            };
            let (_next, _) = runtime::combinator::join(next, closer).await.0;
            assert_eq!(places.open(), 3);
            drop((new, working));
        });
    }

    #[test]
    fn with_every_place_answering_a_newcomer_waits_for_one() {
        block_on(async {
            let places = Places::new(1);
            let (mut only, give_way) = places.take().await;
            only.work();
            assert!(
                ready_now(places.take()).await.is_none(),
                "every place works"
            );
            assert!(
                ready_now(give_way).await.is_some(),
                "work() lets the old signal go"
            );
            // It starts waiting again: now the newcomer takes its place.
            let only_gives_way = only.wait(Waiting::ForClose);
            let closer = async {
                only_gives_way.await;
                drop(only);
            };
            let (_new, _) = runtime::combinator::join(places.take(), closer).await.0;
            assert_eq!(places.open(), 1);
        });
    }
}
