//! The `proxy` binary: all of it lives in the library (`lib.rs`), so the
//! end-to-end tests run exactly this entry point.

fn main() {
    // args_os, not args: a non-UTF-8 argument becomes a usage error (its bad
    // bytes replaced by U+FFFD) instead of a panic.
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    std::process::exit(proxy::main_with_args(&args));
}
