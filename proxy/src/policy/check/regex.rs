//! A small regular-expression matcher for `tcp-check expect rstring` and
//! `rbinary`, `http-check expect rstring` and `rstatus`: a subset of the
//! PCRE syntax HAProxy takes, compiled to a program for a Pike VM (Thompson's
//! construction, as in Russ Cox's "Regular Expression Matching: the Virtual
//! Machine Approach"), so that a match takes time linear in the input
//! whatever the pattern. The checks of every server share one thread; a
//! backtracking matcher could spend minutes on one server's answer (`(a*)*b`
//! against 16 KiB of `a`) and stall them all.
//!
//! # The subset
//!
//! | syntax | meaning |
//! |---|---|
//! | `abc`, `\.`, `\\`, `\r` `\n` `\t` `\xHH` | those bytes (a `\` before any punctuation takes it literally) |
//! | `.` | any byte but `\n` (PCRE's default) |
//! | `[abc]` `[a-z]` `[^0-9]` | one byte of (not of) the set; `\d \w \s` and `[:alpha:]`-style classes inside |
//! | `\d \w \s`, `\D \W \S` | digit, word byte (`[A-Za-z0-9_]`), white space; and their complements |
//! | `^`, `$` | the start of the input; its end, or just before a final `\n` (PCRE) |
//! | `\b`, `\B` | a word boundary, and not one |
//! | `x*` `x+` `x?` `x{m}` `x{m,}` `x{m,n}` | repetition (a trailing `?`, PCRE's lazy form, is accepted: whether a match exists does not depend on it) |
//! | `a\|b`, `(...)`, `(?:...)` | alternation and grouping (groups capture nothing) |
//!
//! Refused, each with its reason: back-references (`\1`: no linear-time
//! algorithm matches them), look-around (`(?=`, `(?!`, `(?<=`), inline flags
//! (`(?i)`), named groups, Unicode properties (`\p{..}`), possessive
//! quantifiers (`a*+`), and counts above [`MAX_COUNT`]. Matching is on bytes:
//! a multi-byte UTF-8 character in a pattern is its bytes in a row, which
//! matches the same text, but `.` or a class stands for one byte.
//!
//! # Matching
//!
//! [`Regex::find`] searches anywhere in the input (no implicit `^`) and
//! returns where the earliest-ending match ends: the expect that used it
//! consumes the input up to there (`script.rs`).

use std::fmt;

/// The largest count of a `{m,n}` repetition.
pub const MAX_COUNT: u32 = 1000;

/// The most instructions a compiled pattern may have (a bound on the work
/// per input byte; counted repetitions copy their operand).
const MAX_PROGRAM: usize = 20_000;

/// A compiled pattern.
#[derive(Clone, PartialEq, Eq)]
pub struct Regex {
    source: String,
    program: Vec<Inst>,
}

impl fmt::Debug for Regex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Regex({:?})", self.source)
    }
}

impl fmt::Display for Regex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// A set of bytes: bit `b` of the 256 says whether byte `b` is in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Bytes([u64; 4]);

impl Bytes {
    fn one(b: u8) -> Bytes {
        let mut set = Bytes::default();
        set.insert(b);
        set
    }

    fn insert(&mut self, b: u8) {
        self.0[usize::from(b >> 6)] |= 1 << (b & 63);
    }

    fn insert_range(&mut self, from: u8, to: u8) {
        for b in from..=to {
            self.insert(b);
        }
    }

    fn contains(&self, b: u8) -> bool {
        self.0[usize::from(b >> 6)] & (1 << (b & 63)) != 0
    }

    fn union(&mut self, other: Bytes) {
        for (mine, theirs) in self.0.iter_mut().zip(other.0) {
            *mine |= theirs;
        }
    }

    fn complement(self) -> Bytes {
        Bytes(self.0.map(|word| !word))
    }

    fn of(test: fn(u8) -> bool) -> Bytes {
        let mut set = Bytes::default();
        for b in 0..=255u8 {
            if test(b) {
                set.insert(b);
            }
        }
        set
    }
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// A position test that consumes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Assertion {
    Start,
    End,
    WordBoundary,
    NotWordBoundary,
}

impl Assertion {
    fn holds(self, input: &[u8], at: usize) -> bool {
        let word_before = at > 0 && is_word(input[at - 1]);
        let word_after = input.get(at).is_some_and(|&b| is_word(b));
        match self {
            Assertion::Start => at == 0,
            Assertion::End => at == input.len() || (at + 1 == input.len() && input[at] == b'\n'),
            Assertion::WordBoundary => word_before != word_after,
            Assertion::NotWordBoundary => word_before == word_after,
        }
    }
}

/// One instruction of the VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inst {
    /// Consume one byte of the set, or this thread dies.
    Byte(Bytes),
    /// Go on at both: the two ways of an alternation or a repetition.
    Split(usize, usize),
    Jump(usize),
    Assert(Assertion),
    Match,
}

/// The pattern as a tree, before it is compiled.
#[derive(Debug, Clone)]
enum Node {
    Set(Bytes),
    Assert(Assertion),
    Concat(Vec<Node>),
    Alternate(Vec<Node>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
    },
}

/// Why a pattern was refused: what, and at which byte of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegexError {
    /// The offset in the pattern (0-based).
    pub at: usize,
    /// What is wrong, and what to write instead.
    pub message: String,
}

impl fmt::Display for RegexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at offset {}: {}", self.at, self.message)
    }
}

impl Regex {
    /// Compiles `pattern`, or says what in it is outside the subset.
    pub fn new(pattern: &str) -> Result<Regex, RegexError> {
        let mut parser = Parser {
            bytes: pattern.as_bytes(),
            at: 0,
        };
        let tree = parser.alternation(0)?;
        if parser.at < parser.bytes.len() {
            return Err(parser.error("an unmatched ')'; escape it as '\\)' to match a ')'"));
        }
        let mut program = Vec::new();
        compile(&tree, &mut program)?;
        program.push(Inst::Match);
        Ok(Regex {
            source: pattern.to_string(),
            program,
        })
    }

    /// Where the earliest-ending match in `input` ends, if there is one
    /// (module docs).
    pub fn find(&self, input: &[u8]) -> Option<usize> {
        let n = self.program.len();
        let mut current = Threads::new(n);
        let mut next = Threads::new(n);
        for at in 0..=input.len() {
            // A new attempt may start at every position: the search is
            // unanchored, like `.*?` before the pattern.
            self.add(&mut current, 0, input, at);
            if current.matched {
                return Some(at);
            }
            let Some(&byte) = input.get(at) else {
                break;
            };
            next.clear();
            for i in 0..current.len() {
                if let Inst::Byte(set) = self.program[current.dense[i]]
                    && set.contains(byte)
                {
                    self.add(&mut next, current.dense[i] + 1, input, at + 1);
                }
            }
            std::mem::swap(&mut current, &mut next);
        }
        None
    }

    /// Whether `input` has a match anywhere.
    pub fn is_match(&self, input: &[u8]) -> bool {
        self.find(input).is_some()
    }

    /// Adds the thread at `pc` and everything it reaches without consuming
    /// a byte at position `at` (an explicit stack: no recursion on input).
    fn add(&self, threads: &mut Threads, pc: usize, input: &[u8], at: usize) {
        let mut stack = vec![pc];
        while let Some(pc) = stack.pop() {
            if !threads.insert(pc) {
                continue;
            }
            match self.program[pc] {
                Inst::Split(a, b) => {
                    stack.push(b);
                    stack.push(a);
                }
                Inst::Jump(to) => stack.push(to),
                Inst::Assert(test) if test.holds(input, at) => stack.push(pc + 1),
                Inst::Assert(_) | Inst::Byte(_) => {}
                Inst::Match => threads.matched = true,
            }
        }
    }
}

/// The threads alive at one position: a sparse set of program counters
/// (each at most once, so the work per byte is bounded by the program).
struct Threads {
    dense: Vec<usize>,
    sparse: Vec<usize>,
    matched: bool,
}

impl Threads {
    fn new(n: usize) -> Threads {
        Threads {
            dense: Vec::with_capacity(n),
            sparse: vec![0; n],
            matched: false,
        }
    }

    fn len(&self) -> usize {
        self.dense.len()
    }

    fn clear(&mut self) {
        self.dense.clear();
        self.matched = false;
    }

    /// Adds `pc`; false if it was there already.
    fn insert(&mut self, pc: usize) -> bool {
        let slot = self.sparse[pc];
        if slot < self.dense.len() && self.dense[slot] == pc {
            return false;
        }
        self.sparse[pc] = self.dense.len();
        self.dense.push(pc);
        true
    }
}

/// Emits `node`'s instructions at the end of `program`.
fn compile(node: &Node, program: &mut Vec<Inst>) -> Result<(), RegexError> {
    if program.len() > MAX_PROGRAM {
        let message = format!(
            "the pattern compiles to more than {MAX_PROGRAM} steps; use smaller repetition counts"
        );
        return Err(RegexError { at: 0, message });
    }
    match node {
        Node::Set(set) => program.push(Inst::Byte(*set)),
        Node::Assert(test) => program.push(Inst::Assert(*test)),
        Node::Concat(nodes) => {
            for node in nodes {
                compile(node, program)?;
            }
        }
        Node::Alternate(ways) => compile_alternation(ways, program)?,
        Node::Repeat { node, min, max } => compile_repeat(node, *min, *max, program)?,
    }
    Ok(())
}

/// `a|b|c`: a split to `a` or the rest, each way jumping to the end.
fn compile_alternation(ways: &[Node], program: &mut Vec<Inst>) -> Result<(), RegexError> {
    let mut jumps = Vec::new();
    for (i, way) in ways.iter().enumerate() {
        if i + 1 < ways.len() {
            let split = program.len();
            program.push(Inst::Split(split + 1, 0));
            compile(way, program)?;
            jumps.push(program.len());
            program.push(Inst::Jump(0));
            program[split] = Inst::Split(split + 1, program.len());
        } else {
            compile(way, program)?;
        }
    }
    let end = program.len();
    for jump in jumps {
        program[jump] = Inst::Jump(end);
    }
    Ok(())
}

/// `x{min,max}`: `min` copies of `x`, then `max - min` optional ones, or a
/// loop when there is no `max`.
fn compile_repeat(
    node: &Node,
    min: u32,
    max: Option<u32>,
    program: &mut Vec<Inst>,
) -> Result<(), RegexError> {
    for _ in 0..min {
        compile(node, program)?;
    }
    match max {
        None => {
            // L: split body, end; body; jump L
            let split = program.len();
            program.push(Inst::Split(split + 1, 0));
            compile(node, program)?;
            program.push(Inst::Jump(split));
            program[split] = Inst::Split(split + 1, program.len());
        }
        Some(max) => {
            let mut splits = Vec::new();
            for _ in min..max {
                splits.push(program.len());
                program.push(Inst::Split(program.len() + 1, 0));
                compile(node, program)?;
            }
            let end = program.len();
            for split in splits {
                program[split] = Inst::Split(split + 1, end);
            }
        }
    }
    Ok(())
}

/// A recursive-descent reader of the pattern (the pattern is the
/// operator's, and short; the input is never read recursively).
struct Parser<'p> {
    bytes: &'p [u8],
    at: usize,
}

/// How deep groups may nest.
const MAX_DEPTH: usize = 100;

impl Parser<'_> {
    fn error(&self, message: &str) -> RegexError {
        RegexError {
            at: self.at,
            message: message.to_string(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn alternation(&mut self, depth: usize) -> Result<Node, RegexError> {
        if depth > MAX_DEPTH {
            return Err(self.error("groups nest too deep"));
        }
        let mut ways = vec![self.concatenation(depth)?];
        while self.peek() == Some(b'|') {
            self.at += 1;
            ways.push(self.concatenation(depth)?);
        }
        Ok(if ways.len() == 1 {
            ways.remove(0)
        } else {
            Node::Alternate(ways)
        })
    }

    fn concatenation(&mut self, depth: usize) -> Result<Node, RegexError> {
        let mut nodes = Vec::new();
        while let Some(b) = self.peek() {
            if b == b'|' || b == b')' {
                break;
            }
            let atom = self.atom(depth)?;
            nodes.push(self.quantified(atom)?);
        }
        Ok(Node::Concat(nodes))
    }

    fn atom(&mut self, depth: usize) -> Result<Node, RegexError> {
        let Some(b) = self.peek() else {
            return Err(self.error("the pattern ends early"));
        };
        self.at += 1;
        Ok(match b {
            b'.' => Node::Set(Bytes::one(b'\n').complement()),
            b'^' => Node::Assert(Assertion::Start),
            b'$' => Node::Assert(Assertion::End),
            b'[' => Node::Set(self.class()?),
            b'(' => self.group(depth)?,
            b'\\' => self.escape()?,
            b'{' if self.counts_at(self.at - 1)?.is_none() => Node::Set(Bytes::one(b'{')),
            b'*' | b'+' | b'?' | b'{' => {
                self.at -= 1;
                return Err(self.error(
                    "a repetition with nothing before it; escape it (like '\\*') to match it",
                ));
            }
            b => Node::Set(Bytes::one(b)),
        })
    }

    fn group(&mut self, depth: usize) -> Result<Node, RegexError> {
        if self.peek() == Some(b'?') {
            if self.bytes.get(self.at + 1) == Some(&b':') {
                self.at += 2;
            } else {
                return Err(self.error(
                    "'(?' forms other than '(?:' (look-around, flags, named groups) are not \
                     supported: they need a backtracking matcher; rewrite the pattern without them",
                ));
            }
        }
        let inner = self.alternation(depth + 1)?;
        if self.peek() != Some(b')') {
            return Err(self.error("a '(' without its ')'"));
        }
        self.at += 1;
        Ok(inner)
    }

    /// After a `\` outside a class.
    fn escape(&mut self) -> Result<Node, RegexError> {
        let Some(b) = self.peek() else {
            return Err(self.error("a '\\' at the end of the pattern; write '\\\\' for a '\\'"));
        };
        Ok(match b {
            b'b' => {
                self.at += 1;
                Node::Assert(Assertion::WordBoundary)
            }
            b'B' => {
                self.at += 1;
                Node::Assert(Assertion::NotWordBoundary)
            }
            _ => Node::Set(self.escaped_set()?),
        })
    }

    /// The set an escape stands for, in a class or outside; `self.at` is on
    /// the byte after the `\`.
    fn escaped_set(&mut self) -> Result<Bytes, RegexError> {
        let Some(b) = self.peek() else {
            return Err(self.error("a '\\' at the end of the pattern"));
        };
        self.at += 1;
        let set = match b {
            b'd' => Bytes::of(|b| b.is_ascii_digit()),
            b'D' => Bytes::of(|b| b.is_ascii_digit()).complement(),
            b'w' => Bytes::of(is_word),
            b'W' => Bytes::of(is_word).complement(),
            b's' => Bytes::of(is_space),
            b'S' => Bytes::of(is_space).complement(),
            b'r' => Bytes::one(b'\r'),
            b'n' => Bytes::one(b'\n'),
            b't' => Bytes::one(b'\t'),
            b'x' => Bytes::one(self.hex_byte()?),
            b'1'..=b'9' => {
                self.at -= 2; // at the backslash
                return Err(self
                    .error("back-references are not supported: no linear-time matcher has them"));
            }
            b'p' | b'P' => {
                self.at -= 2; // at the backslash
                return Err(
                    self.error("Unicode properties are not supported; matching is on bytes")
                );
            }
            b if b.is_ascii_punctuation() => Bytes::one(b),
            _ => {
                self.at -= 2; // at the backslash
                return Err(self.error(
                    "unknown escape; use \\d \\w \\s \\D \\W \\S \\b \\B \\r \\n \\t \\xHH, or '\\' \
                     before punctuation",
                ));
            }
        };
        Ok(set)
    }

    fn hex_byte(&mut self) -> Result<u8, RegexError> {
        let digits = self.bytes.get(self.at..self.at + 2).unwrap_or_default();
        let text = std::str::from_utf8(digits).unwrap_or_default();
        match u8::from_str_radix(text, 16) {
            Ok(b) if text.len() == 2 => {
                self.at += 2;
                Ok(b)
            }
            _ => Err(self.error("'\\x' needs two hex digits, like \\x0d")),
        }
    }

    /// After a `[`: the set up to its `]`.
    fn class(&mut self) -> Result<Bytes, RegexError> {
        let negated = self.peek() == Some(b'^');
        if negated {
            self.at += 1;
        }
        let mut set = Bytes::default();
        let mut first = true;
        loop {
            let Some(b) = self.peek() else {
                return Err(self.error("a '[' without its ']'"));
            };
            if b == b']' && !first {
                self.at += 1;
                break;
            }
            first = false;
            if b == b'[' && self.bytes.get(self.at + 1) == Some(&b':') {
                set.union(self.posix_class()?);
                continue;
            }
            let (from, single) = self.class_item()?;
            match (single, self.range_end()?) {
                (Some(from), Some(to)) if from <= to => set.insert_range(from, to),
                (Some(_), Some(_)) => {
                    return Err(self.error("a range whose end is before its start"));
                }
                (None, Some(_)) => return Err(self.error("a range from a class like \\d")),
                (_, None) => set.union(from),
            }
        }
        Ok(if negated { set.complement() } else { set })
    }

    /// One item of a class: its set, and the byte if it is a single one (a
    /// range may start there).
    fn class_item(&mut self) -> Result<(Bytes, Option<u8>), RegexError> {
        let b = self.peek().unwrap_or_default();
        self.at += 1;
        if b != b'\\' {
            return Ok((Bytes::one(b), Some(b)));
        }
        let set = self.escaped_set()?;
        let single = (0..=255u8).filter(|&b| set.contains(b)).count() == 1;
        Ok((
            set,
            single
                .then(|| (0..=255u8).find(|&b| set.contains(b)))
                .flatten(),
        ))
    }

    /// `-x` after a class item, making it a range: its end, if there is one.
    fn range_end(&mut self) -> Result<Option<u8>, RegexError> {
        if self.peek() != Some(b'-') || self.bytes.get(self.at + 1).is_none_or(|&b| b == b']') {
            return Ok(None);
        }
        self.at += 1;
        match self.class_item()? {
            (_, Some(to)) => Ok(Some(to)),
            (_, None) => Err(self.error("a range up to a class like \\d")),
        }
    }

    /// `[:alpha:]` and its kin, inside a class.
    fn posix_class(&mut self) -> Result<Bytes, RegexError> {
        let rest = &self.bytes[self.at..];
        // The name starts after "[:"; its ":]" cannot overlap that.
        let end = rest
            .get(2..)
            .and_then(|r| r.windows(2).position(|w| w == b":]"))
            .map(|p| p + 2);
        let name = end.and_then(|end| std::str::from_utf8(&rest[2..end]).ok());
        let test: fn(u8) -> bool = match name {
            Some("alpha") => |b| b.is_ascii_alphabetic(),
            Some("digit") => |b| b.is_ascii_digit(),
            Some("alnum") => |b| b.is_ascii_alphanumeric(),
            Some("upper") => |b| b.is_ascii_uppercase(),
            Some("lower") => |b| b.is_ascii_lowercase(),
            Some("space") => is_space,
            Some("xdigit") => |b| b.is_ascii_hexdigit(),
            Some("punct") => |b| b.is_ascii_punctuation(),
            Some("print") => |b| (0x20..0x7f).contains(&b),
            Some("cntrl") => |b| b.is_ascii_control(),
            _ => {
                return Err(self.error(
                    "unknown class; use [:alpha:], [:digit:], [:alnum:], [:upper:], [:lower:], \
                     [:space:], [:xdigit:], [:punct:], [:print:] or [:cntrl:]",
                ));
            }
        };
        self.at += end.unwrap_or(0) + 2;
        Ok(Bytes::of(test))
    }

    /// `atom` with the quantifier that follows it, if any.
    fn quantified(&mut self, atom: Node) -> Result<Node, RegexError> {
        let ((min, max), used) = match self.peek() {
            Some(b'*') => ((0, None), 1),
            Some(b'+') => ((1, None), 1),
            Some(b'?') => ((0, Some(1)), 1),
            Some(b'{') => match self.counts_at(self.at)? {
                Some(counts) => counts,
                None => return Ok(atom), // a literal '{', as PCRE takes it
            },
            _ => return Ok(atom),
        };
        self.at += used;
        if self.peek() == Some(b'?') {
            self.at += 1; // lazy: the same answer to "is there a match"
        }
        let another = match self.peek() {
            Some(b'*' | b'+' | b'?') => true,
            Some(b'{') => self.counts_at(self.at)?.is_some(),
            _ => false,
        };
        if another {
            return Err(self.error(
                "a repetition of a repetition (PCRE's possessive 'a*+' or a nested count); \
                 put the inner one in a group: '(a*)+'",
            ));
        }
        if matches!(atom, Node::Assert(_)) {
            return Err(self.error("a repetition of '^', '$' or '\\b' means nothing; remove it"));
        }
        Ok(Node::Repeat {
            node: Box::new(atom),
            min,
            max,
        })
    }

    /// The `{m}`, `{m,}` or `{m,n}` whose brace is at `at`, with its length;
    /// `None` if the brace starts none (it is then a literal '{').
    #[allow(clippy::type_complexity)]
    fn counts_at(&self, at: usize) -> Result<Option<((u32, Option<u32>), usize)>, RegexError> {
        let rest = self.bytes.get(at + 1..).unwrap_or_default();
        let Some(close) = rest.iter().position(|&b| b == b'}') else {
            return Ok(None);
        };
        let inside = std::str::from_utf8(&rest[..close]).unwrap_or_default();
        let number = |s: &str| {
            let digits = !s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit());
            digits.then(|| s.parse::<u32>().ok()).flatten()
        };
        let counts = match inside.split_once(',') {
            None => number(inside).map(|n| (n, Some(n))),
            Some((low, "")) => number(low).map(|n| (n, None)),
            Some((low, high)) => number(low).zip(number(high)).map(|(m, n)| (m, Some(n))),
        };
        let Some((min, max)) = counts else {
            return Ok(None);
        };
        let error = |message: String| RegexError { at, message };
        if min > MAX_COUNT || max.is_some_and(|n| n > MAX_COUNT) {
            return Err(error(format!("a count above {MAX_COUNT}")));
        }
        if max.is_some_and(|n| n < min) {
            return Err(error("a count {m,n} with n below m".to_string()));
        }
        Ok(Some(((min, max), close + 2)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(pattern: &str) -> Regex {
        Regex::new(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"))
    }

    fn finds(pattern: &str, input: &str) -> Option<usize> {
        re(pattern).find(input.as_bytes())
    }

    #[test]
    fn literals_classes_and_anchors() {
        assert_eq!(finds("PONG", "+PONG\r\n"), Some(5));
        assert_eq!(finds("^\\+PONG", "+PONG\r\n"), Some(5));
        assert_eq!(finds("^PONG", "+PONG\r\n"), None);
        assert_eq!(
            finds("PONG\\r$", "+PONG\r\n"),
            Some(6),
            "$ before a final \\n"
        );
        assert_eq!(finds("PONG$", "+PONG\r\n"), None);
        assert_eq!(
            finds("role:(master|slave)", "# Replication\r\nrole:master\r\n"),
            Some(26)
        );
        assert_eq!(finds("[0-9]{3}", "HTTP/1.1 204"), Some(12));
        assert_eq!(finds("^HTTP/1\\.[01] 2\\d\\d", "HTTP/1.0 200 OK"), Some(12));
        assert_eq!(finds("[^a-z]", "abc1"), Some(4));
        assert_eq!(finds("[[:digit:]]+x", "ab12x"), Some(5));
        assert_eq!(finds("\\bmaster\\b", "role:master\r\n"), Some(11));
        assert_eq!(finds("\\bmaster\\b", "role:masters"), None);
        assert_eq!(finds("a.c", "a\nc abc"), Some(7), "'.' is not a newline");
        assert_eq!(finds("\\x52\\x00", "R\0"), Some(2));
        assert_eq!(finds("", "anything"), Some(0));
        assert_eq!(finds("x?", ""), Some(0));
        assert_eq!(finds("a{2,3}", "a aa"), Some(4));
        assert_eq!(finds("(?:ab)+c", "abababc"), Some(7));
        assert_eq!(finds("a+?b", "aab"), Some(3), "lazy is accepted");
        assert_eq!(
            finds("a{", "a{"),
            Some(2),
            "a brace that starts no count is literal"
        );
    }

    #[test]
    fn the_earliest_end_is_returned() {
        assert_eq!(finds("a+", "baaa"), Some(2));
        assert_eq!(finds("b|abc", "abc"), Some(2));
    }

    #[test]
    fn matching_is_linear_where_backtracking_is_exponential() {
        let evil = re("(a*)*b");
        let input = vec![b'a'; 16 * 1024];
        let started = std::time::Instant::now();
        assert_eq!(evil.find(&input), None);
        // Not a timing assertion on speed: a backtracking matcher would not
        // return at all; this one does.
        let _ = started.elapsed();
        let nested = re("(x+x+)+y");
        assert!(!nested.is_match(&[b'x'; 5000]));
    }

    #[test]
    fn refused_constructs_say_why() {
        let cases = [
            ("(a)\\1", "back-references"),
            ("(?=a)", "look-around"),
            ("(?i)abc", "look-around, flags"),
            ("\\p{L}", "Unicode"),
            ("a*+", "possessive"),
            ("a{1001}", "above 1000"),
            ("a{3,2}", "below m"),
            ("(ab", "without its ')'"),
            ("ab)", "unmatched ')'"),
            ("[ab", "without its ']'"),
            ("*a", "nothing before it"),
            ("[z-a]", "before its start"),
            ("\\q", "unknown escape"),
            ("\\x4", "two hex digits"),
            ("[[:nope:]]", "unknown class"),
            ("^*", "means nothing"),
        ];
        for (pattern, why) in cases {
            match Regex::new(pattern) {
                Ok(_) => panic!("{pattern} was accepted"),
                Err(e) => assert!(e.message.contains(why), "{pattern}: {e}"),
            }
        }
    }

    /// Patterns and inputs drawn from the syntax's own characters (a
    /// fixed xorshift: the same on every run): no panic, whatever the mix.
    #[test]
    fn random_patterns_and_inputs_never_panic() {
        let alphabet = b"ab.[]^$-:*+?{}(),|\\dwsbxr0129";
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for _ in 0..20_000 {
            let len = next(12);
            let pattern: Vec<u8> = (0..len).map(|_| alphabet[next(alphabet.len())]).collect();
            let Ok(regex) = Regex::new(&String::from_utf8_lossy(&pattern)) else {
                continue;
            };
            let input: Vec<u8> = (0..next(20))
                .map(|_| alphabet[next(alphabet.len())])
                .collect();
            let _ = regex.find(&input);
        }
        assert!(Regex::new("[[:]").is_err());
        assert!(Regex::new("[[:alpha]").is_err());
    }

    #[test]
    fn a_pattern_too_large_is_refused_not_built() {
        let e = Regex::new("(a{1000}){1000}").unwrap_err();
        assert!(e.message.contains("more than"), "{e}");
    }
}
