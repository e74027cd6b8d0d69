//! The load half of `scripts/race-repro.sh`: one run of a (ThreadSanitizer)
//! proxy build under concurrent load, and its count of data-race reports.
//!
//! ```text
//! cargo run -p proxy --example race_load -- PROXY_BINARY PICKER [--threads N]
//!     [--requests N] [--clients N] [--log FILE]
//! ```
//!
//! It starts three fixture backends on loopback (std threads; each answers
//! a request line with `backend PORT`), starts `PROXY_BINARY --mode pool
//! --picker PICKER` in front of them with its stderr in `FILE`, sends
//! `--requests` requests from `--clients` concurrent clients, stops the
//! proxy with SIGTERM, and prints one line:
//!
//! ```text
//! picker=racy tsan_reports=2 ok=400/400 served=134/133/133 exit=66
//! ```
//!
//! `tsan_reports` counts `WARNING: ThreadSanitizer: data race` in the
//! proxy's stderr; `exit` is its exit status (ThreadSanitizer turns 0 into
//! 66 when it reported anything). The script builds the table from these
//! lines. The example itself is an ordinary build: only the proxy under
//! test carries the sanitizer.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const TSAN_RACE: &str = "WARNING: ThreadSanitizer: data race";
const IO_TIMEOUT: Duration = Duration::from_secs(30);

struct Options {
    proxy: String,
    picker: String,
    threads: usize,
    requests: usize,
    clients: usize,
    log: String,
}

fn main() {
    match parse(std::env::args().skip(1).collect()).and_then(run) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("race_load: {e}");
            std::process::exit(1);
        }
    }
}

fn parse(args: Vec<String>) -> io::Result<Options> {
    let usage = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "usage: race_load PROXY_BINARY PICKER [--threads N] [--requests N] [--clients N] [--log FILE]",
        )
    };
    let mut it = args.into_iter();
    let (proxy, picker) = (it.next().ok_or_else(usage)?, it.next().ok_or_else(usage)?);
    let mut options = Options {
        log: format!("race-{picker}.log"),
        proxy,
        picker,
        threads: 8,
        requests: 400,
        clients: 32,
    };
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(usage)?;
        let number = || value.parse::<usize>().map_err(|_| usage());
        match flag.as_str() {
            "--threads" => options.threads = number()?,
            "--requests" => options.requests = number()?,
            "--clients" => options.clients = number()?.max(1),
            "--log" => options.log = value,
            _ => return Err(usage()),
        }
    }
    Ok(options)
}

fn run(options: Options) -> io::Result<()> {
    let backends = [backend()?, backend()?, backend()?];
    let mut proxy = start_proxy(&options, &backends)?;
    let result =
        listening_addr(&options.log, &mut proxy).map(|addr| drive_load(addr, &backends, &options));
    // Stop the proxy whatever happened, and let it print its last reports.
    let _ = kill(Pid::from_raw(proxy.id() as i32), Signal::SIGTERM);
    let status = wait_bounded(&mut proxy, Duration::from_secs(30))?;
    let (ok, served) = result?;
    let mut log = String::new();
    File::open(&options.log)?.read_to_string(&mut log)?;
    println!(
        "picker={} tsan_reports={} ok={ok}/{} served={} exit={}",
        options.picker,
        log.matches(TSAN_RACE).count(),
        options.requests,
        served
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join("/"),
        status.map_or_else(|| "killed".to_string(), |code| code.to_string()),
    );
    Ok(())
}

/// A backend that answers each request line with `backend PORT`.
fn backend() -> io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            thread::spawn(move || {
                let _ = answer(stream, addr.port());
            });
        }
    });
    Ok(addr)
}

fn answer(stream: TcpStream, port: u16) -> io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    (&stream).write_all(format!("backend {port}\n").as_bytes())
}

fn start_proxy(options: &Options, backends: &[SocketAddr]) -> io::Result<Child> {
    let log = File::create(&options.log)?;
    let mut command = Command::new(&options.proxy);
    command.args(["--listen", "127.0.0.1:0", "--mode", "pool"]);
    command.args(["--threads", &options.threads.to_string()]);
    command.args(["--picker", &options.picker]);
    for backend in backends {
        command.args(["--backend", &backend.to_string()]);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
}

/// Reads the proxy's log until its `listening on ADDR` line (bounded).
fn listening_addr(log: &str, proxy: &mut Child) -> io::Result<SocketAddr> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut text = String::new();
        File::open(log)?.read_to_string(&mut text)?;
        let found = text.lines().find_map(|line| {
            let rest = &line[line.find("listening on ")? + "listening on ".len()..];
            rest.split_whitespace().next()?.parse().ok()
        });
        if let Some(addr) = found {
            return Ok(addr);
        }
        if proxy.try_wait()?.is_some() || Instant::now() > deadline {
            return Err(io::Error::other(format!(
                "the proxy did not start; its stderr:\n{text}"
            )));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Sends the requests from concurrent clients; returns how many were
/// answered and how many each backend served.
fn drive_load(
    proxy: SocketAddr,
    backends: &[SocketAddr],
    options: &Options,
) -> (usize, Vec<usize>) {
    let next = AtomicUsize::new(0);
    let served: Vec<AtomicUsize> = backends.iter().map(|_| AtomicUsize::new(0)).collect();
    thread::scope(|s| {
        for _ in 0..options.clients {
            s.spawn(|| {
                while next.fetch_add(1, Ordering::Relaxed) < options.requests {
                    let Ok(port) = request(proxy) else { continue };
                    if let Some(i) = backends.iter().position(|b| b.port() == port) {
                        served[i].fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let served: Vec<usize> = served.iter().map(|n| n.load(Ordering::Relaxed)).collect();
    (served.iter().sum(), served)
}

/// One request: which backend port answered it.
fn request(proxy: SocketAddr) -> io::Result<u16> {
    let mut stream = TcpStream::connect(proxy)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.write_all(b"hello\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    answer
        .trim()
        .strip_prefix("backend ")
        .and_then(|port| port.parse().ok())
        .ok_or_else(|| io::Error::other(format!("unexpected answer {answer:?}")))
}

/// Waits for the proxy's exit; `None` if it had to be killed.
fn wait_bounded(proxy: &mut Child, limit: Duration) -> io::Result<Option<i32>> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = proxy.try_wait()? {
            return Ok(status.code());
        }
        thread::sleep(Duration::from_millis(20));
    }
    proxy.kill()?;
    proxy.wait()?;
    Ok(None)
}
