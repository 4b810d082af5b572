//! Seed 002 (Scala sketch) tokenising: lowercase, keep the runs of `[\w\u4e00-\u9fcc]` joined
//! (Java's `\w` is ASCII `[a-zA-Z_0-9]`), then a sliding window of `width` chars, or the whole
//! (possibly empty) string when it is shorter.

/// The kept characters, lowercased.
pub fn filtered(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            if c.is_ascii_alphanumeric() || c == '_' {
                out.push(c.to_ascii_lowercase());
            }
        } else {
            for l in c.to_lowercase() {
                if l.is_ascii_alphanumeric() || l == '_' || ('\u{4e00}'..='\u{9fcc}').contains(&l) {
                    out.push(l);
                }
            }
        }
    }
    out
}

/// Calls `emit` with each window of `width` chars of `s` in order (or `s` itself when shorter).
pub fn for_each_window<'t>(s: &'t str, width: usize, mut emit: impl FnMut(&'t str)) {
    let bounds: Vec<usize> = s
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(s.len()))
        .collect();
    let chars = bounds.len() - 1;
    if chars < width {
        emit(s);
        return;
    }
    for a in 0..=(chars - width) {
        emit(&s[bounds[a]..bounds[a + width]]);
    }
}
