//! `pagelab`: a laboratory for page sizes.
//!
//! The whole pipeline on one page: parse the command line, open a trace source
//! (a file, standard input or a built-in workload), run the engine over it,
//! write the versioned JSON result, and render tables, CSV and plots from it.

use pagelab as _;

mod args;
mod cmd;
mod out;
mod progress;

use clap::Parser;

fn main() {
    // Like other Unix filters, die quietly when the reader of our output goes
    // away (`pagelab convert t.trace - | head`) instead of reporting EPIPE.
    // SAFETY: restoring the default disposition of a signal has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = args::Cli::parse();
    // The SIMD tier is read once, here: a wrong PAGELAB_ISA is refused before
    // any work rather than quietly run on the portable tier, as the libraries
    // would (`pagelab_core::isa::active`).
    if let Err(e) = pagelab_core::isa::selected() {
        eprintln!("pagelab: error: {e}");
        std::process::exit(2);
    }
    if let Err(e) = set_max_ref_size(cli.max_ref_size.as_deref()) {
        eprintln!(
            "pagelab: error: {}",
            pagelab_core::escape(&format!("{e:#}"))
        );
        std::process::exit(2);
    }
    recover_knobs();
    // Each command returns the status to exit with (the program's, for `run`), or an error.
    let outcome: anyhow::Result<i32> = match cli.command {
        args::Command::Study(a) => cmd::study::run(a).map(|()| 0),
        args::Command::Sim(a) => cmd::sim::run(*a).map(|()| 0),
        args::Command::Convert(a) => cmd::convert::run(a).map(|()| 0),
        args::Command::Capture(a) => cmd::capture::run(a),
        args::Command::Presets => cmd::list::presets().map(|()| 0),
        args::Command::Machines(a) => cmd::machines::run(a).map(|()| 0),
        args::Command::Workloads => cmd::list::workloads().map(|()| 0),
        args::Command::Run(a) => cmd::run::run(a),
        args::Command::Bench(a) => cmd::bench::run(a),
        args::Command::BenchChild(a) => cmd::bench::child(a).map(|()| 0),
        args::Command::Validate(a) => cmd::validate::run(a),
        args::Command::Sweep(a) => cmd::sweep::run(a),
        args::Command::Report(a) => cmd::report::run(a).map(|()| 0),
        args::Command::Sharing(a) => cmd::sharing::run(a).map(|()| 0),
        args::Command::ValidateChild(a) => cmd::validate::child(a).map(|()| 0),
    };
    report_peak_rss();
    let code = outcome.unwrap_or_else(|e| {
        // The message may quote input (a file name, a TOML line): no byte of
        // it may reach the terminal as a control sequence.
        eprintln!(
            "pagelab: error: {}",
            pagelab_core::escape(&format!("{e:#}"))
        );
        // An interrupt exits 128 + signal, as a shell reports a program that signal ended.
        pagelab_lab::LabError::exit_code_of(&e)
    });
    std::process::exit(code);
}

/// `--max-ref-size`: a size up to 4G - 1 (the largest a reference can hold).
fn set_max_ref_size(arg: Option<&str>) -> anyhow::Result<()> {
    if let Some(text) = arg {
        pagelab_trace::set_max_ref_size(pagelab::model::max_ref_size(text)?);
    }
    Ok(())
}

/// Puts back THP and hugetlb settings that a pagelab killed with SIGKILL left
/// changed (its journal survives it), saying so; a failure to do so is a warning
/// naming what is still changed, not a reason to refuse the command asked for.
fn recover_knobs() {
    match pagelab_lab::session::recover(&pagelab_lab::sysfs::Sysfs::host()) {
        Ok(Some(msg)) => eprintln!("{msg}"),
        Ok(None) => {}
        Err(e) => eprintln!("pagelab: warning: {e:#}"),
    }
}

/// With `PAGELAB_PEAK_RSS` set, prints this process's peak resident memory
/// (`VmHWM`) on standard error: the tests' check that memory stays flat. (A
/// parent's `wait4` figure would also count the pre-exec copy of the parent.)
fn report_peak_rss() {
    if std::env::var_os("PAGELAB_PEAK_RSS").is_none() {
        return;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(line) = status.lines().find(|l| l.starts_with("VmHWM:")) {
        eprintln!(
            "pagelab: peak rss {}",
            line.trim_start_matches("VmHWM:").trim()
        );
    }
}
