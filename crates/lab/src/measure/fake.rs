//! A scripted [`Measurer`] for tests: each run gives what the test says, and the kernel
//! counters move by what the test says the run made them move.
//!
//! ```
//! use pagelab_lab::measure::{fake::{FakeMeasurer, FakeRun}, measure};
//! use pagelab_lab::runner::RunSpec;
//! use std::time::Duration;
//!
//! let mut m = FakeMeasurer::new();
//! m.push(FakeRun::exits(0).wall(Duration::from_secs(2)).counter("hugepages-64kB/anon_fault_alloc", 128));
//! let spec = RunSpec { argv: vec!["prog".into()], ..Default::default() };
//! let out = measure(&mut m, &spec, &mut |_| Ok(())).unwrap();
//! assert_eq!(out.measurement.faults_by_size["64K"], 128);
//! assert_eq!(out.measurement.wall_seconds, 2.0);
//! ```

use super::{Execution, Measurer};
use crate::counters::CounterSnapshot;
use crate::runner::RunSpec;
use anyhow::{bail, Result};
use pagelab_report::ExitInfo;
use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::time::Duration;

/// One scripted run: what [`FakeMeasurer::execute`] returns, and how the counters move.
#[derive(Clone, Debug, Default)]
pub struct FakeRun {
    /// The execution to report (its pid is [`FakeMeasurer::next_pid`]).
    pub execution: Execution,
    /// What the run adds to each kernel counter (a key absent before starts at 0).
    pub counters: BTreeMap<String, i64>,
    /// Counter changes that happen outside the run (between the snapshot after it and the
    /// next one), which must not be attributed to any run.
    pub after: BTreeMap<String, i64>,
}

impl FakeRun {
    /// A run that exits with `code` after one second, having touched nothing.
    pub fn exits(code: i32) -> FakeRun {
        FakeRun {
            execution: Execution {
                wall: Duration::from_secs(1),
                exit: ExitInfo {
                    code: Some(code),
                    signal: None,
                },
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// A run killed by signal `sig`.
    pub fn killed(sig: i32) -> FakeRun {
        let mut r = FakeRun::exits(0);
        r.execution.exit = ExitInfo {
            code: None,
            signal: Some(sig),
        };
        r
    }

    /// The run's wall time.
    pub fn wall(mut self, wall: Duration) -> FakeRun {
        self.execution.wall = wall;
        self
    }

    /// The run's minor faults.
    pub fn faults(mut self, n: u64) -> FakeRun {
        self.execution.usage.minor_faults = n;
        self
    }

    /// The run's (minor, major) faults counted from the program's exec on, beside
    /// [`FakeRun::faults`], `wait4`'s (which also hold the child's before its exec).
    pub fn exec_faults(mut self, minor: u64, major: u64) -> FakeRun {
        self.execution.exec_faults = Some((minor, major));
        self
    }

    /// The run moves counter `key` by `by`.
    pub fn counter(mut self, key: &str, by: i64) -> FakeRun {
        *self.counters.entry(key.to_string()).or_default() += by;
        self
    }

    /// After the run (outside it), counter `key` moves by `by`.
    pub fn then(mut self, key: &str, by: i64) -> FakeRun {
        *self.after.entry(key.to_string()).or_default() += by;
        self
    }

    /// The run's captured standard output.
    pub fn stdout(mut self, text: &str) -> FakeRun {
        self.execution.stdout = text.as_bytes().to_vec();
        self
    }
}

/// Plays back [`FakeRun`]s in order; errors once they run out, naming the program.
#[derive(Clone, Debug, Default)]
pub struct FakeMeasurer {
    runs: VecDeque<FakeRun>,
    counters: BTreeMap<String, i64>,
    /// The last run's `after` changes: they become `ready` at the snapshot right after the
    /// run (which must not see them) and are applied at the one after that.
    pending: BTreeMap<String, i64>,
    ready: BTreeMap<String, i64>,
    /// The pid the next run reports to `started`.
    pub next_pid: u32,
    /// Every program run so far (its argv), in order.
    pub ran: Vec<Vec<OsString>>,
    /// The environment of every run so far, in order.
    pub envs: Vec<Vec<(OsString, OsString)>>,
}

impl FakeMeasurer {
    /// A measurer with no runs scripted, counters empty.
    pub fn new() -> FakeMeasurer {
        FakeMeasurer {
            next_pid: 1000,
            ..Default::default()
        }
    }

    /// Scripts the next run.
    pub fn push(&mut self, run: FakeRun) -> &mut FakeMeasurer {
        self.runs.push_back(run);
        self
    }

    /// Runs scripted and not yet played.
    pub fn remaining(&self) -> usize {
        self.runs.len()
    }
}

impl Measurer for FakeMeasurer {
    fn snapshot(&mut self) -> CounterSnapshot {
        for (k, by) in std::mem::take(&mut self.ready) {
            *self.counters.entry(k).or_default() += by;
        }
        self.ready = std::mem::take(&mut self.pending);
        CounterSnapshot {
            values: self.counters.clone(),
        }
    }

    fn execute(
        &mut self,
        spec: &RunSpec,
        started: &mut dyn FnMut(u32) -> Result<()>,
    ) -> Result<Execution> {
        let Some(run) = self.runs.pop_front() else {
            bail!("the fake measurer has no run scripted for {:?}", spec.argv);
        };
        self.ran.push(spec.argv.clone());
        self.envs.push(spec.env.clone());
        started(self.next_pid)?;
        self.next_pid += 1;
        // The run's own changes are seen by the snapshot right after it; the `after` changes
        // only by the one after that (the next run's "before").
        for (k, by) in run.counters {
            *self.counters.entry(k).or_default() += by;
        }
        self.pending = run.after;
        Ok(run.execution)
    }
}
