use crate::common;

use pagelab_report::{plot_svg, svg_string, StudyResult};

#[test]
fn svg_names_every_workload_and_page_size() {
    let study = common::study();
    let dir = std::env::temp_dir().join(format!("pagelab-report-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("figure1.svg");
    plot_svg(&study, &path).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    // Set PAGELAB_PLOT_OUT to keep the figure, e.g. to look at it with rsvg-convert.
    if let Ok(out) = std::env::var("PAGELAB_PLOT_OUT") {
        std::fs::copy(&path, out).unwrap();
    }
    assert!(svg.trim_start().starts_with("<svg"), "{}", &svg[..80]);
    assert!(svg.trim_end().ends_with("</svg>"));
    for name in [
        "crafty: instructions",
        "crafty: data",
        "vpr: instructions",
        "vpr: data",
    ] {
        assert!(svg.contains(name), "missing title {name}");
    }
    for size in ["4K", "8K", "16K", "32K", "64K", "128K", "256K"] {
        assert!(
            svg.lines().any(|l| l.trim() == size),
            "missing page size label {size}"
        );
    }
    assert!(svg.contains("TLB misses") && svg.contains("memory used"));
    // Each page size's bars are in its colour, the one every report gives it.
    for size in ["4K", "8K", "16K", "32K", "64K", "128K", "256K"] {
        let colour = pagelab_report::colors::size_colour(size.parse().unwrap());
        let fill = format!("fill=\"{}\"", colour.to_uppercase());
        assert!(
            svg.to_uppercase().matches(&fill.to_uppercase()).count() >= 4,
            "{size}: expected its colour {colour} on the bars of every panel"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn single_result_plots_one_row() {
    let svg = svg_string(&common::vpr()).unwrap();
    assert!(svg.contains("vpr: data") && !svg.contains("crafty"));
}

#[test]
fn empty_study_is_refused() {
    let e = svg_string(&StudyResult::default()).unwrap_err().to_string();
    assert!(e.contains("nothing to plot"), "{e}");
}

#[test]
fn unwritable_path_is_named() {
    let e = plot_svg(&common::vpr(), "/nonexistent-dir/x.svg").unwrap_err();
    assert!(format!("{e:#}").contains("/nonexistent-dir/x.svg"), "{e:#}");
}
