//! The HTML report: one self-contained file that opens with the answer.
//!
//! Layout, top to bottom: the answer (one sentence per workload, from [`crate::recommend`]),
//! then per result the interactive plots (hover shows values, the legend toggles series, a
//! button switches the y axis between log and linear), the sortable tables and the
//! provenance (pagelab's version, the command line, the machine, the inputs' checksums and
//! the settings). Several results are laid side by side in columns.
//!
//! Everything is inline (styles, the script, the plots' data) and a Content-Security-Policy
//! forbids any fetch, so the file opens offline and can be attached to a ticket. Plots are
//! drawn by `report.js` from a JSON description; each page size has its colour from
//! [`crate::colors`], as in every other plot.

mod plots;
mod tables;

use crate::any::AnyResult;
use crate::recommend::Rule;
use crate::schema::SimResult;
use anyhow::{Context, Result};
use std::fmt::Write;
use std::path::Path;

const SCRIPT: &str = include_str!("report.js");
const STYLE: &str = include_str!("report.css");

/// One result to show, with the name its column is headed by (a file name, or the command).
#[derive(Clone, Debug)]
pub struct Named {
    /// The column's heading.
    pub name: String,
    /// The result.
    pub result: AnyResult,
}

/// Writes the report of `results` to `path` (atomically); errors name the path.
pub fn write_html(path: impl AsRef<Path>, results: &[Named], rule: &Rule) -> Result<()> {
    let path = path.as_ref();
    let html = render(results, rule)?;
    pagelab_core::write_atomically(path, html)
        .with_context(|| format!("cannot write HTML report to `{}`", path.display()))
}

/// The report of `results` as one HTML document.
///
/// # Errors
/// When `results` is empty.
pub fn render(results: &[Named], rule: &Rule) -> Result<String> {
    anyhow::ensure!(!results.is_empty(), "nothing to report: no results given");
    let mut plots = Vec::new();
    let mut columns = String::new();
    for (i, n) in results.iter().enumerate() {
        let prefix = format!("p{i}");
        let (own, body) = column(&prefix, n);
        let _ = write!(
            columns,
            "<section class=result data-command=\"{}\">\n<h2>{}</h2>\n<h3>Plots</h3>\n<div class=plots>\n",
            esc(n.result.command()),
            esc(&n.name)
        );
        for p in &own {
            let _ = writeln!(
                columns,
                "<figure class=plot id=\"{}\"><div class=controls><button type=button class=scale>log axis</button></div>\
                 <figcaption>{}</figcaption><div class=chart></div><div class=legend></div></figure>",
                esc(&p.id),
                esc(&p.title)
            );
        }
        columns.push_str("</div>\n");
        columns.push_str(&body);
        columns.push_str("</section>\n");
        plots.extend(own);
    }
    let title = results
        .iter()
        .map(|n| n.name.as_str())
        .collect::<Vec<_>>()
        .join(" | ");
    let data = serde_json::to_string(&plots).context("serializing the plots")?;
    let mut out = String::with_capacity(data.len() + columns.len() + SCRIPT.len() + 8192);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=en>\n<head>\n<meta charset=utf-8>\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n\
         <meta name=viewport content=\"width=device-width, initial-scale=1\">\n\
         <title>pagelab report: {}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n\
         <h1>pagelab report</h1>\n<p class=sub>{}</p>\n",
        esc(&title),
        esc(&title)
    );
    out.push_str(&answer(results, rule));
    let _ = write!(
        out,
        "<div class=columns style=\"grid-template-columns: repeat({}, minmax(0, 1fr))\">\n{columns}</div>\n",
        results.len()
    );
    let _ = write!(
        out,
        "<script type=\"application/json\" id=\"pagelab-plots\">{}</script>\n<script>\n{SCRIPT}</script>\n</body>\n</html>\n",
        script_safe(&data)
    );
    Ok(out)
}

/// The answer: the rule, then one sentence per workload of each result.
fn answer(results: &[Named], rule: &Rule) -> String {
    let mut out = String::from("<section id=answer>\n<h2>The answer</h2>\n");
    for n in results {
        if results.len() > 1 {
            let _ = writeln!(out, "<h3>{}</h3>", esc(&n.name));
        }
        if let Some(how) = rule.describe_for(n.result.command()) {
            let _ = writeln!(
                out,
                "<p class=rule>Rule: {} (<code>--max-memory-growth</code>, <code>--min-miss-drop</code>; docs/recommend.md).</p>",
                esc(&how)
            );
        }
        out.push_str("<ul>\n");
        for r in n.result.recommendations(rule) {
            let _ = writeln!(
                out,
                "<li class=rec data-subject=\"{}\" data-choice=\"{}\">{}</li>",
                esc(&r.subject),
                esc(r.choice.as_deref().unwrap_or("")),
                esc(&r.sentence)
            );
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</section>\n");
    out
}

/// A result's plots and the HTML after them (tables, provenance).
fn column(prefix: &str, n: &Named) -> (Vec<plots::Plot>, String) {
    let mut body = String::from("<h3>Tables</h3>\n");
    let (plots, settings) = match &n.result {
        AnyResult::Sim(r) => {
            let rs = std::slice::from_ref(r);
            body.push_str(&tables::sim_tables(prefix, rs));
            (plots::study_plots(prefix, rs), sim_settings(rs))
        }
        AnyResult::Study(s) => {
            body.push_str(&tables::sim_tables(prefix, &s.results));
            (
                plots::study_plots(prefix, &s.results),
                sim_settings(&s.results),
            )
        }
        AnyResult::Lab(l) => {
            body.push_str(&tables::lab_table(prefix, l));
            let mut settings = vec![("command".to_string(), l.command.clone())];
            if n.result
                .provenance()
                .and_then(|p| p.host.as_ref())
                .is_none()
            {
                settings.extend(tables::host_items(&l.host));
            }
            let modes: Vec<&str> = {
                let mut m: Vec<&str> = l.configs.iter().map(|c| c.thp.as_str()).collect();
                m.sort();
                m.dedup();
                m
            };
            settings.push(("THP mode".into(), modes.join(", ")));
            if l.failed_runs > 0 {
                settings.push(("failed runs".into(), l.failed_runs.to_string()));
            }
            if let Some(sig) = l.interrupted_by {
                settings.push(("interrupted by signal".into(), sig.to_string()));
            }
            (plots::lab_plots(prefix, l), settings)
        }
        AnyResult::Validate(v) => {
            let (head, rows) = crate::validate::validate_rows(v);
            let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
            let rows: Vec<Vec<String>> = rows.into_iter().map(Vec::from).collect();
            body.push_str(&tables::table(&format!("{prefix}-cases"), &head, &rows));
            let settings = vec![
                ("command".to_string(), "validate".to_string()),
                ("tolerance".to_string(), format!("{}%", v.tolerance_percent)),
            ];
            (plots::validate_plots(prefix, v), settings)
        }
    };
    body.push_str("<h3>Provenance</h3>\n");
    body.push_str(&tables::provenance(n.result.provenance(), &settings));
    (plots, body)
}

/// The modelled machine: TLB and page sizes (and policies) of each simulation.
fn sim_settings(results: &[SimResult]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let subjects = crate::recommend::study::subjects(results);
    for (i, r) in results.iter().enumerate() {
        let tlb = r.tlb.to_string();
        if !out.iter().any(|(k, v)| k == "TLB" && *v == tlb) {
            out.push(("TLB".into(), tlb));
        }
        let what: Vec<String> = r
            .runs
            .iter()
            .map(|run| {
                run.mm
                    .as_ref()
                    .map_or_else(|| run.page_size.to_string(), |m| m.policy.clone())
            })
            .collect();
        out.push((format!("runs of {}", subjects[i]), what.join(", ")));
    }
    out
}

/// `text` escaped for HTML text and attribute values.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON made safe inside a `<script>` element: no `</script>` or `<!--` can end it early.
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_cannot_break_out_of_the_document() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(
            script_safe("\"</script><!--\""),
            "\"\\u003c/script>\\u003c!--\""
        );
    }
}
