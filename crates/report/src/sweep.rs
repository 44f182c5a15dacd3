//! A sweep's saved result (`pagelab.sweep/1`, written by `pagelab sweep` and the Python
//! package): every (source, configuration) pair's `pagelab.sim/1` result. A report shows it as
//! one column per configuration, holding that configuration's results over every source.

use crate::html::Named;
use crate::{parse_any, AnyResult, StudyResult};
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::Path;

/// The schema string of a sweep's JSON.
pub const SWEEP_SCHEMA: &str = "pagelab.sweep/1";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepDoc {
    #[allow(dead_code)] // checked before the document is read as a whole
    schema: String,
    results: Vec<SweepEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepEntry {
    source: String,
    config: String,
    result: serde_json::Value,
}

/// Reads a saved result as a report's columns: a sweep as one column per configuration (in
/// the order they first appear, each a study of its sources in file order), any other result
/// as one column named `name`. Errors name `origin` and, inside a sweep, the entry.
pub fn parse_columns(text: &str, origin: &str, name: &str) -> Result<Vec<Named>> {
    let value: serde_json::Value = serde_json::from_str(text)
        .with_context(|| format!("`{origin}` is not a pagelab result: it is not valid JSON"))?;
    if value.get("schema").and_then(|s| s.as_str()) != Some(SWEEP_SCHEMA) {
        return Ok(vec![Named {
            name: name.to_string(),
            result: parse_any(text, origin)?,
        }]);
    }
    let doc: SweepDoc = serde_json::from_value(value).with_context(|| {
        format!("`{origin}` says schema `{SWEEP_SCHEMA}` but does not match it")
    })?;
    if doc.results.is_empty() {
        bail!("`{origin}`: the sweep holds no result");
    }
    let mut columns: Vec<(String, Vec<_>)> = Vec::new();
    for (i, e) in doc.results.into_iter().enumerate() {
        let at = format!(
            "{origin} results[{i}] (source `{}`, config `{}`)",
            e.source, e.config
        );
        let result = match parse_any(&e.result.to_string(), &at)? {
            AnyResult::Sim(r) => r,
            other => bail!(
                "{at}: a sweep's entry is a `pagelab.sim/1` result, not a `{}` one",
                other.command()
            ),
        };
        match columns.iter_mut().find(|(c, _)| *c == e.config) {
            Some((_, results)) => results.push(result),
            None => columns.push((e.config, vec![result])),
        }
    }
    Ok(columns
        .into_iter()
        .map(|(config, results)| Named {
            name: if name.is_empty() {
                config
            } else {
                format!("{name}: {config}")
            },
            result: AnyResult::Study(StudyResult::new(results)),
        })
        .collect())
}

/// [`parse_columns`] of the file at `path`, its columns named after the file when
/// `several` files go into one report (a sweep's after its configurations alone otherwise).
pub fn load_columns(path: &Path, several: bool) -> Result<Vec<Named>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read result file `{}`", path.display()))?;
    let origin = path.display().to_string();
    let sweep = text.contains(SWEEP_SCHEMA);
    let name = if several || !sweep {
        origin.clone()
    } else {
        String::new()
    };
    parse_columns(&text, &origin, &name)
}
