//! Where access-log lines go, and how they get there: a buffer per event
//! loop, a syscall per batch, a little delay.
//!
//! [`AccessLog`] is the destination, shared by every event loop: standard
//! error, a file opened with `O_APPEND` (created `0640` if missing, less
//! the umask), or a syslog server (`log/syslog/`). Each event loop writes
//! through its own [`Sink`], which appends each line to a private buffer
//! (no system call, no lock) and sends the buffer with **one** system call
//! when it passes [`FLUSH_THRESHOLD`] (16 KiB, about 150 lines) or when
//! [`Sink::flush`] is called: from a timer every ~200 ms, and at shutdown;
//! dropping a `Sink` flushes it too. That one call is a `write(2)` to a
//! file or stderr; to syslog, where each line is a message of its own, a
//! `sendmmsg(2)` of one datagram per line (UDP, a Unix socket), or one
//! `write(2)` of the whole batch, each line framed by its length, handed to
//! the thread that owns the TCP connection.
//!
//! The trade: writing each line at once would cost a system call (and, on
//! a slow disk or a blocked stderr pipe, a stall) per connection on the
//! event loop that relays everyone's bytes. Buffering costs a few hundred
//! milliseconds before a line shows up, and the lines still in buffers are
//! lost if the process is killed with SIGKILL (a clean shutdown flushes).
//! A busy proxy makes one system call per ~150 connections; a quiet one one
//! per timer tick at most. Over syslog datagrams the kernel and the syslog
//! server still handle one datagram per connection: that is the protocol.
//!
//! Because every write is whole lines, to a file opened with `O_APPEND`,
//! lines from several event loops (or processes) never interleave mid-line:
//! the kernel appends each write(2) to a regular file as one piece. Only a
//! write the kernel cuts short (a full disk) could split a line. To standard
//! error the write is made under the lock of `std::io::stderr()`, which the
//! daemon log takes too, so within the process lines stay whole; if stderr
//! is a pipe shared with other processes, the kernel keeps only writes of up
//! to `PIPE_BUF` (4 KiB) in one piece. A write that fails drops its buffer (it must not
//! grow without bound) and counts the lines in [`AccessLog::lost_lines`];
//! so does a syslog destination that is down or cannot keep up.
//!
//! Log rotation: rename the file, then send SIGUSR1: [`AccessLog::reopen`]
//! opens a new file of the old name, and lines go on to the renamed one
//! until then. `copytruncate` works too, since `O_APPEND` writes always go to
//! the current end of the file.
//!

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crate::log::syslog::Syslog;
use crate::log::syslog::header::Severity;

use super::format::Format;
use super::record::Record;

/// A [`Sink`] writes its buffer once it holds this many bytes.
pub const FLUSH_THRESHOLD: usize = 16 * 1024;

/// Where the lines go.
#[derive(Debug)]
enum Output {
    Stderr,
    /// The file behind a lock so that SIGUSR1 can swap in a new one
    /// ([`AccessLog::reopen`]); taken once per flush, not per line.
    File {
        file: RwLock<File>,
        path: PathBuf,
    },
    /// A syslog server: each line one message, of severity `info`.
    Syslog(Arc<Syslog>),
}

/// An access log's destination and format, shared by every event loop;
/// each loop writes through its own [`Sink`].
#[derive(Debug)]
pub struct AccessLog {
    format: Format,
    output: Output,
    /// Lines dropped because a write failed (a syslog destination counts
    /// its own).
    lost: AtomicU64,
}

impl AccessLog {
    fn new(format: Format, output: Output) -> Arc<AccessLog> {
        Arc::new(AccessLog {
            format,
            output,
            lost: AtomicU64::new(0),
        })
    }

    /// A log on standard error.
    pub fn stderr(format: Format) -> Arc<AccessLog> {
        AccessLog::new(format, Output::Stderr)
    }

    /// A log appended to the file at `path`, created (mode 0640, less the
    /// umask) if missing.
    pub fn file(path: &Path, format: Format) -> io::Result<Arc<AccessLog>> {
        let file = open_for_append(path)?;
        let output = Output::File {
            file: RwLock::new(file),
            path: path.to_path_buf(),
        };
        Ok(AccessLog::new(format, output))
    }

    /// A log sent to `syslog`, each line a message of severity `info`.
    pub fn to_syslog(syslog: Arc<Syslog>, format: Format) -> Arc<AccessLog> {
        AccessLog::new(format, Output::Syslog(syslog))
    }

    /// Opens the file again by its path, so that after a rotation renamed
    /// it (logrotate, `mv`), new lines go to a new file of the old name;
    /// what was written before stays in the renamed one. Returns the path,
    /// or `None` for standard error or syslog (nothing to reopen). If the
    /// path cannot be opened, lines go on to the file already open.
    pub fn reopen(&self) -> io::Result<Option<&Path>> {
        match &self.output {
            Output::Stderr | Output::Syslog(_) => Ok(None),
            Output::File { file, path } => {
                let fresh = open_for_append(path)?;
                *file.write().unwrap_or_else(PoisonError::into_inner) = fresh;
                Ok(Some(path))
            }
        }
    }

    /// A buffer for one event loop.
    pub fn sink(self: &Arc<Self>) -> Sink {
        Sink {
            log: self.clone(),
            buffer: String::with_capacity(FLUSH_THRESHOLD + 512),
            ends: Vec::new(),
        }
    }

    /// The line format.
    pub fn format(&self) -> &Format {
        &self.format
    }

    /// The file written to; `None` for standard error or syslog.
    pub fn path(&self) -> Option<&Path> {
        match &self.output {
            Output::Stderr | Output::Syslog(_) => None,
            Output::File { path, .. } => Some(path),
        }
    }

    /// The syslog destination, if the lines go to one.
    pub fn syslog(&self) -> Option<&Arc<Syslog>> {
        match &self.output {
            Output::Syslog(syslog) => Some(syslog),
            Output::Stderr | Output::File { .. } => None,
        }
    }

    /// Lines dropped so far because they could not be written or sent (to
    /// syslog: the daemon's lines it lost included).
    pub fn lost_lines(&self) -> u64 {
        let syslog = self.syslog().map_or(0, |s| s.lost());
        self.lost.load(Ordering::Relaxed) + syslog
    }

    /// Whole lines, in one write(2) unless the kernel cuts it short; or
    /// syslog messages, in one batch.
    fn write_lines(&self, buffer: &str, ends: &[usize]) -> io::Result<()> {
        let result = match &self.output {
            Output::Stderr => io::stderr().lock().write_all(buffer.as_bytes()),
            Output::File { file, .. } => {
                let file = file.read().unwrap_or_else(PoisonError::into_inner);
                let mut file: &File = &file;
                file.write_all(buffer.as_bytes())
            }
            Output::Syslog(syslog) => return syslog.send(buffer, ends),
        };
        if result.is_err() {
            self.lost.fetch_add(ends.len() as u64, Ordering::Relaxed);
        }
        result
    }
}

/// `stderr`, the file's path, or the syslog destination: for messages.
impl fmt::Display for AccessLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.output {
            Output::Stderr => f.write_str("stderr"),
            Output::File { path, .. } => write!(f, "{}", path.display()),
            Output::Syslog(syslog) => write!(f, "{syslog}"),
        }
    }
}

/// Opens `path` for appending, created (mode 0640, less the umask) if
/// missing.
fn open_for_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o640)
        .open(path)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot open the access log {}: {e}", path.display()),
            )
        })
}

/// One event loop's buffer of lines for an [`AccessLog`]. Lines reach the
/// destination when the buffer passes [`FLUSH_THRESHOLD`], on
/// [`Sink::flush`], and when the sink is dropped.
#[derive(Debug)]
pub struct Sink {
    log: Arc<AccessLog>,
    buffer: String,
    /// Where each line in `buffer` ends (syslog sends each as a message).
    ends: Vec<usize>,
}

impl Sink {
    /// Adds one connection's line; writes the buffer if it is full. A
    /// failed write is counted in [`AccessLog::lost_lines`] (the next
    /// [`Sink::flush`] from the timer reports errors). A syslog
    /// destination whose level leaves `info` out takes no line.
    pub fn record(&mut self, r: &Record<'_>) {
        let format = &self.log.format;
        match &self.log.output {
            Output::Syslog(syslog) => {
                if !syslog.accepts(Severity::INFO) {
                    return;
                }
                syslog.frame(Severity::INFO, &mut self.buffer, |out| r.write(format, out));
            }
            Output::Stderr | Output::File { .. } => {
                r.write(format, &mut self.buffer);
                self.buffer.push('\n');
            }
        }
        self.ends.push(self.buffer.len());
        if self.buffer.len() >= FLUSH_THRESHOLD {
            let _ = self.flush();
        }
    }

    /// Writes every buffered line now. On failure the lines are dropped
    /// (and counted): the buffer must not grow without bound.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let result = self.log.write_lines(&self.buffer, &self.ends);
        self.buffer.clear();
        self.ends.clear();
        result
    }

    /// Bytes waiting in the buffer.
    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }

    /// The log this sink writes to.
    pub fn log(&self) -> &Arc<AccessLog> {
        &self.log
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::access_log::record::tests::{json, record, refused, tcplog};
    use std::time::{SystemTime, UNIX_EPOCH};

    /// A fresh path in the temporary directory, removed when dropped.
    struct TempPath(PathBuf);

    impl TempPath {
        fn new(tag: &str) -> TempPath {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            TempPath(std::env::temp_dir().join(format!(
                "proxy-access-log-{tag}-{}-{nanos}.log",
                std::process::id()
            )))
        }

        fn lines(&self) -> Vec<String> {
            std::fs::read_to_string(&self.0)
                .expect("the log file")
                .lines()
                .map(str::to_string)
                .collect()
        }
    }

    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    #[test]
    fn a_sink_writes_nothing_before_the_threshold_or_a_flush() {
        let path = TempPath::new("buffering");
        let log = AccessLog::file(&path.0, Format::Tcplog).expect("a new log file");
        let mut sink = log.sink();
        let line_len = tcplog(&record()).len() + 1;

        sink.record(&record());
        assert_eq!(sink.buffered(), line_len);
        assert!(path.lines().is_empty(), "written before a flush");

        // Up to the threshold, still nothing; the line that reaches it
        // writes the whole buffer at once.
        let mut recorded = 1;
        while sink.buffered() > 0 {
            assert!(
                path.lines().is_empty(),
                "written at {} bytes",
                sink.buffered()
            );
            sink.record(&record());
            recorded += 1;
        }
        assert_eq!(recorded, FLUSH_THRESHOLD.div_ceil(line_len));
        let lines = path.lines();
        assert_eq!(lines.len(), recorded);
        assert!(lines.iter().all(|l| *l == tcplog(&record())), "{lines:?}");

        sink.record(&refused());
        assert_eq!(path.lines().len(), recorded);
        sink.flush().expect("a flush");
        assert_eq!(sink.buffered(), 0);
        let lines = path.lines();
        assert_eq!(lines.len(), recorded + 1);
        assert_eq!(lines.last(), Some(&tcplog(&refused())));
        sink.flush().expect("an empty flush");

        // Dropping a sink flushes it.
        sink.record(&record());
        drop(sink);
        assert_eq!(path.lines().len(), recorded + 2);
        assert_eq!(log.lost_lines(), 0);
        assert_eq!(log.path(), Some(path.0.as_path()));
    }

    #[test]
    fn a_file_log_appends_and_creates_the_file_0640() {
        use std::os::unix::fs::PermissionsExt;
        let path = TempPath::new("append");
        {
            let log = AccessLog::file(&path.0, Format::Tcplog).expect("a new log file");
            let mode = std::fs::metadata(&path.0)
                .expect("the new file")
                .permissions()
                .mode();
            // 0640, less whatever the umask takes away.
            assert_eq!(mode & 0o777 & !0o640, 0, "mode {mode:o}");
            assert_eq!(mode & 0o600, 0o600, "mode {mode:o}");
            log.sink().record(&record());
        }
        // A second opening (a restart) appends after what is there.
        let log = AccessLog::file(&path.0, Format::Json).expect("the existing file");
        assert_eq!(log.format(), &Format::Json);
        log.sink().record(&refused());
        let lines = path.lines();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0], tcplog(&record()));
        assert_eq!(lines[1], json(&refused()));
    }

    #[test]
    fn reopen_after_a_rename_starts_a_new_file_of_the_old_name() {
        let path = TempPath::new("reopen");
        let rotated = TempPath::new("reopen-rotated");
        let log = AccessLog::file(&path.0, Format::Tcplog).expect("a new log file");
        let mut sink = log.sink();
        sink.record(&record());
        sink.flush().expect("flush");
        // logrotate's way: rename, then tell the process.
        std::fs::rename(&path.0, &rotated.0).expect("rename");
        sink.record(&refused());
        sink.flush().expect("flush");
        assert_eq!(log.reopen().expect("reopen"), Some(path.0.as_path()));
        sink.record(&record());
        sink.flush().expect("flush");
        // Before the reopen, lines follow the renamed file; after, the new one.
        assert_eq!(rotated.lines(), [tcplog(&record()), tcplog(&refused())]);
        assert_eq!(path.lines(), [tcplog(&record())]);
        // Standard error has nothing to reopen.
        assert_eq!(
            AccessLog::stderr(Format::Json).reopen().expect("stderr"),
            None
        );
    }

    #[test]
    fn opening_a_log_where_it_cannot_be_says_where() {
        let path = Path::new("/nonexistent-directory/access.log");
        let e = AccessLog::file(path, Format::Tcplog).expect_err("no such directory");
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(
            e.to_string().contains("/nonexistent-directory/access.log"),
            "{e}"
        );
    }

    #[test]
    fn a_failed_write_drops_and_counts_the_lines() {
        // /dev/full accepts the open and fails every write with ENOSPC.
        let Ok(log) = AccessLog::file(Path::new("/dev/full"), Format::Tcplog) else {
            return;
        };
        let mut sink = log.sink();
        for _ in 0..3 {
            sink.record(&record());
        }
        assert!(sink.flush().is_err());
        assert_eq!((sink.buffered(), log.lost_lines()), (0, 3));
        // The threshold flush fails the same way, without a panic, and
        // empties the buffer all the same.
        let mut recorded = 0;
        while recorded == 0 || sink.buffered() > 0 {
            sink.record(&record());
            recorded += 1;
            assert!(recorded < 10_000, "the buffer never reached the threshold");
        }
        assert_eq!(log.lost_lines(), 3 + recorded);
    }

    #[test]
    fn two_threads_appending_to_one_file_never_split_a_line() {
        const PER_THREAD: usize = 3000;
        let path = TempPath::new("threads");
        let names = ["first", "second-with-a-longer-name"];
        let threads: Vec<_> = names
            .iter()
            .map(|&name| {
                let path = path.0.clone();
                std::thread::spawn(move || {
                    // Each thread opens the file itself: two descriptors, as
                    // two processes would have, each with O_APPEND.
                    let log = AccessLog::file(&path, Format::Tcplog).expect("the shared file");
                    let mut sink = log.sink();
                    for i in 0..PER_THREAD {
                        sink.record(&Record {
                            frontend: name,
                            group: name,
                            bytes_down: i as u64,
                            ..record()
                        });
                        if i % 500 == 0 {
                            sink.flush().expect("a flush");
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("a writer thread");
        }
        let lines = path.lines();
        assert_eq!(lines.len(), names.len() * PER_THREAD);
        for name in names {
            // Each thread's lines arrive whole and in its order: exactly the
            // lines it wrote, none split, none lost.
            let mine: Vec<&String> = lines
                .iter()
                .filter(|l| l.contains(&format!("] {name} {name}/")))
                .collect();
            let expected: Vec<String> = (0..PER_THREAD)
                .map(|i| {
                    tcplog(&Record {
                        frontend: name,
                        group: name,
                        bytes_down: i as u64,
                        ..record()
                    })
                })
                .collect();
            assert_eq!(mine.len(), PER_THREAD, "{name}");
            for (got, want) in mine.iter().zip(&expected) {
                assert_eq!(*got, want, "{name}: a split or reordered line");
            }
        }
    }

    #[test]
    fn a_json_sink_writes_json_lines() {
        let path = TempPath::new("json");
        let log = AccessLog::file(&path.0, Format::Json).expect("a new log file");
        let mut sink = log.sink();
        sink.record(&record());
        sink.record(&refused());
        sink.flush().expect("a flush");
        let lines = path.lines();
        assert_eq!(lines, [json(&record()), json(&refused())]);
    }

    #[test]
    fn a_stderr_log_takes_lines_without_a_file() {
        let log = AccessLog::stderr(Format::Tcplog);
        assert_eq!((log.path(), log.format()), (None, &Format::Tcplog));
        let mut sink = log.sink();
        assert!(sink.flush().is_ok());
        assert_eq!(sink.buffered(), 0);
        assert!(Arc::ptr_eq(sink.log(), &log));
    }
}
