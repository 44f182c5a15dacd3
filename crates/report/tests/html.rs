//! The HTML report's structure (snapshots), and reading any result with clear refusals.

use crate::common;

use pagelab_core::PageSize;
use pagelab_report::html::{render, Named};
use pagelab_report::recommend::Rule;
use pagelab_report::{parse_any, AnyResult, LabConfig, LabResult, Measurement, Summary};

/// The document with the constant style and script bodies cut out, and the plots' data
/// pretty-printed, so that a snapshot shows the structure and what each plot holds.
fn structure(html: &str) -> String {
    let cut = |text: &str, open: &str, close: &str, with: &str| -> String {
        let start = text.find(open).expect(open) + open.len();
        let end = start + text[start..].find(close).expect(close);
        format!("{}{with}{}", &text[..start], &text[end..])
    };
    let html = cut(html, "<style>\n", "</style>", "[report.css]\n");
    let html = cut(&html, "<script>\n", "</script>", "[report.js]\n");
    let open = "id=\"pagelab-plots\">";
    let start = html.find(open).unwrap() + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&html[start..end]).unwrap();
    format!(
        "{}\n{}{}",
        &html[..start],
        serde_json::to_string_pretty(&data).unwrap(),
        &html[end..]
    )
}

fn lab() -> LabResult {
    let mut r = LabResult::new("run", Default::default());
    let config = |label: &str, pages: Vec<PageSize>, wall: [f64; 3]| {
        let runs: Vec<Measurement> = wall
            .iter()
            .map(|&w| Measurement {
                wall_seconds: w,
                faults: 1000,
                peak_rss_bytes: 100 << 20,
                ..Default::default()
            })
            .collect();
        let mut summary = std::collections::BTreeMap::new();
        summary.insert("wall_seconds".to_string(), Summary::of(&wall).unwrap());
        summary.insert("faults".to_string(), Summary::of(&[1000.0; 3]).unwrap());
        summary.insert(
            "peak_rss_bytes".to_string(),
            Summary::of(&[(100u64 << 20) as f64; 3]).unwrap(),
        );
        LabConfig {
            subject: "./prog --fast".into(),
            label: label.into(),
            pages,
            thp: "always".into(),
            runs,
            summary,
            ..Default::default()
        }
    };
    r.configs
        .push(config("4K", vec![PageSize::K4], [1.0, 1.1, 1.2]));
    r.configs
        .push(config("2M", vec![PageSize::M2], [0.5, 0.55, 0.6]));
    r
}

#[test]
fn a_study_report_opens_with_the_answer_and_holds_each_plot_and_table() {
    let html = render(
        &[Named {
            name: "study.json".into(),
            result: AnyResult::Study(common::study()),
        }],
        &Rule::default(),
    )
    .unwrap();
    let answer = html.find("id=answer").unwrap();
    assert!(answer < html.find("class=plot ").unwrap());
    assert!(
        !html.contains("http://") || html.matches("http://").count() == 1,
        "only the SVG namespace"
    );
    insta::assert_snapshot!(structure(&html));
}

#[test]
fn two_results_side_by_side_a_lab_run_with_its_spreads() {
    let html = render(
        &[
            Named {
                name: "before.json".into(),
                result: AnyResult::Lab(lab()),
            },
            Named {
                name: "after.json".into(),
                result: AnyResult::Sim(common::crafty()),
            },
        ],
        &Rule::default(),
    )
    .unwrap();
    assert!(html.contains("grid-template-columns: repeat(2, minmax(0, 1fr))"));
    assert!(html.contains("2M: 2.00x faster than 4K"), "{html}");
    insta::assert_snapshot!(structure(&html));
}

#[test]
fn text_from_a_result_is_escaped() {
    let mut r = lab();
    r.configs[0].subject = "</li><script>alert(1)</script>".into();
    let html = render(
        &[Named {
            name: "<b>x</b>".into(),
            result: AnyResult::Lab(r),
        }],
        &Rule::default(),
    )
    .unwrap();
    assert!(!html.contains("<script>alert"), "unescaped subject");
    assert!(!html.contains("<b>x</b>"));
    assert!(html.contains("&lt;b&gt;x&lt;/b&gt;"));
}

#[test]
fn anything_but_a_known_result_is_refused_saying_why() {
    let e = format!("{:#}", parse_any("{\"runs\": []}", "a.json").unwrap_err());
    assert!(
        e.contains("`a.json` is not a pagelab result") && e.contains("no `schema`"),
        "{e}"
    );
    let e = format!("{:#}", parse_any("<html>", "b.html").unwrap_err());
    assert!(
        e.contains("`b.html` is not a pagelab result: it is not valid JSON"),
        "{e}"
    );
    let e = format!(
        "{:#}",
        parse_any("{\"schema\": \"pagelab.lab/2\"}", "c.json").unwrap_err()
    );
    assert!(
        e.contains("`c.json` has schema `pagelab.lab/2`, a version this pagelab cannot read")
            && e.contains("pagelab.lab/1"),
        "{e}"
    );
    let e = format!(
        "{:#}",
        parse_any("{\"schema\": \"vega-lite\"}", "d.json").unwrap_err()
    );
    assert!(
        e.contains("not a pagelab result: its schema is `vega-lite`"),
        "{e}"
    );
    let e = format!(
        "{:#}",
        parse_any("{\"schema\": \"pagelab.lab/1\"}", "e.json").unwrap_err()
    );
    assert!(
        e.contains("says schema `pagelab.lab/1` but does not match it"),
        "{e}"
    );
    let lab = serde_json::to_string(&lab()).unwrap();
    assert!(matches!(
        parse_any(&lab, "f.json").unwrap(),
        AnyResult::Lab(_)
    ));
}

#[test]
fn a_validation_of_real_programs_opens_with_its_verdict_and_draws_model_beside_kernel() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/lab/validate-program.json"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let any = parse_any(&text, "validate-program.json").unwrap();
    assert!(matches!(any, AnyResult::Validate(_)));
    assert_eq!(any.command(), "validate");
    let rec = any.recommendations(&Rule::default());
    assert_eq!(rec.len(), 2, "one sentence per program");
    assert!(
        rec[0]
            .sentence
            .contains("DIFFER by more than 5% under 3 of 3")
            && rec[0].sentence.contains("model 218, kernel 332 (-34.3%)"),
        "{}",
        rec[0].sentence
    );
    assert!(
        rec[1].sentence.contains("agree within 5%"),
        "{}",
        rec[1].sentence
    );
    let html = render(
        &[Named {
            name: "validate-program.json".into(),
            result: any,
        }],
        &Rule::default(),
    )
    .unwrap();
    let s = structure(&html);
    assert!(html.find("id=answer").unwrap() < html.find("class=plot ").unwrap());
    // The table holds every case, and the plot the model's and the kernel's faults, with the
    // kernel's range over its runs as error bars.
    assert_eq!(s.matches("<tr><td>sh -c ").count(), 3, "{s}");
    assert!(
        s.contains("\"title\": \"true: faults, model and kernel\""),
        "{s}"
    );
    assert!(
        s.contains("322.0") && s.contains("331.0"),
        "the 4K case's range: {s}"
    );
}
