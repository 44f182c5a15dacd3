//! The one progress display of every long command (`study`, `sim`, `capture`,
//! `convert`, `run`, `bench`, `validate`): a line on standard error drawn by
//! `indicatif`, only when standard error is a terminal. Otherwise (a pipe, a
//! file, CI's log) nothing is drawn: no escape code ever reaches a log.
//!
//! Two kinds of news reach it: a count of references so far (the engine's
//! [`pagelab_engine::Progress`], a capture, a conversion), shown as
//! `label: 12.6 M refs, 85.3 M refs/s`; and a step of the lab's runs, shown as
//! `label: <what runs now>`. The line is cleared when the command is done.
//! (`run`, whose program shares the terminal, gets its steps as lines of their
//! own instead: [`Progress::line`].)

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pagelab_core::{Event, SourceInfo};
use pagelab_trace::{TraceError, TraceSource};
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// A progress line on standard error (see the module's doc).
pub struct Progress {
    bar: ProgressBar,
    label: String,
}

impl Progress {
    /// A progress line for `label`, drawn only when standard error is a terminal.
    pub fn new(label: &str) -> Self {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        Progress::to(label, target)
    }

    /// A progress line for `label` that is never drawn: for work that runs beside other
    /// work on threads of its own, whose lines would take turns on the one line.
    pub fn hidden(label: &str) -> Self {
        Progress::to(label, ProgressDrawTarget::hidden())
    }

    /// A progress line for `label` drawn on `target`.
    fn to(label: &str, target: ProgressDrawTarget) -> Self {
        let bar = ProgressBar::with_draw_target(None, target);
        bar.set_style(
            ProgressStyle::with_template("{prefix}: {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_prefix(pagelab_core::escape(label).into_owned());
        Progress {
            bar,
            label: label.to_string(),
        }
    }

    /// Shows `refs` references read in `elapsed`, and the rate.
    pub fn refs(&self, refs: u64, elapsed: Duration) {
        if self.bar.is_hidden() {
            return;
        }
        let rate = refs as f64 / elapsed.as_secs_f64().max(1e-9) / 1e6;
        self.bar.set_message(format!(
            "{:.1} M refs, {:.1} M refs/s",
            refs as f64 / 1e6,
            rate
        ));
    }

    /// Shows a step of a lab run (`msg` may quote a program's name: it is escaped).
    pub fn step(&self, msg: &str) {
        if !self.bar.is_hidden() {
            self.bar.set_message(pagelab_core::escape(msg).into_owned());
        }
    }

    /// Shows a step of a lab run as a line of its own (`label: msg`), for a run whose
    /// program writes to the same terminal: its output would run into a redrawn line.
    /// (Use either this or the redrawn line on one `Progress`, not both.)
    pub fn line(&self, msg: &str) {
        if !self.bar.is_hidden() {
            let _ = writeln!(
                std::io::stderr(),
                "{}: {}",
                pagelab_core::escape(&self.label),
                pagelab_core::escape(msg)
            );
        }
    }

    /// Clears the line (also done on drop).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// `src` reporting on this line the references read through it.
    pub fn watch<'a>(&'a self, src: &'a mut dyn TraceSource) -> Watched<'a> {
        Watched {
            inner: src,
            progress: self,
            refs: 0,
            start: Instant::now(),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

impl pagelab_engine::Progress for Progress {
    fn update(&mut self, refs: u64, elapsed: Duration) {
        self.refs(refs, elapsed);
    }

    fn done(&mut self) {
        self.finish();
    }
}

/// A source whose references are counted on a [`Progress`] line as they are read.
pub struct Watched<'a> {
    inner: &'a mut dyn TraceSource,
    progress: &'a Progress,
    refs: u64,
    start: Instant,
}

impl TraceSource for Watched<'_> {
    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        let before = out.len();
        let more = self.inner.fill(out, max)?;
        self.refs += out[before..]
            .iter()
            .filter(|e| matches!(e, Event::Ref(_)))
            .count() as u64;
        self.progress.refs(self.refs, self.start.elapsed());
        Ok(more)
    }

    fn info(&self) -> SourceInfo {
        self.inner.info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use indicatif::TermLike;
    use std::sync::{Arc, Mutex};

    /// A terminal that keeps what is drawn on it.
    #[derive(Debug, Clone, Default)]
    struct Screen(Arc<Mutex<String>>);

    impl TermLike for Screen {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.write_str(&format!("{s}\n"))
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push_str(s);
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            self.write_str("<clear>")
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_terminal_sees_the_counts_and_the_steps_then_a_cleared_line() {
        let screen = Screen::default();
        let p = Progress::to(
            "gzip",
            ProgressDrawTarget::term_like(Box::new(screen.clone())),
        );
        p.refs(12_600_000, Duration::from_millis(500));
        let drawn = screen.0.lock().unwrap().clone();
        assert!(
            drawn.contains("gzip: 12.6 M refs, 25.2 M refs/s"),
            "{drawn:?}"
        );
        // indicatif draws at most 20 times a second.
        std::thread::sleep(Duration::from_millis(120));
        p.step("4K run 1 of 3: \x1b[2Jx");
        let drawn = screen.0.lock().unwrap().clone();
        assert!(
            drawn.contains("gzip: 4K run 1 of 3: \\x1b[2Jx"),
            "{drawn:?}"
        );
        assert!(!drawn.contains('\x1b'), "escaped: {drawn:?}");
        drop(p);
        assert!(screen.0.lock().unwrap().ends_with("<clear>"));
    }

    #[test]
    fn off_a_terminal_nothing_is_drawn() {
        // The test harness captures standard error: not a terminal.
        if std::io::stderr().is_terminal() {
            eprintln!("skipped: standard error is a terminal here");
            return;
        }
        let p = Progress::new("gzip");
        assert!(p.bar.is_hidden());
        p.refs(1 << 20, Duration::from_millis(10));
        p.step("x");
    }

    #[test]
    fn a_watched_source_counts_only_references() {
        let text = &b" L 1000,4\n==1== a note\n S 2000,8\n"[..];
        let mut src = pagelab_trace::LackeyReader::new(text, "v");
        let p = Progress::to("v", ProgressDrawTarget::hidden());
        let mut w = p.watch(&mut src);
        let mut out = Vec::new();
        while w.fill(&mut out, 1).unwrap() {}
        assert_eq!((w.refs, out.len()), (2, 2));
    }
}
