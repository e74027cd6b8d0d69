//! `cluster_client`: the client of scripts/cluster.sh's demo, run inside
//! its client namespace (see `tools::cluster::cli`).
fn main() -> std::process::ExitCode {
    tools::cluster::cli::main()
}
