//! Whole numbers grouped by thousands (`10,000`), for the messages an
//! operator reads: a descriptor budget's arithmetic, a benchmark's rates.

/// `10000` as `10,000`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_by_thousands() {
        for (n, text) in [
            (0, "0"),
            (999, "999"),
            (1000, "1,000"),
            (10000, "10,000"),
            (1234567, "1,234,567"),
        ] {
            assert_eq!(grouped(n), text);
        }
    }
}
