//! `--machine host`: the CPU read from /proc/cpuinfo picks the preset that describes it;
//! a CPU no preset describes, or a cpuinfo that cannot be parsed, falls back to zen4 and
//! says why.

use pagelab_machine::host::{choose, parse_cpuinfo, preset_for, HostCpu, FALLBACK};
use pagelab_machine::{preset, preset_names, resolve};

/// The first lines of a KVM guest's /proc/cpuinfo on each CPU (two processors each, so the
/// parser must stop at the first block).
const EMERALD_RAPIDS: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n\
model\t\t: 207\nmodel name\t: Intel(R) Xeon(R) Processor\nstepping\t: 2\n\n\
processor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 1\n";
const GENOA: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n\
model\t\t: 17\nmodel name\t: AMD EPYC 9R14 96-Core Processor\n\nprocessor\t: 1\n";
const MILAN: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n\
model\t\t: 1\nmodel name\t: AMD EPYC\n\nprocessor\t: 1\n";
const NEOVERSE_N1: &str = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\n\
CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\n\
CPU revision\t: 1\n\nprocessor\t: 1\n";

fn cpu(text: &str) -> HostCpu {
    parse_cpuinfo(text).unwrap()
}

#[test]
fn each_cpu_of_a_preset_is_recognised() {
    let emr = cpu(EMERALD_RAPIDS);
    assert_eq!((emr.family, emr.model), (6, 207));
    assert_eq!(preset_for(&emr, 4096), Some("emeraldrapids"));
    assert_eq!(preset_for(&cpu(GENOA), 4096), Some("zen4"));
    assert_eq!(preset_for(&cpu(MILAN), 4096), Some("zen3"));
    // Zen 3's client parts (Vermeer, Rembrandt, Cezanne) and Zen 4's (Raphael, Phoenix).
    for (model, name) in [
        (0x21, "zen3"),
        (0x44, "zen3"),
        (0x50, "zen3"),
        (0x61, "zen4"),
        (0x74, "zen4"),
    ] {
        let text = MILAN.replace("model\t\t: 1", &format!("model\t\t: {model}"));
        assert_eq!(
            preset_for(&cpu(&text), 4096),
            Some(name),
            "model {model:#x}"
        );
    }
    let n1 = cpu(NEOVERSE_N1);
    assert_eq!((n1.vendor.as_str(), n1.model), ("0x41", 0xd0c));
    assert_eq!(preset_for(&n1, 4096), Some("neoverse-n1-4k"));
    assert_eq!(preset_for(&n1, 16384), Some("neoverse-n1-16k"));
    assert_eq!(preset_for(&n1, 65536), Some("neoverse-n1-64k"));
    assert_eq!(preset_for(&n1, 8192), None);
    let c = choose(Ok(emr), 4096);
    assert_eq!(c.name, "emeraldrapids");
    assert!(
        c.reason
            .contains("GenuineIntel family 6 model 207 (Intel(R) Xeon(R) Processor)"),
        "{}",
        c.reason
    );
}

#[test]
fn every_preset_host_can_pick_exists_and_times_runs() {
    let cpus = [
        cpu(EMERALD_RAPIDS),
        cpu(GENOA),
        cpu(MILAN),
        cpu(NEOVERSE_N1),
    ];
    let names = preset_names();
    for c in &cpus {
        for page in [4096, 16384, 65536] {
            if let Some(name) = preset_for(c, page) {
                assert!(names.contains(&name), "{name}");
                assert!(preset(name).unwrap().cost.is_some(), "{name} has no caches");
            }
        }
    }
    assert!(preset(FALLBACK).unwrap().cost.is_some());
}

/// This project's KVM guest of session 59: a model number the host's core does not have
/// (167 is Rocket Lake's, a client core without AMX), with AMX and AVX-512 FP16.
const XEON_AS_MODEL_167: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n\
model\t\t: 167\nmodel name\t: Intel(R) Xeon(R) Processor\nstepping\t: 0\n\
flags\t\t: fpu vme avx2 avx512f avx512_fp16 amx_bf16 amx_tile amx_int8\n\n\
processor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 1\n";

#[test]
fn an_intel_model_no_preset_names_is_taken_by_its_amx() {
    let c = cpu(XEON_AS_MODEL_167);
    assert!(c.amx);
    assert_eq!(preset_for(&c, 4096), Some("emeraldrapids"));
    let choice = choose(Ok(c), 4096);
    assert_eq!(choice.name, "emeraldrapids");
    assert!(
        choice.reason.contains("model 167") && choice.reason.contains("with AMX"),
        "{}",
        choice.reason
    );
    // The named models keep their plain reason; without the feature, model 167 falls back.
    assert!(!choose(Ok(cpu(EMERALD_RAPIDS)), 4096).reason.contains("AMX"));
    let no_amx = XEON_AS_MODEL_167.replace(" amx_tile", "");
    assert!(!cpu(&no_amx).amx);
    assert_eq!(choose(parse_cpuinfo(&no_amx), 4096).name, FALLBACK);
    // Only the first processor's flags count, and a flag must be whole.
    let amx_later = XEON_AS_MODEL_167.replace(" amx_tile", " amx_tiles") + "flags\t\t: amx_tile\n";
    assert!(!cpu(&amx_later).amx);
    // AMX on another vendor's CPU picks nothing.
    let other = XEON_AS_MODEL_167.replace("GenuineIntel", "AuthenticAMD");
    assert_eq!(preset_for(&cpu(&other), 4096), None);
}

#[test]
fn a_cpu_without_a_preset_falls_back_and_says_so() {
    // Zen 5 (family 26) and Cascade Lake (Intel family 6 model 85): no preset describes them.
    for (text, vendor) in [
        (
            GENOA.replace("cpu family\t: 25", "cpu family\t: 26"),
            "AuthenticAMD family 26",
        ),
        (
            EMERALD_RAPIDS.replace("model\t\t: 207", "model\t\t: 85"),
            "GenuineIntel family 6 model 85",
        ),
    ] {
        let c = choose(parse_cpuinfo(&text), 4096);
        assert_eq!(c.name, FALLBACK);
        assert!(
            c.reason
                .starts_with(&format!("no preset describes this CPU ({vendor}")),
            "{}",
            c.reason
        );
        assert!(c.reason.contains("--machine NAME|FILE"), "{}", c.reason);
    }
}

#[test]
fn a_cpuinfo_that_cannot_be_read_is_named_in_the_fallback() {
    let bad = EMERALD_RAPIDS.replace("model\t\t: 207", "model\t\t: x7");
    let err = parse_cpuinfo(&bad).unwrap_err();
    assert_eq!(err, "line 4: `model` is `x7`, not a number");
    assert!(choose(Err(err), 4096)
        .reason
        .starts_with("/proc/cpuinfo: line 4"));
    assert_eq!(
        parse_cpuinfo("processor : 0\n").unwrap_err(),
        "no `vendor_id` or `CPU implementer` line"
    );
    assert_eq!(
        parse_cpuinfo("vendor_id : GenuineIntel\nmodel : 207\n").unwrap_err(),
        "no `cpu family` line"
    );
}

#[test]
fn host_resolves_to_this_cpus_preset_and_the_error_names_it() {
    let m = resolve("host").unwrap();
    assert_eq!(m.name, pagelab_machine::host::host_choice().name);
    let err = resolve("hots").unwrap_err().to_string();
    assert!(err.contains("`host` (this CPU's preset)"), "{err}");
}
