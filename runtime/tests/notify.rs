//! `Notify` on real runtimes and real threads, in the three shapes the proxy
//! builds on it: a kill switch every connection task waits on for its whole
//! life, a limit whose waiters on several threads are woken by a release on
//! any thread, and a drain where one thread waits for the last task to end.
//! Every wait is bounded (`within`), so a lost wake fails instead of hanging.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::within;
use runtime::combinator::{Either, select};
use runtime::notify::Notify;
use runtime::threads::spawn_runtimes;
use runtime::{Runtime, spawn, time};

/// Polls `done` (bounded) until it holds.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(5), "{what}: never");
        thread::sleep(Duration::from_millis(1));
    }
}

// A kill switch: every task of two runtime threads waits on it in a select
// with its own work (here a long sleep); one notify_all from another thread
// ends them all, including tasks armed but not yet polled.
#[test]
fn one_notify_all_ends_every_task_waiting_on_several_threads() {
    within(20, || {
        const TASKS: usize = 200;
        let kill = Arc::new(Notify::new());
        let armed = Arc::new(AtomicUsize::new(0));
        let ended = Arc::new(AtomicUsize::new(0));
        let (k, a, e) = (kill.clone(), armed.clone(), ended.clone());
        let threads = spawn_runtimes(2, "kill", move |_| {
            let (kill, armed, ended) = (k.clone(), a.clone(), e.clone());
            async move {
                let tasks: Vec<_> = (0..TASKS)
                    .map(|_| {
                        let (kill, armed, ended) = (kill.clone(), armed.clone(), ended.clone());
                        spawn(async move {
                            let stop = kill.notified();
                            armed.fetch_add(1, Ordering::SeqCst);
                            let work = time::sleep(Duration::from_secs(3600));
                            if let Either::Left(()) = select(stop, work).await {
                                ended.fetch_add(1, Ordering::SeqCst);
                            }
                        })
                    })
                    .collect();
                for task in tasks {
                    task.await.expect("a connection task");
                }
            }
        })
        .expect("start the runtime threads");
        wait_until("all tasks armed", || {
            armed.load(Ordering::SeqCst) == 2 * TASKS
        });
        kill.notify_all();
        threads.join().expect("join the runtime threads");
        assert_eq!(ended.load(Ordering::SeqCst), 2 * TASKS);
    });
}

// A limit of one place shared by three runtime threads: each waits for room
// with check-then-wait, and the release on whichever thread held the place
// wakes the others. Every thread gets through its rounds; the place is
// never held twice.
#[test]
fn a_release_on_any_thread_wakes_waiters_on_the_others() {
    within(30, || {
        const ROUNDS: u32 = 300;
        let room = Arc::new(Notify::new());
        let taken = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU32::new(0));
        let (r, t, d) = (room.clone(), taken.clone(), done.clone());
        let threads = spawn_runtimes(3, "limit", move |_| {
            let (room, taken, done) = (r.clone(), t.clone(), d.clone());
            async move {
                for _ in 0..ROUNDS {
                    loop {
                        let notified = room.notified();
                        let acquired = taken
                            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                            .is_ok();
                        if acquired {
                            break;
                        }
                        notified.await;
                    }
                    runtime::yield_now().await; // hold the place a little
                    taken.store(false, Ordering::SeqCst);
                    room.notify_all();
                    done.fetch_add(1, Ordering::SeqCst);
                }
            }
        })
        .expect("start the runtime threads");
        threads.join().expect("join the runtime threads");
        assert_eq!(done.load(Ordering::SeqCst), 3 * ROUNDS);
    });
}

// A drain: connection tasks end on a worker thread, each calling notify_all;
// the control thread, on its own runtime, waits until the count is zero,
// woken by the last one.
#[test]
fn a_drain_is_woken_by_the_last_task_to_end() {
    within(20, || {
        const TASKS: usize = 100;
        let drained = Arc::new(Notify::new());
        let open = Arc::new(AtomicUsize::new(TASKS));
        let (d, o) = (drained.clone(), open.clone());
        let worker = thread::spawn(move || {
            let rt = Runtime::new().expect("a runtime");
            rt.block_on(async {
                let tasks: Vec<_> = (0..TASKS as u64)
                    .map(|i| {
                        let (drained, open) = (d.clone(), o.clone());
                        spawn(async move {
                            time::sleep(Duration::from_millis(i % 20)).await;
                            open.fetch_sub(1, Ordering::SeqCst);
                            drained.notify_all();
                        })
                    })
                    .collect();
                for task in tasks {
                    task.await.expect("a connection task");
                }
            });
        });
        let control = Runtime::new().expect("a runtime");
        let wakes = control.block_on(async {
            let mut waits = 0;
            loop {
                let notified = drained.notified();
                if open.load(Ordering::SeqCst) == 0 {
                    return waits;
                }
                notified.await;
                waits += 1;
            }
        });
        worker.join().expect("the worker thread");
        assert!(wakes >= 1, "the control thread never had to wait");
    });
}
