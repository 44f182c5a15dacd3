use super::*;
use crate::Summary;

/// A result with one kernel whose configurations ran in these (label, runs' ns) pairs.
fn result(runs: &[(&str, &[f64])]) -> LabResult {
    let mut r = LabResult::new("bench", Default::default());
    for (label, ns) in runs {
        let mut c = LabConfig {
            subject: "gups".into(),
            label: label.to_string(),
            ..Default::default()
        };
        c.summary.insert(MEASURED.into(), Summary::of(ns).unwrap());
        c.runs = ns
            .iter()
            .map(|&v| crate::Measurement {
                metrics: [(RUN_MEASURED.to_string(), v)].into(),
                ..Default::default()
            })
            .collect();
        r.configs.push(c);
    }
    r
}

fn prediction(cycles: &[(&str, f64)]) -> KernelPrediction {
    KernelPrediction {
        subject: "gups".into(),
        goal: true,
        cycles_per_op: cycles.iter().map(|&(l, c)| (l.to_string(), c)).collect(),
    }
}

#[test]
fn the_goals_judge_speed_ups_and_only_the_pairs_the_runs_separate() {
    let r = result(&[
        ("4K", &[10.0, 11.0, 12.0]),
        ("64K", &[9.0, 10.5, 11.5]),
        ("2M", &[5.0, 6.0]),
    ]);
    // 2M is measured 1.92x faster than 4K (the rounds' 10 / 5 and 11 / 6; the third 4K
    // run has no 2M beside it); 64K overlaps both.
    let good = prediction(&[("4K", 100.0), ("64K", 200.0), ("2M", 60.0)]);
    let (m, p) = speedups_2m(&r, &good).unwrap();
    assert!((m.median - (2.0 + 11.0 / 6.0) / 2.0).abs() < 1e-9, "{m:?}");
    assert_eq!((m.low, m.high), (11.0 / 6.0, 2.0));
    assert!((p - 100.0 / 60.0).abs() < 1e-9);
    assert_eq!(same_ranking(&r, &good), Some(true));
    let wrong_order = prediction(&[("4K", 100.0), ("64K", 50.0), ("2M", 100.0)]);
    assert_eq!(same_ranking(&r, &wrong_order), Some(false));
    let table = predict_table(&r, &[good, wrong_order], "zen4");
    // 100/60 = 1.67 against 1.92 measured: 0.87, within 25% over the whole interval
    // (1.83-2.00); 1.00 against it: not, over the whole interval either.
    assert!(table.contains("1.92  1.83-2.00"), "{table}");
    // Configurations with more runs than others (a kernel measured again) say so.
    assert!(
        table.starts_with("measured (median of 2-3 run(s),"),
        "{table}"
    );
    assert!(table.contains("0.87 (goal met)"), "{table}");
    assert!(table.contains("0.52 (goal missed)"), "{table}");
    assert!(table.contains("): 1 of 2 kernels\n"), "{table}");
    assert!(table.contains("): 1 of 2 kernels whose runs"), "{table}");
    // An interval that crosses an edge of the band says so, in the row and in the
    // goal's line: 2.00 predicted is within 25% of 1.83 but not of 1.40 (rounds 2.00,
    // 1.83, 1.40).
    let r = result(&[("4K", &[10.0, 11.0, 14.0]), ("2M", &[5.0, 6.0, 10.0])]);
    let p = prediction(&[("4K", 100.0), ("2M", 50.0)]);
    let (m, _) = speedups_2m(&r, &p).unwrap();
    assert!(!settled(2.0, &m), "{m:?}");
    let table = predict_table(&r, std::slice::from_ref(&p), "zen4");
    assert!(table.contains("1.09 (goal met; unsettled)"), "{table}");
    assert!(
        table.contains("): 1 of 1 kernels (1 of them unsettled: the interval"),
        "{table}"
    );
    // That kernel is the one `--settle` measures again; a settled one is not.
    assert_eq!(unsettled_subjects(&r, std::slice::from_ref(&p)), ["gups"]);
    let settled_r = result(&[("4K", &[10.0, 11.0, 12.0]), ("2M", &[5.0, 5.5, 6.0])]);
    assert!(unsettled_subjects(&settled_r, std::slice::from_ref(&p)).is_empty());
    let no_goal = KernelPrediction {
        goal: false,
        ..p.clone()
    };
    assert!(unsettled_subjects(&r, &[no_goal]).is_empty());
    let together = result(&[("4K", &[10.0, 12.0]), ("2M", &[11.0, 13.0])]);
    let any = prediction(&[("4K", 1.0), ("2M", 2.0)]);
    assert_eq!(same_ranking(&together, &any), None);
}

#[test]
fn the_measured_speed_up_is_the_rounds_median_with_an_interval_of_95_percent() {
    // The order statistics that hold the median with 95%: all of 5 (93.75%, the most
    // there is), the 2nd and 8th of 9, the 3rd and 10th of 12, the 6th and 15th of 20.
    assert_eq!(
        [1, 2, 5, 6, 9, 12, 20].map(median_bounds),
        [0, 0, 0, 0, 1, 2, 5]
    );
    // A machine that drifts by 60% from round to round, 2M 1.40x faster in each round
    // within 2%: the runs spread over each other, the rounds' speed-ups do not.
    let base = [10.0, 14.0, 11.0, 16.0, 12.0, 10.5, 15.0, 13.0, 11.5];
    let jitter = [1.0, 0.99, 1.01, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0];
    let huge: Vec<f64> = base.iter().zip(jitter).map(|(b, j)| b / 1.4 * j).collect();
    let r = result(&[("4K", &base), ("2M", &huge)]);
    let m = measured_speedup(&r, "gups", "2M").unwrap();
    assert!((m.median - 1.4).abs() < 0.01, "{m:?}");
    assert!(
        m.low > 1.37 && m.high < 1.43 && m.low < m.median && m.median < m.high,
        "{m:?}"
    );
    // 1.40 predicted is settled; so are 1.20 (within 25% of all of it) and 2.00 (of none).
    assert!(settled(1.4, &m) && settled(1.2, &m) && !within(2.0, m.high) && settled(2.0, &m));
    // The interval: the 2nd and 8th of the nine, 1.4 / 1.01 and 1.4 / 0.99. 1.75 is
    // within 25% of its top (1.414) but not of its bottom (1.386).
    assert!((m.low - 1.4 / 1.01).abs() < 1e-9 && (m.high - 1.4 / 0.99).abs() < 1e-9);
    assert!(within(1.75, m.high) && !within(1.75, m.low) && !settled(1.75, &m));
    // Runs that carry no per-run figure: the medians, and the runs' extremes against
    // each other.
    let mut bare = r.clone();
    bare.configs.iter_mut().for_each(|c| c.runs.clear());
    let m = measured_speedup(&bare, "gups", "2M").unwrap();
    assert!((m.median - 1.4).abs() < 0.03, "{m:?}");
    assert!((m.low - 10.0 / (16.0 / 1.4 * 1.02)).abs() < 1e-9, "{m:?}");
    assert!((m.high - 16.0 / (10.0 / 1.4)).abs() < 1e-9, "{m:?}");
}

#[test]
fn a_configuration_faster_in_enough_rounds_is_separated_though_the_ranges_overlap() {
    assert!((sign_test(8, 9) - 2.0 * 10.0 / 512.0).abs() < 1e-12);
    assert!((sign_test(1, 9) - sign_test(8, 9)).abs() < 1e-12);
    assert!((sign_test(6, 6) - 2.0 / 64.0).abs() < 1e-12);
    assert!(sign_test(5, 5) > RANK_SIGNIFICANCE);
    assert!(sign_test(7, 9) > RANK_SIGNIFICANCE);
    assert_eq!(sign_test(0, 0), 1.0);
    // A machine that drifts from round to round: 64K a little faster than 4K in 8 of 9
    // rounds, though its slowest run is slower than 4K's fastest.
    let base = [10.0, 14.0, 11.0, 16.0, 12.0, 10.5, 15.0, 13.0, 11.5];
    let mut faster = base.map(|v| v * 0.95);
    faster[3] = 16.5;
    let r = result(&[("4K", &base), ("64K", &faster)]);
    assert!(measured_faster(&r, "gups", "64K", "4K", 0.05));
    assert!(!measured_faster(&r, "gups", "4K", "64K", 0.05));
    // Two configurations are one pair: the whole 5% is its level.
    let right = prediction(&[("4K", 100.0), ("64K", 90.0)]);
    let tie = prediction(&[("4K", 100.0), ("64K", 100.0)]);
    assert_eq!(same_ranking(&r, &right), Some(true));
    assert_eq!(same_ranking(&r, &tie), Some(false));
    // With a third configuration each of the three pairs gets a third of it, under
    // which 8 of 9 rounds (3.9%) do not separate a pair, and 9 of 9 (0.4%) do.
    let slow = base.map(|v| v * 1.5);
    let r3 = result(&[("4K", &base), ("64K", &faster), ("2M", &slow)]);
    let three = prediction(&[("4K", 100.0), ("64K", 100.0), ("2M", 150.0)]);
    assert!(!measured_faster(&r3, "gups", "64K", "4K", 0.05 / 3.0));
    assert!(measured_faster(&r3, "gups", "4K", "2M", 0.05 / 3.0));
    assert_eq!(
        same_ranking(&r3, &three),
        Some(true),
        "the tie is not judged"
    );
    // Faster in 7 of 9 rounds: the sign test does not separate them.
    faster[5] = 11.0;
    let r = result(&[("4K", &base), ("64K", &faster)]);
    assert!(!measured_faster(&r, "gups", "64K", "4K", 0.05));
    assert_eq!(same_ranking(&r, &tie), None);
    let table = predict_table(&r, &[right], "zen4");
    assert!(
        table.contains("sign tests at 5% over a kernel's pairs): 0 of 0 kernels"),
        "{table}"
    );
}
