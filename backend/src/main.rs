//! The `backend` binary: all of it lives in the library (`lib.rs`), so the
//! tests run exactly this entry point.

fn main() {
    // args_os, not args: a non-UTF-8 argument becomes a usage error (its
    // bad bytes replaced by U+FFFD) instead of a panic.
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    std::process::exit(backend::main_with_args(&args));
}
