//! The peers: HAProxy (`mode tcp`) and nginx (`stream`), what a user would
//! pick instead of our proxy, set up the way a user would and measured in
//! the same run.
//!
//! For each peer this module knows four things:
//!
//! 1. **Is it installed?** ([`detect`]) The program is looked up on `PATH`
//!    and in the sbin directories (Debian installs both in /usr/sbin, which
//!    is not on every user's PATH), then asked for its version. nginx also
//!    needs its `stream` module: built in (`--with-stream`) or loadable
//!    (`--with-stream=dynamic`, the .so in its modules directory, Debian's
//!    `libnginx-mod-stream`). Missing pieces become a message that says
//!    how to install them ([`INSTALL_HINT`]); the harness then skips those
//!    rows, it does not fail.
//! 2. **Its configuration** ([`haproxy_config`], [`nginx_config`]):
//!    generated text, loopback addresses only, defaults everywhere except
//!    where a default would make the comparison unfair or wrong (each
//!    such line carries its reason).
//! 3. **How to start it** ([`start`]): in the foreground, as our child,
//!    with every file it writes (configuration, pid, lock) in a temporary
//!    directory of its own, so nothing touches /etc, /run or /var.
//! 4. **How to stop it**: SIGTERM, which both treat as "stop now"
//!    (HAProxy's hard stop, nginx's fast shutdown).

use std::fmt;
use std::fs;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::process::child::{
    Capture, ChildProcess, Ready, START_TIMEOUT, Spawn, TAIL_LINES, free_port, one_line,
};

/// What to run when a peer is missing.
pub const INSTALL_HINT: &str = "apt-get install haproxy nginx libnginx-mod-stream";

/// Idle timeouts of the peers, as long as ours (`--idle-timeout` 10 min):
/// no connection may be cut by a timer during a measurement.
const IDLE_TIMEOUT: &str = "10m";

/// Which program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PeerKind {
    /// HAProxy in `mode tcp`.
    HAProxy,
    /// HAProxy in `mode tcp` with `option splice-auto` (off by default in
    /// HAProxy: it helps on some kernels and hurts on others).
    HAProxySplice,
    /// nginx with the `stream` module.
    Nginx,
}

/// A peer as one row of a table: the program and how many threads (HAProxy
/// `nbthread`) or worker processes (nginx `worker_processes`) it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Peer {
    /// Which program.
    pub kind: PeerKind,
    /// Threads or worker processes.
    pub threads: usize,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            PeerKind::HAProxy => write!(f, "HAProxy nbthread {}", self.threads),
            PeerKind::HAProxySplice => {
                write!(f, "HAProxy nbthread {}, splice-auto", self.threads)
            }
            PeerKind::Nginx => write!(
                f,
                "nginx {} worker{}",
                self.threads,
                if self.threads == 1 { "" } else { "s" }
            ),
        }
    }
}

/// An installed HAProxy.
#[derive(Debug, Clone)]
pub struct HaproxyInstall {
    /// The program.
    pub program: PathBuf,
    /// The first line of `haproxy -v`.
    pub version: String,
}

/// An installed nginx with a usable stream module.
#[derive(Debug, Clone)]
pub struct NginxInstall {
    /// The program.
    pub program: PathBuf,
    /// `nginx -v`'s version (`1.22.1`).
    pub version: String,
    /// The stream module to `load_module`, when it is not built in.
    pub stream_module: Option<PathBuf>,
}

/// What is installed: each peer, or why it cannot run.
#[derive(Debug, Clone)]
pub struct Installed {
    /// HAProxy, or why not.
    pub haproxy: Result<HaproxyInstall, String>,
    /// nginx, or why not.
    pub nginx: Result<NginxInstall, String>,
}

impl Installed {
    /// Nothing, on purpose (`--no-peers`).
    pub fn none(why: &str) -> Installed {
        Installed {
            haproxy: Err(why.to_string()),
            nginx: Err(why.to_string()),
        }
    }

    /// Whether `kind` can run.
    pub fn has(&self, kind: PeerKind) -> bool {
        match kind {
            PeerKind::HAProxy | PeerKind::HAProxySplice => self.haproxy.is_ok(),
            PeerKind::Nginx => self.nginx.is_ok(),
        }
    }
}

/// Looks `name` up like `which` does, on PATH and then in the sbin
/// directories.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Runs `program args` (at most [`START_TIMEOUT`]: a program that hangs
/// when asked its version is not one to measure) and returns stdout and
/// stderr together, a line each (nginx prints its version on stderr).
pub(super) fn output_of(program: &Path, args: &[&str]) -> io::Result<String> {
    let output = Spawn::new(&program.display().to_string(), program)
        .args(args)
        .stdout(Capture::All)
        .run(START_TIMEOUT)?;
    let text = [output.stdout, output.stderr].concat().join("\n");
    if output.status.success() {
        Ok(text)
    } else {
        Err(io::Error::other(format!(
            "{} {} failed ({}): {}",
            program.display(),
            args.join(" "),
            output.status,
            one_line(&text)
        )))
    }
}

/// Finds HAProxy and nginx and checks that they can run our configurations.
pub fn detect() -> Installed {
    Installed {
        haproxy: detect_haproxy(),
        nginx: detect_nginx(),
    }
}

fn detect_haproxy() -> Result<HaproxyInstall, String> {
    let program =
        find_program("haproxy").ok_or_else(|| format!("haproxy not found; {INSTALL_HINT}"))?;
    let text = output_of(&program, &["-v"]).map_err(|e| e.to_string())?;
    let version = text.lines().next().unwrap_or("HAProxy").trim().to_string();
    Ok(HaproxyInstall { program, version })
}

fn detect_nginx() -> Result<NginxInstall, String> {
    let program =
        find_program("nginx").ok_or_else(|| format!("nginx not found; {INSTALL_HINT}"))?;
    // -V: the version and the configure arguments, which say how stream was built.
    let text = output_of(&program, &["-V"]).map_err(|e| e.to_string())?;
    let version = nginx_version(&text);
    if !supports_half_close(&version) {
        return Err(format!(
            "nginx {version} is older than 1.21.4 and has no proxy_half_close, without which \
             it cuts every request of this benchmark at the client's FIN"
        ));
    }
    let stream_module = stream_module(&text)?;
    Ok(NginxInstall {
        program,
        version,
        stream_module,
    })
}

/// The version (`1.22.1`) in `nginx -V`'s text.
pub(super) fn nginx_version(text: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix("nginx version: nginx/"))
        .unwrap_or("unknown")
        .trim()
        .to_string()
}

/// Whether nginx `version` (`1.22.1`) has `proxy_half_close` (1.21.4 and later).
pub fn supports_half_close(version: &str) -> bool {
    let parts: Vec<u32> = version.split('.').map(|p| p.parse().unwrap_or(0)).collect();
    let at = |i: usize| parts.get(i).copied().unwrap_or(0);
    (at(0), at(1), at(2)) >= (1, 21, 4)
}

/// From `nginx -V`'s configure arguments: Ok(None) if stream is built in,
/// Ok(Some(path)) if it is a module to load, Err if it is neither.
pub fn stream_module(configure: &str) -> Result<Option<PathBuf>, String> {
    let args: Vec<&str> = configure.split_whitespace().collect();
    if args.contains(&"--with-stream") {
        return Ok(None);
    }
    if !args.contains(&"--with-stream=dynamic") {
        return Err(format!(
            "this nginx was built without the stream module; {INSTALL_HINT}"
        ));
    }
    let dir = args
        .iter()
        .find_map(|a| a.strip_prefix("--modules-path="))
        .unwrap_or("/usr/lib/nginx/modules");
    let module = Path::new(dir).join("ngx_stream_module.so");
    if module.is_file() {
        Ok(Some(module))
    } else {
        Err(format!(
            "nginx's stream module is not installed ({} is missing); {INSTALL_HINT}",
            module.display()
        ))
    }
}

/// The HAProxy configuration: `threads` threads, `listen` in front of
/// `backends`, round robin; with `splice`, `option splice-auto` (HAProxy
/// then derives `maxpipes` from `maxconn`, a quarter of it).
pub fn haproxy_config(
    threads: usize,
    listen: SocketAddr,
    backends: &[SocketAddr],
    maxconn: u64,
    splice: bool,
) -> String {
    let splice = if splice {
        "    option splice-auto\n"
    } else {
        ""
    };
    let mut servers = String::new();
    for (i, backend) in backends.iter().enumerate() {
        servers.push_str(&format!("    server s{} {backend}\n", i + 1));
    }
    format!(
        "\
# Generated by the benchmark harness (tools/src/bench/peers.rs).
global
    nbthread {threads}
    # High enough for thousands of idle connections (each uses two
    # descriptors, and the limit is what this process inherited).
    maxconn {maxconn}
    # Not `daemon`: it stays our child, in the foreground. No `log`: nothing logged.

defaults
    mode tcp
    # The frontend's own limit defaults lower than the global one.
    maxconn {maxconn}
    timeout connect 5s
    timeout client {IDLE_TIMEOUT}
    timeout server {IDLE_TIMEOUT}
{splice}
frontend bench
    bind {listen}
    default_backend fixtures

backend fixtures
    balance roundrobin
{servers}"
    )
}

/// The nginx configuration: `workers` worker processes, `listen` in front
/// of `backends` (round robin is the upstream default), every file it
/// writes under `dir`.
pub fn nginx_config(
    workers: usize,
    listen: SocketAddr,
    backends: &[SocketAddr],
    stream_module: Option<&Path>,
    worker_connections: u64,
    dir: &Path,
) -> String {
    let load = stream_module.map_or(String::new(), |m| format!("load_module {};\n", m.display()));
    let mut servers = String::new();
    for backend in backends {
        servers.push_str(&format!("        server {backend};\n"));
    }
    format!(
        "\
# Generated by the benchmark harness (tools/src/bench/peers.rs).
{load}daemon off;
master_process on;
worker_processes {workers};
error_log stderr error;
pid {dir}/nginx.pid;
lock_file {dir}/nginx.lock;

events {{
    worker_connections {worker_connections};
}}

stream {{
    upstream fixtures {{
{servers}    }}
    server {{
        # backlog: the listen queue as long as ours and HAProxy's (nginx's
        # default, 511, drops connections at a thousand concurrent clients).
        listen {listen} backlog=4096;
        proxy_pass fixtures;
        # Without it nginx closes both sides at the client's first FIN, and
        # a client that half-closes after its request never gets the reply.
        proxy_half_close on;
        proxy_connect_timeout 5s;
        proxy_timeout {IDLE_TIMEOUT};
    }}
}}
",
        dir = dir.display()
    )
}

/// A directory of its own under the system's temporary directory, removed
/// on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates `$TMPDIR/l4-bench-<pid>-<n>-<label>`.
    pub fn new(label: &str) -> io::Result<TempDir> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("l4-bench-{}-{n}-{label}", std::process::id()));
        fs::create_dir_all(&path)?;
        Ok(TempDir(path))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A running peer: the process, where it listens, and its directory (kept
/// until the peer is gone).
#[derive(Debug)]
pub struct RunningPeer {
    /// The server process (nginx: the master; its workers are its children).
    pub process: ChildProcess,
    /// Where it accepts.
    pub addr: SocketAddr,
    // Declared after `process`, so dropped after it: the files stay until
    // the peer has been killed.
    _dir: TempDir,
}

/// Starts `peer` in front of `backends` on a free loopback port and waits
/// until it accepts. `nofile` is the descriptor limit it inherits.
pub fn start(
    installed: &Installed,
    peer: Peer,
    backends: &[SocketAddr],
    nofile: u64,
) -> io::Result<RunningPeer> {
    let label = match peer.kind {
        PeerKind::HAProxy | PeerKind::HAProxySplice => "haproxy",
        PeerKind::Nginx => "nginx",
    };
    let dir = TempDir::new(label)?;
    let listen = SocketAddr::from(([127, 0, 0, 1], free_port()?));
    // Two descriptors per proxied connection, and a few for everything else.
    let room = nofile.saturating_sub(100).max(200);
    let (program, args) = match peer.kind {
        PeerKind::HAProxy | PeerKind::HAProxySplice => {
            haproxy_command(installed, peer, &dir, listen, backends, room)?
        }
        PeerKind::Nginx => nginx_command(installed, peer, &dir, listen, backends, room)?,
    };
    let process = Spawn::new(label, &program)
        .args(&args)
        .stderr(Capture::Tail(TAIL_LINES))
        .ready(Ready::Accepting(listen), START_TIMEOUT)
        .start()?;
    Ok(RunningPeer {
        process,
        addr: listen,
        _dir: dir,
    })
}

/// Writes HAProxy's configuration into `dir`; returns its program and
/// arguments. `room` is the descriptors it may use.
fn haproxy_command(
    installed: &Installed,
    peer: Peer,
    dir: &TempDir,
    listen: SocketAddr,
    backends: &[SocketAddr],
    room: u64,
) -> io::Result<(PathBuf, Vec<String>)> {
    let install = installed
        .haproxy
        .as_ref()
        .map_err(|why| io::Error::other(why.clone()))?;
    let config = dir.path().join("haproxy.cfg");
    // With splice, HAProxy also opens a pipe (two descriptors) for every
    // four connections (its default `maxpipes`): 2.5 descriptors each.
    let splice = peer.kind == PeerKind::HAProxySplice;
    let maxconn = if splice { room * 2 / 5 } else { room / 2 }.min(100_000);
    fs::write(
        &config,
        haproxy_config(peer.threads, listen, backends, maxconn, splice),
    )?;
    // -db: stay in the foreground whatever the configuration says.
    let args = vec![
        "-db".to_string(),
        "-f".to_string(),
        config.display().to_string(),
    ];
    Ok((install.program.clone(), args))
}

/// Writes nginx's configuration into `dir`; returns its program and
/// arguments. `room` is the descriptors it may use.
fn nginx_command(
    installed: &Installed,
    peer: Peer,
    dir: &TempDir,
    listen: SocketAddr,
    backends: &[SocketAddr],
    room: u64,
) -> io::Result<(PathBuf, Vec<String>)> {
    let install = installed
        .nginx
        .as_ref()
        .map_err(|why| io::Error::other(why.clone()))?;
    let config = dir.path().join("nginx.conf");
    let text = nginx_config(
        peer.threads,
        listen,
        backends,
        install.stream_module.as_deref(),
        room.min(20_000),
        dir.path(),
    );
    fs::write(&config, text)?;
    Ok((install.program.clone(), nginx_args(dir.path(), &config)))
}

/// nginx's arguments for a configuration `config` whose files are all under
/// `dir` (the stream peer here, the HTTP backends in http.rs).
pub(super) fn nginx_args(dir: &Path, config: &Path) -> Vec<String> {
    // -p: the prefix for relative paths; -e: the error log before
    // the configuration is read (else /var/log/nginx/error.log).
    vec![
        "-p".to_string(),
        dir.display().to_string(),
        "-e".to_string(),
        "stderr".to_string(),
        "-c".to_string(),
        config.display().to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_probe_reads_both_streams_and_says_how_it_failed() {
        let sh = Path::new("sh");
        let text = output_of(sh, &["-c", "echo out; echo err >&2"]).unwrap();
        assert_eq!(text, "out\nerr");
        let e = output_of(sh, &["-c", "echo no such option >&2; exit 1"]).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("failed") && e.contains("no such option"), "{e}");
    }

    fn addrs() -> (SocketAddr, Vec<SocketAddr>) {
        (
            "127.0.0.1:8080".parse().unwrap(),
            vec![
                "127.0.0.1:9001".parse().unwrap(),
                "127.0.0.1:9002".parse().unwrap(),
            ],
        )
    }

    #[test]
    fn the_haproxy_configuration_is_tcp_round_robin_on_loopback() {
        let (listen, backends) = addrs();
        let config = haproxy_config(2, listen, &backends, 9000, false);
        assert!(!config.contains("splice"));
        assert!(haproxy_config(2, listen, &backends, 9000, true).contains("option splice-auto\n"));
        for line in [
            "nbthread 2",
            "maxconn 9000",
            "mode tcp",
            "timeout connect 5s",
            "timeout client 10m",
            "timeout server 10m",
            "bind 127.0.0.1:8080",
            "balance roundrobin",
            "server s1 127.0.0.1:9001",
            "server s2 127.0.0.1:9002",
        ] {
            assert!(config.contains(line), "no {line:?} in\n{config}");
        }
        assert!(!config.lines().any(|l| l.trim() == "daemon"));
        assert!(!config.lines().any(|l| l.trim_start().starts_with("log ")));
    }

    #[test]
    fn the_nginx_configuration_is_a_stream_proxy_with_files_in_its_dir() {
        let (listen, backends) = addrs();
        let module = Path::new("/usr/lib/nginx/modules/ngx_stream_module.so");
        let dir = Path::new("/tmp/x");
        let config = nginx_config(1, listen, &backends, Some(module), 20000, dir);
        for line in [
            "load_module /usr/lib/nginx/modules/ngx_stream_module.so;",
            "daemon off;",
            "master_process on;",
            "worker_processes 1;",
            "error_log stderr error;",
            "pid /tmp/x/nginx.pid;",
            "worker_connections 20000;",
            "server 127.0.0.1:9001;",
            "listen 127.0.0.1:8080 backlog=4096;",
            "proxy_pass fixtures;",
            "proxy_half_close on;",
        ] {
            assert!(config.contains(line), "no {line:?} in\n{config}");
        }
        let built_in = nginx_config(2, listen, &backends, None, 100, dir);
        assert!(!built_in.contains("load_module"));
        assert_eq!(built_in.matches('{').count(), built_in.matches('}').count());
    }

    #[test]
    fn how_nginx_was_built_decides_the_stream_module() {
        assert_eq!(
            stream_module("--prefix=/x --with-stream --with-http_ssl_module"),
            Ok(None)
        );
        let missing = stream_module("--prefix=/x --with-http_ssl_module").unwrap_err();
        assert!(missing.contains("apt-get install"), "{missing}");
        let gone = stream_module("--with-stream=dynamic --modules-path=/nonexistent").unwrap_err();
        assert!(gone.contains("/nonexistent/ngx_stream_module.so"), "{gone}");
    }

    #[test]
    fn half_close_needs_nginx_1_21_4() {
        assert!(supports_half_close("1.22.1"));
        assert!(supports_half_close("1.21.4"));
        assert!(!supports_half_close("1.21.3"));
        assert!(!supports_half_close("1.18.0"));
        assert!(supports_half_close("2.0"));
    }

    #[test]
    fn peers_name_themselves() {
        let haproxy = Peer {
            kind: PeerKind::HAProxy,
            threads: 2,
        };
        assert_eq!(haproxy.to_string(), "HAProxy nbthread 2");
        let nginx = Peer {
            kind: PeerKind::Nginx,
            threads: 1,
        };
        assert_eq!(nginx.to_string(), "nginx 1 worker");
    }

    #[test]
    fn temp_dirs_are_removed_on_drop() {
        let dir = TempDir::new("test").unwrap();
        let path = dir.path().to_path_buf();
        fs::write(path.join("f"), "x").unwrap();
        drop(dir);
        assert!(!path.exists());
    }
}
