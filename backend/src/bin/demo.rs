//! `demo`: the seed's experiment in a few seconds (see `backend::demo`),
//! the README's first command: `cargo run --release -p backend --bin demo`.
fn main() {
    // args_os, not args: a non-UTF-8 argument becomes a usage error (its bad
    // bytes replaced by U+FFFD) instead of a panic.
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    std::process::exit(backend::demo::main_with_args(&args));
}
