//! `pagelab`: a laboratory for page sizes.
//!
//! The whole pipeline on one page: parse the command line, open a trace source
//! (a file, standard input or a built-in workload), run the engine over it,
//! write the versioned JSON result, and render tables, CSV and plots from it.

mod args;
mod builtin;
mod cmd;
mod progress;

use clap::Parser;

fn main() {
    let cli = args::Cli::parse();
    let outcome = match cli.command {
        args::Command::Study(a) => cmd::study::run(a),
        args::Command::Sim(a) => cmd::sim::run(a),
        args::Command::Convert(a) => cmd::convert::run(a),
        args::Command::Capture(a) => cmd::capture::run(a),
        args::Command::Presets => cmd::list::presets(),
        args::Command::Workloads => cmd::list::workloads(),
    };
    if let Err(e) = outcome {
        eprintln!("pagelab: error: {e:#}");
        std::process::exit(1);
    }
}
