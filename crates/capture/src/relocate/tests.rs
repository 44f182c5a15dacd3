use super::*;
use crate::elf::{ElfKind, Segment};
use crate::layout::{ExecRequest, LayoutParams};
use pagelab_core::{AccessKind, FileIdentity, MemRef, Prot, ThreadId};

fn image() -> ElfImage {
    ElfImage {
        path: "prog".into(),
        kind: ElfKind::Dyn,
        entry: 0x1000,
        loads: vec![Segment {
            offset: 0,
            vaddr: 0,
            filesz: 0x1800,
            memsz: 0x3000,
            align: PAGE,
            prot: Prot(Prot::READ | Prot::WRITE),
        }],
        interp: None,
    }
}

/// The test program's file, and an interpreter's.
const PROG: FileIdentity = FileIdentity { dev: 8, ino: 100 };
const LD: FileIdentity = FileIdentity { dev: 8, ino: 200 };

fn files(interp: Option<FileIdentity>) -> ImageFiles {
    ImageFiles {
        program: PROG,
        interp,
    }
}

/// `exe` (with `interp`) laid out by Linux's rules, and where the
/// capture placed it: the program at 0x40_0000_0000, the interpreter
/// at 0x40_1000_0000.
fn laid_out(exe: &ElfImage, interp: Option<&ElfImage>) -> (LinuxLayout, ExecLayout, CapturedImage) {
    let req = ExecRequest {
        program: exe,
        interp,
        strings: 100,
    };
    let (layout, model) = LinuxLayout::exec(LayoutParams::default(), &req).unwrap();
    let captured = CapturedImage {
        program_bias: 0x40_0000_0000,
        interp_bias: interp.map(|_| 0x40_1000_0000),
        stack: (0x40_0100_0000, 0x40_0180_0000),
        qemu_own: Vec::new(),
    };
    (layout, model, captured)
}

fn reloc() -> (Relocator, ExecLayout) {
    let (layout, model, captured) = laid_out(&image(), None);
    let r = Relocator::new(layout, &model, None, &captured, &files(None)).unwrap();
    (r, model)
}

fn run(r: &mut Relocator, evs: Vec<Event>) -> Result<Vec<Event>, RelocateError> {
    let mut out = Vec::new();
    for e in evs {
        r.apply(e, &mut out)?;
    }
    Ok(out)
}

fn at(addr: u64) -> Event {
    Event::Ref(MemRef {
        addr: VirtAddr(addr),
        size: 8,
        kind: AccessKind::Load,
    })
}

/// An mmap the capture placed at `start`, with no hint unless fixed.
fn anon(start: u64, len: u64, flags: u32) -> [Event; 2] {
    let req = MapRequest {
        hint: VirtAddr(if flags & MapRequest::FIXED != 0 {
            start
        } else {
            0
        }),
        len,
        prot: Prot(3),
        flags: MapRequest::PRIVATE | MapRequest::ANONYMOUS | flags,
        file: None,
        offset: 0,
    };
    [
        Event::MapRequest(Box::new(req)),
        Event::Map(Box::new(MapEvent {
            start: VirtAddr(start),
            len,
            prot: Prot(3),
            backing: Backing::Anon,
            sharing: Sharing::Private,
        })),
    ]
}

#[test]
fn program_stack_break_and_mmaps_move_to_the_model() {
    let (mut r, model) = reloc();
    let bias = model.load_bias;
    let mut evs = vec![Event::Switch(ThreadId { pid: 7, tid: 7 })];
    evs.push(at(0x40_0000_1008)); // program
    evs.push(at(0x40_017f_fff0)); // stack, 16 bytes below its top
    evs.push(Event::Brk {
        end: VirtAddr(0x40_0000_3000),
    });
    evs.push(Event::Brk {
        end: VirtAddr(0x40_0002_3000),
    });
    evs.push(at(0x40_0001_0000)); // heap
    let [q, m] = anon(0x40_0800_0000, 2 << 20, 0);
    evs.extend([q, m, at(0x40_0810_0000)]);
    let [q, m] = anon(0x40_0800_1000, PAGE, MapRequest::FIXED);
    evs.extend([q, m]);
    let out = run(&mut r, evs).unwrap();
    let refs: Vec<u64> = out
        .iter()
        .filter_map(|e| match e {
            Event::Ref(m) => Some(m.addr.0),
            _ => None,
        })
        .collect();
    // The program (a static PIE here) and the vDSO lie just below
    // mmap_base; a 4M search below them, then its 2M boundary.
    let thp = 0x7fff_f7c0_0000;
    assert_eq!(
        refs,
        [
            bias + 0x1008,
            STACK_TOP - 16,
            model.start_brk.0 + 0xd000,
            thp + 0x10_0000
        ]
    );
    let maps: Vec<u64> = out
        .iter()
        .filter_map(|e| match e {
            Event::Map(m) => Some(m.start.0),
            _ => None,
        })
        .collect();
    // First the image's own (the initial stack: one page of strings and
    // 128K below them; the segment and its bss), then the 2M one on a 2M
    // boundary below the vDSO, and the fixed one inside it.
    let image: Vec<u64> = image_maps_of(&model, (1, 0)).map(|m| m.start.0).collect();
    assert_eq!(image, [STACK_TOP - 0x21000, bias, bias + 0x2000]);
    assert_eq!(maps[3..], [thp, thp + 0x1000]);
    assert_eq!(maps[..3], image);
    assert!(out.contains(&Event::Brk {
        end: VirtAddr(model.start_brk.0 + 0x2_0000)
    }));
}

#[test]
fn ranges_are_cut_at_mapping_boundaries_and_unknown_addresses_refused() {
    let (mut r, model) = reloc();
    let mut evs = vec![Event::Switch(ThreadId { pid: 7, tid: 7 })];
    evs.push(Event::Brk {
        end: VirtAddr(0x40_0000_3000),
    });
    evs.push(Event::Brk {
        end: VirtAddr(0x40_0000_5000),
    });
    // One captured range over the program and its break: two pieces.
    evs.push(Event::Protect {
        start: VirtAddr(0x40_0000_2000),
        len: 0x2000,
        prot: Prot(1),
    });
    let out = run(&mut r, evs).unwrap();
    let cut: Vec<(u64, u64)> = out
        .iter()
        .filter_map(|e| match e {
            Event::Protect { start, len, .. } => Some((start.0, *len)),
            _ => None,
        })
        .collect();
    assert_eq!(
        cut,
        [
            (model.load_bias + 0x2000, 0x1000),
            (model.start_brk.0, 0x1000)
        ]
    );
    let e = run(&mut r, vec![at(0x50_0000_0000)]).unwrap_err();
    assert_eq!(e.index, 4);
    assert!(e.what.contains("0x5000000000 lies in no mapping"), "{e}");
    let e = run(&mut r, vec![Event::Exec(None)]).unwrap_err();
    assert!(e.what.contains("execs"), "{e}");
}

#[test]
fn mremap_grows_in_place_when_the_model_has_room_else_moves() {
    let (mut r, model) = reloc();
    let mut evs = vec![Event::Switch(ThreadId { pid: 7, tid: 7 })];
    evs.extend(anon(0x40_0900_0000, 0x4000, 0));
    // Grown in place by the capture: a Map right after the old end.
    let [_, grow] = anon(0x40_0900_4000, 0x2000, 0);
    evs.push(grow);
    let out = run(&mut r, evs).unwrap();
    let maps: Vec<(u64, u64)> = out
        .iter()
        .filter_map(|e| match e {
            Event::Map(m) => Some((m.start.0, m.len)),
            _ => None,
        })
        .skip(image_maps_of(&model, (1, 0)).count())
        .collect();
    // The first is topmost below the vDSO, so nothing lies right after
    // it but the vDSO: the model has no room and moves the growth.
    assert_eq!(maps.len(), 2);
    assert_ne!(maps[1].0, maps[0].0 + maps[0].1);
    assert_eq!(maps[1], (maps[0].0 - 0x2000, 0x2000));
}

#[test]
fn the_image_is_mapped_from_its_files_after_the_first_switch() {
    // A program with a text and a data segment (bss past it) and an
    // interpreter: its map events say which file and offset each page of
    // code and data comes from, so the model's file faults (and
    // fault-around) see them; the bss is anonymous; nothing else is mapped.
    let seg = |offset, vaddr, filesz, memsz, prot| Segment {
        offset,
        vaddr,
        filesz,
        memsz,
        align: PAGE,
        prot: Prot(prot),
    };
    let exe = ElfImage {
        path: "prog".into(),
        kind: ElfKind::Dyn,
        entry: 0x1000,
        loads: vec![
            seg(0, 0, 0x5000, 0x5000, Prot::READ | Prot::EXEC),
            seg(0x5010, 0x6010, 0x100, 0x3000, Prot::READ | Prot::WRITE),
        ],
        interp: Some("ld.so".into()),
    };
    let ld = ElfImage {
        path: "ld.so".into(),
        interp: None,
        loads: vec![seg(0, 0, 0x2000, 0x2000, Prot::READ | Prot::EXEC)],
        ..image()
    };
    let (layout, model, captured) = laid_out(&exe, Some(&ld));
    let mut r = Relocator::new(layout, &model, Some(&ld), &captured, &files(Some(LD))).unwrap();
    let sw = Event::Switch(ThreadId { pid: 7, tid: 7 });
    let out = run(&mut r, vec![sw.clone(), at(0x40_0000_1008), sw.clone()]).unwrap();
    let (b, ib) = (model.load_bias, model.interp_bias);
    let file = |id, offset| Backing::File {
        file_id: id,
        offset,
    };
    let want = [
        // The initial stack: the strings' page and 128K, anonymous.
        (
            STACK_TOP - 0x21000,
            0x21000,
            Backing::Anon,
            Prot::READ | Prot::WRITE,
        ),
        (b, 0x5000, file(1, 0), Prot::READ | Prot::EXEC),
        (
            b + 0x6000,
            0x1000,
            file(1, 0x5000),
            Prot::READ | Prot::WRITE,
        ),
        (b + 0x7000, 0x3000, Backing::Anon, Prot::READ | Prot::WRITE),
        (ib, 0x2000, file(2, 0), Prot::READ | Prot::EXEC),
    ];
    assert_eq!(out[0], sw);
    assert_eq!(out.len(), 1 + want.len() + 2, "{out:?}");
    for (e, &(start, len, backing, prot)) in out[1..].iter().zip(&want) {
        let Event::Map(m) = e else {
            panic!("{e:?} where a map of the image was due")
        };
        assert_eq!(
            **m,
            MapEvent {
                start: VirtAddr(start),
                len,
                prot: Prot(prot),
                backing,
                sharing: Sharing::Private,
            }
        );
    }
    // A reference into the text lands in the first map; the second switch
    // maps nothing again.
    assert_eq!(out[1 + want.len()], at(b + 0x1008));
    assert_eq!(out[2 + want.len()], sw);
}

/// An mmap of `file` (the capture's id `captured_id`) placed at `start`.
fn file_map(start: u64, file: FileIdentity, captured_id: u64) -> [Event; 2] {
    let [Event::MapRequest(mut req), Event::Map(mut m)] = anon(start, 0x2000, 0) else {
        unreachable!("anon gives a request and a map")
    };
    req.flags = MapRequest::PRIVATE;
    req.file = Some(file);
    m.backing = Backing::File {
        file_id: captured_id,
        offset: 0,
    };
    [Event::MapRequest(req), Event::Map(m)]
}

fn file_ids(out: &[Event]) -> Vec<u64> {
    out.iter()
        .filter_map(|e| match e {
            Event::Map(m) => match m.backing {
                Backing::File { file_id, .. } => Some(file_id),
                Backing::Anon => None,
            },
            _ => None,
        })
        .collect()
}

#[test]
fn a_file_has_one_id_whether_loaded_as_an_image_or_mmapped() {
    // The capture numbers the files it sees mmapped from 1 and knows
    // nothing of the images: its 1 here is another file (LD) than the
    // model's 1 (the program, PROG).
    let (mut r, _) = reloc();
    let mut evs = vec![Event::Switch(ThreadId { pid: 7, tid: 7 })];
    evs.extend(file_map(0x40_0900_0000, LD, 1));
    evs.extend(file_map(0x40_0a00_0000, PROG, 2));
    // mremap's result names only the capture's id.
    let [_, grown] = file_map(0x40_0a00_2000, PROG, 2);
    evs.push(grown);
    let out = run(&mut r, evs).unwrap();
    assert_eq!(file_ids(&out), [1, 2, 1, 1]);
    // LD exec'd later is the file the process mmapped first.
    let exe = ElfImage {
        path: "ld".into(),
        ..image()
    };
    let (layout, model, captured) = laid_out(&exe, None);
    let mut out = Vec::new();
    let exec = Event::Exec(Some(Box::new(pagelab_core::ExecImage {
        path: b"/ld".to_vec(),
        strings: 100,
        capture_id: 1,
    })));
    r.exec(
        exec,
        layout,
        &model,
        None,
        &captured,
        &files(None),
        &mut out,
    )
    .unwrap();
    let ld = ImageFiles {
        program: LD,
        interp: None,
    };
    let exec = Event::Exec(None);
    let (layout, _, _) = laid_out(&exe, None);
    r.exec(exec, layout, &model, None, &captured, &ld, &mut out)
        .unwrap();
    assert_eq!(file_ids(&out), [1, 2]);
    // A capture's id no request named cannot be given one.
    let [_, unnamed] = file_map(0x40_0b00_0000, PROG, 9);
    let e = run(&mut r, vec![unnamed]).unwrap_err();
    assert!(e.what.contains("file 9 is mapped before"), "{e}");
}

/// QEMU 7.2's `-d page` log of `/bin/true` from the binary load on: the load, then the
/// IDT's page, then the GDT's (which QEMU's log merges into the IDT's row), then the
/// guest's first mmap of its own.
const QEMU_PAGE_LOG: &str = "\
page layout changed following binary load
start            end              size             prot
0000004000000000-0000004000002000 0000000000002000 r--
0000004000002000-0000004000006000 0000000000004000 r-x
000000400200b000-000000400280b000 0000000000800000 rw-
000000400280c000-0000004002832000 0000000000026000 r-x
000000400283c000-0000004002840000 0000000000004000 rw-
ffffffffff600000-ffffffffff601000 0000000000001000 --x
start_brk   0x0000000000000000
start_stack 0x000000400280a840
brk         0x0000004000002000
entry       0x0000004002825b70
auxv_start  0x000000400280a978
page layout changed following mmap
start            end              size             prot
0000004000000000-0000004000002000 0000000000002000 r--
0000004000002000-0000004000006000 0000000000004000 r-x
000000400200b000-000000400280b000 0000000000800000 rw-
000000400280c000-0000004002832000 0000000000026000 r-x
000000400283c000-0000004002840000 0000000000004000 rw-
0000004002840000-0000004002841000 0000000000001000 rw-
ffffffffff600000-ffffffffff601000 0000000000001000 --x
page layout changed following mmap
start            end              size             prot
0000004000000000-0000004000002000 0000000000002000 r--
0000004000002000-0000004000006000 0000000000004000 r-x
000000400200b000-000000400280b000 0000000000800000 rw-
000000400280c000-0000004002832000 0000000000026000 r-x
000000400283c000-0000004002840000 0000000000004000 rw-
0000004002840000-0000004002842000 0000000000002000 rw-
ffffffffff600000-ffffffffff601000 0000000000001000 --x
page layout changed following mmap
start            end              size             prot
0000004000000000-0000004000002000 0000000000002000 r--
0000004000002000-0000004000006000 0000000000004000 r-x
000000400200b000-000000400280b000 0000000000800000 rw-
000000400280c000-0000004002832000 0000000000026000 r-x
000000400283c000-0000004002840000 0000000000004000 rw-
0000004002840000-0000004002844000 0000000000004000 rw-
ffffffffff600000-ffffffffff601000 0000000000001000 --x
";

#[test]
fn qemus_own_pages_for_the_guest_cpu_are_read_from_its_page_log() {
    let exe = ElfImage {
        entry: 0x1b70,
        ..image()
    };
    let interp = ElfImage {
        entry: 0x19b70,
        ..image()
    };
    let c = CapturedImage::from_qemu_log(QEMU_PAGE_LOG, &exe, Some(&interp)).unwrap();
    // The IDT's page and the GDT's, not the guest's own mmap of two pages after them.
    assert_eq!(
        c.qemu_own,
        [
            (0x40_0284_0000, 0x40_0284_1000),
            (0x40_0284_1000, 0x40_0284_2000)
        ]
    );
    assert_eq!(c.stack, (0x40_0200_b000, 0x40_0280_b000));
    // A log with no block after the load (or another QEMU's first block adding more
    // than a page) names none.
    let load_only = QEMU_PAGE_LOG
        .split("page layout changed following mmap")
        .next()
        .unwrap();
    let c = CapturedImage::from_qemu_log(load_only, &exe, Some(&interp)).unwrap();
    assert!(c.qemu_own.is_empty());
    let wide = QEMU_PAGE_LOG.replacen(
        "0000004002840000-0000004002841000 0000000000001000 rw-",
        "0000004002840000-0000004002843000 0000000000003000 rw-",
        1,
    );
    let c = CapturedImage::from_qemu_log(&wide, &exe, Some(&interp)).unwrap();
    assert!(c.qemu_own.is_empty(), "{:?}", c.qemu_own);
    // A row that ends before it starts, or at 0, names no page and panics nowhere.
    for bad in [
        "0000004002841000-0000004002840000 0000000000001000 rw-",
        "0000000000000000-0000000000000000 0000000000000000 rw-",
    ] {
        let odd = QEMU_PAGE_LOG.replacen(
            "0000004002840000-0000004002841000 0000000000001000 rw-",
            bad,
            1,
        );
        let c = CapturedImage::from_qemu_log(&odd, &exe, Some(&interp)).unwrap();
        assert!(c.qemu_own.is_empty(), "{bad}: {:?}", c.qemu_own);
    }
    // A block after the load whose row does not parse ends the search; in the load's own
    // block such a row is an error that quotes it.
    let garbled = QEMU_PAGE_LOG.replacen("0000004002840000-", "00000040028z0000-", 1);
    let c = CapturedImage::from_qemu_log(&garbled, &exe, Some(&interp)).unwrap();
    assert!(c.qemu_own.is_empty(), "{:?}", c.qemu_own);
    let garbled = QEMU_PAGE_LOG.replacen("000000400280c000-", "00000040028zc000-", 1);
    let e = CapturedImage::from_qemu_log(&garbled, &exe, Some(&interp)).unwrap_err();
    assert!(
        e.contains("bad row `00000040028zc000-0000004002832000"),
        "{e}"
    );
}

#[test]
fn references_to_qemus_own_pages_are_dropped_and_their_neighbours_refused() {
    let (layout, model, mut captured) = laid_out(&image(), None);
    // QEMU's GDT: a descriptor load of its (the user data segment at 0x28) is QEMU's.
    captured.qemu_own = vec![(0x40_0284_1000, 0x40_0284_2000)];
    let mut r = Relocator::new(layout, &model, None, &captured, &files(None)).unwrap();
    let out = run(
        &mut r,
        vec![
            Event::Switch(ThreadId { pid: 7, tid: 7 }),
            at(0x40_0284_1028),
        ],
    )
    .unwrap();
    assert!(!out.iter().any(|e| matches!(e, Event::Ref(_))), "{out:?}");
    let e = run(&mut r, vec![at(0x40_0284_2000)]).unwrap_err();
    assert!(e.what.contains("0x4002842000 lies in no mapping"), "{e}");
}
