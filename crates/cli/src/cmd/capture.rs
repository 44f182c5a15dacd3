//! `pagelab capture`, and the sources of `study`/`sim -- PROGRAM` and of `--skip`/`--limit`.

use crate::args::{CaptureArgs, LayoutArgs, ProgramArgs, SimArgs, StudyArgs, WindowArgs};
use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use pagelab_capture::layout::LayoutParams;
use pagelab_capture::{Backend, Capture, CaptureCommand, Relocated, StdoutTo, Window};
use pagelab_core::{Event, SourceInfo};
use pagelab_trace::{NativeWriter, PageBatch, PageFilter, TraceError, TraceSource};
use std::io::Write;
use std::sync::mpsc;
use std::time::Instant;

type Source = Box<dyn TraceSource + Send>;

/// Events per batch between the capturing thread and the writer.
const BATCH: usize = 64 * 1024;

pub fn run(a: CaptureArgs) -> Result<i32> {
    let to_stdout = a.output == "-";
    let stdout = if to_stdout {
        StdoutTo::Stderr
    } else {
        StdoutTo::Inherit
    };
    let mut src = Reported::new(Inner::Captured(spawn(&a.program, stdout)?.context("give the program to capture after `--`, e.g. `pagelab capture -o out.trace -- gzip -9 file`")?));
    // The trace file appears only when the capture is whole.
    let out = pagelab_core::Output::create(&a.output)
        .with_context(|| format!("creating {}", a.output))?;
    let start = Instant::now();
    let progress = Progress::new(&src.info().name);
    let mut window = Window::new(&mut src, a.window.skip, a.window.limit);
    let (events, refs, writer) = write_native(&mut window, out, &progress)
        .with_context(|| format!("capturing to {}", a.output))?;
    progress.finish();
    let cut = window.cut_short();
    writer
        .finish()
        .and_then(|w| w.commit())
        .with_context(|| format!("writing {}", a.output))?;
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "pagelab: captured {refs} references ({events} events) in {secs:.2} s, {:.1} M refs/s; wrote {}",
        refs as f64 / secs.max(1e-9) / 1e6,
        a.output
    );
    // The captured program's status is pagelab's.
    Ok(src.finish(cut))
}

/// Copies `src` into a native trace, reading on one thread while encoding on this one.
fn write_native<W: Write>(
    src: &mut (dyn TraceSource + Send),
    out: W,
    progress: &Progress,
) -> Result<(u64, u64, NativeWriter<W>)> {
    let start = Instant::now();
    let mut writer = NativeWriter::new(out)?;
    let (full_tx, full_rx) = mpsc::sync_channel::<Vec<Event>>(4);
    let (empty_tx, empty_rx) = mpsc::sync_channel::<Vec<Event>>(5);
    for _ in 0..5 {
        empty_tx.send(Vec::with_capacity(BATCH))?;
    }
    let mut events = 0u64;
    let mut refs = 0u64;
    let read = std::thread::scope(|scope| -> Result<Result<(), TraceError>> {
        let reader = scope.spawn(move || -> Result<(), TraceError> {
            while let Ok(mut batch) = empty_rx.recv() {
                batch.clear();
                if !src.fill(&mut batch, BATCH)? || full_tx.send(batch).is_err() {
                    return Ok(());
                }
            }
            Ok(())
        });
        for batch in full_rx.iter() {
            for e in &batch {
                writer.write(e)?;
                refs += matches!(e, Event::Ref(_)) as u64;
            }
            events += batch.len() as u64;
            progress.refs(refs, start.elapsed());
            let _ = empty_tx.send(batch);
        }
        Ok(reader
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p)))
    })?;
    read?;
    Ok((events, refs, writer))
}

/// Starts the capture `p` names, if it names a program.
fn spawn(p: &ProgramArgs, stdout: StdoutTo) -> Result<Option<Capture>> {
    let Some((program, args)) = p.program.split_first() else {
        return Ok(None);
    };
    let backend: Backend = p.backend.parse().context("--backend")?;
    let cmd = CaptureCommand {
        backend,
        program: program.clone(),
        args: args.to_vec(),
        stdout,
    };
    let capture = Capture::spawn(&cmd)
        .with_context(|| format!("capturing `{}` with {backend}", program.to_string_lossy()))?;
    Ok(Some(capture))
}

/// `source` cut to the window the command line asks for.
fn windowed(source: Source, w: &WindowArgs) -> Source {
    if w.skip == 0 && w.limit.is_none() {
        source
    } else {
        Box::new(Window::new(source, w.skip, w.limit))
    }
}

/// Whether `--layout` asks for Linux's layout of the program `p` names:
/// the default with the qemu backend; an error for anything else than a
/// program.
pub(crate) fn linux_layout(p: &ProgramArgs, l: &LayoutArgs) -> Result<bool> {
    let qemu = p.backend == "qemu";
    match l.layout.as_deref() {
        None => Ok(qemu && !p.program.is_empty()),
        Some("captured") => Ok(false),
        Some("linux") if p.program.is_empty() => bail!(
            "--layout linux relocates a program captured with `-- PROGRAM`: a trace file does not record where the capture loaded the program, and a workload has no captured layout"
        ),
        Some("linux") if !qemu => bail!(
            "--layout linux needs the qemu backend: the {} backend records no mappings",
            p.backend
        ),
        Some("linux") => Ok(true),
        Some(other) => bail!("--layout {other}: expected linux or captured"),
    }
}

/// The program `p` names, captured with its standard output sent to `stdout`, in the
/// layout `l` asks for, as a source that reports how it ended.
fn program_capture(p: &ProgramArgs, l: &LayoutArgs, stdout: StdoutTo) -> Result<Option<Reported>> {
    if !linux_layout(p, l)? {
        return Ok(spawn(p, stdout)?.map(|c| Reported::new(Inner::Captured(c))));
    }
    let (program, args) = p.program.split_first().expect("linux_layout checked");
    let cmd = CaptureCommand {
        backend: Backend::Qemu,
        program: program.clone(),
        args: args.to_vec(),
        stdout,
    };
    let (capture, setup) =
        Capture::spawn_relocatable(&cmd, LayoutParams::default()).with_context(|| {
            format!(
                "capturing `{}` in Linux's layout",
                program.to_string_lossy()
            )
        })?;
    Ok(Some(Reported::new(Inner::Linux(Box::new(Relocated::new(
        capture, setup,
    ))))))
}

/// The program to capture as a source that reports its exit status, in
/// the layout asked for, windowed.
fn program_source(p: &ProgramArgs, l: &LayoutArgs, w: &WindowArgs) -> Result<Option<Source>> {
    Ok(program_capture(p, l, StdoutTo::Inherit)?.map(|src| windowed(Box::new(src), w)))
}

/// Captures the program `p` names (its standard output discarded) in the layout `l` asks
/// for, as the source `f` reads, and returns what `f` made with the program's exit status
/// (128 + signal when interrupted).
pub(crate) fn with_program<T>(
    p: &ProgramArgs,
    l: &LayoutArgs,
    f: impl FnOnce(&mut (dyn TraceSource + Send)) -> Result<T>,
) -> Result<(T, i32)> {
    let mut src = program_capture(p, l, StdoutTo::File("/dev/null".into()))?
        .context("give the program after `--`")?;
    let made = f(&mut src)?;
    Ok((made, src.finish(false)))
}

/// The input of `pagelab sim`: a trace, a workload or a program, windowed.
pub fn sim_source(a: &SimArgs) -> Result<Source> {
    if let Some(src) = program_source(&a.program, &a.layout, &a.window)? {
        if a.trace.is_some() || a.workload.is_some() {
            bail!("give one input: --trace, --workload or `-- PROGRAM`, not several");
        }
        return Ok(src);
    }
    let Some(src) = pagelab::builtin::open_input(
        a.trace.as_deref(),
        a.workload.as_deref(),
        a.format.as_deref(),
    )?
    else {
        bail!("give a trace with --trace FILE (or - for standard input), a workload with --workload NAME, or a program after `--`")
    };
    Ok(windowed(src, &a.window))
}

/// A built-in workload, windowed.
pub fn workload_source(spec: &str, w: &WindowArgs) -> Result<Source> {
    let src = pagelab::builtin::open(spec).with_context(|| format!("--workload {spec}"))?;
    Ok(windowed(src, w))
}

/// The inputs of `pagelab study` with their labels: the program after `--`, or the workloads.
pub fn study_sources(a: &StudyArgs, specs: &[String]) -> Result<(Vec<String>, Vec<Source>)> {
    if let Some(src) = program_source(&a.program, &a.layout, &a.window)? {
        if !a.workloads.is_empty() {
            bail!("give workloads or `-- PROGRAM`, not both");
        }
        return Ok((vec![src.info().name], vec![src]));
    }
    let sources = specs
        .iter()
        .map(|s| Ok(windowed(pagelab::builtin::open(s)?, &a.window)))
        .collect::<Result<Vec<_>>>()?;
    Ok((specs.to_vec(), sources))
}

/// A capture as read: at its own addresses, or relocated to Linux's layout.
enum Inner {
    Captured(Capture),
    Linux(Box<Relocated<Capture>>),
}

impl Inner {
    fn capture(&mut self) -> &mut Capture {
        match self {
            Inner::Captured(c) => c,
            Inner::Linux(r) => r.inner_mut(),
        }
    }

    fn source(&mut self) -> &mut dyn TraceSource {
        match self {
            Inner::Captured(c) => c,
            Inner::Linux(r) => r.as_mut(),
        }
    }

    fn source_ref(&self) -> &dyn TraceSource {
        match self {
            Inner::Captured(c) => c,
            Inner::Linux(r) => r.as_ref(),
        }
    }
}

/// A capture that tells on standard error how the program ended.
struct Reported {
    inner: Inner,
    code: Option<i32>,
    /// Whether reading the trace failed (the program is then stopped for that reason,
    /// not because a window ended).
    failed: bool,
}

impl Reported {
    fn new(inner: Inner) -> Self {
        Reported {
            inner,
            code: None,
            failed: false,
        }
    }

    /// Reports how the program ended (once; stopping it if `cut` short) and returns its exit code.
    fn finish(&mut self, cut: bool) -> i32 {
        if let Some(code) = self.code {
            return code;
        }
        let code = self.report(cut);
        self.code = Some(code);
        code
    }

    fn report(&mut self, cut: bool) -> i32 {
        let name = self.inner.source_ref().info().name;
        let capture = self.inner.capture();
        let Some(status) = capture.status() else {
            capture.stop();
            if self.failed {
                eprintln!("pagelab: stopped `{name}`: its trace could not be read on (said above)");
            } else {
                eprintln!("pagelab: stopped `{name}` after the last reference of the window");
            }
            return 0;
        };
        let code = pagelab_capture::exit_code(status);
        if let Some(sig) = pagelab_capture::interrupted() {
            eprintln!("pagelab: `{name}` interrupted ({status}); the trace holds what ran");
            // As a shell reports a program that the signal ended.
            return 128 + sig;
        }
        if code != 0 && !cut {
            eprintln!("pagelab: `{name}` ended with {status}; the trace holds what ran");
        }
        code
    }

    /// `more` of a fill, noting a failure and reporting the end.
    fn ended(&mut self, more: Result<bool, TraceError>) -> Result<bool, TraceError> {
        match more {
            Ok(false) => {
                self.finish(false);
                Ok(false)
            }
            Err(e) => {
                self.failed = true;
                Err(e)
            }
            more => more,
        }
    }
}

impl TraceSource for Reported {
    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        let more = self.inner.source().fill(out, max);
        self.ended(more)
    }

    fn info(&self) -> SourceInfo {
        self.inner.source_ref().info()
    }

    // The capture filters as it decodes: the study takes that path.
    fn fill_pages(
        &mut self,
        filter: &mut PageFilter,
        out: &mut PageBatch,
        max: usize,
    ) -> Result<bool, TraceError> {
        let more = self.inner.source().fill_pages(filter, out, max);
        self.ended(more)
    }

    fn parses_to_pages(&self) -> bool {
        self.inner.source_ref().parses_to_pages()
    }
}

impl Drop for Reported {
    fn drop(&mut self) {
        self.finish(true);
    }
}
