//! The proxy under test: the same entry point as the `proxy` binary.
fn main() {
    let args = proxy::settings::flags::program_args();
    std::process::exit(proxy::main_with_args(&args));
}
