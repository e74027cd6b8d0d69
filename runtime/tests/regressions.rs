//! One regression test per pitfall that real runtimes hit (mio, tokio and
//! async-io issue trackers), each named after the pitfall it guards against.
//!
//! Tests that change process-wide state (RLIMIT_NOFILE, signal handlers) run
//! their body in a child process: this same test binary, started again with
//! `--exact <test name>` and an environment variable that selects the body.

mod common;

use std::future::poll_fn;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::AsRawFd;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, mpsc};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use common::{CountingWaker, until_woken};
use nix::sys::signal::{Signal as NixSignal, kill};
use nix::unistd::Pid;
use runtime::fd_limit::set_nofile_soft_limit;
use runtime::net::{TcpListener, TcpStream, is_fd_exhaustion};
use runtime::{Runtime, oneshot, spawn, time, yield_now};

const CHILD_ENV: &str = "RUNTIME_REGRESSION_CHILD";

/// In the parent: runs `test_name` again in a child process with `CHILD_ENV`
/// set and asserts it succeeded. In the child: returns true, so the caller
/// runs the body instead.
fn in_child_process(test_name: &str) -> bool {
    if std::env::var(CHILD_ENV).as_deref() == Ok(test_name) {
        return true;
    }
    let out = child_command(test_name)
        .output()
        .expect("start the child test process");
    check_child(test_name, out);
    false
}

/// Like [`in_child_process`], but while the child runs the parent calls
/// `poke` with its pid about every 5 ms (to signal it from outside).
fn in_child_process_poked(test_name: &str, mut poke: impl FnMut(Pid)) -> bool {
    if std::env::var(CHILD_ENV).as_deref() == Ok(test_name) {
        return true;
    }
    let mut child = child_command(test_name)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the child test process");
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("a pid fits in i32"));
    while child.try_wait().expect("wait for the child").is_none() {
        poke(pid);
        thread::sleep(Duration::from_millis(5));
    }
    check_child(
        test_name,
        child.wait_with_output().expect("the child's output"),
    );
    false
}

/// This test binary, to run `test_name` alone with `CHILD_ENV` set.
fn child_command(test_name: &str) -> Command {
    let exe = std::env::current_exe().expect("path of the test binary");
    let mut command = Command::new(exe);
    command
        .args(["--exact", test_name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, test_name);
    command
}

/// Asserts that the child ran the test body and passed.
fn check_child(test_name: &str, out: Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "child for {test_name} failed: {}\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("1 passed"),
        "the child did not run the test body:\n{stdout}"
    );
}

/// Sets the soft RLIMIT_NOFILE of this (child) process.
fn set_fd_limit(limit: u64) {
    set_nofile_soft_limit(limit).expect("setrlimit");
}

/// Opens /dev/null until the process is out of descriptors (bounded).
fn exhaust_descriptors() -> Vec<std::fs::File> {
    let mut fillers = Vec::new();
    for _ in 0..10_000 {
        match std::fs::File::open("/dev/null") {
            Ok(f) => fillers.push(f),
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => return fillers,
            Err(e) => panic!("unexpected error while filling the fd table: {e}"),
        }
    }
    panic!("10,000 opens did not exhaust the descriptor limit");
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().expect("literal address")
}

/// Pitfall: EMFILE/ENFILE on accept. The accept loop must back off on a
/// timer (not spin), keep serving, and lose none of the connections that
/// were queued while descriptors were exhausted.
#[test]
fn emfile_on_accept_backs_off_and_loses_no_queued_connection() {
    if !in_child_process("emfile_on_accept_backs_off_and_loses_no_queued_connection") {
        return;
    }
    const CLIENTS: usize = 20;
    set_fd_limit(128);
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let listener = TcpListener::bind(loopback()).unwrap();
        let addr = listener.local_addr().unwrap();
        // The clients connect now, so their handshakes finish in the backlog
        // and their sockets exist before the descriptor table is full.
        let clients: Vec<std::net::TcpStream> = (0..CLIENTS)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        let fillers = exhaust_descriptors();

        let (done_tx, done_rx) = oneshot::channel();
        let client_thread = thread::spawn(move || {
            for (i, mut c) in clients.into_iter().enumerate() {
                c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                c.write_all(format!("ping {i}\n").as_bytes()).unwrap();
                c.shutdown(Shutdown::Write).unwrap();
                let mut reply = String::new();
                c.read_to_string(&mut reply).unwrap();
                assert_eq!(reply, format!("ping {i}\n"), "client {i}");
            }
            let _ = done_tx.send(());
        });

        // Free the descriptors after a while: this task must get to run
        // even while the accept loop keeps failing.
        let releaser = spawn(async move {
            time::sleep(Duration::from_millis(300)).await;
            drop(fillers);
        });

        let (mut served, mut exhausted) = (0, 0);
        let started = Instant::now();
        while served < CLIENTS {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "accept loop stuck"
            );
            match listener.accept().await {
                Ok((conn, _)) => {
                    served += 1;
                    spawn(async move {
                        let mut buf = [0u8; 64];
                        loop {
                            match conn.read(&mut buf).await {
                                Ok(0) | Err(_) => break,
                                Ok(n) => conn.write_all(&buf[..n]).await.unwrap(),
                            }
                        }
                    });
                }
                Err(e) if is_fd_exhaustion(&e) => {
                    exhausted += 1;
                    time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("unexpected accept error: {e}"),
            }
        }
        releaser.await.unwrap();
        // The echo tasks keep running while we wait for the client thread.
        let finished = time::timeout(Duration::from_secs(30), done_rx).await;
        assert!(
            client_thread.join().is_ok(),
            "a client did not get its echo"
        );
        assert_eq!(finished, Ok(Ok(())), "the client thread did not finish");
        assert!(exhausted >= 1, "the test never hit EMFILE");
        // 300 ms of exhaustion with a 20 ms back-off is ~15 attempts; a
        // spinning loop would make thousands.
        assert!(
            exhausted < 100,
            "accept retried {exhausted} times: it spins instead of backing off"
        );
        println!("EMFILE hit {exhausted} times, {served} connections served");
    });
}

/// Pitfall: starvation by an always-ready resource (tokio #4782). An accept
/// loop that retries EMFILE with no back-off at all must still yield: every
/// I/O result, errors included, is charged to the task's budget.
#[test]
fn an_accept_loop_spinning_on_emfile_does_not_starve_other_tasks() {
    if !in_child_process("an_accept_loop_spinning_on_emfile_does_not_starve_other_tasks") {
        return;
    }
    set_fd_limit(64);
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let listener = TcpListener::bind(loopback()).unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        // One reactor turn records the listener as readable, so the first
        // accept below goes to the kernel (and meets EMFILE) instead of waiting.
        yield_now().await;
        let fillers = exhaust_descriptors();
        // The task that frees descriptors. Without budgeting on errors, the
        // loop below never returns Pending and this never runs: a hang.
        spawn(async move {
            yield_now().await;
            drop(fillers);
        });
        let mut errors = 0u64;
        let accepted = loop {
            match listener.accept().await {
                Ok((conn, _)) => break conn,
                Err(e) if is_fd_exhaustion(&e) => errors += 1,
                Err(e) => panic!("unexpected accept error: {e}"),
            }
            assert!(errors < 10_000_000, "the releasing task never ran");
        };
        assert!(errors >= 1, "the test never hit EMFILE");
        drop((accepted, client));
    });
}

/// Pitfall: EPOLLRDHUP read as HUP. After the peer half-closes, our read
/// side is at EOF but our write side is open: a writer that fills the send
/// buffer must wait (not be woken in a loop), and must be woken once the
/// peer drains.
#[test]
fn a_half_closed_socket_neither_spins_the_writer_nor_loses_the_write_side() {
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let listener = TcpListener::bind(loopback()).unwrap();
        let mut peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (ours, _) = listener.accept().await.unwrap();
        peer.shutdown(Shutdown::Write).unwrap(); // the peer sends FIN: RDHUP for us
        let mut buf = [0u8; 16];
        assert_eq!(
            ours.read(&mut buf).await.unwrap(),
            0,
            "EOF on the read side"
        );
        // The read found EOF by itself (an accepted socket reads
        // speculatively); one reactor turn records the RDHUP event too.
        time::sleep(Duration::from_millis(5)).await;
        assert!(ours.is_read_closed());

        // Fill our send buffer (and the peer's receive buffer) until EAGAIN.
        let chunk = vec![0x5a; 64 * 1024];
        let count = Arc::new(CountingWaker::default());
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut queued = 0usize;
        for _ in 0..10_000 {
            match ours.poll_write(&mut cx, &chunk) {
                Poll::Ready(Ok(n)) => queued += n,
                Poll::Ready(Err(e)) => panic!("write on a half-closed socket failed: {e}"),
                Poll::Pending => break,
            }
        }
        assert!(queued > 0);
        // Turn the reactor several times: RDHUP must not make the writer ready.
        for _ in 0..5 {
            time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(
            count.count(),
            0,
            "the writer was woken with nothing to write into"
        );

        // The peer drains: now the writer must be woken.
        let reader = thread::spawn(move || {
            let mut sink = vec![0u8; 1 << 20];
            let mut total = 0;
            while total < queued {
                match peer.read(&mut sink) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => total += n,
                }
            }
            total
        });
        until_woken(&count, Duration::from_secs(10)).await;
        assert!(
            ours.poll_write(&mut cx, &chunk).is_ready(),
            "writable after the peer drained"
        );
        drop(ours);
        assert!(reader.join().unwrap() >= queued);
    });
}

/// Pitfall: a stale event for a closed descriptor whose number was reused.
/// The token is freed before the close (and the close takes the socket out
/// of the epoll set), so the new socket with the same number starts with
/// no readiness of the old one.
#[test]
fn a_reused_fd_number_does_not_inherit_the_old_sockets_readiness() {
    // In a child process: with no other test opening descriptors, the
    // kernel's "lowest free number" rule makes the reuse certain.
    if !in_child_process("a_reused_fd_number_does_not_inherit_the_old_sockets_readiness") {
        return;
    }
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let listener = TcpListener::bind(loopback()).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut old_peer = std::net::TcpStream::connect(addr).unwrap();
        let (old, _) = listener.accept().await.unwrap();
        old_peer.write_all(b"data for the old socket").unwrap();
        // A reactor turn records the old socket as readable; then close it unread.
        time::sleep(Duration::from_millis(10)).await;
        let old_fd = old.as_raw_fd();
        // The new peer's socket is made first, so the freed number goes to
        // the accepted socket.
        let _new_peer = std::net::TcpStream::connect(addr).unwrap();
        drop(old);
        let (new, _) = listener.accept().await.unwrap();
        assert_eq!(
            new.as_raw_fd(),
            old_fd,
            "the kernel reuses the lowest free number"
        );
        time::sleep(Duration::from_millis(10)).await; // a reactor turn
        let count = Arc::new(CountingWaker::default());
        let waker = Waker::from(count.clone());
        let mut buf = [0u8; 64];
        match new.poll_read(&mut Context::from_waker(&waker), &mut buf) {
            Poll::Pending => {}
            other => panic!("the new socket has no data, yet read gave {other:?}"),
        }
        time::sleep(Duration::from_millis(10)).await;
        assert_eq!(
            count.count(),
            0,
            "a stale event woke the new socket's reader"
        );
    });
}

/// Pitfall: EINTR from epoll_wait. A stream of interruptions must neither
/// end a timed wait early nor lose the timer.
///
/// The interruptions come from outside, with no signal handler to install:
/// the parent stops the child (SIGSTOP) and lets it go on (SIGCONT) again
/// and again, and Linux makes an `epoll_wait` resumed that way return EINTR
/// (signal(7), "Interruption of system calls and library functions by stop
/// signals").
#[test]
fn eintr_during_epoll_wait_neither_ends_a_sleep_early_nor_loses_it() {
    let mut pokes = 0;
    let poke = |pid: Pid| {
        // Errors mean the child has just exited: nothing left to interrupt.
        if kill(pid, NixSignal::SIGSTOP).is_ok() {
            thread::sleep(Duration::from_millis(1));
            let _ = kill(pid, NixSignal::SIGCONT);
            pokes += 1;
        }
    };
    if !in_child_process_poked(
        "eintr_during_epoll_wait_neither_ends_a_sleep_early_nor_loses_it",
        poke,
    ) {
        assert!(
            pokes >= 10,
            "only {pokes} stop/continue rounds reached the child"
        );
        return;
    }
    let rt = Runtime::new().unwrap();
    let started = Instant::now();
    rt.block_on(time::sleep(Duration::from_millis(300)));
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(300),
        "the sleep ended early: {elapsed:?}"
    );
    assert!(
        elapsed < Duration::from_secs(5),
        "the sleep was lost or stretched: {elapsed:?}"
    );
}

/// Pitfall: descriptors leaking into child processes. Everything the
/// runtime opens is close-on-exec (and sockets non-blocking), visible in
/// /proc/self/fdinfo.
#[test]
fn every_descriptor_the_runtime_opens_is_cloexec_and_sockets_nonblocking() {
    fn flags(fd: i32) -> u32 {
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).expect("fdinfo");
        let line = info
            .lines()
            .find(|l| l.starts_with("flags:"))
            .expect("a flags line");
        u32::from_str_radix(line["flags:".len()..].trim(), 8).expect("octal flags")
    }
    let (cloexec, nonblock) = (libc::O_CLOEXEC as u32, libc::O_NONBLOCK as u32);
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let listener = TcpListener::bind(loopback()).unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        for (what, fd) in [
            ("listener", listener.as_raw_fd()),
            ("connected", client.as_raw_fd()),
            ("accepted", accepted.as_raw_fd()),
        ] {
            let f = flags(fd);
            assert_ne!(f & cloexec, 0, "{what} socket lacks O_CLOEXEC");
            assert_ne!(f & nonblock, 0, "{what} socket is blocking");
        }
        // The runtime's own epoll set and eventfd.
        let mut anon = 0;
        for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
            let Ok(target) = std::fs::read_link(entry.path()) else {
                continue;
            };
            let target = target.to_string_lossy().into_owned();
            if target == "anon_inode:[eventpoll]" || target == "anon_inode:[eventfd]" {
                let fd: i32 = entry.file_name().to_string_lossy().parse().unwrap();
                assert_ne!(flags(fd) & cloexec, 0, "{target} (fd {fd}) lacks O_CLOEXEC");
                anon += 1;
            }
        }
        assert!(
            anon >= 2,
            "found {anon} epoll/eventfd descriptors, expected ours"
        );
    });
}

/// Pitfall: lost wake-up between checking a condition and storing the
/// waker, across threads. 2,000 rounds of a value produced on another thread
/// right as the task looks for it; any lost wake hangs (caught by the bound).
#[test]
fn cross_thread_wakes_are_never_lost() {
    use std::sync::Mutex;
    struct Slot {
        value: Option<u32>,
        waker: Option<Waker>,
    }
    let rt = Runtime::new().unwrap();
    let (req_tx, req_rx) = mpsc::channel::<Arc<Mutex<Slot>>>();
    let producer = thread::spawn(move || {
        let mut n = 0;
        while let Ok(slot) = req_rx.recv() {
            let waker = {
                let mut s = slot.lock().unwrap();
                s.value = Some(n);
                s.waker.take()
            };
            if let Some(w) = waker {
                w.wake(); // outside the lock
            }
            n += 1;
        }
    });
    let started = Instant::now();
    rt.block_on(async {
        for round in 0..2_000u32 {
            let slot = Arc::new(Mutex::new(Slot {
                value: None,
                waker: None,
            }));
            req_tx.send(slot.clone()).unwrap();
            let got = time::timeout(
                Duration::from_secs(10),
                poll_fn(|cx| {
                    let mut s = slot.lock().unwrap();
                    // Store the waker and check, under one lock.
                    match s.value {
                        Some(v) => Poll::Ready(v),
                        None => {
                            s.waker = Some(cx.waker().clone());
                            Poll::Pending
                        }
                    }
                }),
            )
            .await;
            assert_eq!(
                got,
                Ok(round),
                "round {round}: the wake from the producer thread was lost"
            );
        }
    });
    drop(req_tx);
    producer.join().unwrap();
    assert!(started.elapsed() < Duration::from_secs(60));
}

/// Pitfall: a wake after the runtime is gone (tokio PR #6148, async-executor
/// #163) must be a no-op, from any thread, not a crash.
#[test]
fn waking_after_the_runtime_is_dropped_is_a_no_op() {
    let rt = Runtime::new().unwrap();
    let (tx, rx) = mpsc::channel::<Waker>();
    rt.spawn(poll_fn(move |cx| {
        tx.send(cx.waker().clone()).unwrap();
        Poll::<()>::Pending
    }));
    rt.block_on(yield_now());
    let waker = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the task ran and sent its waker");
    assert_eq!(rt.live_tasks(), 1);
    drop(rt);
    waker.wake_by_ref();
    let other = waker.clone();
    thread::spawn(move || other.wake())
        .join()
        .expect("a remote wake after drop must not panic");
    drop(waker);
}

/// Descriptors are deregistered when their owner drops (their tokens freed,
/// and the kernel takes them out of the epoll set as they close), so the
/// reactor's table does not grow with closed sockets.
#[test]
fn dropped_sockets_are_deregistered() {
    let rt = Runtime::new().unwrap();
    let base = rt.registered_fds();
    rt.block_on(async {
        let listener = TcpListener::bind(loopback()).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut conns = Vec::new();
        for _ in 0..50 {
            let c = TcpStream::connect(addr).await.unwrap();
            let (a, _) = listener.accept().await.unwrap();
            conns.push((c, a));
        }
        assert_eq!(rt.registered_fds(), base + 101);
    });
    assert_eq!(rt.registered_fds(), base);
}

/// The descriptors the kernel watches in this process's only epoll set, as
/// `/proc/self/fdinfo` lists them (a `tfd:` line per watched descriptor).
/// For a child process running one runtime: that runtime's set.
fn watched_fds() -> Vec<i32> {
    let mut sets = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd") {
        let entry = entry.expect("a descriptor entry");
        let target = std::fs::read_link(entry.path()).unwrap_or_default();
        if target.to_string_lossy() == "anon_inode:[eventpoll]" {
            sets.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    assert_eq!(sets.len(), 1, "one epoll set in the child: {sets:?}");
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", sets[0])).expect("fdinfo");
    info.lines()
        .filter_map(|line| line.strip_prefix("tfd:"))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect()
}

/// Pitfall (and a system call saved): a socket the runtime created is closed
/// without EPOLL_CTL_DEL. The kernel takes a closed file out of every epoll
/// set by itself, but only when its *last* descriptor closes: a `dup` keeps
/// the registration alive under the old token, whose events must then wake
/// nobody. An adopted descriptor (`AsyncFd::new`, which may have copies) is
/// still removed explicitly.
#[test]
fn closing_without_epoll_ctl_del_leaves_no_live_registration() {
    if !in_child_process("closing_without_epoll_ctl_del_leaves_no_live_registration") {
        return;
    }
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let listener = TcpListener::bind(loopback()).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut peer = std::net::TcpStream::connect(addr).unwrap();
        let (alone, _) = listener.accept().await.unwrap();
        let fd = alone.as_raw_fd();
        assert!(watched_fds().contains(&fd), "registered once, at accept");
        drop(alone);
        assert!(
            !watched_fds().contains(&fd),
            "its close took it out of the set"
        );

        // The same, with a copy of the descriptor kept open.
        let mut peer2 = std::net::TcpStream::connect(addr).unwrap();
        let (copied, _) = listener.accept().await.unwrap();
        let fd = copied.as_raw_fd();
        let copy = std::os::fd::AsFd::as_fd(&copied)
            .try_clone_to_owned()
            .unwrap();
        drop(copied);
        assert!(
            watched_fds().contains(&fd),
            "the copy keeps the file, and with it the registration"
        );
        // A newcomer, woken only by its own events, never by the old token's.
        let _peer3 = std::net::TcpStream::connect(addr).unwrap();
        let (newcomer, _) = listener.accept().await.unwrap();
        let count = Arc::new(CountingWaker::default());
        let waker = Waker::from(count.clone());
        let mut buf = [0u8; 16];
        assert!(
            newcomer
                .poll_read(&mut Context::from_waker(&waker), &mut buf)
                .is_pending()
        );
        peer2.write_all(b"to the dropped socket").unwrap();
        time::sleep(Duration::from_millis(20)).await; // reactor turns see the stale event
        assert_eq!(
            count.count(),
            0,
            "a stale event woke another socket's reader"
        );
        drop(copy);
        assert!(!watched_fds().contains(&fd), "the last close took it out");

        // Adopted: removed before it closes, even while a copy lives on.
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let a_copy = a.try_clone().unwrap();
        let fd = a.as_raw_fd();
        let adopted = runtime::async_fd::AsyncFd::new(a).unwrap();
        assert!(watched_fds().contains(&fd));
        drop(adopted);
        assert!(
            !watched_fds().contains(&fd),
            "EPOLL_CTL_DEL before the close"
        );
        drop(a_copy);

        // A listener handed to another process (SCM_RIGHTS) is
        // such a copy. `TcpListener::from_std` adopts, so the old process's
        // set forgets the socket the new one goes on accepting on.
        let std_listener = runtime::net::bind_std(loopback(), &Default::default()).unwrap();
        let handed = std_listener.try_clone().unwrap();
        let adopted = TcpListener::from_std(std_listener).unwrap();
        let fd = adopted.as_raw_fd();
        assert!(watched_fds().contains(&fd));
        drop(adopted);
        assert!(
            !watched_fds().contains(&fd),
            "a listener whose copy lives on left the set before it closed"
        );
        let _client = std::net::TcpStream::connect(handed.local_addr().unwrap()).unwrap();
        assert!(handed.accept().is_ok(), "the copy still listens");
        peer.write_all(b"x").unwrap();
    });
}
