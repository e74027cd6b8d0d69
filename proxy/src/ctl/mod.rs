//! # ctl: `proxy ctl`, the operator's client
//!
//! A mode of the proxy binary that speaks to a running proxy, over its
//! admin socket (`--socket PATH`, the runtime API's words) or its admin
//! endpoint (`--admin ADDR --token-file FILE`, HTTP), and says what
//! happened:
//!
//! ```text
//!   proxy ctl --socket /run/proxy/admin.sock show servers
//!   proxy ctl --socket /run/proxy/admin.sock drain web/s1
//!   proxy ctl --admin 127.0.0.1:9100 --token-file /etc/proxy/admin.token weight web/s1 3
//!   proxy ctl --socket /run/proxy/admin.sock maint web/s1 --shutdown-sessions
//! ```
//!
//! The exit status: 0 done, 1 refused by the proxy (its message on
//! stderr: an unknown server with the closest name, a weight out of
//! range, a missing token) or not reached, 2 a command line `ctl` itself
//! cannot read.
//!
//! | file | what it holds |
//! |---|---|
//! | [`args`] | the command line: where to, and which action |
//! | [`client`] | one exchange over the socket or HTTP, and its answer |
//!
//! May import: [`crate::log`] (the "did you mean" of a misspelt command),
//! [`crate::ops`] (the actions and a server's `FRONTEND/SERVER`) and
//! [`crate::policy`] (a state's and a weight's words); never the modes:
//! `ctl` runs no proxy of its own.

pub mod args;
pub mod client;

/// `proxy ctl ARGS` (the words after `ctl`): runs the command, prints its
/// answer, returns the exit status.
pub fn main(words: &[String]) -> i32 {
    let ctl = match args::parse(words) {
        Ok(args::Asked::Help) => {
            print!("{}", args::HELP);
            return 0;
        }
        Ok(args::Asked::Run(ctl)) => ctl,
        Err(why) => {
            eprintln!("proxy ctl: {why}");
            eprintln!("proxy ctl: try 'proxy ctl --help'");
            return 2;
        }
    };
    match client::exchange(&ctl) {
        Ok(answer) if answer.status == 200 => {
            print!("{}", answer.text);
            0
        }
        Ok(answer) => {
            eprint!("proxy ctl: {}", answer.text);
            1
        }
        Err(e) => {
            eprintln!("proxy ctl: {e}");
            1
        }
    }
}
