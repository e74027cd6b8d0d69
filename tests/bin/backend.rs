//! The fixture backend under test: the same entry point as the `backend` binary.
fn main() {
    let args = proxy::settings::flags::program_args();
    std::process::exit(backend::main_with_args(&args));
}
