//! Standard output that reports a failed write as an error.
//!
//! `println!` panics when standard output cannot be written (a full disk,
//! `> /dev/full`); the commands print through [`outln!`] and [`out!`] instead,
//! which return an error naming standard output. A closed pipe never gets
//! here: `main` restores SIGPIPE's default, so `pagelab ... | head` ends
//! quietly as other Unix filters do.

use std::io::Write;

/// Writes `args` to standard output and flushes, so that the error (if any)
/// is seen at this line and not at exit, when it could only be lost.
pub fn print(args: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_fmt(args)
        .and_then(|()| out.flush())
        .map_err(|e| anyhow::anyhow!("cannot write to standard output: {e}"))
}

/// `print!` that returns an error instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::print(format_args!($($arg)*))
    };
}

/// `println!` that returns an error instead of panicking.
macro_rules! outln {
    () => {
        $crate::out::print(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::print(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {out, outln};
