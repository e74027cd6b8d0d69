//! The "hello world" of the runtime: an echo server.
//!
//! ```text
//! cargo run -p runtime --example echo            # listens on 127.0.0.1:7000
//! cargo run -p runtime --example echo -- 127.0.0.1:7001
//! printf 'hello\n' | nc -q1 127.0.0.1 7000       # prints hello back
//! ```
//!
//! One task accepts; each connection gets its own task that reads and writes
//! back until the client closes. Ctrl-C (SIGINT) or SIGTERM stops it cleanly.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use runtime::combinator::{Either, select};
use runtime::net::{TcpListener, TcpStream, is_fd_exhaustion};
use runtime::signal::{Signal, Signals};
use runtime::{Runtime, spawn, time};

fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:7000".to_string());
    let addr: SocketAddr = match addr.parse() {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("echo: '{addr}' is not an address like 127.0.0.1:7000: {e}");
            std::process::exit(2);
        }
    };
    let result = Runtime::new().and_then(|rt| rt.block_on(serve(addr)));
    if let Err(e) = result {
        eprintln!("echo: {e}");
        std::process::exit(1);
    }
}

async fn serve(addr: SocketAddr) -> io::Result<()> {
    // Before any other thread exists, so every thread blocks these signals.
    let signals = Signals::new(&[Signal::Interrupt, Signal::Terminate])?;
    let listener = TcpListener::bind(addr)?;
    println!("echo: listening on {}", listener.local_addr()?);
    loop {
        match select(signals.recv(), listener.accept()).await {
            Either::Left(signal) => {
                println!("echo: {:?}, stopping", signal?);
                return Ok(());
            }
            Either::Right(Ok((conn, peer))) => {
                spawn(async move {
                    if let Err(e) = echo(&conn).await {
                        eprintln!("echo: {peer}: {e}");
                    }
                });
            }
            // Out of descriptors: the connection waits in the kernel's queue.
            // Back off instead of spinning; open connections keep being served.
            Either::Right(Err(e)) if is_fd_exhaustion(&e) => {
                eprintln!("echo: accept: {e}; retrying in 100 ms");
                time::sleep(Duration::from_millis(100)).await;
            }
            Either::Right(Err(e)) => eprintln!("echo: accept: {e}"),
        }
    }
}

async fn echo(conn: &TcpStream) -> io::Result<()> {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = conn.read(&mut buf).await?;
        if n == 0 {
            return Ok(()); // the client closed: we are done
        }
        conn.write_all(&buf[..n]).await?;
    }
}
