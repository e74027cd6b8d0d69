//! The relay simulator's command line (testkit's `sim`): replay the seed or
//! the schedule a failure printed, with a line per step, or search seeds.
//!
//! ```text
//! relay-sim --seed N [--steps N] [--bug NAME]        one seed, traced
//! relay-sim --schedule HEX [--steps N] [--bug NAME]  one schedule, traced
//! relay-sim [--from N] [--budget STEPS] [--bug NAME] seeds from N until STEPS are spent
//! ```

use std::process::ExitCode;

use testkit::sim::choices::Choices;
use testkit::sim::driver::Bug;
use testkit::sim::shrink::from_hex;
use testkit::sim::{self, Budget, Config};

const USAGE: &str = "usage: relay-sim [--seed N | --schedule HEX | --from N --budget STEPS] \
                     [--steps N] [--bug fin-before-flush|reset-as-fin|late-rearm]";

enum What {
    Seed(u64),
    Schedule(Vec<u8>),
    Search { from: u64, budget: u64 },
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse(&args) {
        Ok((what, config)) => run(what, config),
        Err(e) => {
            eprintln!("relay-sim: {e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn parse(args: &[String]) -> Result<(What, Config), String> {
    let mut config = Config::default();
    let (mut what, mut from, mut budget) = (None, 0, 1_000_000);
    let mut pairs = args.chunks(2);
    for pair in &mut pairs {
        let [flag, value] = pair else {
            return Err(format!("{} needs a value", pair[0]));
        };
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag}: {value:?} is not a number"))
        };
        match flag.as_str() {
            "--seed" => what = Some(What::Seed(number()?)),
            "--schedule" => {
                let bytes = from_hex(value).ok_or(format!("--schedule: {value:?} is not hex"))?;
                what = Some(What::Schedule(bytes));
            }
            "--from" => from = number()?,
            "--budget" => budget = number()?,
            "--steps" => config.steps = number()? as usize,
            "--bug" => {
                config.bug =
                    Some(Bug::parse(value).ok_or(format!("--bug: no bug named {value:?}"))?);
            }
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok((what.unwrap_or(What::Search { from, budget }), config))
}

fn run(what: What, mut config: Config) -> ExitCode {
    let mut choices = match what {
        What::Seed(seed) => Choices::seeded(seed),
        What::Schedule(bytes) => Choices::given(&bytes),
        What::Search { from, budget } => return search(from, budget, config),
    };
    config.trace = true;
    match sim::run(&mut choices, &config) {
        Ok(report) => {
            println!(
                "kept every promise: {} steps, ended {:?}",
                report.steps, report.ending
            );
            ExitCode::SUCCESS
        }
        Err(failure) => {
            for (i, line) in failure.trace.iter().enumerate() {
                println!("{:>5} {line}", i + 1);
            }
            println!("step {}: {}", failure.step, failure.violation);
            ExitCode::FAILURE
        }
    }
}

fn search(from: u64, budget: u64, config: Config) -> ExitCode {
    let searched = sim::search(&Budget {
        first_seed: from,
        steps: budget,
        config,
    });
    println!("{} runs, {} steps", searched.runs, searched.steps);
    for (ending, count) in searched.endings() {
        println!("  {:<16} {count}", ending.label());
    }
    match searched.found {
        None => ExitCode::SUCCESS,
        Some(found) => {
            println!(
                "seed {} failed at step {}: {}",
                found.seed, found.seed_steps, found.failure.violation
            );
            println!("  replay:        {}", found.replay);
            println!(
                "  shrunk to {} steps ({} bytes): {}",
                found.shrunk_steps,
                found.schedule.len(),
                found.replay_shrunk
            );
            ExitCode::FAILURE
        }
    }
}
