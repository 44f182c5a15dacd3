//! Unit tests of the native kernels: parsing, canonical specs, and that each kernel
//! touches exactly the pages it should.

use super::*;
use pagelab_core::PageSize;

#[test]
fn stride_without_heap_or_every_is_the_papers_sweep() {
    let specs = expand("stride", Scale::Full).unwrap();
    assert_eq!(specs.len(), 18);
    let first = specs[0].to_string();
    assert_eq!(
        first,
        "stride:heap=128K,page=4K,line=64,every=1,iters=131072,rounds=5"
    );
    assert_eq!(
        specs[17].to_string(),
        "stride:heap=32M,page=4K,line=64,every=16,iters=8192,rounds=5"
    );
    let one = expand("stride:heap=4M,every=16,iters=7", Scale::Full).unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(
        one[0].to_string(),
        "stride:heap=4M,page=4K,line=64,every=16,iters=7,rounds=5"
    );
    assert_eq!(expand("stride:every=16", Scale::Quick).unwrap().len(), 3);
}

#[test]
fn canonical_specs_parse_back_to_themselves() {
    for spec in default_specs(Scale::Full)
        .into_iter()
        .chain(default_specs(Scale::Quick))
    {
        let text = spec.to_string();
        assert_eq!(
            KernelSpec::parse(&text, Scale::Quick).unwrap(),
            spec,
            "{text}"
        );
    }
    let k = KernelSpec::parse("fault:size=1536K", Scale::Full).unwrap();
    assert_eq!(k.to_string(), "fault:size=1536K");
}

#[test]
fn bad_specs_name_what_is_wrong() {
    let err = |s: &str| format!("{:#}", expand(s, Scale::Full).unwrap_err());
    assert!(
        err("strid").contains("unknown kernel `strid`"),
        "{}",
        err("strid")
    );
    assert!(err("strid").contains("stride, stream, gups, chase, fault"));
    assert!(err("gups:tabel=8M").contains("gups has no parameter `tabel`"));
    assert!(err("gups:table=3M").contains("table=3M is not allowed: write a power of two"));
    assert!(err("stride:heap=6K,page=4K").contains("heap=6K is not a multiple of page=4K"));
    assert!(err("chase:steps=lots").contains("steps=lots is not allowed: write a whole number"));
    assert!(err("stream:n").contains("`n` in the stream spec is not key=value"));
    assert!(err("fault:size=1M,size=2M").contains("`size` is given twice"));
    assert!(err("fault:size=5000").contains("multiple of 4K"));
}

#[test]
fn region_is_2m_aligned_and_rounded_up() {
    let mut r = Region::new(128 << 10, Advice::NoHugePage).unwrap();
    assert_eq!(r.as_mut_ptr() as usize % REGION_ALIGN, 0);
    assert_eq!(r.len(), 128 << 10);
    assert_eq!(r.as_mut_slice::<u64>().len(), 16 << 10);
    assert!(r.as_mut_slice::<u64>().iter().all(|&w| w == 0));
}

/// Under MADV_NOHUGEPAGE every 4K page written for the first time is one minor fault,
/// whatever the THP knobs say: the first touch of N bytes takes N/4K faults (plus at most
/// a few for the measuring code itself).
#[test]
fn first_touch_takes_one_fault_per_4k_page() {
    for spec in [
        "fault:size=8M",
        "stride:heap=4M,every=16,iters=1",
        "gups:table=4M,updates=10",
    ] {
        let k = KernelSpec::parse(spec, Scale::Full).unwrap();
        let m = k.run(Advice::NoHugePage).unwrap();
        let pages = PageSize::K4.pages_in(k.data_bytes()) as f64;
        let faults = m["first_touch_faults"];
        assert!(
            faults >= pages && faults <= pages + 8.0,
            "{spec}: {faults} faults for {pages} pages"
        );
        assert!(m["loop_faults"] <= 8.0, "{spec}: the loop faulted: {m:?}");
    }
}

#[test]
fn every_kernel_reports_sane_metrics() {
    for spec in default_specs(Scale::Quick)
        .into_iter()
        .filter(|k| !matches!(k, KernelSpec::Stride(s) if s.heap > (2 << 20)))
    {
        let m = spec.run(Advice::NoHugePage).unwrap();
        let (head, _) = spec.headline();
        for key in [
            head,
            "ns_per_op",
            "first_touch_seconds",
            "first_touch_ns_per_mb",
            "loop_seconds",
        ] {
            let v = m[key];
            assert!(v.is_finite() && v > 0.0, "{spec}: {key} = {v}");
        }
        assert_eq!(m["ns_per_op"], m[spec.op_metric()]);
        assert!(m["ns_per_op"] < 1e6, "{spec}: {m:?}");
        // Where the data's frames lie, as root only (pagemap hides them from others).
        match (m.get("frame_neighbours"), m.get("frame_blocks")) {
            (Some(&n), Some(&b)) => {
                assert!((0.0..=1.0).contains(&n) && b >= 1.0, "{spec}: {m:?}");
                let least = spec.data_bytes() as f64 / 4096.0;
                assert!(m["frame_span_bytes"] >= least * 4096.0, "{spec}: {m:?}");
            }
            (None, None) => assert!(!pagelab_sys::process::is_root(), "{spec}: {m:?}"),
            other => panic!("{spec}: {other:?}"),
        }
        assert_eq!(m["data_bytes"], spec.data_bytes() as f64);
    }
}

#[test]
fn child_line_round_trips() {
    let line = run_child("fault:size=1M", Advice::None).unwrap();
    let report = ChildReport::from_stdout(format!("noise\n{line}\n").as_bytes()).unwrap();
    assert_eq!(report.spec, "fault:size=1M");
    assert_eq!(report.advice, "none");
    assert!(report.metrics["first_touch_faults"] >= 256.0);
    let err = ChildReport::from_stdout(b"oops").unwrap_err().to_string();
    assert!(err.contains("no report line"), "{err}");
}

#[test]
fn a_pool_is_part_of_the_canonical_spec_and_checked() {
    for spec in [
        "stride:heap=16M,page=4K,line=64,every=1,iters=3,rounds=5,pool=64M",
        "gups:table=8M,updates=10,seed=1,pool=1G",
        "chase:nodes=1024,node=64,steps=10,seed=1,pool=2M",
    ] {
        let k = KernelSpec::parse(spec, Scale::Full).unwrap();
        assert_eq!(k.to_string(), spec);
        assert!(k.pool().is_some(), "{spec}");
    }
    assert_eq!(
        KernelSpec::parse("gups:table=8M", Scale::Full)
            .unwrap()
            .pool(),
        None
    );
    let err = |s: &str| format!("{:#}", expand(s, Scale::Full).unwrap_err());
    assert!(err("stride:heap=4M,pool=3M").contains("pool=3M is not allowed: whole 2M blocks"));
    assert!(err("gups:pool=1K").contains("pool=1K is not allowed: write a size from 2M"));
    assert!(err("stream:pool=2M").contains("stream has no parameter `pool`"));
    // A pool that cannot hold the data is refused before anything runs.
    assert!(err("stride:heap=16M,pool=8M")
        .contains("pool=8M is not allowed: the pool must hold the data's 16M at least"));
    assert!(err("chase:nodes=65536,node=64,pool=2M").contains("the data's 4M at least"));
    // Data whose size would overflow is an error naming both, not a panic or an empty map.
    let huge = "chase:nodes=17179869184,node=1073741824";
    assert!(
        err(huge).contains("nodes=17179869184 of node=1G is more than 1T of data"),
        "{}",
        err(huge)
    );
    // A pooled stride is a table of its own, not a row of the heap sweep.
    use pagelab_report::lab_table::BenchKernel;
    let table = |s: &str| KernelSpec::parse(s, Scale::Full).unwrap().bench_kernel();
    assert!(matches!(
        table("stride:heap=16M"),
        BenchKernel::Stride { .. }
    ));
    assert!(matches!(
        table("stride:heap=16M,pool=32M"),
        BenchKernel::Other { headline, .. } if headline == "ns_per_access"
    ));
}

/// Under the 4K baseline the data's frames come from the pool: a pool as large as the data
/// gives every frame of its blocks, a larger one a random choice over more blocks, and the
/// loop takes no fault. Needs root (pagemap) and THP (the pool's 2M pages).
#[test]
fn a_pools_frames_lie_in_its_blocks() {
    if !pagelab_sys::process::is_root() {
        eprintln!("skipped: the pool's frames are checked through pagemap, which needs root");
        return;
    }
    if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
        eprintln!("skipped: this kernel has no THP, which the pool's 2M blocks come from");
        return;
    }
    let run = |pool: &str| {
        let k =
            KernelSpec::parse(&format!("stride:heap=4M,iters=2,pool={pool}"), Scale::Full).unwrap();
        k.run(Advice::NoHugePage).unwrap()
    };
    let m = run("4M");
    assert_eq!((m["pool_blocks"], m["frame_blocks"]), (2.0, 2.0), "{m:?}");
    assert!(m["loop_faults"] <= 8.0, "{m:?}");
    // 1024 pages drawn from 32 blocks of 512: nearly every block, few neighbours.
    let m = run("64M");
    assert_eq!(m["pool_blocks"], 32.0, "{m:?}");
    assert!(
        m["frame_blocks"] >= 28.0 && m["frame_blocks"] <= 32.0,
        "{m:?}"
    );
    assert!(m["frame_neighbours"] < 0.05, "{m:?}");
    // Under another configuration the data is mapped as it maps it: no pool.
    let k = KernelSpec::parse("stride:heap=4M,iters=2,pool=64M", Scale::Full).unwrap();
    assert!(!k.run(Advice::None).unwrap().contains_key("pool_blocks"));
}
