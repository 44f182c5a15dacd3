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

/// The README and every Markdown page of the guide (`docs/`, at any depth).
fn pages() -> Vec<PathBuf> {
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
    pages
}

#[test]
fn every_relative_link_of_the_readme_and_the_guide_leads_to_a_file() {
    let pages = pages();
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

/// The crates whose integration tests are one binary (`autotests = false`, `tests/main.rs`):
/// each one's package name and directory.
fn one_binary_crates() -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .filter_map(|e| {
            let dir = e.unwrap().path();
            let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
            if !manifest.contains("autotests = false") {
                return None;
            }
            let name = manifest
                .lines()
                .find_map(|l| l.strip_prefix("name = \""))?
                .trim_end_matches('"')
                .to_string();
            Some((name, dir))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_file_of_a_one_binary_crates_tests_is_a_module_of_it() {
    // Cargo builds no file of such a crate's tests/ on its own: one left out of
    // tests/main.rs would never run, and nothing else would say so.
    let crates = one_binary_crates();
    assert!(crates.len() >= 7, "{crates:?}");
    for (_, c) in crates {
        let dir = c.join("tests");
        let main = std::fs::read_to_string(dir.join("main.rs")).unwrap();
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            let module = path.extension().is_some_and(|x| x == "rs") && stem != "main"
                || path.join("mod.rs").is_file();
            if module {
                assert!(
                    main.lines().any(|l| l.trim() == format!("mod {stem};")),
                    "{} is not a module of {}: its tests would never run",
                    path.display(),
                    dir.join("main.rs").display()
                );
            }
        }
    }
}

#[test]
fn every_test_module_the_docs_name_exists() {
    // `cargo test -p CRATE --test all MODULE::` in the guide names a file of CRATE's tests/.
    let crates = one_binary_crates();
    let mut named = 0;
    for doc in pages() {
        let text = std::fs::read_to_string(&doc).unwrap();
        let words: Vec<&str> = text.split_whitespace().collect();
        for w in words.windows(5) {
            let [p, krate, test, all, module] = w else {
                continue;
            };
            if *p != "-p" || *test != "--test" || *all != "all" {
                continue;
            }
            let module = module.split("::").next().unwrap().trim_matches('`');
            let dir = crates
                .iter()
                .find(|(name, _)| name == krate)
                .unwrap_or_else(|| panic!("{}: {krate} has no test binary `all`", doc.display()))
                .1
                .join("tests");
            assert!(
                dir.join(format!("{module}.rs")).is_file() || dir.join(module).is_dir(),
                "{}: no test module {module} in {}",
                doc.display(),
                dir.display()
            );
            named += 1;
        }
    }
    assert!(named >= 15, "only {named} test modules named in the docs");
}
