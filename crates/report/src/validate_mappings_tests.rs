use super::*;

fn m(start: u64, end: u64, name: &str, pages: u64, folios: &[(&str, u64)]) -> ExitMapping {
    ExitMapping {
        start,
        end,
        name: name.into(),
        pages,
        zero: 0,
        folios: folios.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
    }
}

fn process(pid: u32, mappings: Vec<ExitMapping>) -> ExitProcess {
    ExitProcess { pid, mappings }
}

#[test]
fn overlapping_mappings_make_one_row_and_nothing_counts_twice() {
    // The kernel merged the heap the model keeps as two VMAs; the model split a file
    // mapping the kernel keeps whole; one anonymous mapping only the model has.
    let kernel = [process(
        4242,
        vec![
            m(0x40_0000, 0x40_8000, "/usr/bin/gzip", 8, &[]),
            m(
                0x60_0000,
                0x62_0000,
                "[heap]",
                32,
                &[("16K", 4), ("64K", 1)],
            ),
            m(0x7f_0000, 0x80_0000, "anon", 3, &[]),
        ],
    )];
    let model = [process(
        1,
        vec![
            m(0x40_0000, 0x40_4000, "file#3", 4, &[]),
            m(0x40_4000, 0x40_8000, "file#3", 4, &[]),
            m(0x60_0000, 0x61_0000, "anon", 16, &[("16K", 4)]),
            m(0x61_0000, 0x62_0000, "anon", 12, &[("16K", 1)]),
            m(0x70_0000, 0x70_4000, "anon", 1, &[]),
            m(0x7f_0000, 0x80_0000, "anon", 3, &[]),
        ],
    )];
    let rows = join(&model, &kernel);
    assert_eq!(rows.len(), 4, "{rows:#?}");
    let exe = &rows[0];
    assert_eq!((exe.start, exe.end), (0x40_0000, 0x40_8000));
    assert_eq!(exe.name, "/usr/bin/gzip");
    assert_eq!((exe.model_pages, exe.kernel_pages), (8, 8));
    assert!(!exe.differs());
    let heap = &rows[1];
    assert_eq!(
        (heap.start, heap.end, heap.name.as_str()),
        (0x60_0000, 0x62_0000, "[heap]")
    );
    assert_eq!((heap.model_pages, heap.kernel_pages), (28, 32));
    assert_eq!(heap.model, BTreeMap::from([("16K".to_string(), 5)]));
    assert_eq!(
        heap.kernel,
        BTreeMap::from([("16K".to_string(), 4), ("64K".to_string(), 1)])
    );
    assert!(heap.differs() && heap.has_folios());
    // Only the model maps 0x700000: the kernel's side is empty, named by the model.
    let only = &rows[2];
    assert_eq!(
        (only.name.as_str(), only.model_pages, only.kernel_pages),
        ("anon", 1, 0)
    );
    assert!(only.differs());
    assert!(!rows[3].differs());
    // Every page and folio of each side is in exactly one row.
    let sum = |f: fn(&MappingRow) -> u64| rows.iter().map(f).sum::<u64>();
    assert_eq!(sum(|r| r.model_pages), 40);
    assert_eq!(sum(|r| r.kernel_pages), 43);
}

#[test]
fn processes_are_matched_by_exit_order_and_an_extra_one_stands_alone() {
    let kernel = [
        process(10, vec![m(0x1000, 0x2000, "[heap]", 1, &[])]),
        process(11, vec![m(0x1000, 0x2000, "[heap]", 1, &[("16K", 0)])]),
    ];
    let model = [process(2, vec![m(0x1000, 0x2000, "anon", 1, &[])])];
    let rows = join(&model, &kernel);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].process, 1);
    assert!(!rows[0].differs());
    assert_eq!(
        (rows[1].process, rows[1].model_pages, rows[1].kernel_pages),
        (2, 0, 1)
    );
    // A size with no folio is dropped, so an empty map compares equal to none.
    assert!(rows[1].kernel.is_empty());
}

#[test]
fn adjacent_mappings_stay_apart_and_the_table_shows_what_matters() {
    let kernel = [process(
        1,
        vec![
            m(0x1000, 0x2000, "a", 1, &[]),
            m(0x2000, 0x3000, "b", 1, &[]),
            m(0x10000, 0x20000, "[heap]", 16, &[("64K", 1)]),
        ],
    )];
    let model = [process(
        1,
        vec![
            m(0x1000, 0x2000, "file#1", 1, &[]),
            m(0x2000, 0x3000, "file#2", 2, &[]),
            m(0x10000, 0x20000, "anon", 16, &[("64K", 1)]),
        ],
    )];
    let rows = join(&model, &kernel);
    assert_eq!(rows.len(), 3);
    let t = mappings_table(&rows);
    // "a" is equal and without folios: left out; "b" differs in pages; the heap has folios.
    assert!(!t.contains(" a "), "{t}");
    assert!(t.contains("2000-3000"), "{t}");
    assert!(t.contains("differ"), "{t}");
    assert!(t.contains("10000-20000  [heap]"), "{t}");
    assert!(t.contains("1×64K"), "{t}");
    assert!(t.contains("(1 of 3 mappings equal"), "{t}");
}

#[test]
fn rows_survive_json() {
    let rows = join(
        &[process(1, vec![m(0, 0x4000, "anon", 4, &[("16K", 1)])])],
        &[process(9, vec![m(0, 0x4000, "anon", 4, &[("16K", 1)])])],
    );
    let json = serde_json::to_string(&rows).unwrap();
    let back: Vec<MappingRow> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, rows);
    // The model's JSON (`pagelab_mm::exit_map::ExitProcess`) reads as an ExitProcess.
    let model: Vec<ExitProcess> = serde_json::from_str(
        r#"[{"pid":3,"mappings":[{"start":0,"end":16384,"name":"anon","pages":4,"folios":{"16K":1}}]}]"#,
    )
    .unwrap();
    assert_eq!(model[0].mappings[0].folios["16K"], 1);
}

#[test]
fn zero_pages_tell_a_read_first_buffer_from_a_written_one() {
    // gzip's window under the old capture: the same pages present on both sides, but the
    // model's are zero pages (read first) where the kernel's were written (by read(2)).
    let side = |zero| {
        [process(
            1,
            vec![ExitMapping {
                zero,
                ..m(0x1000, 0x11000, "anon", 16, &[])
            }],
        )]
    };
    let rows = join(&side(8), &side(0));
    assert_eq!((rows[0].model_zero, rows[0].kernel_zero), (8, 0));
    assert!(rows[0].differs());
    let t = mappings_table(&rows);
    assert!(t.contains("zero model"), "{t}");
    assert!(t.contains("differ"), "{t}");
    assert!(!join(&side(8), &side(8))[0].differs());
}
