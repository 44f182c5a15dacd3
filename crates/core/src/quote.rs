//! Input quoted in a message, made safe to print on a terminal.
//!
//! A crafted trace line, config value or file name can carry escape
//! sequences (set the window title, clear the screen, rewrite earlier
//! output) or bidirectional overrides that make the quoted text read as
//! something else. Every message that quotes input passes it through
//! [`escape`] or [`escape_bytes`], and the binary passes each whole error
//! message through [`escape`] once more before printing it.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` is shown as an escape: control characters other than newline
/// and tab (C0, DEL, C1) and the invisible format characters that reorder or
/// hide text (bidirectional overrides and isolates, zero-width characters).
fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// `text` with every character a terminal could act on written as `\xNN`
/// (below U+0100) or `\u{NNNN}`; printable text, newlines and tabs are kept.
/// Borrows when nothing needs escaping, which is the common case.
///
/// ```
/// assert_eq!(pagelab_core::escape("a\x1b]0;title\x07b"), "a\\x1b]0;title\\x07b");
/// assert_eq!(pagelab_core::escape("plain `text`"), "plain `text`");
/// ```
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        push_char(&mut out, c);
    }
    Cow::Owned(out)
}

/// [`escape`] for bytes that may not be UTF-8: a byte that is not part of a
/// valid character is written as `\xNN`.
///
/// ```
/// assert_eq!(pagelab_core::escape_bytes(b" L 10,\xff\x1b[2J"), " L 10,\\xff\\x1b[2J");
/// ```
pub fn escape_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_char(&mut out, c);
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

fn push_char(out: &mut String, c: char) {
    if !needs_escape(c) {
        out.push(c);
    } else if (c as u32) < 0x100 {
        let _ = write!(out, "\\x{:02x}", c as u32);
    } else {
        let _ = write!(out, "\\u{{{:04x}}}", c as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_are_escaped_and_text_is_kept() {
        assert_eq!(escape("x\u{9b}31m\u{7f}"), "x\\x9b31m\\x7f");
        assert_eq!(escape("a\u{202e}b\u{200b}"), "a\\u{202e}b\\u{200b}");
        assert_eq!(escape("line\n\ttab é 漢"), "line\n\ttab é 漢");
        assert!(matches!(escape("nothing"), Cow::Borrowed(_)));
        assert_eq!(
            escape_bytes(b"\x1b]0;PWNED\x07 \xe2\x82"),
            "\\x1b]0;PWNED\\x07 \\xe2\\x82"
        );
        assert_eq!(escape_bytes("é\r".as_bytes()), "é\\x0d");
    }
}
