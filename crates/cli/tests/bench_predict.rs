//! `pagelab bench --predict`: the model's cycles per operation printed beside each measured
//! configuration are exactly the steady state `pagelab sim` gives for the same workload (the
//! difference of two runs over the work between them), and a machine the model cannot time
//! with is refused before anything is measured. As root on a kernel with 2M THP the 2M
//! configuration runs as well; elsewhere the 4K baseline alone (said on standard error).

mod common;

use common::{pagelab, stdout_of_success, tmp};
use std::path::Path;

/// A small gups: a 1M table, 20,000 updates (well under a second natively and modelled).
const KERNEL: &str = "gups:table=1M,updates=20000";

fn two_mega_thp() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED (2M half): changing the THP knobs needs root");
        return false;
    }
    let knob = "/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/enabled";
    if !Path::new(knob).exists() {
        eprintln!("SKIPPED (2M half): {knob} does not exist");
        return false;
    }
    true
}

/// Each page size's `cost.cycles` of `pagelab sim` on this machine's model.
fn sim_cycles(workload: &str, sizes: &str) -> Vec<u64> {
    let dir = tmp("predict-sim");
    let path = dir.join("r.json");
    stdout_of_success(
        &pagelab()
            .args(["sim", "--machine", "host", "--virt", "nested:host=2M"])
            .args(["--workload", workload, "--page-sizes", sizes, "--json"])
            .arg(&path)
            .output()
            .unwrap(),
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cost"]["cycles"].as_u64().unwrap())
        .collect()
}

#[test]
fn predict_prints_the_models_steady_state_beside_each_configuration() {
    let sizes: &[&str] = if two_mega_thp() {
        &["4K", "2M"]
    } else {
        &["4K"]
    };
    let mut cmd = pagelab();
    cmd.args([
        "bench",
        "--repeat",
        "1",
        "--predict",
        "--machine",
        "host",
        "--frames",
        "machine",
        KERNEL,
    ]);
    for s in sizes {
        cmd.args(["--pages", s]);
    }
    let stdout = stdout_of_success(&cmd.output().unwrap());
    let table = stdout
        .split_once(&format!(
            "beside the model ({} nested:host=2M",
            pagelab_machine::host::host_choice().name
        ))
        .unwrap_or_else(|| panic!("no prediction table in:\n{stdout}"))
        .1;
    // The model's own figures: 10,000 more updates after the same start.
    let workload = |n: u32| format!("gups:table=1M,updates={n},seed=1,align=2M");
    let (a, b) = (
        sim_cycles(&workload(10000), &sizes.join(",")),
        sim_cycles(&workload(20000), &sizes.join(",")),
    );
    for (i, size) in sizes.iter().enumerate() {
        let row: Vec<&str> = table
            .lines()
            .map(|l| {
                l.trim_start_matches("gups:table=1M,updates=20000,seed=1")
                    .trim()
            })
            .find(|l| l.split_whitespace().next() == Some(size))
            .unwrap_or_else(|| panic!("no {size} row in:\n{table}"))
            .split_whitespace()
            .collect();
        let expected = (b[i] - a[i]) as f64 / 10000.0;
        // label, ns, spread, speed-up, its interval, the model's cycles.
        assert_eq!(row[5], format!("{expected:.1}"), "{size} in:\n{table}");
        // The measured figure is the bench's own ns per update, a positive time.
        assert!(row[1].parse::<f64>().unwrap() > 0.0, "{table}");
    }
    let goal = if sizes.len() == 2 {
        "of 1 kernels"
    } else {
        "0 of 0 kernels"
    };
    assert!(
        table.contains("(stride heaps of 16M and more, gups, chase): ") && table.contains(goal),
        "{table}"
    );
}

#[test]
fn predict_models_each_kernel_with_its_own_runs_frames_as_root() {
    let out = pagelab()
        .args(["bench", "--repeat", "3", "--pages", "4K", "--predict"])
        .args(["--machine", "zen4", KERNEL])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    stdout_of_success(&out);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let note = "gups:table=1M,updates=20000,seed=1 modelled with its 4K runs' frames: ";
    assert_eq!(stderr.contains(note), root, "{stderr}");
    if !root {
        eprintln!("SKIPPED (the frames' half): pagemap hides frame numbers from non-root");
    }
}

/// A kernel with `pool=` runs its 4K baseline on frames from the pool's 2M blocks and is
/// modelled with the same draw: 4K frames at random over the pool (as root, with THP, for
/// the pool's 2M pages and pagemap).
#[test]
fn predict_models_a_pooled_kernel_with_its_pool() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: a pool's frames are checked through pagemap, which needs root");
        return;
    }
    if !Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
        eprintln!("SKIPPED: this kernel has no THP, which a pool's 2M blocks come from");
        return;
    }
    let dir = tmp("predict-pool");
    let json = dir.join("b.json");
    let out = pagelab()
        .args(["bench", "--repeat", "2", "--pages", "4K", "--predict"])
        .args([
            "--machine",
            "zen4",
            "gups:table=1M,updates=20000,pool=4M",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let table = stdout_of_success(&out);
    let subject = "gups:table=1M,updates=20000,seed=1,pool=4M";
    assert!(
        stderr.contains(&format!(
            "{subject} modelled with its 4K frames at random over its pool of 4M"
        )),
        "{stderr}"
    );
    assert!(table.contains(subject), "{table}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let runs = v["configs"][0]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        // 256 pages from the pool's two 2M blocks.
        assert_eq!(r["metrics"]["pool_blocks"], 2.0, "{r}");
        let blocks = r["metrics"]["frame_blocks"].as_f64().unwrap();
        assert!((1.0..=2.0).contains(&blocks), "{r}");
    }
}

#[test]
fn predict_refuses_a_machine_without_caches_before_measuring() {
    let out = pagelab()
        .args([
            "bench",
            "--predict",
            "--machine",
            "x86-64",
            "--pages",
            "4K",
            KERNEL,
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("x86-64"), "{stderr}");
    assert!(stderr.contains("caches"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("median of"));
}

#[test]
fn predict_measures_this_machine_by_default_and_models_the_file_it_wrote() {
    if !two_mega_thp() {
        eprintln!("SKIPPED: the measured 2M curve needs THP, and bench's 2M half root");
        return;
    }
    let out = pagelab()
        .args([
            "bench",
            "--repeat",
            "1",
            "--predict",
            "--no-blocks",
            "--pages",
            "4K",
            KERNEL,
        ])
        .output()
        .unwrap();
    let stdout = stdout_of_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let path = stderr
        .lines()
        .find_map(|l| l.strip_prefix("pagelab: --predict --machine measured: wrote "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no measured file named in:\n{stderr}"))
        .to_string();
    assert!(stderr.contains("misses in flight:"), "{stderr}");
    assert!(stderr.contains("host page:"), "{stderr}");
    // `--no-blocks` skips the host's block translations (`machines --measure` runs them).
    assert!(
        stderr.contains("host blocks: not measured (--no-blocks): none modelled"),
        "{stderr}"
    );
    // The table models the file it names, over the host page the file says it found
    // (`--virt nested`, the default), and the file is a machine with caches measured here
    // and an [overlap].
    let text = std::fs::read_to_string(&path).unwrap();
    let m = pagelab_machine::Machine::from_toml_str(&text, &path).unwrap();
    let cost = m.cost.unwrap();
    let host = cost
        .nested
        .as_ref()
        .and_then(|n| n.host_page)
        .map_or("2M".to_string(), |p| p.to_string());
    assert!(
        stdout.contains(&format!("beside the model ({path} nested:host={host}")),
        "{stdout}"
    );
    assert!(
        cost.overlap.is_some() && cost.caches.memory_latency > 0,
        "{text}"
    );
}

/// A signal while the model runs (after every measurement, no knob changed): the model
/// stops after the kernel it is on, the tables print every measurement and the kernels
/// modelled so far, and pagelab exits 128 + the signal.
#[test]
fn a_signal_while_modelling_prints_what_was_done_and_exits_128_plus_it() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;
    // The first kernel takes seconds to model (4 million updates of a 64M table through
    // the caches), the second none: the signal lands while the first is modelled.
    let mut child = pagelab()
        .args(["bench", "--repeat", "1", "--pages", "4K", "--predict"])
        .args(["--machine", "zen4", "--frames", "machine"])
        .args(["gups:table=64M,updates=4000000", "chase:nodes=100"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).unwrap();
        s
    });
    let mut stderr = String::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        if line.contains("--predict: modelling 2 kernel(s) on zen4") {
            // SAFETY: kill has no memory preconditions; the child is ours and not reaped.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        }
        stderr += &line;
        stderr.push('\n');
    }
    let status = child.wait().unwrap();
    let stdout = out.join().unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}\n{stdout}");
    assert!(
        stderr.contains("interrupted by signal 2 while modelling"),
        "{stderr}"
    );
    // Both kernels measured; the chase, after the signal, not modelled.
    let (measured, model) = stdout
        .split_once("beside the model (zen4")
        .unwrap_or_else(|| panic!("no prediction table in:\n{stdout}"));
    assert!(
        measured.contains("gups:table=64M") && measured.contains("chase:nodes=100"),
        "{measured}"
    );
    assert!(!model.contains("chase:nodes=100"), "{model}");
}
