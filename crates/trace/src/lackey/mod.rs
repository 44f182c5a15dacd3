//! Valgrind Lackey text: `valgrind --tool=lackey --trace-mem=yes`.
//!
//! Lackey prints one reference per line: `I  04000b20,3` for an instruction
//! fetch and ` L 1ffefffc58,8`, ` S ...`, ` M ...` for a load, store and
//! modify; the address is hexadecimal without `0x` (at least eight digits,
//! zero padded) and the size decimal. Valgrind's own lines start with `==`.

mod fast;
mod fast_events;
mod fast_pages;
mod line;
mod pieces;
mod reader;
mod writer;

#[cfg(test)]
mod pieces_tests;
#[cfg(test)]
mod tests;

pub use pieces::{PieceError, Pieces};
pub use reader::LackeyReader;
pub use writer::LackeyWriter;

/// What a valid line looks like, for error messages.
pub(crate) const VALID_LINE: &str = "a Lackey line is `I  <hex address>,<decimal size>` \
     or ` L|S|M <hex address>,<decimal size>` (e.g. `I  04000b20,3`, ` L 1ffefffc58,8`), \
     a Valgrind line starting with `==`, or empty";
