//! A command line read against a table of [`Flag`]s: the proxy's, and the
//! tools' (the fixture backend, the load client, the benchmark) with the
//! same rules and the same messages.
//!
//! Each flag is one row: its name, what its value is called in the help and
//! in errors, its help text, and what to do with its value. The table is
//! what reads the arguments, what "did you mean" searches, and what the
//! help lists, so a flag is named once. `-h`/`--help` and `-V`/`--version`
//! are understood by every table. Every mistake is a [`UsageError`] that
//! says what was wrong and what to do; a binary prints it and exits with
//! status 2, as `haproxy -c` and `nginx -t` do for a bad configuration.

use std::fmt;

use super::words::did_you_mean;

/// One flag of a command line, for settings of type `S`.
pub struct Flag<S> {
    /// `--listen`.
    pub name: &'static str,
    /// What the value is called in the help: `ADDR`. Empty for a switch
    /// (`--json`, `--quick`), which takes no value: its `set` is called with
    /// the empty string, and it never "needs" anything.
    pub arg: &'static str,
    /// What the value looks like, for "--listen needs an address like ...".
    pub needs: &'static str,
    /// The help text, after the flag and its value (more lines indented to
    /// the help column).
    pub help: &'static str,
    /// Stores the value, or says (after "--listen: ") what is wrong with it.
    pub set: fn(&mut S, &str) -> Result<(), String>,
}

impl<S> fmt::Debug for Flag<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Flag")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// What a command line asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read<'a> {
    /// Run with the settings, set from these flags (in the order given).
    Flags(Vec<&'a str>),
    /// `-h`, `--help`.
    Help,
    /// `-V`, `--version`.
    Version,
}

/// A command-line mistake, with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError {
    /// The program whose help to see.
    pub program: &'static str,
    /// What was wrong.
    pub message: String,
}

impl UsageError {
    /// A mistake on `program`'s command line.
    pub fn new(program: &'static str, message: impl Into<String>) -> UsageError {
        UsageError {
            program,
            message: message.into(),
        }
    }
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (see '{} --help')", self.message, self.program)
    }
}

impl std::error::Error for UsageError {}

/// This process's arguments, after the program name: what every binary of
/// the workspace hands its `main_with_args`. `args_os`, not `args`: a
/// non-UTF-8 argument becomes a usage error (its bad bytes replaced by
/// U+FFFD) instead of a panic.
pub fn program_args() -> Vec<String> {
    std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// Reads `args` (without the program name) into `settings` by `flags`.
pub fn read<'a, S>(
    program: &'static str,
    args: &'a [String],
    flags: &[Flag<S>],
    settings: &mut S,
) -> Result<Read<'a>, UsageError> {
    let mut given = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(Read::Help),
            "-V" | "--version" => return Ok(Read::Version),
            _ => {}
        }
        let Some(flag) = flags.iter().find(|f| f.name == arg) else {
            return Err(UsageError::new(program, unknown(arg, flags)));
        };
        let value = if flag.arg.is_empty() {
            Some("")
        } else {
            it.next().map(String::as_str)
        };
        let Some(value) = value else {
            let message = format!("{} needs {}", flag.name, flag.needs);
            return Err(UsageError::new(program, message));
        };
        (flag.set)(settings, value)
            .map_err(|why| UsageError::new(program, format!("{}: {why}", flag.name)))?;
        given.push(flag.name);
    }
    Ok(Read::Flags(given))
}

/// `unknown option '--backnd' (did you mean '--backend'?)`.
fn unknown<S>(arg: &str, flags: &[Flag<S>]) -> String {
    let mut names: Vec<&str> = flags.iter().map(|f| f.name).collect();
    names.extend(["--help", "--version"]);
    format!("unknown option '{arg}'{}", did_you_mean(arg, &names))
}

/// A flag's count: a whole number of at least 1 (clients, threads,
/// requests...), the one reader of it for the proxy and the tools.
pub fn count(value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(0) => Err(format!("'{value}': at least 1 is needed")),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{value}' is not a whole number")),
    }
}

/// The help's list of flags: one entry per flag, `-h` and `-V` last. A
/// flag too long for the column of names has its help on the next line,
/// so every help starts in the same column.
pub fn help<S>(flags: &[Flag<S>]) -> String {
    let mut out = String::new();
    for flag in flags {
        let head = format!("{} {}", flag.name, flag.arg);
        let head = head.trim_end();
        if head.len() > 24 {
            out.push_str(&format!("    {head}\n    {:<24} {}\n", "", flag.help));
        } else {
            out.push_str(&format!("    {head:<24} {}\n", flag.help));
        }
    }
    out.push_str(&format!("    {:<24} this text\n", "-h, --help"));
    out.push_str(&format!("    {:<24} the version\n", "-V, --version"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_is_a_whole_number_of_at_least_one() {
        assert_eq!(count("8"), Ok(8));
        assert!(count("0").unwrap_err().contains("at least 1"));
        assert!(count("many").unwrap_err().contains("not a whole number"));
        assert!(count("-3").unwrap_err().contains("not a whole number"));
    }

    #[derive(Debug, Default)]
    struct Settings {
        port: u16,
        names: Vec<String>,
        quick: bool,
    }

    const FLAGS: &[Flag<Settings>] = &[
        Flag {
            name: "--port",
            arg: "N",
            needs: "a port number",
            help: "a port",
            set: |s, v| {
                s.port = v
                    .parse()
                    .map_err(|_| format!("'{v}' is not a port number"))?;
                Ok(())
            },
        },
        Flag {
            name: "--name",
            arg: "NAME",
            needs: "a name",
            help: "a name (repeat for more)",
            set: |s, v| {
                s.names.push(v.to_string());
                Ok(())
            },
        },
        Flag {
            name: "--quick",
            arg: "",
            needs: "",
            help: "a switch",
            set: |s, _| {
                s.quick = true;
                Ok(())
            },
        },
    ];

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    fn error(line: &str) -> String {
        let args = args(line);
        let e = read("tool", &args, FLAGS, &mut Settings::default()).expect_err("a mistake");
        e.to_string()
    }

    #[test]
    fn flags_set_their_values_in_order() {
        let args = args("--name a --port 80 --name b");
        let mut s = Settings::default();
        let read = read("tool", &args, FLAGS, &mut s).expect("good flags");
        assert_eq!(read, Read::Flags(vec!["--name", "--port", "--name"]));
        assert_eq!((s.port, s.names), (80, vec!["a".into(), "b".into()]));
    }

    #[test]
    fn a_switch_takes_no_value() {
        let args = args("--quick --port 80");
        let mut s = Settings::default();
        let read = read("tool", &args, FLAGS, &mut s).expect("good flags");
        assert_eq!(read, Read::Flags(vec!["--quick", "--port"]));
        assert!(s.quick);
        assert_eq!(s.port, 80);
        let text = help(FLAGS);
        assert!(
            text.contains("    --quick                  a switch\n"),
            "{text}"
        );
    }

    #[test]
    fn help_and_version_win_where_they_come() {
        let mut s = Settings::default();
        assert_eq!(
            read("tool", &args("--port 1 -h"), FLAGS, &mut s),
            Ok(Read::Help)
        );
        assert_eq!(
            read("tool", &args("-V --bad"), FLAGS, &mut s),
            Ok(Read::Version)
        );
        assert!(error("--bad -h").starts_with("unknown option '--bad'"));
    }

    #[test]
    fn mistakes_say_what_and_where_to_look() {
        assert_eq!(
            error("--port"),
            "--port needs a port number (see 'tool --help')"
        );
        assert_eq!(
            error("--port x"),
            "--port: 'x' is not a port number (see 'tool --help')"
        );
        assert_eq!(
            error("--prot 1"),
            "unknown option '--prot' (did you mean '--port'?) (see 'tool --help')"
        );
        assert_eq!(error("9001"), "unknown option '9001' (see 'tool --help')");
    }

    #[test]
    fn the_help_lists_every_flag() {
        let text = help(FLAGS);
        assert!(
            text.contains("    --port N                 a port\n"),
            "{text}"
        );
        assert!(text.contains("    --name NAME              a name (repeat for more)\n"));
        assert!(text.ends_with("    -V, --version            the version\n"));
    }

    #[test]
    fn a_long_flag_has_its_help_on_the_next_line() {
        let flags = [Flag::<Settings> {
            name: "--a-rather-long-flag-name",
            arg: "DUR",
            needs: "a duration",
            help: "what it does",
            set: |_, _| Ok(()),
        }];
        let text = help(&flags);
        let expected =
            "    --a-rather-long-flag-name DUR\n                             what it does\n";
        assert!(text.starts_with(expected), "{text}");
    }
}
