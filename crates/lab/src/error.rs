//! The lab's typed error: what a caller must tell apart to exit as a shell expects.

/// Why a lab command did not finish normally.
///
/// [`LabError::exit_code`] is the status a command line should end with: `128 + signal` after
/// an interrupt (as a shell reports a program killed by that signal), 1 for anything else.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A held signal (SIGINT, SIGTERM, SIGHUP or SIGQUIT) stopped the command; every knob it
    /// changed is restored.
    #[error("interrupted by signal {signal}; every setting is restored")]
    Interrupted {
        /// The signal number.
        signal: i32,
    },
    /// Anything else, with its context chain (`{:#}` prints it whole).
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

impl LabError {
    /// The exit status for this error: `128 + signal` when interrupted, otherwise 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            LabError::Interrupted { signal } => 128 + signal,
            LabError::Failed(_) => 1,
        }
    }

    /// The signal of the [`LabError::Interrupted`] in `e`'s chain, if the error is an interrupt.
    pub fn interrupt_in(e: &anyhow::Error) -> Option<i32> {
        e.chain().find_map(|c| match c.downcast_ref::<LabError>() {
            Some(LabError::Interrupted { signal }) => Some(*signal),
            _ => None,
        })
    }

    /// The exit status for any error a command returns: that of the [`LabError`] in its chain,
    /// else 1.
    pub fn exit_code_of(e: &anyhow::Error) -> i32 {
        e.chain()
            .find_map(|c| c.downcast_ref::<LabError>())
            .map_or(1, LabError::exit_code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupts_exit_128_plus_the_signal_and_the_rest_1() {
        let e = anyhow::Error::new(LabError::Interrupted { signal: 15 });
        assert_eq!(LabError::exit_code_of(&e), 143);
        assert_eq!(LabError::exit_code_of(&e.context("validating")), 143);
        let before =
            anyhow::Error::new(LabError::Interrupted { signal: 2 }).context("`x` had not started");
        assert_eq!(LabError::interrupt_in(&before), Some(2));
        assert_eq!(LabError::exit_code_of(&before), 130);
        let other = anyhow::anyhow!("no THP");
        assert_eq!(LabError::exit_code_of(&other), 1);
        assert_eq!(LabError::interrupt_in(&other), None);
        let failed = LabError::from(anyhow::anyhow!("inner").context("outer"));
        assert_eq!(format!("{failed:#}"), "outer: inner");
    }
}
