//! The `proxy` binary: all of it lives in the library (`lib.rs`), so the
//! end-to-end tests run exactly this entry point.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(proxy::main_with_args(&args));
}
