//! Tests of the validate result: verdicts, the table, the answer.

use super::*;

#[test]
fn an_allocation_the_kernel_did_not_make_differs_at_any_tolerance() {
    let model = Counts::new(10, [("2M", 1)]);
    let kernel = Counts::new(10, []);
    assert_eq!(ValidateCase::verdict_of(&model, &kernel, 50.0), "differ");
    assert_eq!(ValidateCase::verdict_of(&kernel, &kernel, 0.0), "agree");
}

#[test]
fn differences_are_signed_percentages_of_the_kernel() {
    assert_eq!(difference(90, 100), "-10.0%");
    assert_eq!(difference(100, 100), "=");
    assert_eq!(difference(3, 0), "new");
}

#[test]
fn the_table_shows_the_spread_of_repeated_runs() {
    let mut r = ValidateResult::new(5.0);
    r.cases.push(ValidateCase {
        workload: "xz -9".into(),
        config: "64K".into(),
        thp: "always".into(),
        model: Counts::new(100, [("64K", 4)]),
        kernel: Counts::new(98, [("64K", 4)]),
        kernel_runs: vec![
            Counts::new(97, []),
            Counts::new(98, []),
            Counts::new(99, []),
        ],
        verdict: "agree".into(),
        mappings: Vec::new(),
    });
    let t = validate_table(&r);
    assert!(t.contains("97..99"), "{t}");
    assert!(t.contains("+2.0%"), "{t}");
    assert!(t.contains("4×64K"), "{t}");
    let json = serde_json::to_string(&r).unwrap();
    assert!(
        json.starts_with(r#"{"schema":"pagelab.validate/1""#),
        "{json}"
    );
    let back: ValidateResult = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
}

#[test]
fn the_answer_names_the_cases_that_differ_and_the_largest_gap() {
    let case = |config: &str, model: u64, kernel: u64, tol: f64| {
        let (m, k) = (Counts::new(model, []), Counts::new(kernel, []));
        ValidateCase {
            workload: "ls /".into(),
            config: config.into(),
            thp: "always".into(),
            verdict: ValidateCase::verdict_of(&m, &k, tol).into(),
            model: m,
            kernel: k,
            kernel_runs: Vec::new(),
            mappings: Vec::new(),
        }
    };
    let mut r = ValidateResult::new(5.0);
    r.cases = vec![
        case("4K", 158, 131, 5.0),
        case("64K", 87, 129, 5.0),
        case("2M", 100, 99, 5.0),
    ];
    let rec = recommendations(&r);
    assert_eq!(rec.len(), 1);
    assert_eq!(
        rec[0].sentence,
        "ls /: the model and the kernel DIFFER by more than 5% under 2 of 3 configurations (4K always, 64K always); the largest fault difference is under 64K always: model 87, kernel 129 (-32.6%)."
    );
    let mut exact = ValidateResult::new(0.0);
    exact.cases = vec![case("4K", 10, 10, 0.0)];
    assert_eq!(
        recommendations(&exact)[0].sentence,
        "ls /: the model and the kernel agree exactly on faults and allocations per size under its one configuration (4K always)."
    );
}

/// A kernel that gave 16 and 17 16K folios in its runs (bash's parent racing its child's
/// exec): a model of 17 agrees, as does one of 16; 18 is beyond 5% of 17, and faults are
/// judged against their range too. The table shows which size varied.
#[test]
fn a_racy_kernel_is_met_anywhere_in_its_range() {
    let runs = [
        Counts::new(277, []).with_exit_folios([("16K", 16)]),
        Counts::new(278, []).with_exit_folios([("16K", 17)]),
        Counts::new(277, []).with_exit_folios([("16K", 16)]),
    ];
    let model = |faults, folios| Counts::new(faults, []).with_exit_folios([("16K", folios)]);
    let v = |m: &Counts| ValidateCase::verdict_over_runs(m, &runs, 5.0);
    assert_eq!(v(&model(273, 17)), "agree");
    assert_eq!(v(&model(273, 16)), "agree");
    assert_eq!(v(&model(273, 18)), "differ");
    // 278 + 5% is 291.9; 277 - 5% is 263.15.
    assert_eq!(v(&model(291, 17)), "agree");
    assert_eq!(v(&model(292, 17)), "differ");
    assert_eq!(v(&model(264, 17)), "agree");
    assert_eq!(v(&model(263, 17)), "differ");
    // One run: the old rule against it; none: nothing to agree with.
    assert_eq!(
        ValidateCase::verdict_over_runs(&model(277, 17), &runs[1..2], 0.0),
        ValidateCase::verdict_of(&model(277, 17), &runs[1], 0.0)
    );
    assert_eq!(
        ValidateCase::verdict_over_runs(&model(277, 16), &[], 50.0),
        "differ"
    );
    // Folios at exit where every run has them, else allocations at fault.
    let plain = [Counts::new(10, [("64K", 2)]), Counts::new(10, [("64K", 3)])];
    assert_eq!(
        ValidateCase::verdict_over_runs(&Counts::new(10, [("64K", 3)]), &plain, 0.0),
        "agree"
    );
    assert_eq!(folio_spread(&runs), "16K 16..17");
    assert_eq!(folio_spread(&plain), "64K 2..3");
    assert_eq!(folio_spread(&runs[..1]), "");

    let mut r = ValidateResult::new(5.0);
    r.cases.push(ValidateCase {
        workload: "bash".into(),
        config: "16K".into(),
        thp: "always".into(),
        model: model(273, 17),
        kernel: runs[0].clone(),
        kernel_runs: runs.to_vec(),
        verdict: v(&model(273, 17)).into(),
        mappings: Vec::new(),
    });
    let t = validate_table(&r);
    assert!(t.contains("277..278; 16K 16..17"), "{t}");
}
