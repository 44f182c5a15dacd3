//! The README stays a README (under 200 lines), the user guide has a page for
//! every command, and every relative link in them leads to a file of the repository.

mod common;

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The relative targets of the Markdown links `[text](target)` in `text`,
/// without their `#anchor`.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end].split('#').next().unwrap_or("");
        if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
            out.push(target.to_string());
        }
        rest = &rest[end..];
    }
    out
}

#[test]
fn the_readme_is_under_200_lines() {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let n = text.lines().count();
    assert!(
        n < 200,
        "README.md has {n} lines; the user guide in docs/ holds the rest"
    );
}

#[test]
fn every_relative_link_of_the_readme_and_the_guide_leads_to_a_file() {
    let mut pages = vec![root().join("README.md")];
    let mut dirs = vec![root().join("docs")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                pages.push(p);
            }
        }
    }
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for target in links(&text) {
            let at = page.parent().unwrap().join(&target);
            if !at.exists() {
                broken.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert!(pages.len() > 10, "{pages:?}");
    assert!(
        broken.is_empty(),
        "links to nothing:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_guide_has_a_page_for_every_command() {
    let (commands, _) = common::commands();
    let guide = std::fs::read_to_string(root().join("docs/README.md")).unwrap();
    for c in commands {
        assert!(
            guide
                .lines()
                .any(|l| l.starts_with("| [") && l.contains(&format!("`{c}`"))),
            "docs/README.md's table of commands has no page for `{c}`"
        );
    }
}

#[test]
fn links_are_read_as_markdown_writes_them() {
    let text = "see [a](docs/a.md#x), [b](https://example.org) and [c](../c.svg)";
    assert_eq!(links(text), ["docs/a.md", "../c.svg"]);
}
