//! The stats page (`GET /stats`): one self-contained HTML file, its CSS and
//! its script inline, no asset from anywhere else, so that it works on a
//! machine with no internet. It reads `/stats.json` every two seconds and
//! draws the rows: states in colour, sortable by a click on a column's
//! title, and each row's sessions per second over the last minute as a
//! small SVG chart (the `history` the JSON carries, kept by the admin
//! thread: `ops/metrics/rates.rs`). The file is `page.html` beside this
//! one, built into the binary.

/// The page, as served.
pub const PAGE: &str = include_str!("page.html");

/// Its content type.
pub const PAGE_TYPE: &str = "text/html; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_whole_and_loads_nothing_from_elsewhere() {
        assert!(PAGE.starts_with("<!DOCTYPE html>") && PAGE.trim_end().ends_with("</html>"));
        assert!(PAGE.contains("fetch(\"/stats.json\""));
        for outside in ["http://", "https://", "src=", "<link", "@import"] {
            let allowed = "http://www.w3.org/2000/svg";
            let left = PAGE.replace(allowed, "");
            assert!(
                !left.contains(outside),
                "the page refers outside: {outside}"
            );
        }
    }
}
