//! Any saved pagelab result: a simulation, a study, a lab result or a validation, read by its
//! `schema`.

use crate::json::{parse, LoadedResult};
use crate::lab::{LabResult, LAB_SCHEMA};
use crate::recommend::{self, Recommendation, Rule};
use crate::schema::{SimResult, StudyResult, SIM_SCHEMA, STUDY_SCHEMA};
use crate::validate::{ValidateResult, VALIDATE_SCHEMA};
use crate::Provenance;
use anyhow::{bail, Context, Result};
use std::path::Path;

/// A result of any kind pagelab writes.
#[derive(Clone, Debug, PartialEq)]
pub enum AnyResult {
    /// `pagelab.sim/1`: `pagelab sim`.
    Sim(SimResult),
    /// `pagelab.study/1`: `pagelab study`.
    Study(StudyResult),
    /// `pagelab.lab/1`: `pagelab run`, `bench` or `validate`.
    Lab(LabResult),
    /// `pagelab.validate/1`: `pagelab validate --json` (the model held to the kernel).
    Validate(ValidateResult),
}

/// The schemas [`parse_any`] reads.
pub const KNOWN_SCHEMAS: [&str; 4] = [SIM_SCHEMA, STUDY_SCHEMA, LAB_SCHEMA, VALIDATE_SCHEMA];

impl AnyResult {
    /// What made it, as people say it: `study`, `sim`, `run`, `bench`, `validate`.
    pub fn command(&self) -> &str {
        match self {
            AnyResult::Sim(_) => "sim",
            AnyResult::Study(_) => "study",
            AnyResult::Lab(l) => &l.command,
            AnyResult::Validate(_) => "validate",
        }
    }

    /// The recommendations of this result under `rule`, one per workload or program.
    pub fn recommendations(&self, rule: &Rule) -> Vec<Recommendation> {
        match self {
            AnyResult::Sim(r) => recommend::study::all(std::slice::from_ref(r), rule),
            AnyResult::Study(s) => recommend::study::all(&s.results, rule),
            AnyResult::Lab(l) => recommend::lab::all(l, rule),
            AnyResult::Validate(v) => crate::validate::recommendations(v),
        }
    }

    /// Its provenance, when it recorded one.
    pub fn provenance(&self) -> Option<&Provenance> {
        match self {
            AnyResult::Sim(r) => r.provenance.as_ref(),
            AnyResult::Study(s) => s.provenance.as_ref(),
            AnyResult::Lab(l) => l.provenance.as_ref(),
            AnyResult::Validate(v) => v.provenance.as_ref(),
        }
    }
}

/// Reads any pagelab result from `path`.
///
/// # Errors
/// When the file cannot be read, is not JSON, is not a pagelab result (no `schema`), has a
/// schema version this pagelab does not know, or does not match its schema; each message
/// names the file.
pub fn load_any(path: impl AsRef<Path>) -> Result<AnyResult> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read result file `{}`", path.display()))?;
    parse_any(&text, &path.display().to_string())
}

/// Parses any pagelab result; `origin` names the text in error messages.
///
/// # Errors
/// As [`load_any`].
pub fn parse_any(text: &str, origin: &str) -> Result<AnyResult> {
    let value: serde_json::Value = serde_json::from_str(text)
        .with_context(|| format!("`{origin}` is not a pagelab result: it is not valid JSON"))?;
    let known = KNOWN_SCHEMAS.join(", ");
    let schema = match value.get("schema") {
        Some(serde_json::Value::String(s)) => s.clone(),
        _ => bail!(
            "`{origin}` is not a pagelab result: it has no `schema` string (pagelab writes {known})"
        ),
    };
    if schema == LAB_SCHEMA {
        let lab: LabResult = serde_json::from_value(value)
            .with_context(|| format!("`{origin}` says schema `{schema}` but does not match it"))?;
        return Ok(AnyResult::Lab(lab));
    }
    if schema == VALIDATE_SCHEMA {
        let v: ValidateResult = serde_json::from_value(value)
            .with_context(|| format!("`{origin}` says schema `{schema}` but does not match it"))?;
        return Ok(AnyResult::Validate(v));
    }
    if !KNOWN_SCHEMAS.contains(&schema.as_str()) {
        if schema.starts_with("pagelab.") {
            bail!(
                "`{origin}` has schema `{schema}`, a version this pagelab cannot read (it reads {known}); \
                 a newer pagelab may read it"
            );
        }
        bail!(
            "`{origin}` is not a pagelab result: its schema is `{schema}` (pagelab writes {known})"
        );
    }
    Ok(match parse(text, origin)? {
        LoadedResult::Sim(r) => AnyResult::Sim(r),
        LoadedResult::Study(s) => AnyResult::Study(s),
    })
}
