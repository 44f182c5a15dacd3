//! The report's sortable tables and its provenance, as HTML.

use super::esc;
use crate::lab::{LabConfig, LabResult, Summary};
use crate::schema::SimResult;
use crate::Provenance;
use pagelab_core::Bytes;
use std::fmt::Write;

/// A sortable table of `headers` and `rows`, every cell escaped.
pub(crate) fn table(id: &str, headers: &[String], rows: &[Vec<String>]) -> String {
    let mut out = format!(
        "<div class=scroll><table class=sortable id=\"{}\"><thead><tr>",
        esc(id)
    );
    for h in headers {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>\n");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{}</td>", esc(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div>\n");
    out
}

/// One table per simulation: the terminal table's columns, one row per page size or policy.
pub(crate) fn sim_tables(prefix: &str, results: &[SimResult]) -> String {
    let mut out = String::new();
    let subjects = crate::recommend::study::subjects(results);
    for (i, r) in results.iter().enumerate() {
        let _ = writeln!(
            out,
            "<h3>{}</h3><p class=note>{} · {}</p>",
            esc(&subjects[i]),
            esc(&crate::cells::heading(r)),
            esc(&crate::cells::refs_line(r))
        );
        let headers: Vec<String> = crate::cells::headers(r)
            .into_iter()
            .map(String::from)
            .collect();
        out.push_str(&table(
            &format!("{prefix}-t{i}"),
            &headers,
            &crate::cells::rows(r),
        ));
    }
    out
}

fn med(c: &LabConfig, key: &str) -> Option<Summary> {
    c.summary.get(key).copied()
}

fn num(v: f64) -> String {
    if v.abs() >= 1000.0 {
        crate::cells::thousands(v.round() as u64)
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn sizes(map: &std::collections::BTreeMap<String, u64>) -> String {
    if map.is_empty() {
        return "-".into();
    }
    map.iter()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The lab's table: one row per (subject, configuration).
pub(crate) fn lab_table(prefix: &str, lab: &LabResult) -> String {
    let validate = lab.command == "validate";
    let bench = lab.command == "bench";
    let mut headers: Vec<&str> = vec!["subject", "config", "runs"];
    if validate {
        headers.extend([
            "faults model",
            "faults kernel",
            "THP allocs model",
            "THP allocs kernel",
            "verdict",
        ]);
    } else {
        headers.extend(["wall s", "spread"]);
        if bench {
            headers.extend(["ns per op", "ns spread"]);
        }
        headers.extend(["faults", "THP allocations", "peak RSS", "speed-up vs 4K"]);
    }
    let rows: Vec<Vec<String>> = lab
        .configs
        .iter()
        .map(|c| {
            let mut row = vec![c.subject.clone(), c.label.clone(), c.runs.len().to_string()];
            let allocs = c
                .runs
                .first()
                .map(|m| sizes(&m.faults_by_size))
                .unwrap_or_default();
            if validate {
                let p = c.predicted.as_ref();
                row.push(p.map_or("-".into(), |p| p.faults.to_string()));
                row.push(c.runs.first().map_or("-".into(), |m| m.faults.to_string()));
                row.push(p.map_or("-".into(), |p| sizes(&p.faults_by_size)));
                row.push(allocs);
                row.push(if c.disagreements.is_empty() {
                    "agree".into()
                } else {
                    c.disagreements.join("; ")
                });
            } else {
                let wall = med(c, "wall_seconds");
                row.push(wall.map_or("-".into(), |s| format!("{:.3}", s.median)));
                row.push(wall.map_or("-".into(), |s| format!("{:.1}%", s.spread * 100.0)));
                if bench {
                    let op = med(c, "metrics/ns_per_op");
                    row.push(op.map_or("-".into(), |s| num(s.median)));
                    row.push(op.map_or("-".into(), |s| format!("{:.1}%", s.spread * 100.0)));
                }
                row.push(med(c, "faults").map_or("-".into(), |s| num(s.median)));
                row.push(allocs);
                row.push(
                    med(c, "peak_rss_bytes")
                        .map_or("-".into(), |s| Bytes(s.median as u64).to_string()),
                );
                row.push(c.speedup_vs_4k.map_or("-".into(), |s| format!("{s:.2}x")));
            }
            row
        })
        .collect();
    let headers: Vec<String> = headers.into_iter().map(String::from).collect();
    table(&format!("{prefix}-lab"), &headers, &rows)
}

/// The provenance list: version, command line, machine, inputs and settings.
pub(crate) fn provenance(p: Option<&Provenance>, settings: &[(String, String)]) -> String {
    let mut items: Vec<(String, String)> = Vec::new();
    match p {
        Some(p) => {
            items.push(("pagelab".into(), p.pagelab_version.clone()));
            items.push(("command line".into(), shell_words(&p.command_line)));
            if let Some(h) = &p.host {
                items.extend(host_items(h));
            }
            for i in &p.inputs {
                items.push((
                    format!("input {}", i.name),
                    format!("{} bytes, checksum {}", i.bytes, i.checksum),
                ));
            }
        }
        None => items.push((
            "provenance".into(),
            "not recorded (a result written before pagelab recorded its version and command line)"
                .into(),
        )),
    }
    items.extend(settings.iter().cloned());
    let mut out = String::from("<dl class=provenance>\n");
    for (k, v) in items {
        let _ = writeln!(out, "<dt>{}</dt><dd><code>{}</code></dd>", esc(&k), esc(&v));
    }
    out.push_str("</dl>\n");
    out
}

/// The machine as a few lines.
pub(crate) fn host_items(h: &crate::lab::HostInfo) -> Vec<(String, String)> {
    let list = |v: &[pagelab_core::PageSize]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    vec![
        (
            "machine".into(),
            format!(
                "{} · {} CPUs · {} memory{}",
                h.cpu,
                h.cpus,
                Bytes(h.memory_bytes),
                if h.virtualized {
                    " · virtual machine"
                } else {
                    ""
                }
            ),
        ),
        ("kernel".into(), h.kernel.clone()),
        ("THP sizes".into(), list(&h.thp_sizes)),
        ("hugetlb sizes".into(), list(&h.hugetlb_sizes)),
    ]
}

/// Arguments joined as a shell would read them back (quoted where needed).
fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+%@".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
