//! The throughput benchmark's traces: the bundled gzip trace repeated, and Lackey traces
//! of installed programs made once and cached (see the benchmark's own comment).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The gzip trace of `tests/data`, repeated `repeat` times into one file
/// written in large writes (the page cache may hold it in larger folios,
/// which `wc -l` reads markedly faster than a file Valgrind wrote).
fn gzip_input(dir: &Path, repeat: usize) -> PathBuf {
    let text = zstd_decode(&repo().join("tests/data/gzip-9.lackey.zst"));
    let path = dir.join("gzip.lackey");
    let mut f = std::fs::File::create(&path).unwrap();
    for _ in 0..repeat {
        f.write_all(&text).unwrap();
    }
    path
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The directory the generated traces are cached in: `bench-traces` in the
/// target directory (this executable is `<target>/<profile>/deps/throughput-*`).
fn cache_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).map(Path::to_path_buf);
    let dir = target
        .unwrap_or_else(std::env::temp_dir)
        .join("bench-traces");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Lines kept of each generated trace (Valgrind's few own lines included).
const TRACE_LINES: u64 = 45_000_000;

/// A Lackey trace of `program args`, its first [`TRACE_LINES`] lines, made
/// once into `cache/name.lackey` (written to a temporary name and renamed,
/// so an interrupted run leaves no short trace behind). `None` with a word
/// on stderr if the program or Valgrind is missing or the trace is empty.
fn lackey_trace(cache: &Path, name: &str, program: &str, args: &[&str]) -> Option<PathBuf> {
    let path = cache.join(format!("{name}.lackey"));
    if path.exists() {
        return Some(path);
    }
    for tool in ["valgrind", program] {
        let found = Command::new("sh")
            .args(["-c", "command -v \"$1\"", "sh", tool])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            eprintln!("trace {name}: {tool} is not installed (scripts/setup.sh installs valgrind); skipped");
            return None;
        }
    }
    eprintln!("trace {name}: making it with valgrind --tool=lackey (a few minutes, once)");
    let tmp = cache.join(format!("{name}.lackey.part"));
    let fifo = cache.join(format!("{name}.fifo"));
    let _ = std::fs::remove_file(&fifo);
    // Valgrind writes the trace to fd 3, a pipe that `head` reads; once
    // `head` has its lines (at a line's end), Valgrind is ended: it would
    // otherwise run the program to its end with every write failing.
    let script = format!(
        "mkfifo '{f}' && {{ valgrind --tool=lackey --trace-mem=yes --log-fd=3 \"$@\" 3>'{f}' >/dev/null 2>/dev/null & v=$!; head -n {TRACE_LINES} < '{f}' > '{t}'; kill -9 $v 2>/dev/null; wait $v; rm -f '{f}'; }}",
        f = fifo.display(),
        t = tmp.display()
    );
    let status = Command::new("sh")
        .args(["-c", &script, "sh", program])
        .args(args)
        .status()
        .unwrap();
    let len = std::fs::metadata(&tmp).map_or(0, |m| m.len());
    if !status.success() || len < 1 << 20 {
        eprintln!("trace {name}: valgrind gave {len} bytes ({status}); skipped");
        let _ = std::fs::remove_file(&tmp);
        return None;
    }
    std::fs::rename(&tmp, &path).unwrap();
    Some(path)
}

/// The traces of the benchmark, by name: gzip always; the others made from
/// installed programs (see the module's comment).
pub(crate) fn inputs(
    dir: &Path,
    repeat: usize,
    wanted: &dyn Fn(&str) -> bool,
) -> Vec<(String, PathBuf)> {
    let cache = cache_dir();
    let mut out = vec![];
    if wanted("gzip") {
        out.push(("gzip".to_string(), gzip_input(dir, repeat)));
    }
    if wanted("xz") {
        // The compressor's input: the first 40 KB of the gzip trace's text
        // (`xz -9` has a 64 MiB window; its match finder's tables are spread
        // over many pages whatever the input).
        let input = cache.join("xz-input.txt");
        if !input.exists() {
            let text = zstd_decode(&repo().join("tests/data/gzip-9.lackey.zst"));
            std::fs::write(&input, &text[..40_000]).unwrap();
        }
        let input = input.to_str().unwrap().to_string();
        if let Some(p) = lackey_trace(&cache, "xz", "xz", &["-9", "-c", &input]) {
            out.push(("xz -9".to_string(), p));
        }
    }
    if wanted("python") {
        let script = cache.join("python-script.py");
        std::fs::write(&script, PYTHON_SCRIPT).unwrap();
        let script = script.to_str().unwrap().to_string();
        // The interpreter itself: `python3` may be a wrapper script (pyenv's
        // shims), whose trace would be of the shell running it.
        let python = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "python3".to_string());
        if let Some(p) = lackey_trace(&cache, "python", &python, &["-S", &script]) {
            out.push(("python3".to_string(), p));
        }
    }
    if wanted("cc1") {
        // cc1 itself (not the gcc driver, which Valgrind would follow only
        // with --trace-children=yes), on a preprocessed file of this repository.
        let cc1 = Command::new("gcc").arg("-print-prog-name=cc1").output();
        let cc1 = cc1
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        let pre = cache.join("cc1-input.i");
        let shim = repo().join("capture/shim/pagelab_shim.c");
        let made = pre.exists()
            || Command::new("gcc")
                .arg("-E")
                .arg(&shim)
                .arg("-o")
                .arg(&pre)
                .status()
                .is_ok_and(|s| s.success());
        match cc1 {
            Some(cc1) if made => {
                let pre = pre.to_str().unwrap().to_string();
                let args = ["-fpreprocessed", "-quiet", "-O2", &pre, "-o", "/dev/null"];
                if let Some(p) = lackey_trace(&cache, "cc1", &cc1, &args) {
                    out.push(("cc1 -O2".to_string(), p));
                }
            }
            _ => eprintln!("trace cc1: gcc is not installed; skipped"),
        }
    }
    out
}

/// The interpreter's script: a dictionary, a regular expression and a sort.
const PYTHON_SCRIPT: &str = "import re
words = {}
for i in range(20000):
    w = format(i * 2654435761 % 1000003, 'x')
    words[w] = words.get(w, 0) + len(re.findall('[0-9]', w))
print(sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))[:3])
";

/// The bytes of the zstd-compressed file at `path`, through the `zstd` program.
fn zstd_decode(path: &Path) -> Vec<u8> {
    let out = Command::new("zstd")
        .arg("-dc")
        .arg(path)
        .output()
        .expect("zstd is installed by scripts/setup.sh");
    assert!(out.status.success(), "zstd -dc {} failed", path.display());
    out.stdout
}
