//! Command-line arguments (clap derive).

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "pagelab",
    version,
    about = "A laboratory for page sizes: what would each page size cost and buy?"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// The largest reference size a trace may hold (like 64K, the default, or
    /// 1M); a larger one is refused naming the file, the line or byte offset
    /// and the size (no tracer emits one, and every page of it is stepped).
    #[arg(long, global = true, value_name = "SIZE")]
    pub max_ref_size: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the page-size study on workloads (the built-in default set when none is named):
    /// prints a table per workload and the recommendation, and writes result.json,
    /// result.csv, study.svg and report.html.
    #[command(after_help = EX_STUDY)]
    Study(StudyArgs),
    /// Simulate every page size in one pass over a trace file, standard input or a workload;
    /// with --policy, run the memory-management model under each policy side by side.
    #[command(after_help = EX_SIM)]
    Sim(Box<SimArgs>),
    /// Convert a trace between formats (Lackey text, native binary).
    #[command(after_help = EX_CONVERT)]
    Convert(ConvertArgs),
    /// Run a program and write its trace (native format): references, threads,
    /// processes and address-space system calls (qemu) or references (valgrind).
    #[command(after_help = EX_CAPTURE)]
    Capture(CaptureArgs),
    /// List the TLB presets with their parameters and sources.
    #[command(
        after_help = "Example:\n  pagelab presets\n  pagelab sim --workload gups --tlb skylake"
    )]
    Presets,
    /// List the machine presets (page tables, page sizes, memory, NUMA, struct page),
    /// or show one machine, with --memory and --page-cluster, and what its kernel's
    /// memory takes; or, with --measure, measure this machine's caches and memory and
    /// write a machine file of them.
    #[command(
        after_help = "Example:\n  pagelab machines\n  pagelab machines arm64-64k --memory 64G\n  pagelab machines --measure --out here.toml && pagelab bench --predict --machine here.toml"
    )]
    Machines(MachinesArgs),
    /// List the built-in workloads with their parameters and defaults.
    #[command(
        after_help = "Example:\n  pagelab workloads\n  pagelab sim --workload stride:heap=32M,every=16"
    )]
    Workloads,
    /// Render saved results (study, sim, run, bench, validate) as one self-contained HTML
    /// report that opens with the recommendation; several results are laid side by side.
    #[command(after_help = EX_REPORT)]
    Report(crate::cmd::report::ReportArgs),
    /// Run a real program under chosen page sizes (THP sizes, hugetlb pools), measure it
    /// (time, faults, the kernel's allocations per size, hardware counters) and restore
    /// every setting; --compare runs several configurations against the 4K baseline.
    #[command(after_help = EX_RUN)]
    Run(crate::cmd::run::RunArgs),
    /// Run native microbenchmarks matching the built-in workloads (stride sweep, stream,
    /// gups, chase, fault cost) under each page size; prints tables, writes pagelab.lab/1 JSON.
    #[command(after_help = EX_BENCH)]
    Bench(crate::cmd::bench::BenchArgs),
    /// Runs one benchmark kernel and prints its metrics as one JSON line (used by `bench`).
    #[command(hide = true)]
    BenchChild(crate::cmd::bench::BenchChildArgs),
    /// Hold the model to the kernel: replay the built-in workloads natively under each
    /// multi-size THP setting and in the model's linux-thp policy, compare faults and
    /// per-size allocations, exit non-zero on any disagreement.
    #[command(after_help = EX_VALIDATE)]
    Validate(crate::cmd::validate::ValidateArgs),
    /// Run every source of SWEEP.toml under every configuration, on local processes or a
    /// Dask cluster (through the Python package); writes result.parquet and result.json.
    #[command(
        after_help = "Example:\n  pagelab sweep sweep.toml -o sweep-out --dask tcp://scheduler:8786"
    )]
    Sweep(crate::cmd::sweep::SweepArgs),
    /// Many processes sharing memory (shm-fanout, forkexec or a trace with fork and
    /// exit): page-table memory under private, shared or hugetlb-pmd-share page
    /// tables, and every reverse-map method's cost side by side.
    #[command(
        after_help = "Examples:\n  pagelab sharing --machine ia32-pae --workload shm-fanout:procs=5000,segment=2G\n  pagelab sharing --machine ia32-pae --workload forkexec:procs=64,jobs=1000"
    )]
    Sharing(crate::cmd::sharing::SharingArgs),
    /// Replays one workload at its own addresses and prints a JSON report (used by `validate`).
    #[command(hide = true)]
    ValidateChild(crate::cmd::validate::ValidateChildArgs),
}

/// Options shared by every command that simulates.
#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// The modelled machine: a preset (see `pagelab machines`), `host` (the preset of
    /// this CPU, from /proc/cpuinfo), or a machine file
    /// (TOML: page-table geometry, page sizes, memory and zones, NUMA, struct page,
    /// TLB, and caches and latencies, which time the runs: docs/cost.md). --tlb,
    /// --phys and --memory replace its parts.
    #[arg(long, value_name = "NAME|FILE.toml")]
    pub machine: Option<String>,
    /// Page sizes to simulate, each a power of two from 4K to 1G [default: the
    /// machine's page sizes with --machine, else 4K,8K,16K,32K,64K,128K,256K,2M].
    #[arg(long, value_name = "SIZES")]
    pub page_sizes: Option<String>,
    /// TLB: a preset name (see `pagelab presets`) or a TOML file [default: the
    /// machine's TLB, else weisberg].
    #[arg(long, value_name = "PRESET|FILE")]
    pub tlb: Option<String>,
    /// Virtualisation: nested:host=4K|2M|1G models a guest whose page walks
    /// are two-dimensional under a host of that page size (needs a --machine
    /// with caches and a [nested] section, such as zen4; see docs/cost.md);
    /// nested alone, the machine file's [nested] host_page (2M if none).
    #[arg(long, value_name = "nested[:host=SIZE]", requires = "machine")]
    pub virt: Option<String>,
}

#[derive(Args, Debug)]
pub struct MachinesArgs {
    /// Show only this machine: a preset name or a machine file.
    #[arg(value_name = "NAME|FILE.toml")]
    pub machine: Option<String>,
    /// Physical memory, replacing the machine's (spread evenly over its NUMA nodes).
    #[arg(long, value_name = "SIZE", requires = "machine")]
    pub memory: Option<String>,
    /// Pages governed by one struct page (page clustering), replacing the machine's.
    #[arg(long, value_name = "N", requires = "machine")]
    pub page_cluster: Option<u32>,
    /// Measure this machine: a dependent chase at growing footprints on 2M and on 4K pages
    /// gives the caches' sizes and latencies as a core sees them, and memory's; the
    /// machine file written keeps everything else of --base (docs/cost.md).
    #[arg(long, conflicts_with_all = ["machine", "memory", "page_cluster"])]
    pub measure: bool,
    /// The preset the measured machine starts from (TLBs, walk caches, nested paging,
    /// the L1's latency in cycles, which sets the clock): `host` is this CPU's preset.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "host",
        requires = "measure"
    )]
    pub base: String,
    /// Where --measure writes the machine file.
    #[arg(
        long,
        short = 'o',
        value_name = "FILE.toml",
        default_value = "measured.toml",
        requires = "measure"
    )]
    pub out: PathBuf,
    /// The largest footprint --measure chases.
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "256M",
        requires = "measure"
    )]
    pub max: String,
    /// Runs at each footprint and page size; the fastest counts.
    #[arg(long, value_name = "N", default_value_t = 3, requires = "measure")]
    pub repeat: u32,
    /// Skip the host's block translations (a guest's: 4K pages drawn from pools of 16M to
    /// 8G, as root, about a minute): the file then models none.
    #[arg(long, requires = "measure")]
    pub no_blocks: bool,
}

#[derive(Args, Debug)]
pub struct StudyArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub rule: crate::cmd::report::RuleArgs,
    /// Directory for result.json, result.csv, study.svg and report.html.
    #[arg(long, short = 'o', default_value = "pagelab-study")]
    pub out: PathBuf,
    /// Workloads to study, as NAME[:key=value,...]; the default set when none is given.
    #[arg(value_name = "WORKLOAD")]
    pub workloads: Vec<String>,
    #[command(flatten)]
    pub program: ProgramArgs,
    #[command(flatten)]
    pub layout: LayoutArgs,
    #[command(flatten)]
    pub window: WindowArgs,
}

/// Which address-space layout a captured program is modelled in.
#[derive(Args, Debug, Clone, Default)]
pub struct LayoutArgs {
    /// Address-space layout of a program captured with `-- PROGRAM`: linux
    /// (each mapping placed as Linux places it without randomisation, as
    /// under `setarch -R`, and the trace relocated there; the default with
    /// the qemu backend) or captured (the addresses QEMU gave it; the
    /// default otherwise). Trace files and workloads keep their addresses.
    /// See docs/layout.md.
    #[arg(long, value_name = "LAYOUT")]
    pub layout: Option<String>,
}

#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Trace file to read (`-` for standard input); Lackey text (optionally zstd/xz) or native.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "workload",
        required_unless_present_any = ["workload", "program"]
    )]
    pub trace: Option<String>,
    /// Built-in workload, as NAME[:key=value,...] (see `pagelab workloads`).
    #[arg(long, value_name = "SPEC")]
    pub workload: Option<String>,
    /// Trace format, overriding detection: lackey or native.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<String>,
    /// Write the result as JSON (schema pagelab.sim/1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the result as CSV.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write the plot of TLB misses and memory per page size as SVG.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Write the self-contained HTML report (the answer, interactive plots, tables).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[command(flatten)]
    pub rule: crate::cmd::report::RuleArgs,
    /// Run the memory-management model under this policy instead of the fixed-size
    /// study; repeat to compare several side by side in one pass. The policies:
    /// base:SIZE (fixed base pages, 4K..256K);
    /// linux-thp[:enabled=always|madvise|never,SIZE=always|madvise|never|inherit,use_zero_page=0|1]
    /// (Linux THP with multi-size THP);
    /// eager[:sizes=SIZE,...] (largest fitting page at first touch);
    /// explicit (the page order each region asked for);
    /// reservation[:max=2M] (reserve, populate, promote: Navarro et al., GISP);
    /// relocation[:size=2M,max_ptes_none=N|threshold=P%,scan=N,budget=N] (base pages,
    /// then a khugepaged-like scanner copies populated extents into superpages).
    /// See docs/policies.md.
    #[arg(long, value_name = "POLICY")]
    pub policy: Vec<String>,
    /// Physical memory of the modelled machine (with --policy); default 4G, or
    /// the `memory` of --phys.
    // The options of the policy model need a --policy: without one the study
    // runs, which has no physical memory, and would ignore them silently.
    #[arg(long, value_name = "SIZE", requires = "policy")]
    pub memory: Option<String>,
    /// Physical memory layout as TOML (with --policy): memory, max_order, dma32,
    /// a large-page zone reserved at boot, zone fallback; see configs/phys/.
    #[arg(long, value_name = "FILE.toml", requires = "policy")]
    pub phys: Option<PathBuf>,
    /// Pages governed by one struct page (page clustering; with --machine and
    /// --policy): mem_map shrinks by this factor.
    #[arg(long, value_name = "N", requires_all = ["machine", "policy"])]
    pub page_cluster: Option<u32>,
    /// Keep a 32-bit kernel's level-1 page tables in high memory (CONFIG_HIGHPTE;
    /// with --machine and --policy), out of low memory.
    #[arg(long, requires_all = ["machine", "policy"])]
    pub highpte: bool,
    /// Keep TLB entries across process switches, tagged with N address-space
    /// IDs handed out round-robin as Linux does on x86 (which uses 6); by
    /// default every switch flushes the TLB (with --policy).
    #[arg(long, value_name = "N", requires = "policy", value_parser = clap::value_parser!(u32).range(1..))]
    pub asids: Option<u32>,
    /// Bind processes to these CPUs, like taskset: `0`, `0-3`, `0,4` (with
    /// --machine and --policy, on a machine of several NUMA nodes). They are
    /// placed on the list's CPUs round-robin in the order they first run;
    /// without --bind, on every CPU of the machine.
    #[arg(long, value_name = "CPUS", requires_all = ["machine", "policy"])]
    pub bind: Option<String>,
    /// The memory policy of every process on a machine of several NUMA nodes
    /// (with --machine and --policy): local (the default: the local node
    /// first, then the others upward), membind:NODES, interleave:NODES or
    /// preferred:NODE, as numactl's; NODES like 0,2 or 0-3 or all.
    #[arg(long, value_name = "POLICY", requires_all = ["machine", "policy"])]
    pub mempolicy: Option<String>,
    /// Per-CPU hot and cold page lists (with --machine and --policy),
    /// replacing the machine's `[pcp]`: on (the machine's lists, or the
    /// paper's: batch 16, hot 32-96, cold 0-32 pages), off, or any of
    /// batch=N,hot=LOW-HIGH,cold=LOW-HIGH. Counted in each run's `pcp`.
    #[arg(long, value_name = "SPEC", requires_all = ["machine", "policy"])]
    pub pcp: Option<String>,
    /// Stop at the first contradictory event (unmap of nothing, a reference outside
    /// every VMA in a trace with map events) instead of counting it (with --policy).
    #[arg(long, requires = "policy")]
    pub strict: bool,
    /// Copy-on-write of a shared private superpage (with --policy): whole (copy the
    /// whole page, as Linux) or base (split the writer's mapping, copy the base page).
    #[arg(
        long,
        value_name = "MODE",
        default_value = "whole",
        requires = "policy"
    )]
    pub cow: String,
    /// File-backed faults as Linux takes them (with --policy): the page cache holds
    /// every file before the run (warm) or none (cold: a miss reads the 128K around
    /// it and is a major fault), and each read fault maps the cached pages of its
    /// fault-around window (--fault-around, 64K by default). Without either flag
    /// each file fault maps its own page and reads it.
    #[arg(long, value_name = "warm|cold", requires = "policy")]
    pub page_cache: Option<String>,
    /// Linux's fault_around_bytes for --page-cache (with --policy): 4K turns
    /// fault-around off.
    #[arg(long, value_name = "SIZE", requires = "policy")]
    pub fault_around: Option<String>,
    #[command(flatten)]
    pub program: ProgramArgs,
    #[command(flatten)]
    pub layout: LayoutArgs,
    #[command(flatten)]
    pub window: WindowArgs,
}

/// A program to capture and simulate on the fly: `-- PROGRAM ARGS...`.
#[derive(Args, Debug, Clone)]
pub struct ProgramArgs {
    /// Capture backend for `-- PROGRAM`: qemu (references, threads, processes,
    /// mappings) or valgrind (Lackey: references only).
    #[arg(long, value_name = "BACKEND", default_value = "qemu")]
    pub backend: String,
    /// The program to run and its arguments, after `--`.
    #[arg(last = true, value_name = "PROGRAM")]
    pub program: Vec<std::ffi::OsString>,
}

/// A window of the input, in references.
#[derive(Args, Debug, Clone, Default)]
pub struct WindowArgs {
    /// Skip this many references first (other events still apply).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub skip: u64,
    /// Stop after this many references.
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
}

#[derive(Args, Debug)]
pub struct CaptureArgs {
    /// Output trace, native format (`-` for standard output; the program's own
    /// standard output then goes to standard error).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: String,
    #[command(flatten)]
    pub program: ProgramArgs,
    #[command(flatten)]
    pub window: WindowArgs,
}

#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// Input trace (`-` for standard input), any readable format.
    pub input: String,
    /// Output trace (`-` for standard output).
    pub output: String,
    /// Input format, overriding detection: lackey or native.
    #[arg(long, value_name = "FORMAT")]
    pub from: Option<String>,
    /// Output format: lackey or native. Default: lackey when OUTPUT ends in .txt, .lackey,
    /// .lackey.zst or .txt.zst, native otherwise.
    #[arg(long, value_name = "FORMAT")]
    pub to: Option<String>,
    /// A native output's page index is made for studies with this TLB (a preset name or
    /// a TOML file): they read it instead of decoding every record. Default: weisberg,
    /// the study's default, whose index also serves skylake and emeraldrapids.
    #[arg(long, value_name = "TLB", conflicts_with = "no_page_index")]
    pub page_index_tlb: Option<String>,
    /// Write a native output without its page index (a smaller file; every study
    /// decodes its records).
    #[arg(long)]
    pub no_page_index: bool,
}

const EX_STUDY: &str =
    "The answer is the last lines printed; open pagelab-study/report.html for the plots.

Examples:
  pagelab study                                   # the default workloads; writes pagelab-study/
  pagelab study --page-sizes 4K,16K,64K,2M gups:table=64M stride:heap=32M
  pagelab study --max-memory-growth 10% -- xz -3 -c big.tar";

const EX_SIM: &str = "Examples:
  pagelab sim --trace prog.lackey.zst --html report.html
  pagelab sim --workload gups:table=16M --memory 1G --policy base:4K --policy reservation --policy linux-thp:enabled=always";

const EX_CONVERT: &str = "Examples:
  pagelab convert prog.lackey.zst prog.trace      # Lackey text to the native format
  pagelab convert prog.trace zen4.trace --page-index-tlb zen4   # a page index for zen4 studies";

const EX_CAPTURE: &str = "Example:
  pagelab capture -o gzip.trace -- gzip -9 -c /etc/services";

const EX_REPORT: &str = "Examples:
  pagelab report pagelab-study/result.json -o study.html
  pagelab report before.json after.json -o compare.html   # side by side";

const EX_RUN: &str = "Example:
  sudo pagelab run --compare 64K --compare 2M --repeat 5 --html run.html -- ./myprog args";

const EX_BENCH: &str = "Example:
  sudo pagelab bench --quick --json bench.json --html bench.html";

const EX_VALIDATE: &str = "Example:
  sudo pagelab validate --pages 64K --pages 16K,2M --html validate.html";
