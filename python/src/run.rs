//! `run` (what `pagelab study` and `pagelab sim` do for one input) and
//! `capture` (what `pagelab capture` does).

use anyhow::{bail, Context, Result};
use pagelab_capture::{Backend, Capture, CaptureCommand, StdoutTo, Window};
use pagelab_engine::StudyConfig;
use pagelab_machine::Machine;
use pagelab_report::SimResult;
use pyo3::prelude::*;

/// A source the engine can be moved to another thread with.
pub(crate) use pagelab::builtin::Source;

/// One input, as the Python layer passes it (a dict with every key).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct SourceWords {
    trace: Option<String>,
    workload: Option<String>,
    format: Option<String>,
    skip: u64,
    limit: Option<u64>,
}

/// The model's words, as the Python layer passes them (a dict with every key).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct ModelWords {
    machine: Option<String>,
    page_sizes: Option<String>,
    tlb: Option<String>,
    policies: Vec<String>,
    phys: Option<String>,
    memory: Option<String>,
    strict: bool,
    cow: String,
    virt: Option<String>,
    /// Threads the run may use (`pagelab_engine::with_threads`); the machine's when `None`.
    /// Results do not depend on it, so the provenance leaves it out.
    threads: Option<usize>,
}

impl SourceWords {
    /// The input as `key=value` words, for the provenance.
    fn words(&self) -> Vec<String> {
        let mut w = Vec::new();
        push(&mut w, "trace", self.trace.as_deref());
        push(&mut w, "workload", self.workload.as_deref());
        push(&mut w, "format", self.format.as_deref());
        if self.skip != 0 {
            w.push(format!("skip={}", self.skip));
        }
        if let Some(limit) = self.limit {
            w.push(format!("limit={limit}"));
        }
        w
    }
}

impl ModelWords {
    /// The bound on the run's threads that `threads` asks for (`None`: the machine's).
    pub(crate) fn thread_bound(&self) -> PyResult<Option<std::num::NonZeroUsize>> {
        self.threads
            .map(|n| {
                std::num::NonZeroUsize::new(n).ok_or_else(|| {
                    crate::PagelabError::new_err(
                        "threads=0: a run needs at least one thread (or None)",
                    )
                })
            })
            .transpose()
    }

    /// `function` and its arguments as the provenance's call: `words` (the input's), then the
    /// model's words that were given (`machine=...`, `policies=a,b`, ...). A Python result
    /// has no command line; this is what stands for it.
    pub(crate) fn call(&self, function: &str, mut words: Vec<String>) -> Vec<String> {
        let mut call = vec![format!("python: {function}")];
        call.append(&mut words);
        push(&mut call, "machine", self.machine.as_deref());
        push(&mut call, "page_sizes", self.page_sizes.as_deref());
        push(&mut call, "tlb", self.tlb.as_deref());
        if !self.policies.is_empty() {
            call.push(format!("policies={}", self.policies.join(",")));
        }
        push(&mut call, "phys", self.phys.as_deref());
        push(&mut call, "memory", self.memory.as_deref());
        if self.strict {
            call.push("strict=True".to_string());
        }
        if !self.policies.is_empty() {
            call.push(format!("cow={}", self.cow));
        }
        push(&mut call, "virt", self.virt.as_deref());
        call
    }
}

/// Appends `key=value` when a value was given.
fn push(words: &mut Vec<String>, key: &str, value: Option<&str>) {
    if let Some(v) = value {
        words.push(format!("{key}={v}"));
    }
}

/// Runs the study (no policies) or the policy model over one input and
/// returns the `pagelab.sim/1` JSON, with the GIL released throughout.
#[pyfunction]
pub fn run(py: Python<'_>, source: SourceWords, model: ModelWords) -> PyResult<String> {
    let threads = model.thread_bound()?;
    py.detach(|| {
        pagelab_engine::with_threads(threads, || {
            let (cfg, machine) = study_config(&model)?;
            let src = open(&source)?;
            let inputs = match &source.trace {
                Some(t) => pagelab::provenance::input_checksum(t)?
                    .into_iter()
                    .collect(),
                None => source
                    .workload
                    .as_deref()
                    .map(pagelab::provenance::input_checksum)
                    .transpose()?
                    .flatten()
                    .into_iter()
                    .collect(),
            };
            simulate(
                src,
                &cfg,
                machine.as_ref(),
                &model,
                model.call("pagelab.sim", source.words()),
                inputs,
            )
        })
    })
    .map_err(|e| crate::error(&e))
}

/// The study of `src` under `model` (the policy runs when it names policies), as JSON, with
/// its provenance: `call` (the Python call, as [`ModelWords::call`] words it) and `inputs`.
/// The study is timed, as `pagelab sim` times it, when the machine has caches (and under
/// nested paging when `virt` is `nested:host=SIZE`); the policy runs are not, as on the
/// command line.
pub(crate) fn simulate(
    mut src: Source,
    cfg: &StudyConfig,
    machine: Option<&Machine>,
    model: &ModelWords,
    call: Vec<String>,
    inputs: Vec<pagelab_report::InputChecksum>,
) -> Result<String> {
    let cost = pagelab::model::cost_config(machine, cfg, model.virt.as_deref())?;
    let mut result: SimResult = if model.policies.is_empty() {
        match &cost {
            Some(c) => pagelab_engine::run_cost_study(&mut *src, cfg, c, &mut ())?,
            None => pagelab_engine::run_study(&mut *src, cfg, &mut ())?,
        }
    } else {
        let pcfg = pagelab::model::policy_config(
            cfg,
            &pagelab::model::PolicyArgs {
                policies: &model.policies,
                phys: model.phys.as_deref().map(std::path::Path::new),
                memory: model.memory.as_deref(),
                strict: model.strict,
                cow: &model.cow,
                machine,
                page_cluster: None,
                highpte: false,
                bind: None,
                mempolicy: None,
                pcp: None,
                asids: None,
                page_cache: None,
                fault_around: None,
            },
        )?;
        pagelab_engine::run_policies(&mut *src, &pcfg, &mut ())?
    };
    result.provenance = Some(pagelab::provenance::provenance(
        call,
        model.machine.as_deref(),
        inputs,
    )?);
    Ok(serde_json::to_string(&result)?)
}

/// The engine's configuration and the machine, as `--machine`, `--page-sizes`
/// and `--tlb` give them (the machine's page sizes and TLB by default).
pub(crate) fn study_config(model: &ModelWords) -> Result<(StudyConfig, Option<Machine>)> {
    pagelab::model::machine_study_config(
        model.machine.as_deref(),
        model.page_sizes.as_deref(),
        model.tlb.as_deref(),
    )
}

/// Opens a trace file or a workload (the bundled real trace among them), windowed.
fn open(s: &SourceWords) -> Result<Source> {
    let src = pagelab::builtin::open_input(
        s.trace.as_deref(),
        s.workload.as_deref(),
        s.format.as_deref(),
    )?
    .context("give one input: a trace (trace=PATH) or a workload (workload=SPEC)")?;
    Ok(if s.skip == 0 && s.limit.is_none() {
        src
    } else {
        Box::new(Window::new(src, s.skip, s.limit))
    })
}

/// Runs `argv` under a capture backend and writes its trace to `out` in the
/// native format. Returns the events written and the program's exit status
/// (0 when the window ended first and the program was stopped).
#[pyfunction]
#[pyo3(signature = (argv, out, backend, skip, limit))]
pub fn capture(
    py: Python<'_>,
    argv: Vec<std::ffi::OsString>,
    out: String,
    backend: String,
    skip: u64,
    limit: Option<u64>,
) -> PyResult<(u64, i32)> {
    py.detach(|| -> Result<(u64, i32)> {
        let Some((program, args)) = argv.split_first() else {
            bail!("give the program to capture, e.g. pagelab.capture([\"gzip\", \"-9\", \"file\"], out=\"gzip.trace\")");
        };
        let backend: Backend = backend.parse().context("--backend")?;
        let cmd = CaptureCommand {
            backend,
            program: program.clone(),
            args: args.to_vec(),
            stdout: StdoutTo::Stderr,
        };
        let capture = Capture::spawn(&cmd).with_context(|| {
            format!("capturing `{}` with {backend}", program.to_string_lossy())
        })?;
        let mut window = Window::new(capture, skip, limit);
        let stats = pagelab_trace::convert(&mut window, &out, pagelab_trace::Format::Native)
            .with_context(|| format!("capturing to {out}"))?;
        let capture = window.inner_mut();
        let code = match capture.status() {
            Some(status) => pagelab_capture::exit_code(status),
            None => {
                capture.stop();
                0
            }
        };
        Ok((stats.events, code))
    })
    .map_err(|e| crate::error(&e))
}

/// The workloads `pagelab study` runs when given none.
#[pyfunction]
pub fn default_workloads() -> Vec<String> {
    pagelab::builtin::default_set()
}
