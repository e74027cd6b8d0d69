//! `proxy --check-config FILE`: every error of a configuration file, or one
//! line saying it is good, and the exit status to match (0 ok, 2 errors),
//! like `haproxy -c` and `nginx -t`.

use std::path::Path;

use super::config::ConfigError;
use super::file;

/// Checks the file at `path`; returns the exit status.
pub fn check_config(path: &Path) -> i32 {
    match file::load(path) {
        Ok(config) => {
            let n = config.frontends.len();
            println!("{}: ok ({n} frontend{})", path.display(), plural(n));
            0
        }
        Err(errors) => {
            print_errors(&errors);
            let n = errors.len();
            eprintln!("{}: {n} error{}", path.display(), plural(n));
            2
        }
    }
}

/// Every error on stderr, one per line (`file:line:column: what`).
pub fn print_errors(errors: &[ConfigError]) {
    for e in errors {
        eprintln!("{e}");
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
