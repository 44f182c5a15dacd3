//! A progress line on standard error, shown only when standard error is a terminal.

use pagelab_engine::Progress;
use std::io::IsTerminal;
use std::io::Write;
use std::time::Duration;

/// Prints `label: N refs, R M refs/s` in place while a long trace runs.
pub struct StderrProgress {
    label: String,
    enabled: bool,
    shown: bool,
}

impl StderrProgress {
    /// A progress line for `label`, silent unless standard error is a terminal.
    pub fn new(label: &str) -> Self {
        StderrProgress {
            label: label.to_string(),
            enabled: std::io::stderr().is_terminal(),
            shown: false,
        }
    }
}

impl Progress for StderrProgress {
    fn update(&mut self, refs: u64, elapsed: Duration) {
        if !self.enabled {
            return;
        }
        let rate = refs as f64 / elapsed.as_secs_f64().max(1e-9) / 1e6;
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[K{}: {:.1} M refs, {:.1} M refs/s",
            self.label,
            refs as f64 / 1e6,
            rate
        );
        let _ = err.flush();
        self.shown = true;
    }

    fn done(&mut self) {
        if self.shown {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
        }
    }
}
