//! A capture relocated to Linux's layout as it runs: QEMU is asked for its
//! page log (`-d page`), which says where it loaded the program, and the
//! trace's events pass through a [`Relocator`]. A program the capture
//! execs is loaded by a new QEMU whose page log the plugin names after the
//! exec's number (`exec-N.log`, the number the trace's exec record
//! carries), and is laid out afresh, as `execve` gives it a new address
//! space.

use crate::elf::ElfImage;
use crate::layout::{exec_strings, ExecRequest, LayoutParams, LinuxLayout};
use crate::relocate::{CapturedImage, ImageFiles, Relocator};
use crate::{Backend, Capture, CaptureCommand, CaptureError};
use pagelab_core::{Event, ExecImage, FileIdentity, SourceInfo};
use pagelab_trace::{TraceError, TraceSource};
use std::ffi::OsString;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A program laid out as `execve` places it: the model's address space,
/// where each mapping went, and the files.
#[derive(Debug)]
struct Image {
    layout: LinuxLayout,
    model: crate::layout::ExecLayout,
    program: ElfImage,
    interp: Option<ElfImage>,
    files: ImageFiles,
}

impl Image {
    /// `file` (an ELF) and its interpreter read and laid out with
    /// `strings` bytes of strings on the stack.
    fn load(params: LayoutParams, file: &Path, strings: u64) -> Result<Image, String> {
        let program = ElfImage::read(file).map_err(|e| e.to_string())?;
        let interp = program
            .interp
            .as_deref()
            .map(ElfImage::read)
            .transpose()
            .map_err(|e| e.to_string())?;
        let req = ExecRequest {
            program: &program,
            interp: interp.as_ref(),
            strings,
        };
        let (layout, model) = LinuxLayout::exec(params, &req)
            .map_err(|e| format!("Linux's layout of {}: {e}", file.display()))?;
        let files = ImageFiles {
            program: identity(file)?,
            interp: program.interp.as_deref().map(identity).transpose()?,
        };
        Ok(Image {
            layout,
            model,
            program,
            interp,
            files,
        })
    }

    /// Where QEMU put this image, from its page log `log`.
    fn captured(&self, log: &Path) -> Result<CapturedImage, String> {
        let text = std::fs::read_to_string(log)
            .map_err(|e| format!("QEMU's page log {}: {e}", log.display()))?;
        CapturedImage::from_qemu_log(&text, &self.program, self.interp.as_ref())
    }
}

/// `file`'s identity as the kernel knows it (links followed: `/bin/sh`
/// and `/usr/bin/dash` are one file).
fn identity(file: &Path) -> Result<FileIdentity, String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(file).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(FileIdentity {
        dev: m.dev(),
        ino: m.ino(),
    })
}

/// What relocating a capture needs besides its events: the model's layout
/// of the program, the layout's parameters for the programs it execs, and
/// where QEMU's page logs are.
#[derive(Debug)]
pub struct RelocationSetup {
    /// The first program, until the relocator is made.
    first: Option<Image>,
    params: LayoutParams,
    /// QEMU's log directory (removed with the setup) and the program's pid.
    dir: PathBuf,
    pid: u32,
    /// The placement library's answers, when the capture asks (see
    /// [`crate::placement`]), and the library's file; else why not.
    answers: Option<crate::placement::Answers>,
    place_lib: Option<FileIdentity>,
    placement_off: Option<String>,
}

impl Drop for RelocationSetup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Capture {
    /// Starts `cmd` (QEMU only) with QEMU's page log on, and lays its
    /// program out as Linux would (`params`), for [`Relocated`].
    pub fn spawn_relocatable(
        cmd: &CaptureCommand,
        params: LayoutParams,
    ) -> Result<(Capture, RelocationSetup), CaptureError> {
        if cmd.backend != Backend::Qemu {
            return Err(CaptureError::Other(format!(
                "Linux's layout needs the qemu backend (the {} backend records no mappings)",
                cmd.backend
            )));
        }
        let program = crate::tools::which(&cmd.program)
            .ok_or_else(|| CaptureError::NoProgram(cmd.program.to_string_lossy().into_owned()))?;
        let (argv0, file, args) = crate::script::resolve_script(&program, &cmd.args)?;
        // The strings execve copies: the file name, the arguments, the environment.
        let argv: Vec<OsString> = std::iter::once(argv0).chain(args).collect();
        let env: Vec<Vec<u8>> = std::env::vars_os()
            .map(|(k, v)| {
                let mut e = k.as_bytes().to_vec();
                e.push(b'=');
                e.extend_from_slice(v.as_bytes());
                e
            })
            .collect();
        let strings = exec_strings(
            file.as_os_str().as_bytes(),
            argv.iter().map(|a| a.as_bytes()),
            env.iter().map(|e| e.as_slice()),
        );
        let first = Image::load(params, &file, strings).map_err(CaptureError::Other)?;
        let dir = std::env::temp_dir().join(format!(
            "pagelab-layout-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&dir)
            .map_err(|e| CaptureError::io(format!("creating {}", dir.display()), e))?;
        let log = dir.join("qemu-%d.log");
        let extra: Vec<OsString> = vec!["-d".into(), "page".into(), "-D".into(), log.into()];
        // The plugin's arguments are split at commas: a directory with one
        // cannot be passed (the temporary directory's name decides).
        let dir_text = dir
            .to_str()
            .filter(|d| !d.contains(',') && !d.contains('%'));
        let Some(dir_text) = dir_text else {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(CaptureError::Other(format!(
                "the page-log directory {} has a comma, a % or is no UTF-8: set TMPDIR to another",
                dir.display()
            )));
        };
        let mut extra = extra;
        let mut plugin = format!(",pagelog={dir_text}");
        let place = placement_library().inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&dir);
        })?;
        let mut answers = None;
        let (mut place_lib, mut placement_off) = (None, None);
        let mut pipe = None;
        match place {
            Ok(lib) => {
                let q = crate::placement::Questions::default();
                let (r, w) = crate::spawn::pipe().inspect_err(|_| {
                    let _ = std::fs::remove_dir_all(&dir);
                })?;
                answers = Some(crate::placement::Answers::new(q.clone(), File::from(w)));
                place_lib = Some(identity(&lib).map_err(|e| {
                    let _ = std::fs::remove_dir_all(&dir);
                    CaptureError::Other(e)
                })?);
                let mut e = OsString::from("LD_PRELOAD=");
                e.push(&lib);
                extra.push("-E".into());
                extra.push(e);
                plugin.push_str(",preload=");
                plugin.push_str(&lib.to_string_lossy());
                pipe = Some((r, q));
            }
            Err(why) => placement_off = Some(why),
        }
        let spawned = Capture::spawn_with(
            cmd,
            &plugin,
            &extra,
            pipe.as_ref().map(|(r, q)| (r, q.clone())),
        );
        let capture = match spawned {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let pid = capture.pid();
        Ok((
            capture,
            RelocationSetup {
                first: Some(first),
                params,
                dir,
                pid,
                answers,
                place_lib,
                placement_off,
            },
        ))
    }
}

/// The placement library to preload, or why the capture is not placed:
/// `PAGELAB_PLACEMENT=off`, a program environment that has its own
/// `LD_PRELOAD` (the guest's would replace it), or a library path the
/// plugin's comma-separated arguments cannot carry.
fn placement_library() -> Result<Result<PathBuf, String>, CaptureError> {
    if std::env::var_os("PAGELAB_PLACEMENT").is_some_and(|v| v == "off") {
        return Ok(Err("off (PAGELAB_PLACEMENT=off)".into()));
    }
    if std::env::var_os("LD_PRELOAD").is_some_and(|v| !v.is_empty()) {
        return Ok(Err("off (the environment sets LD_PRELOAD)".into()));
    }
    let lib = crate::tools::place_lib_path()?;
    let text = lib.to_string_lossy();
    if text.contains(',') || text.contains('%') || text.contains(' ') || lib.to_str().is_none() {
        return Ok(Err(format!(
            "off (the placement library's path {text} has a comma, a % or a blank)"
        )));
    }
    Ok(Ok(lib))
}

/// A source relocated to Linux's layout: `inner`'s events (a capture
/// started by [`Capture::spawn_relocatable`]) through a [`Relocator`].
pub struct Relocated<S> {
    inner: S,
    setup: RelocationSetup,
    reloc: Option<Relocator>,
    raw: Vec<Event>,
    /// Raw events relocated so far: where placement questions fall.
    seen: u64,
}

impl<S: TraceSource> Relocated<S> {
    /// `inner`, relocated as `setup` says.
    pub fn new(inner: S, setup: RelocationSetup) -> Relocated<S> {
        Relocated {
            inner,
            setup,
            reloc: None,
            raw: Vec::new(),
            seen: 0,
        }
    }

    /// Answers the placement questions asked after at most `self.seen`
    /// events, with the model's address for each (0 without a relocator).
    fn answer(&mut self) {
        let Some(a) = self.setup.answers.as_mut() else {
            return;
        };
        while let Some(q) = a.next_before(self.seen) {
            let at = self.reloc.as_ref().and_then(|r| r.place(q.pid, &q.req));
            a.answer(q.pid, at);
        }
    }

    /// The source relocated.
    pub fn inner_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    fn error(&self, what: String) -> TraceError {
        TraceError::Other(format!("{}: {what}", self.inner.info().name))
    }

    /// The relocator, made once QEMU has loaded the program (its page log
    /// is written before the program's first instruction runs).
    fn relocator(&mut self) -> Result<&mut Relocator, TraceError> {
        if self.reloc.is_none() {
            let log = self.setup.dir.join(format!("qemu-{}.log", self.setup.pid));
            let first = self
                .setup
                .first
                .take()
                .expect("set until the relocator is made");
            let captured = first.captured(&log).map_err(|e| self.error(e))?;
            let mut r = Relocator::new(
                first.layout,
                &first.model,
                first.interp.as_ref(),
                &captured,
                &first.files,
            )
            .map_err(|e| self.error(e.to_string()))?;
            if let Some(lib) = self.setup.place_lib {
                r.hide_file(lib);
            }
            self.reloc = Some(r);
        }
        Ok(self.reloc.as_mut().expect("made above"))
    }

    /// The new image an exec record names, laid out by Linux's rules and
    /// where its QEMU put it.
    fn exec_image(&self, img: &ExecImage) -> Result<(Image, CapturedImage), String> {
        let file = Path::new(std::ffi::OsStr::from_bytes(&img.path));
        let image = Image::load(self.setup.params, file, img.strings)?;
        let log = self.setup.dir.join(format!("exec-{}.log", img.capture_id));
        let captured = image.captured(&log)?;
        Ok((image, captured))
    }
}

impl<S: TraceSource> TraceSource for Relocated<S> {
    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        let mut raw = std::mem::take(&mut self.raw);
        raw.clear();
        let more = self.inner.fill(&mut raw, max)?;
        if more {
            let name = self.inner.info().name;
            let fail = |e: String| {
                TraceError::Other(format!(
                    "{name}: relocating to Linux's layout: {e} (--layout captured models the captured addresses)"
                ))
            };
            self.relocator()?;
            for ev in raw.drain(..) {
                self.answer();
                self.seen += 1;
                if let (Event::Map(m), Some(a)) = (&ev, self.setup.answers.as_mut()) {
                    let pid = self.reloc.as_ref().map_or(0, |r| r.current_pid());
                    a.mapped(pid, m.start.0);
                }
                let image = match &ev {
                    Event::Exec(Some(img)) => Some(self.exec_image(img).map_err(|e| {
                        fail(format!(
                            "the program exec'd as {}: {e}",
                            String::from_utf8_lossy(&img.path)
                        ))
                    })?),
                    _ => None,
                };
                let done = match image {
                    Some((image, captured)) => self.reloc.as_mut().expect("made above").exec(
                        ev,
                        image.layout,
                        &image.model,
                        image.interp.as_ref(),
                        &captured,
                        &image.files,
                        out,
                    ),
                    None => self.reloc.as_mut().expect("made above").apply(ev, out),
                };
                done.map_err(|e| fail(e.to_string()))?;
            }
            // The usual case: the question ends the batch, its program waits.
            self.answer();
        } else if let Some(a) = self.setup.answers.take() {
            eprintln!(
                "pagelab: placement: the program asked where {} mmaps go; {} got Linux's address \
                 as a hint and {} were mapped there",
                a.asked, a.placed, a.kept
            );
        }
        self.raw = raw;
        Ok(more)
    }

    fn info(&self) -> SourceInfo {
        let mut info = self.inner.info();
        info.params.insert("layout".into(), "linux".into());
        // Read before the events (the counts are said at the end, on standard error).
        let placement = match (&self.setup.answers, &self.setup.placement_off) {
            (Some(_), _) => "linux (the program's mmaps without MAP_FIXED asked the model where \
                             to go; docs/layout.md)"
                .to_string(),
            (None, Some(why)) => why.clone(),
            (None, None) => "off".into(),
        };
        info.params.insert("placement".into(), placement);
        info
    }
}
