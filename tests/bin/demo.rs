//! The demo under test: the same entry point as the `demo` binary, which
//! starts itself again as each proxy child (`--run-proxy`).
fn main() {
    let args = proxy::settings::flags::program_args();
    std::process::exit(tools::demo::main_with_args(&args));
}
