//! `open` and `convert` on files: compression and format detection, and the
//! Lackey -> native -> Lackey round trip on a real Lackey trace.

use pagelab_core::{AccessKind, Event, MemRef, VirtAddr};
use pagelab_trace::{convert, open, Format, TraceError, TraceSource};
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

/// A fresh scratch directory for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pagelab-trace-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn path(dir: &std::path::Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_string()
}

fn drain(src: &mut dyn TraceSource) -> Result<Vec<Event>, TraceError> {
    let mut out = Vec::new();
    while src.fill(&mut out, 4096)? {}
    Ok(out)
}

const TEXT: &str =
    "==1== Lackey\nI  0401ab70,3\n S 1fff000758,8\n L 04000b20,4\n M 7ff0001234,16\n";

fn expected() -> Vec<Event> {
    vec![
        Event::Ref(MemRef {
            addr: VirtAddr(0x0401ab70),
            size: 3,
            kind: AccessKind::Instr,
        }),
        Event::Ref(MemRef {
            addr: VirtAddr(0x1fff000758),
            size: 8,
            kind: AccessKind::Store,
        }),
        Event::Ref(MemRef {
            addr: VirtAddr(0x04000b20),
            size: 4,
            kind: AccessKind::Load,
        }),
        Event::Ref(MemRef {
            addr: VirtAddr(0x7ff0001234),
            size: 16,
            kind: AccessKind::Modify,
        }),
    ]
}

#[test]
fn opens_plain_zstd_and_xz_lackey_and_native() {
    let dir = scratch("open");
    let plain = path(&dir, "t.lackey");
    std::fs::write(&plain, TEXT).unwrap();
    let zst = path(&dir, "t.lackey.zst");
    std::fs::write(&zst, zstd::encode_all(TEXT.as_bytes(), 3).unwrap()).unwrap();
    let xz = path(&dir, "t.lackey.xz");
    let mut enc = liblzma::write::XzEncoder::new(Vec::new(), 6);
    enc.write_all(TEXT.as_bytes()).unwrap();
    std::fs::write(&xz, enc.finish().unwrap()).unwrap();
    let native = path(&dir, "t.pgl");
    let stats = convert(&mut *open(&plain, None).unwrap(), &native, Format::Native).unwrap();
    assert_eq!((stats.events, stats.dropped), (4, 0));

    for (p, kind, compression) in [
        (&plain, "lackey", None),
        (&zst, "lackey", Some("zstd")),
        (&xz, "lackey", Some("xz")),
        (&native, "native", None),
    ] {
        let mut src = open(p, None).unwrap();
        let info = src.info();
        assert_eq!(info.kind, kind, "{p}");
        assert_eq!(info.name, *p);
        assert_eq!(info.compression.as_deref(), compression, "{p}");
        assert_eq!(drain(&mut *src).unwrap(), expected(), "{p}");
    }

    // A native trace compressed again is still read.
    let native_zst = path(&dir, "t.pgl.zst");
    let bytes = std::fs::read(&native).unwrap();
    std::fs::write(&native_zst, zstd::encode_all(&bytes[..], 3).unwrap()).unwrap();
    let mut src = open(&native_zst, None).unwrap();
    assert_eq!(
        (src.info().kind.as_str(), src.info().compression.as_deref()),
        ("native", Some("zstd"))
    );
    assert_eq!(drain(&mut *src).unwrap(), expected());

    // The format can be forced: a native file read as Lackey is a parse error on line 1.
    let err = drain(&mut *open(&native, Some(Format::Lackey)).unwrap()).unwrap_err();
    assert!(matches!(err, TraceError::Parse { line: 1, .. }), "{err}");
    let err = drain(&mut *open(&plain, Some(Format::Native)).unwrap()).unwrap_err();
    assert!(
        matches!(err, TraceError::Corrupt { offset: 0, .. }),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A plain file (read in place) and the same bytes on a pipe (read into a
/// buffer) give the same events and the same error, empty or unterminated.
#[test]
fn plain_file_and_pipe_agree() {
    let dir = scratch("mapped");
    let cases = [
        String::new(),
        TEXT.to_string(),
        TEXT.trim_end().to_string(),
        TEXT.repeat(50_000),
        TEXT.repeat(50_000) + "I  10,zz\n" + TEXT,
        TEXT.repeat(50_000) + " L 10,",
    ];
    for (i, text) in cases.iter().enumerate() {
        let p = path(&dir, &format!("{i}.lackey"));
        std::fs::write(&p, text).unwrap();
        let mut file = open(&p, None).unwrap();
        assert_eq!(file.info().kind, "lackey");
        let mut pipe = pagelab_trace::LackeyReader::new(text.as_bytes(), p.as_str());
        let (a, b) = (drain(&mut *file), drain(&mut pipe));
        match (a, b) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{i}"),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{i}"),
            (a, b) => panic!("{i}: {a:?} / {b:?}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn errors_name_the_input() {
    let err = open("/nonexistent/trace.lackey", None).err().unwrap();
    assert!(
        err.to_string().starts_with("/nonexistent/trace.lackey: "),
        "{err}"
    );
    let err = "text".parse::<Format>().unwrap_err().to_string();
    assert!(
        err.contains("`lackey`") && err.contains("`native`"),
        "{err}"
    );
    assert_eq!("native".parse::<Format>().unwrap(), Format::Native);
    assert_eq!(Format::Lackey.to_string(), "lackey");
}

#[test]
fn convert_to_compressed_lackey() {
    let dir = scratch("zst");
    let plain = path(&dir, "t.lackey");
    std::fs::write(&plain, TEXT).unwrap();
    let out = path(&dir, "out.lackey.zst");
    convert(&mut *open(&plain, None).unwrap(), &out, Format::Lackey).unwrap();
    let text = zstd::decode_all(&std::fs::read(&out).unwrap()[..]).unwrap();
    assert_eq!(
        String::from_utf8(text).unwrap(),
        TEXT.trim_start_matches("==1== Lackey\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Lackey's own output, with Valgrind's lines removed, survives
/// Lackey -> native -> Lackey byte for byte.
#[test]
fn real_lackey_trace_round_trips_byte_exact() {
    let out = Command::new("sh")
        .arg("-c")
        .arg("valgrind --tool=lackey --trace-mem=yes --log-fd=3 /bin/true 3>&1 >/dev/null 2>/dev/null")
        .output();
    let text = match out {
        Ok(o) if o.status.success() && !o.stdout.is_empty() => o.stdout,
        _ => {
            println!("skipped: valgrind (with lackey) is not available");
            return;
        }
    };
    let dir = scratch("valgrind");
    let lackey = path(&dir, "true.lackey");
    std::fs::write(&lackey, &text).unwrap();
    let native = path(&dir, "true.pgl");
    let back = path(&dir, "back.lackey");
    let n = convert(&mut *open(&lackey, None).unwrap(), &native, Format::Native).unwrap();
    assert!(n.events > 10_000, "a real trace has many references: {n:?}");
    let m = convert(&mut *open(&native, None).unwrap(), &back, Format::Lackey).unwrap();
    assert_eq!(n.events, m.events);
    let records: Vec<u8> = text
        .split_inclusive(|&b| b == b'\n')
        .filter(|line| !line.starts_with(b"=="))
        .flatten()
        .copied()
        .collect();
    assert!(
        std::fs::read(&back).unwrap() == records,
        "round trip is not byte-exact"
    );
    let native_len = std::fs::metadata(&native).unwrap().len();
    println!(
        "{} references: {} bytes of Lackey, {native_len} bytes native",
        n.events,
        records.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
