//! `pagelab report`: the HTML report of saved results; and what every command shares to
//! end with the answer: the recommendation lines, the provenance, the `--html` file.

use anyhow::Result;
use clap::Args;
use pagelab_report::html::{write_html, Named};
use pagelab_report::recommend::{parse_percent, Rule};
use pagelab_report::{AnyResult, InputChecksum, Provenance};
use std::path::{Path, PathBuf};

/// The rule the recommendation follows (every command that recommends).
#[derive(Args, Debug, Clone)]
pub struct RuleArgs {
    /// The most memory a recommended page size, policy or configuration may cost over
    /// the 4K baseline.
    #[arg(long, value_name = "PERCENT", default_value = "25%")]
    pub max_memory_growth: String,
    /// The share of the 4K baseline's TLB misses a larger page size (or another policy)
    /// must remove to count as a significant improvement.
    #[arg(long, value_name = "PERCENT", default_value = "5%")]
    pub min_miss_drop: String,
}

impl RuleArgs {
    /// The rule these flags ask for.
    pub fn rule(&self) -> Result<Rule> {
        let growth = parse_percent(&self.max_memory_growth)
            .map_err(|e| anyhow::anyhow!("--max-memory-growth: {e}"))?;
        let drop = parse_percent(&self.min_miss_drop)
            .map_err(|e| anyhow::anyhow!("--min-miss-drop: {e}"))?;
        anyhow::ensure!(
            drop <= 1.0,
            "--min-miss-drop {}: a share of the misses is at most 100%",
            self.min_miss_drop
        );
        Ok(Rule {
            max_memory_growth: growth,
            min_miss_drop: drop,
        })
    }
}

/// `pagelab report` options.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Saved results (`--json` of sim, run, bench, validate; a study's or a sweep's
    /// result.json); several are laid side by side, a sweep as one column per configuration.
    #[arg(value_name = "RESULT.json", required = true)]
    pub results: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(long, short = 'o', value_name = "FILE", default_value = "report.html")]
    pub output: PathBuf,
    #[command(flatten)]
    pub rule: RuleArgs,
}

pub fn run(a: ReportArgs) -> Result<()> {
    let rule = a.rule.rule()?;
    let several = a.results.len() > 1;
    let mut named = Vec::new();
    for p in &a.results {
        named.extend(pagelab_report::load_columns(p, several)?);
    }
    write_html(&a.output, &named, &rule)?;
    crate::out::outln!("wrote {}", a.output.display())?;
    for n in &named {
        if named.len() > 1 {
            crate::out::outln!("{}:", n.name)?;
        }
        print_answer(&n.result, &rule)?;
    }
    Ok(())
}

/// Prints the recommendation lines: the rule, then one sentence per workload.
pub fn print_answer(result: &AnyResult, rule: &Rule) -> Result<()> {
    let recs = result.recommendations(rule);
    if recs.is_empty() {
        return Ok(());
    }
    let mut text = match rule.describe_for(result.command()) {
        Some(how) => format!("\nRecommendation ({how}):\n"),
        None => "\nVerdict:\n".to_string(),
    };
    for r in recs {
        text.push_str(&format!("  {}\n", r.sentence));
    }
    crate::out::out!("{}", pagelab_core::escape(&text))
}

/// Writes the HTML report of `result` to `path`, named after the command.
pub fn write_one(path: &Path, result: AnyResult, rule: &Rule) -> Result<()> {
    let name = format!("pagelab {}", result.command());
    write_html(path, &[Named { name, result }], rule)
}

/// What made this result: pagelab's version, this command line, the machine modelled (a
/// preset name or machine file, as given), this host, `inputs`.
pub fn provenance(machine: Option<&str>, inputs: Vec<InputChecksum>) -> Result<Provenance> {
    let call = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    pagelab::provenance::provenance(call, machine, inputs)
}
