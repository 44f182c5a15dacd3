use crate::common;

use pagelab_report::{
    load, load_sim, load_study, parse, to_json_string, write_json, Format, LoadedResult, SimResult,
    SIM_SCHEMA,
};

#[test]
fn sim_result_has_the_documented_shape() {
    let r = common::crafty();
    let v: serde_json::Value = serde_json::from_str(&to_json_string(&r).unwrap()).unwrap();
    assert_eq!(v["schema"], "pagelab.sim/1");
    assert_eq!(v["source"]["kind"], "workload");
    assert_eq!(v["tlb"]["entries"], 64);
    assert_eq!(v["refs"]["instr"], 50_000_000);
    let run = &v["runs"][0];
    assert_eq!(run["page_size"], 4096);
    for field in [
        "itlb_accesses",
        "itlb_misses",
        "dtlb_accesses",
        "dtlb_misses",
        "code_footprint_bytes",
        "data_footprint_bytes",
        "footprint_bytes",
        "faults",
    ] {
        assert!(run[field].is_u64(), "{field}");
    }
    assert!(run.get("tlb_levels").is_none(), "empty levels are omitted");
    assert!(v.get("elapsed_seconds").is_none());
}

#[test]
fn round_trips_through_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("study.json");
    let study = common::study();
    write_json(&path, &study).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with("}\n") && text.contains("\n  \"results\""));
    assert!(text.contains("\"level\": \"l1i\""));
    assert_eq!(load_study(&path).unwrap(), study);
    assert!(matches!(load(&path).unwrap(), LoadedResult::Study(_)));
    let e = load_sim(&path).unwrap_err().to_string();
    assert!(
        e.contains("pagelab.study/1") && e.contains("study.json"),
        "{e}"
    );

    let mut one = common::vpr();
    one.elapsed_seconds = Some(1.25);
    write_json(&path, &one).unwrap();
    assert_eq!(load_sim(&path).unwrap(), one);
    assert_eq!(load_study(&path).unwrap().results, vec![one]);
}

#[test]
fn wrong_schema_names_file_and_schema() {
    let e = parse(r#"{"schema": "pagelab.sim/9", "runs": []}"#, "out/r.json")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("out/r.json") && e.contains("pagelab.sim/9"),
        "{e}"
    );
    assert!(e.contains(SIM_SCHEMA), "{e}");
    let mut study = serde_json::to_value(common::study()).unwrap();
    study["results"][1]["schema"] = serde_json::json!("pagelab.sim/2");
    let e = parse(&study.to_string(), "s.json").unwrap_err().to_string();
    assert!(
        e.contains("s.json") && e.contains("result 1") && e.contains("pagelab.sim/2"),
        "{e}"
    );
    let e = parse(r#"{"runs": []}"#, "x.json").unwrap_err().to_string();
    assert!(e.contains("x.json") && e.contains("no `schema`"), "{e}");
    let e = format!("{:#}", parse("not json", "y.json").unwrap_err());
    assert!(e.contains("y.json"), "{e}");
}

#[test]
fn unknown_fields_are_ignored_for_forward_compatibility() {
    let mut v = serde_json::to_value(common::vpr()).unwrap();
    v["added_later"] = serde_json::json!(1);
    v["runs"][0]["walk_cycles"] = serde_json::json!(7);
    let r: SimResult = serde_json::from_value(v).unwrap();
    assert_eq!(r, common::vpr());
}

#[test]
fn page_size_reads_bytes_or_people_sizes() {
    let text = r#"{"schema": "pagelab.sim/1", "source": {"kind": "workload", "name": "s"},
        "refs": {"instr": 1, "data": 2},
        "runs": [{"page_size": "16K", "itlb_accesses": 1, "itlb_misses": 1, "dtlb_accesses": 2,
                  "dtlb_misses": 1, "code_footprint_bytes": 16384, "data_footprint_bytes": 16384,
                  "footprint_bytes": 32768, "faults": 2}]}"#;
    let LoadedResult::Sim(r) = parse(text, "t").unwrap() else {
        panic!("not a sim result")
    };
    assert_eq!(r.runs[0].page_size.bytes(), 16384);
    assert!(r.tlb.is_null());
}

#[test]
fn write_errors_name_the_path() {
    let e = write_json("/nonexistent-dir/r.json", &common::vpr()).unwrap_err();
    assert!(e.to_string().contains("/nonexistent-dir/r.json"), "{e}");
}

#[test]
fn formats_by_name_and_extension() {
    assert_eq!("md".parse::<Format>().unwrap(), Format::Markdown);
    assert_eq!("TABLE".parse::<Format>().unwrap(), Format::Table);
    let e = "pdf".parse::<Format>().unwrap_err().to_string();
    assert!(
        e.contains("pdf") && e.contains("table, md, csv, json, svg"),
        "{e}"
    );
    assert_eq!(Format::from_path("a/b.SVG".as_ref()), Some(Format::Svg));
    assert_eq!(Format::from_path("a/b".as_ref()), None);
    for f in Format::ALL {
        let mut out = Vec::new();
        f.exporter().export(&[common::vpr()], &mut out).unwrap();
        assert!(!out.is_empty(), "{f}");
    }
}

#[test]
fn json_exporter_writes_sim_for_one_and_study_for_many() {
    let mut out = Vec::new();
    Format::Json
        .exporter()
        .export(&common::study().results, &mut out)
        .unwrap();
    assert!(String::from_utf8(out).unwrap().contains("pagelab.study/1"));
}
