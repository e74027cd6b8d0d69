//! Workload C's keep-alive row as operators measure it: HTTP through
//! `wrk`, to nginx serving a small static file, straight and through every
//! proxy, beside the echo keep-alive row (which only our load client makes).
//!
//! ```text
//!   direct:       wrk -t1 -c64 ─────────────────────────────▶ nginx http, first port
//!   ours / peer:  wrk -t1 -c64 ──▶ proxy (round robin) ──────▶ nginx http, three ports
//! ```
//!
//! The backends are one nginx with one worker process listening on three
//! loopback ports, as the fixture backends are one thread on three ports:
//! direct or through a proxy, the same single process answers every
//! request, so a ratio to direct is what the proxy costs, not backend
//! capacity it added. Its configuration is generated into a temporary
//! directory of its own, like the peers' (peers.rs), and tunes nothing but
//! what would cut a measurement short: no access log to write, and no
//! request count or timer that closes a kept-alive connection.
//!
//! Its rate is one in question between proxies a few percent apart, so
//! every subject runs [`Sizes::repetitions`] times, interleaved with the
//! others, and its row is the run with the median rate (repeat.rs).

use std::fs;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::process::child::{
    Capture, ChildProcess, Ready, START_TIMEOUT, Spawn, TAIL_LINES, free_port,
};

use super::measure::measure;
use super::peers::{TempDir, find_program, nginx_args, nginx_version, output_of};
use super::repeat::{interleaved, median};
use super::report::results::{HttpKeepAlive, HttpRow};
use super::sizes::Sizes;
use super::subject::Setup;
use super::workloads::progress;
use super::wrk::{WrkReport, WrkRun};

/// What to run when wrk or nginx is missing.
pub const INSTALL_HINT: &str = "apt-get install wrk nginx";

/// What each request asks for, and how big it is: a small file, so that
/// the proxy's work per request, not the copy, is what the run measures.
const FILE: &str = "/file";
const FILE_BYTES: usize = 100;

/// The backends' ports.
const BACKENDS: usize = 3;

/// The modules whose temporary directory nginx creates at startup, each
/// unless nginx was built without it (the client body's always).
const TEMP_PATHS: &[&str] = &["client_body", "proxy", "fastcgi", "uwsgi", "scgi"];

/// The programs this part runs.
struct Tools {
    wrk: PathBuf,
    nginx: PathBuf,
    /// `nginx -V`: its version and how it was built.
    configure: String,
}

/// Measures keep-alive HTTP through workload C's subjects.
pub fn http_keep_alive(setup: &Setup, sizes: &Sizes) -> HttpKeepAlive {
    let mut http = HttpKeepAlive {
        tools: Err(String::new()),
        file_bytes: FILE_BYTES,
        connections: sizes.cost_clients,
        rows: Vec::new(),
    };
    let started = tools().and_then(|tools| {
        let backends = StaticBackends::start(&tools.nginx, &tools.configure)
            .map_err(|e| format!("the nginx backends would not start: {e}"))?;
        Ok((tools, backends))
    });
    let (tools, backends) = match started {
        Ok(started) => started,
        Err(why) => {
            eprintln!("bench: keep-alive HTTP (wrk) will not be measured: {why}");
            http.tools = Err(why);
            return http;
        }
    };
    http.tools = Ok(format!(
        "{}, nginx {}",
        wrk_version(&tools.wrk),
        nginx_version(&tools.configure)
    ));
    http.rows = rows(setup, sizes, &tools.wrk, &backends.addrs);
    backends.stop();
    http
}

/// wrk through every subject in front of `backends`: each
/// [`Sizes::repetitions`] times, interleaved, on a fresh process each time
/// (repeat.rs); each row keeps its run with the median rate.
fn rows(setup: &Setup, sizes: &Sizes, wrk: &Path, backends: &[SocketAddr]) -> Vec<HttpRow> {
    let subjects = sizes.cost_subjects(setup);
    let runs = interleaved(sizes.repetitions, &subjects, |round, subject| {
        let outcome = measure(setup, subject, backends, |running| {
            WrkRun {
                program: wrk,
                target: running.addr(),
                path: FILE,
                connections: sizes.cost_clients,
                duration: sizes.run_for,
                timeout: sizes.timeout,
            }
            .run()
        });
        progress(&round.label("C HTTP (wrk)"), subject, &outcome, wrk_summary);
        outcome
    });
    subjects
        .into_iter()
        .zip(runs)
        .map(|(subject, runs)| {
            let several = runs.len() > 1;
            let (outcome, runs) = median(runs, |r: &WrkReport| r.req_per_sec);
            if several {
                progress("C HTTP (wrk), median", subject, &outcome, wrk_summary);
            }
            HttpRow {
                subject,
                outcome,
                runs,
            }
        })
        .collect()
}

fn wrk_summary(report: &WrkReport) -> String {
    format!(
        "{:>9.1} req/s, {} requests, {} errors",
        report.req_per_sec,
        report.requests,
        report.errors()
    )
}

/// wrk and nginx, or why not.
fn tools() -> Result<Tools, String> {
    let missing = |name| format!("{name} not found; {INSTALL_HINT}");
    let wrk = find_program("wrk").ok_or_else(|| missing("wrk"))?;
    let nginx = find_program("nginx").ok_or_else(|| missing("nginx"))?;
    let configure = output_of(&nginx, &["-V"]).map_err(|e| e.to_string())?;
    Ok(Tools {
        wrk,
        nginx,
        configure,
    })
}

/// `wrk debian/4.1.0-3+b2`, from the first line of `wrk -v` (which exits
/// with status 1 after its usage text).
fn wrk_version(wrk: &Path) -> String {
    let said = Spawn::new("wrk", wrk)
        .args(["-v"])
        .stdout(Capture::All)
        .run(START_TIMEOUT);
    said.ok()
        .and_then(|finished| finished.stdout.into_iter().next())
        .and_then(|line| line.split(" [").next().map(str::to_string))
        .unwrap_or_else(|| "wrk".to_string())
}

/// The nginx serving [`FILE`] on [`BACKENDS`] ports.
struct StaticBackends {
    process: ChildProcess,
    addrs: Vec<SocketAddr>,
    // Declared after `process`, so dropped after it: nginx's files stay
    // until it has been killed.
    _dir: TempDir,
}

impl StaticBackends {
    /// Starts `nginx` (built as `configure` says) on free ports and waits
    /// until each accepts; a second try, on other ports, if a port was
    /// taken in between.
    fn start(nginx: &Path, configure: &str) -> io::Result<StaticBackends> {
        let mut last_error = None;
        for _attempt in 0..2 {
            match StaticBackends::start_once(nginx, configure) {
                Ok(backends) => return Ok(backends),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| io::Error::other("could not start")))
    }

    fn start_once(nginx: &Path, configure: &str) -> io::Result<StaticBackends> {
        let dir = TempDir::new("nginx-http")?;
        let root = dir.path().join("www");
        fs::create_dir_all(&root)?;
        fs::write(root.join(FILE.trim_start_matches('/')), [b'x'; FILE_BYTES])?;
        let addrs = free_addrs(BACKENDS)?;
        let config = dir.path().join("nginx.conf");
        fs::write(&config, http_config(&addrs, dir.path(), configure))?;
        let process = Spawn::new("nginx http", nginx)
            .args(nginx_args(dir.path(), &config))
            .stderr(Capture::Tail(TAIL_LINES))
            .ready(Ready::Accepting(addrs[0]), START_TIMEOUT)
            .start()?;
        for &addr in &addrs[1..] {
            process.wait_until_accepting(addr, START_TIMEOUT)?;
        }
        Ok(StaticBackends {
            process,
            addrs,
            _dir: dir,
        })
    }

    /// SIGTERM: nginx's fast shutdown. How it exits changes no number.
    fn stop(self) {
        let _ = self.process.stop();
    }
}

/// `count` different free loopback addresses.
fn free_addrs(count: usize) -> io::Result<Vec<SocketAddr>> {
    let mut addrs: Vec<SocketAddr> = Vec::new();
    // Each free port is one the kernel just gave out; the same one twice
    // in a row is rare, so a few times the count is plenty.
    for _ in 0..count * 10 {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        if !addrs.contains(&addr) {
            addrs.push(addr);
        }
        if addrs.len() == count {
            return Ok(addrs);
        }
    }
    Err(io::Error::other(format!("no {count} different free ports")))
}

/// The backends' configuration: one worker, `FILE` under `dir/www` on
/// every address of `listen`, every file nginx writes under `dir`.
/// `configure` (`nginx -V`) says which temporary directories it needs.
pub fn http_config(listen: &[SocketAddr], dir: &Path, configure: &str) -> String {
    let dir = dir.display();
    let mut listens = String::new();
    for addr in listen {
        listens.push_str(&format!("        listen {addr};\n"));
    }
    let mut temp_paths = String::new();
    for module in TEMP_PATHS {
        if !configure.contains(&format!("--without-http_{module}_module")) {
            temp_paths.push_str(&format!("    {module}_temp_path {dir}/{module};\n"));
        }
    }
    format!(
        "\
# Generated by the benchmark harness (tools/src/bench/http.rs).
daemon off;
master_process on;
worker_processes 1;
error_log stderr error;
pid {dir}/nginx.pid;
lock_file {dir}/nginx.lock;

events {{
    worker_connections 4096;
}}

http {{
    access_log off;
    # wrk keeps its connections for the whole run: neither a request count
    # (default 1000) nor an idle timer (75 s) may close one.
    keepalive_requests 1000000;
    keepalive_timeout 10m;
    # Under our directory, not /var/lib/nginx.
{temp_paths}    server {{
{listens}        root {dir}/www;
    }}
}}
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backends_serve_one_directory_on_every_port_with_one_worker() {
        let listen: Vec<SocketAddr> = vec![
            "127.0.0.1:9001".parse().unwrap(),
            "127.0.0.1:9002".parse().unwrap(),
        ];
        let configure =
            "nginx version: nginx/1.22.1\nconfigure arguments: --without-http_uwsgi_module";
        let config = http_config(&listen, Path::new("/tmp/x"), configure);
        for line in [
            "worker_processes 1;",
            "daemon off;",
            "pid /tmp/x/nginx.pid;",
            "access_log off;",
            "keepalive_requests 1000000;",
            "listen 127.0.0.1:9001;",
            "listen 127.0.0.1:9002;",
            "root /tmp/x/www;",
            "client_body_temp_path /tmp/x/client_body;",
            "proxy_temp_path /tmp/x/proxy;",
        ] {
            assert!(config.contains(line), "no {line:?} in\n{config}");
        }
        assert!(!config.contains("uwsgi_temp_path"), "{config}");
        assert_eq!(config.matches('{').count(), config.matches('}').count());
    }

    #[test]
    fn free_addresses_differ() {
        let addrs = free_addrs(3).unwrap();
        assert_eq!(addrs.len(), 3);
        assert!(addrs[0] != addrs[1] && addrs[1] != addrs[2] && addrs[0] != addrs[2]);
    }
}
