//! Executor contracts: block_on, spawn, JoinHandle (detach, abort, panics),
//! wakes (coalesced, cross-thread), fairness (yield, I/O budget), runtime
//! lifetime (spawn before block_on, drop, nesting).

mod common;

use std::cell::{Cell, RefCell};
use std::future::{Future, poll_fn};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use common::within;
use runtime::net::{TcpListener, TcpStream};
use runtime::{JoinError, Runtime, spawn, time, yield_now};

fn loopback_any() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// Sets its flag when dropped: observes that a future was dropped.
struct SetOnDrop(Rc<Cell<bool>>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

fn payload_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "<non-string payload>".to_string())
}

// block_on returns its future's output (borrowed and owned captures alike).
#[test]
fn block_on_returns_the_futures_output() {
    within(10, || {
        let rt = Runtime::new().unwrap();
        assert_eq!(rt.block_on(async { 6 * 7 }), 42);
        let owned = String::from("owned value");
        assert_eq!(rt.block_on(async move { owned.len() }), 11);
        let local = [1, 2, 3];
        assert_eq!(rt.block_on(async { local.iter().sum::<i32>() }), 6);
        assert_eq!(rt.live_tasks(), 0);
    });
}

// 100,000 spawned tasks each deliver their own output through their JoinHandle, and none stays live.
#[test]
fn spawn_and_join_100k_tasks() {
    within(120, || {
        const N: u64 = 100_000;
        let rt = Runtime::new().unwrap();
        let sum = rt.block_on(async {
            let handles: Vec<_> = (0..N)
                .map(|i| {
                    spawn(async move {
                        yield_now().await;
                        i * 3
                    })
                })
                .collect();
            assert_eq!(rt.live_tasks(), N as usize);
            let mut sum = 0u64;
            for h in handles {
                sum += h.await.expect("task output");
            }
            sum
        });
        assert_eq!(sum, 3 * N * (N - 1) / 2);
        assert_eq!(rt.live_tasks(), 0, "every finished task is removed");
    });
}

// Dropping a JoinHandle detaches the task: it still runs to completion.
#[test]
fn dropped_join_handle_detaches_the_task() {
    within(10, || {
        let rt = Runtime::new().unwrap();
        let done = Rc::new(Cell::new(false));
        let d = done.clone();
        rt.block_on(async {
            drop(spawn(async move {
                for _ in 0..5 {
                    yield_now().await;
                }
                d.set(true);
            }));
            // FIFO queue: each of our yields lets the task take one step.
            for _ in 0..100 {
                if done.get() {
                    break;
                }
                yield_now().await;
            }
        });
        assert!(done.get(), "the detached task did not run to completion");
        assert_eq!(rt.live_tasks(), 0);
    });
}

// abort drops the future (its destructors run) and the handle yields Cancelled; abort after completion is a no-op.
#[test]
fn abort_drops_the_future_and_reports_cancelled() {
    within(10, || {
        let rt = Runtime::new().unwrap();
        rt.block_on(async {
            // A task that has been polled and is waiting.
            let dropped = Rc::new(Cell::new(false));
            let polls = Rc::new(Cell::new(0u32));
            let (guard, p) = (SetOnDrop(dropped.clone()), polls.clone());
            let h = spawn(async move {
                let _guard = guard;
                p.set(p.get() + 1);
                std::future::pending::<u32>().await
            });
            yield_now().await; // the task runs once, before us
            assert_eq!(polls.get(), 1);
            assert!(!dropped.get());
            assert!(!h.is_finished());
            h.abort();
            let result = h.await;
            assert!(
                matches!(result, Err(JoinError::Cancelled)),
                "expected Cancelled, got {result:?}"
            );
            assert!(dropped.get(), "abort must drop the future");
            assert_eq!(polls.get(), 1, "an aborted task is not polled again");

            // A task aborted before it ever ran: dropped without a poll.
            let dropped = Rc::new(Cell::new(false));
            let guard = SetOnDrop(dropped.clone());
            let ran = Rc::new(Cell::new(false));
            let r = ran.clone();
            let h = spawn(async move {
                let _guard = guard;
                r.set(true);
            });
            h.abort();
            assert!(h.await.unwrap_err().is_cancelled());
            assert!(dropped.get());
            assert!(!ran.get(), "an aborted task must not start");

            // Abort after completion: the output is still delivered.
            let h = spawn(async { 7u32 });
            yield_now().await;
            assert!(h.is_finished());
            h.abort();
            assert_eq!(h.await.unwrap(), 7);
        });
        assert_eq!(rt.live_tasks(), 0);
    });
}

// A panicking task yields Err(Panicked) with its message; the other tasks and the runtime carry on.
#[test]
fn a_panicking_task_reports_its_message_and_others_keep_running() {
    within(10, || {
        let rt = Runtime::new().unwrap();
        rt.block_on(async {
            let steps = Rc::new(Cell::new(0u32));
            let s = steps.clone();
            let good = spawn(async move {
                for _ in 0..20 {
                    s.set(s.get() + 1);
                    yield_now().await;
                }
                "finished"
            });
            let formatted = spawn(async {
                yield_now().await;
                if true {
                    panic!("formatted boom {}", 42);
                }
                0u8
            });
            let literal = spawn(async {
                panic!("literal boom");
            });

            let e = formatted.await.unwrap_err();
            assert!(e.is_panic() && !e.is_cancelled());
            assert_eq!(e.panic_message(), Some("formatted boom 42"));
            assert!(e.to_string().contains("formatted boom 42"), "{e}");
            let e = literal.await.unwrap_err();
            assert_eq!(e.panic_message(), Some("literal boom"));

            assert_eq!(good.await.unwrap(), "finished");
            assert_eq!(steps.get(), 20);
            assert_eq!(spawn(async { 5 }).await.unwrap(), 5, "spawning still works");
        });
        assert_eq!(rt.live_tasks(), 0);
    });
}

/// Waits (bounded) until thread `tid` of this process is blocked in
/// epoll_wait. None if /proc does not tell; Some(false) if it never got there.
fn wait_until_parked_in_epoll(tid: i32, bound: Duration) -> Option<bool> {
    let path = format!("/proc/self/task/{tid}/syscall");
    let waits: &[i64] = &[
        libc::SYS_epoll_pwait,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_epoll_wait,
        libc::SYS_epoll_pwait2,
    ];
    let start = Instant::now();
    while start.elapsed() < bound {
        let text = std::fs::read_to_string(&path).ok()?;
        let nr = text
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<i64>().ok());
        if nr.is_some_and(|nr| waits.contains(&nr)) {
            return Some(true);
        }
        thread::sleep(Duration::from_millis(1));
    }
    Some(false)
}

// A waker woken from another thread pulls the runtime out of epoll_wait (only the eventfd can) and runs the task.
#[test]
fn a_wake_from_another_thread_runs_the_task() {
    within(20, || {
        let rt = Runtime::new().unwrap();
        let slot: Arc<Mutex<Option<Waker>>> = Arc::new(Mutex::new(None));
        let go = Arc::new(AtomicBool::new(false));
        let (stored_tx, stored_rx) = mpsc::channel::<()>();
        let runtime_tid = common::gettid();

        let (slot2, go2) = (slot.clone(), go.clone());
        let waker_thread = thread::spawn(move || {
            stored_rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the task never stored its waker");
            let parked = wait_until_parked_in_epoll(runtime_tid, Duration::from_secs(10));
            go2.store(true, Ordering::Release);
            let waker = slot2.lock().unwrap().take().expect("stored waker");
            waker.wake();
            parked
        });

        let polls = Rc::new(Cell::new(0u32));
        let p = polls.clone();
        let out = rt.block_on(async {
            let task = spawn(poll_fn(move |cx| {
                p.set(p.get() + 1);
                if go.load(Ordering::Acquire) {
                    return Poll::Ready(99u32);
                }
                *slot.lock().unwrap() = Some(cx.waker().clone());
                let _ = stored_tx.send(());
                Poll::Pending
            }));
            assert_eq!(rt.pending_timers(), 0, "no timer may end the wait");
            task.await.unwrap()
        });
        let parked = waker_thread.join().expect("waker thread");
        assert_eq!(out, 99);
        assert_eq!(polls.get(), 2, "one poll to wait, one after the wake");
        match parked {
            Some(parked) => assert!(parked, "the runtime thread never blocked in epoll_wait"),
            None => eprintln!("note: /proc/<tid>/syscall unreadable; parked state not confirmed"),
        }
    });
}

/// Wakes itself `wakes` times during its first poll, then waits for `done`.
struct SelfWaker {
    wakes: u32,
    polls: Rc<Cell<u32>>,
    done: Rc<Cell<bool>>,
    waker: Rc<RefCell<Option<Waker>>>,
}

impl Future for SelfWaker {
    type Output = u32;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        self.polls.set(self.polls.get() + 1);
        if self.polls.get() == 1 {
            for _ in 0..self.wakes {
                cx.waker().wake_by_ref();
            }
            return Poll::Pending;
        }
        if self.done.get() {
            return Poll::Ready(self.polls.get());
        }
        *self.waker.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }
}

// Wakes during a poll are coalesced: a task that wakes itself 10 times in one poll runs exactly once more.
#[test]
fn wakes_during_a_poll_queue_the_task_once() {
    within(10, || {
        let rt = Runtime::new().unwrap();

        // As the main future: exactly two polls in all (rt.polls counts every pop).
        let polls = Rc::new(Cell::new(0u32));
        let before = rt.polls();
        let main = SelfWaker {
            wakes: 10,
            polls: polls.clone(),
            done: Rc::new(Cell::new(true)),
            waker: Rc::default(),
        };
        assert_eq!(rt.block_on(main), 2);
        assert_eq!(
            rt.polls() - before,
            2,
            "the main future was queued more than once"
        );

        // As a spawned task: polled twice, then not again until really woken.
        let (polls, done, waker) = (
            Rc::new(Cell::new(0u32)),
            Rc::new(Cell::new(false)),
            Rc::default(),
        );
        let task = SelfWaker {
            wakes: 10,
            polls: polls.clone(),
            done: done.clone(),
            waker: Rc::clone(&waker),
        };
        rt.block_on(async {
            let h = spawn(task);
            // Plenty of turns for any duplicate queue entry to show up as a poll.
            for _ in 0..50 {
                yield_now().await;
            }
            assert_eq!(
                polls.get(),
                2,
                "ten wakes in one poll must queue the task once"
            );
            done.set(true);
            waker
                .borrow_mut()
                .take()
                .expect("waker stored at poll 2")
                .wake();
            assert_eq!(h.await.unwrap(), 3);
        });
    });
}

// A task woken 100 times by another task before it gets to run is polled once for all of them.
#[test]
fn a_hundred_wakes_before_running_make_one_poll() {
    within(10, || {
        let rt = Runtime::new().unwrap();
        // A task that stores its waker on every poll until `finish` is set.
        let polls = Rc::new(Cell::new(0u32));
        let stored: Rc<RefCell<Option<Waker>>> = Rc::default();
        let finish = Rc::new(Cell::new(false));
        let (p, s, f) = (polls.clone(), stored.clone(), finish.clone());
        rt.block_on(async {
            let waited = spawn(poll_fn(move |cx| {
                p.set(p.get() + 1);
                if f.get() {
                    return Poll::Ready(p.get());
                }
                *s.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }));
            let (s, pc) = (stored.clone(), polls.clone());
            let waker_task = spawn(async move {
                let w = s
                    .borrow()
                    .clone()
                    .expect("the first task ran before this one");
                assert_eq!(pc.get(), 1);
                for _ in 0..100 {
                    w.wake_by_ref();
                }
                assert_eq!(pc.get(), 1, "a wake only queues, it never polls inline");
            });
            waker_task.await.unwrap();
            for _ in 0..50 {
                yield_now().await;
            }
            assert_eq!(
                polls.get(),
                2,
                "100 wakes before running must make exactly one poll"
            );
            finish.set(true);
            stored.borrow_mut().take().unwrap().wake();
            assert_eq!(waited.await.unwrap(), 3);
        });
    });
}

// A task that yields forever does not starve I/O: a TCP echo round trip completes while it keeps yielding.
#[test]
fn a_yield_forever_task_does_not_starve_a_socket_task() {
    within(120, || {
        const BOUND: u64 = 10_000_000;
        let rt = Runtime::new().unwrap();
        let iterations = Rc::new(Cell::new(0u64));
        let hit_bound = Rc::new(Cell::new(false));
        let (it, hit) = (iterations.clone(), hit_bound.clone());
        rt.spawn(async move {
            loop {
                if it.get() >= BOUND {
                    hit.set(true); // safety net: the round trip never got through
                    return;
                }
                it.set(it.get() + 1);
                yield_now().await;
            }
        });
        let echoed = rt.block_on(async {
            let listener = TcpListener::bind(loopback_any()).unwrap();
            let addr = listener.local_addr().unwrap();
            let server = spawn(async move {
                let (conn, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 64];
                let n = conn.read(&mut buf).await.unwrap();
                conn.write_all(&buf[..n]).await.unwrap();
            });
            let client = TcpStream::connect(addr).await.unwrap();
            client.write_all(b"are you there?").await.unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 64];
            while got.len() < 14 {
                let n = client.read(&mut buf).await.unwrap();
                assert!(n > 0, "early EOF");
                got.extend_from_slice(&buf[..n]);
            }
            server.await.unwrap();
            got
        });
        assert_eq!(echoed, b"are you there?");
        assert!(
            !hit_bound.get(),
            "the echo only finished after the yielder gave up"
        );
        assert!(iterations.get() > 0, "the yielder never ran");
        assert_eq!(rt.live_tasks(), 1, "the yielder is still yielding");
    });
}

// The I/O budget makes an always-ready reader yield, so a task that only yields keeps progressing next to it.
#[test]
fn an_always_ready_reader_does_not_starve_others() {
    within(120, || {
        const READS: u64 = 100_000;
        const CHUNK: usize = 64;
        let std_listener = std::net::TcpListener::bind(loopback_any()).unwrap();
        let addr = std_listener.local_addr().unwrap();
        // The peer: a plain thread keeping the socket full of a known pattern
        // (byte k of the stream is k % 251), until the reader hangs up.
        let writer = thread::spawn(move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
            let block: Vec<u8> = (0..251 * 256).map(|k| (k % 251) as u8).collect();
            let mut sent = 0u64;
            while sent < (4 << 30) && s.write_all(&block).is_ok() {
                sent += block.len() as u64;
            }
            sent
        });
        let (accepted, _) = std_listener.accept().unwrap();

        let rt = Runtime::new().unwrap();
        let (reads, yields, yields_when_reader_done) = rt.block_on(async {
            let conn = TcpStream::from_std(accepted).unwrap();
            let reader_done = Rc::new(Cell::new(false));
            let yields = Rc::new(Cell::new(0u64));
            let (rd, y) = (reader_done.clone(), yields.clone());
            let reader = spawn(async move {
                let mut buf = [0u8; CHUNK];
                let mut offset = 0u64;
                let mut reads = 0u64;
                let mut yields_seen = 0;
                while reads < READS {
                    let n = conn.read(&mut buf).await.unwrap();
                    assert!(n > 0, "unexpected EOF");
                    for (i, &b) in buf[..n].iter().enumerate() {
                        assert_eq!(b, ((offset + i as u64) % 251) as u8, "corrupt byte");
                    }
                    offset += n as u64;
                    reads += 1;
                    yields_seen = y.get();
                }
                rd.set(true);
                (reads, yields_seen)
            });
            let counter = spawn(async move {
                // Bounded: the reader finishes long before.
                for _ in 0..10_000_000u64 {
                    if reader_done.get() {
                        break;
                    }
                    yields.set(yields.get() + 1);
                    yield_now().await;
                }
                yields.get()
            });
            let (reads, seen) = reader.await.unwrap();
            (reads, counter.await.unwrap(), seen)
        });
        let sent = writer.join().expect("writer thread");
        assert_eq!(reads, READS);
        assert!(sent > 0);
        // With a budget of B reads per poll the two tasks alternate at least
        // every B reads; without it the counter would barely move.
        let floor = READS / u64::from(runtime::coop::TASK_BUDGET) - 1;
        assert!(
            yields_when_reader_done >= floor,
            "the yielding task ran {yields_when_reader_done} times during {READS} reads, expected >= {floor}"
        );
        assert!(yields >= yields_when_reader_done);
    });
}

// Runtime::spawn before block_on runs the task at the next block_on; runtime::spawn outside block_on panics.
#[test]
fn spawn_before_block_on_and_spawn_outside_a_runtime() {
    within(10, || {
        let rt = Runtime::new().unwrap();
        let ran = Rc::new(Cell::new(false));
        let r = ran.clone();
        let h = rt.spawn(async move {
            r.set(true);
            yield_now().await;
            5u32
        });
        assert!(!ran.get(), "nothing runs before block_on");
        assert_eq!(rt.live_tasks(), 1);
        assert_eq!(rt.block_on(h).unwrap(), 5);
        assert!(ran.get());
        assert_eq!(rt.live_tasks(), 0);

        let err = catch_unwind(|| {
            spawn(async {});
        })
        .expect_err("runtime::spawn outside block_on must panic");
        let msg = payload_message(err.as_ref());
        assert!(
            msg.contains("outside Runtime::block_on"),
            "unclear message: {msg}"
        );
    });
}

// A task queued with Runtime::spawn is ready when block_on starts, so the main future's first yield_now lets it run.
#[test]
fn spawn_before_block_on_runs_before_mains_first_yield_returns() {
    within(10, || {
        let rt = Runtime::new().unwrap();
        let ran = Rc::new(Cell::new(false));
        let r = ran.clone();
        rt.spawn(async move { r.set(true) });
        // yield_now: "letting every other ready task ... run first".
        let ran_before_yield_returned = rt.block_on(async {
            yield_now().await;
            ran.get()
        });
        assert!(
            ran_before_yield_returned,
            "a task spawned before block_on did not run during the main future's yield"
        );
    });
}

// Dropping the Runtime drops every unfinished task (destructors run) without hanging; their handles report Cancelled.
#[test]
fn dropping_the_runtime_drops_unfinished_tasks() {
    within(10, || {
        let rt = Runtime::new().unwrap();
        let flags: Vec<Rc<Cell<bool>>> = (0..4).map(|_| Rc::new(Cell::new(false))).collect();

        // Waiting on a socket, waiting on a long timer, waiting on nothing, never polled.
        let started = Rc::new(Cell::new(0u32));
        let listener = rt.block_on(async { TcpListener::bind(loopback_any()).unwrap() });
        let (g, st) = (SetOnDrop(flags[0].clone()), started.clone());
        let on_socket = rt.spawn(async move {
            let _g = g;
            st.set(st.get() + 1);
            let _ = listener.accept().await;
        });
        let (g, st) = (SetOnDrop(flags[1].clone()), started.clone());
        let on_timer = rt.spawn(async move {
            let _g = g;
            st.set(st.get() + 1);
            time::sleep(Duration::from_secs(3600)).await;
        });
        let (g, st) = (SetOnDrop(flags[2].clone()), started.clone());
        let on_nothing = rt.spawn(async move {
            let _g = g;
            st.set(st.get() + 1);
            std::future::pending::<()>().await;
        });
        // Tasks spawned from outside wait in the remote queue, which the
        // executor collects at its next look at the reactor (at most
        // EVENT_INTERVAL polls away): yield until all three have started.
        rt.block_on(async {
            for _ in 0..1000 {
                if started.get() == 3 {
                    break;
                }
                yield_now().await;
            }
        });
        assert_eq!(started.get(), 3, "the spawned tasks never started");
        assert_eq!(rt.live_tasks(), 3);
        assert_eq!(rt.registered_fds(), 1);
        assert_eq!(rt.pending_timers(), 1);
        let g = SetOnDrop(flags[3].clone());
        let never_polled = rt.spawn(async move {
            let _g = g;
        });
        assert!(flags.iter().all(|f| !f.get()));

        drop(rt);
        assert!(
            flags.iter().all(|f| f.get()),
            "every task's future must be dropped"
        );
        let mut cx = Context::from_waker(Waker::noop());
        for mut h in [on_socket, on_timer, on_nothing, never_polled] {
            assert!(h.is_finished());
            match Pin::new(&mut h).poll(&mut cx) {
                Poll::Ready(Err(e)) => assert!(e.is_cancelled(), "{e:?}"),
                other => panic!("expected Ready(Err(Cancelled)), got {other:?}"),
            }
        }
    });
}

// A destructor that spawns clean-up while the Runtime is dropped must not panic (Runtime::drop's drain loop exists for this).
#[test]
fn dropping_the_runtime_lets_destructors_spawn() {
    within(10, || {
        struct SpawnOnDrop(Rc<Cell<u32>>);
        impl Drop for SpawnOnDrop {
            fn drop(&mut self) {
                let dropped = self.0.clone();
                self.0.set(self.0.get() + 1);
                // Clean-up work started from a destructor; it will never run,
                // but it must be accepted and then dropped too.
                let cleanup = SetOnDropCount(dropped);
                drop(spawn(async move {
                    let _c = cleanup;
                }));
            }
        }
        struct SetOnDropCount(Rc<Cell<u32>>);
        impl Drop for SetOnDropCount {
            fn drop(&mut self) {
                self.0.set(self.0.get() + 10);
            }
        }

        let counter = Rc::new(Cell::new(0u32));
        let rt = Runtime::new().unwrap();
        let g = SpawnOnDrop(counter.clone());
        rt.spawn(async move {
            let _g = g;
            std::future::pending::<()>().await;
        });
        let result = catch_unwind(AssertUnwindSafe(move || drop(rt)));
        if let Err(payload) = &result {
            panic!(
                "dropping the Runtime panicked: {}",
                payload_message(payload.as_ref())
            );
        }
        assert_eq!(
            counter.get(),
            11,
            "the task and the clean-up it spawned are both dropped"
        );
    });
}

// block_on inside block_on panics with a message saying why, and both runtimes stay usable afterwards.
#[test]
fn nested_block_on_panics_with_a_clear_message() {
    within(10, || {
        let outer = Runtime::new().unwrap();
        let inner = Runtime::new().unwrap();
        let inner_ran = AtomicU32::new(0);
        let result = catch_unwind(AssertUnwindSafe(|| {
            outer.block_on(async {
                inner.block_on(async { inner_ran.fetch_add(1, Ordering::Relaxed) });
            })
        }));
        let payload = result.expect_err("a nested block_on must panic");
        let msg = payload_message(payload.as_ref());
        assert!(
            msg.contains("block_on called from inside a running runtime"),
            "unclear message: {msg}"
        );
        assert_eq!(
            inner_ran.load(Ordering::Relaxed),
            0,
            "the inner future must not run"
        );

        // The thread-locals were restored by the unwind.
        assert_eq!(
            outer.block_on(async { spawn(async { 2 }).await.unwrap() }),
            2
        );
        assert_eq!(inner.block_on(async { 3 }), 3);
        assert!(
            catch_unwind(|| drop(spawn(async {}))).is_err(),
            "no runtime is current any more"
        );
    });
}
