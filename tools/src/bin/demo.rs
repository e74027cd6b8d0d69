//! `demo`: the seed's experiment in a few seconds (see `tools::demo`),
//! the README's first command: `cargo run --release -p tools --bin demo`.
fn main() {
    let args = proxy::settings::flags::program_args();
    std::process::exit(tools::demo::main_with_args(&args));
}
