//! Signals read through a signalfd, and one runtime per thread sharing a
//! port through SO_REUSEPORT.
//!
//! Signals are sent to one thread only (`pthread_kill`), never to the
//! process: the harness's other threads do not block them, so a
//! process-directed SIGTERM would kill the whole test binary. Each signal
//! test runs on a fresh thread (`within`), so the mask it blocks dies with it.

mod common;

use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::Duration;

use common::within;
use nix::sys::pthread::{pthread_kill, pthread_self};
use nix::sys::signal::{SigSet, Signal as NixSignal};
use runtime::net::{ListenOptions, TcpListener};
use runtime::signal::{Signal, Signals};
use runtime::threads::spawn_runtimes;
use runtime::time::timeout;
use runtime::{Runtime, spawn};

/// The nix name of one of our signals.
fn nix_signal(signal: Signal) -> NixSignal {
    NixSignal::try_from(signal.number()).expect("a signal number nix knows")
}

/// Is `signal` blocked on the calling thread?
fn blocked_here(signal: Signal) -> bool {
    let mask = SigSet::thread_get_mask().expect("pthread_sigmask");
    mask.contains(nix_signal(signal))
}

/// Sends `signal` to the calling thread only.
fn raise_on_this_thread(signal: Signal) {
    // Only ever send a signal we are sure is blocked: otherwise its default
    // action (terminate) would take every other test down with us.
    assert!(
        blocked_here(signal),
        "Signals::new did not block {signal:?} on this thread; not sending it"
    );
    pthread_kill(pthread_self(), nix_signal(signal)).expect("pthread_kill");
}

/// Opens a `Signals` for `signal`, raises it on this thread, and expects
/// exactly one record back.
fn one_signal_round_trip(signal: Signal) {
    within(10, move || {
        let rt = Runtime::new().unwrap();
        rt.block_on(async {
            let signals = Signals::new(&[signal]).unwrap();
            raise_on_this_thread(signal);
            let got = timeout(Duration::from_secs(5), signals.recv())
                .await
                .unwrap_or_else(|_| panic!("{signal:?} was raised but never read"))
                .unwrap();
            assert_eq!(got, signal);
            // One signal, one record: nothing more to read.
            let more = timeout(Duration::from_millis(50), signals.recv()).await;
            assert!(more.is_err(), "a second record for one signal: {more:?}");
        });
        assert_eq!(rt.registered_fds(), 0);
    });
}

// A SIGHUP raised on this thread is delivered by Signals::recv as Signal::Hangup.
#[test]
fn sighup_is_received() {
    one_signal_round_trip(Signal::Hangup);
}

// A SIGUSR1 raised on this thread is delivered by Signals::recv as Signal::User1.
#[test]
fn sigusr1_is_received() {
    one_signal_round_trip(Signal::User1);
}

// A SIGQUIT raised on this thread is delivered by Signals::recv as Signal::Quit
// (blocked, so its default action, a core dump, does not run).
#[test]
fn sigquit_is_received() {
    one_signal_round_trip(Signal::Quit);
}

// A SIGTERM raised on this thread is delivered by Signals::recv as Signal::Terminate (not the default kill).
#[test]
fn sigterm_is_received() {
    one_signal_round_trip(Signal::Terminate);
}

// A SIGINT raised on this thread is delivered by Signals::recv as Signal::Interrupt.
#[test]
fn sigint_is_received() {
    one_signal_round_trip(Signal::Interrupt);
}

// One Signals for all three signals reports each of them once when all three are pending.
#[test]
fn three_pending_signals_are_each_received_once() {
    within(10, || {
        let rt = Runtime::new().unwrap();
        rt.block_on(async {
            let all = [Signal::Hangup, Signal::Terminate, Signal::Interrupt];
            let signals = Signals::new(&all).unwrap();
            for s in all {
                raise_on_this_thread(s);
            }
            let mut got = HashSet::new();
            for _ in 0..3 {
                let s = timeout(Duration::from_secs(5), signals.recv())
                    .await
                    .expect("a raised signal was never read")
                    .unwrap();
                assert!(got.insert(s), "{s:?} reported twice");
            }
            assert_eq!(got, HashSet::from(all));
        });
    });
}

/// Serves echo connections until one says STOP; returns how many it echoed.
/// Protocol: the client sends its message then FIN; the server answers and closes.
async fn serve_until_stop(listener: TcpListener) -> io::Result<u64> {
    let mut echoed = 0;
    loop {
        let (conn, _) = listener.accept().await?;
        let mut msg = Vec::new();
        let mut buf = [0u8; 1024];
        let read = timeout(Duration::from_secs(10), async {
            loop {
                match conn.read(&mut buf).await? {
                    0 => return io::Result::Ok(()),
                    n => msg.extend_from_slice(&buf[..n]),
                }
            }
        })
        .await;
        if !matches!(read, Ok(Ok(()))) {
            continue; // a client that vanished: not counted
        }
        if msg == b"STOP" {
            conn.write_all(b"BYE").await?;
            return Ok(echoed);
        }
        conn.write_all(&msg).await?;
        echoed += 1;
    }
}

/// One blocking exchange with the server: send `msg`, FIN, read to EOF.
fn exchange(addr: SocketAddr, msg: &[u8]) -> io::Result<Vec<u8>> {
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.set_write_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(msg)?;
    s.shutdown(Shutdown::Write)?;
    let mut reply = Vec::new();
    s.read_to_end(&mut reply)?;
    Ok(reply)
}

// Two runtimes on two threads share one port through SO_REUSEPORT: 200 connections all get their echo, and join's per-thread counts sum to 200.
#[test]
fn reuse_port_runtimes_share_the_connections() {
    within(60, || {
        const CONNECTIONS: u64 = 200;
        // Thread 0 binds port 0 and publishes the port; thread 1 binds the same port.
        let port: Arc<(Mutex<Option<u16>>, Condvar)> = Arc::default();
        let (bound_tx, bound_rx) = mpsc::channel::<SocketAddr>();
        let threads = spawn_runtimes(2, "reuseport", move |index| {
            let (port, bound_tx) = (port.clone(), bound_tx.clone());
            // Runs on the new thread, before its block_on: blocking here is fine.
            let wanted = if index == 0 {
                0
            } else {
                let (lock, cv) = &*port;
                let guard = cv
                    .wait_timeout_while(lock.lock().unwrap(), Duration::from_secs(10), |p| {
                        p.is_none()
                    })
                    .unwrap()
                    .0;
                guard.expect("thread 0 never published its port")
            };
            async move {
                let options = ListenOptions {
                    reuse_port: true,
                    ..ListenOptions::default()
                };
                let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, wanted));
                let listener = TcpListener::bind_with(addr, &options)?;
                let local = listener.local_addr()?;
                if index == 0 {
                    *port.0.lock().unwrap() = Some(local.port());
                    port.1.notify_all();
                }
                bound_tx.send(local).expect("test thread gone");
                serve_until_stop(listener).await
            }
        })
        .unwrap();
        assert_eq!(threads.len(), 2);

        let a = bound_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("thread bound");
        let b = bound_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("thread bound");
        assert_eq!(a, b, "both listeners on the same address");
        let addr = a;

        for i in 0..CONNECTIONS {
            let msg = format!("hello from connection {i}, {}", "x".repeat(i as usize));
            let reply = exchange(addr, msg.as_bytes()).unwrap();
            assert_eq!(reply, msg.as_bytes(), "connection {i}");
        }

        // Stop both: the kernel picks the listener, so repeat until nobody listens.
        let mut byes = 0;
        let mut refused = false;
        for _ in 0..100 {
            match exchange(addr, b"STOP") {
                Ok(reply) if reply == b"BYE" => byes += 1,
                // A connection queued on a listener that was just closing: retry.
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    refused = true;
                    break;
                }
                // Reset by the closing listener: the reset may come before
                // our half-close (NotConnected) or after it (ConnectionReset).
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionReset | io::ErrorKind::NotConnected
                    ) => {}
                Err(e) => panic!("stop exchange failed: {e}"),
            }
        }
        assert!(refused, "listeners still accepting after 100 stop attempts");
        assert_eq!(byes, 2, "each thread says BYE exactly once");

        let counts: Vec<u64> = threads
            .join()
            .expect("both runtime threads end cleanly")
            .into_iter()
            .map(|served| served.expect("a thread's server failed"))
            .collect();
        assert_eq!(counts.len(), 2);
        eprintln!("connections per thread: {counts:?}");
        assert_eq!(counts.iter().sum::<u64>(), CONNECTIONS);
    });
}

// join reports a runtime thread's panic as an error naming the thread and the message.
#[test]
fn join_reports_a_panicking_runtime_thread() {
    within(10, || {
        let threads = spawn_runtimes(2, "panicky", |index| async move {
            if index == 1 {
                panic!("thread {index} gives up");
            }
            spawn(async move { index * 10 }).await.unwrap()
        })
        .unwrap();
        let err = threads
            .join()
            .expect_err("a panicked thread must fail join");
        let msg = err.to_string();
        assert!(
            msg.contains("runtime thread 1 panicked: thread 1 gives up"),
            "{msg}"
        );
    });
}
