//! Every way a spec can be refused, and the message that says how to fix it.

use pagelab_workloads::{open, total_refs, WorkloadError};

fn err(spec: &str) -> String {
    let e = open(spec)
        .err()
        .unwrap_or_else(|| panic!("`{spec}` was accepted"));
    assert_eq!(Some(&e), total_refs(spec).err().as_ref());
    e.to_string()
}

fn has(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "`{msg}` lacks `{p}`");
    }
}

#[test]
fn unknown_workload_lists_the_valid_ones() {
    has(
        &err("strided:heap=4M"),
        &["unknown workload `strided`", "stride, stream, gups, chase"],
    );
    assert!(matches!(
        open("nope"),
        Err(WorkloadError::UnknownWorkload { .. })
    ));
}

#[test]
fn unknown_key_lists_the_workloads_keys() {
    has(
        &err("stride:size=4M"),
        &[
            "`stride` has no parameter `size`",
            "heap, page, line, every, iters, init, align",
        ],
    );
    has(
        &err("chase:heap=4M"),
        &["nodes, node, steps, seed, init, align"],
    );
}

#[test]
fn bad_values_say_what_is_allowed() {
    let cases: &[(&str, &[&str])] = &[
        ("stride:heap=lots", &["`heap=lots`", "like 4K, 64K or 32M"]),
        ("stride:heap=6K,page=4K", &["multiple of page=4K"]),
        ("stride:page=3K", &["power of two from 64 to 1G"]),
        ("stride:line=8K", &["`line=8K`", "from 8 to 4K"]),
        ("stride:every=0", &["`every=0`", "whole number from 1"]),
        ("stride:iters=-1", &["`iters=-1`", "whole number"]),
        ("stride:init=maybe", &["`init=maybe`", "true or false"]),
        (
            "stride:align=3",
            &["`align=3`", "power of two from 8 to 1G"],
        ),
        ("stride:heap=1T", &["from 4K to 256G"]),
        ("stream:n=0", &["`n=0`", "from 1"]),
        (
            "gups:table=6M",
            &["`table=6M`", "power of two from 8 to 256G"],
        ),
        ("gups:seed=x", &["`seed=x`"]),
        ("chase:node=12", &["multiple of 8"]),
        ("chase:nodes=0", &["`nodes=0`", "from 1 to"]),
        ("chase:node=1G,nodes=1000", &["nodes x node at most 256G"]),
        (
            "stride:iters=99999999999999999999999",
            &["whole number from 0 to 18446744073709551615"],
        ),
    ];
    for (spec, parts) in cases {
        let msg = err(spec);
        has(&msg, parts);
        assert!(msg.starts_with("workload `"), "{msg}");
    }
}

#[test]
fn malformed_specs_show_the_syntax() {
    has(
        &err("stride:heap"),
        &["`heap` is not key=value", "NAME[:key=value"],
    );
    has(&err("stride:heap=4M,heap=8M"), &["`heap` is given twice"]);
    has(&err(":heap=4M"), &["name is missing"]);
    has(&err(""), &["name is missing"]);
    has(&err("stride:=4"), &["has no key"]);
}

#[test]
fn lenient_where_it_is_unambiguous() {
    assert!(open("STRIDE").is_ok());
    assert!(open(" stride : heap = 8M , iters = 1_000 ,").is_ok());
    assert!(open("stream:").is_ok());
    assert!(open("gups:init=no,updates=0").is_ok());
}
