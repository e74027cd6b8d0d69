//! "Did you mean": the closest of the names a word could have been, by
//! edit distance, for the messages that refuse a misspelt name (a
//! configuration's option, a server named in an admin action).

/// Levenshtein distance: the fewest insertions, deletions and substitutions
/// that turn `a` into `b`.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

/// The closest of `candidates` to `word`, if close enough to be a typo: one
/// edit for words of up to three characters, two for longer ones. On a tie
/// the first candidate wins.
pub fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let best = candidates.iter().min_by_key(|c| edit_distance(word, c))?;
    let limit = if word.chars().count() <= 3 { 1 } else { 2 };
    (edit_distance(word, best) <= limit).then_some(*best)
}

/// ` (did you mean 'best'?)`, or nothing when no candidate is close.
pub fn did_you_mean(word: &str, candidates: &[&str]) -> String {
    match suggest(word, candidates) {
        Some(best) => format!(" (did you mean '{best}'?)"),
        None => String::new(),
    }
}
