//! Overlapped misses (`[overlap]` in a machine file): only independent references
//! overlap, only on a machine that says how many misses it keeps in flight, and the
//! cycles they hide are accounted for.

use pagelab_core::PageSize;
use pagelab_engine::{run_cost_study, CostConfig, CostMachine, StudyConfig};
use pagelab_report::{CostStats, SimResult};

fn cost(machine: &str, overlap: Option<(u32, u32)>) -> CostConfig {
    let mut m = pagelab_machine::preset(machine).unwrap();
    let tlb = m.tlb.clone().unwrap();
    if let Some(c) = &mut m.cost {
        c.overlap = overlap.map(|(miss_buffers, walkers)| pagelab_cache::OverlapSpec {
            miss_buffers,
            walkers,
            walk_interval: 0,
            walks: pagelab_cache::WalkClock::Pooled,
        });
    }
    CostConfig {
        machine: CostMachine::new(&m, &tlb).unwrap().unwrap(),
        nested_host: Some(PageSize::M2),
    }
}

fn timed(spec: &str, c: &CostConfig) -> SimResult {
    let cfg = StudyConfig {
        page_sizes: pagelab_core::parse_page_sizes("4K,2M").unwrap(),
        tlb: c.machine.tlb.clone(),
    };
    let mut src = pagelab_workloads::open(spec).unwrap();
    run_cost_study(&mut *src, &cfg, c, &mut ()).unwrap()
}

fn costs(r: &SimResult) -> Vec<CostStats> {
    r.runs.iter().map(|r| r.cost.clone().unwrap()).collect()
}

const STRIDE: &str = "stride:heap=16M,every=1,iters=2,align=2M";
const CHASE: &str = "chase:nodes=65536,steps=100000,align=2M";

#[test]
fn independent_misses_overlap_and_the_hidden_cycles_add_up() {
    let serial = costs(&timed(STRIDE, &cost("zen4", None)));
    let zen4 = costs(&timed(STRIDE, &cost("zen4", Some((24, 6)))));
    for (s, o) in serial.iter().zip(&zen4) {
        // The same references through the same caches: only the time differs.
        assert_eq!(
            (s.walks, s.walk_refs, &s.caches),
            (o.walks, o.walk_refs, &o.caches)
        );
        assert_eq!(s.overlapped_cycles, 0);
        assert!(o.overlapped_cycles > 0);
        let parts = o.instr_cycles + o.tlb_cycles + o.walk_cycles + o.data_cycles;
        assert_eq!(o.cycles, parts - o.overlapped_cycles);
        assert_eq!(parts, s.cycles);
        assert!(o.load_cycles < s.load_cycles);
    }
    // More in flight hides more; one buffer and one walker still overlap hits with a miss.
    let wide = costs(&timed(STRIDE, &cost("zen4", Some((64, 16)))));
    let narrow = costs(&timed(STRIDE, &cost("zen4", Some((1, 1)))));
    for i in 0..2 {
        assert!(wide[i].cycles <= zen4[i].cycles, "run {i}");
        assert!(zen4[i].cycles < narrow[i].cycles, "run {i}");
        assert!(narrow[i].cycles < serial[i].cycles, "run {i}");
    }
}

#[test]
fn a_chase_and_a_machine_without_overlap_pay_every_latency_in_full() {
    let with = costs(&timed(CHASE, &cost("zen4", Some((24, 6)))));
    let without = costs(&timed(CHASE, &cost("zen4", None)));
    assert_eq!(with, without);
    assert!(with.iter().all(|c| c.overlapped_cycles == 0));
}

#[test]
fn the_workloads_kinds_say_which_references_are_independent() {
    let names: Vec<&str> = pagelab_workloads::catalog()
        .iter()
        .map(|d| d.name)
        .collect();
    for name in names {
        let info = pagelab_core::SourceInfo {
            kind: "workload".into(),
            name: name.into(),
            ..Default::default()
        };
        let expected = matches!(name, "stride" | "stream" | "gups");
        assert_eq!(pagelab_engine::independent_refs(&info), expected, "{name}");
    }
    // `lines` is a chase unless its order says independent, as its info carries it.
    for (order, expected) in [("dependent", false), ("independent", true)] {
        let src = pagelab_workloads::open(&format!("lines:order={order}")).unwrap();
        assert_eq!(
            pagelab_engine::independent_refs(&src.info()),
            expected,
            "{order}"
        );
    }
    let trace = pagelab_core::SourceInfo {
        kind: "lackey".into(),
        name: "stride".into(),
        ..Default::default()
    };
    assert!(!pagelab_engine::independent_refs(&trace));
}

#[test]
fn a_walks_reads_that_miss_the_l1d_take_miss_buffers_from_the_data() {
    // Random updates over 64M: every one misses the caches, and on 4K pages walks too.
    // With walkers to spare, walks that took no miss buffer would hide entirely behind
    // the data's misses, and 4K pages would cost what 2M pages do; their reads that
    // missed the L1D hold buffers as the data's misses do, so 4K pages are slower by
    // about those reads' share of the buffers. The steady state: the cycles of 200K
    // more updates after the same table's initialisation.
    let c = cost("emeraldrapids", Some((8, 64)));
    let few = costs(&timed("gups:table=64M,updates=200000,align=2M", &c));
    let more = costs(&timed("gups:table=64M,updates=400000,align=2M", &c));
    let per = |i: usize| (more[i].cycles - few[i].cycles) as f64 / 200_000.0;
    let walks = more[0].walks - few[0].walks;
    assert!(walks > 150_000, "4K pages walk on most updates: {walks}");
    assert!(more[1].walks - few[1].walks < 100, "2M pages hardly walk");
    let misses = more[0].caches[0].table_misses - few[0].caches[0].table_misses;
    assert!(
        misses > walks / 2,
        "the walks' reads miss the L1D: {misses} in {walks} walks"
    );
    assert!(
        per(0) > 1.1 * per(1),
        "4K {} cycles an update against 2M {}",
        per(0),
        per(1)
    );
}

#[test]
fn the_probes_independent_lines_overlap_and_its_dependent_ones_do_not() {
    // The probe's lines one per 4K page (walks on 4K pages), the steady state of 20K more
    // loads: each load on the last pays its walk and its line in full, on either clock;
    // independent loads overlap them and come out several times cheaper on 4K pages.
    let c = cost("zen4", Some((24, 6)));
    let serial = cost("zen4", None);
    let per = |spec: &str, c: &CostConfig| -> Vec<f64> {
        let few = costs(&timed(&format!("{spec},steps=20000"), c));
        let more = costs(&timed(&format!("{spec},steps=40000"), c));
        (0..2)
            .map(|i| (more[i].cycles - few[i].cycles) as f64 / 20_000.0)
            .collect()
    };
    let dep = per("lines:lines=16384,spacing=4K", &c);
    assert_eq!(dep, per("lines:lines=16384,spacing=4K", &serial));
    let ind = per("lines:lines=16384,spacing=4K,order=independent", &c);
    let ind_serial = per("lines:lines=16384,spacing=4K,order=independent", &serial);
    assert!(ind[0] * 3.0 < dep[0], "4K: {ind:?} against {dep:?}");
    assert!(
        ind[0] * 3.0 < ind_serial[0],
        "4K: {ind:?} against {ind_serial:?}"
    );
    // On 2M pages the lines are in the L2 and nothing walks: the independent loads are
    // bound by the loop's 20 instructions at zen4's 0.5 cycles.
    assert_eq!(ind[1], 10.0);
    assert!(ind[1] < dep[1] && ind[1] < ind_serial[1]);
    assert!(dep[0] > dep[1], "4K pages walk, 2M do not: {dep:?}");
}
