//! The `backend` binary: all of it lives in the library (`lib.rs`), so the
//! tests run exactly this entry point.

fn main() {
    let args = proxy::settings::flags::program_args();
    std::process::exit(backend::main_with_args(&args));
}
