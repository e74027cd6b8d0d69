//! The `proxy` binary: all of it lives in the library (`lib.rs`), so the
//! end-to-end tests run exactly this entry point.

fn main() {
    let args = proxy::settings::flags::program_args();
    std::process::exit(proxy::main_with_args(&args));
}
