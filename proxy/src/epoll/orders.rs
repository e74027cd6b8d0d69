//! Orders a worker gives all its connections at once, each given at most
//! once in the worker's life:
//!
//! - **kill**: "cut now", given when a graceful stop runs out of time. A
//!   connection that hears it resets its sockets (a cut stream must not
//!   look complete) and logs `KD`, or `KC`, `KQ`, `KR` if cut before its
//!   relay, instead of vanishing silently in the process exit;
//! - **park**: "park your relay", given when a new process adopts the
//!   established connections (`epoll/moving.rs`).
//!
//! One set of flags and one [`Notify`] for both, so that a relaying
//! connection waits on a single registration for the two of them: an idle
//! connection keeps its waits for its whole life, and each costs room in
//! its future and a slot in the notify's waiter list. The same notify is
//! what a cut of a server wakes (`policy/health.rs`, "When a server
//! changes"): the health boards of the worker's frontends hold it too, so
//! one registration hears the orders and the cuts. A connection takes its
//! `Notified` before it looks at the flags, so an order given in between is
//! not missed; an order it does not listen for wakes it, and it waits
//! again. Nothing is paid on the polls between: the flags are a `Cell`,
//! and the waiter list is locked only by an order or a cut.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use runtime::notify::{Notified, Notify};

/// One order (its bit in the set of those given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Cut every connection now.
    Kill = 1,
    /// Park every relay, for a new process to adopt.
    Park = 2,
}

/// The orders given so far, and the notify that says a new one came (or
/// that a server was cut).
#[derive(Debug, Default)]
pub struct Orders {
    given: Cell<u8>,
    notify: Arc<Notify>,
}

impl Orders {
    /// Gives `order`: every future from [`Orders::heard`] that listens for
    /// it completes.
    pub fn give(&self, order: Order) {
        self.given.set(self.given.get() | order as u8);
        self.notify.notify_all();
    }

    /// Has `order` been given?
    pub fn given(&self, order: Order) -> bool {
        self.given.get() & order as u8 != 0
    }

    /// A future that completes at the next order or cut given after it
    /// was made: for a waiter that looks at more than the orders (a
    /// relaying connection, which also looks at its server's cuts).
    pub fn notified(&self) -> Notified<'_> {
        self.notify.notified()
    }

    /// The notify an order wakes, for a health board to wake at a cut.
    pub fn notify(&self) -> &Arc<Notify> {
        &self.notify
    }

    /// A future that completes once one of `orders` is given (at once if
    /// one was). Registered with the notify when first polled, once.
    pub fn heard(&self, orders: &[Order]) -> Heard<'_> {
        Heard {
            orders: self,
            listens: orders.iter().fold(0, |mask, &o| mask | o as u8),
            notified: self.notify.notified(),
        }
    }
}

/// The future of [`Orders::heard`]; `Unpin`, so a connection can poll it
/// by `&mut` from each of its phases in turn.
#[derive(Debug)]
pub struct Heard<'a> {
    orders: &'a Orders,
    /// The orders it completes for, as bits.
    listens: u8,
    /// Made before the flags are first looked at: an order given in
    /// between is seen by one or the other.
    notified: Notified<'a>,
}

impl Future for Heard<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // At most twice round: a wake-up for an order this future does not
        // listen for makes a new `Notified`, which then waits for the next.
        loop {
            if self.orders.given.get() & self.listens != 0 {
                return Poll::Ready(());
            }
            match Pin::new(&mut self.notified).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) => self.notified = self.orders.notify.notified(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn a_future_completes_for_the_orders_it_listens_for_only() {
        let rt = runtime::Runtime::new().expect("a runtime");
        let orders = Rc::new(Orders::default());
        let heard = rt.block_on(async {
            let kill_only = Rc::new(Cell::new(false));
            let (o, done) = (orders.clone(), kill_only.clone());
            let waiter = runtime::spawn(async move {
                o.heard(&[Order::Kill]).await;
                done.set(true);
            });
            runtime::yield_now().await;
            orders.give(Order::Park);
            for _ in 0..3 {
                runtime::yield_now().await;
            }
            let after_park = kill_only.get();
            orders.heard(&[Order::Kill, Order::Park]).await;
            orders.give(Order::Kill);
            let _ = waiter.await;
            (after_park, kill_only.get())
        });
        assert_eq!(
            heard,
            (false, true),
            "park did not end a kill-only wait; kill did"
        );
        assert!(orders.given(Order::Park) && orders.given(Order::Kill));
    }
}
