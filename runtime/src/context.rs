//! The thread-local context: how a future finds the driver of the runtime
//! that is polling it, without importing the executor.
//!
//! `block_on` installs its driver here for as long as it runs. A
//! `TcpStream::connect` or a `sleep` polled inside it looks the driver up to
//! register its socket or timer. This keeps the imports one-way: `net` and
//! `time` depend on this small file and on the driver, never on the executor
//! that sits above them.
//!
//! ```text
//!   executor::block_on ── enter(driver) ──> CURRENT (thread-local)
//!                                               ^          ^
//!                            net::TcpStream ────┘          └──── time::Sleep
//! ```

use std::cell::RefCell;
use std::io;
use std::rc::Rc;

use crate::driver::Driver;

thread_local! {
    static CURRENT: RefCell<Option<Rc<Driver>>> = const { RefCell::new(None) };
}

/// Makes `driver` the current one until the guard is dropped.
pub(crate) fn enter(driver: Rc<Driver>) -> EnterGuard {
    let previous = CURRENT.with(|c| c.borrow_mut().replace(driver));
    EnterGuard { previous }
}

/// Restores the previous driver (none, outside nested use) on drop.
pub(crate) struct EnterGuard {
    previous: Option<Rc<Driver>>,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        let _ = CURRENT.try_with(|c| *c.borrow_mut() = previous);
    }
}

/// The driver of the runtime running on this thread.
pub(crate) fn driver() -> io::Result<Rc<Driver>> {
    CURRENT.with(|c| c.borrow().clone()).ok_or_else(no_runtime)
}

/// The error for I/O attempted outside `Runtime::block_on`.
pub(crate) fn no_runtime() -> io::Error {
    io::Error::other("no runtime on this thread: run this inside Runtime::block_on")
}
