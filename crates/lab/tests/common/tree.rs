//! A fake kernel tree for the tests that need no root: `/sys/kernel/mm`, `/proc` and a state
//! directory shaped like this machine's.

use pagelab_lab::sysfs::Sysfs;
use std::fs;
use std::path::{Path, PathBuf};

/// The THP sizes of the fake tree, in kB.
pub const THP_KB: [u64; 8] = [16, 32, 64, 128, 256, 512, 1024, 2048];

/// A fake `/sys/kernel/mm`, state directory and `/proc` shaped like this machine's.
pub fn fake_tree(root: &Path) -> Sysfs {
    let mm = root.join("mm");
    let thp = mm.join("transparent_hugepage");
    let put = |p: PathBuf, text: &str| {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    };
    put(thp.join("enabled"), "always [madvise] never\n");
    put(
        thp.join("defrag"),
        "always defer defer+madvise [madvise] never\n",
    );
    put(thp.join("use_zero_page"), "1\n");
    for kb in THP_KB {
        let v = if kb == 2048 {
            "always [inherit] madvise never\n"
        } else {
            "always inherit madvise [never]\n"
        };
        put(thp.join(format!("hugepages-{kb}kB/enabled")), v);
    }
    put(
        thp.join("hugepages-8kB/shmem_enabled"),
        "always inherit within_size advise [never] deny force\n",
    );
    for kb in [2048, 1048576] {
        put(
            mm.join(format!("hugepages/hugepages-{kb}kB/nr_hugepages")),
            "0\n",
        );
    }
    let proc = root.join("proc");
    put(proc.join("sys/vm/compact_memory"), "");
    put(proc.join("sys/kernel/osrelease"), "6.18.0-fake\n");
    put(
        proc.join("meminfo"),
        "MemTotal:       24000000 kB\nMemFree: 1 kB\n",
    );
    put(
        proc.join("cpuinfo"),
        "processor\t: 0\nmodel name\t: Fake CPU\nflags\t\t: fpu hypervisor\n\nprocessor\t: 1\nmodel name\t: Fake CPU\n",
    );
    Sysfs::at(mm, root.join("state"), proc)
}
