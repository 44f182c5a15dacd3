//! Reading and writing results as JSON files.
//!
//! Files are pretty-printed with a trailing newline so they diff well. Reading checks the
//! `schema` string before anything else, so a wrong or newer file gets a message that says which
//! file, which schema it has and which one was expected, instead of a field-level serde error.

use crate::schema::{SimResult, StudyResult, SIM_SCHEMA, STUDY_SCHEMA};
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::path::Path;

/// `value` as pretty-printed JSON with a trailing newline.
pub fn to_json_string<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    let mut text =
        serde_json::to_string_pretty(value).context("cannot serialize result as JSON")?;
    text.push('\n');
    Ok(text)
}

/// Writes `value` to `path` as pretty-printed JSON with a trailing newline.
///
/// Errors name the path.
pub fn write_json<T: Serialize + ?Sized>(path: impl AsRef<Path>, value: &T) -> Result<()> {
    let path = path.as_ref();
    let text = to_json_string(value)?;
    pagelab_core::write_atomically(path, text)
        .with_context(|| format!("cannot write JSON result to `{}`", path.display()))
}

/// A result file of either kind.
#[derive(Clone, Debug, PartialEq)]
pub enum LoadedResult {
    /// A file with schema [`SIM_SCHEMA`].
    Sim(SimResult),
    /// A file with schema [`STUDY_SCHEMA`].
    Study(StudyResult),
}

impl LoadedResult {
    /// The results the file holds, as a study (a single result becomes a study of one).
    pub fn into_study(self) -> StudyResult {
        match self {
            LoadedResult::Sim(r) => StudyResult::new(vec![r]),
            LoadedResult::Study(s) => s,
        }
    }
}

/// Reads a [`SimResult`] or a [`StudyResult`] from `path`, whichever its `schema` says.
pub fn load(path: impl AsRef<Path>) -> Result<LoadedResult> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read result file `{}`", path.display()))?;
    parse(&text, &path.display().to_string())
}

/// Reads a [`SimResult`] from `path`; refuses any other schema.
pub fn load_sim(path: impl AsRef<Path>) -> Result<SimResult> {
    let path = path.as_ref();
    match load(path)? {
        LoadedResult::Sim(r) => Ok(r),
        LoadedResult::Study(_) => bail!(
            "`{}` has schema `{STUDY_SCHEMA}`, expected `{SIM_SCHEMA}`: it holds several results; \
             load it as a study",
            path.display()
        ),
    }
}

/// Reads a [`StudyResult`] from `path`; a single [`SimResult`] is accepted as a study of one.
pub fn load_study(path: impl AsRef<Path>) -> Result<StudyResult> {
    load(path).map(LoadedResult::into_study)
}

/// Parses result JSON; `origin` names where the text came from in error messages.
pub fn parse(text: &str, origin: &str) -> Result<LoadedResult> {
    let value: serde_json::Value =
        serde_json::from_str(text).with_context(|| format!("`{origin}` is not valid JSON"))?;
    let schema = match value.get("schema") {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => bail!("`{origin}` has a non-string schema {other}; expected `{SIM_SCHEMA}` or `{STUDY_SCHEMA}`"),
        None => bail!(
            "`{origin}` has no `schema` field: it is not a pagelab result \
             (expected `{SIM_SCHEMA}` or `{STUDY_SCHEMA}`)"
        ),
    };
    let bad_shape = || format!("`{origin}` says schema `{schema}` but does not match it");
    match schema.as_str() {
        SIM_SCHEMA => Ok(LoadedResult::Sim(
            serde_json::from_value(value).with_context(bad_shape)?,
        )),
        STUDY_SCHEMA => {
            let study: StudyResult = serde_json::from_value(value).with_context(bad_shape)?;
            if let Some((i, r)) = study
                .results
                .iter()
                .enumerate()
                .find(|(_, r)| r.schema != SIM_SCHEMA)
            {
                bail!(
                    "`{origin}`: result {i} of the study has schema `{}`, expected `{SIM_SCHEMA}`",
                    r.schema
                );
            }
            Ok(LoadedResult::Study(study))
        }
        other => bail!(
            "`{origin}` has schema `{other}`, which this pagelab cannot read; \
             expected `{SIM_SCHEMA}` or `{STUDY_SCHEMA}` (a newer pagelab may read it)"
        ),
    }
}
